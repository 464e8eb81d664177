//! Recognizing scaled dot-product attention as exporters write it, shared by
//! `fuse-attention` (standard `Attention`) and `fuse-ort-attention`
//! (`com.microsoft.Attention`).
//!
//! The core, anchored at the second MatMul:
//! ```text
//! s = MatMul(Q·a, Kᵀ·b) · c      (a, b, c: optional Mul/Div by scalar constants)
//! s = Add(s, mask)               (optional, additive)
//! p = Softmax(s, axis=-1)
//! o = MatMul(p, V)
//! ```
//! and, around it, the head split (`Reshape [B,S,H,d]` then `Transpose`) of
//! Q, K and V and the head merge (`Transpose`, `Reshape [B,S,H·d]`) of `o`.

use infopt_ir::{Dim, Graph, NodeId, ValueId};

use crate::util::{input, output, single_reader};

/// The attention core found at a MatMul.
#[derive(Clone, Debug)]
pub struct Sdpa {
    /// Q as `[B, H, S, d]`.
    pub q4: ValueId,
    /// Kᵀ as `[B, H, d, T]` (the first MatMul's second operand, unscaled).
    pub kt4: ValueId,
    /// V as `[B, H, T, dv]`.
    pub v4: ValueId,
    /// The factor multiplying Q·Kᵀ (product of every scalar scale found).
    pub scale: f64,
    /// The additive mask, if any.
    pub mask: Option<ValueId>,
    /// The scores before the mask and Softmax (for their shape).
    pub scores: ValueId,
    /// `MatMul(p, V)`: `[B, H, S, dv]`.
    pub out4: ValueId,
}

/// How Q, K or V was split into heads: `x3 [B, S, H·d]` reshaped and transposed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HeadSplit {
    pub x3: ValueId,
    pub heads: i64,
    pub head_dim: i64,
}

/// The scalar value of a constant float tensor with one element.
fn scalar_const(g: &Graph, v: ValueId) -> Option<f64> {
    let t = g.constant(v)?;
    if t.numel() != Some(1) || !t.dtype().is_float() {
        return None;
    }
    t.to_f64_vec().ok()?.first().copied()
}

/// `v = Mul(x, c)`, `Mul(c, x)` or `Div(x, c)` with a scalar constant `c`,
/// where `v` is read once: returns `(x, factor)`.
fn scaled(g: &Graph, v: ValueId) -> Option<(ValueId, f64)> {
    let (id, _) = g.value(v).producer?;
    let n = g.node(id);
    let a = input(g, id, 0)?;
    let b = input(g, id, 1)?;
    let factor = if n.is("Mul") {
        if let Some(c) = scalar_const(g, b) {
            (a, c)
        } else {
            (b, scalar_const(g, a)?)
        }
    } else if n.is("Div") {
        let c = scalar_const(g, b)?;
        if c == 0.0 {
            return None;
        }
        (a, 1.0 / c)
    } else {
        return None;
    };
    Some(factor)
}

/// Strips scalar scales off `v` (each read once): the unscaled value and the factor.
fn strip_scales(g: &Graph, mut v: ValueId) -> (ValueId, f64) {
    let mut factor = 1.0;
    while let Some((x, c)) = scaled(g, v) {
        if g.reader_count(v) != 1 || g.is_graph_output(v) {
            break;
        }
        factor *= c;
        v = x;
    }
    (v, factor)
}

/// The rank of `v` if known.
pub fn rank(g: &Graph, v: ValueId) -> Option<usize> {
    g.value_type(v)?.shape.map(|s| s.len())
}

/// The dims of `v` if its rank is known.
pub fn dims(g: &Graph, v: ValueId) -> Option<Vec<Dim>> {
    g.value_type(v)?.shape
}

/// `v` is the only input the chain hands on: read once, not a graph output.
fn private(g: &Graph, v: ValueId) -> bool {
    single_reader(g, v).is_some()
}

