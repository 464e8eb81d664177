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

#[test]
fn a_mask_sliced_to_the_keys_length_gets_the_keys_length() {
    // transformers slices the 4-D mask to the keys' length before adding it:
    // the mask's dim must be at least past + seq.
    let dir = tempfile::tempdir().unwrap();
    let mut b = GraphBuilder::new();
    let k = b.input("cache", DataType::Float, dims(&["past"]));
    let n = b.input("new", DataType::Float, dims(&["seq"]));
    let m = b.input("mask", DataType::Float, dims(&["total"]));
    let keys = b.op("Concat", &[k, n], vec![Attribute::int("axis", 0)]);
    let len = b.op("Shape", &[keys], vec![]);
    let zero = b.i64("zero", &[1], &[0]);
    let sliced = b.op("Slice", &[m, zero, len, zero], vec![]);
    let scores = b.op("Add", &[keys, sliced], vec![]);
    // An Identity for the pipeline to remove, so there is something to verify.
    let y = b.op("Identity", &[scores], vec![]);
    let y = b.op("Relu", &[y], vec![]);
    b.output(y, "y", DataType::Float, None);
    let mut model = b.build(13);
    let path = dir.path().join("sliced.onnx");
    model
        .save(&path, &infopt_ir::SaveOptions::default())
        .unwrap();
    let out = dir.path().join("out.onnx");
    let o = infopt(&[
        "optimize",
        s(&path),
        "-o",
        s(&out),
        "--backend",
        "tract",
        "--json",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let report: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let shapes = &report["verification"]["input_shapes"];
    let size = |i: usize| shapes[i][1][0].as_u64().unwrap();
    assert_eq!(size(2), size(0) + size(1), "{shapes}");
}

#[test]
fn a_mask_read_by_gather_nd_with_counted_indices_covers_batch_and_keys() {
    // torch's dynamo exporter reads the padding mask as `mask[batch_idx,
    // kv_idx]`: a GatherND whose index tuples are Range(0, batch) and
    // Range(0, past + seq), expanded and concatenated on the last axis. The
    // mask declares its own symbols (`mb`, `mt`); any other sizes make the
    // GatherND read out of bounds in both tract and ONNX Runtime.
    let dir = tempfile::tempdir().unwrap();
    let mut b = GraphBuilder::new();
    let past = b.input("past", DataType::Float, dims(&["b", "past", "4"]));
    let new = b.input("new", DataType::Float, dims(&["b", "seq", "4"]));
    let mask = b.input("mask", DataType::Int64, dims(&["mb", "mt"]));
    let keys = b.op("Concat", &[past, new], vec![Attribute::int("axis", 1)]);
    let shape = b.op("Shape", &[keys], vec![]);
    let (i0, i1) = (b.i64("i0", &[], &[0]), b.i64("i1", &[], &[1]));
    let batch = b.op("Gather", &[shape, i0], vec![Attribute::int("axis", 0)]);
    let kv_len = b.op("Gather", &[shape, i1], vec![Attribute::int("axis", 0)]);
    let (start, step) = (b.i64("start", &[], &[0]), b.i64("step", &[], &[1]));
    let bi = b.op("Range", &[start, batch, step], vec![]);
    let ki = b.op("Range", &[start, kv_len, step], vec![]);
    let (ax0, ax1, ax_last) = (
        b.i64("ax0", &[1], &[0]),
        b.i64("ax1", &[1], &[1]),
        b.i64("ax_last", &[1], &[-1]),
    );
    let bi = b.op("Unsqueeze", &[bi, ax1], vec![]);
    let ki = b.op("Unsqueeze", &[ki, ax0], vec![]);
    let batch_1 = b.op("Unsqueeze", &[batch, ax0], vec![]);
    let kv_len_1 = b.op("Unsqueeze", &[kv_len, ax0], vec![]);
    let both = b.op(
        "Concat",
        &[batch_1, kv_len_1],
        vec![Attribute::int("axis", 0)],
    );
    let bi = b.op("Expand", &[bi, both], vec![]);
    let ki = b.op("Expand", &[ki, both], vec![]);
    let bi = b.op("Unsqueeze", &[bi, ax_last], vec![]);
    let ki = b.op("Unsqueeze", &[ki, ax_last], vec![]);
    let idx = b.op("Concat", &[bi, ki], vec![Attribute::int("axis", -1)]);
    let picked = b.op("GatherND", &[mask, idx], vec![]);
    let picked = b.op("Cast", &[picked], vec![Attribute::int("to", 1)]);
    let picked = b.op("Unsqueeze", &[picked, ax1], vec![]);
    // scores [b, seq, past + seq] plus the mask [b, 1, past + seq]
    let kt = b.op(
        "Transpose",
        &[keys],
        vec![Attribute::ints("perm", vec![0, 2, 1])],
    );
    let scores = b.op("MatMul", &[new, kt], vec![]);
    let y = b.op("Add", &[scores, picked], vec![]);
    // An Identity for the pipeline to remove, so there is something to verify.
    let y = b.op("Identity", &[y], vec![]);
    b.output(y, "y", DataType::Float, None);
    let mut model = b.build(13);
    let path = dir.path().join("gather_nd_mask.onnx");
    model
        .save(&path, &infopt_ir::SaveOptions::default())
        .unwrap();
    let out = dir.path().join("out.onnx");
    let o = infopt(&[
        "optimize",
        s(&path),
        "-o",
        s(&out),
        "--backend",
        "tract",
        "--json",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let report: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(report["verification"]["passed"], true);
    let shapes = &report["verification"]["input_shapes"];
    let size = |i: usize, axis: usize| shapes[i][1][axis].as_u64().unwrap();
    assert_eq!(size(2, 0), size(0, 0), "mask batch: {shapes}");
    assert_eq!(size(2, 1), size(0, 1) + size(1, 1), "mask length: {shapes}");
}

/// Issue 30: the KV-cache decoder step of each exporter verifies with the
/// default command, with ONNX Runtime as the reference where it is
/// installed (fixtures/export_kv_decoder.py wrote them: a Llama-style step
/// through torch.onnx's TorchScript and dynamo exporters, and transformers'
/// LlamaForCausalLM through both; GQA by expand + reshape from Shape chains,
/// past_key_values of dynamic length).
fn default_command_verifies(fixture_name: &str) -> serde_json::Value {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out.onnx");
    let model = fixture(&format!("exported/{fixture_name}"));
    let o = infopt(&["optimize", s(&model), "-o", s(&out), "--json"]);
    assert_eq!(o.status.code(), Some(0), "{fixture_name}: {}", stderr(&o));
    let r: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(r["verification"]["passed"], true, "{fixture_name}");
    let reference = if ort_available() { "ort" } else { "tract" };
    assert_eq!(
        r["verification"]["backend"]["reference_runtime"], reference,
        "{fixture_name}"
    );
    r
}

#[test]
fn a_torchscript_exported_decoder_step_verifies() {
    default_command_verifies("kv_decoder_torchscript.onnx");
}

#[test]
fn a_dynamo_exported_decoder_step_verifies() {
    default_command_verifies("kv_decoder_dynamo.onnx");
}

#[test]
fn a_dynamo_exported_transformers_llama_step_verifies() {
    default_command_verifies("kv_decoder_hf_dynamo.onnx");
}

/// transformers' TorchScript export relates the mask's length to the cache
/// only through Gather indices: sizes chosen without the relation fail in
/// every runtime ("indices element out of data bounds"). The inputs' names
/// relate them, and the report says so.
#[test]
fn a_torchscript_exported_transformers_llama_step_verifies() {
    let r = default_command_verifies("kv_decoder_hf_torchscript.onnx");
    let shapes: serde_json::Map<String, serde_json::Value> = r["verification"]["input_shapes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| (p[0].as_str().unwrap().to_string(), p[1].clone()))
        .collect();
    let (seq, total) = (
        dim(&shapes, "input_ids", 1),
        dim(&shapes, "attention_mask", 1),
    );
    assert_eq!(
        total,
        dim(&shapes, "past_key_values.0.key", 2) + seq,
        "{shapes:?}"
    );
}
