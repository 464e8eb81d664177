//! build-engine against the shim's recording test double: what the command decides
//! (workspace, profiles, timing cache, TensorRT 10 flags and layer overrides, which
//! graph) is what crosses the C ABI.

use infopt_ir::DataType;
use infopt_ir::builder::{GraphBuilder, dims};
use infopt_passes::precision::parse_override_arg;
use infopt_runtime::tensorrt::test_double::{self, BuildCall, Call, Canned};
use infopt_runtime::tensorrt::{LibSearch, ffi};

use super::*;

/// A folder with (empty) TensorRT `major` libraries for the double to "open".
fn open(major: i32, version: i32) -> (tempfile::TempDir, TensorRt) {
    test_double::install(Canned::trt(major, version));
    let dir = tempfile::tempdir().unwrap();
    for name in [
        format!("libnvinfer.so.{major}"),
        format!("libnvonnxparser.so.{major}"),
    ] {
        std::fs::write(dir.path().join(name), b"").unwrap();
    }
    let search = LibSearch {
        explicit: Some(dir.path().to_path_buf()),
        ..Default::default()
    };
    // As on a GPU machine: the engine is inspected and timed.
    let trt = TensorRt::open_with_gpu(test_double::double(), &search, true).unwrap();
    (dir, trt)
}

fn build_call() -> BuildCall {
    test_double::calls()
        .into_iter()
        .find_map(|c| match c {
            Call::Build(b) => Some(b),
            _ => None,
        })
        .expect("a build call")
}

/// Relu (unnamed) -> Softmax (named `/head/Softmax`).
fn model() -> Model {
    let mut b = GraphBuilder::new();
    let x = b.input("x", DataType::Float, dims(&["batch", "4"]));
    let y = b.op("Relu", &[x], vec![]);
    let z = b.op("Softmax", &[y], vec![]);
    b.output(z, "z", DataType::Float, Some(dims(&["batch", "4"])));
    let mut m = b.build(17);
    let ids = m.graph.node_ids();
    m.graph.node_mut(ids[0]).name = None;
    m.graph.node_mut(ids[1]).name = Some("/head/Softmax".into());
    m
}

fn plan(dir: &Path, strongly_typed_on_10: bool) -> EnginePlan {
    let map = PrecisionMap {
        default: Some(Precision::Fp16),
        overrides: vec![
            parse_override_arg("Softmax=fp32").unwrap(),
            parse_override_arg("Relu=fp16").unwrap(),
        ],
    };
    let (trt10, notes) = trt10_precision(&model(), Some(&map), true);
    assert_eq!(notes.len(), 1, "{notes:?}");
    assert!(notes[0].contains("1 node(s) matched by a precision override have no name"));
    EnginePlan {
        typed_onnx: b"TYPED".to_vec(),
        flags_onnx: Some(b"FP32".to_vec()),
        common: EngineBuildConfig {
            workspace_bytes: Some(trt_args::parse_size("1G").unwrap()),
            opt_level: Some(4),
            profiles: vec![trt_args::parse_shape_spec("x:1x4/8x4/32x4").unwrap()],
            timing_cache: Some(dir.join("cache.timing")),
            model_path: Some(PathBuf::from("/m/model.onnx")),
            ..Default::default()
        },
        trt10,
        strongly_typed_on_10,
    }
}

fn profile() -> Vec<test_double::ProfileCall> {
    vec![("x".into(), vec![1, 4], vec![8, 4], vec![32, 4])]
}