/// The first MatMul of the core, behind scales: `(mm1 output, factor)`.
fn scores_matmul(g: &Graph, v: ValueId) -> Option<(NodeId, f64)> {
    let (x, c) = strip_scales(g, v);
    let (id, _) = g.value(x).producer?;
    g.node(id).is("MatMul").then_some((id, c))
}

/// Matches the attention core whose last MatMul is `mm2`. `Ok(None)`: not
/// attention; `Err`: attention that cannot be fused, with the reason.
/// `opset` (of the default domain) decides Softmax's default axis.
pub fn match_sdpa(g: &Graph, mm2: NodeId, opset: i64) -> Result<Option<Sdpa>, String> {
    let n = g.node(mm2);
    if !n.is("MatMul") {
        return Ok(None);
    }
    let (Some(p), Some(v4), Some(out4)) = (input(g, mm2, 0), input(g, mm2, 1), output(g, mm2, 0))
    else {
        return Ok(None);
    };
    let Some((sm, _)) = g.value(p).producer else {
        return Ok(None);
    };
    if !g.node(sm).is("Softmax") {
        return Ok(None);
    }
    if !private(g, p) {
        return Err("the attention probabilities have other readers".into());
    }
    let Some(s) = input(g, sm, 0) else {
        return Ok(None);
    };
    let Some(r) = rank(g, s) else {
        return Err("rank of the attention scores is unknown (run infer-shapes)".into());
    };
    if r != 4 {
        return Ok(None);
    }
    let axis = g.node(sm).attr_int("axis").ok().flatten();
    match axis {
        Some(-1) | Some(3) => {}
        // Opset 13 made -1 the default; before, Softmax flattened from axis 1.
        None if opset >= 13 => {}
        _ => return Ok(None),
    }
    if !private(g, s) {
        return Err("the attention scores have other readers".into());
    }
    // The mask Add, if any: one side leads to the scores MatMul.
    let mut mask = None;
    let mut pre = s;
    if let Some((add, _)) = g.value(s).producer
        && g.node(add).is("Add")
    {
        let a = input(g, add, 0);
        let b = input(g, add, 1);
        let (Some(a), Some(b)) = (a, b) else {
            return Ok(None);
        };
        if scores_matmul(g, a).is_some() {
            pre = a;
            mask = Some(b);
        } else if scores_matmul(g, b).is_some() {
            pre = b;
            mask = Some(a);
        } else {
            return Ok(None);
        }
        if !private(g, pre) {
            return Err("the scores before the mask have other readers".into());
        }
    }
    let Some((mm1, mut scale)) = scores_matmul(g, pre) else {
        return Ok(None);
    };
    let scores = match output(g, mm1, 0) {
        Some(v) => v,
        None => return Ok(None),
    };
    if !private(g, scores) {
        return Err("the Q·Kᵀ product has other readers".into());
    }
    let (Some(qq), Some(kk)) = (input(g, mm1, 0), input(g, mm1, 1)) else {
        return Ok(None);
    };
    let (q4, cq) = strip_scales(g, qq);
    let (kt4, ck) = strip_scales(g, kk);
    scale *= cq * ck;
    if !(scale.is_finite() && scale > 0.0) {
        return Err(format!("scale {scale} is not a positive number"));
    }
    for (what, v) in [("Q", q4), ("Kᵀ", kt4), ("V", v4)] {
        match rank(g, v) {
            Some(4) => {}
            Some(r) => return Err(format!("{what} has rank {r}, not 4")),
            None => return Err(format!("rank of {what} is unknown (run infer-shapes)")),
        }
    }
    if let Some(m) = mask {
        check_mask(g, m, scores)?;
    }
    Ok(Some(Sdpa {
        q4,
        kt4,
        v4,
        scale,
        mask,
        scores,
        out4,
    }))
}

