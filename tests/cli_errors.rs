//! Bad inputs get one-line errors that name the problem, and the documented exit code.

use std::path::{Path, PathBuf};
use std::process::Command;

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_infopt"))
}

fn bad(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures/bad")
        .join(name)
}

/// Runs `infopt inspect` on a bad fixture; returns (exit code, stderr).
fn inspect(path: &Path) -> (i32, String) {
    let out = bin().arg("inspect").arg(path).output().expect("run infopt");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn assert_load_error(file: &str, expected: &str) {
    let (code, stderr) = inspect(&bad(file));
    assert_eq!(code, 3, "{file}: exit code, stderr: {stderr}");
    assert_eq!(
        stderr.lines().count(),
        1,
        "{file}: one line expected, got: {stderr}"
    );
    assert!(stderr.starts_with("error: "), "{stderr}");
    assert!(
        stderr.contains(expected),
        "{file}: expected '{expected}' in: {stderr}"
    );
    assert!(
        !stderr.contains("panicked") && !stderr.contains("backtrace"),
        "{stderr}"
    );
}

#[test]
fn empty_file() {
    assert_load_error("empty.onnx", "is empty (0 bytes): not an ONNX model");
}

#[test]
fn truncated_file() {
    assert_load_error(
        "truncated.onnx",
        "is not a valid ONNX model: failed to decode Protobuf message",
    );
}

#[test]
fn not_protobuf() {
    assert_load_error("not_protobuf.onnx", "is not a valid ONNX model");
}

#[test]
fn cycle() {
    assert_load_error(
        "cycle.onnx",
        "the graph has a cycle through node 'A' (Relu)",
    );
}

#[test]
fn undefined_input() {
    assert_load_error(
        "undefined_input.onnx",
        "node 'Add' (Add) reads 'nobody_defines_me', which no node, initializer or graph input defines",
    );
}

#[test]
fn duplicate_output() {
    assert_load_error(
        "duplicate_output.onnx",
        "value 'y' is defined twice: by node 'first' (Relu) and by node 'second' (Sigmoid)",
    );
}

#[test]
fn missing_external_file() {
    assert_load_error(
        "missing_external.onnx",
        "external data of tensor 'w': file 'does_not_exist.bin' not found in",
    );
}

#[test]
fn external_path_with_dotdot() {
    assert_load_error(
        "external_dotdot.onnx",
        "location '../secret.bin' contains '..'",
    );
}

#[test]
fn external_absolute_path() {
    assert_load_error(
        "external_absolute.onnx",
        "location '/etc/passwd' is an absolute path",
    );
}

#[test]
fn external_offset_past_end() {
    assert_load_error(
        "external_offset_past_end.onnx",
        "offset 8192 is past the end of 'external_offset_past_end.bin' (16 bytes)",
    );
}

#[test]
fn missing_model_file() {
    let (code, stderr) = inspect(&bad("no_such_model.onnx"));
    assert_eq!(code, 3);
    assert!(
        stderr.contains("no_such_model.onnx does not exist"),
        "{stderr}"
    );
}

#[test]
fn usage_error_exit_code() {
    let out = bin().args(["inspect", "--no-such-flag"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn convert_refuses_to_overwrite_input() {
    let tmp = tempfile::tempdir().unwrap();
    let model = tmp.path().join("m.onnx");
    std::fs::copy(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/models/if_subgraph.onnx"),
        &model,
    )
    .unwrap();
    let out = bin()
        .arg("convert")
        .arg(&model)
        .arg("-o")
        .arg(&model)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("refusing to overwrite the input file"),
        "{stderr}"
    );
}

/// A folder `dir` holding `model.onnx` (external location `w.bin`) and the
/// symlink `w.bin -> ../secret.bin`, next to `secret.bin` and an empty `other`
/// folder to run from.
fn symlink_escape() -> tempfile::TempDir {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures");
    let tmp = tempfile::tempdir().unwrap();
    std::fs::copy(root.join("secret.bin"), tmp.path().join("secret.bin")).unwrap();
    let dir = tmp.path().join("dir");
    std::fs::create_dir(&dir).unwrap();
    std::fs::create_dir(tmp.path().join("other")).unwrap();
    std::fs::copy(bad("external_symlink.onnx"), dir.join("model.onnx")).unwrap();
    std::os::unix::fs::symlink("../secret.bin", dir.join("w.bin")).unwrap();
    tmp
}

/// `infopt convert MODEL -o OUT --inline` run from `cwd`.
fn convert_from(cwd: &Path, model: &str, out: &str) -> (i32, String) {
    let o = bin()
        .current_dir(cwd)
        .args(["convert", model, "-o", out, "--inline"])
        .output()
        .expect("run infopt");
    (
        o.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

#[test]
fn external_symlink_escape_is_refused_however_the_model_is_named() {
    let tmp = symlink_escape();
    let dir = tmp.path().join("dir");
    let secret = std::fs::canonicalize(tmp.path().join("secret.bin")).unwrap();
    let absolute = dir.join("model.onnx");
    let absolute = absolute.to_str().unwrap();
    for (cwd, model) in [
        (dir.clone(), "model.onnx"),
        (dir.clone(), "./model.onnx"),
        (tmp.path().join("other"), "../dir/model.onnx"),
        (tmp.path().join("other"), absolute),
    ] {
        let (code, stderr) = convert_from(&cwd, model, "../out.onnx");
        assert_eq!(code, 3, "{model}: {stderr}");
        assert_eq!(
            stderr,
            format!(
                "error: {model}: external data of tensor 'w': location 'w.bin' resolves to {} outside the model's folder (through a symlink); refusing to read it\n",
                secret.display()
            ),
            "{model}"
        );
        assert!(!tmp.path().join("out.onnx").exists(), "{model}");
    }
}

/// The control: the same folder with a real `w.bin` converts from inside it, so
/// the refusal above is the symlink's doing.
#[test]
fn external_data_beside_a_bare_model_name_loads() {
    let tmp = symlink_escape();
    let dir = tmp.path().join("dir");
    std::fs::remove_file(dir.join("w.bin")).unwrap();
    std::fs::copy(tmp.path().join("secret.bin"), dir.join("w.bin")).unwrap();
    let (code, stderr) = convert_from(&dir, "model.onnx", "../out.onnx");
    assert_eq!(code, 0, "{stderr}");
    let out = std::fs::read(tmp.path().join("out.onnx")).unwrap();
    let secret = std::fs::read(tmp.path().join("secret.bin")).unwrap();
    assert!(out.windows(secret.len()).any(|w| w == secret.as_slice()));
}

/// `bench` and `compare` hand the file to a runtime that resolves external
/// data itself; the same containment check runs first.
#[test]
fn external_symlink_escape_is_refused_by_bench_and_compare() {
    let tmp = symlink_escape();
    let dir = tmp.path().join("dir");
    let secret = std::fs::canonicalize(tmp.path().join("secret.bin")).unwrap();
    for args in [
        &["bench", "model.onnx", "--runs", "1", "--warmup", "0"][..],
        &["compare", "model.onnx", "model.onnx"][..],
    ] {
        let o = bin().current_dir(&dir).args(args).output().unwrap();
        let stderr = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(3), "{args:?}: {stderr}");
        assert_eq!(
            stderr.lines().last().unwrap_or_default(),
            format!(
                "error: model.onnx: external data of tensor 'w': location 'w.bin' resolves to {} outside the model's folder (through a symlink); refusing to read it",
                secret.display()
            ),
            "{args:?}"
        );
    }
}

#[test]
fn an_output_folder_that_does_not_exist_is_named_before_any_work() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("missing/folder/model.onnx");
    let model = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/models/cnn_bn_relu.onnx");
    for command in ["optimize", "convert"] {
        let o = bin()
            .arg(command)
            .arg(&model)
            .arg("-o")
            .arg(&out)
            .output()
            .expect("run infopt");
        let stderr = String::from_utf8_lossy(&o.stderr).into_owned();
        assert_eq!(o.status.code(), Some(6), "{command}: {stderr}");
        assert_eq!(
            stderr.trim().lines().last().unwrap_or(""),
            format!(
                "error: cannot write {}: its folder {} does not exist; create it first, or choose another output path",
                out.display(),
                out.parent().unwrap().display()
            ),
            "{command}"
        );
        // optimize stops before loading: nothing about the model is printed.
        if command == "optimize" {
            assert!(!stderr.contains("loaded"), "{stderr}");
        }
    }
}
