//! Fusion passes: exact op histograms after each pass, numerical equivalence
//! of original and result in tract on seeded inputs, and declined rewrites
//! that leave the model unchanged with a recorded reason.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use infopt_ir::builder::{GraphBuilder, dims};
use infopt_ir::stats::GraphStats;
use infopt_ir::{Attribute, DataType, Dim, Model, Tensor, TensorType, ValueId};
use infopt_passes::{DriverOptions, Flow, PipelineConfig, PipelineRun, Target, run_pipeline};
use infopt_runtime::compare::{Tolerance, compare_outputs};
use infopt_runtime::inputs::{InputGen, generate_for_model};
use infopt_runtime::{Backend, InputShapes, TractBackend};

// ----- helpers -----

fn fixture_path(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../fixtures/models")
        .join(rel)
}

fn load_fixture(rel: &str) -> Model {
    Model::load(&fixture_path(rel)).unwrap_or_else(|e| panic!("{rel}: {e}"))
}

fn run(model: &mut Model, names: &[&str], target: Target) -> PipelineRun {
    let names: Vec<String> = names.iter().map(|s| s.to_string()).collect();
    let config = PipelineConfig::from_pass_names(&names, target).expect("known pass names");
    let options = DriverOptions {
        validate: true,
        ..Default::default()
    };
    run_pipeline(model, &config, &options, &mut |_, _| Ok(Flow::Continue)).expect("pipeline runs")
}

fn ops(m: &Model) -> BTreeMap<String, usize> {
    GraphStats::of_model(m).ops
}

fn hist(pairs: &[(&str, usize)]) -> BTreeMap<String, usize> {
    pairs.iter().map(|(k, v)| (k.to_string(), *v)).collect()
}

fn reasons(run: &PipelineRun) -> Vec<(String, String)> {
    run.declined
        .iter()
        .map(|d| (d.at.clone(), d.reason.clone()))
        .collect()
}

/// Runs both models in tract on the same seeded inputs; asserts that every
/// output agrees within `1e-4 * max(1, |expected|)` and returns the largest
/// absolute difference.
fn assert_equivalent(before: &Model, after: &Model, shapes: &InputShapes) -> f64 {
    let b = TractBackend
        .load(&before.to_bytes().unwrap(), None, shapes)
        .expect("original loads in tract");
    let a = TractBackend
        .load(&after.to_bytes().unwrap(), None, shapes)
        .expect("result loads in tract");
    let mut worst: f64 = 0.0;
    for seed in [3u64, 11] {
        let inputs = generate_for_model(b.as_ref(), &InputGen::with_seed(seed)).unwrap();
        let expected = b.run(&inputs).unwrap();
        let actual = a.run(&inputs).unwrap();
        assert_eq!(expected.len(), actual.len());
        let agreement = compare_outputs(
            &actual,
            &expected,
            Tolerance {
                atol: 1e-4,
                rtol: 1e-4,
            },
        );
        for out in &agreement {
            assert!(out.issue.is_none(), "{}: {:?}", out.name, out.issue);
            assert!(out.elements > 0, "{}: nothing compared", out.name);
            assert!(
                out.within_tolerance,
                "output {} differs: {out:#?}",
                out.name
            );
            worst = worst.max(out.max_abs);
        }
    }
    worst
}

/// Deterministic values in [lo, hi).
fn values(seed: u64, n: usize, lo: f32, hi: f32) -> Vec<f32> {
    let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..n)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            lo + (hi - lo) * ((s >> 40) as f32 / (1u64 << 24) as f32)
        })
        .collect()
}

fn init(b: &mut GraphBuilder, name: &str, shape: &[i64], seed: u64, lo: f32, hi: f32) -> ValueId {
    let n = shape.iter().product::<i64>() as usize;
    b.f32(name, shape, &values(seed, n, lo, hi))
}

/// BatchNormalization with constant parameters of size `c` (seeded).
fn bn(b: &mut GraphBuilder, x: ValueId, c: i64, seed: u64, attrs: Vec<Attribute>) -> ValueId {
    let scale = init(b, &format!("bn{seed}.scale"), &[c], seed, 0.5, 1.5);
    let bias = init(b, &format!("bn{seed}.bias"), &[c], seed + 1, -0.5, 0.5);
    let mean = init(b, &format!("bn{seed}.mean"), &[c], seed + 2, -0.3, 0.3);
    let var = init(b, &format!("bn{seed}.var"), &[c], seed + 3, 0.2, 2.0);
    b.op("BatchNormalization", &[x, scale, bias, mean, var], attrs)
}

fn set_type(b: &mut GraphBuilder, v: ValueId, spec: &[&str]) {
    let ty = TensorType {
        dtype: DataType::Float,
        shape: Some(dims(spec)),
    };
    b.graph_mut().set_value_type(v, &ty);
}

fn assert_unchanged_with(mut m: Model, pass: &str, target: Target, at: &str, reason: &str) {
    let before = m.to_bytes().unwrap();
    let r = run(&mut m, &[pass], target);
    assert_eq!(m.to_bytes().unwrap(), before, "{pass} changed the model");
    assert_eq!(r.records[0].rewrites, 0);
    assert!(
        reasons(&r).contains(&(at.to_string(), reason.to_string())),
        "expected ({at}, {reason}) among {:?}",
        reasons(&r)
    );
}

fn assert_unchanged(m: Model, pass: &str, at: &str, reason: &str) {
    assert_unchanged_with(m, pass, Target::Portable, at, reason)
}

fn initializer<'a>(m: &'a Model, name: &str) -> &'a Tensor {
    let v = m
        .graph
        .find_value(name)
        .unwrap_or_else(|| panic!("no value '{name}'"));
    m.graph
        .value(v)
        .initializer
        .as_ref()
        .unwrap_or_else(|| panic!("'{name}' is not an initializer"))
}

fn batch2() -> InputShapes {
    InputShapes::new().with_symbol("batch", 2)
}

// ----- fuse-conv-bn -----

#[test]
fn conv_bn_folds_on_cnn_fixture_and_declines_the_shared_conv() {
    let original = load_fixture("cnn_bn_relu.onnx");
    let mut m = original.clone();
    let r = run(
        &mut m,
        &["fuse-conv-bn", "eliminate-dead"],
        Target::Portable,
    );
    assert_eq!(r.records[0].rewrites, 3);
    assert_eq!(
        ops(&m),
        hist(&[
            ("Add", 2),
            ("BatchNormalization", 1),
            ("Conv", 4),
            ("Flatten", 1),
            ("Gemm", 1),
            ("GlobalAveragePool", 1),
            ("MaxPool", 1),
            ("Relu", 2),
        ])
    );
    assert_eq!(
        reasons(&r),
        vec![(
            "bn4/BatchNormalization".to_string(),
            "conv output has 2 readers".to_string()
        )]
    );
    // The conv keeps its name and takes over the BN output's name.
    let conv1 = m
        .graph
        .find_node("conv1/Conv")
        .expect("conv1 keeps its name");
    let out = m.graph.node(conv1).outputs[0].unwrap();
    assert_eq!(m.graph.value(out).name, "bn1_out");
    let w = initializer(&m, "conv1/Conv.bn1/BatchNormalization.weight");
    assert_eq!(w.dims(), &[8, 3, 3, 3]);
    assert_eq!(w.dtype(), DataType::Float);
    assert_eq!(
        initializer(&m, "conv2/Conv.bn2/BatchNormalization.bias").dims(),
        &[8]
    );
    // The old weights are left to eliminate-dead (nothing else reads them).
    assert!(m.graph.find_value("conv1.weight").is_none());
    let diff = assert_equivalent(&original, &m, &batch2());
    assert!(
        diff > 0.0,
        "the outputs should differ by rounding only, not be identical by accident"
    );
}

#[test]
fn conv_bn_folds_every_bn_of_the_exported_resnet_block() {
    let original = load_fixture("exported/resnet_block.onnx");
    let before = ops(&original);
    assert_eq!(before["BatchNormalization"], 6);
    let mut m = original.clone();
    let r = run(
        &mut m,
        &["fuse-conv-bn", "eliminate-dead"],
        Target::Portable,
    );
    assert_eq!(r.records[0].rewrites, 6);
    assert!(r.declined.is_empty(), "{:?}", reasons(&r));
    assert_eq!(
        ops(&m),
        hist(&[
            ("Add", 2),
            ("Conv", 6),
            ("Flatten", 1),
            ("Gemm", 1),
            ("GlobalAveragePool", 1),
            ("MaxPool", 1),
            ("Relu", 5)
        ])
    );
    assert_equivalent(&original, &m, &batch2());
}

#[test]
fn conv_transpose_bn_with_groups_folds_along_axis_1() {
    // ConvTranspose weight [C=4, M/group=3, 3, 3], group 2: M = 6 outputs.
    let mut b = GraphBuilder::new();
    let x = b.input("x", DataType::Float, dims(&["1", "4", "5", "5"]));
    let w = init(&mut b, "w", &[4, 3, 3, 3], 7, -1.0, 1.0);
    let bias = init(&mut b, "b", &[6], 8, -0.5, 0.5);
    let c = b.op(
        "ConvTranspose",
        &[x, w, bias],
        vec![
            Attribute::int("group", 2),
            Attribute::ints("kernel_shape", vec![3, 3]),
            Attribute::ints("strides", vec![2, 2]),
        ],
    );
    let y = bn(&mut b, c, 6, 20, vec![Attribute::float("epsilon", 1e-3)]);
    b.output(y, "y", DataType::Float, None);
    let original = b.build(17);
    let mut m = original.clone();
    run(
        &mut m,
        &["fuse-conv-bn", "eliminate-dead"],
        Target::Portable,
    );
    assert_eq!(ops(&m), hist(&[("ConvTranspose", 1)]));
    assert_eq!(
        initializer(&m, "convtranspose_1.batchnormalization_2.weight").dims(),
        &[4, 3, 3, 3]
    );
    assert_equivalent(&original, &m, &InputShapes::new());
}

#[test]
fn conv_without_bias_and_per_channel_mul_add_fold() {
    // Conv (no bias) -> BN -> Mul [1,M,1,1] -> Add [M,1,1] -> Mul scalar -> Add [1].
    let mut b = GraphBuilder::new();
    let x = b.input("x", DataType::Float, dims(&["batch", "3", "6", "6"]));
    let w = init(&mut b, "w", &[5, 3, 3, 3], 1, -1.0, 1.0);
    let c = b.op(
        "Conv",
        &[x, w],
        vec![Attribute::ints("pads", vec![1, 1, 1, 1])],
    );
    let y = bn(&mut b, c, 5, 30, vec![]);
    let s = init(&mut b, "s", &[1, 5, 1, 1], 2, 0.5, 2.0);
    let y = b.op("Mul", &[s, y], vec![]);
    let t = init(&mut b, "t", &[5, 1, 1], 3, -1.0, 1.0);
    let y = b.op("Add", &[y, t], vec![]);
    let k = b.f32("k", &[], &[0.75]);
    let y = b.op("Mul", &[y, k], vec![]);
    let one = b.f32("one", &[1], &[0.25]);
    let y = b.op("Add", &[y, one], vec![]);
    b.output(y, "y", DataType::Float, None);
    let original = b.build(17);
    let mut m = original.clone();
    let r = run(
        &mut m,
        &["fuse-conv-bn", "eliminate-dead"],
        Target::Portable,
    );
    assert_eq!(r.records[0].rewrites, 5);
    assert_eq!(ops(&m), hist(&[("Conv", 1)]));
    // The graph output keeps its name.
    assert_eq!(m.graph.value(m.graph.outputs[0].value).name, "y");
    assert_equivalent(&original, &m, &batch2());
}