/// Whether mask dim `m` can stand for scores dim `s` where the kernel needs
/// the full size: equal, or unknown to inference (torch exports lose the
/// sequence length at the position-embedding Slice, so real masks and scores
/// carry unknown dims). A mask dim that is 1 at run time where the scores'
/// is not would make ONNX Runtime reject the input at run time, not compute
/// something else; a known 1 or a different size or symbol declines.
pub fn full_dim(m: &Dim, s: &Dim) -> bool {
    match (m, s) {
        (Dim::Unknown, Dim::Known(1)) => false,
        (Dim::Unknown, _) => true,
        (Dim::Known(1), Dim::Known(1)) => true,
        (Dim::Known(1), _) => false,
        (Dim::Known(_), Dim::Unknown) => true,
        (Dim::Sym(_), Dim::Unknown) => true,
        _ => m == s,
    }
}

/// The mask must broadcast to the scores without enlarging them (the Add's
/// result has the scores' shape). Its last two dims must be the scores' own
/// (see [`full_dim`]): ONNX Runtime (1.31) does not broadcast them in
/// `Attention`, though the spec allows it. Rank 2 or 4 (a rank-3 mask is
/// read differently by ORT).
fn check_mask(g: &Graph, mask: ValueId, scores: ValueId) -> Result<(), String> {
    let Some(m) = dims(g, mask) else {
        return Err("rank of the attention mask is unknown".into());
    };
    if m.len() != 2 && m.len() != 4 {
        return Err(format!("attention mask has rank {} (2 or 4 fuse)", m.len()));
    }
    let Some(s) = dims(g, scores) else {
        return Err("rank of the attention scores is unknown".into());
    };
    let lead = m.len() - 2;
    for (i, d) in m.iter().enumerate() {
        let sd = &s[s.len() - m.len() + i];
        let ok = if i < lead {
            matches!(d, Dim::Known(1) | Dim::Unknown) || full_dim(d, sd)
        } else {
            full_dim(d, sd)
        };
        if !ok {
            return Err(format!(
                "attention mask dims {} do not fit the scores {}: the last two must be the scores' [S, T] (ONNX Runtime does not broadcast them), the others 1 or equal",
                infopt_ir::infer::fmt_dims(&m),
                infopt_ir::infer::fmt_dims(&s)
            ));
        }
    }
    Ok(())
}

/// One element of a shape tensor built from pieces: a constant, or dim
/// `axis` of some tensor's `Shape`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ShapeElem {
    Const(i64),
    DimOf(ValueId, usize),
}

/// The elements of a 1-D shape tensor: a constant, or a Concat of constants,
/// `Shape(y)`, `Slice(Shape(y), a, b)` and `Unsqueeze(Gather(Shape(y), i))`
/// pieces (torch's way of saying "the batch and sequence of y").
pub fn shape_elems(g: &Graph, v: ValueId) -> Option<Vec<ShapeElem>> {
    if let Some(c) = crate::util::const_i64s(g, Some(v)) {
        return Some(c.into_iter().map(ShapeElem::Const).collect());
    }
    let (id, _) = g.value(v).producer?;
    let n = g.node(id);
    if n.is("Concat") {
        let mut out = Vec::new();
        for &i in n.inputs.iter().flatten().collect::<Vec<_>>().iter() {
            out.extend(shape_piece(g, *i)?);
        }
        return Some(out);
    }
    shape_piece(g, v)
}

fn shape_of(g: &Graph, v: ValueId) -> Option<(ValueId, usize)> {
    let (id, _) = g.value(v).producer?;
    let n = g.node(id);
    if !n.is("Shape") || n.attr("start").is_some() || n.attr("end").is_some() {
        return None;
    }
    let y = input(g, id, 0)?;
    Some((y, rank(g, y)?))
}

