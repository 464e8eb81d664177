//! The tract backend on the shared fixture models (fixtures/models, fixtures/bad), read
//! with std::fs. The fixtures are committed: a missing one fails the test (a skip would
//! let a misspelled path turn a test into one that cannot fail).

use std::path::{Path, PathBuf};

use infopt_runtime::backend::{Backend, DimSpec, InputShapes, LoadedModel};
use infopt_runtime::inputs::{InputGen, generate_for_model};
use infopt_runtime::{RuntimeError, TractBackend, compare};

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures")
}

/// Reads a committed fixture and returns its bytes and folder; panics when it is missing.
fn read(rel: &str) -> (Vec<u8>, PathBuf) {
    let path = fixtures().join(rel);
    let bytes = std::fs::read(&path)
        .unwrap_or_else(|e| panic!("fixture {} cannot be read: {e}", path.display()));
    let dir = path.parent().map(Path::to_path_buf).unwrap_or_default();
    (bytes, dir)
}

fn shapes() -> InputShapes {
    InputShapes::new()
        .with_symbol("batch", 2)
        .with_symbol("seq", 5)
        .with_symbol("n", 3)
        .with_symbol("N", 2)
}

fn gen_opts() -> InputGen {
    // BERT's token type table has two rows.
    InputGen::with_seed(1234).with_vocab_for("token_type_ids", 2)
}

fn load_fixture(rel: &str) -> Box<dyn LoadedModel> {
    let (bytes, dir) = read(rel);
    match TractBackend.load(&bytes, Some(&dir), &shapes()) {
        Ok(m) => m,
        Err(e) => panic!("{rel}: {e}"),
    }
}

fn load_error(rel: &str) -> RuntimeError {
    let (bytes, dir) = read(rel);
    match TractBackend.load(&bytes, Some(&dir), &shapes()) {
        Ok(_) => panic!("{rel} loaded, expected an error"),
        Err(e) => e,
    }
}

#[test]
fn supported_fixtures_run_deterministically() {
    let models = [
        "models/cnn_bn_relu.onnx",
        "models/dynamic_reshape.onnx",
        "models/transformer_block.onnx",
        "models/if_subgraph.onnx",
        "models/external_data.onnx",
        "models/opset11.onnx",
        "models/exported/bert_tiny.onnx",
        "models/exported/resnet_block.onnx",
        "models/exported/resnet_block_dynamo.onnx",
        "models/exported/transformer_encoder.onnx",
    ];
    for rel in models {
        let m = load_fixture(rel);
        assert!(
            m.resolution().defaulted.is_empty(),
            "{rel}: {:?}",
            m.resolution().defaulted
        );
        let x = generate_for_model(m.as_ref(), &gen_opts()).unwrap();
        let y1 = m.run(&x).unwrap_or_else(|e| panic!("{rel}: {e}"));
        let y2 = m.run(&x).unwrap_or_else(|e| panic!("{rel}: {e}"));
        assert_eq!(y1.len(), m.outputs().len(), "{rel}");
        for (t, spec) in y1.iter().zip(m.outputs()) {
            assert_eq!(t.name(), Some(spec.name.as_str()), "{rel}");
            assert_eq!(t.dtype(), spec.dtype, "{rel}");
            let dims: Vec<DimSpec> = t.shape().iter().map(|&d| DimSpec::Known(d)).collect();
            assert_eq!(
                spec.dims.as_ref(),
                Some(&dims),
                "{rel}: output {}",
                spec.name
            );
            assert!(
                t.to_f64_vec().iter().all(|v| v.is_finite()),
                "{rel}: {} not finite",
                spec.name
            );
        }
        let agreement = compare::compare_outputs(
            &y1,
            &y2,
            compare::Tolerance {
                atol: 0.0,
                rtol: 0.0,
            },
        );
        assert!(
            compare::all_within_tolerance(&agreement),
            "{rel}: {agreement:?}"
        );
    }
}

