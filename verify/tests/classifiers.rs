//! Which outputs the INT8 accuracy target judges by top-1 agreement.

use infopt_ir::builder::{GraphBuilder, dims};
use infopt_ir::{Attribute, DataType, Model};
use infopt_verify::evaluate::{classifier_outputs, output_heads};

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

/// MTCNN O-Net's heads: `features -> Gemm` three times, into box offsets
/// `[N, 4]`, landmarks `[N, 10]` and a face Softmax `[N, 2]` (keras2onnx
/// names them `dense_5`, `dense_6`, `softmax_2`). With `logits_too`, the
/// Softmax's own logits are an output as well.
fn multi_task(logits_too: bool) -> Model {
    let mut b = GraphBuilder::new();
    let x = b.input("x", DataType::Float, dims(&["N", "6"]));
    let dense = |b: &mut GraphBuilder, name: &str, k: i64| {
        let w = b.f32(&format!("{name}_w"), &[6, k], &vec![0.1; 6 * k as usize]);
        let bias = b.f32(&format!("{name}_b"), &[k], &vec![0.0; k as usize]);
        b.op("Gemm", &[x, w, bias], vec![])
    };
    let boxes = dense(&mut b, "dense_5", 4);
    let points = dense(&mut b, "dense_6", 10);
    let logits = dense(&mut b, "dense_4", 2);
    let probs = b.op("Softmax", &[logits], vec![Attribute::int("axis", 1)]);
    b.output(boxes, "dense_5", DataType::Float, Some(dims(&["N", "4"])));
    b.output(points, "dense_6", DataType::Float, Some(dims(&["N", "10"])));
    b.output(probs, "softmax_2", DataType::Float, Some(dims(&["N", "2"])));
    if logits_too {
        b.output(logits, "dense_4", DataType::Float, Some(dims(&["N", "2"])));
    }
    b.build(13)
}

#[test]
fn dense_outputs_beside_a_probability_are_regressions_not_classifiers() {
    let heads = output_heads(&multi_task(false));
    assert_eq!(heads.classifiers, ["softmax_2"]);
    assert_eq!(heads.regressions, ["dense_5", "dense_6"]);
    // The probability's own logits stay a classifier's.
    let heads = output_heads(&multi_task(true));
    assert_eq!(heads.classifiers, ["softmax_2", "dense_4"]);
    assert_eq!(heads.regressions, ["dense_5", "dense_6"]);
}

/// One dense head `[batch, 3]` named `name`, alone.
fn named_head(name: &str) -> Model {
    let mut b = GraphBuilder::new();
    let x = b.input("x", DataType::Float, dims(&["batch", "4"]));
    let w = b.f32("w", &[4, 3], &[0.1; 12]);
    let y = b.op("MatMul", &[x, w], vec![]);
    b.output(y, name, DataType::Float, Some(dims(&["batch", "3"])));
    b.build(13)
}

#[test]
fn a_lone_dense_head_is_a_regression_only_when_its_name_says_so() {
    for name in ["bbox_pred", "landmarks", "face_kpts"] {
        let heads = output_heads(&named_head(name));
        assert_eq!(heads.regressions, [name], "{name}");
        assert!(heads.classifiers.is_empty(), "{name}");
    }
    for name in ["logits", "block_out", "y"] {
        let heads = output_heads(&named_head(name));
        assert!(heads.regressions.is_empty(), "{name}");
        assert_eq!(heads.classifiers, [name], "{name}");
    }
}

/// A segmentation head: `x [1, 4, 8, 8] -> Conv(3 classes)`, then `head`
/// of the logits `[1, 3, 8, 8]`, built at `opset`.
fn segmentation(head: &str, opset: i64) -> Model {
    let mut b = GraphBuilder::new();
    let x = b.input("x", DataType::Float, dims(&["1", "4", "8", "8"]));
    let w = b.f32("w", &[3, 4, 1, 1], &[0.1; 12]);
    let logits = b.op("Conv", &[x, w], vec![]);
    let (out, dtype, shape) = match head {
        "softmax over channels" => (
            b.op("Softmax", &[logits], vec![Attribute::int("axis", 1)]),
            DataType::Float,
            dims(&["1", "3", "8", "8"]),
        ),
        "softmax by default" => (
            b.op("Softmax", &[logits], vec![]),
            DataType::Float,
            dims(&["1", "3", "8", "8"]),
        ),
        "argmax" => {
            let a = b.op(
                "ArgMax",
                &[logits],
                vec![Attribute::int("axis", 1), Attribute::int("keepdims", 0)],
            );
            (
                b.op("Cast", &[a], vec![Attribute::int("to", 6)]),
                DataType::Int32,
                dims(&["1", "8", "8"]),
            )
        }
        "top2 indices" => {
            let k = b.i64("k", &[1], &[2]);
            let top = b.op_n("TopK", &[logits, k], vec![Attribute::int("axis", 1)], 2);
            (top[1], DataType::Int64, dims(&["1", "2", "8", "8"]))
        }
        _ => (logits, DataType::Float, dims(&["1", "3", "8", "8"])),
    };
    b.output(out, "seg", dtype, Some(shape));
    b.build(opset)
}

#[test]
fn a_per_pixel_softmax_is_judged_along_its_channels_not_its_last_axis() {
    // Top-1 along the width of `[1, 3, 8, 8]` (8 "classes") is noise; the
    // three classes are on axis 1.
    let heads = output_heads(&segmentation("softmax over channels", 13));
    assert!(heads.classifiers.is_empty(), "{heads:?}");
    assert_eq!(heads.class_axes, [("seg".to_string(), 1)]);
    assert_eq!(heads.class_axis("seg"), Some(1));
    // Opset 13's default axis is the last: a classifier's rows of 8.
    let heads = output_heads(&segmentation("softmax by default", 13));
    assert_eq!(heads.classifiers, ["seg"]);
    assert!(heads.class_axes.is_empty());
    // Before opset 13, axis 1 of a rank-4 input normalized the flattened
    // C*H*W: neither one axis's classes nor the last axis's.
    for head in ["softmax over channels", "softmax by default"] {
        let heads = output_heads(&segmentation(head, 11));
        assert!(
            heads.classifiers.is_empty() && heads.class_axes.is_empty(),
            "{head}: {heads:?}"
        );
    }
    // Raw logits name no class axis.
    let heads = output_heads(&segmentation("logits", 13));
    assert!(
        heads.class_axes.is_empty() && heads.labels.is_empty(),
        "{heads:?}"
    );
}

#[test]
fn an_argmax_class_map_is_a_label_output() {
    let heads = output_heads(&segmentation("argmax", 13));
    assert_eq!(heads.labels, ["seg"]);
    assert!(heads.is_label_map("seg"));
    assert!(heads.classifiers.is_empty() && heads.class_axes.is_empty());
    // A TopK's indices are labels too.
    let heads = output_heads(&segmentation("top2 indices", 13));
    assert_eq!(heads.labels, ["seg"]);
}
