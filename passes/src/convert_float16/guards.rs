//! Guards that float16 would remove: `Log(x + 1e-10)`, `Sqrt(Max(x, 1e-12))`,
//! `y / (x + 1e-9)`. The small constant keeps the argument away from zero.
//! Below float16's smallest normal (6.1e-5) it is flushed to zero or kept
//! with a few bits, and the argument it guards, often a square (`x*x`, which
//! float16 flushes to zero below 2.4e-4), reaches 0: Log gives -inf and what
//! follows NaN. basic-pitch's log-magnitude CQT (`Log(x*x + 1e-10)`, then a
//! min/max normalization) did exactly that on clips with a quiet stretch,
//! while the one clip `--inputs` gave had none, so no judgement on the
//! user's data could see it. The guarded op, its guard and the elementwise
//! chain computing the guarded argument therefore stay float32 whatever the
//! inputs; bfloat16 (float32's exponent range) holds such guards and is not
//! concerned.

use std::collections::HashMap;

use infopt_ir::{DataType, Graph, NodeId, ValueId};

/// Ops that hold the guard: `Add(x, eps)`, `Max(x, eps)`, `Clip(x, eps, ..)`.
const GUARDS: &[&str] = &["Add", "Max", "Clip"];

/// Elementwise ops that compute a guarded argument (a square, a power, a
/// magnitude) upstream of the guard. Reductions end the chain: summing ones
/// and normalization statistics are float32 already (`ops::sensitive`), and
/// what feeds a statistic (a LayerNorm's `x - mean`) need not be.
const ARGUMENT: &[&str] = &["Mul", "Add", "Sub", "Pow", "Abs", "Neg", "Relu"];

/// How far upstream of the guard the argument's chain is followed.
const DEPTH: usize = 4;

/// Nodes kept in float32 because float16 would lose the guard of a Log,
/// Sqrt, Reciprocal or divisor, with the reason.
pub fn guarded(g: &Graph) -> HashMap<NodeId, String> {
    let mut out: HashMap<NodeId, String> = HashMap::new();
    for (id, n) in g.nodes() {
        if !n.domain().is_empty() {
            continue;
        }
        let slot = match n.op_type.as_str() {
            "Log" | "Sqrt" | "Reciprocal" => 0,
            "Div" => 1,
            _ => continue,
        };
        let Some(arg) = n.inputs.get(slot).copied().flatten() else {
            continue;
        };
        let Some((guard, eps)) = lost_guard(g, arg) else {
            continue;
        };
        let why = format!(
            "guard: {} reads {}({eps:e}) that float16 flushes or rounds away (below its smallest normal 6.1e-5): \
             the guarded argument reaches 0 in float16 and Log/Sqrt/Div give -inf or NaN",
            n.op_type,
            g.node(guard).op_type
        );
        out.insert(id, why.clone());
        out.insert(guard, why.clone());
        keep_argument_chain(g, guard, DEPTH, ARGUMENT, &why, &mut out);
    }
    out
}

/// Keeps with `why` the nodes of `ops` that compute `start`'s inputs, up to
/// `depth` steps up, stopping at another op or at a node already kept (a
/// guard's argument here, a Sin/Cos argument in `periodic`).
pub(super) fn keep_argument_chain(
    g: &Graph,
    start: NodeId,
    depth: usize,
    ops: &[&str],
    why: &str,
    out: &mut HashMap<NodeId, String>,
) {
    infopt_ir::walk::walk_producers(g, start, depth, |p| {
        let pn = g.node(p);
        let take =
            pn.domain().is_empty() && ops.contains(&pn.op_type.as_str()) && !out.contains_key(&p);
        if take {
            out.insert(p, why.to_string());
        }
        take
    });
}

/// The node producing `arg` when it is a guard (Add/Max/Clip with a constant
/// operand) whose constant holds a positive value below float16's smallest
/// normal, and that value.
fn lost_guard(g: &Graph, arg: ValueId) -> Option<(NodeId, f32)> {
    let (p, _) = g.value(arg).producer?;
    let n = g.node(p);
    if !n.domain().is_empty() || !GUARDS.contains(&n.op_type.as_str()) {
        return None;
    }
    // Clip's guard is its min (input 1); Add's and Max's either operand.
    let slots: &[usize] = if n.is("Clip") { &[1] } else { &[0, 1] };
    let tiny = half::f16::MIN_POSITIVE.to_f32();
    slots
        .iter()
        .filter_map(|&s| n.inputs.get(s).copied().flatten())
        .filter_map(|v| constant_values(g, v))
        .flatten()
        .find(|&x| x > 0.0 && x < tiny)
        .map(|eps| (p, eps))
}

/// The values of a small float32 constant (an initializer or a Constant
/// node's output); `None` for anything else or more than a few values (a
/// guard is a scalar or a per-channel vector).
fn constant_values(g: &Graph, v: ValueId) -> Option<Vec<f32>> {
    let t = match g.constant(v) {
        Some(t) => t.clone(),
        None => g
            .producer(v)
            .filter(|p| p.is("Constant"))
            .and_then(infopt_ir::infer::constant_value)?,
    };
    if t.dtype() != DataType::Float || t.numel()? > 1024 {
        return None;
    }
    let values = t.to_f64_vec().ok()?;
    Some(values.into_iter().map(|x| x as f32).collect())
}
