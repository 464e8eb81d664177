//! Verification in ONNX Runtime runs the original (the reference) with
//! graph optimizations disabled, and the candidate at the level the user
//! runs: ORT's own fusions are another optimizer, and one that changes
//! results must not decide whether our rewrite is correct.

mod common;

use std::path::{Path, PathBuf};

use common::{ort_available, s, stderr};
use infopt_ir::builder::{GraphBuilder, dims};
use infopt_ir::{Attribute, DataType};

/// LayerNormalization written out, with Pow's operands swapped (`2 ** d`
/// where the pattern has `d ** 2`), which ORT's LayerNorm fusion (extended
/// level and above) fuses anyway: at `opt all` ORT computes a LayerNorm, not
/// this graph. The leading `x * 1` gives infopt a rewrite to verify.
fn layer_norm_with_swapped_pow(dir: &Path) -> PathBuf {
    let mut b = GraphBuilder::new();
    let x = b.input("x", DataType::Float, dims(&["2", "3", "16"]));
    let one = b.f32("one", &[], &[1.0]);
    let two = b.f32("two", &[], &[2.0]);
    let eps = b.f32("eps", &[], &[1e-5]);
    let gamma_values: Vec<f32> = (0..16).map(|i| 0.5 + i as f32 / 16.0).collect();
    let beta_values: Vec<f32> = (0..16).map(|i| i as f32 / 32.0 - 0.25).collect();
    let gamma = b.f32("gamma", &[16], &gamma_values);
    let beta = b.f32("beta", &[16], &beta_values);
    let axes = || vec![Attribute::ints("axes", vec![-1])];
    let x1 = b.op("Mul", &[x, one], vec![]);
    let mean = b.op("ReduceMean", &[x1], axes());
    let d = b.op("Sub", &[x1, mean], vec![]);
    let sq = b.op("Pow", &[two, d], vec![]);
    let var = b.op("ReduceMean", &[sq], axes());
    let ve = b.op("Add", &[var, eps], vec![]);
    let sd = b.op("Sqrt", &[ve], vec![]);
    let n = b.op("Div", &[d, sd], vec![]);
    let g = b.op("Mul", &[n, gamma], vec![]);
    let y = b.op("Add", &[g, beta], vec![]);
    b.output(y, "y", DataType::Float, None);
    let mut m = b.build(13);
    let path = dir.join("ln_swapped_pow.onnx");
    m.save(&path, &infopt_ir::SaveOptions::default()).unwrap();
    path
}

fn optimize_in_ort(model: &Path, out: &Path, extra: &[&str]) -> std::process::Output {
    common::infopt_command()
        .args([
            "optimize",
            s(model),
            "-o",
            s(out),
            "--backend",
            "ort",
            "--json",
        ])
        .args(extra)
        .env("INFOPT_TEST_PASSES", "1")
        .output()
        .expect("run infopt")
}

