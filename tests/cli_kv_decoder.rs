//! Decoder steps with a KV cache verify: the sizes chosen for their unbound
//! dims satisfy the relations the graph implies (the mask covers the cache
//! and the new tokens), whichever way the exporter named them.

mod common;

use common::*;
use infopt_ir::builder::{GraphBuilder, dims};
use infopt_ir::{Attribute, DataType};

/// Verifies `fixture` in tract and returns the shapes it ran with, by input.
fn verified_shapes(fixture_name: &str) -> serde_json::Map<String, serde_json::Value> {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out.onnx");
    let model = fixture(fixture_name);
    let o = infopt(&[
        "optimize",
        s(&model),
        "-o",
        s(&out),
        "--backend",
        "tract",
        "--json",
    ]);
    assert!(o.status.success(), "{fixture_name}: {}", stderr(&o));
    let report: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(report["verification"]["passed"], true);
    report["verification"]["input_shapes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|pair| (pair[0].as_str().unwrap().to_string(), pair[1].clone()))
        .collect()
}

fn dim(shapes: &serde_json::Map<String, serde_json::Value>, input: &str, axis: usize) -> u64 {
    shapes[input][axis].as_u64().unwrap()
}

fn assert_mask_covers_cache_and_new_tokens(fixture_name: &str, cache: &str) {
    let shapes = verified_shapes(fixture_name);
    let (batch, seq) = (dim(&shapes, "input_ids", 0), dim(&shapes, "input_ids", 1));
    let past = dim(&shapes, cache, 2);
    assert_eq!(dim(&shapes, "attention_mask", 1), past + seq, "{shapes:?}");
    // Still distinct, so that a rewrite confusing two of them is seen.
    assert!(batch != seq && seq != past && batch != past, "{shapes:?}");
}

#[test]
fn kv_decoder_with_a_total_symbol_verifies() {
    assert_mask_covers_cache_and_new_tokens("kv_decoder.onnx", "past_key_0");
}

#[test]
fn kv_decoder_named_as_onnxruntime_genai_does_verifies() {
    assert_mask_covers_cache_and_new_tokens("kv_decoder_genai.onnx", "past_key_values.0.key");
}

#[test]
fn kv_decoder_named_as_optimum_does_verifies() {
    // The mask's dim is named `past_sequence_length + sequence_length`.
    assert_mask_covers_cache_and_new_tokens("kv_decoder_optimum.onnx", "past_key_values.1.value");
}

#[test]
fn a_relation_that_is_not_enough_still_ends_in_the_one_line_fallback() {
    // total = past + seq makes the Add run; the Reshape to a constant 2x5
    // then needs past + seq = 10, which no candidate gives.
    let dir = tempfile::tempdir().unwrap();
    let mut b = GraphBuilder::new();
    let k = b.input("cache", DataType::Float, dims(&["past"]));
    let n = b.input("new", DataType::Float, dims(&["seq"]));
    let m = b.input("mask", DataType::Float, dims(&["total"]));
    let c = b.op("Concat", &[k, n], vec![Attribute::int("axis", 0)]);
    let a = b.op("Add", &[c, m], vec![]);
    let shape = b.i64("shape", &[2], &[2, 5]);
    let r = b.op("Reshape", &[a, shape], vec![]);
    let r = b.op("Identity", &[r], vec![]);
    b.output(r, "y", DataType::Float, None);
    let mut model = b.build(13);
    let path = dir.path().join("kv.onnx");
    model
        .save(&path, &infopt_ir::SaveOptions::default())
        .unwrap();
    let o = infopt(&["optimize", s(&path), "--backend", "tract"]);
    assert_eq!(o.status.code(), Some(7), "{}", stderr(&o));
    let e = stderr(&o);
    let last = e.trim().lines().last().unwrap_or("").to_string();
    assert_eq!(last.matches("error:").count(), 1, "{e}");
    assert!(
        last.contains("the graph wants total = past + seq (Add"),
        "{last}"
    );
}
