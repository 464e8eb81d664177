//! Transformer blocks as standard ops: `fuse-layer-norm`, `fuse-gelu`,
//! `fuse-rms-norm` and `upgrade-opset`. Each test asserts the exact op
//! histogram after the rewrite and runs original and result in tract.

mod common;

use common::{assert_equivalent, bytes, default_shapes, histogram, load, ops, run_passes};
use infopt_ir::{Attribute, Model};
use infopt_passes::{DriverOptions, Flow, PipelineConfig, run_pipeline};
use infopt_runtime::Backend;

fn reasons(run: &infopt_passes::PipelineRun) -> Vec<String> {
    run.declined
        .iter()
        .map(|d| format!("{} @ {}: {}", d.pass, d.at, d.reason))
        .collect()
}

/// The attribute `name` of the only node of `op`.
fn only<'m>(m: &'m Model, op: &str) -> Vec<&'m infopt_ir::Node> {
    m.graph
        .nodes()
        .filter(|(_, n)| n.is(op))
        .map(|(_, n)| n)
        .collect()
}

/// Runs a pipeline written as YAML (for passes with options).
fn run_yaml(model: &mut Model, yaml: &str) -> Result<infopt_passes::PipelineRun, String> {
    let config = PipelineConfig::from_yaml(yaml, "test").map_err(|e| e.to_string())?;
    let options = DriverOptions {
        validate: true,
        ..Default::default()
    };
    run_pipeline(model, &config, &options, &mut |_, _| Ok(Flow::Continue))
        .map_err(|e| e.to_string())
}

fn upgrade_then(to: i64, passes: &[&str]) -> String {
    let mut y = format!(
        "version: 1\npasses:\n  - constants-to-initializers\n  - upgrade-opset: {{to: {to}}}\n"
    );
    for p in passes {
        y.push_str(&format!("  - {p}\n"));
    }
    y
}

// ----- fuse-layer-norm -----

#[test]
fn layer_norm_variants_fuse_exactly() {
    let original = load("ln_variants.onnx");
    let mut m = original.clone();
    let r = run_passes(&mut m, &["constants-to-initializers", "fuse-layer-norm"]);
    assert_eq!(
        ops(&m),
        histogram(&[
            ("MatMul", 2),
            ("LayerNormalization", 5),
            ("Reshape", 2),
            // e: a mean over axis 1 stays written out.
            ("ReduceMean", 2),
            ("Sub", 1),
            ("Pow", 1),
            ("Add", 1),
            ("Sqrt", 1),
            ("Div", 1),
            ("Identity", 1),
        ])
    );
    let lns = only(&m, "LayerNormalization");
    let axes: Vec<i64> = lns
        .iter()
        .map(|n| n.attr_int("axis").unwrap().unwrap())
        .collect();
    assert_eq!(axes, vec![-1, -1, -2, -1, -1]);
    let eps: Vec<f32> = lns
        .iter()
        .map(|n| n.attr_float("epsilon").unwrap().unwrap())
        .collect();
    assert_eq!(eps, vec![1e-5, 1e-6, 1e-5, 1e-3, 1e-3]);
    // a and b have gamma and beta, c gamma only (no bias input), d beta only
    // (a ones scale), f (Keras) both.
    let arity: Vec<usize> = lns.iter().map(|n| n.inputs.len()).collect();
    assert_eq!(arity, vec![3, 3, 2, 3, 3]);
    let d_scale = lns[3].inputs[1].unwrap();
    let t = m.graph.constant(d_scale).expect("scale is an initializer");
    assert_eq!(t.dims(), &[16]);
    assert!(t.to_f64_vec().unwrap().iter().all(|&v| v == 1.0));
    let c_scale = m.graph.constant(lns[2].inputs[1].unwrap()).unwrap();
    assert_eq!(c_scale.dims(), &[4, 4]);
    assert!(
        reasons(&r).iter().any(|s| s.contains("trailing axes")),
        "{:?}",
        reasons(&r)
    );
    assert_equivalent(&original, &m, &default_shapes(), 1e-4, 1e-4);
}

#[test]
fn layer_norm_left_alone_below_opset_17() {
    let mut m = load("norm_block.onnx");
    run_passes(&mut m, &["constants-to-initializers"]);
    let before = bytes(&m);
    let r = run_passes(&mut m, &["fuse-layer-norm"]);
    assert_eq!(bytes(&m), before);
    assert!(
        reasons(&r)
            .iter()
            .any(|s| s.contains("upgrade-opset step to 17")),
        "{:?}",
        reasons(&r)
    );
}

