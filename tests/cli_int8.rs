//! `optimize --int8`: calibration inside the pipeline, Q/DQ placement,
//! held-out accuracy in the report, and the accuracy-driven float fallback.

mod common;

use common::*;

use std::path::{Path, PathBuf};

fn run_json(args: &[&str]) -> (std::process::Output, serde_json::Value) {
    let o = infopt(args);
    let v = serde_json::from_slice(&o.stdout).unwrap_or(serde_json::Value::Null);
    (o, v)
}

/// `infopt ARGS` with a debug-build timing hook (`INFOPT_TEST_INT8_TIMED`,
/// `INFOPT_TEST_INT8_ANSWER`) standing for figures the tests' models are
/// too small to give; the output and the JSON report (Null if none).
fn run_hooked(
    args: &[&str],
    hook: &str,
    figures: &str,
) -> (std::process::Output, serde_json::Value) {
    run_hooks(args, &[(hook, figures)])
}

/// [`run_hooked`] with several hooks at once.
fn run_hooks(args: &[&str], hooks: &[(&str, &str)]) -> (std::process::Output, serde_json::Value) {
    let o = common::infopt_command()
        .args(args)
        .envs(hooks.iter().copied())
        .output()
        .expect("run infopt");
    let v = serde_json::from_slice(&o.stdout).unwrap_or(serde_json::Value::Null);
    (o, v)
}

/// `optimize MODEL --int8 --calib-data random:N EXTRA... --json` into a
/// fresh folder: the folder (kept alive), the output path, the process
/// output and the JSON report.
fn int8_random_run(
    model: &Path,
    samples: &str,
    extra: &[&str],
) -> (
    tempfile::TempDir,
    PathBuf,
    std::process::Output,
    serde_json::Value,
) {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("q.onnx");
    let data = format!("random:{samples}");
    let mut args = vec![
        "optimize",
        s(model),
        "-o",
        s(&out),
        "--int8",
        "--calib-data",
        &data,
        "--json",
    ];
    args.extend_from_slice(extra);
    let (o, r) = run_json(&args);
    (dir, out, o, r)
}

