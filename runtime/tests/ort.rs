//! The ONNX Runtime backend against the real library (the PyPI wheel's
//! `libonnxruntime.so`, found like the CLI finds it: `ORT_DYLIB_PATH`, `python3`, or this
//! checkout's `.venv`, made by `scripts/setup-venv.sh`).
//!
//! Without a library these tests say so and pass, except under CI (`CI` set), where a
//! missing library is a failure: CI always has one.

mod common;

use std::path::{Path, PathBuf};

use common::*;
use half::{bf16, f16};
use infopt_runtime::backend::{Backend, DimSpec, InputShapes};
use infopt_runtime::compare::{self, Tolerance};
use infopt_runtime::inputs::{InputGen, generate_for_model};
use infopt_runtime::ort_backend::{self, OptLevel, OrtBackend, OrtOptions};
use infopt_runtime::{DType, HostTensor, RuntimeError, TensorData, TractBackend};

/// The backend with default options, or `None` (with a note) when no library is found
/// outside CI.
fn ort_with(options: OrtOptions) -> Option<OrtBackend> {
    match OrtBackend::new(options) {
        Ok(b) => Some(b),
        Err(e) if std::env::var_os("CI").is_none() => {
            eprintln!("skipping: {e}");
            None
        }
        Err(e) => panic!("CI has ONNX Runtime, but: {e}"),
    }
}

fn ort() -> Option<OrtBackend> {
    ort_with(OrtOptions::default())
}

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
    InputGen::with_seed(1234).with_vocab_for("token_type_ids", 2)
}

/// Every fixture ONNX Runtime 1.31 runs (fixtures/README.md).
const ORT_FIXTURES: [&str; 12] = [
    "models/cnn_bn_relu.onnx",
    "models/dynamic_reshape.onnx",
    "models/transformer_block.onnx",
    "models/if_subgraph.onnx",
    "models/loop_subgraph.onnx",
    "models/ms_domain.onnx",
    "models/external_data.onnx",
    "models/opset11.onnx",
    "models/exported/bert_tiny.onnx",
    "models/exported/resnet_block.onnx",
    "models/exported/resnet_block_dynamo.onnx",
    "models/exported/transformer_encoder.onnx",
];

#[test]
fn version_names_the_library() {
    let Some(b) = ort() else { return };
    assert_eq!(b.name(), "ort");
    let v = b.version();
    assert!(v.starts_with("onnxruntime 1."), "{v}");
    let minor: u32 = b
        .library_version()
        .split('.')
        .nth(1)
        .unwrap()
        .parse()
        .unwrap();
    assert!(minor >= 17, "{v}");
    assert!(b.library_path().is_file());
    assert!(
        b.available_providers()
            .iter()
            .any(|p| p == "CPUExecutionProvider")
    );
    assert_eq!(b.execution_providers(), vec!["CPUExecutionProvider"]);
}

#[test]
fn tract_and_ort_agree_on_every_fixture_both_run() {
    let Some(ort) = ort() else { return };
    let tol = Tolerance {
        atol: 1e-4,
        rtol: 1e-4,
    };
    let mut compared = 0;
    for rel in ORT_FIXTURES {
        let (bytes, dir) = read(rel);
        let o = ort
            .load(&bytes, Some(&dir), &shapes())
            .unwrap_or_else(|e| panic!("{rel}: {e}"));
        assert!(
            o.resolution().defaulted.is_empty(),
            "{rel}: {:?}",
            o.resolution().defaulted
        );
        let x = generate_for_model(o.as_ref(), &gen_opts()).unwrap();
        let yo = o.run(&x).unwrap_or_else(|e| panic!("{rel}: {e}"));
        assert_eq!(yo.len(), o.outputs().len(), "{rel}");
        for (t, spec) in yo.iter().zip(o.outputs()) {
            assert_eq!(t.name(), Some(spec.name.as_str()), "{rel}");
            assert_eq!(t.dtype(), spec.dtype, "{rel}");
            assert!(t.to_f64_vec().iter().all(|v| v.is_finite()), "{rel}");
        }
        // Loop and the com.microsoft ops are beyond tract: ORT alone runs those.
        let t = match TractBackend.load(&bytes, Some(&dir), &shapes()) {
            Ok(t) => t,
            Err(e) => {
                eprintln!("{rel}: tract cannot run it ({e}); ORT ran it alone");
                continue;
            }
        };
        assert_eq!(
            t.input_shapes(),
            o.input_shapes(),
            "{rel}: both backends resolve the same input shapes"
        );
        let yt = t.run(&x).unwrap_or_else(|e| panic!("{rel}: {e}"));
        let agreement = compare::compare_outputs(&yo, &yt, tol);
        assert!(
            compare::all_within_tolerance(&agreement),
            "{rel}: tract and ORT differ: {agreement:?}"
        );
        compared += 1;
    }
    assert!(compared >= 8, "only {compared} fixtures compared");
}