#[test]
fn gemm_and_matmul_fold_per_column_scale_and_shift() {
    // Gemm(transB=1, C[16]) -> Mul [16] -> Add [1,16] -> MatMul W[16,4] -> Mul scalar.
    let mut b = GraphBuilder::new();
    let x = b.input("x", DataType::Float, dims(&["3", "8"]));
    let w = init(&mut b, "w", &[16, 8], 1, -1.0, 1.0);
    let c = init(&mut b, "c", &[16], 2, -1.0, 1.0);
    let g = b.op(
        "Gemm",
        &[x, w, c],
        vec![Attribute::int("transB", 1), Attribute::float("beta", 0.5)],
    );
    let s = init(&mut b, "s", &[16], 3, 0.5, 2.0);
    let y = b.op("Mul", &[g, s], vec![]);
    let t = init(&mut b, "t", &[1, 16], 4, -1.0, 1.0);
    let y = b.op("Add", &[t, y], vec![]);
    let w2 = init(&mut b, "w2", &[16, 4], 5, -1.0, 1.0);
    let mm = b.op("MatMul", &[y, w2], vec![]);
    let k = b.f32("k", &[], &[-1.5]);
    let y = b.op("Mul", &[mm, k], vec![]);
    b.output(y, "y", DataType::Float, None);
    let original = b.build(17);
    let mut m = original.clone();
    let r = run(
        &mut m,
        &["fuse-conv-bn", "eliminate-dead"],
        Target::Portable,
    );
    assert_eq!(r.records[0].rewrites, 3);
    assert_eq!(ops(&m), hist(&[("Gemm", 1), ("MatMul", 1)]));
    assert_equivalent(&original, &m, &InputShapes::new());
}

#[test]
fn conv_bn_float16_weights_stay_float16() {
    let mut b = GraphBuilder::new();
    let x = b.input("x", DataType::Float16, dims(&["1", "2", "4", "4"]));
    let wv: Vec<u8> = values(9, 3 * 2 * 3 * 3, -1.0, 1.0)
        .iter()
        .flat_map(|&v| half::f16::from_f32(v).to_le_bytes())
        .collect();
    let w = b.initializer(
        "w",
        Tensor::from_raw(DataType::Float16, vec![3, 2, 3, 3], wv.into()),
    );
    let c = b.op("Conv", &[x, w], vec![]);
    let y = bn(&mut b, c, 3, 40, vec![]);
    b.output(y, "y", DataType::Float16, None);
    let mut m = b.build(17);
    run(
        &mut m,
        &["fuse-conv-bn", "eliminate-dead"],
        Target::Portable,
    );
    assert_eq!(ops(&m), hist(&[("Conv", 1)]));
    assert_eq!(
        initializer(&m, "conv_1.batchnormalization_2.weight").dtype(),
        DataType::Float16
    );
    assert_eq!(
        initializer(&m, "conv_1.batchnormalization_2.bias").dtype(),
        DataType::Float16
    );
}

#[test]
fn a_weight_shared_with_another_conv_is_not_mutated() {
    // conv_1 -> BN folds; conv_3 reads the same weight `w` and must keep it.
    let mut b = GraphBuilder::new();
    let x = b.input("x", DataType::Float, dims(&["1", "3", "5", "5"]));
    let w = init(&mut b, "w", &[4, 3, 3, 3], 1, -1.0, 1.0);
    let c1 = b.op("Conv", &[x, w], vec![]);
    let y = bn(&mut b, c1, 4, 100, vec![]);
    let z = b.op("Conv", &[x, w], vec![]);
    b.output(y, "y", DataType::Float, None);
    b.output(z, "z", DataType::Float, None);
    let original = b.build(17);
    let mut m = original.clone();
    run(
        &mut m,
        &["fuse-conv-bn", "eliminate-dead"],
        Target::Portable,
    );
    assert_eq!(ops(&m), hist(&[("Conv", 2)]));
    assert_eq!(initializer(&m, "w"), initializer(&original, "w"));
    let conv3 = m.graph.node(m.graph.find_node("conv_3").unwrap());
    assert_eq!(m.graph.value(conv3.inputs[1].unwrap()).name, "w");
    let conv1 = m.graph.node(m.graph.find_node("conv_1").unwrap());
    assert_eq!(
        m.graph.value(conv1.inputs[1].unwrap()).name,
        "conv_1.batchnormalization_2.weight"
    );
    assert_equivalent(&original, &m, &InputShapes::new());
}

/// Conv(x, ConstantOfShape([8, 3, 3, 3], 0.02)) -> BN with `scale`, as in
/// ONNX's `light` models, whose placeholder weights are too large to fold.
fn constant_of_shape_conv_bn(weight: &[i64], scale: &[f32]) -> Model {
    let mut b = GraphBuilder::new();
    let x = b.input("x", DataType::Float, dims(&["1", "3", "6", "6"]));
    let shape = b.i64("w_shape", &[4], weight);
    let fill = Tensor::from_f32(vec![1], &[0.02]);
    let w = b.op(
        "ConstantOfShape",
        &[shape],
        vec![Attribute::tensor("value", &fill)],
    );
    let c = b.op("Conv", &[x, w], vec![]);
    let s = b.f32("bn.scale", &[8], scale);
    let bias = init(&mut b, "bn.bias", &[8], 2, -0.5, 0.5);
    let mean = b.f32("bn.mean", &[8], &[0.02; 8]);
    let var = b.f32("bn.var", &[8], &[0.02; 8]);
    let y = b.op("BatchNormalization", &[c, s, bias, mean, var], vec![]);
    b.output(y, "y", DataType::Float, None);
    b.build(17)
}

#[test]
fn conv_bn_with_a_constant_of_shape_weight_keeps_it_a_constant_of_shape() {
    let original = constant_of_shape_conv_bn(&[8, 3, 3, 3], &[0.02; 8]);
    let mut m = original.clone();
    let r = run(
        &mut m,
        &["fuse-conv-bn", "eliminate-dead"],
        Target::Portable,
    );
    assert_eq!(r.records[0].rewrites, 1, "{:?}", reasons(&r));
    assert_eq!(ops(&m), hist(&[("Conv", 1), ("ConstantOfShape", 1)]));
    // The new fill value is 0.02 * 0.02 / sqrt(0.02 + 1e-5), rounded once.
    let (_, fill) = m
        .graph
        .nodes()
        .find(|(_, n)| n.op_type == "ConstantOfShape")
        .unwrap();
    let value = fill
        .attr_tensor("value")
        .unwrap()
        .unwrap()
        .to_f64_vec()
        .unwrap();
    let expected =
        (0.02f32 as f64 * 0.02f32 as f64 / (0.02f32 as f64 + 1e-5f32 as f64).sqrt()) as f32;
    assert_eq!(value, vec![expected as f64]);
    // Nothing was written out element by element.
    assert!(GraphStats::of_model(&m).parameter_bytes < 200);
    assert_equivalent(&original, &m, &InputShapes::new());
}

#[test]
fn conv_bn_with_a_constant_of_shape_weight_and_a_scale_that_varies_is_written_out() {
    let scale = [0.5, 0.6, 0.7, 0.8, 0.9, 1.0, 1.1, 1.2];
    let original = constant_of_shape_conv_bn(&[8, 3, 3, 3], &scale);
    let mut m = original.clone();
    let r = run(
        &mut m,
        &["fuse-conv-bn", "eliminate-dead"],
        Target::Portable,
    );
    assert_eq!(r.records[0].rewrites, 1, "{:?}", reasons(&r));
    assert_eq!(ops(&m), hist(&[("Conv", 1)]));
    assert_equivalent(&original, &m, &InputShapes::new());
}

#[test]
fn conv_bn_with_a_constant_of_shape_weight_over_the_budget_declines_a_scale_that_varies() {
    let scale = [0.5, 0.6, 0.7, 0.8, 0.9, 1.0, 1.1, 1.2];
    // 8 x 3 x 128 x 128 float32: 1.5 MiB.
    let m = constant_of_shape_conv_bn(&[8, 3, 128, 128], &scale);
    assert_unchanged(
        m,
        "fuse-conv-bn",
        "batchnormalization_3",
        "cannot scale the weight of conv_2: the weight is a ConstantOfShape of 393216 elements and the scale differs between channels: written out, the scaled weight would pass the folding budget of 1048576 bytes for one tensor",
    );
}

/// Inception's 1x1 convs, made one by `eliminate-duplicates` (their
/// placeholder weights are equal), each read by its own BatchNormalization:
/// each BN folds into a copy of the conv; the conv goes with the last.
#[test]
fn a_conv_read_by_three_bns_folds_into_three_convs() {
    let mut b = GraphBuilder::new();
    let x = b.input("x", DataType::Float, dims(&["1", "3", "5", "5"]));
    let w = init(&mut b, "w", &[4, 3, 1, 1], 1, -1.0, 1.0);
    let c = b.op("Conv", &[x, w], vec![]);
    let ys: Vec<ValueId> = (0..3)
        .map(|k| bn(&mut b, c, 4, 60 + 10 * k, vec![]))
        .collect();
    let y = b.op("Concat", &ys, vec![Attribute::int("axis", 1)]);
    b.output(y, "y", DataType::Float, None);
    let original = b.build(17);
    let mut m = original.clone();
    let r = run(
        &mut m,
        &["fuse-conv-bn", "eliminate-dead"],
        Target::Portable,
    );
    assert_eq!(
        ops(&m),
        hist(&[("Conv", 3), ("Concat", 1)]),
        "{:?}",
        reasons(&r)
    );
    assert_equivalent(&original, &m, &InputShapes::new());
}

/// The same with a weight too large to copy per reader: declined, said why.
#[test]
fn a_conv_read_by_bns_with_a_large_weight_is_declined() {
    let mut b = GraphBuilder::new();
    let x = b.input("x", DataType::Float, dims(&["1", "256", "2", "2"]));
    let w = init(&mut b, "w", &[512, 256, 1, 1], 1, -1.0, 1.0);
    let c = b.op("Conv", &[x, w], vec![]);
    let y1 = bn(&mut b, c, 512, 60, vec![]);
    let y2 = bn(&mut b, c, 512, 70, vec![]);
    let y = b.op("Add", &[y1, y2], vec![]);
    b.output(y, "y", DataType::Float, None);
    assert_unchanged(
        b.build(17),
        "fuse-conv-bn",
        "batchnormalization_2",
        "conv output has 2 readers, all BatchNormalization, but a copy of the conv per reader would repeat its 131072-element weight",
    );
}

/// Conv(x, w[8,3,3,3]) -> BN; the BN is built by `make_bn` from the conv output.
fn conv_then(make_bn: impl FnOnce(&mut GraphBuilder, ValueId) -> ValueId) -> Model {
    let mut b = GraphBuilder::new();
    let x = b.input("x", DataType::Float, dims(&["1", "3", "4", "4"]));
    let w = init(&mut b, "w", &[8, 3, 3, 3], 1, -1.0, 1.0);
    let c = b.op("Conv", &[x, w], vec![]);
    let y = make_bn(&mut b, c);
    b.output(y, "y", DataType::Float, None);
    b.build(17)
}

