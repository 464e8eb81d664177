//! Lowering passes (an op rewritten as other standard ops the runtime runs
//! faster): the exact rewrite, equivalence in tract on seeded inputs, and
//! the declined cases with their reasons.

mod common;

use common::{assert_equivalent, default_shapes, histogram, ops, run_passes, run_passes_for};
use infopt_ir::builder::{GraphBuilder, dims};
use infopt_ir::{DataType, Model, Node};
use infopt_passes::Target;

/// `y = PRelu(x, slope)` over `x: [N, 4, 5, 6]` (the element
/// type `dtype`), with `slope` a `[4, 1, 1]` constant of `values`, at `opset`.
fn prelu(values: &[f32], dtype: DataType, opset: i64) -> Model {
    let mut b = GraphBuilder::new();
    let x = b.input("x", dtype, dims(&["N", "4", "5", "6"]));
    let slope = b.f32("slope", &[4, 1, 1], values);
    let y = b.op("PRelu", &[x, slope], vec![]);
    b.output(y, "y", dtype, Some(dims(&["N", "4", "5", "6"])));
    b.build(opset)
}

fn node<'a>(m: &'a Model, name: &str) -> &'a Node {
    let id = m
        .graph
        .find_node(name)
        .unwrap_or_else(|| panic!("no node {name}"));
    m.graph.node(id)
}

/// The names of the values node `name` reads.
fn reads(m: &Model, name: &str) -> Vec<String> {
    node(m, name)
        .inputs
        .iter()
        .map(|v| v.map_or(String::new(), |v| m.graph.value(v).name.clone()))
        .collect()
}

fn reasons(run: &infopt_passes::PipelineRun) -> Vec<String> {
    run.declined.iter().map(|d| d.reason.clone()).collect()
}

/// The run declined a rewrite with exactly `reason`.
fn assert_declined(run: &infopt_passes::PipelineRun, reason: &str) {
    assert!(
        reasons(run).iter().any(|r| r == reason),
        "{reason}: {:?}",
        reasons(run)
    );
}

#[test]
fn prelu_becomes_relu_plus_the_scaled_negative_part() {
    // Slopes of either sign, above 1 and 0: the rewrite does not need them
    // in [0, 1].
    let original = prelu(&[0.25, -1.5, 2.0, 0.0], DataType::Float, 13);
    let mut m = original.clone();
    let run = run_passes(&mut m, &["lower-prelu"]);
    assert_eq!(run.records[0].rewrites, 1);
    assert_eq!(
        ops(&m),
        histogram(&[("Add", 1), ("Min", 1), ("Mul", 1), ("Relu", 1)])
    );
    assert_eq!(reads(&m, "prelu_1.relu"), ["x"]);
    assert_eq!(
        reads(&m, "prelu_1"),
        ["prelu_1.relu_out", "prelu_1.scaled_out"]
    );
    assert_eq!(reads(&m, "prelu_1.negative"), ["x", "prelu_1.zero"]);
    assert_eq!(
        reads(&m, "prelu_1.scaled"),
        ["prelu_1.negative_out", "slope"]
    );
    // The Add takes the PRelu's name, and the output keeps its name.
    let add = node(&m, "prelu_1");
    assert!(add.is("Add"));
    assert_eq!(m.graph.value(add.outputs[0].unwrap()).name, "y");
    let zero = m.graph.find_value("prelu_1.zero").unwrap();
    let zero = m.graph.constant(zero).unwrap();
    assert_eq!(zero.dims(), &[] as &[i64]);
    assert_eq!(zero.to_f64_vec().unwrap(), [0.0]);
    assert_equivalent(&original, &m, &default_shapes(), 0.0, 0.0);
}

#[test]
fn prelu_stays_where_the_rewrite_would_differ_or_cannot_run() {
    let cases = [
        (
            prelu(&[0.25, f32::INFINITY, 0.5, 0.5], DataType::Float, 13),
            Target::Portable,
            "the slope 'slope' holds a value that is not finite (slope * 0 would be NaN where PRelu gives x)",
        ),
        (
            prelu(&[0.25; 4], DataType::Double, 13),
            Target::Portable,
            "element type float64: only float32 is rewritten",
        ),
        (
            prelu(&[0.25; 4], DataType::Float, 7),
            Target::Portable,
            "opset 7: Min broadcasts from opset 8",
        ),
    ];
    for (mut m, target, reason) in cases {
        let before = m.to_bytes().unwrap();
        let run = run_passes_for(&mut m, &["lower-prelu"], target);
        assert_eq!(m.to_bytes().unwrap(), before, "{reason}");
        assert_declined(&run, reason);
    }
    // A slope computed at run time.
    let mut b = GraphBuilder::new();
    let x = b.input("x", DataType::Float, dims(&["N", "4"]));
    let s = b.input("s", DataType::Float, dims(&["4"]));
    let y = b.op("PRelu", &[x, s], vec![]);
    b.output(y, "y", DataType::Float, None);
    let mut m = b.build(13);
    let run = run_passes(&mut m, &["lower-prelu"]);
    assert_eq!(ops(&m), histogram(&[("PRelu", 1)]));
    assert_eq!(reasons(&run), ["the slope 's' is not a constant"]);
}

