//! The tract backend on tiny models built as bytes in the tests.

mod common;

use common::*;
use half::f16;
use infopt_runtime::backend::{Backend, DimSpec, InputShapes};
use infopt_runtime::inputs::{InputGen, generate_for_model};
use infopt_runtime::tensor::{DType, HostTensor};
use infopt_runtime::{RuntimeError, TractBackend, compare, timing};

fn load(bytes: &[u8], shapes: &InputShapes) -> Box<dyn infopt_runtime::LoadedModel> {
    match TractBackend.load(bytes, None, shapes) {
        Ok(m) => m,
        Err(e) => panic!("load failed: {e}"),
    }
}

fn add_model(dims: &[&str]) -> Vec<u8> {
    model(
        graph(
            vec![node("Add", &["x", "y"], &["z"])],
            vec![value_info("x", FLOAT, dims), value_info("y", FLOAT, dims)],
            vec![value_info("z", FLOAT, dims)],
        ),
        17,
    )
}

#[test]
fn add_of_two_inputs() {
    let m = load(&add_model(&["2", "3"]), &InputShapes::new());
    assert_eq!(m.inputs().len(), 2);
    assert_eq!(m.inputs()[0].name, "x");
    assert_eq!(
        m.inputs()[0].dims,
        Some(vec![DimSpec::Known(2), DimSpec::Known(3)])
    );
    assert_eq!(m.outputs()[0].name, "z");
    assert_eq!(m.outputs()[0].dtype, DType::F32);
    let x = HostTensor::from_vec(vec![2, 3], vec![1f32, 2., 3., 4., 5., 6.]).unwrap();
    let y = HostTensor::from_vec(vec![2, 3], vec![0.5f32, -2., 0., 10., 1e3, -6.]).unwrap();
    let out = m.run(&[x, y.named("y")]).unwrap();
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].name(), Some("z"));
    assert_eq!(out[0].shape(), &[2, 3]);
    assert_eq!(
        out[0].as_slice::<f32>().unwrap(),
        &[1.5, 0., 3., 14., 1005., 0.]
    );
}

#[test]
fn symbolic_dims_default_to_one_and_are_reported() {
    let bytes = add_model(&["N", "3"]);
    let m = load(&bytes, &InputShapes::new());
    assert_eq!(
        m.inputs()[0].dims,
        Some(vec![DimSpec::Symbol("N".into()), DimSpec::Known(3)])
    );
    let r = m.resolution();
    assert_eq!(r.input_shapes[0], ("x".to_string(), vec![1, 3]));
    assert_eq!(r.symbols.get("N"), Some(&1));
    assert_eq!(r.defaulted.len(), 1, "{:?}", r.defaulted);
    assert_eq!(r.defaulted[0].symbol.as_deref(), Some("N"));
    assert_eq!(m.input_shapes(), vec![vec![1, 3], vec![1, 3]]);
    assert_eq!(
        m.outputs()[0].dims,
        Some(vec![DimSpec::Known(1), DimSpec::Known(3)])
    );

    let m = load(&bytes, &InputShapes::new().with_symbol("N", 4));
    assert!(m.resolution().defaulted.is_empty());
    let x = generate_for_model(m.as_ref(), &InputGen::with_seed(3)).unwrap();
    assert_eq!(x[0].shape(), &[4, 3]);
    let out = m.run(&x).unwrap();
    assert_eq!(out[0].shape(), &[4, 3]);

    // An explicit shape for one input binds the symbol for the other.
    let m = load(&bytes, &InputShapes::new().with_shape("x", vec![5, 3]));
    assert_eq!(m.input_shapes(), vec![vec![5, 3], vec![5, 3]]);
    // Unnamed dims default too.
    let m = load(
        &add_model(&["?", "3"]),
        &InputShapes::new().with_default_dim(2),
    );
    assert_eq!(m.input_shapes(), vec![vec![2, 3], vec![2, 3]]);
    assert_eq!(m.resolution().defaulted.len(), 2);
}

#[test]
fn symbolic_value_info_does_not_conflict_with_chosen_dims() {
    let mut g = graph(
        vec![
            node("Relu", &["x"], &["r"]),
            node("Add", &["r", "x"], &["z"]),
        ],
        vec![value_info("x", FLOAT, &["batch", "4"])],
        vec![value_info("z", FLOAT, &["batch", "4"])],
    );
    g.value_info.push(value_info("r", FLOAT, &["batch", "4"]));
    let m = load(&model(g, 17), &InputShapes::new().with_symbol("batch", 3));
    let x = HostTensor::from_vec(vec![3, 4], (0..12).map(|v| v as f32 - 6.0).collect()).unwrap();
    let out = m.run(&[x]).unwrap();
    let expected: Vec<f32> = (0..12)
        .map(|v| v as f32 - 6.0)
        .map(|v| v.max(0.0) + v)
        .collect();
    assert_eq!(out[0].as_slice::<f32>().unwrap(), expected.as_slice());
}

