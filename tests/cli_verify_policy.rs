//! Verification a user can trust: sizes a detector accepts when the user
//! fixed none, a documented exit code when verification cannot run, and a
//! scale-aware default that accepts a correct BN fold and refuses real
//! breakage.

mod common;

use std::path::Path;

use common::*;
use infopt_ir::builder::{GraphBuilder, dims};
use infopt_ir::{Attribute, DataType};

/// A YOLO-style neck: [1,3,H,W] -> MaxPool /2 -> Resize x2 -> Concat with
/// the input. Runs only when H and W are even: at 2x3 (the first choice for
/// two unbound dims) tract cannot unify the Concat.
fn detector(dir: &Path) -> std::path::PathBuf {
    let mut b = GraphBuilder::new();
    let x = b.input("images", DataType::Float, dims(&["1", "3", "H", "W"]));
    let p = b.op(
        "MaxPool",
        &[x],
        vec![
            Attribute::ints("kernel_shape", vec![2, 2]),
            Attribute::ints("strides", vec![2, 2]),
        ],
    );
    let roi = b.f32("roi", &[0], &[]);
    let scales = b.f32("scales", &[4], &[1.0, 1.0, 2.0, 2.0]);
    let up = b.op(
        "Resize",
        &[p, roi, scales],
        vec![Attribute::string("mode", "nearest")],
    );
    let id = b.op("Identity", &[up], vec![]);
    let c = b.op("Concat", &[x, id], vec![Attribute::int("axis", 1)]);
    b.output(c, "features", DataType::Float, None);
    let mut m = b.build(13);
    let path = dir.join("detector.onnx");
    m.save(&path, &infopt_ir::SaveOptions::default()).unwrap();
    path
}

