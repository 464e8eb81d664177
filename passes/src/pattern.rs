//! Matching helpers shared by the transformer-block fusions
//! (`fuse-layer-norm`, `fuse-rms-norm`, `fuse-gelu`): scalar constants read
//! to a tolerance, producers of a given op, the forms of `1/sqrt(v)`, the
//! axes of a ReduceMean in either opset form, and shapes from inference.

use infopt_ir::infer::{GraphFacts, InferReport, Opsets, Scope, infer_graph};
use infopt_ir::{DataType, Dim, Graph, Model, Node, NodeId, Tensor, ValueId};

use crate::pass::{PassCx, PassError};
use crate::rule::{Outcome, apply_rule_to_graph_with, for_each_graph_mut};
use crate::util::{const_i64s, input};

/// The single number a constant holds (any shape with one element).
pub fn scalar(g: &Graph, v: ValueId) -> Option<f64> {
    let t = g.constant(v)?;
    let vals = t.to_f64_vec().ok()?;
    (vals.len() == 1).then(|| vals[0])
}

/// True when `a` is within `rel` of `b`, relatively.
pub fn close(a: f64, b: f64, rel: f64) -> bool {
    (a - b).abs() <= rel * b.abs()
}

/// A scalar constant close to `want` (relative tolerance 1e-4: exporters
/// write these constants rounded to float32 or to a few digits).
pub fn scalar_near(g: &Graph, v: ValueId, want: f64) -> bool {
    scalar(g, v).is_some_and(|c| close(c, want, 1e-4))
}

/// The default-domain producer of `v` when it is `op`.
pub fn producer<'g>(g: &'g Graph, v: ValueId, op: &str) -> Option<(NodeId, &'g Node)> {
    let (p, _) = g.value(v).producer?;
    let node = g.node(p);
    (node.domain().is_empty() && node.is(op)).then_some((p, node))
}

/// True when `v` is read by one node input only (not a graph output, not
/// captured by a subgraph).
pub fn private(g: &Graph, v: ValueId) -> bool {
    !g.is_graph_output(v) && g.reader_count(v) == 1
}

/// True when every reader of `v` is one of `nodes` (and `v` is not a graph output).
pub fn read_only_by(g: &Graph, v: ValueId, nodes: &[NodeId]) -> bool {
    !g.is_graph_output(v)
        && g.reader_count(v) == g.input_uses(v).count()
        && g.input_uses(v).all(|(n, _)| nodes.contains(&n))
}

/// The two inputs of a binary node.
pub fn operands(g: &Graph, id: NodeId) -> Option<(ValueId, ValueId)> {
    Some((input(g, id, 0)?, input(g, id, 1)?))
}

/// For a commutative binary node, the operand that is a scalar constant
/// (its value) and the other operand.
pub fn split_scalar(g: &Graph, id: NodeId) -> Option<(f64, ValueId)> {
    let (a, b) = operands(g, id)?;
    if let Some(c) = scalar(g, b) {
        Some((c, a))
    } else {
        scalar(g, a).map(|c| (c, b))
    }
}

/// `v` is `1/sqrt(w)`: `Reciprocal(Sqrt(w))`, `Div(1, Sqrt(w))` or
/// `Pow(w, -0.5)`. Returns `w` and the nodes of the form.
pub fn inverse_sqrt(g: &Graph, v: ValueId) -> Option<(ValueId, Vec<NodeId>)> {
    if let Some((pw, _)) = producer(g, v, "Pow") {
        let (w, e) = operands(g, pw)?;
        return (scalar(g, e)? == -0.5).then(|| (w, vec![pw]));
    }
    let (inv, s) = if let Some((r, _)) = producer(g, v, "Reciprocal") {
        (r, input(g, r, 0)?)
    } else {
        let (d, _) = producer(g, v, "Div")?;
        let (one, s) = operands(g, d)?;
        (scalar(g, one)? == 1.0).then_some(())?;
        (d, s)
    };
    let (sq, _) = producer(g, s, "Sqrt")?;
    private(g, s).then_some(())?;
    Some((input(g, sq, 0)?, vec![inv, sq]))
}