#[test]
fn conv_bn_declines_in_training_mode() {
    let m = conv_then(|b, c| bn(b, c, 8, 50, vec![Attribute::int("training_mode", 1)]));
    assert_unchanged(m, "fuse-conv-bn", "batchnormalization_2", "training_mode=1");
}

#[test]
fn conv_bn_declines_when_a_parameter_is_not_constant() {
    let m = conv_then(|b, c| {
        let scale = b.input("scale", DataType::Float, dims(&["8"]));
        let rest: Vec<ValueId> = (0..3)
            .map(|i| init(b, &format!("p{i}"), &[8], 60 + i, 0.5, 1.0))
            .collect();
        b.op(
            "BatchNormalization",
            &[c, scale, rest[0], rest[1], rest[2]],
            vec![],
        )
    });
    assert_unchanged(
        m,
        "fuse-conv-bn",
        "batchnormalization_2",
        "scale of batchnormalization_2 is not a constant",
    );
}

#[test]
fn conv_bn_declines_on_channel_mismatch() {
    let m = conv_then(|b, c| bn(b, c, 16, 70, vec![]));
    assert_unchanged(
        m,
        "fuse-conv-bn",
        "batchnormalization_2",
        "channel count 8 does not match BN size 16 (scale of batchnormalization_2)",
    );
}

#[test]
fn conv_bn_declines_on_int8_weights() {
    let mut b = GraphBuilder::new();
    let x = b.input("x", DataType::Float, dims(&["1", "3", "4", "4"]));
    let w = b.initializer(
        "w",
        Tensor::from_raw(DataType::Int8, vec![8, 3, 1, 1], vec![1u8; 24].into()),
    );
    let c = b.op("Conv", &[x, w], vec![]);
    let y = bn(&mut b, c, 8, 80, vec![]);
    b.output(y, "y", DataType::Float, None);
    assert_unchanged(
        b.build(17),
        "fuse-conv-bn",
        "batchnormalization_2",
        "weight dtype int8 not supported",
    );
}

#[test]
fn conv_bn_declines_when_the_conv_weight_is_an_input() {
    let mut b = GraphBuilder::new();
    let x = b.input("x", DataType::Float, dims(&["1", "3", "4", "4"]));
    let w = b.input("w", DataType::Float, dims(&["8", "3", "1", "1"]));
    let c = b.op("Conv", &[x, w], vec![]);
    let y = bn(&mut b, c, 8, 90, vec![]);
    b.output(y, "y", DataType::Float, None);
    assert_unchanged(
        b.build(17),
        "fuse-conv-bn",
        "batchnormalization_2",
        "weight 'w' of conv_1 is not a constant",
    );
}

#[test]
fn per_channel_mul_declines_when_the_constant_spans_another_axis() {
    // [8] lines up with the last (width) axis, not the channel axis.
    let m = conv_then(|b, c| {
        let s = init(b, "s", &[2], 5, 0.5, 1.0);
        b.op("Mul", &[c, s], vec![])
    });
    assert_unchanged(
        m,
        "fuse-conv-bn",
        "mul_2",
        "constant 's' of shape [2] broadcasts along axis 3 of the conv output, not only the channel axis 1 (size 8)",
    );
}

// ----- fuse-matmul-add -----

#[test]
fn matmul_add_chain_becomes_gemms() {
    let mut b = GraphBuilder::new();
    let x = b.input("x", DataType::Float, dims(&["4", "8"]));
    let w1 = init(&mut b, "w1", &[8, 16], 1, -1.0, 1.0);
    let b1 = init(&mut b, "b1", &[16], 2, -1.0, 1.0);
    let mm1 = b.op("MatMul", &[x, w1], vec![]);
    let h = b.op("Add", &[mm1, b1], vec![]);
    set_type(&mut b, h, &["4", "16"]);
    let w2 = init(&mut b, "w2", &[16, 5], 3, -1.0, 1.0);
    let b2 = init(&mut b, "b2", &[1, 5], 4, -1.0, 1.0);
    let mm2 = b.op("MatMul", &[h, w2], vec![]);
    let y = b.op("Add", &[b2, mm2], vec![]);
    b.output(y, "y", DataType::Float, None);
    let original = b.build(13);
    let mut m = original.clone();
    let r = run(&mut m, &["fuse-matmul-add"], Target::Portable);
    assert_eq!(r.records[0].rewrites, 2, "declined: {:?}", reasons(&r));
    assert_eq!(ops(&m), hist(&[("Gemm", 2)]));
    // The first Gemm's output keeps the Add output's name and type, which is
    // what let the second MatMul see a 2-D A.
    let h = m.graph.find_value("add_2_out").expect("name kept");
    assert_eq!(
        m.graph.value_type(h).unwrap().shape,
        Some(vec![Dim::Known(4), Dim::Known(16)])
    );
    assert!(
        m.graph
            .find_node("matmul_1")
            .is_some_and(|n| m.graph.node(n).is("Gemm"))
    );
    assert_equivalent(&original, &m, &InputShapes::new());
}

#[test]
fn matmul_add_declines_on_rank_3() {
    let mut b = GraphBuilder::new();
    let x = b.input("x", DataType::Float, dims(&["2", "4", "8"]));
    let w = init(&mut b, "w", &[8, 16], 1, -1.0, 1.0);
    let bias = init(&mut b, "b", &[16], 2, -1.0, 1.0);
    let mm = b.op("MatMul", &[x, w], vec![]);
    let y = b.op("Add", &[mm, bias], vec![]);
    b.output(y, "y", DataType::Float, None);
    assert_unchanged(
        b.build(17),
        "fuse-matmul-add",
        "add_2",
        "A has rank 3; Gemm needs 2-D",
    );
}

#[test]
fn matmul_add_declines_on_shared_output_and_non_constant_bias() {
    let mut b = GraphBuilder::new();
    let x = b.input("x", DataType::Float, dims(&["4", "8"]));
    let w = init(&mut b, "w", &[8, 16], 1, -1.0, 1.0);
    let mm = b.op("MatMul", &[x, w], vec![]);
    let bias = init(&mut b, "b", &[16], 2, -1.0, 1.0);
    let y = b.op("Add", &[mm, bias], vec![]);
    let z = b.op("Relu", &[mm], vec![]);
    b.output(y, "y", DataType::Float, None);
    b.output(z, "z", DataType::Float, None);
    assert_unchanged(
        b.build(17),
        "fuse-matmul-add",
        "add_2",
        "MatMul output has 2 readers",
    );

    let mut b = GraphBuilder::new();
    let x = b.input("x", DataType::Float, dims(&["4", "8"]));
    // A [4,16] bias is a Gemm C (corpus_rules.rs); one that broadcasts the
    // product to 3-D is not.
    let r = b.input("r", DataType::Float, dims(&["2", "4", "16"]));
    let w = init(&mut b, "w", &[8, 16], 1, -1.0, 1.0);
    let mm = b.op("MatMul", &[x, w], vec![]);
    let y = b.op("Add", &[mm, r], vec![]);
    b.output(y, "y", DataType::Float, None);
    assert_unchanged(
        b.build(17),
        "fuse-matmul-add",
        "add_2",
        "bias has shape [2,4,16]; Gemm C must broadcast to [M,16] without growing it",
    );
}

#[test]
fn matmul_add_takes_a_weight_fed_as_graph_input() {
    let mut b = GraphBuilder::new();
    let x = b.input("x", DataType::Float, dims(&["4", "8"]));
    let w = b.input("w", DataType::Float, dims(&["8", "16"]));
    let mm = b.op("MatMul", &[x, w], vec![]);
    let bias = init(&mut b, "b", &[16], 2, -1.0, 1.0);
    let y = b.op("Add", &[bias, mm], vec![]);
    b.output(y, "y", DataType::Float, None);
    let original = b.build(17);
    let mut m = original.clone();
    run(&mut m, &["fuse-matmul-add"], Target::Portable);
    assert_eq!(ops(&m), hist(&[("Gemm", 1)]));
    assert_equivalent(&original, &m, &InputShapes::new());

    // Without a known column count there is no way to check the bias.
    let mut b = GraphBuilder::new();
    let x = b.input("x", DataType::Float, dims(&["4", "8"]));
    let w = b.input("w", DataType::Float, dims(&["8", "n"]));
    let mm = b.op("MatMul", &[x, w], vec![]);
    let bias = init(&mut b, "b", &[16], 2, -1.0, 1.0);
    let y = b.op("Add", &[mm, bias], vec![]);
    b.output(y, "y", DataType::Float, None);
    assert_unchanged(
        b.build(17),
        "fuse-matmul-add",
        "add_2",
        "B 'w' has an unknown column count",
    );
}

#[test]
fn matmul_add_declines_on_the_transformer_fixture() {
    let mut m = load_fixture("transformer_block.onnx");
    let before = m.to_bytes().unwrap();
    let r = run(&mut m, &["fuse-matmul-add"], Target::Portable);
    assert_eq!(m.to_bytes().unwrap(), before);
    let got = reasons(&r);
    let rank3 = got
        .iter()
        .filter(|(_, why)| why == "A has rank 3; Gemm needs 2-D")
        .count();
    assert_eq!(rank3, 3, "{got:?}");
    assert!(
        got.contains(&(
            "/ffn.fc1/Add".into(),
            "rank of A 'ln1_out' is unknown; Gemm needs 2-D".into()
        )),
        "{got:?}"
    );
    assert_eq!(got.len(), 6, "{got:?}");
}

// ----- fuse-conv-activation -----

/// Conv chain with each supported activation after a conv (opset 17).
fn conv_activation_chain() -> Model {
    let mut b = GraphBuilder::new();
    let mut y = b.input("x", DataType::Float, dims(&["batch", "4", "6", "6"]));
    let lo = b.f32("lo", &[], &[-0.5]);
    let hi = b.f32("hi", &[], &[0.5]);
    let acts: Vec<(&str, Vec<ValueId>, Vec<Attribute>)> = vec![
        ("Relu", vec![], vec![]),
        ("Clip", vec![lo, hi], vec![]),
        ("LeakyRelu", vec![], vec![Attribute::float("alpha", 0.2)]),
        (
            "HardSigmoid",
            vec![],
            vec![
                Attribute::float("alpha", 0.3),
                Attribute::float("beta", 0.4),
            ],
        ),
        ("Sigmoid", vec![], vec![]),
        ("Tanh", vec![], vec![]),
    ];
    for (i, (op, extra, attrs)) in acts.into_iter().enumerate() {
        let w = init(
            &mut b,
            &format!("w{i}"),
            &[4, 4, 3, 3],
            i as u64 + 1,
            -0.5,
            0.5,
        );
        let bias = init(&mut b, &format!("b{i}"), &[4], i as u64 + 10, -0.1, 0.1);
        let c = b.op(
            "Conv",
            &[y, w, bias],
            vec![Attribute::ints("pads", vec![1, 1, 1, 1])],
        );
        let mut ins = vec![c];
        ins.extend(extra);
        y = b.op(op, &ins, attrs);
    }
    b.output(y, "y", DataType::Float, None);
    b.build(17)
}