#[test]
fn keras_layer_norm_with_a_shared_scale_stays() {
    // mean * a also feeds a graph output: the scaled-shift form must stay.
    let mut m = load("ln_variants.onnx");
    run_passes(&mut m, &["constants-to-initializers"]);
    let a = m.graph.find_value("f.a").unwrap();
    let mut io = m.graph.outputs[0].clone();
    io.value = a;
    io.info.name = Some("f.a".into());
    m.graph.outputs.push(io);
    run_passes(&mut m, &["fuse-layer-norm"]);
    assert_eq!(ops(&m)["LayerNormalization"], 4);
}

#[test]
fn layer_norm_with_an_outside_reader_stays() {
    // The centered value of LayerNorm a also feeds the graph output.
    let mut m = load("ln_variants.onnx");
    run_passes(&mut m, &["constants-to-initializers"]);
    let d = m.graph.find_value("a.d").unwrap();
    let mut io = m.graph.outputs[0].clone();
    io.value = d;
    io.info.name = Some("a.d".into());
    m.graph.outputs.push(io);
    let r = run_passes(&mut m, &["fuse-layer-norm"]);
    assert_eq!(ops(&m)["LayerNormalization"], 4);
    assert!(
        reasons(&r).iter().any(|s| s.contains("readers outside")),
        "{:?}",
        reasons(&r)
    );
}

// ----- fuse-gelu -----

#[test]
fn gelu_variants_fuse_exactly() {
    let original = load("gelu_variants.onnx");
    let mut m = original.clone();
    run_passes(&mut m, &["constants-to-initializers", "fuse-gelu"]);
    assert_eq!(
        ops(&m),
        histogram(&[
            ("MatMul", 6),
            ("Gelu", 5),
            // f: x / 1.5 is not x / sqrt(2): stays.
            ("Div", 1),
            ("Erf", 1),
            ("Add", 1),
            ("Mul", 2),
        ])
    );
    let approx: Vec<Option<String>> = only(&m, "Gelu")
        .iter()
        .map(|n| n.attr_string("approximate").unwrap())
        .collect();
    assert_eq!(
        approx,
        vec![None, None, None, Some("tanh".into()), Some("tanh".into())]
    );
    assert_equivalent(&original, &m, &default_shapes(), 1e-4, 1e-4);
}

#[test]
fn gelu_constants_are_checked() {
    // Changing 0.044715 to 0.05 makes the tanh form another function.
    let mut m = load("gelu_variants.onnx");
    run_passes(&mut m, &["constants-to-initializers"]);
    let k0 = m.graph.find_value("/d.k0").unwrap();
    m.graph.value_mut(k0).initializer = Some(infopt_ir::Tensor::from_f32(vec![], &[0.05]));
    run_passes(&mut m, &["fuse-gelu"]);
    assert_eq!(ops(&m)["Gelu"], 4);
    assert_eq!(ops(&m)["Tanh"], 1);
}

#[test]
fn a_division_by_a_value_is_not_a_factor() {
    // x / (1 + erf(x/sqrt2)) * 0.5 is not GELU.
    let mut m = load("gelu_variants.onnx");
    run_passes(&mut m, &["constants-to-initializers"]);
    let mul = m.graph.find_node("/a/Mul").unwrap();
    m.graph.node_mut(mul).op_type = "Div".into();
    run_passes(&mut m, &["fuse-gelu"]);
    assert_eq!(ops(&m)["Gelu"], 4);
    assert_eq!(ops(&m)["Erf"], 2);
}

#[test]
fn gelu_left_alone_below_opset_20() {
    let mut m = load("transformer_block.onnx");
    run_passes(&mut m, &["constants-to-initializers"]);
    let before = bytes(&m);
    let r = run_passes(&mut m, &["fuse-gelu"]);
    assert_eq!(bytes(&m), before);
    assert!(
        reasons(&r)
            .iter()
            .any(|s| s.contains("upgrade-opset step to 20")),
        "{:?}",
        reasons(&r)
    );
}

// ----- fuse-rms-norm -----

