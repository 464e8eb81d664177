//! Which outputs the INT8 accuracy target judges by top-1 agreement.

use infopt_ir::builder::{GraphBuilder, dims};
use infopt_ir::{Attribute, DataType, Model};
use infopt_verify::evaluate::classifier_outputs;

/// `features -> MatMul(W) -> Add(b)`, then the head `head` makes of the logits.
fn model(head: &str) -> Model {
    let mut b = GraphBuilder::new();
    let x = b.input("x", DataType::Float, dims(&["batch", "4"]));
    let w = b.f32("w", &[4, 3], &[0.1; 12]);
    let bias = b.f32("b", &[3], &[0.0; 3]);
    let mm = b.op("MatMul", &[x, w], vec![]);
    let logits = b.op("Add", &[mm, bias], vec![]);
    let out = match head {
        "logits" => logits,
        "softmax" => b.op("Softmax", &[logits], vec![Attribute::int("axis", -1)]),
        "written-out softmax" => {
            let e = b.op("Exp", &[logits], vec![]);
            let axes = b.i64("axes", &[1], &[-1]);
            let s = b.op("ReduceSum", &[e, axes], vec![Attribute::int("keepdims", 1)]);
            b.op("Div", &[e, s], vec![])
        }
        "reshaped" => {
            let p = b.op("Softmax", &[logits], vec![Attribute::int("axis", -1)]);
            b.op("Flatten", &[p], vec![Attribute::int("axis", 1)])
        }
        _ => b.op("Sigmoid", &[logits], vec![]),
    };
    b.output(out, "y", DataType::Float, Some(dims(&["batch", "3"])));
    b.build(13)
}

#[test]
fn classifier_heads_are_judged_by_top1() {
    for head in ["logits", "softmax", "written-out softmax", "reshaped"] {
        assert_eq!(
            classifier_outputs(&model(head)),
            vec!["y".to_string()],
            "{head}"
        );
    }
}

#[test]
fn other_outputs_are_not() {
    // A sigmoid map (multi-label, or a detection map) has no single top class.
    assert!(classifier_outputs(&model("sigmoid")).is_empty());
}
