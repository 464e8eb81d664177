//! What a union of models declines: models it could not run as one.

use infopt_ir::builder::{GraphBuilder, dims};
use infopt_ir::union::{UnionBuilder, union_of};
use infopt_ir::{Attribute, DataType, Graph, Model};

/// `x -> Relu -> op -> y`, with `op` one of the tests' choosing.
fn model(input: &str, op: &str, attributes: Vec<Attribute>) -> Model {
    let mut b = GraphBuilder::new();
    let x = b.input(input, DataType::Float, dims(&["2", "3"]));
    let r = b.op("Relu", &[x], vec![]);
    let y = b.op(op, &[r], attributes);
    b.output(y, "y", DataType::Float, None);
    b.build(17)
}

#[test]
fn models_that_differ_past_a_shared_prefix_share_it() {
    let (a, b) = (model("x", "Neg", vec![]), model("x", "Abs", vec![]));
    let u = union_of(&[&a, &b]).unwrap();
    assert_eq!((u.nodes, u.nodes_apart, u.outputs_each), (3, 4, 1));
    let names: Vec<&str> = u
        .model
        .graph
        .outputs
        .iter()
        .map(|o| o.info.name())
        .collect();
    assert_eq!(names.len(), 2);
    assert_ne!(names[0], names[1], "each output named once");
}

#[test]
fn random_ops_subgraphs_and_other_inputs_cannot_join() {
    let plain = model("x", "Neg", vec![]);
    // Two draws of a random op are not one.
    let random = model("x", "RandomUniformLike", vec![]);
    assert!(union_of(&[&plain, &random]).is_none());
    assert!(UnionBuilder::new(&random).is_none());
    // A subgraph names outer values the union renames.
    let mut branch = GraphBuilder::new();
    let c = branch.f32("c", &[1], &[1.0]);
    branch.output(c, "c_out", DataType::Float, None);
    let branch: Graph = branch.into_graph();
    let with_if = model(
        "x",
        "Identity",
        vec![Attribute::graph("then_branch", branch)],
    );
    assert!(union_of(&[&plain, &with_if]).is_none());
    // Inputs by another name are another model's.
    let other = model("z", "Neg", vec![]);
    let mut u = UnionBuilder::new(&plain).unwrap();
    assert_eq!(u.nodes_added_by(&other), None);
    assert!(!u.add(&other));
    assert_eq!(
        u.models(),
        1,
        "a model that cannot join leaves the union as it was"
    );
}
