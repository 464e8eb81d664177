//! What mutation fuzzing of real models found (bench/results/fuzz.md), as
//! the user meets it: a model that is wrong is exit 3 naming the node, not
//! exit 7 carrying a runtime's text; a valid model whose activations cannot
//! fit is refused before a runtime grows until the kernel kills it.

mod common;

use std::path::{Path, PathBuf};
use std::process::Output;

use common::{ort_available, s, stderr};
use infopt_ir::builder::{GraphBuilder, dims};
use infopt_ir::{Attribute, DataType, Model};

fn save(m: &mut Model, dir: &Path, name: &str) -> PathBuf {
    let path = dir.join(name);
    m.save(&path, &infopt_ir::SaveOptions::default()).unwrap();
    path
}

/// `infopt optimize MODEL -o OUT [extra]` with at most 1 GiB to plan for.
fn optimize(model: &Path, out: &Path, extra: &[&str]) -> Output {
    common::infopt_command()
        .args(["optimize", s(model), "-o", s(out)])
        .args(extra)
        .env("INFOPT_MEMORY_AVAILABLE", "1G")
        .output()
        .expect("run infopt")
}

fn error_line(o: &Output) -> String {
    let err = stderr(o);
    let errors: Vec<&str> = err.lines().filter(|l| l.starts_with("error: ")).collect();
    assert_eq!(errors.len(), 1, "{err}");
    errors[0].to_string()
}

/// `optimize MODEL` run with each of `extras` exits 3 with the one error
/// line `error: MODEL: {message}`.
fn assert_model_error(model: &Path, extras: &[&[&str]], message: &str) {
    let out = model.with_extension("out.onnx");
    for extra in extras {
        let o = optimize(model, &out, extra);
        assert_eq!(o.status.code(), Some(3), "{extra:?}: {}", stderr(&o));
        assert_eq!(
            error_line(&o),
            format!("error: {}: {message}", model.display()),
            "{extra:?}"
        );
        assert!(!out.exists(), "no output is written");
    }
}

/// `x [1,3,4,4]` through `op` (reading `constants`), then an Identity for
/// the pipeline to remove, so the model needs verifying.
fn sized_model(
    dir: &Path,
    op: &str,
    x_dims: &[&str],
    build: &dyn Fn(&mut GraphBuilder, infopt_ir::ValueId) -> infopt_ir::ValueId,
) -> PathBuf {
    let mut b = GraphBuilder::new();
    let x = b.input("x", DataType::Float, dims(x_dims));
    let y = build(&mut b, x);
    let z = b.op("Identity", &[y], vec![]);
    b.output(z, "z", DataType::Float, None);
    save(&mut b.build(17), dir, &format!("{op}.onnx"))
}

/// Pads of 100000, an Expand and a ConstantOfShape to 3 x 10^12 elements,
/// a Resize scale of 10^6, a ConvTranspose `output_shape` of 100000^2:
/// exit 7 naming the node and the way out, in milliseconds; `--no-verify`
/// optimizes it without computing it.
#[test]
fn an_activation_larger_than_memory_is_refused_naming_the_node() {
    let dir = tempfile::tempdir().unwrap();
    let big = 1_000_000;
    type Build = Box<dyn Fn(&mut GraphBuilder, infopt_ir::ValueId) -> infopt_ir::ValueId>;
    let cases: Vec<(&str, &[&str], Build, &str)> = vec![
        (
            "Pad",
            &["1", "3", "4", "4"],
            Box::new(|b, x| {
                let p = b.i64("pads", &[8], &[0, 0, 0, 0, 0, 0, 100_000, 100_000]);
                b.op("Pad", &[x, p], vec![])
            }),
            "node 'pad_1' (Pad) would make 'pad_1_out' [1,3,100004,100004] float32 of 111.8 GiB at the verification sizes (x [1,3,4,4])",
        ),
        (
            "Expand",
            &["N", "3", "1", "1"],
            Box::new(move |b, x| {
                let shape = b.i64("shape", &[4], &[1, 3, big, big]);
                b.op("Expand", &[x, shape], vec![])
            }),
            // The batch nobody fixed takes verification's first choice, 2.
            "node 'expand_1' (Expand) would make 'expand_1_out' [2,3,1000000,1000000] float32 of 22351.7 GiB at the verification sizes (x [2,3,1,1])",
        ),
        (
            "ConstantOfShape",
            &["1", "3", "1", "1"],
            Box::new(move |b, x| {
                let shape = b.i64("shape", &[4], &[1, 3, big, big]);
                let c = b.op("ConstantOfShape", &[shape], vec![]);
                b.op("Add", &[x, c], vec![])
            }),
            "node 'constantofshape_1' (ConstantOfShape) would make 'constantofshape_1_out' [1,3,1000000,1000000] float32 of 11175.9 GiB at the verification sizes (x [1,3,1,1])",
        ),
        (
            "Resize",
            &["1", "3", "4", "4"],
            Box::new(|b, x| {
                let scales = b.f32("scales", &[4], &[1.0, 1.0, 1e6, 1e6]);
                let roi = b.f32("roi", &[0], &[]);
                b.op("Resize", &[x, roi, scales], vec![])
            }),
            "node 'resize_1' (Resize) would make 'resize_1_out' [1,3,4000000,4000000] float32 of 178813.9 GiB at the verification sizes (x [1,3,4,4])",
        ),
        (
            "ConvTranspose",
            &["1", "3", "4", "4"],
            Box::new(|b, x| {
                let w = b.f32("w", &[3, 3, 1, 1], &[1.0; 9]);
                b.op(
                    "ConvTranspose",
                    &[x, w],
                    vec![
                        Attribute::ints("output_shape", vec![100_000, 100_000]),
                        Attribute::ints("strides", vec![25_000, 25_000]),
                    ],
                )
            }),
            "node 'convtranspose_1' (ConvTranspose) would make 'convtranspose_1_out' [1,3,100000,100000] float32 of 111.8 GiB at the verification sizes (x [1,3,4,4])",
        ),
    ];
    for (op, x_dims, build, expected) in &cases {
        let model = sized_model(dir.path(), op, x_dims, build.as_ref());
        let out = dir.path().join(format!("{op}.opt.onnx"));
        let o = optimize(&model, &out, &[]);
        assert_eq!(o.status.code(), Some(7), "{op}: {}", stderr(&o));
        assert_eq!(
            error_line(&o),
            format!(
                "error: cannot verify: {expected}, more than half of the 1.0 GiB available; give smaller sizes with --input-shape, or skip verification with --no-verify"
            ),
            "{op}"
        );
        assert!(!out.exists(), "{op}");
        let o = optimize(&model, &out, &["--no-verify"]);
        assert_eq!(o.status.code(), Some(0), "{op}: {}", stderr(&o));
        assert!(out.is_file(), "{op}");
    }
}