#[test]
fn initializers_are_not_inputs() {
    let mut g = graph(
        vec![node("MatMul", &["x", "w"], &["y"])],
        vec![value_info("x", FLOAT, &["1", "2"])],
        vec![value_info("y", FLOAT, &["1", "2"])],
    );
    g.initializer
        .push(f32_initializer("w", &[2, 2], &[1., 2., 3., 4.]));
    let m = load(&model(g, 17), &InputShapes::new());
    assert_eq!(m.inputs().len(), 1);
    let out = m
        .run(&[HostTensor::from_vec(vec![1, 2], vec![1f32, 1.]).unwrap()])
        .unwrap();
    assert_eq!(out[0].as_slice::<f32>().unwrap(), &[4., 6.]);
}

#[test]
fn f16_bool_and_i64_io() {
    // f16 Add.
    let g = graph(
        vec![node("Add", &["a", "b"], &["c"])],
        vec![
            value_info("a", FLOAT16, &["2"]),
            value_info("b", FLOAT16, &["2"]),
        ],
        vec![value_info("c", FLOAT16, &["2"])],
    );
    let m = load(&model(g, 17), &InputShapes::new());
    let h = |v: &[f32]| {
        HostTensor::from_vec(vec![2], v.iter().map(|&x| f16::from_f32(x)).collect()).unwrap()
    };
    let out = m.run(&[h(&[1.0, 0.5]), h(&[2.0, 0.25])]).unwrap();
    assert_eq!(out[0].dtype(), DType::F16);
    assert_eq!(out[0].to_f64_vec(), vec![3.0, 0.75]);

    // Gather on an embedding table with seeded i64 ids, then Where on a bool mask.
    let mut g = graph(
        vec![
            node("Gather", &["table", "ids"], &["e"]),
            node("Where", &["mask", "e", "zero"], &["y"]),
        ],
        vec![
            value_info("ids", INT64, &["seq"]),
            value_info("mask", BOOL, &["seq", "1"]),
        ],
        vec![value_info("y", FLOAT, &["seq", "2"])],
    );
    let table: Vec<f32> = (0..32).map(|v| v as f32).collect();
    g.initializer
        .push(f32_initializer("table", &[16, 2], &table));
    g.initializer.push(f32_initializer("zero", &[], &[0.0]));
    let m = load(&model(g, 17), &InputShapes::new().with_symbol("seq", 5));
    let x = generate_for_model(m.as_ref(), &InputGen::with_seed(11)).unwrap();
    let ids = x[0].as_slice::<i64>().unwrap().to_vec();
    assert!(ids.iter().all(|&i| (0..16).contains(&i)));
    assert!(x[1].as_slice::<bool>().unwrap().iter().all(|&b| b));
    let out = m.run(&x).unwrap();
    let expected: Vec<f32> = ids
        .iter()
        .flat_map(|&i| [2.0 * i as f32, 2.0 * i as f32 + 1.0])
        .collect();
    assert_eq!(out[0].as_slice::<f32>().unwrap(), expected.as_slice());
}

#[test]
fn if_with_outer_scope_values() {
    let then_g = graph(
        vec![node("Add", &["x", "x"], &["t"])],
        vec![],
        vec![value_info("t", FLOAT, &["3"])],
    );
    let else_g = graph(
        vec![node("Neg", &["x"], &["e"])],
        vec![],
        vec![value_info("e", FLOAT, &["3"])],
    );
    let mut if_node = node("If", &["cond"], &["y"]);
    if_node.attribute = vec![
        attr_graph("then_branch", then_g),
        attr_graph("else_branch", else_g),
    ];
    let g = graph(
        vec![if_node],
        vec![
            value_info("cond", BOOL, &[]),
            value_info("x", FLOAT, &["3"]),
        ],
        vec![value_info("y", FLOAT, &["3"])],
    );
    let m = load(&model(g, 17), &InputShapes::new());
    let x = HostTensor::from_vec(vec![3], vec![1f32, -2., 3.]).unwrap();
    let out = m.run(&[HostTensor::scalar(true), x.clone()]).unwrap();
    assert_eq!(out[0].as_slice::<f32>().unwrap(), &[2., -4., 6.]);
    let out = m.run(&[HostTensor::scalar(false), x]).unwrap();
    assert_eq!(out[0].as_slice::<f32>().unwrap(), &[-1., 2., -3.]);
}

