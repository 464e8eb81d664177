//! Release gates end to end: exit codes (0 pass, 5 a gate failed, 2 a misspelled gate),
//! the gate table in every report (terminal, JSON, Markdown, JUnit XML), pipeline YAML
//! gates, and `$GITHUB_STEP_SUMMARY`.

mod common;

use std::path::Path;
use std::process::Output;

use common::{fixture, infopt, s, stderr};

fn run_env(args: &[&str], env: &[(&str, &Path)]) -> Output {
    let mut c = common::infopt_command();
    c.args(args);
    for (k, v) in env {
        c.env(k, v);
    }
    c.output().expect("run infopt")
}

fn read_json(p: &Path) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap()
}

fn gate<'a>(r: &'a serde_json::Value, name: &str) -> &'a serde_json::Value {
    r["gates"]["results"]
        .as_array()
        .unwrap()
        .iter()
        .find(|g| g["gate"] == name)
        .unwrap_or_else(|| panic!("no gate {name} in {}", r["gates"]))
}

#[test]
fn optimize_passing_gates_exit_0_and_report_every_gate() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("o.onnx");
    let (json, md, xml) = (
        tmp.path().join("r.json"),
        tmp.path().join("r.md"),
        tmp.path().join("r.xml"),
    );
    let o = infopt(&[
        "optimize",
        s(&fixture("cnn_bn_relu.onnx")),
        "-o",
        s(&out),
        "--gate",
        "min_cosine=0.9999",
        "--gate",
        "max_abs@logits=1e-4",
        "--gate",
        "min_topk_agreement=1.0",
        "--gate",
        "max_file_size=1M",
        "--gate",
        "max_nodes=13",
        "--gate",
        "forbid_ops=com.microsoft,Loop",
        "--gate",
        "max_opset=17",
        "--report",
        s(&json),
        "--report",
        s(&md),
        "--report",
        s(&xml),
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let r = read_json(&json);
    assert_eq!(r["gates"]["passed"], true);
    assert_eq!(r["gates"]["results"].as_array().unwrap().len(), 8);
    assert_eq!(gate(&r, "max_nodes")["measured"], 13.0);
    assert_eq!(gate(&r, "min_topk_agreement@logits")["measured"], 1.0);
    assert_eq!(gate(&r, "forbid_ops@Loop")["passed"], true);
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(text.contains("Release gates: all 8 passed"), "{text}");
    let md = std::fs::read_to_string(&md).unwrap();
    assert!(md.starts_with("## ✅ infopt optimize"), "{md}");
    assert!(md.contains("| `max_nodes` | 13 | 13 | ✅"), "{md}");
    assert!(md.contains("| `BatchNormalization` | 4 | 1 | -3 |"), "{md}");
    let xml = std::fs::read_to_string(&xml).unwrap();
    assert!(xml.contains("tests=\"9\" failures=\"0\""), "{xml}");
    assert!(!xml.contains("<failure"), "{xml}");
}

#[test]
fn optimize_failing_gate_exits_5_after_writing_reports() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("o.onnx");
    let json = tmp.path().join("r.json");
    let xml = tmp.path().join("r.xml");
    let o = infopt(&[
        "optimize",
        s(&fixture("cnn_bn_relu.onnx")),
        "-o",
        s(&out),
        "--gate",
        "max_nodes=12",
        "--gate",
        "forbid_ops=Gemm",
        "--gate",
        "min_cosine=0.99",
        "--report",
        s(&json),
        "--report",
        s(&xml),
    ]);
    assert_eq!(o.status.code(), Some(5), "{}", stderr(&o));
    let err = stderr(&o);
    assert!(
        err.contains("error: 2 of 3 release gates failed: max_nodes (13 nodes (subgraphs included) > 12); forbid_ops@Gemm (1 Gemm node(s)"),
        "{err}"
    );
    // The model itself is verified, so it is written; the gate decides the release.
    assert!(out.exists());
    let r = read_json(&json);
    assert_eq!(r["gates"]["passed"], false);
    assert_eq!(gate(&r, "min_cosine@logits")["passed"], true);
    assert_eq!(gate(&r, "max_nodes")["passed"], false);
    let xml = std::fs::read_to_string(&xml).unwrap();
    assert!(xml.contains("tests=\"4\" failures=\"2\""), "{xml}");
    assert!(
        xml.contains("<failure message=\"13 nodes (subgraphs included) &gt; 12\" type=\"gate\">"),
        "{xml}"
    );
}

