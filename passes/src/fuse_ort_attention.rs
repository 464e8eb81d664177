//! Fuses a whole self-attention block (Q/K/V projections included) into ONNX Runtime's `com.microsoft.Attention` (target onnxruntime).
//!
//! ## What it does
//! Where the attention core (see `fuse-attention`: `MatMul(Q, Kᵀ)`, scalar
//! scales, optional additive mask, `Softmax`, `MatMul(·, V)`) reads Q, K and V
//! split into heads from projections of one 3-D input `x`
//! (`x·W + b` as `MatMul` + `Add`, or one `MatMul` split in three by `Split`,
//! as `fuse-parallel-matmul` or GPT-2's packed `c_attn` leave it), and its
//! result is merged back to `[B, S, H·dv]`, the block becomes
//! `com.microsoft.Attention(x, W_qkv, b_qkv, , , mask)` with `num_heads = H`,
//! `scale` = the product of the scales, the three weights packed side by side
//! into one `[D, 2·H·d + H·dv]` initializer (and the biases likewise, zeros
//! for a projection without one), and the additive mask as
//! `attention_bias` (input 5). `qkv_hidden_sizes` is written when V's width
//! differs from Q's. Adds the `com.microsoft` opset import (version 1).
//!
//! The head split is a Reshape of `[B, S, H·d]` to `[B, S, H, d]` whose
//! target keeps B and S by a 0, the dim itself or `Shape(x)[i]`, or by a -1
//! in one of them when the rest of the target is known: torch's dynamo
//! exporter writes `[-1, S, H, d]` with `allowzero=1` (ViT, YOLOS, Segformer,
//! MobileViT), a TorchScript export at batch 1 `[1, -1, H, d]`. A -1 that
//! would regroup the rows (`[-1, S/3, H, d]`) is not a split into heads.
//!
//! With another target the pass changes nothing and leaves a note.
//!
//! ## When it declines
//! Only with target `onnxruntime`, where the core is present:
//! - Q, K and V are not projections of the same input by constant 2-D
//!   weights, or are not split into heads the same way, or the result is not
//!   merged back (then `fuse-attention` may still apply at opset 23);
//! - the input is not known to be 3-D, or the element type is not float32
//!   (ONNX Runtime's CPU kernel);
//! - the mask is not 4-D with the full `[S, T]` trailing dims
//!   (`attention_bias` only broadcasts over batch and heads);
//! - the cases listed for `fuse-attention` (other readers of the scores,
//!   non-constant scale, unknown ranks).
//!
//! ## Numerics
//! The same arithmetic in ONNX Runtime's kernel (one GEMM for the packed
//! projection, the scale applied to Q·Kᵀ): rounding differences only.
//!
//! ## Example
//! BERT's self-attention (3 MatMul + 3 Add projections, 3 Reshape + 4
//! Transpose, MatMul, Mul 0.125, Add mask, Softmax, MatMul, Reshape) becomes
//! `Attention(x, W_qkv, b_qkv, , , mask, num_heads=12, scale=0.125)`.

crate::register_pass! {
    name: "fuse-ort-attention",
    kind: Fuse,
    file: "fuse_ort_attention.rs",
    options: crate::registry::NoOptions,
    build: |_| FuseOrtAttention,
}

use infopt_ir::{Attribute, DataType, Dim, Graph, Model, Node, NodeId, Patch, PatchValue, Tensor};
use infopt_ir::ValueId;

use crate::attention_pattern::{
    HeadSplit, ShapeElem, dims, match_sdpa, merge_heads, rank, row_root, shape_elems,
    split_heads, split_heads_transposed,
};
use crate::decline;
use crate::fuse_attention::{core_dtype, remove_dead, trim};
use crate::pass::{Pass, PassCx, PassError};
use crate::rule::Outcome;
use crate::util::{MS_DOMAIN, carry_type, const_i64s, input, node_label};

pub struct FuseOrtAttention;

/// `x · W[:, off..off+n] + bias`, with `W` a constant `[D, total]`.
#[derive(Clone, Debug)]
struct Projection {
    x: ValueId,
    w: ValueId,
    off: usize,
    n: usize,
    bias: Bias,
}

#[derive(Clone, Debug)]
enum Bias {
    None,
    /// A constant `[n]` of its own.
    Own(ValueId),
    /// Columns `off..off+n` of a constant `[total]` (the bias added before a Split).
    Slice(ValueId),
}

/// A constant 1-D float32 tensor's length.
fn const_len(g: &Graph, v: ValueId) -> Option<usize> {
    let t = g.constant(v)?;
    (t.dtype() == DataType::Float && t.dims().len() == 1).then(|| t.dims()[0] as usize)
}