fn shape_piece(g: &Graph, v: ValueId) -> Option<Vec<ShapeElem>> {
    if let Some(c) = crate::util::const_i64s(g, Some(v)) {
        return Some(c.into_iter().map(ShapeElem::Const).collect());
    }
    if let Some((y, r)) = shape_of(g, v) {
        return Some((0..r).map(|a| ShapeElem::DimOf(y, a)).collect());
    }
    let (id, _) = g.value(v).producer?;
    let n = g.node(id);
    let norm = |i: i64, r: usize| -> Option<usize> {
        let i = if i < 0 { i + r as i64 } else { i };
        (0..r as i64).contains(&i).then_some(i as usize)
    };
    if n.is("Slice") {
        let (y, r) = shape_of(g, input(g, id, 0)?)?;
        let starts = crate::util::const_i64s(g, input(g, id, 1))?;
        let ends = crate::util::const_i64s(g, input(g, id, 2))?;
        if starts.len() != 1 || ends.len() != 1 {
            return None;
        }
        if let Some(steps) = input(g, id, 4)
            && crate::util::const_i64s(g, Some(steps))? != [1]
        {
            return None;
        }
        let s = norm(starts[0], r)?;
        let e = if ends[0] >= r as i64 {
            r
        } else {
            norm(ends[0], r)?
        };
        return Some((s..e).map(|a| ShapeElem::DimOf(y, a)).collect());
    }
    if n.is("Unsqueeze") {
        let (gid, _) = g.value(input(g, id, 0)?).producer?;
        if !g.node(gid).is("Gather") || g.node(gid).attr_int_or("axis", 0).ok()? != 0 {
            return None;
        }
        let (y, r) = shape_of(g, input(g, gid, 0)?)?;
        let idx = crate::util::const_i64s(g, input(g, gid, 1))?;
        if idx.len() != 1 {
            return None;
        }
        return Some(vec![ShapeElem::DimOf(y, norm(idx[0], r)?)]);
    }
    None
}

/// Follows `v` back through ops that keep dims 0 and 1 of a rank-3 tensor
/// (a projection by a constant 2-D weight, a constant bias or scale, a
/// last-axis normalization or Split, elementwise activations, a Reshape
/// whose leading target dims are another such tensor's): two values with the
/// same root have the same batch and sequence dims, which shape inference
/// cannot always name.
pub fn row_root(g: &Graph, mut v: ValueId) -> ValueId {
    for _ in 0..64 {
        match row_step(g, v) {
            Some(next) if next != v => v = next,
            _ => break,
        }
    }
    v
}

fn row_step(g: &Graph, v: ValueId) -> Option<ValueId> {
    let (id, _) = g.value(v).producer?;
    let n = g.node(id);
    let x = input(g, id, 0)?;
    let rank3 = |u: ValueId| rank(g, u) == Some(3);
    if !rank3(v) {
        return None;
    }
    let small_const = |u: ValueId| g.constant(u).is_some_and(|t| t.dims().len() <= 1);
    let same_rank_input = rank3(x);
    match (n.domain(), n.op_type.as_str()) {
        ("", "MatMul") => {
            let w = input(g, id, 1)?;
            (same_rank_input && g.constant(w).is_some_and(|t| t.dims().len() == 2)).then_some(x)
        }
        ("", "Add" | "Sub" | "Mul" | "Div") => {
            let y = input(g, id, 1)?;
            if small_const(y) && rank3(x) {
                Some(x)
            } else if small_const(x) && rank3(y) {
                Some(y)
            } else {
                None
            }
        }
        ("", "LayerNormalization") => {
            let axis = n.attr_int_or("axis", -1).ok()?;
            (same_rank_input && (axis == -1 || axis == 2)).then_some(x)
        }
        ("", "Split") => {
            let axis = n.attr_int_or("axis", 0).ok()?;
            (same_rank_input && (axis == -1 || axis == 2)).then_some(x)
        }
        ("", "Erf" | "Tanh" | "Relu" | "Sigmoid" | "Gelu" | "Softplus" | "Identity") => {
            same_rank_input.then_some(x)
        }
        (
            "com.microsoft",
            "SkipLayerNormalization" | "BiasGelu" | "FastGelu" | "Gelu" | "Attention",
        ) => same_rank_input.then_some(x),
        ("", "Attention") => same_rank_input.then_some(x),
        ("", "Reshape") => {
            if reshape_allows_zero(g, id) {
                return None;
            }
            let elems = shape_elems(g, input(g, id, 1)?)?;
            match elems.get(..2)? {
                [ShapeElem::Const(0), ShapeElem::Const(0)] => same_rank_input.then_some(x),
                [ShapeElem::DimOf(a, 0), ShapeElem::DimOf(b, 1)] if a == b && rank3(*a) => Some(*a),
                _ => None,
            }
        }
        _ => None,
    }
}

