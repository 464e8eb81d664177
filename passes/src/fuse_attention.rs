//! Replaces scaled dot-product attention written out in MatMul/Softmax by the ONNX `Attention` op (opset 23+).
//!
//! ## What it does
//! The attention core as torch.onnx exports it for BERT, GPT-2 and ViT
//! (eager or SDPA attention):
//! `s = MatMul(Q, Kᵀ)` scaled by scalar constants (a `Mul`/`Div` after the
//! MatMul, or on Q and Kᵀ separately as SDPA's export does with
//! `sqrt(scale)` on each), an optional additive mask `Add(s, mask)`,
//! `Softmax(axis=-1)`, `MatMul(·, V)`, becomes one `Attention` node with
//! `scale` set to the product of the scales (always written: the op's default
//! is `1/sqrt(head_size)`) and the mask as `attn_mask`.
//!
//! When Q, K and V are split into heads from `[B, S, H·d]` tensors
//! (`Reshape [B,S,H,d]`, `Transpose [0,2,1,3]`; Kᵀ with `[0,2,3,1]`) and the
//! result is merged back (`Transpose [0,2,1,3]`, `Reshape [B,S,H·d]`), the
//! `Attention` node takes the 3-D tensors with `q_num_heads = kv_num_heads
//! = H` and its output replaces the merged result, so the reshapes and
//! transposes go too. Otherwise it takes the 4-D tensors (`K` is `Kᵀ`
//! transposed back: the existing tensor when Kᵀ was a transpose of it, else a
//! new `Transpose`).
//!
//! ## When it declines
//! - the model's opset is below 23 (nothing is recorded: run
//!   `upgrade-opset` / `--upgrade-opset` first);
//! - the scores or probabilities have other readers (an
//!   `output_attentions` model), or a scale is not a positive scalar constant;
//! - the rank of Q, Kᵀ or V is not known to be 4, or the mask's rank is
//!   unknown or not 2 or 4, or its last two dims are not the scores' `[S, T]`
//!   (the spec would broadcast `[B,1,1,T]`, but ONNX Runtime 1.31 refuses a
//!   mask whose second-to-last dim is not S), or a leading dim is neither 1
//!   nor the scores'. Dims shape inference could not determine (torch
//!   exports lose the sequence length at the position-embedding Slice) are
//!   taken to be the full size; were one 1 at run time, ONNX Runtime would
//!   reject the input rather than compute something else;
//! - the element type is not float32, float16 or bfloat16.
//!
//! ## Numerics
//! The same products, with `scale` applied as the op defines it (Q and K each
//! multiplied by `sqrt(scale)` before the product in the reference): results
//! differ from the decomposed graph by rounding only. A query row whose mask
//! is `-inf` everywhere gives zeros in `Attention` where the decomposed graph
//! gives NaN. Exporters mask with the dtype's lowest finite value instead:
//! for a row masked that way everywhere (a padding query of a left-padded
//! causal model) the ONNX reference implementation of `Attention` computes
//! what the decomposed graph does, but ONNX Runtime (1.31, 1.32) returns
//! zeros for it; every other row agrees. Such rows are padding, whose
//! outputs models do not use, but a comparison of all outputs in ONNX
//! Runtime sees them.
//!
//! ## Example
//! BERT's self-attention at opset 23: three `Reshape`/`Transpose` head splits,
//! `MatMul`, `Mul 0.125`, `Add mask`, `Softmax`, `MatMul`, `Transpose`,
//! `Reshape` (11 nodes) become
//! `Attention(q, k, v, mask, q_num_heads=12, kv_num_heads=12, scale=0.125)`.

crate::register_pass! {
    name: "fuse-attention",
    kind: Fuse,
    file: "fuse_attention.rs",
    options: crate::registry::NoOptions,
    build: |_| FuseAttention,
}

use infopt_ir::{Attribute, DataType, Graph, Model, Node, NodeId, Patch, PatchValue};

use crate::attention_pattern::{
    Sdpa, match_sdpa, merge_heads, split_heads, split_heads_transposed, untransposed_key,
};
use crate::pass::{Pass, PassCx, PassError};
use crate::rule::{Outcome, apply_rule};
use crate::util::{carry_type, node_label};
use crate::decline;

pub struct FuseAttention;

/// The first opset with `Attention`.
pub const ATTENTION_OPSET: i64 = 23;

/// The element type of the core, from Q, V or the scores.
pub fn core_dtype(g: &Graph, m: &Sdpa) -> Option<DataType> {
    [m.q4, m.v4, m.scores]
        .into_iter()
        .filter_map(|v| g.value_type(v))
        .map(|t| t.dtype)
        .find(|d| *d != DataType::Undefined)
}