/// `MatMul(x, W)` with `W` a constant float32 `[D, total]`: `(x, W, total)`.
fn matmul_const(g: &Graph, v: ValueId) -> Option<(ValueId, ValueId, usize)> {
    let (id, _) = g.value(v).producer?;
    if !g.node(id).is("MatMul") {
        return None;
    }
    let x = input(g, id, 0)?;
    let w = input(g, id, 1)?;
    let t = g.constant(w)?;
    if t.dtype() != DataType::Float || t.dims().len() != 2 {
        return None;
    }
    Some((x, w, t.dims()[1] as usize))
}

/// GPT-2's Conv1D as torch exports it: `Reshape(Gemm(Reshape(x, [-1, D]),
/// W, b), [B, S, N])` with `x: [B, S, D]`, a plain Gemm (no transposes,
/// alpha = beta = 1) and the outer Reshape restoring x's leading dims (as
/// inferred).
pub(crate) fn conv1d(g: &Graph, v: ValueId) -> Option<(ValueId, ValueId, usize, Option<ValueId>)> {
    let (outer, _) = g.value(v).producer?;
    if !g.node(outer).is("Reshape") {
        return None;
    }
    let y2 = input(g, outer, 0)?;
    let (gemm, _) = g.value(y2).producer?;
    let gn = g.node(gemm);
    if !gn.is("Gemm")
        || gn.attr_int_or("transA", 0).ok()? != 0
        || gn.attr_int_or("transB", 0).ok()? != 0
        || gn.attr_float_or("alpha", 1.0).ok()? != 1.0
        || gn.attr_float_or("beta", 1.0).ok()? != 1.0
    {
        return None;
    }
    let x2 = input(g, gemm, 0)?;
    let w = input(g, gemm, 1)?;
    let t = g.constant(w)?;
    if t.dtype() != DataType::Float || t.dims().len() != 2 {
        return None;
    }
    let total = t.dims()[1] as usize;
    let bias = match input(g, gemm, 2) {
        Some(b) if const_len(g, b) == Some(total) => Some(b),
        Some(_) => return None,
        None => None,
    };
    let (inner, _) = g.value(x2).producer?;
    if !g.node(inner).is("Reshape") {
        return None;
    }
    let x = input(g, inner, 0)?;
    let (dx, dv) = (dims(g, x)?, dims(g, v)?);
    if dx.len() != 3 || dv.len() != 3 {
        return None;
    }
    // The inner Reshape flattens x to [B*S, D] (target [-1, D]); the outer
    // one restores x's own B and S.
    let flat = shape_elems(g, input(g, inner, 1)?)?;
    if flat.len() != 2 || flat[0] != ShapeElem::Const(-1) || flat[1] != ShapeElem::Const(t.dims()[0]) {
        return None;
    }
    let restore = shape_elems(g, input(g, outer, 1)?)?;
    let rows_of_x = |i: usize| match restore[i] {
        ShapeElem::DimOf(y, a) => a == i && row_root(g, y) == row_root(g, x),
        ShapeElem::Const(k) => k > 0 && dx[i] == Dim::Known(k),
    };
    if restore.len() != 3 || !rows_of_x(0) || !rows_of_x(1) {
        return None;
    }
    if dx[2] != Dim::Known(t.dims()[0]) || restore[2] != ShapeElem::Const(total as i64) {
        return None;
    }
    Some((x, w, total, bias))
}

/// `v = Add(MatMul(x, W), b)` (either order), `MatMul(x, W)`, or GPT-2's
/// Conv1D (see [`conv1d`]).
fn dense(g: &Graph, v: ValueId) -> Option<(ValueId, ValueId, usize, Option<ValueId>)> {
    if let Some((x, w, total)) = matmul_const(g, v) {
        return Some((x, w, total, None));
    }
    if let Some(found) = conv1d(g, v) {
        return Some(found);
    }
    let (id, _) = g.value(v).producer?;
    if !g.node(id).is("Add") {
        return None;
    }
    let (a, b) = (input(g, id, 0)?, input(g, id, 1)?);
    for (m, bias) in [(a, b), (b, a)] {
        if let Some((x, w, total)) = matmul_const(g, m)
            && const_len(g, bias) == Some(total)
        {
            return Some((x, w, total, Some(bias)));
        }
    }
    None
}