/// `n = d / sqrt(w)` in any of its forms: `Div(d, Sqrt(w))`, or `Mul` of
/// `d` and `1/sqrt(w)` (see [`inverse_sqrt`]) in either order. Returns
/// `(d, w, nodes of the form other than the anchor)`.
pub fn divided_by_sqrt(g: &Graph, id: NodeId) -> Option<(ValueId, ValueId, Vec<NodeId>)> {
    let node = g.node(id);
    if !node.domain().is_empty() {
        return None;
    }
    let (a, b) = operands(g, id)?;
    match node.op_type.as_str() {
        "Div" => {
            let (sq, _) = producer(g, b, "Sqrt")?;
            private(g, b).then_some(())?;
            Some((a, input(g, sq, 0)?, vec![sq]))
        }
        "Mul" => [(a, b), (b, a)].into_iter().find_map(|(d, r)| {
            let (w, nodes) = inverse_sqrt(g, r)?;
            private(g, r).then_some(())?;
            Some((d, w, nodes))
        }),
        _ => None,
    }
}

/// `w = v + eps` with `eps` a scalar constant, either order: `(v, eps)`.
pub fn plus_epsilon(g: &Graph, w: ValueId) -> Option<(NodeId, ValueId, f64)> {
    let (add, _) = producer(g, w, "Add")?;
    let (eps, v) = split_scalar(g, add)?;
    // A constant of rank above the data's could broadcast the result up.
    let c = operands(g, add).and_then(|(a, b)| g.constant(a).or(g.constant(b)))?;
    (c.dims().len() <= 1).then_some(())?;
    (eps.is_finite() && eps >= 0.0).then_some((add, v, eps))
}

/// `v` is `x²`: `Pow(x, 2)` or `Mul(x, x)`. Returns `(x, node)`.
pub fn squared(g: &Graph, v: ValueId) -> Option<(ValueId, NodeId)> {
    if let Some((p, _)) = producer(g, v, "Pow") {
        let (x, e) = operands(g, p)?;
        return (scalar(g, e)? == 2.0).then_some((x, p));
    }
    let (m, _) = producer(g, v, "Mul")?;
    let (a, b) = operands(g, m)?;
    (a == b).then_some((a, m))
}

/// The axes a ReduceMean reduces, as written.
pub enum MeanAxes {
    /// No axes given: every axis.
    All,
    Listed(Vec<i64>),
}

impl MeanAxes {
    pub fn as_slice(&self) -> Option<&[i64]> {
        match self {
            MeanAxes::All => None,
            MeanAxes::Listed(a) => Some(a),
        }
    }
}

/// The axes of a keep-dims ReduceMean (attribute before opset 18, constant
/// input from 18); `None` when the node is not a plain keep-dims mean over
/// constant axes (keepdims=0, non-constant axes, noop_with_empty_axes).
pub fn reduce_mean_axes(g: &Graph, id: NodeId, opset: i64) -> Option<MeanAxes> {
    let node = g.node(id);
    if node.attr_int_or("keepdims", 1).ok()? != 1 {
        return None;
    }
    let axes = if opset >= 18 {
        match input(g, id, 1) {
            Some(v) => Some(const_i64s(g, Some(v))?),
            None => None,
        }
    } else {
        node.attr_ints("axes").ok()?.map(|a| a.to_vec())
    };
    match axes {
        Some(a) if !a.is_empty() => Some(MeanAxes::Listed(a)),
        _ => (node.attr_int_or("noop_with_empty_axes", 0).ok()? == 0).then_some(MeanAxes::All),
    }
}

