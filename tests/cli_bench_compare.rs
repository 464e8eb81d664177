//! `infopt bench` and `infopt compare` end to end, in tract and in ONNX Runtime.
//!
//! ORT runs use the library the binary discovers (`ORT_DYLIB_PATH`, `python3`, or this
//! checkout's `.venv` from `scripts/setup-venv.sh`). Without one, ORT tests say so and
//! pass, except under CI (`CI` set), where that is a failure.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use common::{fixture, infopt, json, ort_available, s, stderr};

use infopt_ir::{Model, SaveOptions, Tensor};

fn check_latency(l: &serde_json::Value, runs: u64) {
    let f = |k: &str| l[k].as_f64().unwrap_or_else(|| panic!("{k} in {l}"));
    assert_eq!(l["runs"], runs);
    assert!(f("min_ms") > 0.0);
    assert!(f("min_ms") <= f("median_ms"));
    assert!(f("median_ms") <= f("p90_ms"));
    assert!(f("p90_ms") <= f("p99_ms"));
    assert!(f("p99_ms") <= f("max_ms"));
}

#[test]
fn bench_in_tract_reports_percentiles_and_throughput() {
    let o = infopt(&[
        "bench",
        s(&fixture("cnn_bn_relu.onnx")),
        "--runs",
        "7",
        "--warmup",
        "2",
        "--input-shape",
        "input:batch=2",
        "--seed",
        "5",
        "--json",
    ]);
    let j = json(&o);
    assert_eq!(j["schema_version"], 1);
    assert_eq!(j["backend"]["name"], "tract");
    assert_eq!(j["backend"]["version"], "tract-onnx 0.23.9");
    assert_eq!(j["input_source"]["kind"], "generated");
    assert_eq!(j["input_source"]["seed"], 5);
    assert_eq!(
        (j["warmup"].clone(), j["runs"].clone()),
        (2.into(), 7.into())
    );
    assert_eq!(j["interleaved"], false);
    let m = &j["models"][0];
    assert_eq!(
        m["input_shapes"],
        serde_json::json!([["input", [2, 3, 32, 32]]])
    );
    assert_eq!(m["defaulted_dims"], serde_json::json!([]));
    check_latency(&m["latency"], 7);
    let mean = m["latency"]["mean_ms"].as_f64().unwrap();
    let tput = m["throughput_per_s"].as_f64().unwrap();
    assert!((tput * mean / 1e3 - 1.0).abs() < 1e-9, "{tput} {mean}");
    assert!(j["speedup"].is_null());
    // Not a terminal: one plain line per phase on stderr, no bar.
    let err = stderr(&o);
    assert!(
        err.contains("bench: warm-up (2 runs)") && err.contains("bench: timing (7 runs)"),
        "{err}"
    );
    assert!(!err.contains('\r'), "{err}");

    let o = infopt(&["bench", s(&fixture("cnn_bn_relu.onnx")), "--runs", "3"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let text = String::from_utf8(o.stdout).unwrap();
    for needle in [
        "backend     tract-onnx 0.23.9",
        "latency   median ",
        " p90 ",
        " p99 ",
        " min ",
        "runs/s",
        "input `input` dim 0 (batch) unbound, took 1",
    ] {
        assert!(text.contains(needle), "{needle}: {text}");
    }
}

#[test]
fn bench_in_ort_with_compare_interleaves_and_prints_the_ratio() {
    if !ort_available() {
        return;
    }
    let a = fixture("exported/resnet_block.onnx");
    let b = fixture("exported/resnet_block_dynamo.onnx");
    let o = infopt(&[
        "bench",
        s(&a),
        "--compare",
        s(&b),
        "--backend",
        "ort",
        "--threads",
        "1",
        "--ort-opt-level",
        "basic",
        "--runs",
        "6",
        "--warmup",
        "1",
        "--json",
    ]);
    let j = json(&o);
    assert_eq!(j["backend"]["name"], "ort");
    assert!(
        j["backend"]["version"]
            .as_str()
            .unwrap()
            .starts_with("onnxruntime 1."),
        "{j}"
    );
    assert_eq!(j["backend"]["threads"], 1);
    assert_eq!(j["backend"]["opt_level"], "basic");
    assert_eq!(
        j["backend"]["execution_providers"],
        serde_json::json!(["CPUExecutionProvider"])
    );
    assert_eq!(j["interleaved"], true);
    assert_eq!(j["models"].as_array().unwrap().len(), 2);
    assert_eq!(j["models"][1]["path"], s(&b));
    for m in j["models"].as_array().unwrap() {
        check_latency(&m["latency"], 6);
    }
    let ratio = j["models"][0]["latency"]["median_ms"].as_f64().unwrap()
        / j["models"][1]["latency"]["median_ms"].as_f64().unwrap();
    assert!((j["speedup"].as_f64().unwrap() - ratio).abs() < 1e-9);

    let o = infopt(&[
        "bench",
        s(&a),
        "--compare",
        s(&b),
        "--backend",
        "ort",
        "--runs",
        "3",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let text = String::from_utf8(o.stdout).unwrap();
    assert!(text.contains("backend     onnxruntime 1."), "{text}");
    assert!(text.contains("median ratio "), "{text}");
    assert!(
        text.contains("model       ") && text.contains("other       "),
        "{text}"
    );
}

/// Writes `cnn_bn_relu.onnx` with one weight of its first Conv changed into `dir`;
/// returns the model path and the name of that Conv's output.
fn perturbed_cnn(dir: &Path) -> (PathBuf, String) {
    let mut m = Model::load(&fixture("cnn_bn_relu.onnx")).unwrap();
    let g = &m.graph;
    let conv = g
        .topological_order()
        .unwrap()
        .into_iter()
        .find(|&n| g.node(n).op_type == "Conv")
        .unwrap();
    let node = g.node(conv);
    let w = node.inputs[1].unwrap();
    let out = g.value(node.outputs[0].unwrap()).name.clone();
    let t = g
        .value(w)
        .initializer
        .clone()
        .expect("the weight is an initializer");
    let mut values: Vec<f32> = t.to_f64_vec().unwrap().iter().map(|&v| v as f32).collect();
    values[0] += 1.0;
    m.graph.value_mut(w).initializer = Some(Tensor::from_f32(t.dims().to_vec(), &values));
    let path = dir.join("perturbed.onnx");
    m.save(&path, &SaveOptions::default()).unwrap();
    (path, out)
}

#[test]
fn compare_agrees_on_the_same_model_and_exits_4_on_a_perturbed_weight() {
    let dir = tempfile::tempdir().unwrap();
    let a = fixture("cnn_bn_relu.onnx");
    let (b, _) = perturbed_cnn(dir.path());
    let mut backends = vec!["tract"];
    if ort_available() {
        backends.push("ort");
    }
    for backend in backends {
        let o = infopt(&["compare", s(&a), s(&a), "--backend", backend, "--json"]);
        let j = json(&o);
        assert_eq!(j["passed"], true, "{backend}");
        assert_eq!(j["backend"]["name"], backend);
        assert_eq!(j["outputs"][0]["name"], "logits");
        assert_eq!(j["outputs"][0]["max_abs"], 0.0);
        assert_eq!(j["outputs"][0]["cosine"], 1.0);

        let o = infopt(&["compare", s(&a), s(&b), "--backend", backend]);
        assert_eq!(o.status.code(), Some(4), "{backend}: {}", stderr(&o));
        let text = String::from_utf8_lossy(&o.stdout);
        assert!(text.contains("MISMATCH"), "{text}");
        assert!(text.contains("B differs from A: 1 of 1 outputs"), "{text}");
        let err = stderr(&o);
        assert!(
            err.starts_with("error: ")
                && err.contains("does not match")
                && err.contains("output(s) logits"),
            "{err}"
        );
        assert_eq!(err.lines().count(), 1, "{err}");

        let o = infopt(&["compare", s(&a), s(&b), "--backend", backend, "--json"]);
        assert_eq!(o.status.code(), Some(4));
        let j: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        let out = &j["outputs"][0];
        assert_eq!(j["passed"], false);
        assert_eq!(out["within_tolerance"], false);
        assert!(out["max_abs"].as_f64().unwrap() > 1e-3, "{out}");
        assert!(out["mismatches"].as_u64().unwrap() > 0);
        assert!(out["cosine"].as_f64().unwrap() < 1.0);

        // A huge tolerance accepts the difference.
        let o = infopt(&[
            "compare",
            s(&a),
            s(&b),
            "--backend",
            backend,
            "--atol",
            "1e9",
        ]);
        assert!(o.status.success(), "{backend}: {}", stderr(&o));
    }
}

#[test]
fn intermediate_names_the_perturbed_weights_first_consumer() {
    if !ort_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let a = fixture("cnn_bn_relu.onnx");
    let (b, conv_out) = perturbed_cnn(dir.path());
    // --intermediate runs in ort by default.
    let o = infopt(&["compare", s(&a), s(&b), "--intermediate", "--json"]);
    assert_eq!(o.status.code(), Some(4), "{}", stderr(&o));
    let j: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(j["backend"]["name"], "ort");
    let i = &j["intermediate"];
    assert_eq!(i["first_divergence"]["name"], conv_out.as_str(), "{i}");
    assert_eq!(i["first_divergence"]["op_type"], "Conv");
    let tensors = i["tensors"].as_array().unwrap();
    assert_eq!(i["compared"].as_u64().unwrap() as usize, tensors.len());
    assert!(tensors.len() >= 10, "{}", tensors.len());
    // Everything before the Conv agrees; the Conv's output is the first that does not.
    let first_bad = tensors
        .iter()
        .position(|t| t["agreement"]["within_tolerance"] == false)
        .unwrap();
    assert_eq!(tensors[first_bad]["name"], conv_out.as_str());
    assert!(stderr(&o).contains(&format!("first diverging tensor: `{conv_out}`")));

    let o = infopt(&["compare", s(&a), s(&b), "--intermediate"]);
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(
        text.contains(&format!(
            "first divergence: `{conv_out}` (output of Conv node"
        )),
        "{text}"
    );

    // The same model: every intermediate agrees.
    let o = infopt(&["compare", s(&a), s(&a), "--intermediate", "--json"]);
    let j = json(&o);
    assert_eq!(j["intermediate"]["diverging"], 0);
    assert!(j["intermediate"]["first_divergence"].is_null());
}

/// An `.npy` image (format 1.0) of little-endian data.
fn npy(descr: &str, shape: &[usize], data: &[u8]) -> Vec<u8> {
    let dims: Vec<String> = shape.iter().map(|d| d.to_string()).collect();
    let shape = if dims.len() == 1 {
        format!("({},)", dims[0])
    } else {
        format!("({})", dims.join(", "))
    };
    let mut header = format!("{{'descr': '{descr}', 'fortran_order': False, 'shape': {shape}, }}");
    while (10 + header.len() + 1) % 64 != 0 {
        header.push(' ');
    }
    header.push('\n');
    let mut out = b"\x93NUMPY\x01\x00".to_vec();
    out.extend_from_slice(&(header.len() as u16).to_le_bytes());
    out.extend_from_slice(header.as_bytes());
    out.extend_from_slice(data);
    out
}

#[test]
fn inputs_from_a_folder_of_npy_fix_the_shapes() {
    let dir = tempfile::tempdir().unwrap();
    let (batch, seq) = (3usize, 7usize);
    // f64 data for an f32 input and i32 data for an i64 input: converted.
    let hidden: Vec<u8> = (0..batch * seq * 32)
        .flat_map(|i| ((i % 13) as f64 / 13.0).to_le_bytes())
        .collect();
    let mask: Vec<u8> = (0..batch * seq).flat_map(|_| 1i32.to_le_bytes()).collect();
    std::fs::write(
        dir.path().join("hidden.npy"),
        npy("<f8", &[batch, seq, 32], &hidden),
    )
    .unwrap();
    std::fs::write(
        dir.path().join("attention_mask.npy"),
        npy("<i4", &[batch, seq], &mask),
    )
    .unwrap();
    let model = fixture("transformer_block.onnx");
    let o = infopt(&[
        "bench",
        s(&model),
        "--inputs",
        s(dir.path()),
        "--runs",
        "2",
        "--warmup",
        "0",
        "--json",
    ]);
    let j = json(&o);
    assert_eq!(j["input_source"]["kind"], "file");
    assert_eq!(
        j["models"][0]["input_shapes"],
        serde_json::json!([["hidden", [3, 7, 32]], ["attention_mask", [3, 7]]])
    );
    assert_eq!(
        j["models"][0]["inputs"],
        "hidden f32 [3,7,32], attention_mask i64 [3,7]"
    );
    let o = infopt(&[
        "compare",
        s(&model),
        s(&model),
        "--inputs",
        s(dir.path()),
        "--json",
    ]);
    assert_eq!(json(&o)["passed"], true);

    // An array that is not an input, a missing one, and a float array for an int input.
    std::fs::write(
        dir.path().join("extra.npy"),
        npy("<f4", &[1], &1f32.to_le_bytes()),
    )
    .unwrap();
    let o = infopt(&["bench", s(&model), "--inputs", s(dir.path()), "--runs", "1"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("a shape was given for `extra`, which is not a model input")
            && stderr(&o).contains("must be named after the model inputs"),
        "{}",
        stderr(&o)
    );
    std::fs::remove_file(dir.path().join("extra.npy")).unwrap();
    let fmask: Vec<u8> = (0..batch * seq).flat_map(|_| 1f32.to_le_bytes()).collect();
    std::fs::write(
        dir.path().join("attention_mask.npy"),
        npy("<f4", &[batch, seq], &fmask),
    )
    .unwrap();
    let o = infopt(&["bench", s(&model), "--inputs", s(dir.path()), "--runs", "1"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("cannot use f32 data for an input of type i64"),
        "{}",
        stderr(&o)
    );
    std::fs::remove_file(dir.path().join("attention_mask.npy")).unwrap();
    let o = infopt(&["bench", s(&model), "--inputs", s(dir.path()), "--runs", "1"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("has no array for input `attention_mask`"),
        "{}",
        stderr(&o)
    );
}

/// `np.savez_compressed` through the checkout's venv (deflate-compressed npz).
#[test]
fn inputs_from_a_numpy_npz() {
    let python = Path::new(env!("CARGO_MANIFEST_DIR")).join(".venv/bin/python");
    if !python.is_file() {
        assert!(std::env::var_os("CI").is_none(), "CI has the venv");
        eprintln!("skipping: no .venv (scripts/setup-venv.sh)");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let npz = dir.path().join("in.npz");
    let script = format!(
        "import numpy as np\nrng = np.random.default_rng(0)\nnp.savez_compressed({:?}, input=rng.standard_normal((2, 3, 32, 32)).astype(np.float32))",
        s(&npz)
    );
    let st = Command::new(&python)
        .args(["-c", &script])
        .status()
        .unwrap();
    assert!(st.success());
    let model = fixture("cnn_bn_relu.onnx");
    let o = infopt(&[
        "bench",
        s(&model),
        "--inputs",
        s(&npz),
        "--runs",
        "1",
        "--json",
    ]);
    let j = json(&o);
    assert_eq!(
        j["models"][0]["input_shapes"],
        serde_json::json!([["input", [2, 3, 32, 32]]])
    );
    assert_eq!(j["input_source"]["path"], s(&npz));
    // The shape from the file and a contradicting --input-shape.
    let o = infopt(&[
        "bench",
        s(&model),
        "--inputs",
        s(&npz),
        "--input-shape",
        "input:1x3x32x32",
    ]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("contradicts the array for `input`"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn missing_ort_library_is_a_usage_error_that_says_how_to_fix_it() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("libonnxruntime.so.1.99.0");
    let model = fixture("cnn_bn_relu.onnx");
    let o = common::infopt_command()
        .args(["bench", s(&model), "--backend", "ort"])
        .env("ORT_DYLIB_PATH", &missing)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert_eq!(
        stderr(&o),
        format!(
            "error: ONNX Runtime library not found: ORT_DYLIB_PATH={} is not a file; fix or unset it (unset, infopt asks python3 for the onnxruntime package); install it with `pip install onnxruntime` (for the python3 on PATH, or in a .venv of this project) or set ORT_DYLIB_PATH to libonnxruntime.so\n",
            missing.display()
        )
    );
    // --ort-dylib wins over the variable; a file that is not ONNX Runtime is refused.
    let fake = dir.path().join("libonnxruntime.so");
    std::fs::write(&fake, b"not a shared library").unwrap();
    let o = common::infopt_command()
        .args([
            "compare",
            s(&model),
            s(&model),
            "--backend",
            "ort",
            "--ort-dylib",
            s(&fake),
        ])
        .env("ORT_DYLIB_PATH", &missing)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    let err = stderr(&o);
    assert!(
        err.starts_with(&format!("error: ONNX Runtime library {}", fake.display()))
            && err.contains("(from --ort-dylib) cannot be used"),
        "{err}"
    );
    assert_eq!(err.lines().count(), 1, "{err}");
}

#[test]
fn bad_backend_options_are_usage_errors() {
    let model = fixture("cnn_bn_relu.onnx");
    let o = infopt(&["bench", s(&model), "--backend", "tensorflow"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("unknown backend `tensorflow` (choose one of tract, ort)"));
    let o = infopt(&[
        "bench",
        s(&model),
        "--ort-opt-level",
        "max",
        "--backend",
        "ort",
    ]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("unknown ONNX Runtime optimization level `max`"));
    let o = infopt(&["bench", s(&model), "--runs", "0"]);
    assert_eq!(o.status.code(), Some(2));
    let o = infopt(&["bench", s(&model), "--input-shape", "nope:batch=2"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("`nope` is not a model input"),
        "{}",
        stderr(&o)
    );
    let o = infopt(&["bench", s(&model), "--input-shape", "input:seq=2"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("has no dim named `seq`"),
        "{}",
        stderr(&o)
    );
    let o = infopt(&["bench", s(&fixture("nope.onnx"))]);
    assert_eq!(o.status.code(), Some(3));
    if ort_available() {
        let o = infopt(&["bench", s(&model), "--backend", "ort", "--ep", "warp-drive"]);
        assert_eq!(o.status.code(), Some(2));
        assert!(
            stderr(&o).contains("unknown execution provider `warp-drive`"),
            "{}",
            stderr(&o)
        );
        let o = infopt(&["bench", s(&model), "--backend", "ort", "--threads", "0"]);
        assert_eq!(o.status.code(), Some(2));
    }
}

/// `--io-binding` (device-resident timing) needs ONNX Runtime's CUDA provider: in tract
/// or on the CPU provider it is refused with the flags to add, on every command that
/// times; host-to-host timing says so in the JSON report.
#[test]
fn io_binding_without_cuda_is_refused_and_reports_say_which_timing() {
    let model = fixture("cnn_bn_relu.onnx");
    let want = "device-resident timing (--io-binding) needs ONNX Runtime with the CUDA execution provider: add --backend ort --ep cuda";
    let o = infopt(&["bench", s(&model), "--io-binding"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains(want), "{}", stderr(&o));
    let out = std::env::temp_dir().join(format!("infopt_iob_{}.onnx", std::process::id()));
    let o = infopt(&[
        "optimize",
        s(&model),
        "-o",
        s(&out),
        "--bench",
        "--io-binding",
    ]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains(want), "{}", stderr(&o));
    assert!(!out.exists(), "nothing is written after a usage error");
    let o = infopt(&["bench", s(&model), "--runs", "3", "--json"]);
    assert_eq!(json(&o)["backend"]["transfer"], "host-to-host");
    if ort_available() {
        let o = infopt(&["bench", s(&model), "--backend", "ort", "--io-binding"]);
        assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
        assert!(stderr(&o).contains(want), "{}", stderr(&o));
        let o = infopt(&[
            "compare",
            s(&model),
            s(&model),
            "--backend",
            "ort",
            "--io-binding",
        ]);
        assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
        assert!(stderr(&o).contains(want), "{}", stderr(&o));
        let o = infopt(&[
            "bench",
            s(&model),
            "--backend",
            "ort",
            "--runs",
            "3",
            "--json",
        ]);
        assert_eq!(json(&o)["backend"]["transfer"], "host-to-host");
    }
}

/// `INFOPT_ORT_PROFILE_DIR`: each ONNX Runtime session writes ONNX Runtime's
/// own profile there (one event per node run, with its op type and
/// provider), and nothing else about the run changes.
#[test]
fn ort_profile_dir_gets_one_profile_per_session_with_node_events() {
    if !ort_available() {
        return;
    }
    let dir = tempfile::tempdir().expect("temp dir");
    let profiles = dir.path().join("profiles");
    let o = common::infopt_command()
        .args([
            "bench",
            s(&fixture("cnn_bn_relu.onnx")),
            "--backend",
            "ort",
            "--runs",
            "3",
            "--warmup",
            "1",
            "--json",
        ])
        .env("INFOPT_ORT_PROFILE_DIR", &profiles)
        .output()
        .expect("run infopt");
    let j = json(&o);
    assert_eq!(j["backend"]["name"], "ort");
    let files: Vec<PathBuf> = std::fs::read_dir(&profiles)
        .expect("the profile folder was created")
        .map(|e| e.expect("dir entry").path())
        .collect();
    assert!(!files.is_empty(), "no profile written");
    for f in &files {
        let name = f.file_name().and_then(|n| n.to_str()).unwrap_or_default();
        assert!(
            name.starts_with("session-") && name.ends_with(".json"),
            "{name}"
        );
    }
    let events: Vec<serde_json::Value> = files
        .iter()
        .flat_map(|f| {
            let text = std::fs::read_to_string(f).expect("profile readable");
            serde_json::from_str::<Vec<serde_json::Value>>(&text).expect("a JSON array")
        })
        .collect();
    let convs = events
        .iter()
        .filter(|e| e["cat"] == "Node" && e["args"]["op_name"] == "Conv")
        .count();
    // 2 Conv nodes (or ORT's fusions of them) over at least 4 runs.
    assert!(
        events.iter().any(|e| e["cat"] == "Node"
            && e["args"]["provider"] == "CPUExecutionProvider"
            && e["dur"].as_u64().is_some()),
        "no node event with a provider and a duration"
    );
    let fused = events
        .iter()
        .filter(|e| e["cat"] == "Node" && e["args"]["op_name"] == "FusedConv")
        .count();
    assert!(convs + fused >= 8, "conv events: {convs} + {fused} fused");
}