/// Column offset and width of output `slot` of a last-axis Split of `[.., total]`.
fn split_columns(g: &Graph, split: NodeId, slot: usize, total: usize, opset: i64) -> Option<(usize, usize)> {
    let n = g.node(split);
    let src = input(g, split, 0)?;
    let r = rank(g, src)? as i64;
    let axis = n.attr_int_or("axis", 0).ok()?;
    if axis != -1 && axis != r - 1 {
        return None;
    }
    let outs = n.outputs.len();
    let sizes: Vec<i64> = if opset >= 13 {
        match input(g, split, 1) {
            Some(s) => const_i64s(g, Some(s))?,
            None => vec![(total / outs) as i64; outs],
        }
    } else {
        match n.attr_ints("split").ok()? {
            Some(s) => s.to_vec(),
            None => vec![(total / outs) as i64; outs],
        }
    };
    if sizes.len() != outs || sizes.iter().any(|&s| s < 0) || sizes.iter().sum::<i64>() != total as i64 {
        return None;
    }
    let off: i64 = sizes[..slot].iter().sum();
    Some((off as usize, sizes[slot] as usize))
}

/// The projection computing `x3`.
fn projection(g: &Graph, x3: ValueId, opset: i64) -> Option<Projection> {
    if let Some((x, w, n, bias)) = dense(g, x3) {
        let bias = bias.map_or(Bias::None, Bias::Own);
        return Some(Projection { x, w, off: 0, n, bias });
    }
    // Split of a dense output, optionally followed by its own bias Add.
    let split_of = |v: ValueId| -> Option<Projection> {
        let (sp, slot) = g.value(v).producer?;
        if !g.node(sp).is("Split") {
            return None;
        }
        let (x, w, total, bias) = dense(g, input(g, sp, 0)?)?;
        let (off, n) = split_columns(g, sp, slot as usize, total, opset)?;
        let bias = bias.map_or(Bias::None, Bias::Slice);
        Some(Projection { x, w, off, n, bias })
    };
    if let Some(p) = split_of(x3) {
        return Some(p);
    }
    let (id, _) = g.value(x3).producer?;
    if !g.node(id).is("Add") {
        return None;
    }
    let (a, b) = (input(g, id, 0)?, input(g, id, 1)?);
    for (m, bias) in [(a, b), (b, a)] {
        if let Some(p) = split_of(m)
            && matches!(p.bias, Bias::None)
            && const_len(g, bias) == Some(p.n)
        {
            return Some(Projection { bias: Bias::Own(bias), ..p });
        }
    }
    None
}

/// Columns `off..off+n` of every row of a `[rows, total]` float32 constant.
fn columns(g: &Graph, w: ValueId, off: usize, n: usize) -> Option<Vec<Vec<f32>>> {
    let t = g.constant(w)?;
    let (rows, total) = (t.dims()[0] as usize, t.dims()[1] as usize);
    let raw = t.raw_bytes().ok()?;
    if raw.len() != rows * total * 4 {
        return None;
    }
    let at = |i: usize| f32::from_le_bytes([raw[4 * i], raw[4 * i + 1], raw[4 * i + 2], raw[4 * i + 3]]);
    Some(
        (0..rows)
            .map(|r| (r * total + off..r * total + off + n).map(at).collect())
            .collect(),
    )
}

fn bias_values(g: &Graph, p: &Projection) -> Option<Vec<f32>> {
    let all = |v: ValueId| -> Option<Vec<f32>> {
        Some(g.constant(v)?.to_f64_vec().ok()?.into_iter().map(|x| x as f32).collect())
    };
    Some(match p.bias {
        Bias::None => vec![0.0; p.n],
        Bias::Own(b) => all(b)?,
        Bias::Slice(b) => all(b)?.get(p.off..p.off + p.n)?.to_vec(),
    })
}

/// The mask fits `attention_bias`: `[B|1, H|1, S, T]` with S and T in full.
fn mask_fits(g: &Graph, mask: ValueId, scores: ValueId) -> Result<(), String> {
    let (Some(m), Some(s)) = (dims(g, mask), dims(g, scores)) else {
        return Err("mask or score shape unknown".into());
    };
    if m.len() != 4 || s.len() != 4 {
        return Err(format!("the mask has rank {}; attention_bias needs [B|1, H|1, S, T]", m.len()));
    }
    let full = |i: usize| crate::attention_pattern::full_dim(&m[i], &s[i]);
    let one_or_full = |i: usize| matches!(m[i], Dim::Known(1)) || full(i);
    if !(one_or_full(0) && one_or_full(1) && full(2) && full(3)) {
        return Err(format!(
            "mask dims {} do not fit attention_bias [B|1, H|1, S, T] for scores {}",
            infopt_ir::infer::fmt_dims(&m),
            infopt_ir::infer::fmt_dims(&s)
        ));
    }
    Ok(())
}