/// Number of trailing axes `axes` covers when they are exactly the last `k`
/// axes of a rank-`rank` tensor (negative axes need no rank); `None` otherwise.
pub fn trailing_count(axes: Option<&[i64]>, rank: Option<usize>) -> Option<usize> {
    let Some(axes) = axes else {
        return rank.filter(|&r| r > 0);
    };
    let mut norm: Vec<i64> = Vec::with_capacity(axes.len());
    for &a in axes {
        // Normalize to negative form: -1 is the last axis.
        let n = if a < 0 {
            a
        } else {
            let r = rank? as i64;
            if a >= r {
                return None;
            }
            a - r
        };
        if let Some(r) = rank
            && n < -(r as i64)
        {
            return None;
        }
        norm.push(n);
    }
    norm.sort_unstable();
    norm.dedup();
    if norm.len() != axes.len() {
        return None;
    }
    let k = norm.len() as i64;
    (norm.iter().copied().eq(-k..0)).then_some(k as usize)
}

/// Inferred facts for the graph a rule runs on; falls back to the graph's
/// own annotations for values created after inference ran. The facts are
/// inferred at the first question, or before the sweep's first rewrite if no
/// rule asked before it (see [`apply_with_shapes`]): a sweep in which no rule
/// gets as far as asking (no anchor op in the graph) infers nothing.
pub struct Shapes {
    opsets: Opsets,
    facts: std::cell::OnceCell<GraphFacts>,
}

impl Shapes {
    fn new(opsets: Opsets) -> Shapes {
        Shapes {
            opsets,
            facts: std::cell::OnceCell::new(),
        }
    }

    /// The facts of `g` as it was when the sweep started.
    fn facts(&self, g: &Graph) -> &GraphFacts {
        self.facts.get_or_init(|| {
            // Inference records what it finds in value_info: run it on a
            // copy (same value ids) so a pass that rewrites nothing changes
            // nothing.
            let mut probe = g.clone();
            let mut report = InferReport::default();
            infer_graph(&mut probe, self.opsets, &Scope::default(), &mut report)
        })
    }

    pub fn dims(&self, g: &Graph, v: ValueId) -> Option<Vec<Dim>> {
        if let Some(s) = self.facts(g).get(v).and_then(|f| f.shape()) {
            return Some(s.to_vec());
        }
        g.value_type(v)?.shape
    }

    /// The type of `v`, for annotating the value that replaces it (a value
    /// created by an earlier rewrite of the sweep has no fact of its own).
    pub fn ty(&self, g: &Graph, v: ValueId) -> Option<infopt_ir::TensorType> {
        let dtype = self.dtype(g, v)?;
        Some(infopt_ir::TensorType {
            dtype,
            shape: self.dims(g, v),
        })
    }

    pub fn rank(&self, g: &Graph, v: ValueId) -> Option<usize> {
        self.dims(g, v).map(|d| d.len())
    }

    pub fn dtype(&self, g: &Graph, v: ValueId) -> Option<DataType> {
        if let Some(f) = self.facts(g).get(v)
            && f.ty.dtype != DataType::Undefined
        {
            return Some(f.ty.dtype);
        }
        g.value_type(v)
            .map(|t| t.dtype)
            .filter(|d| *d != DataType::Undefined)
    }
}

/// Runs `rule` over the main graph and every subgraph, with the shapes each
/// graph had before the sweep (fusions keep the shapes of the values they
/// keep, so the facts stay true for those). The facts are inferred lazily,
/// but always from the graph as it was before the sweep's first rewrite.
pub fn apply_with_shapes(
    model: &mut Model,
    cx: &mut PassCx,
    rule: &dyn Fn(&Graph, NodeId, &mut PassCx, &Shapes) -> Outcome,
) -> Result<usize, PassError> {
    let opsets = Opsets {
        onnx: cx.opset,
        microsoft: model.opset("com.microsoft"),
    };
    let mut total = 0;
    for_each_graph_mut(&mut model.graph, &mut |g| {
        let shapes = Shapes::new(opsets);
        total += apply_rule_to_graph_with(g, cx, &|g, id, cx| rule(g, id, cx, &shapes), &|g| {
            shapes.facts(g);
        })?;
        Ok(())
    })?;
    Ok(total)
}