#[test]
fn conv_activation_becomes_fused_conv_for_onnxruntime() {
    let mut m = conv_activation_chain();
    let r = run(&mut m, &["fuse-conv-activation"], Target::Onnxruntime);
    assert!(r.declined.is_empty(), "{:?}", reasons(&r));
    assert_eq!(ops(&m), hist(&[("com.microsoft::FusedConv", 6)]));
    assert_eq!(m.opset("com.microsoft"), Some(1));
    let expect: [(&str, &str, Option<Vec<f32>>); 6] = [
        ("conv_1", "Relu", None),
        ("conv_3", "Clip", Some(vec![-0.5, 0.5])),
        ("conv_5", "LeakyRelu", Some(vec![0.2])),
        ("conv_7", "HardSigmoid", Some(vec![0.3, 0.4])),
        ("conv_9", "Sigmoid", None),
        ("conv_11", "Tanh", None),
    ];
    for (name, act, params) in expect {
        let n = m.graph.node(
            m.graph
                .find_node(name)
                .unwrap_or_else(|| panic!("{name} kept")),
        );
        assert_eq!(n.domain(), "com.microsoft");
        assert_eq!(n.attr_string("activation").unwrap().as_deref(), Some(act));
        assert_eq!(
            n.attr_floats("activation_params")
                .unwrap()
                .map(|p| p.to_vec()),
            params,
            "{name}"
        );
        assert_eq!(n.attr_ints("pads").unwrap(), Some(&[1i64, 1, 1, 1][..]));
        assert_eq!(n.inputs.len(), 3);
    }
    assert_eq!(m.graph.value(m.graph.outputs[0].value).name, "y");
}

#[test]
fn conv_activation_does_nothing_for_other_targets() {
    for target in [Target::Portable, Target::Tensorrt] {
        let mut m = conv_activation_chain();
        let before = m.to_bytes().unwrap();
        let r = run(&mut m, &["fuse-conv-activation"], target);
        assert_eq!(m.to_bytes().unwrap(), before);
        assert!(r.declined.is_empty());
        assert_eq!(r.notes.len(), 1, "{:?}", r.notes);
        assert!(r.notes[0].contains("ONNX Runtime"));
    }
}

#[test]
fn conv_bn_then_activation_on_cnn_fixture() {
    let mut m = load_fixture("cnn_bn_relu.onnx");
    let r = run(
        &mut m,
        &["fuse-conv-bn", "fuse-conv-activation", "eliminate-dead"],
        Target::Onnxruntime,
    );
    assert_eq!(
        ops(&m),
        hist(&[
            ("Add", 2),
            ("BatchNormalization", 1),
            ("Conv", 2),
            ("Flatten", 1),
            ("Gemm", 1),
            ("GlobalAveragePool", 1),
            ("MaxPool", 1),
            ("com.microsoft::FusedConv", 2),
        ])
    );
    assert_eq!(m.opset("com.microsoft"), Some(1));
    assert_eq!(r.declined.len(), 1, "{:?}", reasons(&r));
}

#[test]
fn conv_activation_declines() {
    // Conv output read twice.
    let mut b = GraphBuilder::new();
    let x = b.input("x", DataType::Float, dims(&["1", "3", "4", "4"]));
    let w = init(&mut b, "w", &[2, 3, 1, 1], 1, -1.0, 1.0);
    let c = b.op("Conv", &[x, w], vec![]);
    let y = b.op("Relu", &[c], vec![]);
    b.output(y, "y", DataType::Float, None);
    b.output(c, "c", DataType::Float, None);
    assert_unchanged_with(
        b.build(17),
        "fuse-conv-activation",
        Target::Onnxruntime,
        "relu_2",
        "conv output 'c' is a graph output",
    );

    // 3-D conv.
    let mut b = GraphBuilder::new();
    let x = b.input("x", DataType::Float, dims(&["1", "3", "4", "4", "4"]));
    let w = init(&mut b, "w", &[2, 3, 1, 1, 1], 1, -1.0, 1.0);
    let c = b.op("Conv", &[x, w], vec![]);
    let y = b.op("Relu", &[c], vec![]);
    b.output(y, "y", DataType::Float, None);
    assert_unchanged_with(
        b.build(17),
        "fuse-conv-activation",
        Target::Onnxruntime,
        "relu_2",
        "conv is 3-D; FusedConv is fused for 1-D and 2-D convs only",
    );

    // float16.
    let mut b = GraphBuilder::new();
    let x = b.input("x", DataType::Float16, dims(&["1", "3", "4", "4"]));
    let w = b.initializer(
        "w",
        Tensor::from_raw(DataType::Float16, vec![2, 3, 1, 1], vec![0u8; 12].into()),
    );
    let c = b.op("Conv", &[x, w], vec![]);
    let y = b.op("Sigmoid", &[c], vec![]);
    b.output(y, "y", DataType::Float16, None);
    assert_unchanged_with(
        b.build(17),
        "fuse-conv-activation",
        Target::Onnxruntime,
        "sigmoid_2",
        "dtype float16 not supported: ONNX Runtime's FusedConv CPU kernel is float32 only",
    );

    // Clip with a bound computed at run time.
    let mut b = GraphBuilder::new();
    let x = b.input("x", DataType::Float, dims(&["1", "3", "4", "4"]));
    let hi = b.input("hi", DataType::Float, dims(&[]));
    let w = init(&mut b, "w", &[2, 3, 1, 1], 1, -1.0, 1.0);
    let c = b.op("Conv", &[x, w], vec![]);
    let lo = b.f32("lo", &[], &[0.0]);
    let y = b.op("Clip", &[c, lo, hi], vec![]);
    b.output(y, "y", DataType::Float, None);
    assert_unchanged_with(
        b.build(17),
        "fuse-conv-activation",
        Target::Onnxruntime,
        "clip_2",
        "Clip max 'hi' is not a constant",
    );
}

// ----- fuse-pad-conv -----

/// x -> Pad (made by `pad`) -> Conv(w[4,3,3,3], pads=[1,1,1,1]) -> y.
fn pad_conv(
    opset: i64,
    conv_attrs: Vec<Attribute>,
    pad: impl FnOnce(&mut GraphBuilder, ValueId) -> ValueId,
) -> Model {
    let mut b = GraphBuilder::new();
    let x = b.input("x", DataType::Float, dims(&["batch", "3", "6", "7"]));
    let p = pad(&mut b, x);
    let w = init(&mut b, "w", &[4, 3, 3, 3], 1, -1.0, 1.0);
    let bias = init(&mut b, "b", &[4], 2, -1.0, 1.0);
    let y = b.op("Conv", &[p, w, bias], conv_attrs);
    b.output(y, "y", DataType::Float, None);
    b.build(opset)
}

fn conv_pads(m: &Model) -> Vec<i64> {
    let (_, conv) = m.graph.nodes().find(|(_, n)| n.is("Conv")).expect("a conv");
    conv.attr_ints("pads").unwrap().expect("pads").to_vec()
}

#[test]
fn pad_folds_into_conv_pads_opset_17() {
    let original = pad_conv(
        17,
        vec![Attribute::ints("pads", vec![1, 1, 1, 1])],
        |b, x| {
            let pads = b.i64("pads", &[8], &[0, 0, 1, 2, 0, 0, 1, 0]);
            let zero = b.f32("zero", &[], &[0.0]);
            b.op(
                "Pad",
                &[x, pads, zero],
                vec![Attribute::string("mode", "constant")],
            )
        },
    );
    let mut m = original.clone();
    let r = run(
        &mut m,
        &["fuse-pad-conv", "eliminate-dead"],
        Target::Portable,
    );
    assert_eq!(r.records[0].rewrites, 1);
    assert_eq!(ops(&m), hist(&[("Conv", 1)]));
    assert_eq!(conv_pads(&m), vec![2, 3, 2, 1]);
    assert_eq!(
        m.graph.nodes().next().unwrap().1.name.as_deref(),
        Some("conv_2")
    );
    assert_equivalent(&original, &m, &batch2());
}

#[test]
fn pad_folds_into_conv_opset_10_attributes_and_opset_18_axes() {
    let original = pad_conv(10, vec![], |b, x| {
        b.op(
            "Pad",
            &[x],
            vec![
                Attribute::ints("pads", vec![0, 0, 2, 1, 0, 0, 0, 1]),
                Attribute::float("value", 0.0),
            ],
        )
    });
    let mut m = original.clone();
    run(&mut m, &["fuse-pad-conv"], Target::Portable);
    assert_eq!(ops(&m), hist(&[("Conv", 1)]));
    assert_eq!(conv_pads(&m), vec![2, 1, 0, 1]);
    assert_equivalent(&original, &m, &batch2());

    // Pad-18 with axes [-1, 2] and the constant value omitted.
    let original = pad_conv(
        18,
        vec![Attribute::ints("pads", vec![1, 0, 0, 1])],
        |b, x| {
            let pads = b.i64("pads", &[4], &[1, 2, 3, 0]);
            let zero = b.f32("zero", &[], &[0.0]);
            let axes = b.i64("axes", &[2], &[-1, 2]);
            let p = b.op("Pad", &[x, pads, zero, axes], vec![]);
            let (node, _) = b.graph_mut().value(p).producer.unwrap();
            b.graph_mut().set_input(node, 2, None);
            p
        },
    );
    let mut m = original.clone();
    run(&mut m, &["fuse-pad-conv"], Target::Portable);
    assert_eq!(ops(&m), hist(&[("Conv", 1)]));
    // axis 3 (-1): begin 1, end 3; axis 2: begin 2, end 0.
    assert_eq!(conv_pads(&m), vec![3, 1, 0, 4]);
    assert_equivalent(&original, &m, &batch2());
}

#[test]
fn pad_declines() {
    let reflect = pad_conv(17, vec![], |b, x| {
        let pads = b.i64("pads", &[8], &[0, 0, 1, 1, 0, 0, 1, 1]);
        b.op(
            "Pad",
            &[x, pads],
            vec![Attribute::string("mode", "reflect")],
        )
    });
    assert_unchanged(
        reflect,
        "fuse-pad-conv",
        "conv_2",
        "Pad mode is 'reflect'; only constant zero padding folds into a conv",
    );

    let nonzero = pad_conv(17, vec![], |b, x| {
        let pads = b.i64("pads", &[8], &[0, 0, 1, 1, 0, 0, 1, 1]);
        let v = b.f32("v", &[], &[1.5]);
        b.op("Pad", &[x, pads, v], vec![])
    });
    assert_unchanged(
        nonzero,
        "fuse-pad-conv",
        "conv_2",
        "pad value 1.5 is not zero",
    );

    let channel = pad_conv(17, vec![], |b, x| {
        let pads = b.i64("pads", &[8], &[0, 1, 1, 1, 0, 0, 1, 1]);
        b.op("Pad", &[x, pads], vec![])
    });
    assert_unchanged(
        channel,
        "fuse-pad-conv",
        "conv_2",
        "pads [0, 1, 1, 1, 0, 0, 1, 1] touch the channel axis",
    );

    let crop = pad_conv(17, vec![], |b, x| {
        let pads = b.i64("pads", &[8], &[0, 0, -1, 1, 0, 0, 1, 1]);
        b.op("Pad", &[x, pads], vec![])
    });
    assert_unchanged(
        crop,
        "fuse-pad-conv",
        "conv_2",
        "negative pads [0, 0, -1, 1, 0, 0, 1, 1] crop the input",
    );

    let auto = pad_conv(
        17,
        vec![Attribute::string("auto_pad", "SAME_UPPER")],
        |b, x| {
            let pads = b.i64("pads", &[8], &[0, 0, 1, 1, 0, 0, 1, 1]);
            b.op("Pad", &[x, pads], vec![])
        },
    );
    assert_unchanged(
        auto,
        "fuse-pad-conv",
        "conv_2",
        "conv has auto_pad=SAME_UPPER",
    );

    let mut b = GraphBuilder::new();
    let x = b.input("x", DataType::Float, dims(&["1", "3", "6", "6"]));
    let pads = b.i64("pads", &[8], &[0, 0, 1, 1, 0, 0, 1, 1]);
    let p = b.op("Pad", &[x, pads], vec![]);
    let w = init(&mut b, "w", &[4, 3, 3, 3], 1, -1.0, 1.0);
    let y = b.op("Conv", &[p, w], vec![]);
    let z = b.op("Relu", &[p], vec![]);
    b.output(y, "y", DataType::Float, None);
    b.output(z, "z", DataType::Float, None);
    assert_unchanged(
        b.build(17),
        "fuse-pad-conv",
        "conv_2",
        "Pad output has 2 readers",
    );
}