#[test]
fn int8_with_random_calibration_reports_held_out_accuracy() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("q.onnx");
    let (o, r) = run_json(&[
        "optimize",
        s(&fixture("cnn_bn_relu.onnx")),
        "-o",
        s(&out),
        "--int8",
        "--calib-data",
        "random:12",
        "--calib-samples",
        "8",
        "--held-out",
        "4",
        "--seed",
        "7",
        "--json",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let ops = r["ops"].as_array().unwrap();
    let after = |op: &str| {
        ops.iter()
            .find(|x| x["op"] == op)
            .map(|x| x["after"].as_u64().unwrap())
            .unwrap_or(0)
    };
    assert!(after("QuantizeLinear") >= 4, "{ops:?}");
    assert!(after("DequantizeLinear") >= 8, "{ops:?}");
    let q = &r["int8"];
    assert_eq!(q["calibration_samples"], 8);
    assert_eq!(q["meaningful"], false);
    assert_eq!(
        q["calibration_data"],
        "12 seeded random samples (seed 7; meaningless for accuracy)"
    );
    assert_eq!(q["held_out"]["skipped"], 8);
    assert_eq!(q["held_out"]["samples"], 4);
    let cos = q["held_out"]["outputs"][0]["cosine"].as_f64().unwrap();
    assert!(cos > 0.99, "{cos}");
    assert!(!q["worst_layers"].as_array().unwrap().is_empty());
    assert!(r["notes"].to_string().contains("accuracy target"));
    assert!(out.exists());
}

#[test]
fn int8_calibrates_on_stacked_samples_of_a_dynamic_batch_model() {
    // cnn_bn_relu's batch is a symbol: the verifier runs it at batch 2, the
    // samples are batch 1. Calibration and the held-out evaluation load the
    // model at the samples' shapes (this was exit 7: "dim 0 is symbol `N`,
    // requested as 1, but the symbol binding sets `N` = 2").
    let dir = tempfile::tempdir().unwrap();
    let data = stacked(dir.path(), 12);
    let out = dir.path().join("q.onnx");
    let (o, r) = run_json(&[
        "optimize",
        s(&fixture("cnn_bn_relu.onnx")),
        "-o",
        s(&out),
        "--int8",
        "--calib-data",
        s(&data),
        "--calib-samples",
        "8",
        "--held-out",
        "4",
        "--json",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let q = &r["int8"];
    assert_eq!(q["calibration_samples"], 8);
    assert_eq!(q["meaningful"], true);
    assert_eq!(q["held_out"]["samples"], 4);
    let cos = q["held_out"]["outputs"][0]["cosine"].as_f64().unwrap();
    assert!(cos > 0.99, "{cos}");
    assert!(out.exists());
}

#[test]
fn unreachable_target_keeps_layers_in_float_and_says_what_each_cost() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("q.onnx");
    let (o, r) = run_json(&[
        "optimize",
        s(&fixture("cnn_bn_relu.onnx")),
        "-o",
        s(&out),
        "--int8",
        "--calib-data",
        "random:10",
        "--calib-samples",
        "6",
        "--held-out",
        "4",
        "--int8-min-cosine",
        "0.999999",
        "--json",
    ]);
    // Either the target is met with layers in float, or verification refuses.
    let kept = r["int8"]["kept_float"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert!(!kept.is_empty(), "{}", stderr(&o));
    let ranked = !r["int8"]["candidates"]
        .as_array()
        .is_none_or(|c| c.is_empty());
    for k in &kept {
        assert!(k["layer"].as_str().is_some_and(|l| !l.is_empty()));
        assert!(
            matches!(k["kind"].as_str(), Some("layer" | "activation")),
            "{k}"
        );
        assert!(k["cosine_after"].as_f64().unwrap() >= k["cosine_before"].as_f64().unwrap() - 1e-3);
        // Each kept one was judged alone in INT8 first (its own harm),
        // unless the search stopped at its bound.
        if ranked {
            let alone = k["cosine_alone"].as_f64().unwrap();
            assert!((0.0..=1.0).contains(&alone), "{alone}");
            assert!(k["loss_alone"].as_f64().unwrap() >= 0.0, "{k}");
        }
    }
    // Every candidate measured carries its loss.
    for c in r["int8"]["candidates"]
        .as_array()
        .cloned()
        .unwrap_or_default()
    {
        assert!(c["loss"].as_f64().is_some_and(|l| l >= 0.0), "{c}");
        assert!(c["harm"].as_f64().is_some(), "{c}");
    }
}

#[test]
fn int8_without_data_or_ranges_is_a_usage_error() {
    let o = infopt(&[
        "optimize",
        s(&fixture("cnn_bn_relu.onnx")),
        "-o",
        "/tmp/never.onnx",
        "--int8",
    ]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("--calib-data"), "{}", stderr(&o));
}

/// A folder of `n` batch-1 samples for cnn_bn_relu (`input` [batch,3,32,32]):
/// smooth images (a few sinusoids), deterministic, different per sample.
fn image_samples(dir: &std::path::Path, n: usize, shape: &[usize]) -> std::path::PathBuf {
    let data = dir.join("calib");
    std::fs::create_dir_all(&data).unwrap();
    let count: usize = shape.iter().product();
    for i in 0..n {
        let values: Vec<f32> = (0..count)
            .map(|k| {
                let (x, y) = ((k % 32) as f32, ((k / 32) % 32) as f32);
                let c = (k / 1024) as f32;
                ((x * 0.3 + i as f32).sin() + (y * 0.2 + c + i as f32 * 0.7).cos()) * 1.5
            })
            .collect();
        std::fs::write(data.join(format!("{i:03}.npy")), npy_f32(shape, &values)).unwrap();
    }
    data
}

#[test]
fn as_typed_batch_one_samples_bind_a_dynamic_batch_and_no_held_out_is_reported() {
    let dir = tempfile::tempdir().unwrap();
    let data = image_samples(dir.path(), 6, &[1, 3, 32, 32]);
    let out = dir.path().join("q.onnx");
    // No --input-shape, no --backend, no method: the command as a user types it.
    let (o, r) = run_json(&[
        "optimize",
        s(&fixture("cnn_bn_relu.onnx")),
        "-o",
        s(&out),
        "--int8",
        "--calib-data",
        s(&data),
        "--json",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(out.exists());
    let shapes = r["verification"]["input_shapes"].to_string();
    assert!(shapes.contains("[1,3,32,32]"), "{shapes}");
    let q = &r["int8"];
    assert_eq!(q["calibration_samples"], 6);
    assert_eq!(q["held_out"]["on_calibration_samples"], true);
    assert_eq!(q["held_out"]["samples"], 6);
    assert_eq!(q["target_met"], true);
    // The logits come from a Gemm: judged by top-1 agreement too.
    assert_eq!(q["classifier_outputs"][0], "logits");
    assert!(q["held_out"]["top1_agreement"]["logits"].as_f64().is_some());
    let notes = r["notes"].to_string();
    assert!(notes.contains("no held-out samples"), "{notes}");
    assert!(
        notes.contains("input sizes from the calibration data"),
        "{notes}"
    );
    assert!(
        r["verification"]["inputs"]
            .to_string()
            .contains("calibration")
    );
    // auto: every tensor says which method chose its range.
    assert_eq!(q["method"], "auto");
    let methods = q["tensor_methods"].as_object().unwrap();
    assert!(!methods.is_empty());
    assert!(
        methods
            .values()
            .all(|m| m.as_str().is_some_and(|m| m != "auto"))
    );
}

#[test]
fn held_out_samples_are_the_ones_after_calibration() {
    let dir = tempfile::tempdir().unwrap();
    let data = image_samples(dir.path(), 7, &[1, 3, 32, 32]);
    let (o, r) = run_json(&[
        "optimize",
        s(&fixture("cnn_bn_relu.onnx")),
        "-o",
        s(&dir.path().join("q.onnx")),
        "--int8",
        "--calib-data",
        s(&data),
        "--calib-samples",
        "4",
        "--json",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let h = &r["int8"]["held_out"];
    assert_eq!(h["skipped"], 4);
    assert_eq!(h["samples"], 3);
    assert_eq!(h["on_calibration_samples"], false);
    assert!(
        r["verification"]["inputs"]
            .to_string()
            .contains("3 held-out")
    );
}

/// A step's count in the report's `int8.costs` (0 when it never ran).
fn cost_count(r: &serde_json::Value, step: &str) -> u64 {
    r["int8"]["costs"][step]["count"].as_u64().unwrap_or(0)
}

const BUILT: &str = "candidate: built (the quantize step and the passes after it)";

#[test]
fn judged_on_the_calibration_samples_the_original_runs_only_on_the_probe_samples() {
    // 12 samples, all calibrated: the INT8 model is judged on them. The
    // original runs on the 8 probe samples (read while the placements are
    // timed, before calibration ends); the other 4 take the outputs the
    // calibration computed on them, which agree with the original's on the
    // 8 both ran.
    if !ort_available() {
        eprintln!("skipped: ONNX Runtime is not available");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let data = image_samples(dir.path(), 12, &[1, 3, 32, 32]);
    let (o, r) = run_json(&[
        "optimize",
        s(&fixture("cnn_bn_relu.onnx")),
        "-o",
        s(&dir.path().join("q.onnx")),
        "--int8",
        "--calib-data",
        s(&data),
        // These drawn samples put some rows' top two classes close: a
        // target INT8 meets, so that it is judged on every sample.
        "--int8-min-top1",
        "0.5",
        "--json",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(r["int8"]["held_out"]["on_calibration_samples"], true);
    assert_eq!(r["int8"]["held_out"]["samples"], 12, "{}", stderr(&o));
    let costs = &r["int8"]["costs"];
    assert_eq!(cost_count(&r, "original: runs"), 8, "{costs}");
    assert_eq!(
        cost_count(&r, "original: outputs the calibration computed"),
        4,
        "{costs}"
    );
}

#[test]
fn samples_of_different_shapes_share_one_session_per_candidate() {
    // seq_linear takes x [batch, 30]: each sample here has its own batch
    // size, as a sequence model's sentences have their own lengths. ONNX
    // Runtime's session runs any of them, so a candidate is one session,
    // not one per sample (khmersm's segmenter: 146 sessions, 2.1 s of 3 s).
    if !ort_available() {
        eprintln!("skipped: ONNX Runtime is not available");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("calib");
    std::fs::create_dir_all(&data).unwrap();
    for i in 0..9usize {
        let rows = 1 + i % 5;
        let values: Vec<f32> = (0..rows * 30)
            .map(|k| ((k as f32) * 0.37 + i as f32).sin() * 2.0)
            .collect();
        let npy = npy_f32(&[rows, 30], &values);
        std::fs::write(data.join(format!("{i:03}.npy")), npy).unwrap();
    }
    let (o, r) = run_json(&[
        "optimize",
        s(&fixture("seq_linear.onnx")),
        "-o",
        s(&dir.path().join("q.onnx")),
        "--int8",
        "--calib-data",
        s(&data),
        "--calib-samples",
        "4",
        "--threads",
        "1",
        "--json",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let judged = cost_count(&r, "judged on every sample");
    let probed = cost_count(&r, "probed on a few samples");
    assert!(judged + probed >= 1, "{}", r["int8"]["costs"]);
    assert_eq!(cost_count(&r, "original: runs"), 5);
    assert_eq!(
        cost_count(&r, "candidate: sessions"),
        judged + probed,
        "{}",
        r["int8"]["costs"]
    );
    // The original: a session for the probe samples and one when the rest
    // are read, whatever their shapes (5 shapes among the 5 judged).
    assert!(
        cost_count(&r, "original: sessions") <= 2,
        "{}",
        r["int8"]["costs"]
    );
}

#[test]
fn the_original_runs_once_per_judged_sample_however_many_candidates_are_judged() {
    let dir = tempfile::tempdir().unwrap();
    let data = image_samples(dir.path(), 7, &[1, 3, 32, 32]);
    let (o, r) = run_json(&[
        "optimize",
        s(&fixture("cnn_bn_relu.onnx")),
        "-o",
        s(&dir.path().join("q.onnx")),
        "--int8",
        "--calib-data",
        s(&data),
        "--calib-samples",
        "4",
        // Out of reach: the fallback probes every layer and judges rounds.
        "--int8-min-cosine",
        "0.9999999",
        // One thread: one session per candidate (with more, the samples are
        // shared among sessions; see the next test).
        "--threads",
        "1",
        "--json",
    ]);
    assert!(matches!(o.status.code(), Some(0 | 4)), "{}", stderr(&o));
    let judged = cost_count(&r, "judged on every sample");
    let probed = cost_count(&r, "probed on a few samples");
    // auto probes its per-tensor and its full ranges and judges the better
    // one, then the fallback's rounds; every layer is probed alone.
    assert!(judged >= 2, "{}", r["int8"]["costs"]);
    assert!(probed >= 2, "{}", r["int8"]["costs"]);
    // The 3 samples after the calibration ones were read and run in the
    // original once, not once per candidate.
    assert_eq!(cost_count(&r, "original: runs"), 3);
    assert_eq!(cost_count(&r, "candidate: runs"), 3 * (judged + probed));
    // One session per candidate, or per union of probes judged together
    // (see the next test), and every candidate built was judged once: the
    // model written is one of them, not built or judged again.
    let together = cost_count(&r, "probes judged together");
    let unions = cost_count(&r, "unions of probes judged together (a session each)");
    assert!(
        together >= 2 * unions && unions >= 1,
        "{}",
        r["int8"]["costs"]
    );
    assert_eq!(
        cost_count(&r, "candidate: sessions"),
        judged + probed - together + unions
    );
    // (a candidate built into a model already probed is answered from that
    // probe: built, not run)
    // The first judgement is of the range set probed just before: probed
    // again (answered by that probe) to see whether it clearly misses, then
    // judged, without a build of its own either time.
    let answered = cost_count(&r, "probes answered by an identical model");
    // The float model written in INT8's place (this target is met only
    // with every layer in float) is judged as it is: not built.
    let float_judged = u64::from(r["int8"]["float_written"].is_string());
    assert_eq!(
        cost_count(&r, BUILT),
        judged + probed + answered - 2 - float_judged
    );
    assert_eq!(cost_count(&r, "streamed judgements (both models)"), 0);
    let line = stderr(&o);
    assert!(line.contains("int8: where the time went: "), "{line}");
}

/// Eight 3x3 Conv + Relu layers of 8 channels on `[1, 3, 32, 32]`, with
/// weights of a few scales: a chain whose later layers' candidates share
/// a long float prefix (the unions of `ops/src/int8/judge/together.rs`).
fn conv_chain(dir: &Path) -> PathBuf {
    use infopt_ir::builder::{GraphBuilder, dims};
    use infopt_ir::{Attribute, DataType};
    let mut b = GraphBuilder::new();
    let mut x = b.input("x", DataType::Float, dims(&["1", "3", "32", "32"]));
    for layer in 0..8 {
        let cin = if layer == 0 { 3 } else { 8 };
        let w: Vec<f32> = (0..8 * cin * 9)
            .map(|k| ((k * 7 + layer * 13) as f32 * 0.37).sin() * (0.3 + 0.1 * layer as f32))
            .collect();
        let w = b.f32(&format!("w{layer}"), &[8, cin as i64, 3, 3], &w);
        let c = b.op(
            "Conv",
            &[x, w],
            vec![Attribute::ints("pads", vec![1, 1, 1, 1])],
        );
        x = b.op("Relu", &[c], vec![]);
    }
    b.output(x, "y", DataType::Float, None);
    let path = dir.join("conv_chain.onnx");
    b.build(13)
        .save(&path, &infopt_ir::SaveOptions::default())
        .unwrap();
    path
}

/// A segmentation head: two convs into 3 classes at each of 16x16 pixels,
/// a Softmax over the channels (`probs`) and an ArgMax class map (`labels`).
fn segmentation_head(dir: &Path) -> PathBuf {
    use infopt_ir::builder::{GraphBuilder, dims};
    use infopt_ir::{Attribute, DataType};
    let mut b = GraphBuilder::new();
    let x = b.input("x", DataType::Float, dims(&["1", "3", "16", "16"]));
    let w1: Vec<f32> = (0..8 * 3 * 9)
        .map(|k| (k as f32 * 0.61).sin() * 0.4)
        .collect();
    let w1 = b.f32("w1", &[8, 3, 3, 3], &w1);
    let c1 = b.op(
        "Conv",
        &[x, w1],
        vec![Attribute::ints("pads", vec![1, 1, 1, 1])],
    );
    let r1 = b.op("Relu", &[c1], vec![]);
    let w2: Vec<f32> = (0..3 * 8).map(|k| (k as f32 * 1.3).cos() * 0.5).collect();
    let w2 = b.f32("w2", &[3, 8, 1, 1], &w2);
    let logits = b.op("Conv", &[r1, w2], vec![]);
    let probs = b.op("Softmax", &[logits], vec![Attribute::int("axis", 1)]);
    let labels = b.op(
        "ArgMax",
        &[logits],
        vec![Attribute::int("axis", 1), Attribute::int("keepdims", 0)],
    );
    b.output(
        probs,
        "probs",
        DataType::Float,
        Some(dims(&["1", "3", "16", "16"])),
    );
    b.output(
        labels,
        "labels",
        DataType::Int64,
        Some(dims(&["1", "16", "16"])),
    );
    let path = dir.join("segmentation.onnx");
    b.build(13)
        .save(&path, &infopt_ir::SaveOptions::default())
        .unwrap();
    path
}

#[test]
fn a_segmentation_is_judged_per_pixel_along_its_channels_and_by_its_class_map() {
    // The Softmax over axis 1 was read as a classifier along the width, and
    // the ArgMax map by the cosine of its class indices.
    if !ort_available() {
        eprintln!("skipped: ONNX Runtime is not available");
        return;
    }
    let models = tempfile::tempdir().unwrap();
    let model = segmentation_head(models.path());
    let (_dir, _out, o, r) = int8_random_run(&model, "12", &["--calib-samples", "8"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let q = &r["int8"];
    assert_eq!(q["classifier_outputs"], serde_json::json!([]));
    assert_eq!(q["class_axis_outputs"], serde_json::json!([["probs", 1]]));
    assert_eq!(q["label_outputs"], serde_json::json!(["labels"]));
    let h = &q["held_out"];
    assert_eq!(h["label_judged"], serde_json::json!(["labels"]));
    // 4 held-out samples of 16x16 positions each: per-pixel fractions.
    for name in ["probs", "labels"] {
        let a = h["top1_agreement"][name].as_f64().expect(name);
        assert!((a * 1024.0).fract() == 0.0 && a > 0.9, "{name}: {a}");
    }
    let parts: Vec<&str> = h["parts"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|p| p["agreement"]["name"].as_str())
        .collect();
    assert!(
        parts.iter().all(|p| p.starts_with("probs[:, ")),
        "{parts:?}"
    );
}

/// Two threads run the search's probes side by side (each in its own
/// session) and share a judgement's samples among two sessions: the same
/// decisions, the same figures and the same model as one thread. On ONNX
/// Runtime the ranking probes go together, as unions of candidates (in
/// groups sized by the threads); tract runs them one per session.
#[test]
fn probes_side_by_side_decide_as_one_at_a_time() {
    let dir = tempfile::tempdir().unwrap();
    let data = image_samples(dir.path(), 20, &[1, 3, 32, 32]);
    let model = conv_chain(dir.path());
    let run = |threads: &str, backend: &str| {
        let out = dir.path().join(format!("q{threads}{backend}.onnx"));
        // INT8 faster than float, in the placement timing and the speed
        // check: a chain of 0.25 ms timed for real sometimes wrote float
        // before any probe (1 run in 5 on a quiet machine), and this test
        // is about the probes.
        let hooks = [
            ("INFOPT_TEST_INT8_TIMED", "1.0,2.0"),
            ("INFOPT_TEST_INT8_ANSWER", "1.0,2.0,2.0"),
        ];
        let mut args = probing_everything(&model, &data, &out);
        args.extend(["--threads", threads, "--backend", backend].map(String::from));
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let (o, r) = run_hooks(&args, &hooks);
        assert!(matches!(o.status.code(), Some(0 | 4)), "{}", stderr(&o));
        (o.status.code(), r, std::fs::read(&out).ok())
    };
    let side = "candidate: probes side by side (wall time; their runs, sessions and comparisons count each probe's own time)";
    let together = "probes judged together";
    for backend in ["ort", "tract"] {
        let (code1, r1, model1) = run("1", backend);
        let (code2, r2, model2) = run("2", backend);
        assert_eq!(code1, code2);
        assert_eq!(cost_count(&r1, side), 0, "{}", r1["int8"]["costs"]);
        match backend {
            "ort" => {
                // The first union always runs; whether more follow is the
                // machine's (their loads against the sessions apart).
                let unions = "unions of probes judged together (a session each)";
                for r in [&r1, &r2] {
                    assert!(cost_count(r, unions) >= 1, "{}", r["int8"]["costs"]);
                    assert!(cost_count(r, together) >= 2, "{}", r["int8"]["costs"]);
                }
            }
            _ => {
                assert!(cost_count(&r2, side) >= 1, "{}", r2["int8"]["costs"]);
                assert_eq!(cost_count(&r2, together), 0, "{}", r2["int8"]["costs"]);
                // Without unions, the ranking's probes run from the
                // context's kept tensors (`ops/src/int8/judge/prefix.rs`),
                // one at a time and side by side alike.
                for r in [&r1, &r2] {
                    let cut = "probes cut to what differs from the base";
                    assert!(cost_count(r, cut) >= 3, "{}", r["int8"]["costs"]);
                    let kept = "base tensors kept for cut probes";
                    assert_eq!(cost_count(r, kept), 1, "{}", r["int8"]["costs"]);
                }
            }
        }
        for key in ["kept_float", "candidates", "held_out"] {
            assert_eq!(r1["int8"][key], r2["int8"][key], "{backend} {key}");
        }
        assert!(
            r1["int8"]["candidates"]
                .as_array()
                .is_some_and(|c| c.len() >= 3),
            "every layer ranked: {}",
            r1["int8"]["candidates"]
        );
        for step in [
            "probed on a few samples",
            "judged on every sample",
            "candidate: runs",
        ] {
            assert_eq!(cost_count(&r1, step), cost_count(&r2, step), "{step}");
        }
        if backend == "tract" {
            // Shared samples: a judgement may take a session per thread.
            assert!(
                cost_count(&r2, "candidate: sessions") >= cost_count(&r1, "candidate: sessions")
            );
        }
        assert_eq!(model1, model2, "the same model written");
    }
}

#[test]
fn no_held_out_samples_is_not_an_error_under_no_verify() {
    let dir = tempfile::tempdir().unwrap();
    let data = image_samples(dir.path(), 3, &[1, 3, 32, 32]);
    let out = dir.path().join("q.onnx");
    let o = infopt(&[
        "optimize",
        s(&fixture("cnn_bn_relu.onnx")),
        "-o",
        s(&out),
        "--int8",
        "--calib-data",
        s(&data),
        "--no-verify",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(out.exists());
}

#[test]
fn an_unreachable_target_exits_4_naming_the_layers() {
    let dir = tempfile::tempdir().unwrap();
    let data = image_samples(dir.path(), 4, &[1, 3, 32, 32]);
    let out = dir.path().join("q.onnx");
    // Cosine 1.0 cannot be met while anything is quantized, and the
    // activations feeding the float layers stay quantized.
    let (o, r) = run_json(&[
        "optimize",
        s(&fixture("cnn_bn_relu.onnx")),
        "-o",
        s(&out),
        "--int8",
        "--calib-data",
        s(&data),
        "--int8-min-cosine",
        "1.0",
        "--json",
    ]);
    assert_eq!(o.status.code(), Some(4), "{}", stderr(&o));
    // Every round judged the calibration samples, and the report says so.
    let q = &r["int8"];
    assert_eq!(q["target_met"], false);
    assert_eq!(q["held_out"]["on_calibration_samples"], true);
    assert!(q["kept_float"].as_array().is_some_and(|k| k.len() >= 2));
    let err = stderr(&o);
    let last = err.lines().last().unwrap_or("");
    assert!(last.contains("misses its accuracy target"), "{err}");
    assert!(last.contains("kept in float"), "{last}");
    // Every candidate in float (the float model) misses cosine 1.0 too:
    // the search stops at its bound instead of ranking every candidate.
    assert!(last.contains("even with all"), "{last}");
    assert!(last.contains("stopped at the bound"), "{last}");
    // The two range sets of auto, then the bound.
    assert_eq!(cost_count(&r, "probed on a few samples"), 3);
    assert!(last.contains("conv") || last.contains("fc/Gemm"), "{last}");
    assert!(last.contains("output not written"), "{last}");
    assert!(!out.exists());
    // The calibration samples were run in the original once, after the
    // first read found nothing beyond them.
    assert_eq!(cost_count(&r, "original: runs"), 4);
}

#[test]
fn a_sample_the_model_cannot_take_names_the_file_input_and_dims() {
    let dir = tempfile::tempdir().unwrap();
    let data = image_samples(dir.path(), 2, &[1, 3, 16, 16]);
    let o = infopt(&[
        "optimize",
        s(&fixture("cnn_bn_relu.onnx")),
        "-o",
        s(&dir.path().join("q.onnx")),
        "--int8",
        "--calib-data",
        s(&data),
    ]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let all = stderr(&o);
    let err = all.trim().lines().last().unwrap_or("");
    assert!(err.starts_with("error:"), "{all}");
    assert!(err.contains("000.npy"), "{err}");
    assert!(
        err.contains("input `input` has shape [1, 3, 16, 16]"),
        "{err}"
    );
    assert!(err.contains("[batch,3,32,32]"), "{err}");
}

#[test]
fn a_graph_tract_cannot_run_without_onnx_runtime_names_pip_install() {
    // ms_domain.onnx holds a com.microsoft op: tract cannot calibrate it,
    // and the ONNX Runtime library given does not exist.
    let dir = tempfile::tempdir().unwrap();
    let data = image_samples(dir.path(), 2, &[1, 16]);
    let o = infopt(&[
        "optimize",
        s(&fixture("ms_domain.onnx")),
        "-o",
        s(&dir.path().join("q.onnx")),
        "--int8",
        "--calib-data",
        s(&data),
        "--no-verify",
        "--ort-dylib",
        s(&dir.path().join("no/libonnxruntime.so")),
    ]);
    assert_eq!(o.status.code(), Some(7), "{}", stderr(&o));
    let all = stderr(&o);
    let err = all.trim().lines().last().unwrap_or("");
    assert!(err.contains("pip install onnxruntime"), "{all}");
    assert!(err.contains("tract cannot"), "{err}");
}

#[test]
fn the_logits_a_softmax_reads_stay_float_under_auto() {
    // MatMul -> Add (logits) -> Softmax: a Q/DQ on the logits moves every
    // class score by up to half a step and buys no integer kernel (the
    // Softmax is float); the MatMul still runs in INT8.
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("q.onnx");
    let (o, r) = run_json(&[
        "optimize",
        s(&fixture("paddle_dynamic.onnx")),
        "-o",
        s(&out),
        "--input-shape",
        "x:1x3x48x192",
        "--int8",
        "--calib-data",
        "random:6",
        "--int8-min-cosine",
        "0",
        "--int8-min-top1",
        "0",
        "--json",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let methods = &r["int8"]["tensor_methods"];
    let why = "float (its largest values decide a softmax or max)";
    assert_eq!(methods["logits"], why, "{methods}");
    // The MatMul's own output is the logits once its bias Add is fused.
    let quantized = quantized_tensors(&out);
    assert!(
        !quantized.iter().any(|t| t == "logits" || t == "mm"),
        "{quantized:?}"
    );
    // The dense layer is still quantized (its weight is INT8).
    assert!(has_int8_weight(&out), "no INT8 weight");
}

/// `optimize detector_head.onnx --target onnxruntime --int8` on 8 random
/// calibration and 8 held-out samples, with `extra` arguments, into `dir`.
fn detector_head_int8(
    dir: &Path,
    extra: &[&str],
) -> (std::process::Output, serde_json::Value, PathBuf) {
    let out = dir.join("q.onnx");
    let model = fixture("detector_head.onnx");
    let mut args = vec![
        "optimize",
        s(&model),
        "-o",
        s(&out),
        "--target",
        "onnxruntime",
        "--int8",
        "--calib-data",
        "random:16",
        "--calib-samples",
        "8",
        "--held-out",
        "8",
        "--json",
    ];
    args.extend_from_slice(extra);
    let (o, r) = run_json(&args);
    (o, r, out)
}

#[test]
fn a_detector_output_is_judged_part_by_part_and_its_scores_are_kept() {
    // detector_head's output concatenates 4 box rows (hundreds of pixels)
    // and 3 sigmoid scores. One INT8 scale for the head Conv's output
    // leaves the class logits a few steps, which destroys the scores, while
    // the cosine of the whole output (the boxes') stays near 1: judged
    // whole, this model exited 0 as it was. The onnxruntime target
    // quantizes the Conv's output (QLinearConv) with min-max ranges (the
    // default, auto, leaves a score output's branch float from the start:
    // see the next test).
    if !ort_available() {
        eprintln!("skipped: ONNX Runtime is not available");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (o, r, _) = detector_head_int8(dir.path(), &["--calib-method", "minmax"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let log = stderr(&o);
    // The first judgement missed on the scores alone.
    assert!(
        log.contains("output0[:, 4:7, :] (scores) (cosine") && !log.contains("output0 (cosine"),
        "{log}"
    );
    let h = &r["int8"]["held_out"];
    let parts = h["parts"].as_array().unwrap();
    let labels: Vec<&str> = parts
        .iter()
        .map(|p| p["agreement"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        labels,
        ["output0[:, 0:4, :] (values)", "output0[:, 4:7, :] (scores)"]
    );
    assert_eq!(parts[1]["part"]["kind"], "scores");
    assert_eq!(parts[1]["elements"], 8 * 3 * 64);
    for p in parts {
        let c = p["agreement"]["cosine"].as_f64().unwrap();
        assert!(c >= 0.99, "{p}");
    }
    // The head Conv, whose output scale the boxes set, stays float.
    let kept: Vec<&str> = r["int8"]["kept_float"]
        .as_array()
        .unwrap()
        .iter()
        .map(|k| k["layer"].as_str().unwrap())
        .collect();
    assert!(kept.contains(&"head"), "{kept:?}");
}

#[test]
fn a_model_without_any_int8_layer_says_what_it_is_made_of() {
    // if_subgraph's main graph is Relu, ReduceSum, Greater, If, Sigmoid: no
    // weighted layer declines, so the float-written answer names its ops
    // instead of ending at the colon (g2p-id's LSTM encoder did).
    if !ort_available() {
        eprintln!("skipped: ONNX Runtime is not available");
        return;
    }
    let (_dir, out, o, r) = int8_random_run(&fixture("if_subgraph.onnx"), "16", &[]);
    assert!(o.status.success(), "{}", stderr(&o));
    let why = r["int8"]["float_written"].as_str().expect("float_written");
    assert_eq!(
        why,
        "no layer of this model could be put in INT8 here, so the float model was written (no INT8 in it): its main graph has no Conv, ConvTranspose, MatMul or Gemm with constant weights, the layers INT8 covers (its ops: Greater x1, If x1, ReduceSum x1, Relu x1, Sigmoid x1)"
    );
    assert!(!has_int8_weight(&out));
}

#[test]
fn random_samples_take_plainer_integers_where_seeded_ones_make_the_model_fail() {
    // if_lstm's integer `mode` picks a branch; the seeded values pick the
    // one whose LSTM cannot take the input, so `random:N` stopped at
    // sample 0 where the plain optimize verifies with integers set to 0.
    if !ort_available() {
        eprintln!("skipped: ONNX Runtime is not available");
        return;
    }
    let (_dir, out, o, r) = int8_random_run(&fixture("if_lstm.onnx"), "8", &[]);
    assert!(o.status.success(), "{}", stderr(&o));
    let data = r["int8"]["calibration_data"]
        .as_str()
        .expect("calibration_data");
    assert!(
        data.starts_with("8 seeded random samples (seed 0; integer inputs set to 0 (the seeded ones made the model fail: ort failed to run the model: "),
        "{data}"
    );
    assert!(out.exists());
}

#[test]
fn a_score_outputs_branch_is_left_float_by_default_and_said_so() {
    // detector_head's class logits share the head Conv's output with the
    // boxes: under auto the Conv's output and the stem before it (the
    // branch of the scores, up to three layers back) get no Q/DQ, so a
    // sample past the calibration's largest logit keeps its score. The
    // range table says why. This two-layer head is all branch: nothing is
    // left in INT8, and the report says the float model was written, naming
    // each layer and why it declined.
    if !ort_available() {
        eprintln!("skipped: ONNX Runtime is not available");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (o, r, out) = detector_head_int8(dir.path(), &[]);
    assert!(o.status.success(), "{}", stderr(&o));
    let why = "float (the branch of a score output: its largest values are the detections)";
    let methods = &r["int8"]["tensor_methods"];
    for t in ["head_out", "stem_act", "stem_out", "logits"] {
        assert_eq!(methods[t], why, "{t}: {methods}");
    }
    let quantized = quantized_tensors(&out);
    assert!(
        !quantized
            .iter()
            .any(|t| ["head_out", "stem_act", "stem_out"].contains(&t.as_str())),
        "{quantized:?}"
    );
    assert!(!has_int8_weight(&out));
    assert!(
        r.to_string().contains("quantize-int8: nothing quantized"),
        "{r}"
    );
    let why = r["int8"]["float_written"].as_str().expect("float_written");
    assert!(
        why.starts_with("no layer of this model could be put in INT8 here, so the float model was written (no INT8 in it): Conv 'head': ")
            && why.contains("Conv 'stem': "),
        "{why}"
    );
    let parts = r["int8"]["held_out"]["parts"].as_array().unwrap();
    assert!(
        parts
            .iter()
            .all(|p| p["agreement"]["cosine"].as_f64().unwrap() >= 0.99),
        "{parts:?}"
    );
}

#[test]
fn build_engine_int8_on_a_dynamic_batch_model_runs_its_per_layer_comparison_at_the_data_batch() {
    // cnn_bn_relu's batch is a symbol; build-engine does not bind the shapes
    // to the data, and its per-layer comparison after the search loaded the
    // model at batch 2 and fed the batch-1 sample: exit 7, "model was loaded
    // for shape [2,…], got [1,…] (try --backend ort)".
    let dir = tempfile::tempdir().unwrap();
    let data = image_samples(dir.path(), 10, &[1, 3, 32, 32]);
    let out = dir.path().join("cnn.trt.onnx");
    let engine = dir.path().join("cnn.engine");
    let model = fixture("cnn_bn_relu.onnx");
    let build = |extra: &[&str]| {
        let mut args = vec![
            "build-engine",
            s(&model),
            "--int8",
            "--calib-data",
            s(&data),
            "--calib-samples",
            "6",
            "--shapes",
            "input:1x3x32x32/2x3x32x32/4x3x32x32",
            "--emit-onnx",
            s(&out),
            "-o",
            s(&engine),
            "--json",
        ];
        args.extend_from_slice(extra);
        run_json(&args)
    };
    let (o, r) = build(&[]);
    let err = stderr(&o);
    assert!(!err.contains("was loaded for shape"), "{err}");
    assert!(matches!(o.status.code(), Some(0 | 4)), "{err}");
    assert!(
        !r["int8"]["worst_layers"]
            .as_array()
            .is_none_or(|w| w.is_empty()),
        "{err}"
    );
    // Calibrated and judged in ONNX Runtime where it loads, as `optimize
    // --int8` is (tract ran a segmentation's 64 views 10x slower).
    let backend = r["int8"]["backend"].as_str().unwrap_or_default();
    let expected = if ort_available() { "ort " } else { "tract" };
    assert!(backend.starts_with(expected), "{backend}");
    // `--backend` still decides.
    let (o, r) = build(&["--backend", "tract"]);
    assert!(matches!(o.status.code(), Some(0 | 4)), "{}", stderr(&o));
    let backend = r["int8"]["backend"].as_str().unwrap_or_default();
    assert!(backend.starts_with("tract"), "{backend}");
}

#[test]
fn random_calibration_draws_token_ids_below_the_vocab() {
    // --vocab was accepted and ignored by random:N calibration data (ids
    // below 16 whatever was asked): other ids give the embeddings other
    // ranges, so other scales in the written model; the same vocab, the
    // same bytes.
    let model = fixture("exported/bert_tiny.onnx");
    let written = |vocab: Option<&str>| {
        let mut extra = vec!["--no-verify"];
        if let Some(v) = vocab {
            extra.extend(["--vocab", v]);
        }
        let (_dir, out, o, _) = int8_random_run(&model, "4", &extra);
        assert!(o.status.success(), "{}", stderr(&o));
        std::fs::read(out).unwrap()
    };
    let few_ids = written(Some("4"));
    assert_eq!(few_ids, written(Some("4")));
    assert_ne!(few_ids, written(None));
}

/// Samples of 500 plus unit noise (the offset `int8_offset_pool` removes).
fn offset_samples(dir: &std::path::Path, n: usize) -> std::path::PathBuf {
    let data = dir.join("offset");
    std::fs::create_dir_all(&data).unwrap();
    let shape = [1usize, 4, 16, 16];
    let count: usize = shape.iter().product();
    for i in 0..n {
        let values: Vec<f32> = (0..count)
            .map(|k| {
                let t = (k * 7 + i * 131) as f32;
                500.0 + (t * 0.37).sin() + (t * 0.011).cos() * 0.5
            })
            .collect();
        std::fs::write(data.join(format!("{i:03}.npy")), npy_f32(&shape, &values)).unwrap();
    }
    data
}

#[test]
fn an_error_in_an_activation_q_dq_is_found_and_that_activation_alone_kept_float() {
    // Every weighted layer in float still missed here (the old search
    // exited 4 after keeping both Convs): the error is the input's Q/DQ
    // before the AveragePool. The search keeps only that activation float
    // and both Convs stay INT8.
    let dir = tempfile::tempdir().unwrap();
    let data = offset_samples(dir.path(), 16);
    let out = dir.path().join("q.onnx");
    let (o, r) = run_json(&[
        "optimize",
        s(&fixture("int8_offset_pool.onnx")),
        "-o",
        s(&out),
        "--int8",
        "--calib-data",
        s(&data),
        "--calib-samples",
        "8",
        "--json",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let q = &r["int8"];
    assert_eq!(q["target_met"], true);
    let kept: Vec<(&str, &str)> = q["kept_float"]
        .as_array()
        .unwrap()
        .iter()
        .map(|k| (k["layer"].as_str().unwrap(), k["kind"].as_str().unwrap()))
        .collect();
    assert_eq!(kept, vec![("x", "activation")]);
    // Every candidate's measured loss; the input harms most alone.
    let c = q["candidates"].as_array().unwrap();
    assert_eq!(c.len(), 3, "{c:?}");
    assert_eq!(c[0]["candidate"], "x");
    assert_eq!(c[0]["op"], "AveragePool");
    // With both layers float, keeping the input float removes all the
    // noise; either Conv alone in INT8 (the input's Q/DQ still there) adds
    // none of it.
    assert!(c[0]["harm"].as_f64().unwrap() > 1.0, "{c:?}");
    assert!(c[0]["loss"].as_f64().unwrap() < 1e-3, "{c:?}");
    for layer in &c[1..] {
        assert_eq!(layer["kind"], "layer");
        assert!(layer["cosine"].as_f64().unwrap() < 0.9, "{c:?}");
        assert!(layer["harm"].as_f64().unwrap() < 0.01, "{c:?}");
    }
    // Both Convs still read INT8 weights; the input has no Q/DQ.
    let notes = r["notes"].to_string();
    assert!(
        notes.contains("2 layers in INT8 (conv1, conv2); 2 activations with Q/DQ (centred, r1)"),
        "{notes}"
    );
    let ops = r["ops"].as_array().unwrap();
    let after = |op: &str| {
        ops.iter()
            .find(|x| x["op"] == op)
            .map(|x| x["after"].as_u64().unwrap())
            .unwrap_or(0)
    };
    assert_eq!(
        (after("QuantizeLinear"), after("DequantizeLinear")),
        (2, 4),
        "{ops:?}"
    );
    let log = stderr(&o);
    assert!(log.contains("int8 search"), "{log}");
    assert!(log.contains("ranking 3/3: activation 'x'"), "{log}");
    assert!(log.contains("alone in INT8"), "{log}");
}

/// `optimize cnn_bn_relu.onnx --int8` on 24 image samples written into a
/// folder of `dir` (12 calibrated, the rest held out), with `extra`
/// arguments, into `out`.
struct CnnInt8 {
    args: Vec<String>,
    data: PathBuf,
    out: PathBuf,
}

impl CnnInt8 {
    fn new(dir: &Path, extra: &[&str]) -> CnnInt8 {
        let data = image_samples(dir, 24, &[1, 3, 32, 32]);
        let out = dir.join("q.onnx");
        let mut args: Vec<String> = [
            "optimize",
            s(&fixture("cnn_bn_relu.onnx")),
            "-o",
            s(&out),
            "--int8",
            "--calib-data",
            s(&data),
            "--calib-samples",
            "12",
            "--json",
        ]
        .iter()
        .map(|a| a.to_string())
        .collect();
        args.extend(extra.iter().map(|a| a.to_string()));
        CnnInt8 { args, data, out }
    }

    /// The command with the debug `hooks` set.
    fn run(&self, hooks: &[(&str, &str)]) -> (std::process::Output, serde_json::Value) {
        let args: Vec<&str> = self.args.iter().map(String::as_str).collect();
        run_hooks(&args, hooks)
    }
}

#[test]
fn a_candidate_that_builds_a_model_already_probed_is_not_run_again() {
    // Every layer in float meets this target, so the search ranks the
    // layers alone (the activation Q/DQ pairs, the input's among them, are
    // not offered), and its bound, every layer in float, is the model
    // probed just before: answered from that probe.
    let dir = tempfile::tempdir().unwrap();
    let cnn = CnnInt8::new(dir.path(), &["--int8-min-cosine", "0.99995"]);
    let (o, r) = cnn.run(&[]);
    assert!(matches!(o.status.code(), Some(0 | 4)), "{}", stderr(&o));
    let c = r["int8"]["candidates"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let loss = |name: &str| {
        c.iter()
            .find(|x| x["candidate"] == name)
            .map(|x| x["loss"].as_f64().unwrap())
    };
    assert!(
        loss("conv1/Conv").is_some() && loss("input").is_none(),
        "{c:?}"
    );
    assert!(c.iter().all(|x| x["kind"] == "layer"), "{c:?}");
    assert!(
        cost_count(&r, "probes answered by an identical model") >= 1,
        "{}",
        r["int8"]["costs"]
    );
}

/// With every layer in INT8 the model misses the target and runs only
/// 1.07x as fast as float (the debug hook stands for the placement
/// timing): the layers the search would keep in float give back part of
/// that, so the float model is written without a search, saying why; at
/// 1.43x the search runs as before.
#[test]
fn a_low_ceiling_that_misses_writes_float_without_searching() {
    let dir = tempfile::tempdir().unwrap();
    let cnn = CnnInt8::new(dir.path(), &["--int8-min-cosine", "0.99995"]);
    let (o, r) = cnn.run(&[("INFOPT_TEST_INT8_TIMED", "1.60,1.71")]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let why = r["int8"]["float_written"].as_str().expect("float_written");
    assert!(
        why.starts_with("INT8 would not pay on this model, so the float model was written (no INT8 in it): with every layer in INT8 it misses the target (logits (cosine ")
            && why.ends_with(") and runs only 1.07x as fast as float in ONNX Runtime CPU at one thread, which the layers kept in float to meet the target would give back in part"),
        "{why}"
    );
    assert!(cnn.out.exists() && !has_int8(&cnn.out));
    assert!(
        r["int8"]["candidates"]
            .as_array()
            .is_none_or(|c| c.is_empty()),
        "{}",
        r["int8"]
    );
    assert!(!stderr(&o).contains("int8 search"), "{}", stderr(&o));
    let (o, r) = cnn.run(&[("INFOPT_TEST_INT8_TIMED", "1.20,1.71")]);
    assert!(matches!(o.status.code(), Some(0 | 4)), "{}", stderr(&o));
    assert!(
        r["int8"]["float_written"]
            .as_str()
            .is_none_or(|w| !w.starts_with("INT8 would not pay on this model")),
        "{}",
        r["int8"]
    );
    assert!(stderr(&o).contains("int8 search"), "{}", stderr(&o));
}

/// Whether a written model dequantizes a constant (an INT8 weight).
fn has_int8_weight(path: &Path) -> bool {
    let m = infopt_ir::Model::load(path).expect("written model loads");
    let g = &m.graph;
    g.nodes().any(|(_, n)| {
        n.op_type == "DequantizeLinear"
            && n.inputs
                .first()
                .copied()
                .flatten()
                .is_some_and(|v| g.constant(v).is_some())
    })
}

/// The tensors a QuantizeLinear reads in a written model.
fn quantized_tensors(path: &Path) -> Vec<String> {
    let m = infopt_ir::Model::load(path).expect("written model loads");
    let g = &m.graph;
    g.nodes()
        .filter(|(_, n)| n.op_type == "QuantizeLinear")
        .filter_map(|(_, n)| n.inputs.first().copied().flatten())
        .map(|v| g.value(v).name.clone())
        .collect()
}

/// Whether a written model holds any INT8 (a QuantizeLinear or an integer
/// op): the float model written in INT8's place holds none.
fn has_int8(path: &Path) -> bool {
    let m = infopt_ir::Model::load(path).expect("written model loads");
    m.graph.node_ids().iter().any(|&id| {
        let op = m.graph.node(id).op_type.as_str();
        op == "QuantizeLinear" || op.starts_with("QLinear") || op.contains("Integer")
    })
}

#[test]
fn a_target_met_only_with_every_weighted_layer_in_float_writes_the_float_model() {
    // At cosine 0.99999 cnn_bn_relu meets the target only with its four
    // layers in float (the pooling Q/DQ left around them): that model runs
    // nothing in INT8, so the clean float model is written instead, at exit
    // 0, with the reason in the report and on stderr.
    let dir = tempfile::tempdir().unwrap();
    let cnn = CnnInt8::new(dir.path(), &["--int8-min-cosine", "0.99999"]);
    let (o, r) = cnn.run(&[]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let why = r["int8"]["float_written"].as_str().expect("float_written");
    assert!(
        why.starts_with("INT8 does not keep this model's accuracy at its target, so the float model was written (no INT8 in it): "),
        "{why}"
    );
    assert!(why.contains("no weighted layer in INT8"), "{why}");
    assert!(why.contains("try --fp16"), "{why}");
    assert!(stderr(&o).contains(why), "{}", stderr(&o));
    assert_eq!(r["int8"]["target_met"], true);
    assert!(cnn.out.exists() && !has_int8(&cnn.out));
    // A layer the user pinned to INT8 is not dropped for float: then the
    // miss is the command's failure.
    let pinned = dir.path().join("pinned.onnx");
    let o = infopt(&[
        "optimize",
        s(&fixture("cnn_bn_relu.onnx")),
        "-o",
        s(&pinned),
        "--int8",
        "--calib-data",
        s(&cnn.data),
        "--calib-samples",
        "12",
        "--int8-min-cosine",
        "0.99999",
        "--precision",
        "fc/Gemm=int8",
    ]);
    assert_eq!(o.status.code(), Some(4), "{}", stderr(&o));
    assert!(!pinned.exists());
}

#[test]
fn a_max_drop_without_a_metric_is_refused_naming_the_python_api() {
    let dir = tempfile::tempdir().unwrap();
    let data = image_samples(dir.path(), 4, &[1, 3, 32, 32]);
    let o = infopt(&[
        "optimize",
        s(&fixture("cnn_bn_relu.onnx")),
        "-o",
        s(&dir.path().join("q.onnx")),
        "--int8",
        "--calib-data",
        s(&data),
        "--int8-max-drop",
        "0.01",
    ]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let err = stderr(&o);
    assert!(
        err.contains("--int8-max-drop needs a metric")
            && err.contains("infopt.optimize(..., int8=True, metric=f"),
        "{err}"
    );
}

/// When every layer in INT8 already runs no faster than float at one
/// thread, the search cannot end faster: the float model is written at
/// once, with the figures, after calibrating on the first sample alone (the
/// placements are timed before the calibration on every sample; the
/// timing's answer comes from a debug-build hook: a test model's real
/// timings decide nothing); a faster INT8 calibrates on every sample and
/// searches as before.
#[test]
fn int8_no_faster_than_float_writes_the_float_model_without_searching() {
    let dir = tempfile::tempdir().unwrap();
    let cnn = CnnInt8::new(dir.path(), &[]);
    let (o, r) = cnn.run(&[("INFOPT_TEST_INT8_TIMED", "2.06,1.71")]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let why = r["int8"]["float_written"].as_str().expect("float_written");
    assert_eq!(
        why,
        "INT8 does not pay on this model and runtime, so the float model was written (no INT8 in it): with every layer in INT8 it ran 2.06 ms against float's 1.71 ms in ONNX Runtime CPU at one thread, and keeping layers in float would not make it faster"
    );
    assert!(cnn.out.exists() && !has_int8(&cnn.out));
    // No search: the float model alone is judged, on the probe samples.
    assert_eq!(cost_count(&r, "probed on a few samples"), 1, "no search");
    assert_eq!(cost_count(&r, "judged on every sample"), 0);
    assert_eq!(r["int8"]["calibration_samples"], 1, "{}", r["int8"]);
    assert_eq!(cost_count(&r, "calibration: the first sample"), 1);
    assert_eq!(
        cost_count(&r, "calibration"),
        0,
        "no calibration on every sample"
    );
    // The float model was judged on the samples a calibration on every
    // sample would have left out (24 given, 12 calibrated): the first 8 of
    // them, and the original ran on those alone.
    assert_eq!(r["int8"]["held_out"]["samples"], 8, "{}", r["int8"]);
    assert_eq!(r["int8"]["held_out"]["on_calibration_samples"], false);
    assert_eq!(cost_count(&r, "original: runs"), 8);
    // That answer was timed twice, the second time alone.
    assert_eq!(
        cost_count(&r, "placement timing: timed again before float is taken"),
        1
    );
    assert!(
        stderr(&o).contains("int8: no INT8 placement ran faster than float beside the calibration: timing them again alone before float is taken"),
        "{}",
        stderr(&o)
    );
    let (o, r) = cnn.run(&[("INFOPT_TEST_INT8_TIMED", "1.20,1.71")]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(r["int8"]["float_written"].is_null(), "{}", r["int8"]);
    assert!(has_int8(&cnn.out));
    assert_eq!(r["int8"]["calibration_samples"], 12, "{}", r["int8"]);
    assert_eq!(cost_count(&r, "calibration"), 1);
    assert_eq!(
        cost_count(&r, "placement timing: timed again before float is taken"),
        0,
        "a faster placement is not timed again"
    );
}

/// The placement timing that would write float at once ran beside the
/// calibration; timed again alone, a placement runs faster than float
/// after all (a shared host's slow phase, which slows INT8 kernels more
/// than float's): the calibration then runs on every sample and the
/// search goes on as if the first timing had said so. Each placement keeps
/// the faster of its two figures.
#[test]
fn int8_no_faster_than_float_beside_the_calibration_but_faster_alone_searches() {
    let dir = tempfile::tempdir().unwrap();
    let cnn = CnnInt8::new(dir.path(), &[]);
    let (o, r) = cnn.run(&[("INFOPT_TEST_INT8_TIMED", "2.06,1.71;1.20,1.71")]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(r["int8"]["float_written"].is_null(), "{}", r["int8"]);
    assert!(has_int8(&cnn.out));
    assert_eq!(
        cost_count(&r, "placement timing: timed again before float is taken"),
        1
    );
    assert_eq!(cost_count(&r, "calibration: the first sample"), 1);
    assert_eq!(cost_count(&r, "calibration"), 1, "then on every sample");
    assert_eq!(r["int8"]["calibration_samples"], 12, "{}", r["int8"]);
}

/// The command the speed gate's tests run on the CNN fixture: the output
/// path and the arguments. Its cosine target has every layer probed alone
/// and finalists judged.
fn gate_command(dir: &Path) -> (PathBuf, Vec<String>) {
    let data = image_samples(dir, 20, &[1, 3, 32, 32]);
    let out = dir.join("q.onnx");
    let args = probing_everything(&fixture("cnn_bn_relu.onnx"), &data, &out);
    (out, args)
}

/// `optimize MODEL --int8` on `data` (8 samples calibrate) with a cosine
/// target that has every layer probed alone and finalists judged, the
/// JSON report on stdout.
fn probing_everything(model: &Path, data: &Path, out: &Path) -> Vec<String> {
    [
        "optimize",
        s(model),
        "-o",
        s(out),
        "--int8",
        "--calib-data",
        s(data),
        "--calib-samples",
        "8",
        "--int8-min-cosine",
        "0.99995",
        "--json",
    ]
    .map(String::from)
    .to_vec()
}

/// The keep-set the search's probes settle on is timed before any finalist
/// is judged on every sample: at a tie with float (the debug hook stands
/// for the figures), no finalist, which keeps at least as much in float,
/// could be faster, and the float model is written without them; where it
/// is faster, the search judges its finalists as before.
#[test]
fn a_keep_set_no_faster_than_float_writes_float_before_the_finalists() {
    let dir = tempfile::tempdir().unwrap();
    let (out, args) = gate_command(dir.path());
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let run = |answer: &str| {
        let (o, r) = run_hooked(&args, "INFOPT_TEST_INT8_ANSWER", answer);
        assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
        (stderr(&o), r)
    };
    let (err, r) = run("9.8,10.0,10.0");
    assert!(
        err.contains("in float is no faster than float at one thread: keeping more in float would not make it faster, so no finalist is judged"),
        "{err}"
    );
    assert!(
        err.contains("INT8 ran 9.80 ms against float's 10.00 ms in ONNX Runtime CPU at one thread: no INT8 model here is faster than float, so the float model was written"),
        "{err}"
    );
    assert_eq!(r["int8"]["speed"]["chosen"], "float", "{}", r["int8"]);
    assert!(out.exists() && !has_int8(&out));
    // Said as every float-written answer is, with the speed check's reason
    // (not "no layer of this model could be put in INT8", which it is not).
    let written = r["int8"]["float_written"].as_str().unwrap_or_default();
    assert!(
        written.starts_with("INT8 ran 9.80 ms against float's 10.00 ms"),
        "{}",
        r["int8"]
    );
    // Judged on every sample: the INT8 model before the search; no
    // finalist, and the float model written on the probe samples.
    assert_eq!(
        cost_count(&r, "judged on every sample"),
        1,
        "{}",
        r["int8"]["costs"]
    );
    assert_eq!(r["int8"]["held_out"]["samples"], 8, "{}", r["int8"]);
    assert!(!err.contains("finalist:"), "{err}");
    // The input faster still: it is written, and said as the float-written
    // answer it replaces (no line claiming no layer could be in INT8).
    let (err, r) = run("9.8,10.0,9.0");
    assert_eq!(r["int8"]["speed"]["chosen"], "input", "{}", r["int8"]);
    let written = r["int8"]["float_written"].as_str().unwrap_or_default();
    assert!(
        written.contains("so the input was written unchanged"),
        "{}",
        r["int8"]
    );
    assert!(!err.contains("no layer of this model"), "{err}");
    let (err, r) = run("5.0,10.0,10.0");
    assert!(err.contains("finalist:"), "{err}");
    assert_eq!(r["int8"]["speed"]["chosen"], "int8", "{}", r["int8"]);
    assert!(has_int8(&out));
}

/// The keep-set the probes settle on runs slower than float (the debug
/// hooks stand for the figures): the other placements, built with the same
/// keep-set, are timed at once. Where none is faster than float, no
/// finalist, nor any of them, is judged on every sample, and float is
/// written; where one is, the finalists are judged, then it, and it is
/// written.
#[test]
fn a_keep_set_slower_than_float_times_the_other_placements_before_the_finalists() {
    let dir = tempfile::tempdir().unwrap();
    let (out, args) = gate_command(dir.path());
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let run = |others: &str| {
        let hooks = [
            ("INFOPT_TEST_INT8_ANSWER", "12.0,10.0,10.0"),
            ("INFOPT_TEST_INT8_OTHERS", others),
        ];
        let (o, r) = run_hooks(&args, &hooks);
        assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
        (stderr(&o), r)
    };
    let (err, r) = run("9.9,10.0");
    assert!(err.contains("so no finalist is judged"), "{err}");
    assert!(
        err.contains(
            "(QLinearConv chains): 9.90 ms against float 10.00 ms (not faster, so not judged)"
        ),
        "{err}"
    );
    assert_eq!(r["int8"]["speed"]["chosen"], "float", "{}", r["int8"]);
    assert!(!has_int8(&out));
    // Judged on every sample: the INT8 model before the search only.
    assert_eq!(
        cost_count(&r, "judged on every sample"),
        1,
        "{}",
        r["int8"]["costs"]
    );
    let (err, r) = run("5.0,10.0");
    assert!(err.contains("finalist:"), "{err}");
    assert!(
        err.contains("(QLinearConv chains): 5.00 ms against float 10.00 ms (meets the target)"),
        "{err}"
    );
    assert_eq!(
        r["int8"]["speed"]["chosen"], "ONNX Runtime's placement (QLinearConv chains)",
        "{}",
        r["int8"]
    );
    assert!(has_int8(&out));
}

/// Only placements other than the target's ran faster than float (the
/// debug hook stands for the figures): their accuracy is probed right
/// after the first sample, once. Where none of them keeps it, the
/// calibration stops there and the float model is written, saying why;
/// where one does, the calibration goes on and the search is not probed
/// again for it.
#[test]
fn placements_faster_than_float_are_probed_for_accuracy_after_the_first_sample() {
    let dir = tempfile::tempdir().unwrap();
    let cnn = CnnInt8::new(dir.path(), &[]);
    let (o, r) = cnn.run(&[("INFOPT_TEST_INT8_TIMED", "2.5,1.0,1.0,1.71")]);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(0), "{err}");
    // Once with the first sample's ranges, and again with ranges fitted on
    // the probe samples only where those lost every faster placement.
    let fitted = cost_count(&r, "placement: ranges fitted on the probe samples");
    assert_eq!(
        cost_count(&r, "placement: accuracy probes"),
        1 + fitted,
        "{}",
        r["int8"]["costs"]
    );
    let first_only = r["int8"]["calibration_samples"] == 1;
    if first_only {
        assert!(
            err.contains("no INT8 placement both runs faster than float (1.71 ms at one thread) and keeps the accuracy: the target's placement ran 2.50 ms; ONNX Runtime's placement (QLinearConv chains) ran 1.00 ms with every layer in INT8 but lost more accuracy"),
            "{err}"
        );
        assert!(!has_int8(&cnn.out));
        assert_eq!(cost_count(&r, "judged on every sample"), 0);
        assert_eq!(
            cost_count(&r, "original: runs"),
            8,
            "{}",
            r["int8"]["costs"]
        );
        assert!(
            r["notes"]
                .to_string()
                .contains("no INT8 placement both runs faster")
        );
    } else {
        assert_eq!(r["int8"]["calibration_samples"], 12, "{}", r["int8"]);
        // The 8 samples the probes read are not run in the original again:
        // the 12 held out, each once.
        assert_eq!(
            cost_count(&r, "original: runs"),
            12,
            "{}",
            r["int8"]["costs"]
        );
        let notes = r["notes"].to_string();
        assert!(
            notes.contains("placement: ONNX Runtime's placement"),
            "{notes}"
        );
    }
}

/// No placement faster than float, but the float model itself misses the
/// target (a cosine of 1 asked): the first sample's ranges do not stand in
/// for the calibration, which then runs on every sample before the search.
#[test]
fn a_float_model_that_misses_the_target_gets_the_calibration_on_every_sample() {
    let dir = tempfile::tempdir().unwrap();
    let cnn = CnnInt8::new(dir.path(), &["--int8-min-cosine", "1.0"]);
    let (o, _) = cnn.run(&[("INFOPT_TEST_INT8_TIMED", "2.06,1.71")]);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(4), "{err}");
    assert!(
        err.contains("calibrated 13 tensors on 1 samples (no INT8 placement ran faster than float: the rest not calibrated)")
            && err.contains("calibrated 13 tensors on 12 samples in"),
        "{err}"
    );
    assert!(err.contains("misses its accuracy target"), "{err}");
}

/// `optimize MODEL --int8` on 24 random samples (16 calibrate, 8 judge),
/// written to `out`, with the JSON report.
fn int8_on_random(model: &Path, out: &Path) -> (std::process::Output, serde_json::Value) {
    run_json(&[
        "optimize",
        s(model),
        "-o",
        s(out),
        "--int8",
        "--calib-data",
        "random:24",
        "--calib-samples",
        "16",
        "--held-out",
        "8",
        "--json",
    ])
}

#[test]
fn an_embedding_output_is_judged_by_nearest_neighbour_agreement() {
    // embedding_head ends in an L2 normalization (no classifier head): its
    // vectors are judged by whether each sample keeps its nearest other
    // sample, reported as that output's agreement.
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("q.onnx");
    let (o, r) = int8_on_random(&fixture("embedding_head.onnx"), &out);
    assert!(o.status.success(), "{}", stderr(&o));
    let h = &r["int8"]["held_out"];
    assert_eq!(h["samples"], 8);
    assert_eq!(h["neighbour_judged"], serde_json::json!(["embedding"]));
    let agreement = h["top1_agreement"]["embedding"].as_f64().unwrap();
    assert!(agreement >= 0.99, "{h}");
    assert!(
        r["notes"]
            .to_string()
            .contains("nearest-neighbour agreement for embeddings"),
        "{}",
        r["notes"]
    );
    assert!(out.exists());
}

#[test]
fn a_score_output_is_judged_by_its_correlation_across_samples() {
    // score_head's one value per sample sits near 4.0 with a small spread:
    // with every layer in INT8 its cosine over the samples is above 0.999
    // while the score follows float's across samples at a correlation
    // below 0.99. The search must see that, and keep the layer whose
    // rounding does it (fc2, which reads the cancelling pairs) in float.
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("q.onnx");
    let (o, r) = int8_on_random(&fixture("score_head.onnx"), &out);
    assert!(o.status.success(), "{}", stderr(&o));
    let err = stderr(&o);
    assert!(
        err.contains("score (correlation across samples 0.9")
            && err.contains("< 0.99) below the target"),
        "{err}"
    );
    let q = &r["int8"];
    let h = &q["held_out"];
    assert_eq!(h["samples"], 8);
    let correlation = h["correlation"]["score"].as_f64().unwrap();
    assert!(correlation >= 0.99, "{h}");
    let kept: Vec<&str> = q["kept_float"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|k| k["layer"].as_str())
        .collect();
    assert_eq!(kept, ["fc2"], "{q}");
    assert!(has_int8(&out));
}

#[test]
fn a_faster_placement_lost_on_the_first_samples_ranges_is_probed_again_with_fitted_ones() {
    // The target's placement slower than float, ONNX Runtime's faster (the
    // timing hook), and with the first sample's ranges the faster ones far
    // from the target (the other hook: one sample of these clips too
    // little to show it). Ranges fitted on the probe samples bring them
    // near it, so the calibration goes on over every sample instead of
    // writing float after one, and the faster placement is searched.
    let dir = tempfile::tempdir().unwrap();
    let cnn = CnnInt8::new(dir.path(), &[]);
    let hooks = [
        ("INFOPT_TEST_INT8_TIMED", "2.5,1.0,1.0,1.71"),
        ("INFOPT_TEST_INT8_FIRST_SAMPLE_LOST", "1"),
    ];
    let (o, r) = cnn.run(&hooks);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(0), "{err}");
    assert!(
        err.contains("with ranges fitted on the probe samples: ONNX Runtime's placement (QLinearConv chains) ")
            && err.contains("a faster placement comes near the target, calibrating on every sample"),
        "{err}"
    );
    assert_eq!(
        cost_count(&r, "placement: ranges fitted on the probe samples"),
        1
    );
    assert_eq!(r["int8"]["calibration_samples"], 12, "{}", r["int8"]);
    let notes = r["notes"].to_string();
    assert!(
        notes.contains("placement: ONNX Runtime's placement"),
        "{notes}"
    );
}

/// `--int8-timings EARLIER.json`: a run answered from an earlier run's
/// recorded timings (its report's `int8.timings`: the placement timing,
/// the speed check, ...) instead of the clock writes the same bytes with
/// the same figures; a record of something else is refused, naming the
/// timing that differs. The CNN fixture is timed for real here (the test
/// suite's floor for timing a model, `INFOPT_TEST_MIN_FLOAT_MS`, set to 0):
/// its INT8 against float is a near tie the clock decides either way.
#[test]
fn int8_timings_from_an_earlier_report_write_the_same_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let timed = [("INFOPT_TEST_MIN_FLOAT_MS", "0")];
    let cnn = CnnInt8::new(dir.path(), &[]);
    let (o, r) = cnn.run(&timed);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let timings = r["int8"]["timings"].as_array().cloned().unwrap_or_default();
    assert!(timings.len() >= 2, "{timings:?}");
    assert!(
        timings[0]["what"][0]
            .as_str()
            .is_some_and(|w| w.starts_with("too fast to time: float ")),
        "{timings:?}"
    );
    let earlier = dir.path().join("earlier.json");
    std::fs::write(&earlier, r.to_string()).unwrap();
    let first = std::fs::read(&cnn.out).unwrap();

    let replay = CnnInt8::new(dir.path(), &["--int8-timings", s(&earlier)]);
    let (o, r2) = replay.run(&timed);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(std::fs::read(&replay.out).unwrap(), first, "the same bytes");
    assert_eq!(r2["int8"]["timings"], r["int8"]["timings"]);
    assert_eq!(r2["int8"]["speed"], r["int8"]["speed"]);

    // A record of another run: refused at the timing that differs.
    let mut other = r.clone();
    other["int8"]["timings"][0]["what"][0] = "too fast to time: float 0000000000000000".into();
    std::fs::write(&earlier, other.to_string()).unwrap();
    let (o, _) = replay.run(&timed);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let expected = format!(
        "--int8-timings {}: its timing 1 was of too fast to time: float 0000000000000000, this run's is of {}: the model, data or options differ from that run's; run without --int8-timings",
        earlier.display(),
        timings[0]["what"][0].as_str().unwrap()
    );
    assert!(stderr(&o).contains(&expected), "{}", stderr(&o));

    // Where nothing is timed, a record would change nothing: refused.
    for (extra, needle) in [
        (
            "--target=tensorrt",
            "--int8-timings: on the tensorrt target nothing is timed in ONNX Runtime, so no timing decides the model written: drop it (or use --target portable or onnxruntime)",
        ),
        (
            "--no-verify",
            "--int8-timings: with --no-verify the INT8 model is neither judged nor timed, so no timing decides it: drop one of the two",
        ),
    ] {
        let refused = CnnInt8::new(dir.path(), &["--int8-timings", s(&earlier), extra]);
        let (o, _) = refused.run(&timed);
        assert_eq!(o.status.code(), Some(2), "{extra}: {}", stderr(&o));
        assert!(stderr(&o).contains(needle), "{extra}: {}", stderr(&o));
    }

    // Without --int8 there is nothing to answer.
    let o = infopt(&[
        "optimize",
        s(&fixture("cnn_bn_relu.onnx")),
        "-o",
        s(&dir.path().join("f.onnx")),
        "--int8-timings",
        s(&earlier),
    ]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(
        stderr(&o).contains(
            "--int8-timings is an INT8 option, but the pipeline has no quantize-int8 step; add --int8"
        ),
        "{}",
        stderr(&o)
    );
}