#[test]
fn batch_symbol_reaches_the_outputs() {
    let (bytes, dir) = read("models/cnn_bn_relu.onnx");
    for batch in [1, 3] {
        let m = TractBackend
            .load(
                &bytes,
                Some(&dir),
                &InputShapes::new().with_symbol("batch", batch),
            )
            .unwrap();
        assert_eq!(m.input_shapes(), vec![vec![batch, 3, 32, 32]]);
        let y = m
            .run(&generate_for_model(m.as_ref(), &InputGen::default()).unwrap())
            .unwrap();
        assert_eq!(y[0].shape(), &[batch, 10]);
    }
}

/// A declared `dim_value: -1` (paddle2onnx's dynamic dim) is an unknown dim, not a size.
#[test]
fn negative_declared_dims_are_unknown() {
    let (bytes, dir) = read("models/paddle_dynamic.onnx");
    let m = TractBackend
        .load(
            &bytes,
            Some(&dir),
            &InputShapes::new().with_shape("x", vec![3, 3, 48, 192]),
        )
        .unwrap();
    let k = DimSpec::Known;
    assert_eq!(
        m.inputs()[0].dims,
        Some(vec![DimSpec::Unknown, k(3), k(48), k(192)])
    );
    assert_eq!(m.outputs()[0].dims, Some(vec![k(3), k(2)]));
    assert!(m.resolution().defaulted.is_empty());
    let y = m
        .run(&generate_for_model(m.as_ref(), &InputGen::default()).unwrap())
        .unwrap();
    assert_eq!(y[0].shape(), &[3, 2]);
}

#[test]
fn unsupported_fixtures_name_the_operator() {
    for (rel, op) in [
        ("models/loop_subgraph.onnx", "Loop (node `Loop`)"),
        (
            "models/custom_domain.onnx",
            "FancyActivation (node `Fancy`)",
        ),
        ("models/ms_domain.onnx", "FusedMatMul (node `FusedMatMul`)"),
        ("models/kitchen_sink.onnx", "SequenceConstruct"),
    ] {
        let e = load_error(rel);
        let msg = e.to_string();
        assert!(matches!(e, RuntimeError::Load { .. }), "{rel}: {msg}");
        assert!(
            msg.contains("unsupported operator(s)") && msg.contains(op),
            "{rel}: {msg}"
        );
    }
}

#[test]
fn bad_fixtures_are_refused() {
    let cases: [(&str, &str); 9] = [
        ("bad/empty.onnx", "no graph"),
        ("bad/cycle.onnx", "the graph has a cycle"),
        ("bad/not_protobuf.onnx", "not a valid ONNX protobuf"),
        ("bad/truncated.onnx", "not a valid ONNX protobuf"),
        ("bad/undefined_input.onnx", "nobody_defines_me"),
        ("bad/missing_external.onnx", "does_not_exist.bin"),
        ("bad/external_dotdot.onnx", "inside the model directory"),
        ("bad/external_absolute.onnx", "inside the model directory"),
        ("bad/external_offset_past_end.onnx", "out of bounds"),
    ];
    for (rel, needle) in cases {
        let e = load_error(rel);
        let msg = e.to_string();
        assert!(msg.contains(needle), "{rel}: {msg}");
        assert!(!msg.contains('\n'), "{rel}: {msg}");
    }
}

#[test]
fn one_shot_plan_computes_what_the_optimized_plan_computes() {
    for rel in [
        "models/cnn_bn_relu.onnx",
        "models/transformer_block.onnx",
        "models/exported/resnet_block.onnx",
    ] {
        let (bytes, dir) = read(rel);
        let optimized = TractBackend
            .load(&bytes, Some(&dir), &shapes())
            .expect("optimized plan");
        let one_shot = infopt_runtime::TractOneShot
            .load(&bytes, Some(&dir), &shapes())
            .expect("one-shot plan");
        let inputs = generate_for_model(optimized.as_ref(), &gen_opts()).unwrap();
        let a = optimized.run(&inputs).unwrap();
        let b = one_shot.run(&inputs).unwrap();
        let agreement = compare::compare_outputs(
            &b,
            &a,
            compare::Tolerance {
                atol: 1e-5,
                rtol: 1e-4,
            },
        );
        assert!(
            compare::all_within_tolerance(&agreement),
            "{rel}: {agreement:?}"
        );
    }
}
