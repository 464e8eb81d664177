//! Turns a Gemm between a flattening and an unflattening Reshape (GPT-2's Conv1D as torch exports it) into MatMul + Add on the 3-D tensor.
//!
//! ## What it does
//! transformers' `Conv1D` (GPT-2's attention and MLP projections) exports as
//! `Reshape(Gemm(Reshape(x, [-1, D]), W, b), [B, S, N])` with `x: [B, S, D]`
//! and the outer target built from `x`'s own batch and sequence
//! (`Shape`/`Gather`/`Concat`). When `W` is a constant `[D, N]`, the Gemm
//! plain (no transposes, alpha = beta = 1) and `b` a constant `[N]` (or
//! absent), this becomes `y = Add(MatMul(x, W), b)` (`MatMul` alone without a
//! bias): the two Reshapes and their shape arithmetic go, and the bias is
//! where the bias fusions (`fuse-skip-layer-norm`, `fuse-bias-gelu`) and
//! `fuse-ort-attention` find it.
//!
//! ## When it declines
//! Nothing is recorded unless the whole pattern is present. It is not
//! rewritten when the flattened or the Gemm output has other readers, or the
//! outer Reshape cannot be shown to restore `x`'s batch and sequence dims.
//!
//! ## Numerics
//! The same products and sums (a MatMul kernel instead of a Gemm kernel may
//! order the accumulation differently: rounding differences only).
//!
//! ## Example
//! `f = Reshape(x[B,S,768], [-1,768])`, `g = Gemm(f, W[768,2304], b)`,
//! `y = Reshape(g, Concat(B, S, [2304]))` becomes `y = Add(MatMul(x, W), b)`.

crate::register_pass! {
    name: "unflatten-gemm",
    kind: Fuse,
    file: "unflatten_gemm.rs",
    options: crate::registry::NoOptions,
    build: |_| UnflattenGemm,
}

use infopt_ir::{Model, Node, NodeId, Patch, PatchValue};

use crate::pass::{Pass, PassCx, PassError};
use crate::rule::{Outcome, apply_rule};
use crate::util::{carry_type, input, node_label, output, single_reader};
use crate::{require, require_some};

pub struct UnflattenGemm;

fn rule(g: &infopt_ir::Graph, id: NodeId, _cx: &mut PassCx) -> Outcome {
    require!(g.node(id).is("Reshape"));
    let y = require_some!(output(g, id, 0));
    let (x, w, _, bias) = require_some!(crate::fuse_ort_attention::conv1d(g, y));
    let flat = require_some!(input(g, id, 0));
    let (gemm, _) = require_some!(g.value(flat).producer);
    let inner_out = require_some!(input(g, gemm, 0));
    let (inner, _) = require_some!(g.value(inner_out).producer);
    // Only this chain reads the intermediate tensors.
    require!(single_reader(g, flat).is_some() && single_reader(g, inner_out).is_some());
    let label = node_label(g, gemm);
    let mut p = Patch::new();
    let mut mm = Node::new("MatMul");
    mm.name = Some(label.clone());
    let out = match bias {
        None => {
            let n = p.add_node(
                mm,
                vec![Some(PatchValue::Existing(x)), Some(PatchValue::Existing(w))],
                vec![String::new()],
            );
            PatchValue::NewNode { node: n, output: 0 }
        }
        Some(b) => {
            let n = p.add_node(
                mm,
                vec![Some(PatchValue::Existing(x)), Some(PatchValue::Existing(w))],
                vec![format!("{label}.matmul")],
            );
            let mut add = Node::new("Add");
            add.name = Some(format!("{label}.bias"));
            let a = p.add_node(
                add,
                vec![
                    Some(PatchValue::NewNode { node: n, output: 0 }),
                    Some(PatchValue::Existing(b)),
                ],
                vec![String::new()],
            );
            PatchValue::NewNode { node: a, output: 0 }
        }
    };
    p.replace(y, out);
    carry_type(&mut p, g, y, out);
    for n in [id, gemm, inner] {
        p.remove_node(n);
    }
    Outcome::Rewrite(p)
}

impl Pass for UnflattenGemm {
    fn name(&self) -> &'static str {
        "unflatten-gemm"
    }

    fn run(&self, model: &mut Model, cx: &mut PassCx) -> Result<usize, PassError> {
        infopt_ir::infer::infer_shapes(model);
        apply_rule(model, cx, &rule)
    }
}