#[test]
fn loop_is_not_supported_and_says_so() {
    let body = graph(
        vec![
            node("Identity", &["c_in"], &["c_out"]),
            node("Add", &["v_in", "v_in"], &["v_out"]),
        ],
        vec![
            value_info("i", INT64, &[]),
            value_info("c_in", BOOL, &[]),
            value_info("v_in", FLOAT, &["2"]),
        ],
        vec![
            value_info("c_out", BOOL, &[]),
            value_info("v_out", FLOAT, &["2"]),
        ],
    );
    let mut loop_node = node("Loop", &["m", "c", "v"], &["v_final"]);
    loop_node.attribute = vec![attr_graph("body", body)];
    let mut g = graph(
        vec![loop_node],
        vec![value_info("v", FLOAT, &["2"])],
        vec![value_info("v_final", FLOAT, &["2"])],
    );
    g.initializer.push(i64_initializer("m", &[], &[3]));
    g.initializer.push(TensorProto {
        data_type: BOOL,
        raw_data: vec![1],
        name: "c".into(),
        ..Default::default()
    });
    let err = TractBackend
        .load(&model(g, 17), None, &InputShapes::new())
        .err()
        .expect("Loop loads");
    let msg = err.to_string();
    assert!(matches!(err, RuntimeError::Load { .. }), "{msg}");
    assert!(msg.starts_with("tract cannot load the model: "), "{msg}");
    assert!(
        msg.contains("unsupported operator(s): Loop (node `Loop_v_final`)"),
        "{msg}"
    );
    assert!(!msg.contains('\n'), "{msg}");
}

#[test]
fn unknown_op_is_named() {
    let g = graph(
        vec![node("FrobnicateTensor", &["x"], &["y"])],
        vec![value_info("x", FLOAT, &["2"])],
        vec![value_info("y", FLOAT, &["2"])],
    );
    let err = TractBackend
        .load(&model(g, 17), None, &InputShapes::new())
        .err()
        .expect("loads");
    let msg = err.to_string();
    assert!(
        msg.contains("FrobnicateTensor (node `FrobnicateTensor_y`)"),
        "{msg}"
    );
    assert!(!msg.contains('\n'), "{msg}");
}

#[test]
fn garbage_bytes_are_a_decode_error() {
    let err = TractBackend
        .load(b"\xff\xff\xff\xff not onnx", None, &InputShapes::new())
        .err()
        .unwrap();
    assert!(matches!(err, RuntimeError::Decode(_)), "{err}");
    let err = TractBackend
        .load(&[], None, &InputShapes::new())
        .err()
        .unwrap();
    assert!(err.to_string().contains("no graph"), "{err}");
}

#[test]
fn run_checks_inputs() {
    let m = load(&add_model(&["2"]), &InputShapes::new());
    let ok = HostTensor::from_vec(vec![2], vec![1f32, 2.]).unwrap();
    let e = m.run(std::slice::from_ref(&ok)).unwrap_err().to_string();
    assert!(e.contains("2 input(s) (x, y), 1 were given"), "{e}");
    let wrong_shape = HostTensor::from_vec(vec![3], vec![1f32, 2., 3.]).unwrap();
    let e = m.run(&[ok.clone(), wrong_shape]).unwrap_err().to_string();
    assert!(
        e.starts_with("input `y`") && e.contains("[2]") && e.contains("[3]"),
        "{e}"
    );
    let wrong_type = HostTensor::from_vec(vec![2], vec![1i64, 2]).unwrap();
    let e = m.run(&[wrong_type, ok.clone()]).unwrap_err().to_string();
    assert!(
        e.starts_with("input `x`") && e.contains("f32") && e.contains("i64"),
        "{e}"
    );
    let e = m.run(&[ok.clone().named("y"), ok]).unwrap_err().to_string();
    assert!(e.starts_with("input `x`") && e.contains("named `y`"), "{e}");
    let e = TractBackend
        .load(
            &add_model(&["2"]),
            None,
            &InputShapes::new().with_shape("q", vec![2]),
        )
        .err()
        .unwrap()
        .to_string();
    assert!(e.contains("`q`") && e.contains("x, y"), "{e}");
}

