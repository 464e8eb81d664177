//! Crafted models (fixtures/crafted): hostile dims and attributes get a
//! one-line error with the documented exit code, or a correct result; never a
//! panic, a backtrace, exit 101 (panic) or 134 (abort on a huge allocation).
//! A crash that still happens inside a pass is caught and named.

mod common;

use std::path::PathBuf;
use std::process::Output;

use common::{s, stderr};

fn crafted(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures/crafted")
        .join(name)
}

/// `infopt ARGS` with backtraces asked for, so a printed one would show.
fn run(args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut c = common::infopt_command();
    c.args(args).env("RUST_BACKTRACE", "1");
    for (k, v) in env {
        c.env(k, v);
    }
    c.output().expect("run infopt")
}

fn optimize(name: &str, env: &[(&str, &str)]) -> (Option<i32>, String, PathBuf, tempfile::TempDir) {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("out.onnx");
    let model = crafted(name);
    let o = run(&["optimize", s(&model), "-o", s(&out), "--no-verify"], env);
    let err = stderr(&o);
    assert!(
        !err.contains("panicked") && !err.contains("backtrace"),
        "{name}: {err}"
    );
    (o.status.code(), err, out, tmp)
}

/// The one `error:` line of stderr (there must be exactly one).
fn error_line(err: &str) -> &str {
    let errors: Vec<&str> = err.lines().filter(|l| l.starts_with("error: ")).collect();
    assert_eq!(errors.len(), 1, "{err}");
    assert!(!err.lines().any(|l| l.starts_with("  ")), "{err}");
    errors[0]
}

#[test]
fn survivable_crafted_models_optimize() {
    for name in [
        "reshape_huge_shape_input.onnx",
        "reshape_negative_shape_input.onnx",
        "split_num_outputs_huge.onnx",
        "constant_of_shape_huge.onnx",
    ] {
        let (code, err, out, _tmp) = optimize(name, &[]);
        assert_eq!(code, Some(0), "{name}: {err}");
        assert!(out.is_file(), "{name}");
        assert!(!err.contains("error"), "{name}: {err}");
    }
}

#[test]
fn oversized_constants_are_declined_not_allocated() {
    let tmp = tempfile::tempdir().unwrap();
    // (tile_huge_repeats.onnx, repeats of 10^15, is a model error now: no
    // axis of any tensor is that long.)
    let cases: &[(&str, &str)] = &[("constant_of_shape_huge.onnx", "'c'")];
    for &(name, value) in cases {
        let out = tmp.path().join(name);
        let o = run(
            &[
                "optimize",
                s(&crafted(name)),
                "-o",
                s(&out),
                "--no-verify",
                "--json",
            ],
            &[],
        );
        assert_eq!(o.status.code(), Some(0), "{name}: {}", stderr(&o));
        let r: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        let declined = r["declined"].to_string();
        assert!(
            declined.contains("fold-constants") && declined.contains(value),
            "{name}: {declined}"
        );
    }
}

#[test]
fn tensors_claiming_impossible_dims_are_load_errors() {
    for (name, expected) in [
        (
            "initializer_negative_dim.onnx",
            "tensor 'w': dim 0 is -5; tensor dims must be non-negative",
        ),
        (
            "initializer_claims_more_than_it_holds.onnx",
            "tensor 'w': raw data holds 16 bytes, but float32 dims [1000000000000] need 4000000000000",
        ),
        (
            "typed_initializer_claims_more_than_it_holds.onnx",
            "tensor 'w': holds 4 values, but float32 dims [1000000000000] need 1000000000000",
        ),
    ] {
        let (code, err, out, _tmp) = optimize(name, &[]);
        assert_eq!(code, Some(3), "{name}: {err}");
        assert_eq!(
            error_line(&err),
            format!("error: {}: {expected}", s(&crafted(name))),
        );
        assert!(!out.exists());
        let o = run(&["inspect", s(&crafted(name))], &[]);
        assert_eq!(o.status.code(), Some(3));
        assert_eq!(
            stderr(&o),
            format!("error: {}: {expected}\n", s(&crafted(name)))
        );
    }
}