#[test]
fn rms_norm_variants_fuse_exactly() {
    let original = load("rms_variants.onnx");
    let mut m = original.clone();
    let r = run_passes(&mut m, &["constants-to-initializers", "fuse-rms-norm"]);
    assert_eq!(
        ops(&m),
        histogram(&[
            ("MatMul", 2),
            // The float16 -> float32 Cast between the blocks stays; Llama's
            // two Casts around the statistics are absorbed.
            ("Cast", 1),
            ("RMSNormalization", 3),
            ("Identity", 1),
            // e: a mean over axis 1 stays written out.
            ("Mul", 1),
            ("ReduceMean", 1),
            ("Add", 1),
            ("Sqrt", 1),
            ("Div", 1),
        ]),
        "{:?}",
        reasons(&r)
    );
    let rms = only(&m, "RMSNormalization");
    // Llama's: reads the float16 MatMul output, float16 gain.
    let x = rms[0].inputs[0].unwrap();
    assert_eq!(m.graph.value(x).name, "h0");
    let gain = m.graph.constant(rms[0].inputs[1].unwrap()).unwrap();
    assert_eq!(gain.dtype(), infopt_ir::DataType::Float16);
    let eps: Vec<f32> = rms
        .iter()
        .map(|n| n.attr_float("epsilon").unwrap().unwrap())
        .collect();
    assert_eq!(eps, vec![1e-6, 1e-5, 1e-6]);
    assert_equivalent(&original, &m, &default_shapes(), 2e-3, 2e-3);
}

#[test]
fn rms_norm_left_alone_below_opset_23() {
    let mut m = load("norm_block.onnx");
    let yaml = upgrade_then(22, &["fuse-rms-norm"]);
    let r = run_yaml(&mut m, &yaml).unwrap();
    assert_eq!(ops(&m).get("RMSNormalization"), None);
    assert!(
        reasons(&r)
            .iter()
            .any(|s| s.contains("upgrade-opset step to 23")),
        "{:?}",
        reasons(&r)
    );
}

// ----- upgrade-opset -----

#[test]
fn norm_block_upgraded_then_fused() {
    let original = load("norm_block.onnx");
    for (to, expect) in [
        (
            17,
            vec![
                ("MatMul", 3),
                ("LayerNormalization", 1),
                ("Pow", 2),
                ("ReduceMean", 1),
                ("Add", 3),
                ("Sqrt", 1),
                ("Reciprocal", 1),
                ("Mul", 6),
                ("Tanh", 1),
            ],
        ),
        (
            20,
            vec![
                ("MatMul", 3),
                ("LayerNormalization", 1),
                ("Pow", 1),
                ("ReduceMean", 1),
                ("Add", 1),
                ("Sqrt", 1),
                ("Reciprocal", 1),
                ("Mul", 2),
                ("Gelu", 1),
            ],
        ),
        (
            23,
            vec![
                ("MatMul", 3),
                ("LayerNormalization", 1),
                ("RMSNormalization", 1),
                ("Gelu", 1),
            ],
        ),
    ] {
        let mut m = original.clone();
        let yaml = upgrade_then(to, &["fuse-layer-norm", "fuse-rms-norm", "fuse-gelu"]);
        let r = run_yaml(&mut m, &yaml).unwrap();
        assert_eq!(m.opset(""), Some(to));
        assert_eq!(ops(&m), histogram(&expect), "to {to}: {:?}", reasons(&r));
        assert_equivalent(&original, &m, &default_shapes(), 1e-3, 1e-4);
    }
}

#[test]
fn opset11_ops_are_rewritten_for_17_and_23() {
    let original = load("opset11_changed.onnx");
    for to in [13, 17, 18, 23, 24] {
        let mut m = original.clone();
        run_yaml(&mut m, &upgrade_then(to, &[])).unwrap();
        assert_eq!(m.opset(""), Some(to));
        assert!(m.ir_version().unwrap() >= if to >= 23 { 11 } else { 7 });
        let h = ops(&m);
        // Softmax over dims 1.. of a rank-3 input: flattened explicitly.
        assert_eq!(h["Flatten"], 1, "to {to}");
        assert_eq!(h["Reshape"], 1);
        assert_eq!(h["Shape"], 1);
        for (_, n) in m.graph.nodes() {
            let moved: &[&str] = match n.op_type.as_str() {
                "Squeeze" | "Unsqueeze" | "ReduceSum" => &["axes"],
                "ReduceMean" | "ReduceMax" if to >= 18 => &["axes"],
                "Split" => &["split"],
                "Dropout" => &["ratio"],
                _ => &[],
            };
            for a in moved {
                assert!(
                    n.attr(a).is_none(),
                    "{} keeps '{a}' at {to}",
                    n.name_or_op()
                );
            }
            if n.is("Split") && to >= 18 {
                assert!(n.inputs.get(1).copied().flatten().is_some());
            }
            if n.is("LogSoftmax") {
                assert_eq!(n.attr_int("axis").unwrap(), Some(-1));
            }
        }
        assert_equivalent(&original, &m, &default_shapes(), 1e-5, 1e-5);
    }
}

