//! The branch of a model that computes a score output alone (a detector's
//! class scores), which INT8 must not clip.
//!
//! A score output is a Sigmoid whose result reaches a graph output through
//! data movement only (Concat, Split, Reshape, ...). Its logits are decided
//! by their largest values: a detection is a score above a threshold, the
//! rare high logit. Calibration's ranges end at the largest value the
//! calibration samples reached, so a sample beyond it has its score capped
//! there: nudenet's YOLOv8n, calibrated on 64 scenes, kept its class-logit
//! branch in INT8 and lost 2 of 44 detections on 100 other scenes, a score
//! of 0.35 read as 0.17 where that branch's activations went 20% past the
//! calibration's maximum (with the branch in float: none lost).
//!
//! The branch is the logits and, back from them, every tensor all of whose
//! readers compute only the branch, through at most [`BRANCH_LAYERS`]
//! weighted layers: it ends where the trunk it shares with the other
//! outputs (the boxes) begins, or at that depth in a chain that never
//! branches.

use std::collections::{HashMap, HashSet};

use infopt_ir::{Dim, Model, NodeId, ValueId};

/// Why a tensor is left in float (the method named in range tables).
pub const SCORE_BRANCH: &str =
    "float (the branch of a score output: its largest values are the detections)";

/// Weighted layers back from a score output's logits that the branch may
/// span (YOLOv8's and YOLOX's class heads are three convolutions deep).
pub const BRANCH_LAYERS: usize = 3;

/// A score at or above this at the calibration's largest logit is
/// saturated: a sample past it changes the score by less than 0.01.
pub const SATURATED: f64 = 0.99;

fn logistic(x: f64) -> f64 {
    1.0 / (1.0 + (-x).exp())
}

/// Ops that move values without computing new ones.
const DATA_MOVEMENT: &[&str] = &[
    "Concat",
    "Split",
    "Slice",
    "Gather",
    "Reshape",
    "Transpose",
    "Squeeze",
    "Unsqueeze",
    "Flatten",
    "Identity",
];

fn is_op(g: &infopt_ir::Graph, n: NodeId, ops: &[&str]) -> bool {
    let node = g.node(n);
    node.domain().is_empty() && ops.contains(&node.op_type.as_str())
}

/// Whether `v` reaches a graph output through data movement only.
fn reaches_output(g: &infopt_ir::Graph, v: ValueId) -> bool {
    let mut seen = HashSet::new();
    let mut stack = vec![v];
    while let Some(v) = stack.pop() {
        if !seen.insert(v) {
            continue;
        }
        if g.is_graph_output(v) {
            return true;
        }
        for (reader, _) in g.input_uses(v) {
            if is_op(g, reader, DATA_MOVEMENT) {
                stack.extend(g.node(reader).outputs.iter().flatten().copied());
            }
        }
    }
    false
}

/// A Sigmoid whose result reaches a graph output through data movement.
fn score_sigmoid(g: &infopt_ir::Graph, n: &infopt_ir::Node) -> Option<ValueId> {
    if !n.domain().is_empty() || n.op_type != "Sigmoid" {
        return None;
    }
    let x = n.inputs.first().copied().flatten()?;
    let y = n.outputs.first().copied().flatten()?;
    reaches_output(g, y).then_some(x)
}

fn has_score_output(g: &infopt_ir::Graph) -> bool {
    g.nodes().any(|(_, n)| score_sigmoid(g, n).is_some())
}

/// A part of a tensor along one axis, `lo..hi` (None: all of it).
type Part = Option<(usize, i64, i64)>;

/// `v`'s dims, when its rank is known.
fn dims(g: &infopt_ir::Graph, v: ValueId) -> Option<Vec<Dim>> {
    g.value_type(v)?.shape
}

/// `v`'s dim `axis`, when known.
fn dim(g: &infopt_ir::Graph, v: ValueId, axis: usize) -> Option<i64> {
    match dims(g, v)?.get(axis)? {
        Dim::Known(n) => Some(*n),
        _ => None,
    }
}

