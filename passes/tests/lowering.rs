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
        assert!(
            reasons(&run).iter().any(|r| r == reason),
            "{reason}: {:?}",
            reasons(&run)
        );
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