#[test]
fn models_ort_cannot_run_are_load_errors() {
    let Some(ort) = ort() else { return };
    for rel in ["models/custom_domain.onnx", "models/kitchen_sink.onnx"] {
        let (bytes, dir) = read(rel);
        let e = ort.load(&bytes, Some(&dir), &shapes()).err().unwrap();
        let msg = e.to_string();
        assert!(matches!(e, RuntimeError::Load { .. }), "{rel}: {msg}");
        assert!(msg.starts_with("ort cannot load the model: "), "{msg}");
        assert!(!msg.contains('\n'), "{msg}");
    }
    let e = ort
        .load(b"not a model", None, &InputShapes::new())
        .err()
        .unwrap();
    assert!(matches!(e, RuntimeError::Load { .. }), "{e}");
}

#[test]
fn external_data_needs_the_model_folder() {
    let Some(ort) = ort() else { return };
    let (bytes, dir) = read("models/external_data.onnx");
    assert!(ort.load(&bytes, Some(&dir), &shapes()).is_ok());
    // Resolved against an empty folder, the weights are missing.
    let empty = tempfile::tempdir().unwrap();
    let e = ort
        .load(&bytes, Some(empty.path()), &shapes())
        .err()
        .unwrap()
        .to_string();
    assert!(e.contains("external_data.bin"), "{e}");
}

/// A declared `dim_value: -1` (paddle2onnx's dynamic dim) is an unknown dim, not a size.
#[test]
fn negative_declared_dims_are_unknown() {
    let Some(ort) = ort() else { return };
    let (bytes, dir) = read("models/paddle_dynamic.onnx");
    let m = ort
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
    assert_eq!(m.outputs()[0].dims, Some(vec![DimSpec::Unknown, k(2)]));
    assert!(m.resolution().defaulted.is_empty());
    let y = m
        .run(&generate_for_model(m.as_ref(), &InputGen::default()).unwrap())
        .unwrap();
    assert_eq!(y[0].shape(), &[3, 2]);
}

#[test]
fn input_shapes_resolve_and_are_checked() {
    let Some(ort) = ort() else { return };
    let (bytes, dir) = read("models/cnn_bn_relu.onnx");
    let m = ort
        .load(
            &bytes,
            Some(&dir),
            &InputShapes::new().with_symbol("batch", 3),
        )
        .unwrap();
    assert_eq!(m.inputs()[0].name, "input");
    assert_eq!(
        m.inputs()[0].dims,
        Some(vec![
            DimSpec::Symbol("batch".into()),
            DimSpec::Known(3),
            DimSpec::Known(32),
            DimSpec::Known(32)
        ])
    );
    assert_eq!(m.input_shapes(), vec![vec![3, 3, 32, 32]]);
    let x = generate_for_model(m.as_ref(), &InputGen::default()).unwrap();
    let y = m.run(&x).unwrap();
    assert_eq!(y[0].shape(), &[3, 10]);
    assert_eq!(y[0].name(), Some("logits"));
    // A tensor of another shape than the one loaded for is refused before ORT sees it.
    let wrong = HostTensor::from_vec(vec![1, 3, 32, 32], vec![0f32; 3 * 32 * 32])
        .unwrap()
        .named("input");
    let e = m.run(&[wrong]).unwrap_err().to_string();
    assert!(e.contains("loaded for shape [3, 3, 32, 32]"), "{e}");
    let e = ort
        .load(
            &bytes,
            Some(&dir),
            &InputShapes::new().with_shape("x", vec![1]),
        )
        .err()
        .unwrap()
        .to_string();
    assert!(e.contains("`x`") && e.contains("inputs: input"), "{e}");
}