/// A normalized `axis` attribute of `node` for a tensor of `rank`.
fn axis_of(node: &infopt_ir::Node, rank: usize) -> Option<usize> {
    let a = node.attr_int_or("axis", 0).ok()?;
    let a = if a < 0 { a + rank as i64 } else { a };
    usize::try_from(a).ok().filter(|a| *a < rank)
}

/// Where output `slot` of Split `node` starts along its axis, and its size.
fn split_extent(
    g: &infopt_ir::Graph,
    node: &infopt_ir::Node,
    slot: usize,
    dim: i64,
) -> Option<(i64, i64)> {
    let sizes: Vec<i64> = match node.inputs.get(1).copied().flatten() {
        Some(s) => g.constant(s)?.to_i64_vec().ok()?,
        None => match node.attr_ints("split").ok().flatten() {
            Some(s) => s.to_vec(),
            None if dim < 0 => return None,
            None => {
                let n = node.outputs.len() as i64;
                let each = dim.saturating_add(n - 1) / n.max(1);
                (0..n)
                    .map(|i| each.min(dim.saturating_sub(i.saturating_mul(each))).max(0))
                    .collect()
            }
        },
    };
    // Saturating: the sizes are the file's, whatever they hold.
    let start = sizes
        .iter()
        .take(slot)
        .fold(0i64, |a, b| a.saturating_add(*b));
    Some((start, *sizes.get(slot)?))
}

/// The inputs of data-movement `node` that `part` of its output `out`
/// (output slot `slot`) comes from, with their parts. Where shapes are
/// not known, every data input, whole.
fn sources(
    g: &infopt_ir::Graph,
    node: &infopt_ir::Node,
    slot: usize,
    out: ValueId,
    part: Part,
) -> Vec<(ValueId, Part)> {
    let data: Vec<ValueId> = match node.op_type.as_str() {
        "Concat" => node.inputs.iter().flatten().copied().collect(),
        _ => node.inputs.first().copied().flatten().into_iter().collect(),
    };
    let whole = |data: Vec<ValueId>| data.into_iter().map(|x| (x, None)).collect();
    let Some(x0) = data.first().copied() else {
        return Vec::new();
    };
    match node.op_type.as_str() {
        "Concat" => {
            let Some(out_dims) = dims(g, out) else {
                return whole(data);
            };
            let Some(a) = axis_of(node, out_dims.len()) else {
                return whole(data);
            };
            let (b, lo, hi) = match part {
                Some(p) => p,
                None => return whole(data),
            };
            if b != a {
                return data.into_iter().map(|x| (x, part)).collect();
            }
            let mut start = 0i64;
            let mut picked = Vec::new();
            for x in data {
                let Some(n) = dim(g, x, a) else {
                    return node.inputs.iter().flatten().map(|x| (*x, None)).collect();
                };
                let end = start.saturating_add(n);
                let (l, h) = (lo.max(start), hi.min(end));
                if l < h {
                    let sub = if l == start && h == end {
                        None
                    } else {
                        Some((a, l - start, h - start))
                    };
                    picked.push((x, sub));
                }
                start = end;
            }
            picked
        }
        "Split" => {
            let Some(in_dims) = dims(g, x0) else {
                return whole(data);
            };
            let Some(a) = axis_of(node, in_dims.len()) else {
                return whole(data);
            };
            let Some((start, size)) = split_extent(g, node, slot, dim(g, x0, a).unwrap_or(-1))
            else {
                return whole(data);
            };
            let (lo, hi) = match part {
                Some((b, lo, hi)) if b == a => (start.saturating_add(lo), start.saturating_add(hi)),
                _ => (start, start.saturating_add(size)),
            };
            vec![(x0, Some((a, lo, hi)))]
        }
        "Reshape" => {
            // The part's axis survives when the dims before it and it
            // are the same on both sides (YOLOv8's [1, C, H, W] -> [1, C, H*W]).
            let kept = match (part, dims(g, x0), dims(g, out)) {
                (Some((b, _, _)), Some(i), Some(o)) => {
                    b < i.len() && b < o.len() && i[..=b] == o[..=b]
                }
                _ => false,
            };
            vec![(x0, if kept { part } else { None })]
        }
        "Transpose" => {
            let perm = node.attr_ints("perm").ok().flatten();
            let moved = match (part, perm) {
                (Some((b, lo, hi)), Some(perm)) => perm
                    .get(b)
                    .and_then(|&p| usize::try_from(p).ok())
                    .map(|p| (p, lo, hi)),
                _ => None,
            };
            vec![(x0, moved)]
        }
        "Identity" => vec![(x0, part)],
        _ => whole(data),
    }
}