/// A MatMul fed a scalar (a fuzzed Div turned MatMul): exit 3 at load,
/// with or without verification.
#[test]
fn a_matmul_of_a_scalar_is_a_model_error_naming_the_node() {
    let dir = tempfile::tempdir().unwrap();
    let model = sized_model(dir.path(), "MatMul", &["1", "3", "4", "4"], &|b, x| {
        let two = b.f32("two", &[], &[2.0]);
        b.op("MatMul", &[x, two], vec![])
    });
    assert_model_error(
        &model,
        &[&[], &["--no-verify"]],
        "invalid graph: node 'matmul_1' (MatMul): input 1 'two' has rank 0, and MatMul takes rank 1 or more there",
    );
}

/// A Conv whose `dilations` has one entry for two spatial axes: neither
/// tract nor ONNX Runtime runs it. That is the user's model being wrong
/// (exit 3, the node named first), not verification failing to run (exit
/// 7). ONNX Runtime's check used to be what said so; infopt's own load
/// check of the attribute lengths does now (fuzz seed 11235 case 1105).
#[test]
fn a_model_onnx_runtime_finds_invalid_is_a_model_error() {
    let dir = tempfile::tempdir().unwrap();
    let model = sized_model(dir.path(), "Conv", &["1", "3", "8", "8"], &|b, x| {
        let w = b.f32("w", &[2, 3, 3, 3], &[0.5; 54]);
        b.op("Conv", &[x, w], vec![Attribute::ints("dilations", vec![1])])
    });
    let out = dir.path().join("out.onnx");
    assert_model_error(
        &model,
        &[&[]],
        "node 'conv_1' (Conv): attribute 'dilations': [1] has 1 entries; the 2 spatial axes of weight 'w' [2,3,3,3] take 2",
    );
    assert!(!out.exists());
}