// ----- registry -----

#[test]
fn fusion_passes_are_registered_with_documented_sections() {
    for name in [
        "fuse-conv-bn",
        "fuse-matmul-add",
        "fuse-conv-activation",
        "fuse-pad-conv",
    ] {
        let info =
            infopt_passes::registry::find(name).unwrap_or_else(|| panic!("{name} registered"));
        assert_eq!(info.kind, infopt_passes::registry::PassKind::Fuse);
        assert_eq!(info.default_config().name(), name);
        let doc = info.doc();
        for section in [
            "## What it does",
            "## When it declines",
            "## Numerics",
            "## Example",
        ] {
            assert!(doc.contains(section), "{name} doc lacks {section}");
        }
        assert!(
            info.summary().ends_with('.') || info.summary().ends_with(')'),
            "{name}: {}",
            info.summary()
        );
        let yaml = format!("version: 1\npasses:\n  - {name}\n  - {name}: {{}}\n");
        let config = PipelineConfig::from_yaml(&yaml, "test").expect("parses");
        assert_eq!(config.pass_names(), vec![name, name]);
        let bad = format!("version: 1\npasses:\n  - {name}: {{ nope: 1 }}\n");
        assert!(PipelineConfig::from_yaml(&bad, "test").is_err());
    }
}

// ----- fuse-pad-conv: pooling -----

/// x [-> Relu] -> Pad(pads, value) -> `pool`(kernel 3x3, `attrs`) -> y.
fn pad_pool(pool: &str, relu: bool, pads: &[i64], value: f32, attrs: Vec<Attribute>) -> Model {
    let mut b = GraphBuilder::new();
    let x = b.input("x", DataType::Float, dims(&["batch", "3", "6", "7"]));
    let src = if relu { b.op("Relu", &[x], vec![]) } else { x };
    let p = b.i64("pads", &[8], pads);
    let v = b.f32("value", &[], &[value]);
    let padded = b.op("Pad", &[src, p, v], vec![]);
    let mut attrs = attrs;
    attrs.push(Attribute::ints("kernel_shape", vec![3, 3]));
    let y = b.op(pool, &[padded], attrs);
    b.output(y, "y", DataType::Float, None);
    b.build(17)
}

fn pool_node(m: &Model, op: &str) -> infopt_ir::Node {
    let (_, n) = m.graph.nodes().find(|(_, n)| n.is(op)).expect("the pool");
    n.clone()
}

#[test]
fn zero_pad_folds_into_average_pool_counting_the_padding() {
    let original = pad_pool("AveragePool", false, &[0, 0, 1, 2, 0, 0, 1, 0], 0.0, vec![]);
    let mut m = original.clone();
    run(
        &mut m,
        &["fuse-pad-conv", "eliminate-dead"],
        Target::Portable,
    );
    assert_eq!(ops(&m), hist(&[("AveragePool", 1)]));
    let pool = pool_node(&m, "AveragePool");
    assert_eq!(pool.attr_ints("pads").unwrap(), Some(&[1i64, 2, 1, 0][..]));
    assert_eq!(pool.attr_int("count_include_pad").unwrap(), Some(1));
    assert_equivalent(&original, &m, &batch2());
}

#[test]
fn pad_folds_into_max_pool_when_it_cannot_win() {
    // Zero padding of a Relu output, and -inf padding of anything.
    for (relu, value) in [(true, 0.0), (false, f32::NEG_INFINITY)] {
        let original = pad_pool(
            "MaxPool",
            relu,
            &[0, 0, 1, 1, 0, 0, 2, 1],
            value,
            vec![Attribute::ints("strides", vec![2, 2])],
        );
        let mut m = original.clone();
        run(
            &mut m,
            &["fuse-pad-conv", "eliminate-dead"],
            Target::Portable,
        );
        let expected = if relu {
            hist(&[("MaxPool", 1), ("Relu", 1)])
        } else {
            hist(&[("MaxPool", 1)])
        };
        assert_eq!(ops(&m), expected, "relu {relu}");
        let pool = pool_node(&m, "MaxPool");
        assert_eq!(pool.attr_ints("pads").unwrap(), Some(&[1i64, 1, 2, 1][..]));
        assert_equivalent(&original, &m, &batch2());
    }
}

#[test]
fn pad_into_pool_declines() {
    // A zero could beat the negative elements of a window.
    assert_unchanged(
        pad_pool("MaxPool", false, &[0, 0, 1, 1, 0, 0, 1, 1], 0.0, vec![]),
        "fuse-pad-conv",
        "maxpool_2",
        "pad value 0 is neither -inf nor at most zero over a non-negative input",
    );
    // A window of padding only: MaxPool would give -inf, the Pad gave 0.
    assert_unchanged(
        pad_pool("MaxPool", true, &[0, 0, 3, 0, 0, 0, 0, 0], 0.0, vec![]),
        "fuse-pad-conv",
        "maxpool_3",
        "pads [3, 0, 0, 0] reach the kernel extent 3 on axis 0",
    );
    // The pool's own padding is left out of the average, the Pad's is not.
    assert_unchanged(
        pad_pool(
            "AveragePool",
            false,
            &[0, 0, 1, 1, 0, 0, 1, 1],
            0.0,
            vec![Attribute::ints("pads", vec![1, 0, 0, 0])],
        ),
        "fuse-pad-conv",
        "averagepool_2",
        "AveragePool pads with count_include_pad=0",
    );
    assert_unchanged(
        pad_pool(
            "AveragePool",
            false,
            &[0, 0, 1, 1, 0, 0, 1, 1],
            0.0,
            vec![Attribute::int("ceil_mode", 1)],
        ),
        "fuse-pad-conv",
        "averagepool_2",
        "AveragePool uses ceil_mode=1",
    );
}

// ----- fuse-conv-bn: a scale before the layer -----

/// x[batch,3,6,7] -> Mul/Div(x, c) -> `layer` -> y, run through fuse-conv-bn
/// and eliminate-dead; the histogram must be the layer alone.
fn check_scale_before(
    op: &str,
    scale_op: &str,
    c_shape: &[i64],
    layer: impl FnOnce(&mut GraphBuilder, ValueId) -> ValueId,
) {
    let mut b = GraphBuilder::new();
    let x = b.input("x", DataType::Float, dims(&["batch", "3", "6", "7"]));
    let c = init(&mut b, "c", c_shape, 9, 0.5, 2.0);
    let s = b.op(scale_op, &[x, c], vec![]);
    let y = layer(&mut b, s);
    b.output(y, "y", DataType::Float, None);
    let original = b.build(17);
    let mut m = original.clone();
    let r = run(
        &mut m,
        &["fuse-conv-bn", "eliminate-dead"],
        Target::Portable,
    );
    assert!(
        r.records[0].rewrites >= 1,
        "{op} {scale_op} {c_shape:?}: {:?}",
        reasons(&r)
    );
    assert_eq!(ops(&m), hist(&[(op, 1)]), "{op} {scale_op} {c_shape:?}");
    assert_equivalent(&original, &m, &batch2());
}

#[test]
fn scale_before_conv_folds_into_weights_per_input_channel() {
    // Per-channel Mul before a padded conv.
    check_scale_before("Conv", "Mul", &[1, 3, 1, 1], |b, s| {
        let w = init(b, "w", &[4, 3, 3, 3], 1, -1.0, 1.0);
        let bias = init(b, "b", &[4], 2, -1.0, 1.0);
        b.op(
            "Conv",
            &[s, w, bias],
            vec![Attribute::ints("pads", vec![1, 1, 1, 1])],
        )
    });
    // Div by per-channel [3,1,1] before a depthwise-style grouped conv.
    check_scale_before("Conv", "Div", &[3, 1, 1], |b, s| {
        let w = init(b, "w", &[6, 1, 3, 3], 1, -1.0, 1.0);
        b.op("Conv", &[s, w], vec![Attribute::int("group", 3)])
    });
    // Scalar, then per-channel, before a ConvTranspose.
    check_scale_before("ConvTranspose", "Mul", &[1], |b, s| {
        let w = init(b, "w", &[3, 2, 2, 2], 1, -1.0, 1.0);
        b.op(
            "ConvTranspose",
            &[s, w],
            vec![Attribute::ints("strides", vec![2, 2])],
        )
    });
    check_scale_before("ConvTranspose", "Mul", &[3, 1, 1], |b, s| {
        let w = init(b, "w", &[3, 2, 2, 2], 1, -1.0, 1.0);
        b.op("ConvTranspose", &[s, w], vec![])
    });
}

#[test]
fn scale_before_gemm_and_matmul_folds_into_weight_rows() {
    for trans_b in [0, 1] {
        let mut b = GraphBuilder::new();
        let a = b.input("a", DataType::Float, dims(&["batch", "5"]));
        let c = init(&mut b, "c", &[5], 4, 0.5, 2.0);
        let s = b.op("Mul", &[c, a], vec![]);
        let shape: &[i64] = if trans_b == 1 { &[4, 5] } else { &[5, 4] };
        let w = init(&mut b, "w", shape, 5, -1.0, 1.0);
        let bias = init(&mut b, "bias", &[4], 6, -1.0, 1.0);
        let y = b.op(
            "Gemm",
            &[s, w, bias],
            vec![Attribute::int("transB", trans_b)],
        );
        b.output(y, "y", DataType::Float, None);
        let original = b.build(17);
        let mut m = original.clone();
        run(
            &mut m,
            &["fuse-conv-bn", "eliminate-dead"],
            Target::Portable,
        );
        assert_eq!(ops(&m), hist(&[("Gemm", 1)]), "transB {trans_b}");
        assert_equivalent(&original, &m, &batch2());
    }
    // GELU's `* 0.5` (here `/ 2`) before a MatMul on rank-3 activations.
    let mut b = GraphBuilder::new();
    let a = b.input("a", DataType::Float, dims(&["batch", "3", "5"]));
    let two = b.f32("two", &[], &[2.0]);
    let s = b.op("Div", &[a, two], vec![]);
    let w = init(&mut b, "w", &[5, 4], 5, -1.0, 1.0);
    let y = b.op("MatMul", &[s, w], vec![]);
    b.output(y, "y", DataType::Float, None);
    let original = b.build(17);
    let mut m = original.clone();
    run(
        &mut m,
        &["fuse-conv-bn", "eliminate-dead"],
        Target::Portable,
    );
    assert_eq!(ops(&m), hist(&[("MatMul", 1)]));
    assert_equivalent(&original, &m, &batch2());
}

