//! Turns `MatMul` followed by a bias `Add` into one `Gemm`.
//!
//! ## What it does
//! `t = MatMul(A, B)`, `y = Add(t, bias)` (either operand order) becomes
//! `y = Gemm(A, B, bias)` (alpha = beta = 1, no transposes) when `A` is known
//! to be 2-D (from its value type), `B` is 2-D `[K, N]` with a known `N` (a
//! constant, or a weight fed as a graph input), `bias` (a constant or a
//! value of known shape, the same dtype) broadcasts into `[M, N]` without
//! growing it (`[]`, `[1]`, `[N]`, `[1, N]`, `[M, 1]`, `[M, N]`, with `M`
//! known for the last two), and the MatMul output is read by the Add only.
//! Also: `Add(Reshape(Gemm(A, B)), bias)` with a bias along the last axis
//! only (`[N]`, `[1, .., 1, N]`) and a Reshape that keeps `N` last takes the
//! bias into the Gemm's C (`Reshape(Gemm(A, B, bias))`). With every shape
//! known, `MatMul(A[.., M', K], B[K, N]) + bias[N]` on an `A` of rank 3 or
//! more becomes `Reshape → Gemm → Reshape` when that lowers the node count:
//! the layout ops (Reshape, Flatten, Squeeze, Unsqueeze) that make `A` or
//! read the sum merge into the new Reshapes, or vanish when their source
//! already is `[M, K]` (their result `[M, N]`). The Gemm takes the
//! MatMul's name; its output keeps the name of the Add output.
//!
//! ## When it declines
//! Only where the MatMul → Add pattern is present:
//! - `A` has another rank than 2, or its rank is unknown (Gemm is 2-D only;
//!   run shape inference first);
//! - `B` is not known to be 2-D with a known column count;
//! - `bias` has an unknown shape or one that does not broadcast into
//!   `[M, N]` (it would grow the output);
//! - the MatMul output has other readers or is a graph output;
//! - the dtype is not float32, float64, float16 (or bfloat16 from opset 13).
//!
//! ## Numerics
//! The same products and sums; a backend may order the accumulation
//! differently in its Gemm kernel (differences of a few ULP).
//!
//! ## Example
//! `t = MatMul(x[8,32], W[32,16])`, `y = Add(t, b[16])` becomes
//! `y = Gemm(x, W, b)`.

crate::register_pass! {
    name: "fuse-matmul-add",
    kind: Fuse,
    file: "fuse_matmul_add.rs",
    options: crate::registry::NoOptions,
    build: |_| FuseMatmulAdd,
}

use infopt_ir::{Attribute, DataType, Graph, Model, Node, NodeId, Patch, PatchValue};

use crate::pass::{Pass, PassCx, PassError};
use crate::rule::{Outcome, apply_rule};
use crate::util::{carry_type, dims_string, input, output};
use crate::{decline, require, require_some};

pub struct FuseMatmulAdd;

/// Dims (`None` where unknown) and dtype of `v`: a constant's, else its
/// declared or inferred type's.
fn known_type(g: &Graph, v: infopt_ir::ValueId) -> Option<(Vec<Option<i64>>, DataType)> {
    if let Some(t) = g.constant(v) {
        return Some((t.dims().iter().map(|&d| Some(d)).collect(), t.dtype()));
    }
    let ty = g.value_type(v)?;
    let dims = ty
        .shape?
        .iter()
        .map(|d| match d {
            infopt_ir::Dim::Known(k) => Some(*k),
            _ => None,
        })
        .collect();
    (ty.dtype != DataType::Undefined).then_some((dims, ty.dtype))
}

/// Whether a bias of `dims` broadcasts (ONNX's one-way broadcast, as Gemm's
/// C does) into `[M, N]` = `out` without changing that shape: rank at most
/// 2, each dim 1 or equal to the known output dim.
fn broadcasts_into(dims: &[Option<i64>], out: &[Option<i64>; 2]) -> bool {
    dims.len() <= 2
        && dims
            .iter()
            .rev()
            .zip(out.iter().rev())
            .all(|(d, o)| *d == Some(1) || (d.is_some() && d == o))
}