#[test]
fn tensorrt_11_builds_the_typed_graph_with_workspace_profile_and_cache() {
    let (dir, mut trt) = open(11, 110400);
    let out = dir.path().join("model.engine");
    let outcome = build_with(&mut trt, &plan(dir.path(), false), &out, 2, 4).unwrap();
    assert_eq!(
        build_call(),
        BuildCall {
            inspect_engine: 1,
            onnx: b"TYPED".to_vec(),
            workspace_bytes: 1 << 30,
            opt_level: 4,
            profile: profile(),
            model_path: Some("/m/model.onnx".into()),
            ..Default::default()
        }
    );
    assert!(outcome.strongly_typed);
    assert_eq!(std::fs::read(&out).unwrap(), b"PLAN-BYTES");
    assert_eq!(
        std::fs::read(dir.path().join("cache.timing")).unwrap(),
        b"NEW-CACHE"
    );
    // Timing: the opt shapes (no explicit shapes), the counts asked for, the double's samples.
    let time = test_double::calls()
        .into_iter()
        .find(|c| matches!(c, Call::Time { .. }))
        .unwrap();
    assert_eq!(
        time,
        Call::Time {
            engine: b"PLAN-BYTES".to_vec(),
            shapes: vec![],
            warmup: 2,
            runs: 4
        }
    );
    let l = outcome.latency.clone().unwrap();
    assert_eq!((l.runs, l.median_ms, l.min_ms), (4, 2.5, 1.0));
    assert_eq!(test_double::live(), 0);

    // What the report shows of it: layers with their precisions, size, cache.
    let facts = engine_facts(&out, &outcome, &trt, None);
    assert_eq!(facts.bytes, 10);
    assert_eq!(facts.tensorrt_version, "11.4.0");
    let layers: Vec<(&str, String)> = facts
        .layers
        .iter()
        .map(|l| (l.name.as_str(), l.precision.to_string()))
        .collect();
    assert_eq!(
        layers,
        vec![
            ("/conv/Conv + /relu/Relu", "fp16".to_string()),
            ("/head/Softmax", "fp32".to_string())
        ]
    );
    let json = serde_json::to_value(&facts).unwrap();
    assert_eq!(
        json["precisions"],
        serde_json::json!([["fp16", 1], ["fp32", 1]])
    );
    assert_eq!(
        json["tensorrt_warnings"],
        serde_json::json!(["weights clipped", "unused input"])
    );
    assert!(
        json["timing_cache_written"]
            .as_str()
            .unwrap()
            .ends_with("cache.timing")
    );
}

#[test]
fn tensorrt_10_gets_the_float32_graph_with_flags_and_layer_overrides() {
    let (dir, mut trt) = open(10, 101300);
    std::fs::write(dir.path().join("cache.timing"), b"OLD").unwrap();
    let out = dir.path().join("model.engine");
    let outcome = build_with(&mut trt, &plan(dir.path(), false), &out, 0, 0).unwrap();
    assert_eq!(
        build_call(),
        BuildCall {
            inspect_engine: 1,
            onnx: b"FP32".to_vec(),
            workspace_bytes: 1 << 30,
            opt_level: 4,
            profile: profile(),
            timing_cache: Some(b"OLD".to_vec()),
            fp16: 1,
            layer_precisions: vec![("/head/Softmax".into(), ffi::PRECISION_FP32)],
            obey_precision_constraints: 1,
            model_path: Some("/m/model.onnx".into()),
            ..Default::default()
        }
    );
    assert!(!outcome.strongly_typed);
    assert!(outcome.latency.is_none(), "runs 0 skips timing");
    assert!(
        !test_double::calls()
            .iter()
            .any(|c| matches!(c, Call::Time { .. }))
    );
}

#[test]
fn tensorrt_10_strongly_typed_builds_the_typed_graph_without_flags() {
    let (dir, mut trt) = open(10, 101300);
    let out = dir.path().join("model.engine");
    build_with(&mut trt, &plan(dir.path(), true), &out, 0, 0).unwrap();
    let call = build_call();
    assert_eq!(call.onnx, b"TYPED");
    assert_eq!((call.strongly_typed, call.fp16), (1, 0));
    assert!(call.layer_precisions.is_empty());
}

