//! Shape inference on every fixture model: no contradiction with what the
//! exporters wrote, nothing blocked on standard ops, and the facts the
//! fixtures' documentation states.

use std::path::{Path, PathBuf};

use infopt_ir::infer::{InferReport, infer_shapes};
use infopt_ir::{Dim, Model};

fn fixture(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../fixtures/models")
        .join(rel)
}

fn load(rel: &str) -> Model {
    Model::load(&fixture(rel)).unwrap_or_else(|e| panic!("{rel}: {e}"))
}

fn shape_str(m: &Model, name: &str) -> String {
    let g = &m.graph;
    let v = g
        .find_value(name)
        .unwrap_or_else(|| panic!("no value {name}"));
    match g.value_type(v).and_then(|t| t.shape) {
        Some(s) => format!(
            "[{}]",
            s.iter()
                .map(|d| d.to_string())
                .collect::<Vec<_>>()
                .join(",")
        ),
        None => "?".into(),
    }
}

fn infer(rel: &str) -> (Model, InferReport) {
    let mut m = load(rel);
    let r = infer_shapes(&mut m);
    (m, r)
}

#[test]
fn every_fixture_infers_without_conflicts() {
    let all = [
        "cnn_bn_relu.onnx",
        "custom_domain.onnx",
        "dynamic_reshape.onnx",
        "if_subgraph.onnx",
        "loop_subgraph.onnx",
        "ms_domain.onnx",
        "opset11.onnx",
        "paddle_dynamic.onnx",
        "external_data.onnx",
        "transformer_block.onnx",
        "kitchen_sink.onnx",
        "exported/bert_tiny.onnx",
        "exported/resnet_block.onnx",
        "exported/resnet_block_dynamo.onnx",
        "exported/transformer_encoder.onnx",
    ];
    for rel in all {
        let (m, r) = infer(rel);
        assert!(r.conflicts.is_empty(), "{rel}: {:?}", r.conflicts);
        let custom: Vec<&String> = r
            .blocked
            .keys()
            .filter(|k| {
                !k.contains("::")
                    && !matches!(
                        k.as_str(),
                        "SequenceConstruct" | "Optional" | "OptionalHasElement"
                    )
            })
            .collect();
        assert!(
            custom.is_empty(),
            "{rel}: standard ops without a rule: {:?}",
            r.blocked
        );
        // Every float/int output of the main graph has a known rank.
        if !matches!(rel, "custom_domain.onnx" | "kitchen_sink.onnx") {
            for io in &m.graph.outputs {
                let ty = m.graph.value_type(io.value);
                assert!(
                    ty.as_ref().and_then(|t| t.shape.as_ref()).is_some(),
                    "{rel}: output {} has no shape",
                    m.graph.value(io.value).name
                );
            }
        }
        eprintln!("{rel}: blocked {:?}, updated {}", r.blocked, r.updated);
    }
}

#[test]
fn transformer_block_shapes() {
    let (m, _) = infer("transformer_block.onnx");
    assert_eq!(shape_str(&m, "query_4d"), "[batch,seq,2,16]");
    assert_eq!(shape_str(&m, "k_t"), "[batch,2,16,seq]");
    assert_eq!(shape_str(&m, "scores"), "[batch,2,seq,seq]");
    assert_eq!(shape_str(&m, "ctx_merged"), "[batch,seq,32]");
    assert_eq!(shape_str(&m, "out"), "[batch,seq,32]");
}

#[test]
fn dynamic_reshape_shapes() {
    let (m, _) = infer("dynamic_reshape.onnx");
    assert_eq!(shape_str(&m, "x_flat"), "[batch,256]");
    assert_eq!(shape_str(&m, "y"), "[batch,16]");
}

#[test]
fn exported_models_shapes() {
    let (m, _) = infer("exported/transformer_encoder.onnx");
    assert_eq!(shape_str(&m, "view_1"), "[seq,2*batch,16]");
    assert_eq!(shape_str(&m, "val_75"), "[batch,2,seq,seq]");
    assert_eq!(shape_str(&m, "out"), "[batch,seq,32]");
    let (m, _) = infer("exported/bert_tiny.onnx");
    assert_eq!(shape_str(&m, "last_hidden_state"), "[batch,seq,32]");
    assert_eq!(shape_str(&m, "pooler_output"), "[batch,32]");
    let (m, _) = infer("exported/resnet_block.onnx");
    let out = &m.graph.outputs[0];
    let s = m.graph.value_type(out.value).unwrap().shape.unwrap();
    assert_eq!(s[0], Dim::Sym("batch".into()));
}

/// paddle2onnx declares a dynamic batch as `dim_value: -1`: an unknown dim,
/// never a size of -1.
#[test]
fn negative_declared_dims_are_dynamic() {
    let (m, r) = infer("paddle_dynamic.onnx");
    assert!(r.conflicts.is_empty(), "{:?}", r.conflicts);
    assert_eq!(shape_str(&m, "x"), "[?,3,48,192]");
    assert_eq!(shape_str(&m, "conv_out"), "[?,4,24,96]");
    assert_eq!(shape_str(&m, "pool_out"), "[?,4,1,1]");
    assert_eq!(shape_str(&m, "flat"), "[?,4]");
    assert_eq!(shape_str(&m, "softmax_0.tmp_0"), "[?,2]");
}

#[test]
fn subgraph_fixtures() {
    let (m, r) = infer("if_subgraph.onnx");
    assert!(r.blocked.is_empty(), "{:?}", r.blocked);
    for io in &m.graph.outputs {
        eprintln!("if out {}", shape_str(&m, &m.graph.value(io.value).name));
    }
    let (m, r) = infer("loop_subgraph.onnx");
    assert!(r.blocked.is_empty(), "{:?}", r.blocked);
    for io in &m.graph.outputs {
        eprintln!("loop out {}", shape_str(&m, &m.graph.value(io.value).name));
    }
}

/// Paddle writes `dim_value: -1` and `dim_param: "?"` for dynamic dims: they
/// read as unknown, not as a fixed -1 or one symbol shared by every `?`.
#[test]
fn negative_dim_value_reads_as_unknown() {
    use infopt_ir::proto::{TypeProto, tensor_shape, type_proto};
    let dim = |v: i64| tensor_shape::Dimension {
        value: Some(tensor_shape::DimValue::DimValue(v)),
        ..Default::default()
    };
    let param = |p: &str| tensor_shape::Dimension {
        value: Some(tensor_shape::DimValue::DimParam(p.to_string())),
        ..Default::default()
    };
    let tp = TypeProto {
        value: Some(type_proto::Value::TensorType(type_proto::Tensor {
            elem_type: Some(1),
            shape: Some(infopt_ir::proto::TensorShapeProto {
                dim: vec![dim(-1), dim(3), param("?"), param("?"), param("w")],
            }),
        })),
        ..Default::default()
    };
    let ty = infopt_ir::TensorType::from_proto(&tp).expect("a tensor type");
    assert_eq!(
        ty.shape,
        Some(vec![
            Dim::Unknown,
            Dim::Known(3),
            Dim::Unknown,
            Dim::Unknown,
            Dim::Sym("w".into())
        ])
    );
}
