//! Which outputs are judged beyond their cosine, read from the graph:
//! class scores by top-1 agreement ([`classifier_outputs`]), regressed
//! values (coordinates, offsets) by each value's correlation across
//! samples ([`regression_outputs`]).

use infopt_ir::{Dim, Graph, Model, Node, ValueId};

/// How the outputs of a model are judged beyond their cosine.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Heads {
    /// Class scores on the last axis: judged by top-1 agreement.
    pub classifiers: Vec<String>,
    /// Regressed values (see [`regression_outputs`]): judged by each
    /// value's correlation across samples, never as classes, an
    /// embedding's neighbours or a map of scores.
    pub regressions: Vec<String>,
    /// Class scores along another axis than the last, by output name: a
    /// segmentation's per-pixel softmax over the channels of `[N, C, H,
    /// W]` (see [`class_axis_outputs`]). Judged by top-1 agreement along
    /// that axis, as a classifier's last axis is.
    pub class_axes: Vec<(String, usize)>,
    /// Class maps: the outputs of an ArgMax or ArgMin, or a TopK's indices
    /// (see [`label_outputs`]), judged by the fraction of elements equal to
    /// the original's against the top-1 target.
    pub labels: Vec<String>,
}

impl Heads {
    /// Classifier outputs only (a caller that names them itself).
    pub fn classifiers(names: Vec<String>) -> Heads {
        Heads {
            classifiers: names,
            ..Heads::default()
        }
    }

    /// The axis of output `name`'s classes when it is not the last.
    pub fn class_axis(&self, name: &str) -> Option<usize> {
        self.class_axes
            .iter()
            .find(|(n, _)| n == name)
            .map(|&(_, axis)| axis)
    }

    pub fn is_label_map(&self, name: &str) -> bool {
        self.labels.iter().any(|c| c == name)
    }

    pub fn is_classifier(&self, name: &str) -> bool {
        self.classifiers.iter().any(|c| c == name)
    }

    pub fn is_regression(&self, name: &str) -> bool {
        self.regressions.iter().any(|c| c == name)
    }
}

/// The heads of `model`: a regression output is never a classifier's.
pub fn output_heads(model: &Model) -> Heads {
    let regressions = regression_outputs(model);
    let classifiers = classifier_outputs(model)
        .into_iter()
        .filter(|c| !regressions.contains(c))
        .collect();
    let class_axes = class_axis_outputs(model)
        .into_iter()
        .filter(|(c, _)| !regressions.contains(c))
        .collect();
    Heads {
        classifiers,
        regressions,
        class_axes,
        labels: label_outputs(model),
    }
}

/// The producer of graph value `v` through `through` ops (their first
/// input), if any, and which of its outputs leads to `v`.
fn producer_through<'g>(
    g: &'g infopt_ir::Graph,
    mut v: infopt_ir::ValueId,
    through: &[&str],
) -> Option<(&'g infopt_ir::Node, u32)> {
    loop {
        let (p, slot) = g.value(v).producer?;
        let n = g.node(p);
        if n.domain().is_empty() && through.contains(&n.op_type.as_str()) {
            v = n.inputs.first().copied().flatten()?;
            continue;
        }
        return Some((n, slot));
    }
}

/// The axis a Softmax or LogSoftmax normalizes over, counted from the
/// front of its output of `rank`, when it is a single axis: opset 13 and
/// later (`axis`, default -1); before 13 the op flattened the axes from
/// `axis` (default 1) on, which is one axis only when it is the last.
fn softmax_axis(model: &Model, n: &infopt_ir::Node, rank: usize) -> Option<usize> {
    let opset = model.opset("").unwrap_or(13);
    let default = if opset >= 13 { -1 } else { 1 };
    let axis = n.attr_int_or("axis", default).ok()?;
    let axis = if axis < 0 { axis + rank as i64 } else { axis };
    let axis = usize::try_from(axis).ok().filter(|&a| a < rank)?;
    (opset >= 13 || axis + 1 == rank).then_some(axis)
}

