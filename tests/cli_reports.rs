//! `--report FILE` on every command, through one emitter: the format from
//! the extension (.json, .md, .xml for JUnit), repeatable, the same
//! renderings whatever the command.

mod common;

use std::path::{Path, PathBuf};

use common::{fixture, infopt, s, stderr};

/// The three report files of a command run in `dir`.
fn report_args(dir: &Path) -> (Vec<String>, [PathBuf; 3]) {
    let files = ["r.json", "r.md", "r.xml"].map(|f| dir.join(f));
    let args = files
        .iter()
        .flat_map(|f| ["--report".to_string(), f.display().to_string()])
        .collect();
    (args, files)
}

fn read(p: &Path) -> String {
    std::fs::read_to_string(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

#[test]
fn build_engine_writes_json_markdown_and_junit() {
    let dir = tempfile::tempdir().unwrap();
    let onnx = dir.path().join("cnn.trt.onnx");
    let (reports, [json, md, xml]) = report_args(dir.path());
    let model = fixture("cnn_bn_relu.onnx");
    let mut args = vec![
        "build-engine",
        s(&model),
        "--emit-onnx",
        s(&onnx),
        "--shapes",
        "input:1x3x32x32/4x3x32x32/16x3x32x32",
    ];
    args.extend(reports.iter().map(String::as_str));
    let o = infopt(&args);
    assert!(o.status.success(), "{}", stderr(&o));

    let r: serde_json::Value = serde_json::from_str(&read(&json)).unwrap();
    assert_eq!(r["schema_version"], 2);
    assert_eq!(r["verification"]["passed"], true);
    assert!(
        r["onnx"]["path"]
            .as_str()
            .unwrap()
            .ends_with("cnn.trt.onnx")
    );

    let md = read(&md);
    assert!(
        md.starts_with(&format!(
            "## ✅ infopt build-engine: `{}` → `{}`",
            model.display(),
            onnx.display()
        )),
        "{md}"
    );
    assert!(md.contains("**passed**: verification passed"), "{md}");
    assert!(
        md.contains("<details><summary>Full report</summary>"),
        "{md}"
    );
    assert!(md.contains("trtexec"), "{md}");

    let xml = read(&xml);
    assert!(xml.starts_with("<?xml version=\"1.0\""), "{xml}");
    assert!(
        xml.contains("<testsuites name=\"infopt\" tests=\"1\" failures=\"0\""),
        "{xml}"
    );
    assert!(
        xml.contains("<testcase classname=\"infopt.check\" name=\"verification\"/>"),
        "{xml}"
    );
}

#[test]
fn optimize_writes_json_markdown_and_junit() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("cnn.opt.onnx");
    let (reports, [json, md, xml]) = report_args(dir.path());
    let model = fixture("cnn_bn_relu.onnx");
    let mut args = vec![
        "optimize",
        s(&model),
        "-o",
        s(&out),
        "--gate",
        "max_nodes=1000",
    ];
    args.extend(reports.iter().map(String::as_str));
    let o = infopt(&args);
    assert!(o.status.success(), "{}", stderr(&o));

    let r: serde_json::Value = serde_json::from_str(&read(&json)).unwrap();
    assert_eq!(r["schema_version"], 1);
    assert_eq!(r["gates"]["passed"], true);
    assert!(
        r["output"]["path"]
            .as_str()
            .unwrap()
            .ends_with("cnn.opt.onnx")
    );

    let md = read(&md);
    assert!(md.starts_with("## ✅ infopt optimize: "), "{md}");
    assert!(md.contains("all 1 gates passed"), "{md}");
    assert!(md.contains("| `max_nodes` |"), "{md}");

    let xml = read(&xml);
    assert!(
        xml.contains("<testcase classname=\"infopt.gate.structure\" name=\"max_nodes\"/>"),
        "{xml}"
    );
    assert!(xml.contains("failures=\"0\""), "{xml}");
}

#[test]
fn inspect_writes_every_format_too() {
    let dir = tempfile::tempdir().unwrap();
    let (reports, [json, md, xml]) = report_args(dir.path());
    let model = fixture("cnn_bn_relu.onnx");
    let mut args = vec!["inspect", s(&model)];
    args.extend(reports.iter().map(String::as_str));
    let o = infopt(&args);
    assert!(o.status.success(), "{}", stderr(&o));
    let r: serde_json::Value = serde_json::from_str(&read(&json)).unwrap();
    assert!(r["nodes"].as_u64().unwrap() > 0, "{r}");
    let md = read(&md);
    assert!(
        md.starts_with(&format!("## ✅ infopt inspect: `{}`", model.display())),
        "{md}"
    );
    assert!(md.contains("```text"), "{md}");
    assert!(read(&xml).contains("tests=\"0\" failures=\"0\""));
}

#[test]
fn an_unknown_extension_is_refused_before_any_work() {
    let dir = tempfile::tempdir().unwrap();
    let report = dir.path().join("r.txt");
    let onnx = dir.path().join("e.onnx");
    let o = infopt(&[
        "build-engine",
        s(&fixture("cnn_bn_relu.onnx")),
        "--emit-onnx",
        s(&onnx),
        "--report",
        s(&report),
    ]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("name the file .json (JSON), .md (Markdown) or .xml (JUnit XML)"),
        "{}",
        stderr(&o)
    );
    assert!(!onnx.exists(), "nothing is built");
}