#[test]
fn prelu_is_left_to_tensorrt() {
    let mut m = prelu(&[0.25; 4], DataType::Float, 13);
    let run = run_passes_for(&mut m, &["lower-prelu"], Target::Tensorrt);
    assert_eq!(ops(&m), histogram(&[("PRelu", 1)]));
    let said: Vec<&String> = run.notes.iter().chain(&run.details).collect();
    assert!(
        said.iter()
            .any(|n| n.contains("TensorRT runs PRelu as a layer of its own")),
        "{said:?}"
    );
    // Target onnxruntime rewrites it as portable does.
    let mut m = prelu(&[0.25; 4], DataType::Float, 13);
    run_passes_for(&mut m, &["lower-prelu"], Target::Onnxruntime);
    assert_eq!(ops(&m).get("PRelu"), None);
}

/// `y = Mul(x, Tanh(Softplus(x)))` over `x: [N, 4, 5, 6]` (the element type
/// `dtype`) at `opset`, the Mul reading `x` first or second.
fn mish_by_parts(dtype: DataType, opset: i64, x_first: bool) -> Model {
    let mut b = GraphBuilder::new();
    let x = b.input("x", dtype, dims(&["N", "4", "5", "6"]));
    let s = b.op("Softplus", &[x], vec![]);
    let t = b.op("Tanh", &[s], vec![]);
    let inputs = if x_first { [x, t] } else { [t, x] };
    let y = b.op("Mul", &inputs, vec![]);
    b.output(y, "y", dtype, Some(dims(&["N", "4", "5", "6"])));
    b.build(opset)
}

/// The six ops every Mish becomes, named after `root`.
fn assert_lowered_mish(m: &Model, root: &str) {
    assert_eq!(
        ops(m),
        histogram(&[("Add", 2), ("Div", 2), ("Exp", 1), ("Mul", 1)])
    );
    let name = |suffix: &str| format!("{root}{suffix}");
    let out = |suffix: &str| format!("{root}{suffix}_out");
    assert_eq!(reads(m, &name(".exp")), ["x"]);
    assert_eq!(reads(m, &name(".shifted")), [out(".exp"), name(".two")]);
    assert_eq!(reads(m, &name(".product")), [out(".exp"), out(".shifted")]);
    assert_eq!(reads(m, &name(".ratio")), [name(".two"), out(".product")]);
    assert_eq!(
        reads(m, &name(".denominator")),
        [out(".ratio"), name(".one")]
    );
    assert_eq!(reads(m, root), ["x".to_string(), out(".denominator")]);
    // The last Div takes the root's name, and the output keeps its name.
    let div = node(m, root);
    assert!(div.is("Div"));
    assert_eq!(m.graph.value(div.outputs[0].unwrap()).name, "y");
    for (suffix, value) in [(".one", 1.0), (".two", 2.0)] {
        let v = m.graph.find_value(&name(suffix)).unwrap();
        let t = m.graph.constant(v).unwrap();
        assert_eq!(t.dims(), &[] as &[i64]);
        assert_eq!(t.to_f64_vec().unwrap(), [value]);
    }
}

#[test]
fn tanh_of_softplus_times_x_becomes_exp_and_two_divisions() {
    for x_first in [true, false] {
        let original = mish_by_parts(DataType::Float, 13, x_first);
        let mut m = original.clone();
        let run = run_passes(&mut m, &["lower-mish"]);
        assert_eq!(run.records[0].rewrites, 1, "x first: {x_first}");
        assert_lowered_mish(&m, "mul_3");
        // A few units in the last place of float32.
        assert_equivalent(&original, &m, &default_shapes(), 1e-6, 1e-5);
    }
}

#[test]
fn the_mish_op_becomes_the_same_six_ops() {
    let mut b = GraphBuilder::new();
    let x = b.input("x", DataType::Float, dims(&["N", "4", "5", "6"]));
    let y = b.op("Mish", &[x], vec![]);
    b.output(y, "y", DataType::Float, Some(dims(&["N", "4", "5", "6"])));
    let original = b.build(18);
    let mut m = original.clone();
    let run = run_passes(&mut m, &["lower-mish"]);
    assert_eq!(run.records[0].rewrites, 1);
    assert_lowered_mish(&m, "mish_1");
    // tract has no Mish: the same function as Softplus, Tanh and Mul
    // (tests/interop/test_lower_mish.py runs the Mish op in ONNX Runtime).
    let by_parts = mish_by_parts(DataType::Float, 18, true);
    assert_equivalent(&by_parts, &m, &default_shapes(), 1e-6, 1e-5);
}