/// Element `i` (0 or 1) of a Reshape target says "dim i of `x3`": a 0
/// (copy), the known dim itself, or `Shape(y)[i]` with `y` having the same
/// rows as `x3`.
fn keeps_dim(g: &Graph, x3: ValueId, d: &[Dim], elem: ShapeElem, i: usize) -> bool {
    match elem {
        ShapeElem::Const(0) => true,
        ShapeElem::Const(k) => matches!(d[i], Dim::Known(n) if n == k && k > 0),
        ShapeElem::DimOf(y, a) => a == i && row_root(g, y) == row_root(g, x3),
    }
}

/// Whether elements 0 and 1 of a Reshape target keep dims 0 and 1 (B, S)
/// of the reshaped tensor, whose rows are those of `x3`. Each element is a
/// copy of its dim, or one of them is a -1 and the other a copy: when the
/// target's remaining elements are known and multiply to `row_volume` (the
/// elements per row of the reshaped tensor), that -1 can only be the missing
/// dim. torch's dynamo exporter writes `[-1, S, H, d]`, a static TorchScript
/// export `[1, -1, H, d]`.
fn keeps_rows(
    g: &Graph,
    x3: ValueId,
    d: &[Dim],
    shape: &[ShapeElem],
    rest: Option<i64>,
    row_volume: i64,
) -> bool {
    let kept = [0, 1].map(|i| keeps_dim(g, x3, d, shape[i], i));
    if kept == [true, true] {
        return true;
    }
    rest == Some(row_volume) && (0..2).any(|i| shape[i] == ShapeElem::Const(-1) && kept[1 - i])
}

/// The product of known positive constant elements, `None` if any is not one.
fn known_product(shape: &[ShapeElem]) -> Option<i64> {
    shape.iter().try_fold(1i64, |acc, e| match e {
        ShapeElem::Const(k) if *k > 0 => acc.checked_mul(*k),
        _ => None,
    })
}

/// Whether the Reshape target `shape` on `x3 [B, S, N]` keeps B and S and
/// splits N: returns `(heads, head_dim)`.
fn split_target(g: &Graph, x3: ValueId, shape: &[ShapeElem]) -> Option<(i64, i64)> {
    let d = dims(g, x3)?;
    if d.len() != 3 || shape.len() != 4 {
        return None;
    }
    let Dim::Known(n) = d[2] else { return None };
    if !keeps_rows(g, x3, &d, shape, known_product(&shape[2..]), n) {
        return None;
    }
    let (ShapeElem::Const(a), ShapeElem::Const(b)) = (shape[2], shape[3]) else {
        return None;
    };
    let (h, hd) = match (a, b) {
        (-1, hd) if hd > 0 && n % hd == 0 => (n / hd, hd),
        (h, -1) if h > 0 && n % h == 0 => (h, n / h),
        (h, hd) if h > 0 && hd > 0 && h * hd == n => (h, hd),
        _ => return None,
    };
    Some((h, hd))
}

fn reshape_allows_zero(g: &Graph, id: NodeId) -> bool {
    g.node(id).attr_int_or("allowzero", 0).unwrap_or(1) != 0
}

