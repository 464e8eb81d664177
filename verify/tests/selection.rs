//! Which tensors verification compares beside the outputs: what a
//! data-dependent selection reads.

use infopt_ir::builder::{GraphBuilder, dims};
use infopt_ir::{Attribute, DataType};
use infopt_verify::selection::{exposing, selection_inputs};

#[test]
fn the_computed_inputs_of_a_selection_are_watched_once() {
    let mut b = GraphBuilder::new();
    let x = b.input("x", DataType::Float, dims(&["1", "8"]));
    let raw = b.input("raw_boxes", DataType::Float, dims(&["1", "8", "4"]));
    let scores = b.op("Sigmoid", &[x], vec![]);
    let k = b.i64("k", &[1], &[3]);
    // TopK reads the computed scores; NonMaxSuppression reads a graph input
    // (nothing to compare there: the inputs are the same) and them again.
    let top = b.op("TopK", &[scores, k], vec![Attribute::int("axis", -1)]);
    let a0 = b.i64("a0", &[1], &[0]);
    let scores3 = b.op("Unsqueeze", &[scores, a0], vec![]);
    let picked = b.op("NonMaxSuppression", &[raw, scores3], vec![]);
    b.output(top, "top", DataType::Float, None);
    b.output(picked, "picked", DataType::Int64, None);
    let model = b.build(13);
    let made_by = |op: &str| {
        let g = &model.graph;
        let n = g
            .node_ids()
            .into_iter()
            .find(|&n| g.node(n).op_type == op)
            .expect("node");
        let v = g.node(n).outputs[0].expect("output");
        g.value(v).name.clone()
    };
    let (sigmoid, unsqueezed) = (made_by("Sigmoid"), made_by("Unsqueeze"));
    let watched = selection_inputs(&model);
    assert_eq!(watched, [sigmoid, unsqueezed]);
    // Exposed as outputs of a copy; a name the copy lacks is left out.
    let before = model.graph.outputs.len();
    let mut asked = watched.clone();
    asked.push("no such tensor".into());
    let copy = exposing(&model, &asked);
    assert_eq!(copy.graph.outputs.len(), before + 2);
    assert_eq!(model.graph.outputs.len(), before);
}
