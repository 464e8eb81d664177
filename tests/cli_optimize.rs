//! End-to-end `infopt optimize` runs on fixtures.

mod common;

use std::path::Path;

use common::{fixture, infopt, json, s, stderr};

#[test]
fn json_report_on_the_transformer_fixture() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("t.onnx");
    let model = fixture("transformer_block.onnx");
    let o = infopt(&["optimize", s(&model), "-o", s(&out), "--json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let r: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(r["schema_version"], 1);
    assert_eq!(r["pipeline"], "default");
    assert!(r["verification"]["passed"].as_bool().unwrap());
    // The reference is ONNX Runtime when it is installed, tract otherwise.
    let reference = if common::ort_available() {
        "ort"
    } else {
        "tract"
    };
    assert_eq!(r["verification"]["backend"]["name"], reference);
    assert_eq!(r["verification"]["backend"]["reference_runtime"], reference);
    let constant = r["ops"]
        .as_array()
        .unwrap()
        .iter()
        .find(|o| o["op"] == "Constant")
        .unwrap();
    assert_eq!(constant["before"], 12);
    assert_eq!(constant["after"], 0);
    assert!(r["output"]["nodes"].as_u64().unwrap() < r["input"]["nodes"].as_u64().unwrap());
    assert!(out.exists());
    // The output is a valid model that loads again.
    let o = infopt(&["inspect", s(&out)]);
    assert!(o.status.success(), "{}", stderr(&o));
}

#[test]
fn default_output_name_and_report_files() {
    let tmp = tempfile::tempdir().unwrap();
    let model = tmp.path().join("cnn.onnx");
    std::fs::copy(fixture("cnn_bn_relu.onnx"), &model).unwrap();
    let before = std::fs::read(&model).unwrap();
    let md = tmp.path().join("r.md");
    let json = tmp.path().join("r.json");
    let o = infopt(&["optimize", s(&model), "--report", s(&md)]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(tmp.path().join("cnn.opt.onnx").exists());
    assert_eq!(
        before,
        std::fs::read(&model).unwrap(),
        "the input is never modified"
    );
    let text = std::fs::read_to_string(&md).unwrap();
    // Fit for a pull-request comment: verdict first, the full report folded below.
    assert!(text.starts_with("## ✅ infopt optimize: "), "{text}");
    assert!(
        text.contains("<details><summary>Full report</summary>"),
        "{text}"
    );
    assert!(text.contains("| nodes"), "{text}");
    let o = infopt(&[
        "optimize",
        s(&model),
        "-o",
        s(&tmp.path().join("x.onnx")),
        "--report",
        s(&json),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let r: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(r["schema_version"], 1);
    // The table went to stdout.
    assert!(String::from_utf8_lossy(&o.stdout).contains("Summary"));
}

#[test]
fn refuses_to_write_over_the_input() {
    let model = fixture("cnn_bn_relu.onnx");
    let o = infopt(&["optimize", s(&model), "-o", s(&model)]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("refusing to overwrite the input file"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn a_planted_numerical_bug_fails_verification_and_writes_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("bad.onnx");
    let model = fixture("cnn_bn_relu.onnx");
    let o = common::infopt_command()
        .args([
            "optimize",
            s(&model),
            "-o",
            s(&out),
            "--passes",
            "perturb-weight",
        ])
        .env("INFOPT_TEST_PASSES", "1")
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(4), "{}", stderr(&o));
    let err = stderr(&o);
    assert!(
        err.contains("error: the optimized model does not match the original"),
        "{err}"
    );
    assert!(err.contains("logits"), "{err}");
    assert!(!out.exists());
    // Without the environment variable the test pass does not exist.
    let o = infopt(&[
        "optimize",
        s(&model),
        "-o",
        s(&out),
        "--passes",
        "perturb-weight",
    ]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("unknown pass 'perturb-weight'"));
    // --no-verify writes it anyway, and says so.
    let o = common::infopt_command()
        .args([
            "optimize",
            s(&model),
            "-o",
            s(&out),
            "--passes",
            "perturb-weight",
            "--no-verify",
        ])
        .env("INFOPT_TEST_PASSES", "1")
        .output()
        .unwrap();
    assert!(o.status.success());
    assert!(String::from_utf8_lossy(&o.stdout).contains("verification disabled"));
}

#[test]
fn unknown_pass_and_bad_shape_are_usage_errors() {
    let model = fixture("cnn_bn_relu.onnx");
    let o = infopt(&["optimize", s(&model), "--passes", "fuse-conv-nb"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("unknown pass 'fuse-conv-nb'; did you mean 'fuse-conv-bn'?"),
        "{}",
        stderr(&o)
    );
    let o = infopt(&["optimize", s(&model), "--input-shape", "input:0x3"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("dims must be positive"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn stop_after_and_dump_dir() {
    let tmp = tempfile::tempdir().unwrap();
    let dump = tmp.path().join("dump");
    let model = fixture("transformer_block.onnx");
    let o = infopt(&[
        "optimize",
        s(&model),
        "-o",
        s(&tmp.path().join("o.onnx")),
        "--stop-after",
        "constants-to-initializers",
        "--dump-dir",
        s(&dump),
        "--json",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let r: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(r["stopped_after"], "constants-to-initializers");
    // remove-initializer-inputs runs first (and changes nothing here).
    let passes: Vec<&str> = r["passes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["pass"].as_str().unwrap())
        .collect();
    assert_eq!(
        passes,
        ["remove-initializer-inputs", "constants-to-initializers"]
    );
    // Only passes that changed the model are dumped.
    assert!(dump.join("01-constants-to-initializers.onnx").exists());
}

#[test]
fn passes_doc_is_current() {
    let o = infopt(&["passes", "markdown"]);
    assert!(o.status.success());
    let generated = String::from_utf8(o.stdout).unwrap();
    let committed =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/passes.md"))
            .unwrap_or_default();
    assert!(
        generated == committed,
        "docs/passes.md is stale: run `cargo run -- passes markdown > docs/passes.md`"
    );
}

#[test]
fn passes_explain_prints_the_doc() {
    let o = infopt(&["passes", "explain", "eliminate-dead"]);
    assert!(o.status.success());
    let text = String::from_utf8(o.stdout).unwrap();
    for section in [
        "## What it does",
        "## When it declines",
        "## Numerics",
        "## Example",
    ] {
        assert!(text.contains(section), "{text}");
    }
}

#[test]
fn verify_each_pass_names_the_pass_and_the_first_diverging_tensor() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("o.onnx");
    let model = fixture("cnn_bn_relu.onnx");
    let o = common::infopt_command()
        .args([
            "optimize",
            s(&model),
            "-o",
            s(&out),
            "--verify-each-pass",
            "--json",
        ])
        .args([
            "--passes",
            "constants-to-initializers,fuse-conv-bn,perturb-weight,eliminate-dead",
        ])
        .env("INFOPT_TEST_PASSES", "1")
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(4), "{}", stderr(&o));
    let err = stderr(&o);
    assert!(
        err.contains("pass 'perturb-weight' broke numerical agreement with the original"),
        "{err}"
    );
    // The perturbed weight is the fused conv3 weight; its conv's output is the first to differ.
    assert!(
        err.contains("first diverging tensor 'bn3_out (node 'conv3/Conv', Conv)'"),
        "{err}"
    );
    let r: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let checks = r["pass_checks"].as_array().unwrap();
    assert_eq!(checks.len(), 2, "{checks:?}");
    assert_eq!(checks[0]["pass"], "fuse-conv-bn");
    assert_eq!(checks[0]["passed"], true);
    assert_eq!(checks[1]["pass"], "perturb-weight");
    assert_eq!(checks[1]["passed"], false);
    assert_eq!(r["first_failing_pass"], "perturb-weight");
    assert!(!out.exists());
}

#[test]
fn models_tract_cannot_run_are_verified_in_onnxruntime() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("o.onnx");
    let model = fixture("loop_subgraph.onnx");
    let o = infopt(&["optimize", s(&model), "-o", s(&out), "--json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let r: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(r["verification"]["backend"]["name"], "ort");
    assert_eq!(r["verification"]["passed"], true);
    // ONNX Runtime is the reference from the start (issue 30): tract, which
    // cannot run the Loop, is not tried first.
    assert_eq!(r["verification"]["backend"]["reference_runtime"], "ort");
    let notes = r["notes"].to_string();
    assert!(!notes.contains("unsupported operator(s): Loop"), "{notes}");
}

#[test]
fn constants_of_ops_without_reference_kernels_fold_through_tract() {
    use infopt_ir::builder::{GraphBuilder, dims};
    use infopt_ir::{DataType, SaveOptions};
    let mut b = GraphBuilder::new();
    let x = b.input("x", DataType::Float, dims(&["batch", "4"]));
    let c = b.f32("c", &[4], &[0.1, 0.2, 0.3, 0.4]);
    let t = b.op("Tanh", &[c], vec![]);
    let e = b.op("Erf", &[t], vec![]);
    let y = b.op("Add", &[x, e], vec![]);
    b.output(y, "y", DataType::Float, Some(dims(&["batch", "4"])));
    let mut model = b.build(17);
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("m.onnx");
    model.save(&path, &SaveOptions::default()).unwrap();
    let out = tmp.path().join("o.onnx");
    let o = infopt(&["optimize", s(&path), "-o", s(&out), "--json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let r: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let after: Vec<(String, u64)> = r["ops"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|o| o["after"].as_u64().unwrap() > 0)
        .map(|o| {
            (
                o["op"].as_str().unwrap().to_string(),
                o["after"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(after, vec![("Add".to_string(), 1)], "{r:#}");
    assert_eq!(r["verification"]["passed"], true);
}

#[test]
fn contrib_ops_without_onnxruntime_exit_8_naming_them() {
    // An ORT library path that does not exist stands for "ONNX Runtime not
    // installed" whatever this machine has.
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("o.onnx");
    let model = fixture("bert_attention.onnx");
    let o = infopt(&[
        "optimize",
        s(&model),
        "-o",
        s(&out),
        "--target",
        "onnxruntime",
        "--ort-dylib",
        "/nonexistent/libonnxruntime.so",
    ]);
    assert_eq!(o.status.code(), Some(8), "{}", stderr(&o));
    let err = stderr(&o);
    assert!(
        err.contains("contrib ops (com.microsoft Attention, BiasGelu, SkipLayerNormalization)"),
        "{err}"
    );
    assert!(err.contains("--no-verify"), "{err}");
    assert!(!out.exists());
    // With --no-verify the output is written, com.microsoft 1 declared.
    let o = infopt(&[
        "optimize",
        s(&model),
        "-o",
        s(&out),
        "--target",
        "onnxruntime",
        "--no-verify",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let m = infopt_ir::Model::load(&out).unwrap();
    assert_eq!(m.opset("com.microsoft"), Some(1));
}

/// `--upgrade-opset N` raises the opset before the fusions (so an opset-11
/// LayerNorm and GELU become the ops); a target out of range is a usage
/// error, a node that cannot be converted a one-line model error.
#[test]
fn upgrade_opset_flag() {
    let dir = tempfile::tempdir().unwrap();
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/models/opset11_changed.onnx");
    let out = dir.path().join("up.onnx");
    let o = common::infopt_command()
        .args(["optimize", "--upgrade-opset", "23", "-o"])
        .arg(&out)
        .arg(&src)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let m = infopt_ir::Model::load(&out).unwrap();
    assert_eq!(m.opset(""), Some(23));
    let ops = infopt_ir::stats::GraphStats::of_model(&m).ops;
    assert_eq!(ops.get("LayerNormalization"), Some(&1), "{ops:?}");
    assert_eq!(ops.get("Gelu"), Some(&1), "{ops:?}");

    let o = common::infopt_command()
        .args(["optimize", "--upgrade-opset", "30", "-o"])
        .arg(dir.path().join("x.onnx"))
        .arg(&src)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains("--upgrade-opset 30: choose an opset from 7 to 24"),
        "{err}"
    );

    // A model already at opset 17 is left at 17 (a note, not an error).
    let cnn = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/models/cnn_bn_relu.onnx");
    let out = dir.path().join("y.onnx");
    let o = common::infopt_command()
        .args(["optimize", "--upgrade-opset", "13", "-o"])
        .arg(&out)
        .arg(&cnn)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    let report = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{err}");
    assert!(report.contains("already imports opset 17"), "{report}");
    assert_eq!(infopt_ir::Model::load(&out).unwrap().opset(""), Some(17));
    assert!(!err.contains("panicked"), "{err}");
}

/// The `note:` lines a run printed (the rendered report goes to stdout).
fn printed_notes(o: &std::process::Output) -> Vec<String> {
    String::from_utf8_lossy(&o.stdout)
        .lines()
        .chain(String::from_utf8_lossy(&o.stderr).lines())
        .filter(|l| l.starts_with("note: "))
        .map(str::to_string)
        .collect()
}

/// A plain decoder through the default command: the dims nobody asked to fix
/// and the built-in pipeline's ONNX Runtime-only passes (which do nothing for
/// target portable) are facts for the JSON report, not printed notes.
#[test]
fn the_default_command_prints_no_notes_nobody_asked_for() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("kv.onnx");
    let model = fixture("kv_decoder.onnx");
    let o = infopt(&["optimize", s(&model), "-o", s(&out), "--no-verify"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(printed_notes(&o), Vec::<String>::new());
    let o = infopt(&[
        "optimize",
        s(&model),
        "-o",
        s(&out),
        "--no-verify",
        "--json",
    ]);
    let report: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let details = report["details"].to_string();
    assert!(details.contains("stays dynamic"), "{details}");
    assert!(
        details.contains(
            "fuse-ort-attention does nothing for target portable: com.microsoft.Attention is an ONNX Runtime contrib op"
        ),
        "{details}"
    );
    // A pass the user chose that cannot apply is news: printed.
    let o = infopt(&[
        "optimize",
        s(&model),
        "-o",
        s(&out),
        "--no-verify",
        "--passes",
        "fuse-ort-attention",
    ]);
    assert_eq!(
        printed_notes(&o),
        vec![
            "note: fuse-ort-attention does nothing for target portable: com.microsoft.Attention is an ONNX Runtime contrib op"
        ]
    );
}

/// What the user fixed is printed, and so is an output that stays dynamic
/// although every input dim was fixed (NonZero's count): that one asks for
/// action. Output dims that follow from the fix are facts.
#[test]
fn fixed_dims_and_outputs_that_stay_dynamic_are_printed() {
    use infopt_ir::DataType;
    use infopt_ir::builder::{GraphBuilder, dims};
    let tmp = tempfile::tempdir().unwrap();
    let mut b = GraphBuilder::new();
    let x = b.input("x", DataType::Float, dims(&["n"]));
    let nz = b.op("NonZero", &[x], vec![]);
    let r = b.op("Relu", &[x], vec![]);
    b.output(nz, "indices", DataType::Int64, None);
    b.output(r, "relu", DataType::Float, None);
    let mut m = b.build(13);
    let model = tmp.path().join("nonzero.onnx");
    m.save(&model, &infopt_ir::SaveOptions::default()).unwrap();
    let out = tmp.path().join("out.onnx");
    let o = infopt(&[
        "optimize",
        s(&model),
        "-o",
        s(&out),
        "--no-verify",
        "--input-shape",
        "x:4",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(
        printed_notes(&o),
        vec![
            "note: fix-shapes: input 'x' dim 0 (n) is now 4",
            "note: fix-shapes: output 'indices' dim 1 (nonzero_indices) stays dynamic",
        ]
    );
}

/// A fusion that needs a newer opset declines with the flag that adds the
/// step: the pass names an upgrade-opset step, the command adds
/// `--upgrade-opset N` (and with it the fusion happens).
#[test]
fn an_opset_decline_names_the_upgrade_flag() {
    let dir = tempfile::tempdir().expect("temp dir");
    let out = dir.path().join("o.onnx");
    let model = fixture("norm_block.onnx");
    let o = infopt(&["optimize", s(&model), "-o", s(&out), "--json"]);
    let j = json(&o);
    let reasons: Vec<&str> = j["declined"]
        .as_array()
        .expect("declined")
        .iter()
        .filter_map(|d| d["reason"].as_str())
        .collect();
    assert!(
        reasons.contains(&"decomposed LayerNorm needs opset 17 for LayerNormalization (model has 13); an upgrade-opset step to 17 raises it (--upgrade-opset 17)"),
        "{reasons:?}"
    );
    let o = infopt(&[
        "optimize",
        s(&model),
        "-o",
        s(&out),
        "--upgrade-opset",
        "17",
        "--json",
    ]);
    let j = json(&o);
    assert!(
        j["declined"]
            .as_array()
            .expect("declined")
            .iter()
            .all(|d| !d["reason"]
                .as_str()
                .unwrap_or("")
                .contains("LayerNormalization")),
        "{}",
        j["declined"]
    );
}