/// Whether a 0 in `shape` means "copy the input's dim": always, unless the
/// Reshape sets `allowzero` (dynamo writes `allowzero=1` on every Reshape;
/// it only changes targets that hold a literal 0).
fn zeros_copy(g: &Graph, id: NodeId, shape: &[ShapeElem]) -> bool {
    !reshape_allows_zero(g, id) || !shape.contains(&ShapeElem::Const(0))
}

/// `x3 [B,S,H·d] → Reshape [B,S,H,d]`: the split, from the Reshape's output.
fn reshape_split(g: &Graph, r: ValueId) -> Option<HeadSplit> {
    let (id, _) = g.value(r).producer?;
    if !g.node(id).is("Reshape") {
        return None;
    }
    let x3 = input(g, id, 0)?;
    let shape = shape_elems(g, input(g, id, 1)?)?;
    if !zeros_copy(g, id, &shape) {
        return None;
    }
    let (heads, head_dim) = split_target(g, x3, &shape)?;
    Some(HeadSplit {
        x3,
        heads,
        head_dim,
    })
}

fn transpose_of(g: &Graph, v: ValueId, perm: &[i64]) -> Option<ValueId> {
    let (id, _) = g.value(v).producer?;
    let n = g.node(id);
    if !n.is("Transpose") || n.attr_ints("perm").ok()?? != perm {
        return None;
    }
    input(g, id, 0)
}

/// Q or V: `Transpose(Reshape(x3, [B,S,H,d]), [0,2,1,3])`.
pub fn split_heads(g: &Graph, v4: ValueId) -> Option<HeadSplit> {
    reshape_split(g, transpose_of(g, v4, &[0, 2, 1, 3])?)
}

/// Kᵀ: `Transpose(Reshape(x3, [B,T,H,d]), [0,2,3,1])`, or the same split
/// followed by `Transpose [0,1,3,2]`.
pub fn split_heads_transposed(g: &Graph, kt4: ValueId) -> Option<HeadSplit> {
    if let Some(r) = transpose_of(g, kt4, &[0, 2, 3, 1]) {
        return reshape_split(g, r);
    }
    split_heads(g, transpose_of(g, kt4, &[0, 1, 3, 2])?)
}

/// K as `[B, H, T, d]` without a new node, when Kᵀ is a transpose of it.
pub fn untransposed_key(g: &Graph, kt4: ValueId) -> Option<ValueId> {
    transpose_of(g, kt4, &[0, 1, 3, 2])
}

/// The head merge after the core: `o4 → Transpose [0,2,1,3] → Reshape
/// [B,S,H·dv]`, each read once, where B and S are those of `rows` (the
/// query's `[B, S, ·]` input). Returns the Reshape's output.
pub fn merge_heads(
    g: &Graph,
    out4: ValueId,
    heads: i64,
    v_head_dim: i64,
    rows: ValueId,
) -> Option<ValueId> {
    let (t, _) = single_reader(g, out4)?;
    let tn = g.node(t);
    if !tn.is("Transpose") || tn.attr_ints("perm").ok()?? != [0, 2, 1, 3] {
        return None;
    }
    let tv = output(g, t, 0)?;
    let (r, slot) = single_reader(g, tv)?;
    if slot != 0 || !g.node(r).is("Reshape") {
        return None;
    }
    let shape = shape_elems(g, input(g, r, 1)?)?;
    let d = dims(g, rows)?;
    if shape.len() != 3 || d.len() != 3 || !zeros_copy(g, r, &shape) {
        return None;
    }
    // A 0 copies the transposed output's dim, which is the query's B / S.
    let row_volume = heads.checked_mul(v_head_dim)?;
    if !keeps_rows(g, rows, &d, &shape, known_product(&shape[2..]), row_volume) {
        return None;
    }
    match shape[2] {
        ShapeElem::Const(-1) => {}
        ShapeElem::Const(w) if w == heads * v_head_dim => {}
        _ => return None,
    }
    output(g, r, 0)
}

/// Ops between a projection and the attention core that use it.
const TO_ATTENTION: &[&str] = &[
    "Add",
    "Reshape",
    "Transpose",
    "Mul",
    "Div",
    "Cast",
    "Squeeze",
    "Unsqueeze",
];