#[test]
fn unknown_gate_is_a_usage_error_with_a_suggestion() {
    let o = infopt(&[
        "optimize",
        s(&fixture("cnn_bn_relu.onnx")),
        "--gate",
        "max_abs_diff=1",
    ]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("unknown gate 'max_abs_diff'; did you mean 'max_abs'?"),
        "{}",
        stderr(&o)
    );
    let o = infopt(&[
        "optimize",
        s(&fixture("cnn_bn_relu.onnx")),
        "--report",
        "r.txt",
    ]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains(".json (JSON), .md (Markdown) or .xml"));
}

#[test]
fn pipeline_gates_apply_and_the_command_line_overrides_them() {
    let tmp = tempfile::tempdir().unwrap();
    let cfg = tmp.path().join("p.yaml");
    std::fs::write(
        &cfg,
        "version: 1\npasses: [fuse-conv-bn, eliminate-dead]\ngates:\n  max_nodes: 5\n  min_cosine: { logits: 0.999 }\n  forbid_ops: [com.microsoft]\n",
    )
    .unwrap();
    let out = tmp.path().join("o.onnx");
    let model = fixture("cnn_bn_relu.onnx");
    let o = infopt(&[
        "optimize",
        s(&model),
        "-o",
        s(&out),
        "-c",
        s(&cfg),
        "--json",
    ]);
    assert_eq!(o.status.code(), Some(5), "{}", stderr(&o));
    let r: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(gate(&r, "max_nodes")["passed"], false);
    assert_eq!(gate(&r, "min_cosine@logits")["passed"], true);
    let o = infopt(&[
        "optimize",
        s(&model),
        "-o",
        s(&out),
        "-c",
        s(&cfg),
        "--gate",
        "max_nodes=100",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    std::fs::write(
        &cfg,
        "version: 1\npasses: [eliminate-dead]\ngates:\n  max_node: 5\n",
    )
    .unwrap();
    let o = infopt(&["optimize", s(&model), "-o", s(&out), "-c", s(&cfg)]);
    assert_eq!(o.status.code(), Some(2));
    let err = stderr(&o);
    assert!(err.contains("max_node") && err.contains("line 4"), "{err}");
}

#[test]
fn compare_accuracy_gates_decide_instead_of_the_tolerance() {
    let tmp = tempfile::tempdir().unwrap();
    let opt = tmp.path().join("o.onnx");
    let model = fixture("cnn_bn_relu.onnx");
    let o = infopt(&["optimize", s(&model), "-o", s(&opt)]);
    assert!(o.status.success(), "{}", stderr(&o));
    // Exact tolerance: compare alone says exit 4; a cosine gate decides instead.
    let o = infopt(&["compare", s(&model), s(&opt), "--atol", "0", "--rtol", "0"]);
    assert_eq!(o.status.code(), Some(4), "{}", stderr(&o));
    let o = infopt(&[
        "compare",
        s(&model),
        s(&opt),
        "--atol",
        "0",
        "--rtol",
        "0",
        "--gate",
        "min_cosine=0.9999",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let o = infopt(&[
        "compare",
        s(&model),
        s(&opt),
        "--gate",
        "max_abs=0",
        "--json",
    ]);
    assert_eq!(o.status.code(), Some(5), "{}", stderr(&o));
    let r: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(gate(&r, "max_abs@logits")["passed"], false);
}

#[test]
fn latency_gate_fails_only_on_a_significant_slowdown() {
    let model = fixture("cnn_bn_relu.onnx");
    // A model against itself: ratio ~1. Under a generous threshold it passes; under a
    // threshold far below 1 the whole interval is above it and it fails.
    let o = infopt(&[
        "compare",
        s(&model),
        s(&model),
        "--gate",
        "max_latency_ratio=3",
        "--json",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let r: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let l = &r["gates"]["latency"];
    assert!(l["runs"].as_u64().unwrap() >= 30);
    assert_eq!(
        l["reference_samples_ms"].as_array().unwrap().len() as u64,
        l["runs"].as_u64().unwrap()
    );
    let (lo, ratio, hi) = (
        l["ci_low"].as_f64().unwrap(),
        l["ratio"].as_f64().unwrap(),
        l["ci_high"].as_f64().unwrap(),
    );
    assert!(lo <= ratio && ratio <= hi, "{l}");
    assert!(
        l["verdict"].as_str().unwrap().contains("95% CI → pass"),
        "{l}"
    );
    let o = infopt(&[
        "bench",
        s(&model),
        "--compare",
        s(&model),
        "--gate",
        "max_latency_ratio=0.3",
    ]);
    assert_eq!(o.status.code(), Some(5), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("significantly above 0.3"),
        "{}",
        stderr(&o)
    );
    // The 10th-percentile statistic decides the same way and says which it used.
    let o = infopt(&[
        "bench",
        s(&model),
        "--compare",
        s(&model),
        "--gate",
        "max_latency_ratio=0.3,q=0.1",
        "--json",
    ]);
    assert_eq!(o.status.code(), Some(5), "{}", stderr(&o));
    let r: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(r["gates"]["latency"]["statistic"], "p10");
    assert!(
        r["gates"]["latency"]["verdict"]
            .as_str()
            .unwrap()
            .starts_with("p10 ratio ")
    );
    let o = infopt(&[
        "bench",
        s(&model),
        "--compare",
        s(&model),
        "--gate",
        "max_latency_ratio=1.1,q=0.99",
    ]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    // bench has no outputs to gate.
    let o = infopt(&["bench", s(&model), "--gate", "min_cosine=0.9"]);
    assert_eq!(o.status.code(), Some(2));
}

#[test]
fn baseline_report_feeds_a_later_latency_gate() {
    let tmp = tempfile::tempdir().unwrap();
    let base = tmp.path().join("base.json");
    let model = fixture("cnn_bn_relu.onnx");
    let o = infopt(&[
        "bench",
        s(&model),
        "--compare",
        s(&model),
        "--gate",
        "max_latency_ratio=3",
        "--report",
        s(&base),
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let o = infopt(&[
        "bench",
        s(&model),
        "--baseline",
        s(&base),
        "--gate",
        "max_latency_ratio=3",
        "--json",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let r: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(r["gates"]["latency"]["paired"], false);
    assert!(
        r["gates"]["latency"]["reference"]
            .as_str()
            .unwrap()
            .starts_with("baseline ")
    );
    // A file without samples is a usage error naming what is missing.
    let o = infopt(&[
        "bench",
        s(&model),
        "--baseline",
        s(&fixture("cnn_bn_relu.onnx")),
        "--gate",
        "max_latency_ratio=3",
    ]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
}

#[test]
fn github_step_summary_gets_the_markdown_appended() {
    let tmp = tempfile::tempdir().unwrap();
    let summary = tmp.path().join("summary.md");
    std::fs::write(&summary, "previous step\n").unwrap();
    let out = tmp.path().join("o.onnx");
    let model = fixture("cnn_bn_relu.onnx");
    let args = [
        "optimize",
        s(&model),
        "-o",
        s(&out),
        "--gate",
        "max_nodes=100",
    ];
    for _ in 0..2 {
        let o = run_env(&args, &[("GITHUB_STEP_SUMMARY", &summary)]);
        assert!(o.status.success(), "{}", stderr(&o));
    }
    let text = std::fs::read_to_string(&summary).unwrap();
    assert!(
        text.starts_with("previous step\n## ✅ infopt optimize"),
        "{text}"
    );
    assert_eq!(text.matches("## ✅ infopt optimize").count(), 2, "{text}");
}

#[test]
fn doctor_exits_0_and_says_how_to_fix_what_is_missing() {
    let missing = Path::new("/nonexistent/libonnxruntime.so");
    let o = run_env(&["doctor", "--json"], &[("ORT_DYLIB_PATH", missing)]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let r: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let item = |n: &str| {
        r["items"]
            .as_array()
            .unwrap()
            .iter()
            .find(|i| i["name"] == n)
            .unwrap()
            .clone()
    };
    assert_eq!(item("tract")["status"], "ok");
    assert!(item("tract")["version"].as_str().unwrap().contains("0.23"));
    let ort = item("ONNX Runtime");
    assert_eq!(ort["status"], "missing");
    assert!(
        ort["fix"]
            .as_str()
            .unwrap()
            .contains("pip install onnxruntime")
    );
    assert!(ort["detail"].as_str().unwrap().contains("/nonexistent"));
    assert!(item("GPU")["detail"].as_str().unwrap().len() > 3);
    assert!(r["cpu"]["logical_cores"].as_u64().unwrap() >= 1);
    let o = infopt(&["doctor"]);
    assert_eq!(o.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&o.stdout).contains("component"));
}