/// A per-element weight (`gamma`/`beta`) of shape `shape` broadcast to the
/// normalized dims `norm` of a rank-`rank` input, such that multiplying or
/// adding it leaves the input's shape unchanged: returns its values laid out
/// over `norm`, or `None` when the weight also varies over an outer axis or
/// would broadcast the input up.
pub fn over_normalized_dims(t: &Tensor, rank: usize, norm: &[i64]) -> Option<Vec<f64>> {
    let dims = t.dims();
    if dims.len() > rank {
        return None;
    }
    let k = norm.len();
    // Align right; the weight's dims over outer axes must be 1.
    let lead = dims.len().saturating_sub(k);
    if dims[..lead].iter().any(|&d| d != 1) {
        return None;
    }
    let inner = &dims[lead..];
    // Pad the inner dims on the left to k dims.
    let mut wd = vec![1i64; k - inner.len()];
    wd.extend_from_slice(inner);
    for (w, n) in wd.iter().zip(norm) {
        if *w != 1 && w != n {
            return None;
        }
    }
    let vals = t.to_f64_vec().ok()?;
    let total = norm.iter().try_fold(1i64, |acc, &d| acc.checked_mul(d))?;
    if total <= 0 || total > MAX_NORM_ELEMS {
        return None;
    }
    // Strides of the weight (0 on broadcast dims).
    let mut strides = vec![0i64; k];
    let mut s = 1i64;
    for i in (0..k).rev() {
        strides[i] = if wd[i] == 1 { 0 } else { s };
        s *= wd[i];
    }
    let mut out = Vec::with_capacity(total as usize);
    let mut idx = vec![0i64; k];
    for _ in 0..total {
        let off: i64 = idx.iter().zip(&strides).map(|(i, s)| i * s).sum();
        out.push(*vals.get(off as usize)?);
        for d in (0..k).rev() {
            idx[d] += 1;
            if idx[d] < norm[d] {
                break;
            }
            idx[d] = 0;
        }
    }
    Some(out)
}

/// Most elements a fused normalization's scale/bias may have: the fusion
/// writes them as initializers (a hostile or mis-declared dim must not
/// make it allocate gigabytes).
pub const MAX_NORM_ELEMS: i64 = 1 << 24;

/// The known sizes of the last `k` dims of `dims`, when they are known and
/// span at most [`MAX_NORM_ELEMS`] elements.
pub fn trailing_known(dims: &[Dim], k: usize) -> Option<Vec<i64>> {
    if dims.len() < k {
        return None;
    }
    let sizes: Vec<i64> = dims[dims.len() - k..]
        .iter()
        .map(|d| match d {
            Dim::Known(v) if *v > 0 => Some(*v),
            _ => None,
        })
        .collect::<Option<_>>()?;
    let total = sizes.iter().try_fold(1i64, |acc, &d| acc.checked_mul(d))?;
    (total <= MAX_NORM_ELEMS).then_some(sizes)
}

/// The elementwise affine tail after a normalization whose result is `n`:
/// `Mul(n, gamma)` then `Add(·, beta)` (either operand order), each with a
/// constant operand, each optional. `accept` says whether a weight can be
/// taken over (a Mul/Add whose weight it refuses ends the tail).
pub struct Affine {
    /// (Mul node, gamma)
    pub gamma: Option<(NodeId, ValueId)>,
    /// (Add node, beta)
    pub beta: Option<(NodeId, ValueId)>,
    /// The value the fused op replaces (the last matched node's output, or `n`).
    pub out: ValueId,
}

impl Affine {
    pub fn nodes(&self) -> Vec<NodeId> {
        self.gamma
            .iter()
            .chain(self.beta.iter())
            .map(|(n, _)| *n)
            .collect()
    }
}

/// The other operand of a binary `op` node reading `v` as its only reader
/// (the caller's `accept` decides whether it may be a gain or bias).
fn affine_partner(g: &Graph, v: ValueId, op: &str) -> Option<(NodeId, ValueId, ValueId)> {
    if !private(g, v) {
        return None;
    }
    let (reader, _) = g.input_uses(v).next()?;
    let node = g.node(reader);
    if !node.domain().is_empty() || !node.is(op) {
        return None;
    }
    let (a, b) = operands(g, reader)?;
    let c = if a == v { b } else { a };
    let out = node.outputs.first().copied().flatten()?;
    Some((reader, c, out))
}