/// Outputs of a Softmax or LogSoftmax over one axis that is not the last
/// (through Identity and Cast only, which keep the axes where they are),
/// with that axis: a segmentation's `[N, C, H, W]` probabilities over the
/// `C` channels. A classifier's last axis is [`classifier_outputs`]'.
pub fn class_axis_outputs(model: &Model) -> Vec<(String, usize)> {
    let g = &model.graph;
    g.outputs
        .iter()
        .filter_map(|io| {
            let (n, _) = producer_through(g, io.value, &["Identity", "Cast"])?;
            if !matches!(n.op_type.as_str(), "Softmax" | "LogSoftmax") || !n.domain().is_empty() {
                return None;
            }
            let dims = g.value_type(io.value).and_then(|t| t.shape)?;
            let axis = softmax_axis(model, n, dims.len())?;
            let classes = enough_classes(dims.get(axis).cloned());
            (axis + 1 < dims.len() && classes).then(|| (g.value(io.value).name.clone(), axis))
        })
        .collect()
}

/// Integer outputs of an ArgMax or ArgMin, or a TopK's indices, through
/// reshapes and casts: a segmentation's class map `[N, H, W]`, a
/// classifier's label or its top 5. The fraction of elements equal to the
/// original's is what a class map is worth to its user (pixel accuracy);
/// its cosine, of class indices, is not.
pub fn label_outputs(model: &Model) -> Vec<String> {
    let g = &model.graph;
    g.outputs
        .iter()
        .filter(|io| {
            producer_through(g, io.value, PASS_THROUGH).is_some_and(|(n, slot)| {
                n.domain().is_empty()
                    && match n.op_type.as_str() {
                        "ArgMax" | "ArgMin" => true,
                        "TopK" => slot == 1,
                        _ => false,
                    }
            })
        })
        .map(|io| g.value(io.value).name.clone())
        .collect()
}

/// Ops through which a classifier's scores reach the output unchanged in
/// order along the last axis.
const PASS_THROUGH: &[&str] = &[
    "Identity",
    "Reshape",
    "Flatten",
    "Squeeze",
    "Unsqueeze",
    "Cast",
];

/// The domain of classical ML ops (scikit-learn models converted by
/// skl2onnx, LightGBM and XGBoost by onnxmltools).
const ML_DOMAIN: &str = "ai.onnx.ml";

/// Outputs whose last axis holds class scores, judged by top-1 agreement:
/// the output of a classifier head (Softmax, LogSoftmax, a softmax written
/// out as `Exp / ...`, or a Gemm / MatMul with a constant weight, with or
/// without a bias Add), through reshapes, with a last axis of at least 2
/// classes when the shape says.
pub fn classifier_outputs(model: &Model) -> Vec<String> {
    let g = &model.graph;
    g.outputs
        .iter()
        .filter(|io| {
            let mut v = io.value;
            // The tensor whose last axis counts the classes: a ZipMap's
            // sequence of maps has no shape, its input has.
            let mut counted = io.value;
            let mut zipped: Option<usize> = None;
            loop {
                let Some((p, _)) = g.value(v).producer else {
                    return false;
                };
                let n = g.node(p);
                if n.domain() == ML_DOMAIN {
                    match n.op_type.as_str() {
                        // Probabilities normalized, or zipped into maps
                        // (read as a [rows, classes] tensor): the same order.
                        "Normalizer" | "ZipMap" => match n.inputs.first().copied().flatten() {
                            Some(x) => {
                                if n.op_type == "ZipMap" {
                                    counted = x;
                                    zipped = zip_map_classes(n);
                                }
                                v = x;
                                continue;
                            }
                            None => return false,
                        },
                        // A classical classifier's second output holds its
                        // class scores (the first its labels).
                        op => {
                            return op.ends_with("Classifier")
                                && n.outputs.get(1).copied().flatten() == Some(v);
                        }
                    }
                }
                if !n.domain().is_empty() {
                    return false;
                }
                let op = n.op_type.as_str();
                if PASS_THROUGH.contains(&op) {
                    match n.inputs.first().copied().flatten() {
                        Some(x) => v = x,
                        None => return false,
                    }
                    continue;
                }
                let input_op = |i: usize| {
                    n.inputs
                        .get(i)
                        .copied()
                        .flatten()
                        .and_then(|x| g.value(x).producer)
                        .map(|(p, _)| g.node(p))
                };
                let dense = |m: &infopt_ir::Node| {
                    matches!(m.op_type.as_str(), "Gemm" | "MatMul")
                        && m.inputs
                            .get(1)
                            .copied()
                            .flatten()
                            .is_some_and(|w| g.constant(w).is_some())
                };
                let head = match op {
                    // Over the last axis only: a per-pixel softmax over
                    // channels is `class_axis_outputs`'.
                    "Softmax" | "LogSoftmax" => n
                        .outputs
                        .first()
                        .copied()
                        .flatten()
                        .and_then(|o| g.value_type(o).and_then(|t| t.shape))
                        .is_none_or(|d| softmax_axis(model, n, d.len()) == Some(d.len() - 1)),
                    "Gemm" | "MatMul" => dense(n),
                    // A softmax written out: exp(x - max) / sum.
                    "Div" => input_op(0).is_some_and(|p| p.op_type == "Exp"),
                    // A dense head with its bias as an Add.
                    "Add" => input_op(0).is_some_and(dense) || input_op(1).is_some_and(dense),
                    _ => false,
                };
                let classes = g
                    .value_type(counted)
                    .and_then(|t| t.shape)
                    .and_then(|d| d.last().cloned());
                let enough = match (zipped, classes) {
                    (Some(c), _) => c >= 2,
                    (None, classes) => enough_classes(classes),
                };
                return head && enough;
            }
        })
        .map(|io| g.value(io.value).name.clone())
        .collect()
}