/// `Loop(2^62, true, x)` adding 1 each time (a fuzzed trip count): both
/// runtimes would run it until killed; verification refuses it naming the
/// node, and `--no-verify` optimizes it without running it.
#[test]
fn a_loop_of_a_huge_constant_count_is_refused_instead_of_hanging() {
    let dir = tempfile::tempdir().unwrap();
    let mut body = GraphBuilder::new();
    body.input("i", DataType::Int64, dims(&[]));
    let cond = body.input("cond", DataType::Bool, dims(&[]));
    let v = body.input("v", DataType::Float, dims(&["1"]));
    let one = body.f32("one", &[1], &[1.0]);
    let next = body.op("Add", &[v, one], vec![]);
    body.output(cond, "cond_out", DataType::Bool, Some(dims(&[])));
    body.output(next, "v_out", DataType::Float, Some(dims(&["1"])));
    let mut b = GraphBuilder::new();
    let x = b.input("x", DataType::Float, dims(&["1"]));
    let m = b.i64("M", &[], &[1 << 62]);
    let t = b.initializer(
        "c",
        infopt_ir::Tensor::from_raw(DataType::Bool, vec![], vec![1u8].into()),
    );
    let y = b.op(
        "Loop",
        &[m, t, x],
        vec![Attribute::graph("body", body.into_graph())],
    );
    let z = b.op("Identity", &[y], vec![]);
    b.output(z, "z", DataType::Float, None);
    let model = save(&mut b.build(17), dir.path(), "loop.onnx");
    let out = dir.path().join("out.onnx");
    let o = optimize(&model, &out, &[]);
    assert_eq!(o.status.code(), Some(7), "{}", stderr(&o));
    assert_eq!(
        error_line(&o),
        "error: cannot verify: node 'loop_1' (Loop) runs 4611686018427387904 iterations (a constant trip count, and a condition that stays true), more than the 1048576 verification waits for; skip verification with --no-verify"
    );
    let o = optimize(&model, &out, &["--no-verify"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
}

/// A Transpose `perm` entry of 2147483647 (tract panicked indexing its
/// axes, ONNX Runtime threw creating the kernel) and a Slice step of 0
/// (tract divided by it): exit 3 at load naming the node.
#[test]
fn a_perm_out_of_range_and_a_zero_slice_step_are_model_errors() {
    let dir = tempfile::tempdir().unwrap();
    let transpose = sized_model(dir.path(), "Transpose", &["1", "3", "4", "4"], &|b, x| {
        b.op(
            "Transpose",
            &[x],
            vec![Attribute::ints("perm", vec![0, 1, 2147483647, 3])],
        )
    });
    let slice = sized_model(dir.path(), "Slice", &["1", "3", "4", "4"], &|b, x| {
        let starts = b.i64("starts", &[1], &[0]);
        let ends = b.i64("ends", &[1], &[4]);
        let axes = b.i64("axes", &[1], &[3]);
        let steps = b.i64("steps", &[1], &[0]);
        b.op("Slice", &[x, starts, ends, axes, steps], vec![])
    });
    for (model, expected) in [
        (
            &transpose,
            "node 'transpose_1' (Transpose): attribute 'perm': [0, 1, 2147483647, 3] is not a permutation of the 4 axes of its input",
        ),
        (
            &slice,
            "node 'slice_1' (Slice): input 'steps' ('steps') is [0]; a slice step is never 0",
        ),
    ] {
        assert_model_error(model, &[&[]], &format!("invalid graph: {expected}"));
    }
}

/// `infopt optimize` as [`optimize`] does, planning for `memory` bytes.
fn optimize_with_memory(model: &Path, out: &Path, memory: &str) -> Output {
    common::infopt_command()
        .args(["optimize", s(model), "-o", s(out)])
        .env("INFOPT_MEMORY_AVAILABLE", memory)
        .output()
        .expect("run infopt")
}

/// Seed 60601 cases 410 and 1226 (ppocr_cls with an input height declared
/// 65536, and a Conv given `pads` of 100000): activations that fit in
/// memory, and arithmetic that ran for minutes. Here a Conv padded by
/// 100000 rows makes 1.6 GB (it fits in the 64 GiB planned for) and 2.5e11
/// multiply-adds, and an Einsum of three 10000-element vectors to a scalar
/// makes 4 bytes out of 10^12 products: exit 7 naming the node and its
/// work, before any runtime runs; `--no-verify` optimizes both. Their sizes
/// are fixed, where a model may cost up to 10^12 if no node costs more than
/// 10^11 (see `verify/src/work.rs`): each blow-up sits in one node.
#[test]
fn arithmetic_past_the_work_budget_is_refused_naming_the_heaviest_node() {
    let dir = tempfile::tempdir().unwrap();
    let padded = sized_model(dir.path(), "Conv", &["1", "64", "64", "64"], &|b, x| {
        let w = b.f32("w", &[64, 64, 3, 3], &vec![0.01; 64 * 64 * 9]);
        b.op(
            "Conv",
            &[x, w],
            vec![
                Attribute::ints("kernel_shape", vec![3, 3]),
                Attribute::ints("pads", vec![100_000, 1, 1, 1]),
            ],
        )
    });
    let einsum = sized_model(dir.path(), "Einsum", &["10000"], &|b, x| {
        let e = b.op(
            "Einsum",
            &[x, x, x],
            vec![Attribute::string("equation", "i,j,k->")],
        );
        b.op("Relu", &[e], vec![])
    });
    for (model, expected) in [
        (
            &padded,
            "node 'conv_1' (Conv) costs 2.7e11 at the verification sizes (x [1,64,64,64]), the whole model 2.9e11",
        ),
        (
            &einsum,
            "node 'einsum_1' (Einsum) costs 1.0e12 at the verification sizes (x [10000]), the whole model 1.0e12",
        ),
    ] {
        let out = model.with_extension("opt.onnx");
        let o = optimize_with_memory(model, &out, "64G");
        assert_eq!(o.status.code(), Some(7), "{}", stderr(&o));
        assert_eq!(
            error_line(&o),
            format!(
                "error: cannot verify: {expected}, more than the 1.0e11 verification runs one node for (multiply-adds, and 40 for each element a node writes); give smaller sizes with --input-shape, or skip verification with --no-verify"
            )
        );
        assert!(!out.exists());
        let o = optimize(model, &out, &["--no-verify"]);
        assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    }
}

/// A model whose work is spread over its layers may cost more at sizes it
/// fixes than at sizes verification chooses (imgly's ISNet at its fixed
/// 1x3x1024x1024: 2.0e11 over 119 Convs, exit 7 before). Here the budget is
/// scaled down (`INFOPT_TEST_WORK_BUDGET`, a debug build's) so four small
/// Convs reach it: fixed by the file or by `--input-shape`, they verify;
/// left open, verification's chosen sizes are refused naming the model's
/// budget (the batch is open: one sample costs the same); a Conv over a
/// node's budget is refused at any size.
#[test]
fn fixed_sizes_may_cost_more_when_no_node_does() {
    let dir = tempfile::tempdir().unwrap();
    let convs = |name: &str, x_dims: &[&str], channels: i64| {
        let mut b = GraphBuilder::new();
        let mut x = b.input("x", DataType::Float, dims(x_dims));
        for i in 0..4 {
            let w = b.f32(
                &format!("w{i}"),
                &[channels, channels, 3, 3],
                &vec![0.01; (channels * channels * 9) as usize],
            );
            x = b.op(
                "Conv",
                &[x, w],
                vec![Attribute::ints("pads", vec![1, 1, 1, 1])],
            );
        }
        b.output(x, "y", DataType::Float, None);
        save(&mut b.build(17), dir.path(), &format!("{name}.onnx"))
    };
    // Each Conv 8x8x9 products x 32x32 positions, plus 40 per element
    // written and per element of its padded input: 1.3e6, the model 5.1e6.
    let fixed = convs("fixed", &["1", "8", "32", "32"], 8);
    let open = convs("open", &["N", "8", "32", "32"], 8);
    let budget = |model: &Path, extra: &[&str]| {
        common::infopt_command()
            .args([
                "optimize",
                s(model),
                "-o",
                s(&model.with_extension("opt.onnx")),
            ])
            .args(extra)
            .env("INFOPT_TEST_WORK_BUDGET", "2000000")
            .output()
            .expect("run infopt")
    };
    let o = budget(&fixed, &[]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(stderr(&o).contains("verified in "), "{}", stderr(&o));
    let o = budget(&open, &["--input-shape", "x:1,8,32,32"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let o = budget(&open, &[]);
    assert_eq!(o.status.code(), Some(7), "{}", stderr(&o));
    assert!(
        error_line(&o).contains("more than the 2.0e6 verification runs a model for ("),
        "{}",
        error_line(&o)
    );
    // Convs of 32 channels: 1.2e7 each, over a node's 2e6 at any size.
    let heavy = convs("heavy", &["1", "32", "32", "32"], 32);
    let o = budget(&heavy, &[]);
    assert_eq!(o.status.code(), Some(7), "{}", stderr(&o));
    assert!(
        error_line(&o).contains("more than the 2.0e6 verification runs one node for"),
        "{}",
        error_line(&o)
    );
}

/// A Reshape of 48 elements to [2, 3, 100000, 100000] (taken literally, a
/// 2.2e11-byte activation): exit 3 at load naming the node, with or without
/// verification.
#[test]
fn a_reshape_to_another_element_count_is_a_model_error() {
    let dir = tempfile::tempdir().unwrap();
    let model = sized_model(dir.path(), "Reshape", &["1", "3", "4", "4"], &|b, x| {
        let shape = b.i64("shape", &[4], &[2, 3, 100_000, 100_000]);
        b.op("Reshape", &[x, shape], vec![])
    });
    assert_model_error(
        &model,
        &[&[], &["--no-verify"]],
        "invalid graph: node 'reshape_1' (Reshape): input 'shape' ('shape') is [2, 3, 100000, 100000], which cannot hold the 48 elements of its input [1,3,4,4]; a reshape keeps the number of elements",
    );
}

/// Seed 60601 case 228 (ddddocr with a `value_info` of rank 5 on a Mul's
/// rank-4 output): ONNX Runtime runs the original, taking the Mul's own
/// shape, but the saved model carried the declared rank on to the values
/// after it and ONNX Runtime refused the ConvInteger reading them (exit 4).
/// The rank the node makes wins: the saved model declares rank 4 and loads.
#[test]
fn a_value_info_of_the_wrong_rank_does_not_spread_into_the_saved_model() {
    let dir = tempfile::tempdir().unwrap();
    let mut b = GraphBuilder::new();
    let x = b.input("x", DataType::Float, dims(&["1", "3", "8", "8"]));
    let two = b.f32("two", &[], &[2.0]);
    let m = b.op("Mul", &[x, two], vec![]);
    let r = b.op("Relu", &[m], vec![]);
    let w = b.f32("w", &[2, 3, 3, 3], &[0.5; 54]);
    let c = b.op(
        "Conv",
        &[r, w],
        vec![Attribute::ints("dilations", vec![1, 1])],
    );
    let z = b.op("Identity", &[c], vec![]);
    b.output(z, "z", DataType::Float, None);
    let mut model = b.build(17);
    model.graph.set_value_type(
        m,
        &infopt_ir::shape::TensorType {
            dtype: DataType::Float,
            shape: Some(dims(&["1", "3", "8", "8", "6"])),
        },
    );
    let path = save(&mut model, dir.path(), "rank.onnx");
    let out = dir.path().join("out.onnx");
    let extra: &[&str] = if ort_available() {
        &["--backend", "ort"]
    } else {
        &["--no-verify"]
    };
    let o = optimize(&path, &out, extra);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let saved = Model::load(&out).unwrap();
    let g = &saved.graph;
    for (_, node) in g.nodes().filter(|(_, n)| n.op_type == "Relu") {
        let relu_in = node.inputs[0].unwrap();
        let relu_out = node.outputs[0].unwrap();
        for v in [relu_in, relu_out] {
            let rank = g.value_type(v).and_then(|t| t.shape).map(|s| s.len());
            assert_eq!(rank, Some(4), "'{}'", g.value(v).name);
        }
    }
}

/// Fuzz seed 90909 case 363 (an inserted Range with a delta of 0): tract
/// panicked dividing by it, and the message carried the panic text. Exit 3
/// at load naming the node.
#[test]
fn a_range_of_delta_zero_is_a_model_error() {
    let dir = tempfile::tempdir().unwrap();
    let model = sized_model(dir.path(), "Range", &["4"], &|b, x| {
        let start = b.f32("start", &[], &[0.0]);
        let limit = b.f32("limit", &[], &[4.0]);
        let delta = b.f32("delta", &[], &[0.0]);
        let r = b.op("Range", &[start, limit, delta], vec![]);
        b.op("Add", &[x, r], vec![])
    });
    assert_model_error(
        &model,
        &[&[]],
        "invalid graph: node 'range_1' (Range): input 'delta' ('delta') is 0; a range's delta is never 0",
    );
}

/// Fuzz seed 90909 case 1948 (a 1-D Range output wired into a
/// BatchNormalization): tract's shape rules read the channel axis of the
/// rank-1 input out of bounds, and the release binary died of SIGSEGV.
/// Exit 3 at load naming the node, with or without verification.
#[test]
fn a_batch_normalization_of_a_vector_is_a_model_error() {
    let dir = tempfile::tempdir().unwrap();
    let model = sized_model(dir.path(), "BatchNormalization", &["4"], &|b, x| {
        let scale = b.f32("scale", &[4], &[1.0; 4]);
        let bias = b.f32("bias", &[4], &[0.0; 4]);
        let mean = b.f32("mean", &[4], &[0.0; 4]);
        let var = b.f32("var", &[4], &[1.0; 4]);
        b.op("BatchNormalization", &[x, scale, bias, mean, var], vec![])
    });
    assert_model_error(
        &model,
        &[&[], &["--no-verify"]],
        "invalid graph: node 'batchnormalization_1' (BatchNormalization): input 0 'x' has rank 1, and BatchNormalization takes rank 2 or more there",
    );
}

/// Fuzz seed 4242 case 392 (an inserted Gather on a dynamic axis with an
/// index of 2^63-1): tract ran past the campaign's 120 s, ONNX Runtime
/// refuses it only when it runs. Exit 3 at load naming the node, also
/// where the axis has a fixed length and the index is past it.
#[test]
fn a_gather_index_past_its_axis_is_a_model_error() {
    let dir = tempfile::tempdir().unwrap();
    let cases: [(&[&str], i64, String); 2] = [
        (
            &["2", "n"],
            i64::MAX,
            format!(
                "input 'indices' ('indices') holds {}, farther than any axis of a tensor can reach (axis 1 of its data)",
                i64::MAX
            ),
        ),
        (
            &["2", "3"],
            3,
            "input 'indices' ('indices') holds 3, outside [-3, 2] of axis 1 (length 3) of its data"
                .to_string(),
        ),
    ];
    for (x_dims, index, why) in cases {
        let model = sized_model(dir.path(), "Gather", x_dims, &|b, x| {
            let indices = b.i64("indices", &[2], &[index, 1]);
            b.op("Gather", &[x, indices], vec![Attribute::int("axis", 1)])
        });
        assert_model_error(
            &model,
            &[&[], &["--no-verify"]],
            &format!("invalid graph: node 'gather_1' (Gather): {why}"),
        );
    }
}

/// Fuzz seed 4242 case 1486 (an inserted Expand to `[i64::MIN, 2, 2, 3,
/// i64::MAX, ...]`): an assertion inside tract, whose panic text reached
/// the exit-7 message, and ONNX Runtime refused it only when it ran. A
/// negative size in Expand's `shape` or Tile's `repeats` is exit 3 at load
/// naming the node.
#[test]
fn a_negative_size_is_a_model_error() {
    let dir = tempfile::tempdir().unwrap();
    let cases: [(&str, &str, &str); 2] = [
        ("Expand", "shape", "expand_1"),
        ("Tile", "repeats", "tile_1"),
    ];
    for (op, input, node) in cases {
        let model = sized_model(dir.path(), op, &["2", "3"], &|b, x| {
            let sizes = b.i64(input, &[2], &[i64::MIN, 3]);
            b.op(op, &[x, sizes], vec![])
        });
        assert_model_error(
            &model,
            &[&[], &["--no-verify"]],
            &format!(
                "invalid graph: node '{node}' ({op}): input '{input}' ('{input}') holds {}; a size is never negative",
                i64::MIN
            ),
        );
    }
    // Seed 2468 case 1554: an Expand to `[0, i64::MAX, 1]` overflowed in
    // tract into a negative dim.
    let model = sized_model(dir.path(), "Expand", &["2", "1"], &|b, x| {
        let sizes = b.i64("shape", &[2], &[0, i64::MAX]);
        b.op("Expand", &[x, sizes], vec![])
    });
    assert_model_error(
        &model,
        &[&["--no-verify"]],
        &format!(
            "invalid graph: node 'expand_1' (Expand): input 'shape' ('shape') holds {}, longer than any axis of a tensor",
            i64::MAX
        ),
    );
}

/// Fuzz seed 31337 case 1497 (an inserted Range from 0.5 to -inf by NaN):
/// tract panicked dividing by zero, and the message carried the panic text.
/// A bound or step that is not finite, or a count past what a tensor can
/// hold, is exit 3 at load naming the node.
#[test]
fn a_range_that_counts_no_finite_number_of_elements_is_a_model_error() {
    let dir = tempfile::tempdir().unwrap();
    let cases: [([f32; 3], &str); 3] = [
        (
            [0.5, f32::NEG_INFINITY, f32::NAN],
            "input 'limit' ('limit') is -inf; a range's bounds and step are finite",
        ),
        (
            [0.0, 4.0, f32::NAN],
            "input 'delta' ('delta') is NaN; a range's bounds and step are finite",
        ),
        (
            [0.0, 1e30, 1.0],
            "from 0.0 to 1.0000000150474662e30 by 1.0 is 1.0e30 elements, more than any tensor can hold",
        ),
    ];
    for ([start, limit, delta], why) in cases {
        let model = sized_model(dir.path(), "Range", &["4"], &|b, x| {
            let start = b.f32("start", &[], &[start]);
            let limit = b.f32("limit", &[], &[limit]);
            let delta = b.f32("delta", &[], &[delta]);
            let r = b.op("Range", &[start, limit, delta], vec![]);
            b.op("Add", &[x, r], vec![])
        });
        assert_model_error(
            &model,
            &[&[]],
            &format!("invalid graph: node 'range_1' (Range): {why}"),
        );
    }
}

/// Fuzz seed 31337 case 1098 (a Reshape target of `[i64::MIN]`): tract's
/// symbolic shape analysis grew an expression for minutes (killed at the
/// campaign's 120 s). A target entry below -1, or two -1s, is exit 3 at
/// load naming the node.
#[test]
fn a_reshape_target_entry_below_minus_one_is_a_model_error() {
    let dir = tempfile::tempdir().unwrap();
    let cases: [(&[i64], String); 2] = [
        (
            &[i64::MIN, 3],
            format!(
                "is [{}, 3], which holds {}; a target entry is a size, 0 or -1",
                i64::MIN,
                i64::MIN
            ),
        ),
        (
            &[-1, -1],
            "is [-1, -1], which holds -1 more than once; one entry at most can be inferred"
                .to_string(),
        ),
    ];
    for (target, why) in cases {
        let model = sized_model(dir.path(), "Reshape", &["2", "n"], &|b, x| {
            let shape = b.i64("shape", &[2], target);
            b.op("Reshape", &[x, shape], vec![])
        });
        assert_model_error(
            &model,
            &[&[], &["--no-verify"]],
            &format!("invalid graph: node 'reshape_1' (Reshape): input 'shape' ('shape') {why}"),
        );
    }
}

/// Fuzz seed 5151 case 646 (an inserted Einsum `a...b...->ab`): ONNX
/// Runtime spun creating the session past the campaign's 120 s. An equation
/// the spec does not allow is exit 3 at load naming the node.
#[test]
fn an_einsum_equation_the_spec_does_not_allow_is_a_model_error() {
    let dir = tempfile::tempdir().unwrap();
    let cases = [
        (
            "a...b...->ab",
            "has '.' in term 'a...b...'; a term is letters with at most one '...'",
        ),
        ("ab->aa", "names 'a' twice in its output"),
        ("ab->c", "names 'c' in its output and in no input"),
        ("ab,bc->ac", "has 2 input terms for 1 inputs"),
    ];
    for (equation, why) in cases {
        let model = sized_model(dir.path(), "Einsum", &["2", "3"], &|b, x| {
            b.op(
                "Einsum",
                &[x],
                vec![Attribute::string("equation", equation)],
            )
        });
        assert_model_error(
            &model,
            &[&["--no-verify"]],
            &format!("invalid graph: node 'einsum_1' (Einsum): equation '{equation}' {why}"),
        );
    }
}

/// Fuzz seed 5151 case 954 (silero's If with a third output added to one
/// branch): tract unwrapped its own error and panicked, and the message
/// carried the panic text. Branches that disagree on their output count
/// are exit 3 at load naming the node.
#[test]
fn if_branches_with_different_output_counts_are_a_model_error() {
    let dir = tempfile::tempdir().unwrap();
    let branch = |outputs: usize| {
        let mut g = GraphBuilder::new();
        let x = g.graph_mut().add_value(infopt_ir::Value {
            outer: true,
            ..infopt_ir::Value::named("x")
        });
        for k in 0..outputs {
            let y = g.op("Relu", &[x], vec![]);
            g.output(y, &format!("y{k}"), DataType::Float, None);
        }
        g.into_graph()
    };
    let model = sized_model(dir.path(), "If", &["2", "3"], &|b, x| {
        let cond = b.input("cond", DataType::Bool, vec![]);
        let _ = x;
        b.op(
            "If",
            &[cond],
            vec![
                Attribute::graph("then_branch", branch(2)),
                Attribute::graph("else_branch", branch(1)),
            ],
        )
    });
    assert_model_error(
        &model,
        &[&[], &["--no-verify"]],
        "invalid graph: node 'if_1' (If): then_branch makes 2 outputs, else_branch 1 and the node has 1; the three counts must agree",
    );
}

/// Fuzz seed 5151 case 980 (a Reshape turned Unsqueeze, its shape input
/// now the axes `[batch, 1, 256]`): tract indexed past its dims and
/// panicked. An axis outside the output's rank, even in axes inference
/// knows only in part, is exit 3 at load naming the node.
#[test]
fn an_unsqueeze_axis_past_the_output_rank_is_a_model_error() {
    let dir = tempfile::tempdir().unwrap();
    let model = sized_model(dir.path(), "Unsqueeze", &["n", "3"], &|b, x| {
        let shape = b.op("Shape", &[x], vec![]);
        let n = b.i64("first", &[1], &[0]);
        let batch = b.op("Gather", &[shape, n], vec![]);
        let rest = b.i64("rest", &[2], &[1, 256]);
        let axes = b.op("Concat", &[batch, rest], vec![Attribute::int("axis", 0)]);
        let y = b.op("Unsqueeze", &[x, axes], vec![]);
        b.op("Identity", &[y], vec![])
    });
    assert_model_error(
        &model,
        &[&["--no-verify"]],
        "invalid graph: node 'unsqueeze_4' (Unsqueeze): axis 256 is outside [-5, 4] for its rank-2 input and axes [?, 1, 256]",
    );
}

/// `optimize` on a small Relu model in tract with a panic injected at
/// `point` (`INFOPT_INJECT_PANIC`, a debug build's hook) and backtraces
/// asked for: the output, after asserting that no panic text (the hook's
/// `panicked at`, a backtrace) reached stderr.
fn with_injected_tract_panic(point: &str) -> std::process::Output {
    let dir = tempfile::tempdir().unwrap();
    let model = sized_model(dir.path(), "Relu", &["2", "3"], &|b, x| {
        b.op("Relu", &[x], vec![])
    });
    let o = common::infopt_command()
        .args(["optimize", s(&model), "-o", s(&dir.path().join("out.onnx"))])
        .args(["--backend", "tract"])
        .env("INFOPT_INJECT_PANIC", point)
        .env("RUST_BACKTRACE", "1")
        .output()
        .unwrap();
    let e = stderr(&o);
    assert!(!e.contains("panicked at"), "{e}");
    assert!(!e.contains("stack backtrace"), "{e}");
    o
}

/// Fuzz seed 8080 cases 224 and 384 (tract panicking on a Conv whose
/// weight slot was empty, and inside an If at an opset its ReduceMean did
/// not fit): tract's load runs on a thread of its own (it has a deadline),
/// and a panic there printed the hook's panic text. It is the load error,
/// and nothing of it reaches stderr as panic text. (Both models are model
/// errors at load by now; the panic is injected.)
#[test]
fn a_panic_inside_tracts_load_thread_prints_no_panic_text() {
    let o = with_injected_tract_panic("tract-load");
    assert_eq!(o.status.code(), Some(7), "{}", stderr(&o));
    assert_eq!(
        error_line(&o),
        "error: cannot verify: cannot run the original model in tract: tract cannot load the model: tract panicked: injected panic second line (or install onnxruntime, pass --backend, or --no-verify)"
    );
}

/// Fuzz seed 3031 case 571 (MediaPipe's palm detector with an Add turned
/// into a GatherElements): ONNX Runtime refused the model, verification
/// ran the original in tract, and tract panicked indexing past the end;
/// the panic was caught and the error was one line, but the process's
/// panic hook had printed the panic and its backtrace above it. A run's
/// panic is silent now as a load's is. (The panic is injected.)
#[test]
fn a_panic_inside_a_tract_run_prints_no_panic_text() {
    let o = with_injected_tract_panic("tract-run");
    assert_ne!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(
        error_line(&o).contains("tract panicked: injected panic in a run"),
        "{}",
        stderr(&o)
    );
}

/// Fuzz seed 5151 case 918 (a PP-OCR classifier with a Mul rewired to
/// broadcast a `[C]` constant along the width): tract's symbolic analysis
/// grew for minutes, past the campaign's 120 s. tract's load has a
/// deadline; past it verification moves on (here, with tract the only
/// backend, to exit 7 naming what happened), instead of hanging.
#[test]
fn a_tract_load_that_does_not_end_is_given_up_at_its_deadline() {
    let dir = tempfile::tempdir().unwrap();
    let model = sized_model(dir.path(), "Relu", &["2", "3"], &|b, x| {
        b.op("Relu", &[x], vec![])
    });
    let started = std::time::Instant::now();
    let o = common::infopt_command()
        .args(["optimize", s(&model), "-o", s(&dir.path().join("out.onnx"))])
        .args(["--backend", "tract"])
        .env("INFOPT_INJECT_PANIC", "tract-load-stuck")
        .env("INFOPT_TRACT_LOAD_DEADLINE_S", "1")
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(7), "{}", stderr(&o));
    assert_eq!(
        error_line(&o),
        "error: cannot verify: cannot run the original model in tract: tract cannot load the model: tract did not finish analysing the model in 1 s (its symbolic shape analysis can grow without bound on some graphs); gave up on it (or install onnxruntime, pass --backend, or --no-verify)"
    );
    // Not a timing assertion: the stuck thread sleeps for 600 s, and the
    // process ends without waiting for it.
    assert!(started.elapsed().as_secs() < 300);
}

/// Fuzz seed 60221 case 1161 (a PP-OCR classifier, dynamic dims): tract's
/// load hit its deadline at the first sizes, and verification started tract
/// again at each other size, each abandoned load left working: 151 s and
/// 6.4 GB before it verified. A load given up at its deadline sends
/// verification to the other runtime; and with ONNX Runtime to hand, it is
/// the reference from the start (issue 30), so tract is never loaded.
#[test]
fn with_onnx_runtime_to_hand_a_stuck_tract_load_is_never_started() {
    if !ort_available() {
        eprintln!("skipped: ONNX Runtime is not available");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let model = sized_model(dir.path(), "Relu", &["N", "3", "H", "W"], &|b, x| {
        b.op("Relu", &[x], vec![])
    });
    let o = common::infopt_command()
        .args(["optimize", s(&model), "-o", s(&dir.path().join("out.onnx"))])
        .args(["--json"])
        .env("INFOPT_INJECT_PANIC", "tract-load-stuck")
        .env("INFOPT_TRACT_LOAD_DEADLINE_S", "1")
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let report: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(report["verification"]["backend"]["name"], "ort");
    assert_eq!(
        report["verification"]["backend"]["reference_runtime"],
        "ort"
    );
    let out = String::from_utf8_lossy(&o.stdout).to_string();
    // ONNX Runtime ran the first sizes: no other sizes were needed.
    assert!(!out.contains("verification sizes:"), "{out}");
    assert_eq!(
        stderr(&o)
            .matches("injected: a tract load that does not end")
            .count(),
        0,
        "{}",
        stderr(&o)
    );
}

/// Fuzz seed 13579 case 1404 (PP-OCRv4 det with its input's width declared
/// 0): tract divided by zero in the first Conv, and the message carried the
/// panic text; ONNX Runtime refuses it when it runs. A convolution whose
/// padded input is shorter than its kernel's window is exit 3 at load.
#[test]
fn a_convolution_with_no_output_position_is_a_model_error() {
    let dir = tempfile::tempdir().unwrap();
    let model = sized_model(dir.path(), "Conv", &["1", "2", "8", "0"], &|b, x| {
        let w = b.f32("w", &[2, 2, 3, 3], &[0.5; 36]);
        b.op(
            "Conv",
            &[x, w],
            vec![Attribute::ints("pads", vec![1, 1, 1, 1])],
        )
    });
    assert_model_error(
        &model,
        &[&["--no-verify"]],
        "invalid graph: node 'conv_1' (Conv): input 'x' has 0 along axis 3, 2 with its pads, shorter than the kernel's window of 3: the convolution has no output there",
    );
}

/// A Conv whose input and weight differ in rank (what fuzz seed 24680
/// case 1555 led ONNX Runtime's embedded shape inference to, where it
/// computed a negative dim) is exit 3 at load naming the node.
#[test]
fn a_convolution_whose_input_and_weight_ranks_differ_is_a_model_error() {
    let dir = tempfile::tempdir().unwrap();
    let model = sized_model(dir.path(), "Conv", &["1", "2", "8"], &|b, x| {
        let w = b.f32("w", &[2, 2, 3, 3], &[0.5; 36]);
        b.op("Conv", &[x, w], vec![])
    });
    assert_model_error(
        &model,
        &[&["--no-verify"]],
        "invalid graph: node 'conv_1' (Conv): input 'x' has rank 3, weight 'w' [2,2,3,3]: a convolution's input and weight have the same rank",
    );
}

/// Fuzz seed 24680 case 1555 (magika, a Reshape target turned into
/// `[4,1,1,2,1,1,2^31]` and expanded to `[N,1,256]`): the ONNX shape
/// inference inside ONNX Runtime went on to a negative dim and aborted the
/// process creating the session. An Expand whose known dims do not
/// broadcast is exit 3 at load naming the node.
#[test]
fn an_expand_that_does_not_broadcast_is_a_model_error() {
    let dir = tempfile::tempdir().unwrap();
    let model = sized_model(dir.path(), "Expand", &["n", "3"], &|b, x| {
        let shape = b.i64("shape", &[2], &[1, 256]);
        b.op("Expand", &[x, shape], vec![])
    });
    assert_model_error(
        &model,
        &[&[], &["--no-verify"]],
        "invalid graph: node 'expand_1' (Expand): input 'x' [?,3] does not broadcast to shape [1,256] (3 against 256); dims broadcast when equal or one of them is 1",
    );
}

/// Fuzz seed 11235 case 1105 (a PP-OCRv4 rec Conv's `pads` cut to two
/// entries): tract indexed past them and panicked, and the message carried
/// the panic text; ONNX Runtime refuses it. Pads, strides, dilations and
/// kernel_shape of the wrong length for the weight's spatial axes are exit
/// 3 at load naming the node.
#[test]
fn convolution_attributes_of_the_wrong_length_are_model_errors() {
    let dir = tempfile::tempdir().unwrap();
    let model = sized_model(dir.path(), "Conv", &["1", "2", "8", "8"], &|b, x| {
        let w = b.f32("w", &[2, 2, 1, 1], &[0.5; 4]);
        b.op(
            "Conv",
            &[x, w],
            vec![Attribute::ints("pads", vec![100_000, 1])],
        )
    });
    assert_model_error(
        &model,
        &[&["--no-verify"]],
        "node 'conv_1' (Conv): attribute 'pads': [100000, 1] has 2 entries; the 2 spatial axes of weight 'w' [2,2,1,1] take 4",
    );
}

/// Seed 24680 case 1187: PP-OCR rec with its default-domain opset import
/// mutated to 1000. tract panicked loading it and ONNX Runtime refused it,
/// so the message was an exit 7 carrying tract's panic text; an opset no
/// ONNX release defines is a model error.
#[test]
fn an_opset_no_onnx_release_defines_is_a_model_error() {
    let dir = tempfile::tempdir().unwrap();
    for (domain, version, label, newest) in [
        ("", 1000, "the default domain (ai.onnx)", 28),
        ("", 0, "the default domain (ai.onnx)", 28),
        ("ai.onnx.ml", 6, "ai.onnx.ml", 5),
    ] {
        let mut b = GraphBuilder::new();
        let x = b.input("x", DataType::Float, dims(&["2", "3"]));
        let y = b.op("Relu", &[x], vec![]);
        b.output(y, "y", DataType::Float, None);
        let mut m = b.build(17);
        let import = infopt_ir::proto::OperatorSetIdProto {
            domain: Some(domain.to_string()),
            version: Some(version),
        };
        if domain.is_empty() {
            m.meta.opset_import = vec![import];
        } else {
            m.meta.opset_import.push(import);
        }
        let model = save(
            &mut m,
            dir.path(),
            &format!("opset_{domain}_{version}.onnx"),
        );
        assert_model_error(
            &model,
            &[&[], &["--no-verify"]],
            &format!(
                "the model imports opset {version} of {label}, which released ONNX does not define (opsets 1 to {newest}): set the opset import to the version the model was exported at, or export it again"
            ),
        );
    }
}

/// Fuzz seed 70707 case 1674 (ddddocr det, a Resize's inputs permuted so
/// that `scales` is the empty tensor and `sizes` is absent): tract panicked
/// at load, ONNX Runtime refused it only when it ran. A Resize with no size
/// to resize to is exit 3 naming the node; an empty `scales` next to real
/// `sizes` (opset 11 exports) stays valid.
#[test]
fn a_resize_with_neither_scales_nor_sizes_is_a_model_error() {
    let dir = tempfile::tempdir().unwrap();
    let resize = |b: &mut GraphBuilder, x: infopt_ir::ValueId, sizes: bool| {
        let roi = b.f32("roi", &[0], &[]);
        let scales = b.f32("scales", &[0], &[]);
        let mut inputs = vec![Some(x), Some(roi), Some(scales)];
        if sizes {
            inputs.push(Some(b.i64("sizes", &[4], &[1, 3, 8, 8])));
        }
        let node = infopt_ir::Node {
            name: Some("resize".into()),
            op_type: "Resize".into(),
            inputs,
            ..Default::default()
        };
        let id = b.graph_mut().add_node(node, &["resized"]);
        b.graph_mut().node(id).outputs[0].unwrap()
    };
    let mut b = GraphBuilder::new();
    let x = b.input("x", DataType::Float, dims(&["1", "3", "4", "4"]));
    let y = resize(&mut b, x, false);
    b.output(y, "y", DataType::Float, None);
    let model = save(&mut b.build(11), dir.path(), "no_size.onnx");
    assert_model_error(
        &model,
        &[&[], &["--no-verify"]],
        "invalid graph: node 'resize' (Resize): neither 'scales' (input 2) nor 'sizes' (input 3) is given (an empty tensor counts as none); Resize needs one of them for its output size",
    );
    let mut b = GraphBuilder::new();
    let x = b.input("x", DataType::Float, dims(&["1", "3", "4", "4"]));
    let y = resize(&mut b, x, true);
    b.output(y, "y", DataType::Float, None);
    let model = save(&mut b.build(11), dir.path(), "sizes.onnx");
    let o = optimize(&model, &dir.path().join("out.onnx"), &["--no-verify"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
}
