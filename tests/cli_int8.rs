//! `optimize --int8`: calibration inside the pipeline, Q/DQ placement,
//! held-out accuracy in the report, and the accuracy-driven float fallback.

mod common;

use std::io::Write;
use std::path::Path;

use common::*;

fn run_json(args: &[&str]) -> (std::process::Output, serde_json::Value) {
    let o = infopt(args);
    let v = serde_json::from_slice(&o.stdout).unwrap_or(serde_json::Value::Null);
    (o, v)
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
    assert_eq!(q["held_out"]["skipped"], 8);
    assert_eq!(q["held_out"]["samples"], 4);
    let cos = q["held_out"]["outputs"][0]["cosine"].as_f64().unwrap();
    assert!(cos > 0.99, "{cos}");
    assert!(!q["worst_layers"].as_array().unwrap().is_empty());
    assert!(r["notes"].to_string().contains("accuracy target"));
    assert!(out.exists());
}

/// An `.npy` image of a float32 C-order array.
fn npy_f32(shape: &[usize], data: &[f32]) -> Vec<u8> {
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
fn stacked(dir: &Path, n: usize) -> std::path::PathBuf {
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
    zip.write_all(&npy_f32(&[n, 1, 3, 32, 32], &data)).unwrap();
    zip.finish().unwrap();
    path
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
    for k in &kept {
        assert!(k["layer"].as_str().is_some_and(|l| !l.is_empty()));
        assert!(k["cosine_after"].as_f64().unwrap() >= k["cosine_before"].as_f64().unwrap() - 1e-3);
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