#[test]
fn scale_before_layer_declines() {
    let model = |c_shape: &[i64], second_reader: bool| {
        let mut b = GraphBuilder::new();
        let x = b.input("x", DataType::Float, dims(&["batch", "3", "6", "7"]));
        let c = init(&mut b, "c", c_shape, 9, 0.5, 2.0);
        let s = b.op("Mul", &[x, c], vec![]);
        let w = init(&mut b, "w", &[4, 3, 3, 3], 1, -1.0, 1.0);
        let y = b.op("Conv", &[s, w], vec![]);
        b.output(y, "y", DataType::Float, None);
        if second_reader {
            let r = b.op("Relu", &[s], vec![]);
            b.output(r, "r", DataType::Float, None);
        }
        b.build(17)
    };
    assert_unchanged(
        model(&[1, 1, 6, 1], false),
        "fuse-conv-bn",
        "conv_2",
        "scale of shape [1,1,6,1] varies along an axis other than the 3 input channels",
    );
    assert_unchanged(
        model(&[1, 3, 1, 1], true),
        "fuse-conv-bn",
        "conv_2",
        "the scaled input of conv_2 has other readers",
    );
}

#[test]
fn shift_before_unpadded_conv_and_gemm_goes_into_the_bias() {
    // PP-LCNetV3's learnable affine block: `x * s + t` before a 1x1 conv.
    check_scale_before("Conv", "Mul", &[1], |b, s| {
        let t = b.f32("t", &[1, 3, 1, 1], &[0.25, -0.5, 1.0]);
        let shifted = b.op("Add", &[s, t], vec![]);
        let w = init(b, "w", &[4, 3, 1, 1], 1, -1.0, 1.0);
        let bias = init(b, "b", &[4], 2, -1.0, 1.0);
        b.op("Conv", &[shifted, w, bias], vec![])
    });
    // Sub of a scalar before a grouped 3x3 conv without bias.
    check_scale_before("Conv", "Mul", &[3, 1, 1], |b, s| {
        let t = b.f32("t", &[], &[0.75]);
        let shifted = b.op("Sub", &[s, t], vec![]);
        let w = init(b, "w", &[6, 1, 3, 3], 1, -1.0, 1.0);
        b.op("Conv", &[shifted, w], vec![Attribute::int("group", 3)])
    });
    // Gemm with alpha, beta and C; and without C.
    for with_c in [true, false] {
        let mut b = GraphBuilder::new();
        let a = b.input("a", DataType::Float, dims(&["batch", "5"]));
        let t = init(&mut b, "t", &[1, 5], 4, -1.0, 1.0);
        let s = b.op("Add", &[t, a], vec![]);
        let w = init(&mut b, "w", &[4, 5], 5, -1.0, 1.0);
        let mut ins = vec![s, w];
        if with_c {
            ins.push(init(&mut b, "bias", &[4], 6, -1.0, 1.0));
        }
        let y = b.op(
            "Gemm",
            &ins,
            vec![
                Attribute::int("transB", 1),
                Attribute::float("alpha", 0.5),
                Attribute::float("beta", 2.0),
            ],
        );
        b.output(y, "y", DataType::Float, None);
        let original = b.build(17);
        let mut m = original.clone();
        run(
            &mut m,
            &["fuse-conv-bn", "eliminate-dead"],
            Target::Portable,
        );
        assert_eq!(ops(&m), hist(&[("Gemm", 1)]), "C {with_c}");
        assert_equivalent(&original, &m, &batch2());
    }
    // A padded conv would see shifted zeros at the border: declined.
    let mut b = GraphBuilder::new();
    let x = b.input("x", DataType::Float, dims(&["batch", "3", "6", "7"]));
    let t = b.f32("t", &[], &[0.5]);
    let s = b.op("Add", &[x, t], vec![]);
    let w = init(&mut b, "w", &[4, 3, 3, 3], 1, -1.0, 1.0);
    let y = b.op(
        "Conv",
        &[s, w],
        vec![Attribute::ints("pads", vec![1, 1, 1, 1])],
    );
    b.output(y, "y", DataType::Float, None);
    assert_unchanged(
        b.build(17),
        "fuse-conv-bn",
        "conv_2",
        "conv_2 pads its input; a shift before it would move the padding too",
    );
}

// ----- fuse-activation-patterns -----

/// x -> `build` -> Neg -> y at `opset`, through fuse-activation-patterns and
/// eliminate-dead.
fn activation(
    opset: i64,
    build: impl FnOnce(&mut GraphBuilder, ValueId) -> ValueId,
) -> (Model, Model, PipelineRun) {
    let mut b = GraphBuilder::new();
    let x = b.input("x", DataType::Float, dims(&["batch", "3", "6", "7"]));
    let a = build(&mut b, x);
    let y = b.op("Neg", &[a], vec![]);
    b.output(y, "y", DataType::Float, None);
    let original = b.build(opset);
    let mut m = original.clone();
    let r = run(
        &mut m,
        &["fuse-activation-patterns", "eliminate-dead"],
        Target::Portable,
    );
    (original, m, r)
}

fn relu6_plus_3(b: &mut GraphBuilder, x: ValueId, swap: bool) -> ValueId {
    let three = b.f32("three", &[1], &[3.0]);
    let lo = b.f32("lo", &[], &[0.0]);
    let hi = b.f32("hi", &[], &[6.0]);
    let a = if swap {
        b.op("Add", &[three, x], vec![])
    } else {
        b.op("Add", &[x, three], vec![])
    };
    b.op("Clip", &[a, lo, hi], vec![])
}

#[test]
fn hard_swish_and_hard_sigmoid_patterns_become_the_ops() {
    // PaddleOCR's form: Mul(x, clip) / 6; and clip * x * (1/6).
    for (swap, div) in [(false, true), (true, false)] {
        let (original, m, _) = activation(14, |b, x| {
            let c = relu6_plus_3(b, x, swap);
            let m = if swap {
                b.op("Mul", &[c, x], vec![])
            } else {
                b.op("Mul", &[x, c], vec![])
            };
            if div {
                let six = b.f32("six", &[1], &[6.0]);
                b.op("Div", &[m, six], vec![])
            } else {
                let sixth = b.f32("sixth", &[], &[1.0 / 6.0]);
                b.op("Mul", &[sixth, m], vec![])
            }
        });
        assert_eq!(
            ops(&m),
            hist(&[("HardSwish", 1), ("Neg", 1)]),
            "swap {swap}"
        );
        assert_equivalent(&original, &m, &batch2());
    }
    // Clip(x + 3, 0, 6) / 6 alone; and x times it, which becomes HardSwish.
    let (original, m, _) = activation(14, |b, x| {
        let c = relu6_plus_3(b, x, false);
        let six = b.f32("six", &[], &[6.0]);
        b.op("Div", &[c, six], vec![])
    });
    assert_eq!(ops(&m), hist(&[("HardSigmoid", 1), ("Neg", 1)]));
    assert_equivalent(&original, &m, &batch2());
    let (original, m, _) = activation(14, |b, x| {
        let c = relu6_plus_3(b, x, false);
        let six = b.f32("six", &[], &[6.0]);
        let s = b.op("Div", &[c, six], vec![]);
        b.op("Mul", &[x, s], vec![])
    });
    assert_eq!(ops(&m), hist(&[("HardSwish", 1), ("Neg", 1)]));
    assert_equivalent(&original, &m, &batch2());
}

#[test]
fn activation_patterns_decline() {
    // Opset 12 has no HardSwish: x * HardSigmoid(x).
    let (original, m, r) = activation(12, |b, x| {
        let c = relu6_plus_3(b, x, false);
        let m = b.op("Mul", &[x, c], vec![]);
        let six = b.f32("six", &[], &[6.0]);
        b.op("Div", &[m, six], vec![])
    });
    assert_eq!(
        ops(&m),
        hist(&[("HardSigmoid", 1), ("Mul", 1), ("Neg", 1)]),
        "{:?}",
        reasons(&r)
    );
    assert_equivalent(&original, &m, &batch2());
    // A second reader of the product keeps the pattern.
    let (_, m, r) = activation(14, |b, x| {
        let c = relu6_plus_3(b, x, false);
        let m = b.op("Mul", &[x, c], vec![]);
        let six = b.f32("six", &[], &[6.0]);
        let d = b.op("Div", &[m, six], vec![]);
        b.op("Add", &[d, m], vec![])
    });
    assert_eq!(
        ops(&m),
        hist(&[("Add", 2), ("Clip", 1), ("Mul", 1), ("Div", 1), ("Neg", 1)])
    );
    assert!(
        reasons(&r).contains(&(
            "div_4".to_string(),
            "a value inside the hard-swish pattern has other readers".to_string()
        )),
        "{:?}",
        reasons(&r)
    );
    // Clip to 0..5: not relu6; nothing happens.
    let (_, m, _) = activation(14, |b, x| {
        let three = b.f32("three", &[], &[3.0]);
        let lo = b.f32("lo", &[], &[0.0]);
        let hi = b.f32("hi", &[], &[5.0]);
        let a = b.op("Add", &[x, three], vec![]);
        let c = b.op("Clip", &[a, lo, hi], vec![]);
        let six = b.f32("six", &[], &[6.0]);
        b.op("Div", &[c, six], vec![])
    });
    assert_eq!(
        ops(&m),
        hist(&[("Add", 1), ("Clip", 1), ("Div", 1), ("Neg", 1)])
    );
}

#[test]
fn scale_moves_under_the_shift_before_a_padded_conv() {
    for (s_shape, t_shape) in [
        (&[1i64][..], &[1i64][..]),
        (&[1, 3, 1, 1][..], &[3, 1, 1][..]),
    ] {
        let mut b = GraphBuilder::new();
        let x = b.input("x", DataType::Float, dims(&["batch", "3", "6", "7"]));
        let s = init(&mut b, "s", s_shape, 9, 0.5, 2.0);
        let t = init(&mut b, "t", t_shape, 10, -1.0, 1.0);
        let scaled = b.op("Mul", &[x, s], vec![]);
        let shifted = b.op("Add", &[t, scaled], vec![]);
        let w = init(&mut b, "w", &[4, 3, 3, 3], 1, -1.0, 1.0);
        let y = b.op(
            "Conv",
            &[shifted, w],
            vec![Attribute::ints("pads", vec![1, 1, 1, 1])],
        );
        b.output(y, "y", DataType::Float, None);
        let original = b.build(17);
        let mut m = original.clone();
        run(
            &mut m,
            &["fuse-conv-bn", "eliminate-dead"],
            Target::Portable,
        );
        assert_eq!(ops(&m), hist(&[("Add", 1), ("Conv", 1)]), "{s_shape:?}");
        assert_equivalent(&original, &m, &batch2());
    }
}

// ----- fuse-quick-gelu -----