#[test]
fn a_correct_rewrite_is_not_refused_for_what_orts_fusion_changes() {
    if !ort_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let model = layer_norm_with_swapped_pow(dir.path());
    let out = dir.path().join("out.onnx");
    let o = optimize_in_ort(&model, &out, &[]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(out.is_file());
    let report: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let v = &report["verification"];
    assert_eq!(v["passed"], true, "{v}");
    assert_eq!(v["backend"]["opt_level"], "all", "{v}");
    assert_eq!(v["backend"]["reference_opt_level"], "disable", "{v}");
    let warnings = report["warnings"].to_string();
    assert!(
        warnings.contains(
            "ONNX Runtime's graph optimizations (opt all) change this model's results: the original at opt all differs from itself at opt disable by max abs"
        ),
        "{warnings}"
    );
    // At a level that does not fuse, nothing needs excusing.
    let o = optimize_in_ort(&model, &out, &["--ort-opt-level", "basic"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let report: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert!(
        !report["warnings"]
            .to_string()
            .contains("graph optimizations"),
        "{report}"
    );
}

#[test]
fn a_wrong_rewrite_of_such_a_model_is_still_refused() {
    if !ort_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let model = layer_norm_with_swapped_pow(dir.path());
    let out = dir.path().join("out.onnx");
    let o = optimize_in_ort(&model, &out, &["--passes", "perturb-weight"]);
    assert_eq!(o.status.code(), Some(4), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("error: the optimized model does not match the original"),
        "{}",
        stderr(&o)
    );
    assert!(!out.exists());
}

/// `fuse-slices-to-split` in the default pipeline, verified in ONNX Runtime
/// (its GatherSliceToSplitFusion makes the same Split at its extended level):
/// YOLOv8's box/class cut of a Relu'd head.
#[test]
fn slices_cutting_an_axis_end_to_end_become_a_split_that_ort_agrees_with() {
    if !ort_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let mut b = GraphBuilder::new();
    let x = b.input("x", DataType::Float, dims(&["1", "6", "n"]));
    let r = b.op("Relu", &[x], vec![]);
    for (i, (s0, e0)) in [(0i64, 4i64), (4, 6)].into_iter().enumerate() {
        let st = b.i64(&format!("s{i}"), &[1], &[s0]);
        let en = b.i64(&format!("e{i}"), &[1], &[e0]);
        let ax = b.i64(&format!("a{i}"), &[1], &[1]);
        let y = b.op("Slice", &[r, st, en, ax], vec![]);
        b.output(y, &format!("y{i}"), DataType::Float, None);
    }
    let mut m = b.build(17);
    let model = dir.path().join("head.onnx");
    m.save(&model, &infopt_ir::SaveOptions::default()).unwrap();
    let out = dir.path().join("out.onnx");
    let o = optimize_in_ort(&model, &out, &["--target", "onnxruntime"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let report: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(report["verification"]["passed"], true);
    let ops = report["ops"].to_string();
    let after = infopt_ir::Model::load(&out).unwrap();
    let kinds: Vec<&str> = after
        .graph
        .nodes()
        .map(|(_, n)| n.op_type.as_str())
        .collect();
    assert_eq!(kinds, ["Relu", "Split"], "{ops}");
}

/// `x * 1 -> Relu -> y` plus what `extra` adds, saved with `ir_version`
/// (the `* 1` gives infopt a rewrite to verify).
fn small_model(
    dir: &Path,
    name: &str,
    ir_version: i64,
    extra: impl FnOnce(&mut GraphBuilder, infopt_ir::ValueId) -> infopt_ir::ValueId,
) -> PathBuf {
    let mut b = GraphBuilder::new();
    let x = b.input("x", DataType::Float, dims(&["1", "8", "2", "2"]));
    let one = b.f32("one", &[], &[1.0]);
    let x1 = b.op("Mul", &[x, one], vec![]);
    let r = b.op("Relu", &[x1], vec![]);
    let y = extra(&mut b, r);
    b.output(y, "y", DataType::Float, None);
    let mut m = b.build(17);
    m.meta.ir_version = Some(ir_version);
    let path = dir.join(name);
    m.save(&path, &infopt_ir::SaveOptions::default()).unwrap();
    path
}

fn optimize_default(model: &Path, out: &Path) -> std::process::Output {
    common::infopt_command()
        .args(["optimize", s(model), "-o", s(out), "--json"])
        .output()
        .expect("run infopt")
}

/// Issue 30: the reference is not the optimizer's own arithmetic. With
/// ONNX Runtime installed it runs the original, at graph optimizations
/// off, and the report says so.
#[test]
fn with_onnx_runtime_installed_it_is_the_reference() {
    if !ort_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let model = small_model(dir.path(), "m.onnx", 8, |_, r| r);
    let o = optimize_default(&model, &dir.path().join("out.onnx"));
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let r: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let backend = &r["verification"]["backend"];
    assert_eq!(backend["name"], "ort", "{backend}");
    assert_eq!(backend["reference_runtime"], "ort", "{backend}");
    assert_eq!(backend["reference_opt_level"], "disable", "{backend}");
}

/// A model ONNX Runtime cannot load (IR 14: ORT 1.31 reads up to 13) is
/// verified in tract, and the note says why.
#[test]
fn a_model_onnx_runtime_cannot_load_is_verified_in_tract() {
    if !ort_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let model = small_model(dir.path(), "ir14.onnx", 14, |_, r| r);
    let o = optimize_default(&model, &dir.path().join("out.onnx"));
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let r: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(r["verification"]["backend"]["reference_runtime"], "tract");
    let notes = r["notes"].to_string();
    assert!(
        notes.contains("verified in tract: cannot run the original model in ort"),
        "{notes}"
    );
}

/// tract computes DepthToSpace and SpaceToDepth with mode CRD as DCR (ONNX's
/// test_spacetodepth_crd_mode_example): it cannot be the reference of such a
/// model. Where ONNX Runtime cannot load it either, verification says so
/// (exit 7) rather than refuse infopt's right result against tract's wrong
/// one, or pass a wrong one.
#[test]
fn tract_is_never_the_reference_of_a_model_it_computes_wrong() {
    let dir = tempfile::tempdir().unwrap();
    let s2d = |b: &mut GraphBuilder, r| {
        b.op(
            "DepthToSpace",
            &[r],
            vec![
                Attribute::int("blocksize", 2),
                Attribute::string("mode", "CRD"),
            ],
        )
    };
    let model = small_model(dir.path(), "d2s14.onnx", 14, s2d);
    let out = dir.path().join("out.onnx");
    let o = optimize_default(&model, &out);
    assert_eq!(o.status.code(), Some(7), "{}", stderr(&o));
    let e = stderr(&o);
    assert!(
        e.contains("tract cannot be the reference: DepthToSpace `depthtospace_")
            && e.contains("`: tract computes DepthToSpace mode=CRD as DCR"),
        "{e}"
    );
    assert!(!out.exists());
    // ONNX Runtime, which loads it at IR 8, is the reference.
    if ort_available() {
        let model = small_model(dir.path(), "d2s8.onnx", 8, s2d);
        let o = optimize_default(&model, &out);
        assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    }
}

/// A GRU over constants (ONNX's test_gru_reverse, as constants), with the
/// given extra attributes; its output is added to the input `x`.
fn constant_gru(dir: &Path, name: &str, extra: Vec<Attribute>) -> PathBuf {
    let mut b = GraphBuilder::new();
    let x = b.input("x", DataType::Float, dims(&["1", "3", "5"]));
    let seq: Vec<f32> = (1..=6).map(|v| v as f32).collect();
    let xs = b.f32("xs", &[3, 1, 2], &seq);
    let w = b.f32("w", &[1, 15, 2], &[0.1; 30]);
    let r = b.f32("r", &[1, 15, 5], &[0.1; 75]);
    let mut attrs = vec![
        Attribute::int("hidden_size", 5),
        Attribute::string("direction", "reverse"),
    ];
    attrs.extend(extra);
    let gru = b.op("GRU", &[xs, w, r], attrs);
    let h = b.op("Squeeze", &[gru], vec![]);
    let y = b.op("Add", &[x, h], vec![]);
    b.output(y, "y", DataType::Float, None);
    let mut m = b.build(14);
    let model = dir.join(name);
    m.save(&model, &infopt_ir::SaveOptions::default()).unwrap();
    model
}

/// ONNX's test_gru_reverse with its inputs as constants: tract computed it
/// as direction=forward and folding took that. The reference kernel (f64)
/// folds it now, and the result agrees with ONNX Runtime's.
#[test]
fn a_reverse_gru_on_constants_folds_to_what_onnx_runtime_computes() {
    if !ort_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let model = constant_gru(dir.path(), "gru.onnx", vec![]);
    let out = dir.path().join("out.onnx");
    let o = optimize_default(&model, &out);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let r: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(r["verification"]["passed"], true);
    assert_eq!(r["verification"]["backend"]["reference_runtime"], "ort");
    let after = infopt_ir::Model::load(&out).unwrap();
    let ops: Vec<&str> = after
        .graph
        .nodes()
        .map(|(_, n)| n.op_type.as_str())
        .collect();
    assert_eq!(ops, ["Add"], "{ops:?}");
}

/// With activations the reference kernel does not implement, the GRU goes
/// to the fallback evaluator, tract, which computes reverse as forward: the
/// fold is declined with that reason, never taken.
#[test]
fn a_reverse_gru_tract_would_compute_is_declined() {
    // Without ONNX Runtime nothing can be the reference of this model.
    if !ort_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let activations = Attribute::from_proto(infopt_ir::proto::AttributeProto {
        name: Some("activations".into()),
        r#type: Some(8),
        strings: vec![b"Sigmoid".to_vec(), b"Relu".to_vec()],
        ..Default::default()
    });
    let model = constant_gru(dir.path(), "gru_relu.onnx", vec![activations]);
    let out = dir.path().join("out.onnx");
    let o = optimize_default(&model, &out);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let r: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let declined = r["declined"].to_string();
    assert!(
        declined.contains("tract computes GRU with direction=reverse as forward"),
        "{declined}"
    );
    let after = infopt_ir::Model::load(&out).unwrap();
    assert!(after.graph.nodes().any(|(_, n)| n.op_type == "GRU"));
}

/// Issue 30: a fold computed by infopt's own kernels is put to ONNX Runtime
/// once per kind. With the kernels' Add made wrong by the debug-build test
/// hook, the fold of `c1 + c2` is declined with the reason and the model
/// written keeps the Add, computing the right numbers.
#[test]
fn a_wrong_fold_is_caught_by_onnx_runtime_and_declined() {
    if !ort_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let model = small_model(dir.path(), "m.onnx", 8, |b, r| {
        let c1 = b.f32("c1", &[8, 1, 1], &[0.5; 8]);
        let c2 = b.f32("c2", &[8, 1, 1], &[0.25; 8]);
        let c = b.op("Add", &[c1, c2], vec![]);
        b.op("Mul", &[r, c], vec![])
    });
    let out = dir.path().join("out.onnx");
    let o = common::infopt_command()
        .args(["optimize", s(&model), "-o", s(&out), "--json"])
        .env("INFOPT_TEST_WRONG_FOLD", "Add")
        .output()
        .expect("run infopt");
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let r: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let declined = r["declined"].to_string();
    assert!(
        declined.contains(
            "cannot evaluate Add: unsupported: Add(float32, float32){} at opset 17: infopt's kernel and ONNX Runtime differ (output 0 element 0: 1.75 where ONNX Runtime computes 0.75); not folded"
        ),
        "{declined}"
    );
    assert_eq!(adds_after(&r), 1, "{}", r["ops"]);
    assert_eq!(r["verification"]["passed"], true);
    // Without the hook the same fold is made.
    let o = optimize_default(&model, &out);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let r: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(adds_after(&r), 0, "{}", r["ops"]);
}

/// Add nodes in the written model, from the report's op histogram.
fn adds_after(r: &serde_json::Value) -> u64 {
    r["ops"]
        .as_array()
        .unwrap()
        .iter()
        .find(|o| o["op"] == "Add")
        .map_or(0, |o| o["after"].as_u64().unwrap())
}