/// The classes a ZipMap names (its labels, integers or strings).
fn zip_map_classes(n: &infopt_ir::Node) -> Option<usize> {
    let ints = n.attr("classlabels_int64s").map(|a| a.proto.ints.len());
    let strings = n.attr("classlabels_strings").map(|a| a.proto.strings.len());
    ints.or(strings)
}

/// Whether a last axis of `classes` (when the shape says) holds classes.
fn enough_classes(classes: Option<infopt_ir::Dim>) -> bool {
    match classes {
        Some(infopt_ir::Dim::Known(c)) => c >= 2,
        Some(_) => true,
        None => false,
    }
}

/// Most values per sample of a regression output judged across samples
/// (MediaPipe's face mesh: 1404); beyond it the cosine alone judges.
pub const MOST_REGRESSED: usize = 4096;

/// Fewest values per sample of an unnamed regression head: a box's 4, five
/// landmarks' 10. Two or three raw values beside a probability are as
/// likely a second classifier's logits.
const FEWEST_REGRESSED: i64 = 3;

/// Name tokens of regressed values (boxes, landmarks, keypoints, offsets).
const REGRESSION_WORDS: &[&str] = &[
    "box",
    "boxes",
    "bbox",
    "bboxes",
    "landmark",
    "landmarks",
    "lmk",
    "lmks",
    "ldmk",
    "ldmks",
    "keypoint",
    "keypoints",
    "kpt",
    "kpts",
    "joints",
    "coord",
    "coords",
    "coordinates",
    "offset",
    "offsets",
    "regression",
    "regressors",
    "reg",
    "delta",
    "deltas",
    "mesh",
    "contours",
    "xyz",
    "pts",
];

/// Outputs holding regressed values: one vector per sample (`[rows, k]`,
/// or with axes of 1 around `k`) that no Softmax, LogSoftmax or Sigmoid
/// makes, and either
/// - named as such (`bbox_pred`, `landmarks`, `output_mesh_identity`), or
/// - of at least [`FEWEST_REGRESSED`] values from a linear head (Gemm,
///   MatMul, Conv, with a bias Add) in a model whose other outputs include
///   a probability not computed from it: a multi-task head, where the
///   classes are the probability's and the dense outputs beside it are
///   boxes and landmarks (MTCNN's O-Net: a face probability, box offsets
///   `[N, 4]` and landmarks `[N, 10]`; MediaPipe's hand and pose models:
///   a presence Sigmoid beside 63 or 195 coordinates).
///
/// Judged as a classifier, O-Net's landmark rows "agreed" on 0.81 of their
/// largest coordinate with every layer in INT8; judged as an embedding,
/// MediaPipe pose's landmarks had 0.03 of their nearest neighbours: neither
/// says how far a point moved.
pub fn regression_outputs(model: &Model) -> Vec<String> {
    let g = &model.graph;
    let probabilities: Vec<ValueId> = g
        .outputs
        .iter()
        .filter_map(|io| {
            let (n, _) = head(g, io.value)?;
            probability(g, n).then_some(io.value)
        })
        .collect();
    g.outputs
        .iter()
        .filter(|io| {
            let Some(k) = vector_width(g, io.value) else {
                return false;
            };
            let Some((n, at)) = head(g, io.value) else {
                return false;
            };
            if probability(g, n) {
                return false;
            }
            if k >= 2 && named_as_regression(&g.value(io.value).name) {
                return true;
            }
            k >= FEWEST_REGRESSED
                && linear(g, n)
                && probabilities
                    .iter()
                    .any(|&p| p != io.value && !computed_from(g, p, at))
        })
        .map(|io| g.value(io.value).name.clone())
        .collect()
}