/// Conv → SiLU (`c · σ(c)`, operands in both orders), CLIP's `x · σ(1.702·x)`,
/// then a squeeze-excitation gate `x · σ(gate)` that is not the pattern.
fn silu_chain() -> Model {
    let mut b = GraphBuilder::new();
    let x = b.input("x", DataType::Float, dims(&["batch", "4", "6", "6"]));
    let w = init(&mut b, "w", &[4, 4, 3, 3], 1, -0.5, 0.5);
    let c = b.op(
        "Conv",
        &[x, w],
        vec![Attribute::ints("pads", vec![1, 1, 1, 1])],
    );
    let s = b.op("Sigmoid", &[c], vec![]);
    let a = b.op("Mul", &[c, s], vec![]);
    let s = b.op("Sigmoid", &[a], vec![]);
    let a = b.op("Mul", &[s, a], vec![]);
    let k = b.f32("k", &[], &[1.702]);
    let scaled = b.op("Mul", &[k, a], vec![]);
    let s = b.op("Sigmoid", &[scaled], vec![]);
    let a = b.op("Mul", &[a, s], vec![]);
    let pooled = b.op("GlobalAveragePool", &[a], vec![]);
    let gate = b.op("Sigmoid", &[pooled], vec![]);
    let y = b.op("Mul", &[a, gate], vec![]);
    b.output(y, "y", DataType::Float, None);
    b.build(17)
}

#[test]
fn x_times_sigmoid_x_becomes_quick_gelu_for_onnxruntime() {
    let mut m = silu_chain();
    let r = run(&mut m, &["fuse-quick-gelu"], Target::Onnxruntime);
    assert!(r.declined.is_empty(), "{:?}", reasons(&r));
    assert_eq!(
        ops(&m),
        hist(&[
            ("Conv", 1),
            ("GlobalAveragePool", 1),
            ("Mul", 1),
            ("Sigmoid", 1),
            ("com.microsoft::QuickGelu", 3),
        ])
    );
    assert_eq!(m.opset("com.microsoft"), Some(1));
    let alphas: Vec<f32> = m
        .graph
        .nodes()
        .filter(|(_, n)| n.op_type == "QuickGelu")
        .map(|(_, n)| {
            assert_eq!(n.domain(), "com.microsoft");
            assert_eq!(n.inputs.len(), 1);
            n.attr_float("alpha").unwrap().unwrap()
        })
        .collect();
    assert_eq!(alphas, vec![1.0, 1.0, 1.702]);
    assert_eq!(m.graph.value(m.graph.outputs[0].value).name, "y");
}

#[test]
fn quick_gelu_does_nothing_for_other_targets() {
    let mut m = silu_chain();
    let before = m.to_bytes().unwrap();
    let r = run(&mut m, &["fuse-quick-gelu"], Target::Portable);
    assert_eq!(m.to_bytes().unwrap(), before);
    assert_eq!(r.notes.len(), 1, "{:?}", r.notes);
    assert!(r.notes[0].contains("ONNX Runtime"), "{:?}", r.notes);
}

#[test]
fn quick_gelu_declines_a_shared_sigmoid_and_float16() {
    let mut b = GraphBuilder::new();
    let x = b.input("x", DataType::Float, dims(&["2", "8"]));
    let s = b.op("Sigmoid", &[x], vec![]);
    let y = b.op("Mul", &[x, s], vec![]);
    b.output(y, "y", DataType::Float, Some(dims(&["2", "8"])));
    b.output(s, "gate", DataType::Float, Some(dims(&["2", "8"])));
    assert_unchanged_with(
        b.build(17),
        "fuse-quick-gelu",
        Target::Onnxruntime,
        "mul_2",
        "the Sigmoid output has readers outside x·sigmoid(x)",
    );
    let mut b = GraphBuilder::new();
    let x = b.input("x", DataType::Float16, dims(&["2", "8"]));
    let s = b.op("Sigmoid", &[x], vec![]);
    let y = b.op("Mul", &[x, s], vec![]);
    b.output(y, "y", DataType::Float16, Some(dims(&["2", "8"])));
    // Inference records the Sigmoid's type, so compare ops, not bytes.
    let mut m = b.build(17);
    let r = run(&mut m, &["fuse-quick-gelu"], Target::Onnxruntime);
    assert_eq!(ops(&m), hist(&[("Mul", 1), ("Sigmoid", 1)]));
    assert_eq!(
        reasons(&r),
        vec![(
            "mul_2".to_string(),
            "element type float16: ONNX Runtime's QuickGelu CPU kernel is float32 only".to_string()
        )]
    );
}

#[test]
fn gemm_activation_becomes_fused_gemm_for_onnxruntime() {
    // A scikit-learn MLP's layers: Gemm → Relu, Gemm → LeakyRelu, Gemm → Clip.
    let mut b = GraphBuilder::new();
    let mut y = b.input("x", DataType::Float, dims(&["batch", "4"]));
    let lo = b.f32("lo", &[], &[0.0]);
    for (i, (op, attrs)) in [
        ("Relu", vec![]),
        ("LeakyRelu", vec![Attribute::float("alpha", 0.1)]),
        ("Clip", vec![]),
    ]
    .into_iter()
    .enumerate()
    {
        let w = init(&mut b, &format!("w{i}"), &[4, 4], i as u64 + 1, -0.5, 0.5);
        let c = init(&mut b, &format!("c{i}"), &[4], i as u64 + 7, -0.1, 0.1);
        let h = b.op("Gemm", &[y, w, c], vec![Attribute::int("transB", 1)]);
        let ins = if op == "Clip" { vec![h, lo] } else { vec![h] };
        y = b.op(op, &ins, attrs);
    }
    b.output(y, "y", DataType::Float, None);
    let mut m = b.build(17);
    let r = run(&mut m, &["fuse-conv-activation"], Target::Onnxruntime);
    assert!(r.declined.is_empty(), "{:?}", reasons(&r));
    assert_eq!(
        ops(&m),
        hist(&[("Clip", 1), ("Gemm", 1), ("com.microsoft::FusedGemm", 2)])
    );
    let fused: Vec<_> = m
        .graph
        .nodes()
        .filter(|(_, n)| n.op_type == "FusedGemm")
        .map(|(_, n)| n.clone())
        .collect();
    assert_eq!(
        fused[0].attr_string("activation").unwrap().as_deref(),
        Some("Relu")
    );
    assert_eq!(fused[1].attr_float("activation_alpha").unwrap(), Some(0.1));
    for n in &fused {
        assert_eq!(n.attr_int("transB").unwrap(), Some(1));
        assert_eq!(n.inputs.len(), 3);
    }
}

/// x [1, 6, 5] cut by `cuts` (start, end) along axis 1 into graph outputs.
fn sliced(cuts: &[(i64, i64)], opset: i64) -> Model {
    let mut b = GraphBuilder::new();
    let x = b.input("x", DataType::Float, dims(&["1", "6", "5"]));
    for (i, &(s, e)) in cuts.iter().enumerate() {
        let st = b.i64(&format!("s{i}"), &[1], &[s]);
        let en = b.i64(&format!("e{i}"), &[1], &[e]);
        let ax = b.i64(&format!("a{i}"), &[1], &[-2]);
        let y = b.op("Slice", &[x, st, en, ax], vec![]);
        b.output(y, &format!("y{i}"), DataType::Float, None);
    }
    b.build(opset)
}

#[test]
fn slices_covering_an_axis_end_to_end_become_one_split() {
    // Out of order, a negative end: 0..2, 2..-1 (= 5), 5..6.
    for opset in [11, 13] {
        let original = sliced(&[(2, -1), (0, 2), (5, 6)], opset);
        let mut m = original.clone();
        run(&mut m, &["fuse-slices-to-split"], Target::Portable);
        assert_eq!(ops(&m), hist(&[("Split", 1)]), "opset {opset}");
        let split = m.graph.nodes().find(|(_, n)| n.is("Split")).unwrap().1;
        let names: Vec<String> = split
            .outputs
            .iter()
            .flatten()
            .map(|&v| m.graph.value(v).name.clone())
            .collect();
        assert_eq!(names, ["y1", "y0", "y2"]);
        assert_equivalent(&original, &m, &InputShapes::new());
    }
}

#[test]
fn slices_with_a_gap_an_overlap_or_alone_stay() {
    for cuts in [
        vec![(0, 2), (3, 6)],
        vec![(0, 3), (2, 6)],
        vec![(0, 6)],
        vec![(1, 3), (3, 6)],
    ] {
        let mut m = sliced(&cuts, 13);
        let before = ops(&m);
        run(&mut m, &["fuse-slices-to-split"], Target::Portable);
        assert_eq!(ops(&m), before, "{cuts:?}");
    }
}

/// A "Focus" layer: `Concat(x[..., a::2, b::2] for (a, b) in offsets, axis=1)`
/// on `x: [batch, channels, 8, 6]`, ends written as INT64_MAX like torch's exporter.
/// With `expose_first`, the first Slice's output is a graph output too.
fn focus_with(offsets: &[(i64, i64)], channels: &str, step: i64, expose_first: bool) -> Model {
    let mut b = GraphBuilder::new();
    let x = b.input("x", DataType::Float, dims(&["batch", channels, "8", "6"]));
    let ends = b.i64("ends", &[2], &[i64::MAX, i64::MAX]);
    let axes = b.i64("axes", &[2], &[2, 3]);
    let steps = b.i64("steps", &[2], &[step, step]);
    let mut parts = Vec::new();
    for (i, &(r, c)) in offsets.iter().enumerate() {
        let starts = b.i64(&format!("starts{i}"), &[2], &[r, c]);
        parts.push(b.op("Slice", &[x, starts, ends, axes, steps], vec![]));
    }
    let y = b.op("Concat", &parts, vec![Attribute::int("axis", 1)]);
    b.output(y, "y", DataType::Float, None);
    if expose_first {
        b.output(parts[0], "first", DataType::Float, None);
    }
    b.build(13)
}

fn focus(offsets: &[(i64, i64)], channels: &str, step: i64) -> Model {
    focus_with(offsets, channels, step, false)
}

#[test]
fn a_focus_layer_becomes_space_to_depth_and_a_channel_gather() {
    // YOLOv5's order: row offset first, so groups 0, 2, 1, 3 of SpaceToDepth.
    let original = focus(&[(0, 0), (1, 0), (0, 1), (1, 1)], "3", 2);
    let mut m = original.clone();
    run(&mut m, &["fuse-space-to-depth"], Target::Portable);
    assert_eq!(ops(&m), hist(&[("Gather", 1), ("SpaceToDepth", 1)]));
    let (_, gather) = m.graph.nodes().find(|(_, n)| n.is("Gather")).unwrap();
    let order = m.graph.constant(gather.inputs[1].unwrap()).unwrap();
    assert_eq!(
        order.to_i64_vec().unwrap(),
        vec![0, 1, 2, 6, 7, 8, 3, 4, 5, 9, 10, 11]
    );
    assert_eq!(m.graph.value(gather.outputs[0].unwrap()).name, "y");
    let (_, s2d) = m.graph.nodes().find(|(_, n)| n.is("SpaceToDepth")).unwrap();
    assert_eq!(s2d.attr_int_or("blocksize", 0).unwrap(), 2);
    assert_equivalent(&original, &m, &batch2());

    // SpaceToDepth's own order needs no Gather; the channels may be unknown.
    let original = focus(&[(0, 0), (0, 1), (1, 0), (1, 1)], "c", 2);
    let mut m = original.clone();
    run(&mut m, &["fuse-space-to-depth"], Target::Portable);
    assert_eq!(ops(&m), hist(&[("SpaceToDepth", 1)]));
    let shapes = InputShapes::new()
        .with_symbol("batch", 2)
        .with_symbol("c", 5);
    assert_equivalent(&original, &m, &shapes);
}

