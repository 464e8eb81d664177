//! Helpers shared by the CLI end-to-end tests.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

pub fn fixture(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures/models")
        .join(rel)
}

/// The infopt binary under test, with the speed check's bound below which
/// a float model is not timed set for it (see
/// `ops/src/int8/speed.rs::min_float_ms`): the fixtures' INT8 must not give
/// way to float on a loaded machine's noise.
pub fn infopt_command() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_infopt"));
    c.env("INFOPT_TEST_MIN_FLOAT_MS", "0.25");
    c
}

/// Runs the infopt binary under test.
pub fn infopt(args: &[&str]) -> Output {
    infopt_command().args(args).output().expect("run infopt")
}

pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// The lines of stderr that are errors.
pub fn error_lines(o: &Output) -> Vec<String> {
    stderr(o)
        .lines()
        .filter(|l| l.starts_with("error"))
        .map(str::to_string)
        .collect()
}

pub fn s(p: &Path) -> &str {
    p.to_str().expect("UTF-8 test path")
}

/// An `.npy` image of a float32 C-order array.
pub fn npy_f32(shape: &[usize], data: &[f32]) -> Vec<u8> {
    let dims: Vec<String> = shape.iter().map(|d| d.to_string()).collect();
    let mut header = format!(
        "{{'descr': '<f4', 'fortran_order': False, 'shape': ({}), }}",
        dims.join(", ")
    );
    while (10 + header.len() + 1) % 64 != 0 {
        header.push(' ');
    }
    header.push('\n');
    let mut out = b"\x93NUMPY\x01\x00".to_vec();
    out.extend_from_slice(&(header.len() as u16).to_le_bytes());
    out.extend_from_slice(header.as_bytes());
    for v in data {
        out.extend_from_slice(&v.to_le_bytes());
    }
    out
}

/// cnn_bn_relu takes `input` [N,3,32,32]: `n` samples stacked in one .npz.
pub fn stacked(dir: &Path, n: usize) -> std::path::PathBuf {
    let mut state = 12345u32;
    let data: Vec<f32> = (0..n * 3 * 32 * 32)
        .map(|_| {
            state = state.wrapping_mul(1664525).wrapping_add(1013904223);
            (state >> 8) as f32 / (1u32 << 24) as f32 * 4.0 - 2.0
        })
        .collect();
    let path = dir.join("calib.npz");
    let mut zip = zip::ZipWriter::new(std::fs::File::create(&path).unwrap());
    let opts =
        zip::write::SimpleFileOptions::default().compression_method(zip::CompressionMethod::Stored);
    zip.start_file("input.npy", opts).unwrap();
    std::io::Write::write_all(&mut zip, &npy_f32(&[n, 1, 3, 32, 32], &data)).unwrap();
    zip.finish().unwrap();
    path
}

/// The JSON report on stdout of a run that must have succeeded.
pub fn json(o: &Output) -> serde_json::Value {
    assert!(o.status.success(), "{}", stderr(o));
    serde_json::from_slice(&o.stdout).expect("valid JSON")
}

/// Whether ONNX Runtime can be used (the library the binary discovers: `ORT_DYLIB_PATH`,
/// `python3`, or this checkout's `.venv`). Without one, tests that need it say so and
/// pass, except under CI (`CI` set), where that is a failure.
pub fn ort_available() -> bool {
    let o = infopt(&[
        "bench",
        s(&fixture("cnn_bn_relu.onnx")),
        "--backend",
        "ort",
        "--runs",
        "1",
        "--warmup",
        "0",
    ]);
    if o.status.success() {
        return true;
    }
    let err = stderr(&o);
    if std::env::var_os("CI").is_some() || !err.contains("ONNX Runtime library not found") {
        panic!("ONNX Runtime should be usable here: {err}");
    }
    eprintln!("skipping: {err}");
    false
}