/// Nodes walked forward from a projection before giving up (BERT's Q path:
/// bias Add, Reshape, Transpose, MatMul, Div, mask Add, Softmax).
const ATTENTION_DEPTH: usize = 8;

/// Whether MatMul `n`'s output reaches an attention core: a Softmax, or a
/// MatMul whose other operand is a Softmax's output (V's path), through
/// [`TO_ATTENTION`] ops and at most one MatMul (Q·Kᵀ).
pub(crate) fn projects_attention(g: &Graph, n: NodeId) -> bool {
    let mut frontier: Vec<(NodeId, bool)> = vec![(n, false)];
    for _ in 0..ATTENTION_DEPTH {
        let mut next = Vec::new();
        for (at, crossed_matmul) in frontier {
            for out in g.node(at).outputs.iter().flatten() {
                for (r, slot) in g.input_uses(*out) {
                    let node = g.node(r);
                    if !node.domain().is_empty() {
                        continue;
                    }
                    match node.op_type.as_str() {
                        "Softmax" => return true,
                        "MatMul" if !crossed_matmul => {
                            let other = input(g, r, 1 - slot as usize);
                            let from_softmax = other
                                .and_then(|v| g.value(v).producer)
                                .is_some_and(|(p, _)| g.node(p).is("Softmax"));
                            if from_softmax {
                                return true;
                            }
                            next.push((r, true));
                        }
                        op if TO_ATTENTION.contains(&op) => next.push((r, crossed_matmul)),
                        _ => {}
                    }
                }
            }
        }
        if next.is_empty() {
            return false;
        }
        next.truncate(64);
        frontier = next;
    }
    false
}

/// Whether normalization node `n`'s first output is read by the Q/K/V
/// projections of an attention block (see [`projects_attention`]). ONNX
/// Runtime fuses such a block itself, starting from that
/// LayerNormalization; the layer-norm fusions that would replace it
/// (`fuse-skip-layer-norm`, `fuse-embed-layer-norm`) leave it alone until
/// `fuse-ort-attention` has fused the block (paraphrase-MiniLM-L3 at one
/// thread: 8.9 ms as exported, 9.5-10.2 ms with them in its place).
pub(crate) fn feeds_unfused_attention(g: &Graph, n: NodeId) -> bool {
    g.node(n)
        .outputs
        .first()
        .copied()
        .flatten()
        .is_some_and(|o| {
            g.input_uses(o)
                .any(|(r, _)| g.node(r).is("MatMul") && projects_attention(g, r))
        })
}

/// Whether value `v` is computed from an attention core's Softmax, walking
/// back through [`TO_ATTENTION`] ops and MatMuls (the output projection
/// and the probabilities times V) for at most [`ATTENTION_DEPTH`] nodes:
/// the residual Add after an attention block. `fuse-skip-layer-norm`
/// leaves that Add alone while the block is unfused (ONNX Runtime's own
/// attention fusion matches it as an Add).
pub(crate) fn reads_attention_output(g: &Graph, v: ValueId) -> bool {
    // What the walk passes through: the standard domain's MatMul and
    // TO_ATTENTION ops.
    let passes = |n: NodeId| {
        let node = g.node(n);
        node.domain().is_empty()
            && (node.op_type == "MatMul" || TO_ATTENTION.contains(&node.op_type.as_str()))
    };
    let Some((p, _)) = g.value(v).producer else {
        return false;
    };
    if g.node(p).is("Softmax") {
        return true;
    }
    if !passes(p) {
        return false;
    }
    let mut seen = std::collections::HashSet::new();
    let mut found = false;
    infopt_ir::walk::walk_producers(g, p, ATTENTION_DEPTH - 1, |q| {
        found |= g.node(q).is("Softmax") && g.node(q).domain().is_empty();
        !found && seen.insert(q) && passes(q)
    });
    found
}