#[test]
fn detector_with_unfixed_hw_is_verified_at_sizes_it_accepts() {
    let dir = tempfile::tempdir().unwrap();
    let model = detector(dir.path());
    let out = dir.path().join("out.onnx");
    let o = infopt(&[
        "optimize",
        s(&model),
        "-o",
        s(&out),
        "--backend",
        "tract",
        "--json",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let report: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let shapes = &report["verification"]["input_shapes"][0][1];
    // The first choice already runs: distinct H and W (so a rewrite that
    // swaps them is seen), each a multiple of the stride chain's 2.
    let (h, w) = (shapes[2].as_u64().unwrap(), shapes[3].as_u64().unwrap());
    assert!(
        h.is_multiple_of(2) && w.is_multiple_of(2) && h != w,
        "verified at {shapes}"
    );
    let notes = report["notes"].to_string();
    assert!(!notes.contains("verification sizes"), "{notes}");
}

#[test]
fn verification_that_cannot_run_exits_7_and_names_the_input_shape_fix() {
    let dir = tempfile::tempdir().unwrap();
    // A Reshape to a constant 2x5 needs exactly 10 elements: no size that
    // infopt would choose for N gives 10, so nothing runs. The Identity is
    // a rewrite for the pipeline to make (unverified, it must not be written).
    let mut b = GraphBuilder::new();
    let x = b.input("x", DataType::Float, dims(&["N", "7"]));
    let x = b.op("Identity", &[x], vec![]);
    let shape = b.i64("shape", &[2], &[2, 5]);
    let r = b.op("Reshape", &[x, shape], vec![]);
    b.output(r, "y", DataType::Float, None);
    let mut m = b.build(13);
    let model = dir.path().join("reshape.onnx");
    m.save(&model, &infopt_ir::SaveOptions::default()).unwrap();
    let o = infopt(&["optimize", s(&model), "--backend", "tract"]);
    assert_eq!(o.status.code(), Some(7), "{}", stderr(&o));
    let e = stderr(&o);
    assert_eq!(
        e.trim()
            .lines()
            .last()
            .unwrap_or("")
            .matches("error:")
            .count(),
        1
    );
    assert!(e.contains("--input-shape x:Nx7"), "{e}");
    assert!(!dir.path().join("reshape.opt.onnx").exists());
}

#[test]
fn model_nothing_runs_is_written_when_the_pipeline_changes_nothing_it_computes() {
    let dir = tempfile::tempdir().unwrap();
    // The same unrunnable Reshape, with nothing to rewrite: the output
    // computes what the input does, so there is nothing to verify.
    let mut b = GraphBuilder::new();
    let x = b.input("x", DataType::Float, dims(&["N", "7"]));
    let shape = b.i64("shape", &[2], &[2, 5]);
    let r = b.op("Reshape", &[x, shape], vec![]);
    b.output(r, "y", DataType::Float, None);
    let mut m = b.build(13);
    let model = dir.path().join("reshape.onnx");
    m.save(&model, &infopt_ir::SaveOptions::default()).unwrap();
    let o = infopt(&["optimize", s(&model), "--backend", "tract", "--json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let report: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let notes = report["notes"].to_string();
    assert!(notes.contains("nothing to verify"), "{notes}");
    assert!(notes.contains("--input-shape x:Nx7"), "{notes}");
    assert!(dir.path().join("reshape.opt.onnx").exists());
}

/// A Conv + BatchNorm whose BN has large random statistics: folding is
/// correct but moves float rounding by more than rtol 1e-4 / atol 1e-5 of
/// each element on outputs of magnitude ~100.
fn conv_bn(dir: &Path) -> std::path::PathBuf {
    let mut b = GraphBuilder::new();
    let x = b.input("x", DataType::Float, dims(&["1", "16", "8", "8"]));
    let mut seed = 7u64;
    let mut rnd = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        (seed % 20000) as f32 / 10000.0 - 1.0
    };
    let w: Vec<f32> = (0..16 * 16 * 9).map(|_| rnd() * 3.0).collect();
    let w = b.f32("w", &[16, 16, 3, 3], &w);
    let c = b.op(
        "Conv",
        &[x, w],
        vec![Attribute::ints("pads", vec![1, 1, 1, 1])],
    );
    let scale: Vec<f32> = (0..16).map(|_| rnd() * 40.0).collect();
    let bias: Vec<f32> = (0..16).map(|_| rnd() * 50.0).collect();
    let mean: Vec<f32> = (0..16).map(|_| rnd() * 3.0).collect();
    let var: Vec<f32> = (0..16).map(|_| rnd().abs() * 0.01 + 1e-3).collect();
    let bn_inputs = [
        b.f32("scale", &[16], &scale),
        b.f32("bias", &[16], &bias),
        b.f32("mean", &[16], &mean),
        b.f32("var", &[16], &var),
    ];
    let bn = b.op(
        "BatchNormalization",
        &[c, bn_inputs[0], bn_inputs[1], bn_inputs[2], bn_inputs[3]],
        vec![],
    );
    b.output(bn, "y", DataType::Float, None);
    let mut m = b.build(13);
    let path = dir.join("conv_bn.onnx");
    m.save(&path, &infopt_ir::SaveOptions::default()).unwrap();
    path
}

#[test]
fn correct_bn_fold_passes_the_default_and_elementwise_is_still_available() {
    let dir = tempfile::tempdir().unwrap();
    let model = conv_bn(dir.path());
    let out = dir.path().join("o.onnx");
    let o = infopt(&[
        "optimize",
        s(&model),
        "-o",
        s(&out),
        "--backend",
        "tract",
        "--json",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let report: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(report["verification"]["criterion"]["kind"], "scaled");
    assert!(report["ops"].to_string().contains("BatchNormalization"));
    // The element-wise criterion judges the same fold by every element.
    let o = infopt(&[
        "optimize",
        s(&model),
        "-o",
        s(&out),
        "--backend",
        "tract",
        "--criterion",
        "elementwise",
        "--rtol",
        "0",
        "--atol",
        "0",
    ]);
    assert_eq!(o.status.code(), Some(4), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("every element within"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn real_breakage_is_refused_by_the_scaled_default() {
    let dir = tempfile::tempdir().unwrap();
    let model = conv_bn(dir.path());
    let o = common::infopt_command()
        .env("INFOPT_TEST_PASSES", "1")
        .args([
            "optimize",
            s(&model),
            "-o",
            s(&dir.path().join("bad.onnx")),
            "--passes",
            "perturb-weight",
            "--backend",
            "tract",
            "--json",
        ])
        .output()
        .unwrap();
    assert_eq!(
        o.status.code(),
        Some(4),
        "{}",
        String::from_utf8_lossy(&o.stdout)
    );
    assert!(stderr(&o).contains("of its scale"), "{}", stderr(&o));
    assert!(!dir.path().join("bad.onnx").exists());
}

/// Runs `optimize MODEL --backend tract --json` and returns the exit code,
/// the report (when printed) and stderr.
fn optimize_tract(model: &Path, out: &Path) -> (Option<i32>, serde_json::Value, String) {
    let o = infopt(&[
        "optimize",
        s(model),
        "-o",
        s(out),
        "--backend",
        "tract",
        "--json",
    ]);
    let report = serde_json::from_slice(&o.stdout).unwrap_or(serde_json::Value::Null);
    (o.status.code(), report, stderr(&o))
}

fn save(mut m: infopt_ir::Model, path: &Path) -> std::path::PathBuf {
    m.save(path, &infopt_ir::SaveOptions::default()).unwrap();
    path.to_path_buf()
}

#[test]
fn a_fixed_sibling_input_sets_the_verification_size() {
    // An image [1,3,?,?] concatenated with a mask input [1,1,96,80]: only
    // 96x80 runs, a size none of the generic choices (64, 32, 128, 512) is.
    let dir = tempfile::tempdir().unwrap();
    let mut b = GraphBuilder::new();
    let x = b.input("image", DataType::Float, dims(&["1", "3", "?", "?"]));
    let mask = b.input("mask", DataType::Float, dims(&["1", "1", "96", "80"]));
    let c = b.op("Concat", &[x, mask], vec![Attribute::int("axis", 1)]);
    let id = b.op("Identity", &[c], vec![]);
    b.output(id, "y", DataType::Float, None);
    let model = save(b.build(13), &dir.path().join("masked.onnx"));
    let (code, report, e) = optimize_tract(&model, &dir.path().join("o.onnx"));
    assert_eq!(code, Some(0), "{e}");
    let shapes = report["verification"]["input_shapes"].to_string();
    assert!(shapes.contains("[1,3,96,80]"), "{shapes}");
}

#[test]
fn kernels_after_a_stride_chain_set_a_minimum_verification_size() {
    // A stride-32 stem, a 7x7 average pool, Flatten and a Gemm sized for a
    // 1x1 map: H and W must be 224..255, so only the hint (a multiple of 32,
    // at least 224) finds a size that runs.
    let dir = tempfile::tempdir().unwrap();
    let mut b = GraphBuilder::new();
    let x = b.input("x", DataType::Float, dims(&["N", "3", "H", "W"]));
    let w = b.f32("w", &[4, 3, 32, 32], &vec![0.001; 4 * 3 * 32 * 32]);
    let stem = b.op(
        "Conv",
        &[x, w],
        vec![Attribute::ints("strides", vec![32, 32])],
    );
    let p = b.op(
        "AveragePool",
        &[stem],
        vec![Attribute::ints("kernel_shape", vec![7, 7])],
    );
    let f = b.op("Flatten", &[p], vec![]);
    let fc = b.f32("fc", &[4, 2], &[0.5, -0.5, 0.25, 1.0, -1.0, 0.5, 2.0, 0.1]);
    let y = b.op("Gemm", &[f, fc], vec![]);
    b.output(y, "y", DataType::Float, None);
    let model = save(b.build(13), &dir.path().join("stem.onnx"));
    let (code, report, e) = optimize_tract(&model, &dir.path().join("o.onnx"));
    assert_eq!(code, Some(0), "{e}");
    let shapes = &report["verification"]["input_shapes"][0][1];
    assert_eq!(shapes[2].as_u64(), Some(224), "{shapes}");
    assert_eq!(shapes[3].as_u64(), Some(224), "{shapes}");
}

/// `If(cond(sr))` whose branches both pass `x` on (Relu / Neg), with the
/// condition `Equal(sr, 16000)` or `Greater(mode, 3)`; then a Reshape to
/// `reshape_to` (pass `None` for none).
fn mode_switch(
    dir: &Path,
    name: &str,
    equal: bool,
    reshape_to: Option<&[i64]>,
) -> std::path::PathBuf {
    let branch = |op: &str| {
        let mut g = GraphBuilder::new();
        let x = g.graph_mut().add_value(infopt_ir::Value {
            outer: true,
            ..infopt_ir::Value::named("x")
        });
        let y = g.op(op, &[x], vec![]);
        g.output(y, &format!("{op}_y"), DataType::Float, None);
        g.into_graph()
    };
    let mut b = GraphBuilder::new();
    let _x = b.input("x", DataType::Float, dims(&["N", "7"]));
    let input = if equal { "sr" } else { "mode" };
    let k = if equal { 16000 } else { 3 };
    let sr = b.input(input, DataType::Int64, vec![]);
    let k = b.i64("k", &[], &[k]);
    let cond = b.op(if equal { "Equal" } else { "Greater" }, &[sr, k], vec![]);
    let mut y = b.op(
        "If",
        &[cond],
        vec![
            Attribute::graph("then_branch", branch("Relu")),
            Attribute::graph("else_branch", branch("Neg")),
        ],
    );
    // An Identity for the pipeline to remove: a model it leaves unchanged
    // is written without verification, and these tests are about verifying.
    y = b.op("Identity", &[y], vec![]);
    if let Some(to) = reshape_to {
        let shape = b.i64("shape", &[to.len() as i64], to);
        y = b.op("Reshape", &[y, shape], vec![]);
    }
    b.output(y, "y", DataType::Float, None);
    save(b.build(13), &dir.join(name))
}

#[test]
fn a_mode_switch_input_gets_the_constant_it_is_compared_with() {
    let dir = tempfile::tempdir().unwrap();
    let model = mode_switch(dir.path(), "switch.onnx", true, None);
    let (code, report, e) = optimize_tract(&model, &dir.path().join("o.onnx"));
    assert_eq!(code, Some(0), "{e}");
    let notes = report["notes"].to_string();
    assert!(
        notes.contains("input `sr` set to 16000, the value Equal"),
        "{notes}"
    );
}

#[test]
fn an_input_that_decides_a_branch_is_named_when_verification_cannot_run() {
    // Nothing runs (a Reshape of [N,7] to 2x5); `mode` decides the If: the
    // error names it and the way to give its value.
    let dir = tempfile::tempdir().unwrap();
    let model = mode_switch(dir.path(), "mode.onnx", false, Some(&[2, 5]));
    let (code, _, e) = optimize_tract(&model, &dir.path().join("o.onnx"));
    assert_eq!(code, Some(7), "{e}");
    assert!(e.contains("`mode` (decides If `if_"), "{e}");
    assert!(e.contains("it was a random value"), "{e}");
    assert!(e.contains("--inputs FILE.npz"), "{e}");
    let errors: Vec<&str> = e.lines().filter(|l| l.starts_with("error:")).collect();
    assert_eq!(errors.len(), 1, "{e}");
    assert!(errors[0].contains("`mode` (decides"), "{e}");
}

#[test]
fn indices_out_of_range_fall_back_to_plainer_generated_inputs() {
    let dir = tempfile::tempdir().unwrap();
    // Seeded integers in [0, 16) index past the table's 3 rows: the
    // original fails on them, and is verified on zeros instead.
    let mut b = GraphBuilder::new();
    let table = b.input("table", DataType::Float, dims(&["3", "4"]));
    let idx = b.input("idx", DataType::Int64, dims(&["5"]));
    let g = b.op("Gather", &[table, idx], vec![Attribute::int("axis", 0)]);
    let r1 = b.op("Relu", &[g], vec![]);
    let r2 = b.op("Relu", &[r1], vec![]);
    b.output(r2, "y", DataType::Float, None);
    let mut m = b.build(13);
    let model = dir.path().join("gather.onnx");
    m.save(&model, &infopt_ir::SaveOptions::default()).unwrap();
    let o = infopt(&["optimize", s(&model), "--backend", "tract", "--json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let report: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let notes = report["notes"].to_string();
    assert!(
        notes.contains("verification inputs: integer inputs set to 0"),
        "{notes}"
    );
    assert_eq!(report["verification"]["passed"], true, "{report}");
}

/// An MLP with 32 MiB of weights, external or inline: big enough that a
/// memory cap of 40 MiB refuses a heap copy and small enough for a test.
fn mlp_32mib(dir: &Path, external: bool) -> std::path::PathBuf {
    let mut b = GraphBuilder::new();
    let x = b.input("x", DataType::Float, dims(&["1", "2048"]));
    let mut seed = 7u32;
    let mut values = |n: usize| -> Vec<f32> {
        (0..n)
            .map(|_| {
                seed = seed.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
                (seed >> 8) as f32 / (1u32 << 24) as f32 * 0.02 - 0.01
            })
            .collect()
    };
    let w1 = b.f32("w1", &[2048, 4096], &values(2048 * 4096));
    let w2 = b.f32("w2", &[4096, 8], &values(4096 * 8));
    let h = b.op("MatMul", &[x, w1], vec![]);
    let r = b.op("Relu", &[h], vec![]);
    let i = b.op("Identity", &[r], vec![]);
    let y = b.op("MatMul", &[i, w2], vec![]);
    b.output(y, "y", DataType::Float, None);
    let mut m = b.build(17);
    let path = dir.join(if external { "mlp_ext.onnx" } else { "mlp.onnx" });
    let options = infopt_ir::SaveOptions {
        external: if external {
            infopt_ir::ExternalDataPolicy::Threshold(1024)
        } else {
            infopt_ir::ExternalDataPolicy::Inline
        },
        ..Default::default()
    };
    m.save(&path, &options).unwrap();
    path
}

fn optimize_with_memory(model: &Path, cap: &str, extra: &[&str]) -> std::process::Output {
    let out = model.with_extension("opt.onnx");
    let mut args = vec!["optimize", s(model), "-o", s(&out), "--json"];
    args.extend_from_slice(extra);
    common::infopt_command()
        .args(&args)
        .env("INFOPT_MEMORY_AVAILABLE", cap)
        .output()
        .expect("run infopt")
}

#[test]
fn weights_bigger_than_memory_are_verified_memory_mapped_in_onnx_runtime() {
    if !ort_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let model = mlp_32mib(dir.path(), true);
    let o = optimize_with_memory(&model, "40M", &[]);
    assert!(o.status.success(), "{}", stderr(&o));
    let report: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let v = &report["verification"];
    assert_eq!(v["passed"], true, "{v}");
    assert_eq!(v["backend"]["name"], "ort", "{v}");
    assert_eq!(v["backend"]["weights_mapped"], true, "{v}");
    assert_eq!(v["backend"]["opt_level"], "disable", "{v}");
    let notes = report["notes"].to_string();
    assert!(notes.contains("memory-mapped"), "{notes}");
    // With room for a heap copy, nothing changes from the usual policy.
    let o = optimize_with_memory(&model, "1G", &[]);
    assert!(o.status.success(), "{}", stderr(&o));
    let report: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert!(report["verification"]["backend"]["weights_mapped"].is_null());
}

#[test]
fn weights_that_cannot_fit_even_mapped_are_refused_before_loading_with_the_way_out() {
    let dir = tempfile::tempdir().unwrap();
    let external = mlp_32mib(dir.path(), true);
    let inline = mlp_32mib(dir.path(), false);
    let one_error_line = |o: &std::process::Output| {
        assert_eq!(o.status.code(), Some(7), "{}", stderr(o));
        let e = stderr(o);
        let last = e.trim().lines().last().unwrap_or("").to_string();
        assert!(
            last.starts_with("error: ") && last.contains("--no-verify"),
            "{e}"
        );
        last
    };
    // Below the reserve for activations: refused even mapped.
    let e = one_error_line(&optimize_with_memory(&external, "8M", &[]));
    assert!(e.contains("memory-mapped it would still need"), "{e}");
    // Inline weights cannot be mapped: the error says how to store them.
    let e = one_error_line(&optimize_with_memory(&inline, "40M", &[]));
    assert!(e.contains("--external-data"), "{e}");
    // tract only copies: the error names the runtime that would not.
    let e = one_error_line(&optimize_with_memory(
        &external,
        "40M",
        &["--backend", "tract"],
    ));
    assert!(e.contains("drop --backend tract"), "{e}");
    assert!(!external.with_extension("opt.onnx").exists());
}

/// A float16 graph tract cannot load (its Gemm) with ONNX Runtime absent: the error
/// names the install line that brings ONNX Runtime beside a pip-installed infopt, the
/// one the README gives for engines.
#[test]
fn unverifiable_without_ort_names_the_install_line_with_ort() {
    let out = tempfile::tempdir().unwrap();
    let o = common::infopt_command()
        .arg("optimize")
        .arg(std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/models/gpt2_mlp.onnx"))
        .arg("--fp16")
        .arg("-o")
        .arg(out.path().join("m.onnx"))
        .env("ORT_DYLIB_PATH", out.path().join("no-libonnxruntime.so"))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    // 8: a runtime verification needs is missing.
    assert_eq!(o.status.code(), Some(8), "{err}");
    let last = err.lines().last().unwrap_or_default();
    assert!(
        last.starts_with("error: cannot verify: the optimized model does not run in tract (")
            && last.contains("and ONNX Runtime is not available (ONNX Runtime library not found: ORT_DYLIB_PATH=")
            && last.ends_with(
                "install it with `pip install 'infopt[ort]'` (for engines: `pip install 'infopt[ort]' tensorrt-rtx-cu13-libs`), `pip install onnxruntime` in infopt's environment, or set ORT_DYLIB_PATH to libonnxruntime.so, or pass --no-verify"
            ),
        "{last}"
    );
    assert!(!out.path().join("m.onnx").exists());
}

#[test]
fn an_input_shape_fixes_the_symbol_for_the_inputs_sharing_it() {
    // onnx-asr's front ends: `waveforms [batch_size, N]` and `waveforms_lens
    // [batch_size]`. With --input-shape waveforms:1x16, the first sizes tried
    // gave the lengths a distinct batch of 2; that was refused, and the note
    // said verification had fallen back to "every unbound dim 2".
    let dir = tempfile::tempdir().unwrap();
    let mut b = GraphBuilder::new();
    let w = b.input("waveforms", DataType::Float, dims(&["batch_size", "N"]));
    let l = b.input("waveforms_lens", DataType::Float, dims(&["batch_size"]));
    let sum = b.op(
        "ReduceSum",
        &[w],
        vec![
            Attribute::ints("axes", vec![1]),
            Attribute::int("keepdims", 0),
        ],
    );
    let y = b.op("Add", &[sum, l], vec![]);
    let y = b.op("Identity", &[y], vec![]);
    b.output(y, "y", DataType::Float, None);
    let mut m = b.build(11);
    let model = dir.path().join("frontend.onnx");
    m.save(&model, &infopt_ir::SaveOptions::default()).unwrap();
    let out = dir.path().join("out.onnx");
    let o = infopt(&[
        "optimize",
        s(&model),
        "-o",
        s(&out),
        "--input-shape",
        "waveforms:1x16",
        "--backend",
        "tract",
        "--json",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let report: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let notes = report["notes"].to_string();
    assert!(!notes.contains("verification sizes"), "{notes}");
    let shapes = report["verification"]["input_shapes"].to_string();
    assert!(shapes.contains("[\"waveforms_lens\",[1]]"), "{shapes}");
}

#[test]
fn a_batch_split_into_groups_of_four_is_verified_at_a_multiple_of_four() {
    // ICLabel (mne-icalabel) feeds each component four times and averages
    // them with a Reshape to [4, -1]: at the batch of 2 every size choice
    // gave, the plain `optimize` exited 7 and suggested a batch of 1.
    let dir = tempfile::tempdir().unwrap();
    let mut b = GraphBuilder::new();
    let x = b.input("x", DataType::Float, dims(&["components", "7"]));
    let shape = b.i64("groups", &[2], &[4, -1]);
    let grouped = b.op("Reshape", &[x, shape], vec![]);
    let mean = b.op(
        "ReduceMean",
        &[grouped],
        vec![
            Attribute::ints("axes", vec![0]),
            Attribute::int("keepdims", 0),
        ],
    );
    let y = b.op("Identity", &[mean], vec![]);
    b.output(y, "y", DataType::Float, None);
    let model = dir.path().join("grouped.onnx");
    save(b.build(13), &model);
    let out = dir.path().join("out.onnx");
    let o = infopt(&[
        "optimize",
        s(&model),
        "-o",
        s(&out),
        "--backend",
        "tract",
        "--json",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let report: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let notes = report["notes"].to_string();
    assert!(
        notes.contains("verification sizes: every unbound dim 4 (the first choice failed"),
        "{notes}"
    );
    let shapes = report["verification"]["input_shapes"].to_string();
    assert!(shapes.contains("[\"x\",[4,7]]"), "{shapes}");
    assert!(out.exists());
}