fn rule(g: &Graph, id: NodeId, cx: &mut PassCx) -> Outcome {
    if let Outcome::Rewrite(p) = crate::gemm_bias::bias_after_reshape(g, id) {
        return Outcome::Rewrite(p);
    }
    let add = g.node(id);
    require!(add.is("Add") && add.inputs.len() == 2);
    // Find the MatMul operand; the other one is the bias.
    let (mm, bias) = {
        let mut found = None;
        for (a, b) in [(0, 1), (1, 0)] {
            let (Some(x), Some(c)) = (input(g, id, a), input(g, id, b)) else {
                continue;
            };
            if let Some((p, _)) = g.value(x).producer
                && g.node(p).is("MatMul")
            {
                found = Some((p, c));
                break;
            }
        }
        require_some!(found)
    };
    let mm_out = require_some!(output(g, mm, 0));
    if g.is_graph_output(mm_out) {
        decline!("MatMul output '{}' is a graph output", g.value(mm_out).name);
    }
    let readers = g.reader_count(mm_out);
    if readers != 1 {
        decline!("MatMul output has {readers} readers");
    }
    let a = require_some!(input(g, mm, 0));
    let b = require_some!(input(g, mm, 1));
    // B: a constant, or any value (a weight fed as a graph input) whose
    // type says it is 2-D with a known column count.
    let Some((b_dims, dtype)) = known_type(g, b) else {
        decline!("B '{}' has no known 2-D shape", g.value(b).name);
    };
    if b_dims.len() != 2 {
        decline!("B has rank {}; Gemm needs 2-D", b_dims.len());
    }
    let Some(n) = b_dims[1] else {
        decline!("B '{}' has an unknown column count", g.value(b).name);
    };
    let m = match known_type(g, a) {
        Some((d, _)) if d.len() == 2 => d[0],
        Some((d, _)) if d.len() > 2 => {
            if let Outcome::Rewrite(p) =
                crate::matmul_nd_gemm::rank_n_to_gemm(g, id, mm, bias, cx.opset)
            {
                return Outcome::Rewrite(p);
            }
            // Reshapes around a Gemm would not lower the count here.
            decline!("A has rank {}; Gemm needs 2-D", d.len())
        }
        Some((d, _)) => decline!("A has rank {}; Gemm needs 2-D", d.len()),
        None => decline!("rank of A '{}' is unknown; Gemm needs 2-D", g.value(a).name),
    };
    let Some((bias_dims, bias_dtype)) = known_type(g, bias) else {
        decline!("bias '{}' has no known shape", g.value(bias).name);
    };
    if !broadcasts_into(&bias_dims, &[m, Some(n)]) {
        let shown: Vec<i64> = bias_dims.iter().map(|d| d.unwrap_or(-1)).collect();
        decline!(
            "bias has shape {}; Gemm C must broadcast to [M,{n}] without growing it",
            dims_string(&shown)
        );
    }
    if bias_dtype != dtype {
        decline!("bias dtype {bias_dtype} differs from B dtype {dtype}");
    }
    let supported = match dtype {
        DataType::Float | DataType::Double | DataType::Float16 => true,
        DataType::Bfloat16 => cx.opset >= 13,
        _ => false,
    };
    if !supported {
        decline!("dtype {dtype} not supported by Gemm at opset {}", cx.opset);
    }
    let out = require_some!(output(g, id, 0));
    let mut gemm = Node::new("Gemm");
    gemm.name = g.node(mm).name.clone();
    gemm.extra = g.node(mm).extra.clone();
    if cx.opset < 7 {
        gemm.set_attr(Attribute::int("broadcast", 1));
    }
    let mut p = Patch::new();
    let k = p.add_node(
        gemm,
        vec![
            Some(PatchValue::Existing(a)),
            Some(PatchValue::Existing(b)),
            Some(PatchValue::Existing(bias)),
        ],
        vec![String::new()],
    );
    let new = PatchValue::NewNode { node: k, output: 0 };
    p.replace(out, new);
    carry_type(&mut p, g, out, new);
    p.remove_node(mm);
    p.remove_node(id);
    Outcome::Rewrite(p)
}

impl Pass for FuseMatmulAdd {
    fn name(&self) -> &'static str {
        "fuse-matmul-add"
    }

    fn run(&self, model: &mut Model, cx: &mut PassCx) -> Result<usize, PassError> {
        apply_rule(model, cx, &rule)
    }
}