/// The values of one sample's vector when `v` is `[rows, k]` or has axes of
/// 1 around `k` (k known); None otherwise.
fn vector_width(g: &Graph, v: ValueId) -> Option<i64> {
    let shape = g.value_type(v)?.shape?;
    let (_, rest) = shape.split_first()?;
    let mut width = None;
    for d in rest {
        match d {
            Dim::Known(1) => {}
            Dim::Known(k) if width.is_none() => width = Some(*k),
            _ => return None,
        }
    }
    width
}

/// `v` and the values it is made from through reshapes and transposes, the
/// last one made by another op (or by none: an input or a weight).
fn through_reshapes(g: &Graph, mut v: ValueId) -> Vec<ValueId> {
    let mut chain = vec![v];
    while let Some((p, _)) = g.value(v).producer {
        let n = g.node(p);
        let through = n.domain().is_empty()
            && (PASS_THROUGH.contains(&n.op_type.as_str()) || n.op_type == "Transpose");
        match n.inputs.first().copied().flatten() {
            Some(x) if through => {
                v = x;
                chain.push(x);
            }
            _ => break,
        }
    }
    chain
}

/// The node that makes `v` through reshapes and transposes, and the value
/// it makes.
fn head(g: &Graph, v: ValueId) -> Option<(&Node, ValueId)> {
    let made = *through_reshapes(g, v).last()?;
    let (p, _) = g.value(made).producer?;
    Some((g.node(p), made))
}

/// A probability: Softmax, LogSoftmax, Sigmoid or a softmax written out.
fn probability(g: &Graph, n: &Node) -> bool {
    if !n.domain().is_empty() {
        return false;
    }
    match n.op_type.as_str() {
        "Softmax" | "LogSoftmax" | "Sigmoid" => true,
        "Div" => input_node(g, n, 0).is_some_and(|p| p.op_type == "Exp"),
        _ => false,
    }
}

/// A linear layer: Gemm, MatMul or Conv with a constant weight, or a bias
/// Add after one.
fn linear(g: &Graph, n: &Node) -> bool {
    let weighted = |m: &Node| {
        m.domain().is_empty()
            && matches!(m.op_type.as_str(), "Gemm" | "MatMul" | "Conv")
            && m.inputs
                .get(1)
                .copied()
                .flatten()
                .is_some_and(|w| g.constant(w).is_some())
    };
    weighted(n)
        || (n.op_type == "Add"
            && (input_node(g, n, 0).is_some_and(weighted)
                || input_node(g, n, 1).is_some_and(weighted)))
}

fn input_node<'g>(g: &'g Graph, n: &Node, i: usize) -> Option<&'g Node> {
    let v = n.inputs.get(i).copied().flatten()?;
    let (p, _) = g.value(v).producer?;
    Some(g.node(p))
}

/// Whether the probability output `p` is computed from value `v` (its
/// normalizer reads `v` through reshapes and transposes): then `v` holds
/// that probability's logits, a classifier's.
fn computed_from(g: &Graph, p: ValueId, v: ValueId) -> bool {
    let Some((n, _)) = head(g, p) else {
        return false;
    };
    n.inputs
        .first()
        .copied()
        .flatten()
        .is_some_and(|x| through_reshapes(g, x).contains(&v))
}

/// Whether an output's name says it holds regressed values: one of
/// [`REGRESSION_WORDS`] among its words (split at anything not a letter).
fn named_as_regression(name: &str) -> bool {
    name.to_ascii_lowercase()
        .split(|c: char| !c.is_ascii_alphabetic())
        .any(|w| REGRESSION_WORDS.contains(&w))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_of_regressed_values_are_words_not_substrings() {
        for n in [
            "bbox_pred",
            "landmarks",
            "output_mesh_identity",
            "Boxes:0",
            "kpts_3",
        ] {
            assert!(named_as_regression(n), "{n}");
        }
        for n in ["logits", "block_out", "probabilities", "registry", "local"] {
            assert!(!named_as_regression(n), "{n}");
        }
    }
}