#[test]
fn opset9_attribute_forms_become_inputs() {
    let original = load("opset9_legacy.onnx");
    for to in [11, 13, 17] {
        let mut m = original.clone();
        run_yaml(&mut m, &upgrade_then(to, &[])).unwrap();
        let h = ops(&m);
        assert_eq!(h.get("Upsample"), None);
        assert_eq!(h["Resize"], 1);
        let resize = only(&m, "Resize")[0];
        assert_eq!(
            resize
                .attr_string("coordinate_transformation_mode")
                .unwrap()
                .as_deref(),
            Some("asymmetric")
        );
        assert_eq!(
            resize.attr_string("nearest_mode").unwrap().as_deref(),
            Some("floor")
        );
        for (op, attrs, inputs) in [
            ("Clip", &["min", "max"][..], 3),
            ("Pad", &["pads", "value"][..], 3),
            ("Slice", &["starts", "ends", "axes"][..], 4),
            ("TopK", &["k"][..], 2),
        ] {
            let n = only(&m, op)[0];
            for a in attrs {
                assert!(n.attr(a).is_none(), "{op} keeps {a}");
            }
            assert_eq!(n.inputs.len(), inputs, "{op}");
        }
        assert!(
            infopt_runtime::TractBackend
                .load(&m.to_bytes().unwrap(), None, &default_shapes())
                .is_ok()
        );
        // tract has no Upsample: tests/interop/test_transformer_ops.py
        // compares the outputs in ONNX Runtime.
    }
}

#[test]
fn upgrade_refusals_name_the_node() {
    // Resize with a coordinate mode that opset 13 removed.
    let mut m = load("opset11.onnx");
    let resize = m.graph.find_node("Resize").unwrap();
    m.graph.node_mut(resize).set_attr(Attribute::string(
        "coordinate_transformation_mode",
        "tf_half_pixel_for_nn",
    ));
    let before = bytes(&m);
    let err = run_yaml(&mut m, "version: 1\npasses:\n  - upgrade-opset: {to: 13}\n").unwrap_err();
    assert!(
        err.contains("cannot raise opset 11 -> 13: Resize 'Resize'")
            && err.contains("tf_half_pixel_for_nn"),
        "{err}"
    );
    assert!(!err.contains('\n'), "{err}");
    assert_eq!(
        bytes(&m),
        before,
        "a refused upgrade leaves the model alone"
    );
    // A model already newer is left alone; unknown targets are refused.
    let mut m = load("cnn_bn_relu.onnx");
    let before = bytes(&m);
    let r = run_yaml(&mut m, "version: 1\npasses:\n  - upgrade-opset: {to: 13}\n").unwrap();
    assert_eq!(bytes(&m), before);
    assert!(
        r.notes
            .iter()
            .any(|n| n.contains("already imports opset 17")),
        "{:?}",
        r.notes
    );
    let err = run_yaml(&mut m, "version: 1\npasses:\n  - upgrade-opset: {to: 30}\n").unwrap_err();
    assert!(err.contains("up to opset 24"), "{err}");
}

#[test]
fn upgrade_to_the_same_opset_changes_nothing() {
    let mut m = load("cnn_bn_relu.onnx");
    let before = bytes(&m);
    let r = run_yaml(&mut m, "version: 1\npasses:\n  - upgrade-opset: {to: 17}\n").unwrap();
    assert_eq!(r.records[0].rewrites, 0);
    assert_eq!(bytes(&m), before);
}