#[test]
fn mish_stays_where_its_parts_are_read_elsewhere_or_cannot_be_rewritten() {
    // The Softplus also feeds a second output.
    let mut b = GraphBuilder::new();
    let x = b.input("x", DataType::Float, dims(&["N", "4"]));
    let s = b.op("Softplus", &[x], vec![]);
    let t = b.op("Tanh", &[s], vec![]);
    let y = b.op("Mul", &[x, t], vec![]);
    b.output(y, "y", DataType::Float, None);
    b.output(s, "s", DataType::Float, None);
    let shared_softplus = b.build(13);
    // The Tanh is read by a second node.
    let mut b = GraphBuilder::new();
    let x = b.input("x", DataType::Float, dims(&["N", "4"]));
    let s = b.op("Softplus", &[x], vec![]);
    let t = b.op("Tanh", &[s], vec![]);
    let y = b.op("Mul", &[x, t], vec![]);
    let z = b.op("Neg", &[t], vec![]);
    b.output(y, "y", DataType::Float, None);
    b.output(z, "z", DataType::Float, None);
    let shared_tanh = b.build(13);
    let cases = [
        (
            shared_softplus,
            "the Softplus output has readers outside x·tanh(softplus(x))",
        ),
        (
            shared_tanh,
            "the Tanh output has readers outside x·tanh(softplus(x))",
        ),
        (
            mish_by_parts(DataType::Double, 13, true),
            "element type float64: only float32 is rewritten",
        ),
        (
            mish_by_parts(DataType::Float, 6, true),
            "opset 6: scalar constants broadcast from opset 7",
        ),
    ];
    for (mut m, reason) in cases {
        let before = ops(&m);
        let run = run_passes(&mut m, &["lower-mish"]);
        assert_eq!(run.records[0].rewrites, 0, "{reason}");
        assert_eq!(ops(&m), before, "{reason}");
        assert_declined(&run, reason);
    }
    // x · tanh(softplus(z)) with z not x is another function: not matched.
    let mut b = GraphBuilder::new();
    let x = b.input("x", DataType::Float, dims(&["N", "4"]));
    let z = b.input("z", DataType::Float, dims(&["N", "4"]));
    let s = b.op("Softplus", &[z], vec![]);
    let t = b.op("Tanh", &[s], vec![]);
    let y = b.op("Mul", &[x, t], vec![]);
    b.output(y, "y", DataType::Float, None);
    let mut m = b.build(13);
    let run = run_passes(&mut m, &["lower-mish"]);
    assert_eq!(run.records[0].rewrites, 0);
    assert!(run.declined.is_empty(), "{:?}", reasons(&run));
}

#[test]
fn mish_is_left_to_tensorrt() {
    let mut m = mish_by_parts(DataType::Float, 13, true);
    let run = run_passes_for(&mut m, &["lower-mish"], Target::Tensorrt);
    assert_eq!(
        ops(&m),
        histogram(&[("Mul", 1), ("Softplus", 1), ("Tanh", 1)])
    );
    let said: Vec<&String> = run.notes.iter().chain(&run.details).collect();
    assert!(
        said.iter()
            .any(|n| n.contains("TensorRT runs Mish as an activation of its own")),
        "{said:?}"
    );
    let mut m = mish_by_parts(DataType::Float, 13, true);
    run_passes_for(&mut m, &["lower-mish"], Target::Onnxruntime);
    assert_eq!(ops(&m).get("Softplus"), None);
}

#[test]
fn mish_stays_where_it_is_to_run_in_half_precision() {
    use infopt_passes::{
        DriverOptions, Flow, PipelineConfig, Precision, PrecisionMap, run_pipeline,
    };
    for half in [Precision::Fp16, Precision::Bf16] {
        let mut m = mish_by_parts(DataType::Float, 13, true);
        let mut config =
            PipelineConfig::from_pass_names(&["lower-mish".to_string()], Target::Portable).unwrap();
        config.precision = Some(PrecisionMap {
            default: Some(half),
            overrides: vec![],
        });
        let options = DriverOptions {
            validate: true,
            ..Default::default()
        };
        let run = run_pipeline(&mut m, &config, &options, &mut |_, _| Ok(Flow::Continue)).unwrap();
        assert_eq!(run.records[0].rewrites, 0, "{half}");
        assert_eq!(
            reasons(&run),
            [format!(
                "the Mish is to run in {half}: its exponential would stay a float32 island there; the rewrite is for float32"
            )]
        );
    }
}