fn external_model(location: &str) -> Vec<u8> {
    let mut g = graph(
        vec![node("Add", &["x", "w"], &["y"])],
        vec![value_info("x", FLOAT, &["3"])],
        vec![value_info("y", FLOAT, &["3"])],
    );
    let entry = |k: &str, v: &str| StringStringEntryProto {
        key: k.into(),
        value: v.into(),
    };
    g.initializer.push(TensorProto {
        dims: vec![3],
        data_type: FLOAT,
        name: "w".into(),
        external_data: vec![
            entry("location", location),
            entry("offset", "4"),
            entry("length", "12"),
        ],
        data_location: 1,
        ..Default::default()
    });
    model(g, 17)
}

#[test]
fn external_data_is_read_from_the_model_folder() {
    let dir = tempfile::tempdir().unwrap();
    let mut bin = vec![0xAAu8; 4];
    for v in [10f32, 20., 30.] {
        bin.extend_from_slice(&v.to_le_bytes());
    }
    std::fs::write(dir.path().join("weights.bin"), &bin).unwrap();
    let bytes = external_model("weights.bin");
    let m = TractBackend
        .load(&bytes, Some(dir.path()), &InputShapes::new())
        .unwrap();
    let out = m
        .run(&[HostTensor::from_vec(vec![3], vec![1f32, 2., 3.]).unwrap()])
        .unwrap();
    assert_eq!(out[0].as_slice::<f32>().unwrap(), &[11., 22., 33.]);

    // Without a folder, external data cannot be found.
    let e = TractBackend
        .load(&bytes, None, &InputShapes::new())
        .err()
        .unwrap()
        .to_string();
    assert!(e.contains("external data"), "{e}");
    // Locations escaping the folder are refused.
    let inner = dir.path().join("inner");
    std::fs::create_dir(&inner).unwrap();
    let e = TractBackend
        .load(
            &external_model("../weights.bin"),
            Some(&inner),
            &InputShapes::new(),
        )
        .err()
        .unwrap()
        .to_string();
    assert!(e.contains("inside the model directory"), "{e}");
}

#[test]
fn seeded_inputs_are_reproducible() {
    let bytes = add_model(&["N", "8"]);
    let m = load(&bytes, &InputShapes::new().with_symbol("N", 2));
    let a = generate_for_model(m.as_ref(), &InputGen::with_seed(5)).unwrap();
    let b = generate_for_model(m.as_ref(), &InputGen::with_seed(5)).unwrap();
    let c = generate_for_model(m.as_ref(), &InputGen::with_seed(6)).unwrap();
    assert_eq!(a, b);
    assert_ne!(a, c);
    assert_ne!(
        a[0].to_f64_vec(),
        a[1].to_f64_vec(),
        "inputs share a stream"
    );
    assert!(a[0].to_f64_vec().iter().all(|v| (-1.0..1.0).contains(v)));
    // Same outputs for the same inputs, so the reference run agrees with itself.
    let agreement =
        compare::compare_outputs(&m.run(&a).unwrap(), &m.run(&b).unwrap(), Default::default());
    assert!(compare::all_within_tolerance(&agreement));
    assert_eq!(agreement[0].max_abs, 0.0);
}

#[test]
fn timing_runs_the_model() {
    let m = load(&add_model(&["16"]), &InputShapes::new());
    let x = generate_for_model(m.as_ref(), &InputGen::default()).unwrap();
    let l = timing::time_model(m.as_ref(), &x, 2, 5).unwrap();
    assert_eq!((l.warmup, l.runs), (2, 5));
    assert!(l.min_ms <= l.median_ms && l.median_ms <= l.p90_ms && l.p90_ms <= l.p99_ms);
    assert!(l.p99_ms <= l.max_ms && l.min_ms >= 0.0);
    assert!(timing::time_model(m.as_ref(), &x, 0, 0).is_err());
}

#[test]
fn backend_identity() {
    assert_eq!(TractBackend.name(), "tract");
    assert_eq!(TractBackend.version(), "tract-onnx 0.23.9");
}

#[test]
fn tract_panics_become_errors() {
    // tract 0.23.9 panics (slice index out of range) on a Gather index past the table
    // instead of returning an error; the adapter turns that into a run error.
    let mut g = graph(
        vec![node("Gather", &["table", "ids"], &["e"])],
        vec![value_info("ids", INT64, &["1"])],
        vec![value_info("e", FLOAT, &["1", "4"])],
    );
    g.initializer
        .push(f32_initializer("table", &[2, 4], &[0.0; 8]));
    let m = load(&model(g, 17), &InputShapes::new());
    let e = m
        .run(&[HostTensor::from_vec(vec![1], vec![5i64]).unwrap()])
        .unwrap_err();
    assert!(matches!(e, RuntimeError::Run { .. }), "{e}");
    assert!(!e.to_string().contains('\n'), "{e}");
}