fn rule(g: &Graph, id: NodeId, cx: &mut PassCx) -> Outcome {
    let m = match match_sdpa(g, id, cx.opset) {
        Ok(Some(m)) => m,
        Ok(None) => return Outcome::Skip,
        Err(reason) => decline!("{reason}"),
    };
    match core_dtype(g, &m) {
        Some(DataType::Float | DataType::Float16 | DataType::Bfloat16) => {}
        Some(d) => decline!("Attention does not take {d}"),
        None => decline!("element type of the attention is unknown"),
    }
    let label = node_label(g, id);
    let mut node = Node::new("Attention");
    node.name = Some(format!("{label}.attention"));
    node.set_attr(Attribute::float("scale", m.scale as f32));
    let mask = m.mask.map(PatchValue::Existing);
    let mut p = Patch::new();

    // 3-D form: the head splits and merge are absorbed.
    let q = split_heads(g, m.q4);
    let k = split_heads_transposed(g, m.kt4);
    let v = split_heads(g, m.v4);
    if let (Some(q), Some(k), Some(v)) = (q, k, v)
        && q.heads == k.heads
        && k.heads == v.heads
        && q.head_dim == k.head_dim
        && let Some(y3) = merge_heads(g, m.out4, v.heads, v.head_dim, q.x3)
    {
        node.set_attr(Attribute::int("q_num_heads", q.heads));
        node.set_attr(Attribute::int("kv_num_heads", k.heads));
        let inputs = vec![
            Some(PatchValue::Existing(q.x3)),
            Some(PatchValue::Existing(k.x3)),
            Some(PatchValue::Existing(v.x3)),
            mask,
        ];
        let keep = [q.x3, k.x3, v.x3];
        let n = p.add_node(node, trim(inputs), vec![String::new()]);
        let out = PatchValue::NewNode { node: n, output: 0 };
        p.replace(y3, out);
        carry_type(&mut p, g, y3, out);
        remove_dead(&mut p, g, y3, &keep, m.mask);
        return Outcome::Rewrite(p);
    }

    // 4-D form.
    let key = match untransposed_key(g, m.kt4) {
        Some(k4) => PatchValue::Existing(k4),
        None => {
            let mut t = Node::new("Transpose");
            t.name = Some(format!("{label}.key"));
            t.set_attr(Attribute::ints("perm", vec![0, 1, 3, 2]));
            let n = p.add_node(
                t,
                vec![Some(PatchValue::Existing(m.kt4))],
                vec![format!("{label}.key")],
            );
            PatchValue::NewNode { node: n, output: 0 }
        }
    };
    let inputs = vec![
        Some(PatchValue::Existing(m.q4)),
        Some(key),
        Some(PatchValue::Existing(m.v4)),
        mask,
    ];
    let n = p.add_node(node, trim(inputs), vec![String::new()]);
    let out = PatchValue::NewNode { node: n, output: 0 };
    p.replace(m.out4, out);
    carry_type(&mut p, g, m.out4, out);
    let keep = match key {
        PatchValue::Existing(k4) => [m.q4, m.v4, k4],
        _ => [m.q4, m.v4, m.kt4],
    };
    remove_dead(&mut p, g, m.out4, &keep, m.mask);
    Outcome::Rewrite(p)
}

/// Removes the nodes the replacement of `root` leaves without readers.
pub fn remove_dead(
    p: &mut Patch,
    g: &Graph,
    root: infopt_ir::ValueId,
    keep: &[infopt_ir::ValueId],
    mask: Option<infopt_ir::ValueId>,
) {
    let mut keep = keep.to_vec();
    keep.extend(mask);
    for n in crate::util::dead_cone(g, root, &keep, 64) {
        p.remove_node(n);
    }
}

/// Drops trailing omitted inputs.
pub fn trim(mut inputs: Vec<Option<PatchValue>>) -> Vec<Option<PatchValue>> {
    while inputs.last().is_some_and(|v| v.is_none()) {
        inputs.pop();
    }
    inputs
}

impl Pass for FuseAttention {
    fn name(&self) -> &'static str {
        "fuse-attention"
    }

    fn run(&self, model: &mut Model, cx: &mut PassCx) -> Result<usize, PassError> {
        if cx.opset < ATTENTION_OPSET {
            return Ok(0);
        }
        // The rule reads ranks and mask shapes from value types.
        infopt_ir::infer::infer_shapes(model);
        apply_rule(model, cx, &rule)
    }
}