#[test]
fn a_session_rebinds_to_other_shapes_without_loading_again_and_tract_does_not() {
    let Some(ort) = ort() else { return };
    let (bytes, dir) = read("models/cnn_bn_relu.onnx");
    let at = |batch| InputShapes::new().with_symbol("batch", batch);
    let mut m = ort.load(&bytes, Some(&dir), &at(3)).unwrap();
    let x3 = generate_for_model(m.as_ref(), &InputGen::default()).unwrap();
    let y3 = m.run(&x3).unwrap();
    assert!(m.rebind_shapes(&at(1)).unwrap());
    assert_eq!(m.input_shapes(), vec![vec![1, 3, 32, 32]]);
    // The first sample of the batch of 3, alone: the same logits row.
    let first = match x3[0].data() {
        TensorData::F32(v) => v[..3 * 32 * 32].to_vec(),
        other => panic!("{other:?}"),
    };
    let x1 = HostTensor::from_vec(vec![1, 3, 32, 32], first)
        .unwrap()
        .named("input");
    let y1 = m.run(std::slice::from_ref(&x1)).unwrap();
    assert_eq!(y1[0].shape(), &[1, 10]);
    let (TensorData::F32(a), TensorData::F32(b)) = (y1[0].data(), y3[0].data()) else {
        panic!("float logits")
    };
    for (p, q) in a.iter().zip(&b[..10]) {
        assert!((p - q).abs() <= 1e-4 * q.abs().max(1.0), "{p} vs {q}");
    }
    // The old shape is refused now, as any shape not rebound to.
    let e = m.run(&x3).unwrap_err().to_string();
    assert!(e.contains("loaded for shape [1, 3, 32, 32]"), "{e}");
    // tract types the model for one set of shapes: it asks for a new load.
    let mut t = TractBackend.load(&bytes, Some(&dir), &at(3)).unwrap();
    assert!(!t.rebind_shapes(&at(1)).unwrap());
    assert_eq!(t.input_shapes(), vec![vec![3, 3, 32, 32]]);
}

/// One `Identity` model per dtype: every host tensor dtype crosses the boundary both ways.
#[test]
fn every_host_dtype_round_trips() {
    let Some(ort) = ort() else { return };
    fn data(dt: DType) -> TensorData {
        match dt {
            DType::F32 => TensorData::F32(vec![1.5, -2.0, 0.25, 7.0, -0.0, 3.0]),
            DType::F64 => TensorData::F64(vec![1.5, -2.0, 0.25, 7.0, 1e300, 3.0]),
            DType::F16 => TensorData::F16(
                [1.5f32, -2.0, 0.25, 7.0, 65504.0, 3.0]
                    .map(f16::from_f32)
                    .to_vec(),
            ),
            DType::BF16 => TensorData::BF16(
                [1.5f32, -2.0, 0.25, 7.0, 1e30, 3.0]
                    .map(bf16::from_f32)
                    .to_vec(),
            ),
            DType::I8 => TensorData::I8(vec![1, -2, 3, i8::MIN, i8::MAX, 0]),
            DType::I16 => TensorData::I16(vec![1, -2, 3, i16::MIN, i16::MAX, 0]),
            DType::I32 => TensorData::I32(vec![1, -2, 3, i32::MIN, i32::MAX, 0]),
            DType::I64 => TensorData::I64(vec![1, -2, 3, i64::MIN, i64::MAX, 0]),
            DType::U8 => TensorData::U8(vec![1, 2, 3, 0, u8::MAX, 9]),
            DType::U16 => TensorData::U16(vec![1, 2, 3, 0, u16::MAX, 9]),
            DType::U32 => TensorData::U32(vec![1, 2, 3, 0, u32::MAX, 9]),
            DType::U64 => TensorData::U64(vec![1, 2, 3, 0, u64::MAX, 9]),
            DType::Bool => TensorData::Bool(vec![true, false, true, true, false, false]),
        }
    }
    for dt in DType::ALL {
        let code = dt.onnx_code();
        let bytes = model(
            graph(
                vec![node("Identity", &["x"], &["y"])],
                vec![value_info("x", code, &["n", "3"])],
                vec![value_info("y", code, &["n", "3"])],
            ),
            21,
        );
        let m = ort
            .load(&bytes, None, &InputShapes::new().with_symbol("n", 2))
            .unwrap_or_else(|e| panic!("{dt}: {e}"));
        assert_eq!(m.inputs()[0].dtype, dt);
        assert_eq!(m.outputs()[0].dtype, dt);
        let x = HostTensor::new(Some("x".into()), vec![2, 3], data(dt)).unwrap();
        let y = m
            .run(std::slice::from_ref(&x))
            .unwrap_or_else(|e| panic!("{dt}: {e}"));
        assert_eq!(y[0].shape(), &[2, 3], "{dt}");
        assert_eq!(y[0].data(), x.data(), "{dt}");
        assert_eq!(y[0].name(), Some("y"));
    }
    // A scalar and an empty tensor.
    let bytes = model(
        graph(
            vec![node("Identity", &["x"], &["y"])],
            vec![value_info("x", FLOAT, &[])],
            vec![value_info("y", FLOAT, &[])],
        ),
        21,
    );
    let m = ort.load(&bytes, None, &InputShapes::new()).unwrap();
    let y = m.run(&[HostTensor::scalar(2.5f32).named("x")]).unwrap();
    assert_eq!(
        (y[0].shape(), y[0].as_slice::<f32>()),
        (&[][..], Some(&[2.5f32][..]))
    );
    let bytes = model(
        graph(
            vec![node("Identity", &["x"], &["y"])],
            vec![value_info("x", FLOAT, &["0", "4"])],
            vec![value_info("y", FLOAT, &["0", "4"])],
        ),
        21,
    );
    let m = ort.load(&bytes, None, &InputShapes::new()).unwrap();
    let y = m
        .run(&[HostTensor::from_vec::<f32>(vec![0, 4], vec![])
            .unwrap()
            .named("x")])
        .unwrap();
    assert_eq!(y[0].shape(), &[0, 4]);
}