fn rule(g: &Graph, id: NodeId, cx: &mut PassCx) -> Outcome {
    let m = match match_sdpa(g, id, cx.opset) {
        Ok(Some(m)) => m,
        Ok(None) => return Outcome::Skip,
        Err(reason) => decline!("{reason}"),
    };
    match core_dtype(g, &m) {
        Some(DataType::Float) => {}
        Some(d) => decline!("dtype {d}: ONNX Runtime's CPU Attention kernel is float32 only"),
        None => decline!("element type of the attention is unknown"),
    }
    let splits: Option<[HeadSplit; 3]> = (|| {
        Some([split_heads(g, m.q4)?, split_heads_transposed(g, m.kt4)?, split_heads(g, m.v4)?])
    })();
    let Some([q, k, v]) = splits else {
        decline!("Q, K or V is not split into heads from a [B, S, H*d] tensor");
    };
    if q.heads != k.heads || k.heads != v.heads || q.head_dim != k.head_dim {
        decline!("Q, K and V have different head counts or Q/K head sizes");
    }
    let Some(y3) = merge_heads(g, m.out4, v.heads, v.head_dim, q.x3) else {
        decline!("the attention output is not merged back to [B, S, H*dv]");
    };
    let projs: Option<Vec<Projection>> = [q.x3, k.x3, v.x3]
        .iter()
        .map(|&x3| projection(g, x3, cx.opset))
        .collect();
    let Some(projs) = projs else {
        decline!("Q, K and V are not projections by constant weights (MatMul [+ Add])");
    };
    let x = projs[0].x;
    if projs.iter().any(|p| p.x != x) {
        decline!("Q, K and V project different inputs (cross-attention)");
    }
    if rank(g, x) != Some(3) {
        decline!("the attention input is not known to be 3-D");
    }
    if let Some(mask) = m.mask
        && let Err(e) = mask_fits(g, mask, m.scores)
    {
        decline!("{e}");
    }
    // Pack the weights and biases.
    let mut cols = Vec::new();
    let mut bias = Vec::new();
    for p in &projs {
        let (Some(c), Some(b)) = (columns(g, p.w, p.off, p.n), bias_values(g, p)) else {
            decline!("projection weights could not be read");
        };
        cols.push(c);
        bias.extend(b);
    }
    let rows = cols[0].len();
    if cols.iter().any(|c| c.len() != rows) {
        decline!("projection weights have different input sizes");
    }
    let total: usize = projs.iter().map(|p| p.n).sum();
    let mut packed = Vec::with_capacity(rows * total);
    for r in 0..rows {
        for c in &cols {
            packed.extend_from_slice(&c[r]);
        }
    }
    let label = node_label(g, id);
    let mut p = Patch::new();
    let w = p.add_initializer(
        &format!("{label}.qkv_weight"),
        Tensor::from_f32(vec![rows as i64, total as i64], &packed),
    );
    let b = p.add_initializer(&format!("{label}.qkv_bias"), Tensor::from_f32(vec![total as i64], &bias));
    let mut node = Node::new("Attention");
    node.domain = Some(MS_DOMAIN.to_string());
    node.name = Some(format!("{label}.attention"));
    node.set_attr(Attribute::int("num_heads", q.heads));
    node.set_attr(Attribute::float("scale", m.scale as f32));
    if projs[2].n != projs[0].n {
        node.set_attr(Attribute::ints(
            "qkv_hidden_sizes",
            projs.iter().map(|p| p.n as i64).collect(),
        ));
    }
    let inputs = vec![
        Some(PatchValue::Existing(x)),
        Some(w),
        Some(b),
        None,
        None,
        m.mask.map(PatchValue::Existing),
    ];
    let n = p.add_node(node, trim(inputs), vec![String::new()]);
    let out = PatchValue::NewNode { node: n, output: 0 };
    p.replace(y3, out);
    carry_type(&mut p, g, y3, out);
    remove_dead(&mut p, g, y3, &[x], m.mask);
    Outcome::Rewrite(p)
}

impl Pass for FuseOrtAttention {
    fn name(&self) -> &'static str {
        "fuse-ort-attention"
    }

    fn run(&self, model: &mut Model, cx: &mut PassCx) -> Result<usize, PassError> {
        crate::util::run_contrib_fusion(self.name(), "com.microsoft.Attention", model, cx, &rule)
    }
}