/// A panic inside a pass (injected: debug builds honour INFOPT_INJECT_PANIC)
/// is exit 1 and one line naming the pass and the node, even with
/// RUST_BACKTRACE=1; nothing is written.
#[test]
fn a_crash_inside_a_pass_is_one_line_naming_pass_and_node() {
    let (code, err, out, _tmp) = optimize(
        "split_num_outputs_huge.onnx",
        &[("INFOPT_INJECT_PANIC", "fold-constants")],
    );
    assert_eq!(code, Some(1), "{err}");
    let line = error_line(&err);
    assert!(
        line.starts_with(
            "error: pass 'fold-constants' crashed at node 'S' (Split): injected panic second line (passes/src/driver.rs:"
        ),
        "{line}"
    );
    assert!(
        line.ends_with(
            "); this is a bug in infopt (please report it with the model); --disable fold-constants skips the pass"
        ),
        "{line}"
    );
    assert!(!out.exists());
}

#[test]
fn a_crash_outside_the_passes_is_one_line_too() {
    let o = run(
        &["inspect", s(&crafted("split_num_outputs_huge.onnx"))],
        &[("INFOPT_INJECT_PANIC", "cli")],
    );
    assert_eq!(o.status.code(), Some(1));
    let err = stderr(&o);
    assert!(
        err.starts_with("error: internal error: injected panic (src/cli.rs:")
            && err.ends_with("); this is a bug in infopt (please report it with the model)\n"),
        "{err}"
    );
    assert_eq!(err.lines().count(), 1, "{err}");
}

/// Attributes that size an allocation, with and without verification: a
/// model error naming the node (exit 3) before any pass or runtime sizes a
/// buffer by them. Without the check, the grouped Conv made `fuse-conv-bn`
/// abort on a 17 GB allocation and the pool made tract enumerate 4.6e18
/// window positions.
#[test]
fn impossible_sizing_attributes_are_model_errors_naming_the_node() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("out.onnx");
    for (name, expected) in [
        (
            // A stride of i64::MAX: one output position, but tract runs past
            // minutes on strides far smaller (2^32, fuzz seed 4242 case 515).
            "conv_overflowing_window.onnx",
            "node 'C' (Conv): attribute 'strides': 9223372036854775807 is larger than 16777216, the longest a stride infopt accepts (values [1, 9223372036854775807])",
        ),
        (
            // Repeats of 10^15: past 2^40, no axis of any tensor reaches
            // (an Expand to i64::MAX overflowed inside tract: fuzz seed 2468
            // case 1554).
            "tile_huge_repeats.onnx",
            "invalid graph: node 'T' (Tile): input 'repeats' ('r') holds 1000000000000000, longer than any axis of a tensor",
        ),
        (
            "conv_group_huge.onnx",
            "node 'GroupConv' (Conv): attribute 'group': 2147483647 does not divide the 4 output channels of weight 'w' [4,1,3,3]",
        ),
        (
            "pool_window_huge.onnx",
            "node 'Pool' (AveragePool): attribute 'kernel_shape': [2147483647, 2147483647] covers 4611686014132420609 positions, more than the 16777216 a window may cover",
        ),
    ] {
        let model = crafted(name);
        for verify in [false, true] {
            let mut args = vec!["optimize", s(&model), "-o", s(&out)];
            if !verify {
                args.push("--no-verify");
            }
            let o = run(&args, &[]);
            let err = stderr(&o);
            assert_eq!(o.status.code(), Some(3), "{name} verify={verify}: {err}");
            assert_eq!(
                error_line(&err),
                format!("error: {}: {expected}", model.display()),
                "{name} verify={verify}"
            );
            assert!(!out.exists(), "{name}");
        }
    }
}

/// A valid model whose declared input is 4e15 bytes: verification says it
/// cannot run it (exit 7), naming the first node whose output is that size,
/// before generating the input or loading the model, instead of aborting
/// on the allocation.
#[test]
fn an_input_too_large_to_generate_cannot_be_verified() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("out.onnx");
    let model = crafted("input_dims_huge.onnx");
    let o = run(&["optimize", s(&model), "-o", s(&out)], &[]);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(7), "{err}");
    assert!(
        error_line(&err).starts_with(
            "error: cannot verify: node 'Mul' (Mul) would make 'x1' [100000,100000,100000] float32 of 4.0e15 bytes at the verification sizes (x [100000,100000,100000]), more than half of the "
        ),
        "{err}"
    );
}
