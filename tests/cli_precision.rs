//! `infopt optimize --fp16 / --bf16 / --precision` and configs/fp16.yaml end to end.

mod common;

use std::path::Path;

use common::{fixture, infopt, s, stderr};

fn repo(rel: &str) -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(rel)
}

#[test]
fn fp16_flag_appends_the_conversion_and_verifies() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("t16.onnx");
    let model = fixture("transformer_block.onnx");
    let o = infopt(&["optimize", s(&model), "-o", s(&out), "--fp16", "--json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let r: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert!(r["verification"]["passed"].as_bool().unwrap(), "{r}");
    let cos = r["verification"]["outputs"][0]["cosine"].as_f64().unwrap();
    assert!(cos >= 0.999, "{cos}");
    let notes: Vec<&str> = r["notes"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|n| n.as_str())
        .collect();
    assert!(
        notes.iter().any(|n| n.contains("appended convert-float16")),
        "{notes:?}"
    );
    assert!(
        notes.iter().any(|n| n.starts_with("convert-float16: ")),
        "{notes:?}"
    );
    let passes: Vec<&str> = r["passes"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|p| p["pass"].as_str())
        .collect();
    assert_eq!(passes.last(), Some(&"convert-float16"));
    let declined = r["declined"].to_string();
    assert!(declined.contains("kept in fp32: Softmax"), "{declined}");
    // Half the weights: the output file is much smaller.
    let before = std::fs::metadata(&model).unwrap().len();
    let after = std::fs::metadata(&out).unwrap().len();
    assert!(after * 10 < before * 7, "{before} -> {after}");
}

#[test]
fn precision_overrides_and_config_file() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("t16.onnx");
    let model = fixture("transformer_block.onnx");
    let cfg = repo("configs/fp16.yaml");
    let o = infopt(&[
        "optimize",
        s(&model),
        "-o",
        s(&out),
        "-c",
        s(&cfg),
        "--precision",
        "/ffn.*=fp32",
        "--json",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let r: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let declined = r["declined"].to_string();
    assert!(
        declined.contains("the override for name '/ffn.*' says fp32"),
        "{declined}"
    );
    assert!(r["verification"]["passed"].as_bool().unwrap());
}

#[test]
fn precision_mistakes_are_usage_errors() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("x.onnx");
    let model = fixture("cnn_bn_relu.onnx");
    let cases: [(&[&str], &str); 3] = [
        (
            &["--fp16", "--precision", "Relu=fp61"],
            "did you mean 'fp16'",
        ),
        (
            &["--precision", "Softmax=fp32"],
            "needs a pass that reads it",
        ),
        (
            &["--fp16", "--precision", "Relu"],
            "expected NAME_OR_OP=PRECISION",
        ),
    ];
    for (extra, want) in cases {
        let mut args = vec!["optimize", s(&model), "-o", s(&out)];
        args.extend_from_slice(extra);
        let o = infopt(&args);
        assert_eq!(o.status.code(), Some(2), "{extra:?}: {}", stderr(&o));
        let err = stderr(&o);
        let lines: Vec<&str> = err.lines().filter(|l| l.starts_with("error")).collect();
        assert_eq!(lines.len(), 1, "{err}");
        assert!(lines[0].contains(want), "{extra:?}: {err}");
    }
    let o = infopt(&["optimize", s(&model), "-o", s(&out), "--fp16", "--bf16"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
}