#[test]
fn a_build_failure_writes_no_engine() {
    let mut canned = Canned::trt(11, 110400);
    canned.build_fails = Some((ffi::STATUS_FAILED, "network has no outputs"));
    test_double::install(canned);
    let dir = tempfile::tempdir().unwrap();
    for name in ["libnvinfer.so.11", "libnvonnxparser.so.11"] {
        std::fs::write(dir.path().join(name), b"").unwrap();
    }
    let search = LibSearch {
        explicit: Some(dir.path().to_path_buf()),
        ..Default::default()
    };
    let mut trt = TensorRt::open_with(test_double::double(), &search).unwrap();
    let out = dir.path().join("model.engine");
    let e = build_with(&mut trt, &plan(dir.path(), false), &out, 0, 0)
        .err()
        .unwrap();
    assert_eq!(e.kind, ErrorKind::Load);
    assert!(
        e.message.contains("network has no outputs"),
        "{}",
        e.message
    );
    assert!(!out.exists());
}

#[test]
fn trtexec_lines_follow_the_plan() {
    let dir = tempfile::tempdir().unwrap();
    let p = plan(dir.path(), false);
    let typed = Path::new("m.trt.onnx");
    let fp32 = Path::new("m.trt.fp32.onnx");
    let cmds = trtexec_commands(&p, typed, Some(fp32), Path::new("m.engine"), None, None).unwrap();
    assert_eq!(cmds.len(), 3);
    // TensorRT-RTX: its own trtexec, strongly typed, no timing cache.
    assert_eq!(cmds[2].flavor, "TensorRT-RTX");
    assert!(
        cmds[2]
            .command
            .starts_with("tensorrt_rtx --onnx=m.trt.onnx")
            && !cmds[2].command.contains("--fp16"),
        "{}",
        cmds[2].command
    );
    assert_eq!(cmds[0].tensorrt_major, 11);
    assert!(cmds[0].command.contains("--onnx=m.trt.onnx"));
    assert!(!cmds[0].command.contains("--fp16"));
    assert_eq!(cmds[1].mode, "builder flags");
    for needle in [
        "--onnx=m.trt.fp32.onnx",
        "--fp16",
        "--layerPrecisions=/head/Softmax:fp32",
        "--precisionConstraints=obey",
        "--memPoolSize=workspace:1G",
        "--minShapes=x:1x4",
    ] {
        assert!(
            cmds[1].command.contains(needle),
            "{needle}: {}",
            cmds[1].command
        );
    }
    let only10 =
        trtexec_commands(&p, typed, Some(fp32), Path::new("m.engine"), Some(10), None).unwrap();
    assert_eq!(only10.len(), 1);
    assert_eq!(only10[0].tensorrt_major, 10);
}

#[test]
fn qdq_graphs_turn_on_int8_for_tensorrt_10() {
    let mut b = GraphBuilder::new();
    let x = b.input("x", DataType::Float, dims(&["4"]));
    let s = b.f32("s", &[], &[0.1]);
    let q = b.op("QuantizeLinear", &[x, s], vec![]);
    let d = b.op("DequantizeLinear", &[q, s], vec![]);
    b.output(d, "y", DataType::Float, Some(dims(&["4"])));
    let (p, _) = trt10_precision(&b.build(17), None, false);
    assert!(p.int8 && !p.fp16 && p.layer_overrides.is_empty());
    let (p, _) = trt10_precision(&model(), None, false);
    assert!(!p.is_set());
}

#[test]
fn a_missing_layer_is_said_as_such_with_the_way_out() {
    let e = trt_error(RuntimeError::Load {
        backend: "TensorRT".into(),
        message: "the TensorRT ONNX parser rejected the model: node `n21` (DFT): creator && \"Plugin not found, are the plugin name, version, and namespace correct?\"".into(),
    });
    let m = e.message;
    assert!(
        m.starts_with("TensorRT could not build the engine: "),
        "{m}"
    );
    assert!(
        m.ends_with("(this TensorRT's ONNX parser has no DFT layer and found no plugin of that name: run the DFT part outside the engine, e.g. in ONNX Runtime, or replace it)"),
        "{m}"
    );
    // Other parser errors are left as they are.
    let e = trt_error(RuntimeError::Load {
        backend: "TensorRT".into(),
        message: "the TensorRT ONNX parser rejected the model: node `/conv` (Conv): kernel shape mismatch".into(),
    });
    assert!(
        e.message.ends_with("kernel shape mismatch"),
        "{}",
        e.message
    );
}