/// The logits of every score output, with the tensors of data movement
/// between them and the Sigmoid: back through Concat and Split only to the
/// inputs the scores' channels come from (YOLOv8 concatenates each scale's
/// boxes and classes, and splits them after). True where only a part of
/// the tensor is scores (its range is not the logits').
fn logits(g: &infopt_ir::Graph) -> HashMap<ValueId, bool> {
    let mut out: HashMap<ValueId, bool> = HashMap::new();
    let mut stack: Vec<(ValueId, Part)> = Vec::new();
    for (_, n) in g.nodes() {
        if let Some(x) = score_sigmoid(g, n) {
            stack.push((x, None));
        }
    }
    let mut seen = HashSet::new();
    while let Some((v, part)) = stack.pop() {
        if g.constant(v).is_some() || !seen.insert((v, part)) {
            continue;
        }
        *out.entry(v).or_default() |= part.is_some();
        if let Some((p, slot)) = g.value(v).producer
            && is_op(g, p, DATA_MOVEMENT)
        {
            let from = sources(g, g.node(p), slot as usize, v, part);
            stack.extend(from.into_iter().filter(|(x, _)| g.constant(*x).is_none()));
        }
    }
    out
}

/// Every tensor of a score output's branch (see the module's comment).
///
/// `max_of` gives a tensor's calibrated maximum: a logit whose maximum
/// already scores [`SATURATED`] or more starts no branch (clipping it can
/// move a score by less than 1 - SATURATED: PP-OCR det's text map, whose
/// pixels saturate and whose decision is at 0.3).
pub fn score_branch_tensors(
    model: &Model,
    max_of: &dyn Fn(&str) -> Option<f32>,
) -> HashSet<String> {
    if !has_score_output(&model.graph) {
        return HashSet::new();
    }
    // Following parts of Concat and Split needs the shapes.
    let mut inferred = model.clone();
    infopt_ir::infer::infer_shapes(&mut inferred);
    let g = &inferred.graph;
    let found = logits(g);
    let computed = |v: &ValueId| {
        g.value(*v)
            .producer
            .is_some_and(|(p, _)| !is_op(g, p, DATA_MOVEMENT))
    };
    // A tensor only part of which is logits (one Conv computing boxes and
    // classes) has a range that says nothing of theirs.
    let capped = |v: &ValueId, partly: bool| {
        partly || max_of(&g.value(*v).name).is_none_or(|m| logistic(f64::from(m)) < SATURATED)
    };
    if !found
        .iter()
        .any(|(v, partly)| computed(v) && capped(v, *partly))
    {
        return HashSet::new();
    }
    // Weighted layers between a branch tensor and the logits, the logits'
    // own producer counted.
    let mut depth: HashMap<ValueId, usize> = found
        .into_iter()
        .filter(|(v, partly)| !computed(v) || capped(v, *partly))
        .map(|(v, _)| (v, 0))
        .collect();
    let order = g.topological_order().unwrap_or_default();
    // Back to front: a node's readers are decided before it.
    for &n in order.iter().rev() {
        // Data movement was followed part by part above: a Concat of
        // boxes and scores leads to the scores only.
        if is_op(g, n, DATA_MOVEMENT) {
            continue;
        }
        let node = g.node(n);
        let outs: Vec<ValueId> = node.outputs.iter().flatten().copied().collect();
        if outs.is_empty() || !outs.iter().all(|o| depth.contains_key(o)) {
            continue;
        }
        let weighted = usize::from(is_op(g, n, crate::quantize::placement::WEIGHTED_OPS));
        let d = outs.iter().map(|o| depth[o]).max().unwrap_or(0) + weighted;
        // The input of the BRANCH_LAYERS-th layer back is the trunk's.
        if d >= BRANCH_LAYERS {
            continue;
        }
        for x in node.inputs.iter().flatten().copied() {
            if g.constant(x).is_some() || g.is_graph_input(x) || depth.contains_key(&x) {
                continue;
            }
            // Every reader must compute only the branch.
            let only_branch = g.reader_count(x) == g.input_uses(x).count()
                && g.input_uses(x).all(|(r, _)| {
                    g.node(r)
                        .outputs
                        .iter()
                        .flatten()
                        .all(|o| depth.contains_key(o))
                });
            if only_branch {
                depth.insert(x, d);
            }
        }
    }
    depth.keys().map(|v| g.value(*v).name.clone()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use infopt_ir::builder::{GraphBuilder, dims};
    use infopt_ir::{Attribute, DataType};

    /// A 1x1 convolution with SiLU, `cin` -> `cout` channels.
    fn conv_silu(
        b: &mut GraphBuilder,
        x: ValueId,
        cin: usize,
        cout: usize,
        silu: bool,
    ) -> (ValueId, ValueId) {
        static WEIGHTS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let k = WEIGHTS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let w = b.f32(
            &format!("w{k}"),
            &[cout as i64, cin as i64, 1, 1],
            &vec![0.1; cin * cout],
        );
        let c = b.op("Conv", &[x, w], vec![]);
        if !silu {
            return (c, c);
        }
        let s = b.op("Sigmoid", &[c], vec![]);
        (c, b.op("Mul", &[c, s], vec![]))
    }

    /// `head`'s 7 channels split into 4 box values and 3 logits, the
    /// logits through a Sigmoid, both concatenated into the output `out`:
    /// the boxes, the logits, the scores and the output.
    fn boxes_and_scores_out(b: &mut GraphBuilder, head: ValueId) -> [ValueId; 4] {
        let sizes = b.i64("sizes", &[2], &[4, 3]);
        let parts = b.op_n("Split", &[head, sizes], vec![Attribute::int("axis", 1)], 2);
        let scores = b.op("Sigmoid", &[parts[1]], vec![]);
        let axis = vec![Attribute::int("axis", 1)];
        let out = b.op("Concat", &[parts[0], scores], axis);
        b.output(out, "out", DataType::Float, None);
        [parts[0], parts[1], scores, out]
    }

    #[test]
    fn a_detectors_class_branch_is_found_and_its_box_branch_and_trunk_are_not() {
        // A trunk, then per image: boxes (4 channels) and classes (3), each
        // three 1x1 convs deep, concatenated, reshaped, split apart again,
        // the classes through a Sigmoid, and concatenated into the output:
        // YOLOv8's head in miniature.
        let mut b = GraphBuilder::new();
        let x = b.input("x", DataType::Float, dims(&["batch", "8", "4", "4"]));
        let (_, trunk) = conv_silu(&mut b, x, 8, 8, true);
        let (_, b1) = conv_silu(&mut b, trunk, 8, 8, true);
        let (_, b2) = conv_silu(&mut b, b1, 8, 8, true);
        let (boxes, _) = conv_silu(&mut b, b2, 8, 4, false);
        let (c1c, c1) = conv_silu(&mut b, trunk, 8, 8, true);
        let (c2c, c2) = conv_silu(&mut b, c1, 8, 8, true);
        let (logits, _) = conv_silu(&mut b, c2, 8, 3, false);
        let both = b.op("Concat", &[boxes, logits], vec![Attribute::int("axis", 1)]);
        let shape = b.i64("shape", &[3], &[0, 7, -1]);
        let flat = b.op("Reshape", &[both, shape], vec![]);
        let [parts0, parts1, scores, out] = boxes_and_scores_out(&mut b, flat);
        let m = b.build(13);
        let name = |v: ValueId| m.graph.value(v).name.clone();
        let branch = score_branch_tensors(&m, &|_| None);
        for v in [logits, c2, c2c, c1, c1c, both, flat, parts1] {
            assert!(branch.contains(&name(v)), "{} not in {branch:?}", name(v));
        }
        for v in [trunk, b1, b2, boxes, parts0, scores, out, x] {
            assert!(!branch.contains(&name(v)), "{} in the branch", name(v));
        }
    }

    #[test]
    fn a_conv_computing_boxes_and_logits_starts_a_branch_whatever_its_range() {
        // One Conv's 7 channels: 4 box values (hundreds of pixels) and 3
        // logits, split apart: its range (the boxes') says nothing of the
        // logits', so a large maximum does not count as saturated.
        let mut b = GraphBuilder::new();
        let x = b.input("x", DataType::Float, dims(&["1", "8", "4", "4"]));
        let (_, stem) = conv_silu(&mut b, x, 8, 8, true);
        let (head, _) = conv_silu(&mut b, stem, 8, 7, false);
        let [boxes, ..] = boxes_and_scores_out(&mut b, head);
        let m = b.build(13);
        let name = |v: ValueId| m.graph.value(v).name.clone();
        let boxes_range = |_: &str| Some(300.0);
        let branch = score_branch_tensors(&m, &boxes_range);
        assert!(
            branch.contains(&name(head)) && branch.contains(&name(stem)),
            "{branch:?}"
        );
        // The boxes' part is not the branch.
        assert!(!branch.contains(&name(boxes)));
    }

    #[test]
    fn a_chain_ends_three_layers_back_a_saturated_logit_starts_none_and_a_gate_is_no_score_output()
    {
        // A chain of four layers ending in a Sigmoid output: the branch is
        // the last three layers' outputs; the input of the third layer back
        // stays quantized. A SiLU gate inside is no score output.
        let mut b = GraphBuilder::new();
        let x = b.input("x", DataType::Float, dims(&["1", "4", "2", "2"]));
        let (_, l1) = conv_silu(&mut b, x, 4, 4, true);
        let (_, l2) = conv_silu(&mut b, l1, 4, 4, true);
        let (_, l3) = conv_silu(&mut b, l2, 4, 4, true);
        let (logit, _) = conv_silu(&mut b, l3, 4, 1, false);
        let p = b.op("Sigmoid", &[logit], vec![]);
        b.output(p, "p", DataType::Float, None);
        let m = b.build(13);
        let name = |v: ValueId| m.graph.value(v).name.clone();
        let branch = score_branch_tensors(&m, &|_| None);
        for v in [logit, l3, l2] {
            assert!(branch.contains(&name(v)), "{} not in {branch:?}", name(v));
        }
        assert!(!branch.contains(&name(l1)), "{branch:?}");
        // A logit whose calibrated maximum already scores 0.99 or more
        // (5.0: 0.9933) starts no branch; one just under it (4.5) does.
        let logit_name = name(logit);
        let saturated = |t: &str| (t == logit_name).then_some(5.0);
        assert!(score_branch_tensors(&m, &saturated).is_empty());
        let under = |t: &str| (t == logit_name).then_some(4.5);
        assert!(score_branch_tensors(&m, &under).contains(&name(l3)));
        // Without the output Sigmoid: nothing.
        let mut b = GraphBuilder::new();
        let x = b.input("x", DataType::Float, dims(&["1", "4", "2", "2"]));
        let (_, l1) = conv_silu(&mut b, x, 4, 4, true);
        b.output(l1, "y", DataType::Float, None);
        assert!(score_branch_tensors(&b.build(13), &|_| None).is_empty());
    }
}