#[test]
fn focus_layers_that_are_not_a_space_to_depth_stay() {
    // Unknown channels with an order that needs the Gather.
    assert_unchanged(
        focus(&[(0, 0), (1, 0), (0, 1), (1, 1)], "c", 2),
        "fuse-space-to-depth",
        "concat_5",
        "the channel count of 'x' is not known: the block order needs a Gather over the channels",
    );
    // A repeated offset, a step of 1, and a block of 4 offsets of a 3-step cut.
    for (offsets, step) in [
        (vec![(0, 0), (1, 0), (0, 1), (0, 1)], 2),
        (vec![(0, 0), (1, 0), (0, 1), (1, 1)], 1),
        (vec![(0, 0), (1, 0), (0, 1), (1, 1)], 3),
    ] {
        let mut m = focus(&offsets, "3", step);
        let before = ops(&m);
        run(&mut m, &["fuse-space-to-depth"], Target::Portable);
        assert_eq!(ops(&m), before, "{offsets:?} step {step}");
    }
    // A Slice also read by another node.
    let mut m = focus_with(&[(0, 0), (1, 0), (0, 1), (1, 1)], "3", 2, true);
    let before = ops(&m);
    let r = run(&mut m, &["fuse-space-to-depth"], Target::Portable);
    assert_eq!(ops(&m), before);
    assert!(
        reasons(&r)
            .iter()
            .any(|(_, why)| why.contains("is read outside the Concat")),
        "{:?}",
        reasons(&r)
    );
}

/// `m` through the one pass `pass` (target onnxruntime) with the providers
/// named (`--ep`) and installed as given (None: no ONNX Runtime found).
fn run_for_providers(
    mut m: Model,
    pass: &str,
    builtin: bool,
    providers: &[&str],
    installed: Option<&[&str]>,
) -> (BTreeMap<String, usize>, PipelineRun) {
    let names = vec![pass.to_string()];
    let config = PipelineConfig::from_pass_names(&names, Target::Onnxruntime).unwrap();
    let options = DriverOptions {
        validate: true,
        builtin_pipeline: builtin,
        ..Default::default()
    };
    let mut side = infopt_passes::SideData::default();
    side.insert(infopt_passes::ExecutionProviders(
        providers.iter().map(|p| p.to_string()).collect(),
    ));
    if let Some(installed) = installed {
        side.insert(infopt_passes::InstalledProviders(
            installed.iter().map(|p| p.to_string()).collect(),
        ));
    }
    let run = infopt_passes::run_pipeline_with(&mut m, &config, &options, side, &mut |_, _| {
        Ok(Flow::Continue)
    })
    .unwrap();
    (ops(&m), run)
}

/// Conv + Relu through fuse-conv-activation for ONNX Runtime, in a built-in
/// pipeline or the user's, with the providers `--ep` named.
fn conv_relu_for(builtin: bool, providers: &[&str]) -> (BTreeMap<String, usize>, PipelineRun) {
    conv_relu_installed(builtin, providers, None)
}

/// [`conv_relu_for`] with the installed ONNX Runtime's providers (None: none installed).
fn conv_relu_installed(
    builtin: bool,
    providers: &[&str],
    installed: Option<&[&str]>,
) -> (BTreeMap<String, usize>, PipelineRun) {
    let mut b = GraphBuilder::new();
    let x = b.input("x", DataType::Float, dims(&["1", "3", "4", "4"]));
    let w = init(&mut b, "w", &[2, 3, 1, 1], 1, -1.0, 1.0);
    let c = b.op("Conv", &[x, w], vec![]);
    let y = b.op("Relu", &[c], vec![]);
    b.output(y, "y", DataType::Float, None);
    let m = b.build(17);
    run_for_providers(m, "fuse-conv-activation", builtin, providers, installed)
}

#[test]
fn conv_activation_fuses_only_for_the_cpu_provider() {
    let fused = hist(&[("com.microsoft::FusedConv", 1)]);
    let plain = hist(&[("Conv", 1), ("Relu", 1)]);
    // Built-in pipeline: only when --ep says CPU.
    assert_eq!(conv_relu_for(true, &["cpu"]).0, fused);
    assert_eq!(conv_relu_for(true, &["CPUExecutionProvider"]).0, fused);
    let (got, run) = conv_relu_for(true, &[]);
    assert_eq!(got, plain);
    assert!(run.notes.is_empty(), "{:?}", run.notes);
    assert!(
        run.details
            .iter()
            .any(|d| d.contains("naming the CPU provider fuses them"))
    );
    // The user's pipeline fuses unless a provider other than CPU is named.
    assert_eq!(conv_relu_for(false, &[]).0, fused);
    let (got, run) = conv_relu_for(false, &["cuda", "cpu"]);
    assert_eq!(got, plain);
    assert!(
        run.notes
            .iter()
            .any(|n| n.contains("the output is for provider 'cuda', and")),
        "{:?}",
        run.notes
    );
    assert_eq!(conv_relu_for(true, &["cuda"]).0, plain);
}

#[test]
fn without_ep_conv_activation_fuses_when_the_installed_runtime_is_cpu_only() {
    let fused = hist(&[("com.microsoft::FusedConv", 1)]);
    let plain = hist(&[("Conv", 1), ("Relu", 1)]);
    // PyPI's onnxruntime: CPU and Azure's remote provider.
    let cpu = ["AzureExecutionProvider", "CPUExecutionProvider"];
    let (got, run) = conv_relu_installed(true, &[], Some(&cpu));
    assert_eq!(got, fused);
    assert!(run.notes.is_empty(), "{:?}", run.notes);
    assert!(
        run.details
            .iter()
            .any(|d| d
                .contains("fused for ONNX Runtime's CPU provider: no execution provider is named")),
        "{:?}",
        run.details
    );
    // onnxruntime-gpu: the file must load in CUDA too, so the pairs stay.
    let gpu = [
        "TensorrtExecutionProvider",
        "CUDAExecutionProvider",
        "CPUExecutionProvider",
    ];
    let (got, run) = conv_relu_installed(true, &[], Some(&gpu));
    assert_eq!(got, plain);
    assert!(
        run.details.iter().any(|d| d
            .contains("the installed ONNX Runtime has TensorrtExecutionProvider")
            && d.contains("naming the CPU provider fuses them")),
        "{:?}",
        run.details
    );
    // --ep wins over what is installed.
    assert_eq!(conv_relu_installed(true, &["cuda"], Some(&cpu)).0, plain);
    assert_eq!(conv_relu_installed(true, &["cpu"], Some(&gpu)).0, fused);
}

#[test]
fn a_whole_gelus_halving_stays_before_the_next_matmul() {
    // x * (1 + erf(x / sqrt 2)) * 0.5 -> MatMul: ONNX Runtime fuses the
    // GELU (BiasGelu) only with its halving in place.
    let mut b = GraphBuilder::new();
    let x = b.input("x", DataType::Float, dims(&["batch", "3", "5"]));
    let sqrt2 = b.f32("sqrt2", &[], &[std::f32::consts::SQRT_2]);
    let one = b.f32("one", &[], &[1.0]);
    let half = b.f32("half", &[], &[0.5]);
    let d = b.op("Div", &[x, sqrt2], vec![]);
    let e = b.op("Erf", &[d], vec![]);
    let a = b.op("Add", &[e, one], vec![]);
    let m1 = b.op("Mul", &[x, a], vec![]);
    let h = b.op("Mul", &[m1, half], vec![]);
    let w = init(&mut b, "w", &[5, 4], 5, -1.0, 1.0);
    let y = b.op("MatMul", &[h, w], vec![]);
    b.output(y, "y", DataType::Float, None);
    let original = b.build(17);
    let mut m = original.clone();
    let r = run(&mut m, &["fuse-conv-bn"], Target::Portable);
    assert_eq!(ops(&m), ops(&original));
    assert!(
        reasons(&r).iter().any(|(at, why)| at == "matmul_6"
            && why.starts_with("the scale before matmul_6")
            && why.ends_with(
            "is the last step of a GELU (x * (1 + erf(x / sqrt 2)) * 0.5): ONNX Runtime and TensorRT fuse a GELU only when it is whole"
        )),
        "{:?}",
        reasons(&r)
    );
}

/// `LayerNormalization(Add(x, r))` over `[1, 4, 8]` through
/// fuse-skip-layer-norm (target onnxruntime) with the providers named and
/// installed as given.
fn add_layer_norm_for(
    builtin: bool,
    providers: &[&str],
    installed: Option<&[&str]>,
) -> (BTreeMap<String, usize>, PipelineRun) {
    let mut b = GraphBuilder::new();
    let x = b.input("x", DataType::Float, dims(&["1", "4", "8"]));
    let r = b.input("r", DataType::Float, dims(&["1", "4", "8"]));
    let gamma = init(&mut b, "gamma", &[8], 2, 0.5, 1.5);
    let beta = init(&mut b, "beta", &[8], 3, -0.5, 0.5);
    let s = b.op("Add", &[x, r], vec![]);
    let y = b.op(
        "LayerNormalization",
        &[s, gamma, beta],
        vec![Attribute::int("axis", -1)],
    );
    b.output(y, "y", DataType::Float, None);
    let m = b.build(17);
    run_for_providers(m, "fuse-skip-layer-norm", builtin, providers, installed)
}

#[test]
fn skip_layer_norm_is_left_to_add_and_layer_norm_on_the_cpu_provider() {
    let fused = hist(&[("com.microsoft::SkipLayerNormalization", 1)]);
    let plain = hist(&[("Add", 1), ("LayerNormalization", 1)]);
    let cpu = ["CPUExecutionProvider"];
    let gpu = ["CUDAExecutionProvider", "CPUExecutionProvider"];
    // Named CPU, or nothing named with a CPU-only ONNX Runtime installed.
    let (got, run) = add_layer_norm_for(true, &["cpu"], None);
    assert_eq!(got, plain);
    assert!(
        run.details.iter().any(|d| d.starts_with(
            "fuse-skip-layer-norm left Add + LayerNormalization unfused: the output is for ONNX Runtime's CPU provider, the one named, where SkipLayerNormalization runs slower"
        )),
        "{:?}",
        run.details
    );
    assert_eq!(add_layer_norm_for(true, &[], Some(&cpu)).0, plain);
    // The user's own pipeline says so in a note.
    let (got, run) = add_layer_norm_for(false, &[], Some(&cpu));
    assert_eq!(got, plain);
    assert!(
        run.notes
            .iter()
            .any(|n| n.contains("naming a GPU provider fuses them")),
        "{:?}",
        run.notes
    );
    // A GPU provider named or installed, or no ONNX Runtime to say: fused.
    assert_eq!(add_layer_norm_for(true, &["cuda"], Some(&cpu)).0, fused);
    assert_eq!(add_layer_norm_for(true, &[], Some(&gpu)).0, fused);
    assert_eq!(add_layer_norm_for(true, &[], None).0, fused);
}