#[test]
fn options_change_the_session_not_the_numbers() {
    let Some(reference) = ort() else { return };
    let (bytes, dir) = read("models/transformer_block.onnx");
    let m = reference.load(&bytes, Some(&dir), &shapes()).unwrap();
    let x = generate_for_model(m.as_ref(), &gen_opts()).unwrap();
    let expected = m.run(&x).unwrap();
    for (level, threads) in [
        (OptLevel::Disable, Some(1)),
        (OptLevel::Basic, Some(2)),
        (OptLevel::Extended, None),
        (OptLevel::All, Some(1)),
    ] {
        let b = ort_with(OrtOptions {
            intra_threads: threads,
            opt_level: level,
            execution_providers: vec!["cpu".into()],
            ..OrtOptions::default()
        })
        .unwrap();
        let m = b.load(&bytes, Some(&dir), &shapes()).unwrap();
        let y = m.run(&x).unwrap();
        let agreement = compare::compare_outputs(
            &y,
            &expected,
            Tolerance {
                atol: 1e-5,
                rtol: 1e-4,
            },
        );
        assert!(
            compare::all_within_tolerance(&agreement),
            "{level}: {agreement:?}"
        );
    }
}

#[test]
fn execution_provider_names_are_checked() {
    let Some(b) = ort() else { return };
    let with_eps = |eps: &[&str]| {
        OrtBackend::new(OrtOptions {
            execution_providers: eps.iter().map(|s| s.to_string()).collect(),
            ..OrtOptions::default()
        })
    };
    let e = with_eps(&["warp-drive"]).unwrap_err().to_string();
    assert!(
        e.starts_with("unknown execution provider `warp-drive`")
            && e.contains("CPUExecutionProvider"),
        "{e}"
    );
    let e = with_eps(&["cpu", "definitely-not-an-ep"])
        .unwrap_err()
        .to_string();
    assert!(e.contains("`definitely-not-an-ep`"), "{e}");
    if !b
        .available_providers()
        .iter()
        .any(|p| p.starts_with("CUDA"))
    {
        let e = with_eps(&["cuda"]).unwrap_err().to_string();
        assert!(
            e.starts_with("execution provider `cuda` is not available in ONNX Runtime 1.")
                && e.contains("onnxruntime-gpu"),
            "{e}"
        );
    }
    let cpu = with_eps(&["CPUExecutionProvider", "cpu"]).unwrap();
    assert_eq!(cpu.execution_providers(), vec!["CPUExecutionProvider"]);
    // A provider option must name a provider that --ep lists (CPU takes none).
    let with_option = |eps: &[&str], option: &str| {
        OrtBackend::new(OrtOptions {
            execution_providers: eps.iter().map(|s| s.to_string()).collect(),
            ep_options: vec![option.parse().unwrap()],
            ..OrtOptions::default()
        })
    };
    for eps in [&[][..], &["cpu"][..]] {
        let e = with_option(eps, "cuda:prefer_nhwc=1")
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with(
                "execution provider option `cuda:prefer_nhwc=1` names no provider that --ep lists"
            ),
            "{e}"
        );
    }
    // A provider registered by name through the generic C API (the PyPI CPU wheel ships
    // the Azure one, which hands every node back to the CPU provider).
    if b.available_providers()
        .iter()
        .any(|p| p == "AzureExecutionProvider")
    {
        let azure = with_eps(&["azure"]).unwrap();
        assert_eq!(
            azure.execution_providers(),
            vec!["AzureExecutionProvider", "CPUExecutionProvider"]
        );
        let (bytes, dir) = read("models/cnn_bn_relu.onnx");
        let m = azure.load(&bytes, Some(&dir), &shapes()).unwrap();
        let x = generate_for_model(m.as_ref(), &gen_opts()).unwrap();
        assert_eq!(m.run(&x).unwrap()[0].shape(), &[2, 10]);
    }
}