pub fn affine_tail(
    g: &Graph,
    n: ValueId,
    with_beta: bool,
    accept: &dyn Fn(ValueId) -> bool,
) -> Affine {
    let mut a = Affine {
        gamma: None,
        beta: None,
        out: n,
    };
    if let Some((mul, gamma, out)) = affine_partner(g, n, "Mul") {
        if !accept(gamma) {
            return a;
        }
        a.gamma = Some((mul, gamma));
        a.out = out;
    }
    if with_beta
        && let Some((add, beta, out)) = affine_partner(g, a.out, "Add")
        && accept(beta)
    {
        a.beta = Some((add, beta));
        a.out = out;
    }
    a
}

/// [`crate::util::replace_with_node`] into a patch that already holds
/// initializers the new node reads; the new value gets `out`'s declared
/// type, else `ty` (what inference knew of `out`), so the next match in the
/// same sweep still sees its shape.
pub fn replace_into(
    mut p: infopt_ir::Patch,
    g: &Graph,
    node: Node,
    inputs: Vec<Option<infopt_ir::PatchValue>>,
    out: ValueId,
    ty: Option<infopt_ir::TensorType>,
    remove: &[NodeId],
) -> infopt_ir::Patch {
    let n = p.add_node(node, inputs, vec![String::new()]);
    let new = infopt_ir::PatchValue::NewNode { node: n, output: 0 };
    p.replace(out, new);
    match g.value(out).tensor_type() {
        Some(t) => p.set_type(new, t),
        None => {
            if let Some(t) = ty {
                p.set_type(new, t);
            }
        }
    }
    for &r in remove {
        p.remove_node(r);
    }
    p
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trailing_axes() {
        assert_eq!(trailing_count(Some(&[-1]), None), Some(1));
        assert_eq!(trailing_count(Some(&[-2, -1]), None), Some(2));
        assert_eq!(trailing_count(Some(&[2]), Some(3)), Some(1));
        assert_eq!(trailing_count(Some(&[1, 2]), Some(3)), Some(2));
        assert_eq!(trailing_count(Some(&[1]), Some(3)), None);
        assert_eq!(trailing_count(Some(&[-2]), None), None);
        assert_eq!(trailing_count(Some(&[2]), None), None);
        assert_eq!(trailing_count(None, Some(3)), Some(3));
        assert_eq!(trailing_count(Some(&[-1, -1]), None), None);
    }

    #[test]
    fn weights_over_normalized_dims() {
        let t = Tensor::from_f32(vec![1, 1, 3], &[1.0, 2.0, 3.0]);
        assert_eq!(over_normalized_dims(&t, 3, &[3]), Some(vec![1.0, 2.0, 3.0]));
        assert_eq!(
            over_normalized_dims(&t, 3, &[2, 3]),
            Some(vec![1.0, 2.0, 3.0, 1.0, 2.0, 3.0])
        );
        // Varies over an outer axis.
        let outer = Tensor::from_f32(vec![2, 3], &[1.0; 6]);
        assert_eq!(over_normalized_dims(&outer, 3, &[3]), None);
        // Would broadcast the input up.
        assert_eq!(over_normalized_dims(&t, 3, &[1]), None);
        let scalar = Tensor::from_f32(vec![], &[2.0]);
        assert_eq!(over_normalized_dims(&scalar, 2, &[2]), Some(vec![2.0, 2.0]));
        // A declared dim of 2^31 - 1 is not materialized.
        assert_eq!(over_normalized_dims(&scalar, 2, &[i32::MAX as i64]), None);
        let huge = [Dim::Sym("b".into()), Dim::Known(i32::MAX as i64)];
        assert_eq!(trailing_known(&huge, 1), None);
        assert_eq!(trailing_known(&huge[..1], 1), None);
        let ok = [Dim::Sym("b".into()), Dim::Known(4), Dim::Known(8)];
        assert_eq!(trailing_known(&ok, 2), Some(vec![4, 8]));
    }
}
