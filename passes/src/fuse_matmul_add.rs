//! Turns `MatMul` followed by a bias `Add` into one `Gemm`.
//!
//! ## What it does
//! `t = MatMul(A, B)`, `y = Add(t, bias)` (either operand order) becomes
//! `y = Gemm(A, B, bias)` (alpha = beta = 1, no transposes) when `A` is known
//! to be 2-D (from its value type), `B` is a constant 2-D `[K, N]`
//! initializer, `bias` is a constant `[N]` or `[1, N]` tensor of the same
//! dtype, and the MatMul output is read by the Add only. The Gemm takes the
//! MatMul's name; its output keeps the name of the Add output.
//!
//! ## When it declines
//! Only where the MatMul → Add pattern is present:
//! - `A` has another rank than 2, or its rank is unknown (Gemm is 2-D only;
//!   run shape inference first);
//! - `B` is not a constant initializer or is not 2-D;
//! - `bias` is not a constant, or has another shape than `[N]` / `[1, N]`;
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

fn rule(g: &Graph, id: NodeId, cx: &mut PassCx) -> Outcome {
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
    let Some(b_t) = g.constant(b) else {
        decline!("B '{}' is not a constant", g.value(b).name);
    };
    if b_t.dims().len() != 2 {
        decline!("B has rank {}; Gemm needs 2-D", b_t.dims().len());
    }
    let n = b_t.dims()[1];
    match g.value_type(a).and_then(|t| t.shape).map(|s| s.len()) {
        Some(2) => {}
        Some(r) => decline!("A has rank {r}; Gemm needs 2-D"),
        None => decline!("rank of A '{}' is unknown; Gemm needs 2-D", g.value(a).name),
    }
    let Some(bias_t) = g.constant(bias) else {
        decline!("bias '{}' is not a constant", g.value(bias).name);
    };
    let bd = bias_t.dims();
    if !(bd == [n] || bd == [1, n]) {
        decline!(
            "bias has shape {}; Gemm C here must be [{n}] or [1,{n}]",
            dims_string(bd)
        );
    }
    let dtype = b_t.dtype();
    if bias_t.dtype() != dtype {
        decline!("bias dtype {} differs from B dtype {dtype}", bias_t.dtype());
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