#[test]
fn model_local_functions_follow_the_model() {
    // kitchen_sink's functions import the default domain at 21 and use no
    // op that changed since: raised with the model.
    let mut m = load("kitchen_sink.onnx");
    run_yaml(&mut m, "version: 1\npasses:\n  - upgrade-opset: {to: 24}\n").unwrap();
    for f in &m.meta.functions {
        for o in &f.opset_import {
            if o.domain.as_deref().unwrap_or("").is_empty() {
                assert_eq!(o.version, Some(24));
            }
        }
    }
    // A function using Softmax cannot follow an upgrade across 13.
    let mut m = load("opset11_changed.onnx");
    let mut f = infopt_ir::proto::FunctionProto {
        name: Some("soft".into()),
        domain: Some("org.example".into()),
        ..Default::default()
    };
    f.opset_import.push(infopt_ir::proto::OperatorSetIdProto {
        domain: Some(String::new()),
        version: Some(11),
    });
    f.node.push(infopt_ir::proto::NodeProto {
        op_type: Some("Softmax".into()),
        input: vec!["x".into()],
        output: vec!["y".into()],
        ..Default::default()
    });
    m.meta.functions.push(f);
    let err = run_yaml(&mut m, "version: 1\npasses:\n  - upgrade-opset: {to: 13}\n").unwrap_err();
    assert!(
        err.contains("model-local function 'soft' uses Softmax"),
        "{err}"
    );
}

#[test]
fn batch_norm_with_read_training_outputs_is_refused() {
    let mut m = load("opset11_changed.onnx");
    let bn = m.graph.find_node("BatchNormalization").unwrap();
    // Give the BN a second output and read it as a graph output.
    let v = m
        .graph
        .add_value(infopt_ir::Value::named("bn.running_mean"));
    m.graph.node_mut(bn).outputs.push(Some(v));
    m.graph.value_mut(v).producer = Some((bn, 1));
    let mut io = m.graph.outputs[0].clone();
    io.value = v;
    io.info.name = Some("bn.running_mean".into());
    io.info.r#type = None;
    m.graph.outputs.push(io);
    let err = run_yaml(&mut m, "version: 1\npasses:\n  - upgrade-opset: {to: 14}\n").unwrap_err();
    assert!(
        err.contains("BatchNormalization 'BatchNormalization' has training outputs"),
        "{err}"
    );
}

/// The ONNX function expansion of RMSNormalization multiplies by a gain that
/// is a graph input: it becomes the op's scale input as it is (the onnx
/// backend tests' `test_rms_normalization_*_expanded`), and a gain of
/// another shape (broadcast over more than the normalized dims) stays a Mul.
#[test]
fn rms_norm_with_a_runtime_gain_takes_it_as_the_scale() {
    use infopt_ir::DataType;
    use infopt_ir::builder::{GraphBuilder, dims};
    let build = |gain_dims: &[&str]| {
        let mut b = GraphBuilder::new();
        let x = b.input("x", DataType::Float, dims(&["2", "3", "4"]));
        let w = b.input("w", DataType::Float, dims(gain_dims));
        let sq = b.op("Mul", &[x, x], vec![]);
        let axes = b.i64("axes", &[1], &[-1]);
        let mean = b.op("ReduceMean", &[sq, axes], vec![]);
        let eps = b.f32("eps", &[], &[1e-5]);
        let e = b.op("Add", &[mean, eps], vec![]);
        let r = b.op("Sqrt", &[e], vec![]);
        let n = b.op("Div", &[x, r], vec![]);
        let y = b.op("Mul", &[n, w], vec![]);
        b.output(y, "y", DataType::Float, None);
        b.build(23)
    };
    let original = build(&["4"]);
    let mut m = original.clone();
    run_passes(&mut m, &["fuse-rms-norm"]);
    assert_eq!(ops(&m), histogram(&[("RMSNormalization", 1)]));
    let rms = only(&m, "RMSNormalization");
    assert_eq!(m.graph.value(rms[0].inputs[1].unwrap()).name, "w");
    assert_equivalent(&original, &m, &default_shapes(), 1e-5, 1e-5);
    // A [3, 4] gain varies over an axis outside the normalized one.
    let mut m = build(&["3", "4"]);
    run_passes(&mut m, &["fuse-rms-norm"]);
    assert_eq!(ops(&m), histogram(&[("RMSNormalization", 1), ("Mul", 1)]));
}