#[test]
fn missing_library_is_a_one_line_error_with_the_fix() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("libonnxruntime.so.9.99.0");
    let e = ort_backend::find_dylib_in(None, Some(missing.clone().into_os_string()), &[])
        .unwrap_err()
        .to_string();
    assert_eq!(
        e,
        format!(
            "ONNX Runtime library not found: ORT_DYLIB_PATH={} is not a file; fix or unset it (unset, infopt asks python3 for the onnxruntime package); install it with `pip install onnxruntime` (for the python3 on PATH, or in a .venv of this project) or set ORT_DYLIB_PATH to libonnxruntime.so",
            missing.display()
        )
    );
    let e = OrtBackend::new(OrtOptions {
        dylib: Some(missing.clone()),
        ..OrtOptions::default()
    })
    .unwrap_err()
    .to_string();
    assert!(
        e.starts_with(&format!(
            "ONNX Runtime library not found: --ort-dylib {} is not a file",
            missing.display()
        )),
        "{e}"
    );
    let e = ort_backend::backend_by_name(
        "ort",
        &OrtOptions {
            dylib: Some(missing),
            ..OrtOptions::default()
        },
    )
    .err()
    .unwrap()
    .to_string();
    assert!(e.contains("pip install onnxruntime"), "{e}");
}

#[test]
fn backends_by_name() {
    let t = ort_backend::backend_by_name("tract", &OrtOptions::default()).unwrap();
    assert_eq!(t.name(), "tract");
    let e = ort_backend::backend_by_name("tensorflow", &OrtOptions::default())
        .err()
        .unwrap()
        .to_string();
    assert_eq!(e, "unknown backend `tensorflow` (choose one of tract, ort)");
    let e = ort_backend::backend_by_name(
        "ort",
        &OrtOptions {
            intra_threads: Some(0),
            ..OrtOptions::default()
        },
    )
    .err()
    .unwrap()
    .to_string();
    assert!(e.contains("at least 1"), "{e}");
    if ort().is_some() {
        let o = ort_backend::backend_by_name("onnxruntime", &OrtOptions::default()).unwrap();
        assert_eq!(o.name(), "ort");
    }
}

/// Timed runs go through IoBinding on every fixture ONNX Runtime runs (inputs
/// bound once, outputs into buffers reused from run to run), and device-resident
/// timing on the CPU provider is refused with the flags that enable it.
#[test]
fn timed_runs_bind_buffers_once() {
    use infopt_runtime::Transfer;
    let Some(b) = ort() else { return };
    for rel in ORT_FIXTURES {
        let (bytes, dir) = read(rel);
        let m = b
            .load(&bytes, Some(&dir), &shapes())
            .unwrap_or_else(|e| panic!("{rel}: {e}"));
        let x = generate_for_model(m.as_ref(), &gen_opts()).unwrap();
        let mut runner = m
            .timed_runner(&x, Transfer::HostToHost)
            .unwrap_or_else(|e| panic!("{rel}: {e}"));
        assert!(runner.reuses_buffers(), "{rel}: fell back to plain runs");
        for _ in 0..3 {
            runner.run_once().unwrap_or_else(|e| panic!("{rel}: {e}"));
        }
        drop(runner);
        // The model still runs normally after its binding is gone.
        m.run(&x).unwrap_or_else(|e| panic!("{rel}: {e}"));
        let e = m
            .timed_runner(&x, Transfer::DeviceResident)
            .err()
            .unwrap_or_else(|| panic!("{rel}: device-resident timing on the CPU provider"))
            .to_string();
        assert!(
            e.contains(
                "needs ONNX Runtime with the CUDA execution provider: add --backend ort --ep cuda"
            ),
            "{rel}: {e}"
        );
    }
}
