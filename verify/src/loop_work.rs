//! Loops verification cannot wait for: a `Loop` whose trip count is a
//! constant in the file and whose condition provably stays true runs that
//! many iterations, and a file may say 2^62 (a fuzzed trip count hung both
//! runtimes until the process was killed). Such a model is refused before
//! it runs, naming the node. While-loops (a condition the body computes)
//! and trip counts the graph computes are not judged: they may end early.

use infopt_ir::{Graph, Model, Node, Tensor, ValueId};

/// Most iterations verification runs a loop for. Exported for-loops run a
/// sequence's or a beam's length, far below this.
pub const MAX_LOOP_ITERATIONS: i64 = 1 << 20;

/// The constant a value holds: an initializer or a `Constant` node's value.
fn constant(g: &Graph, v: ValueId) -> Option<Tensor> {
    if let Some(t) = g.constant(v) {
        return Some(t.clone());
    }
    let p = g.producer(v)?;
    (p.domain().is_empty() && p.op_type == "Constant")
        .then(|| infopt_ir::infer::constant_value(p))
        .flatten()
}

fn constant_int(g: &Graph, v: ValueId) -> Option<i64> {
    match constant(g, v)?.to_i64_vec().ok()?.as_slice() {
        [n] => Some(*n),
        _ => None,
    }
}

/// The body's condition output is its condition input passed through (or
/// an Identity of it), or a constant true: the loop never stops early.
fn body_never_stops(body: &Graph) -> bool {
    let (Some(cond_in), Some(cond_out)) = (body.inputs.get(1), body.outputs.first()) else {
        return false;
    };
    let mut v = cond_out.value;
    while let Some(p) = body.producer(v) {
        if !(p.domain().is_empty() && p.op_type == "Identity") {
            break;
        }
        match p.inputs.first().copied().flatten() {
            Some(input) => v = input,
            None => return false,
        }
    }
    v == cond_in.value || constant_int(body, v) == Some(1)
}

/// The iterations `node` (a Loop) certainly runs, when the file fixes them.
pub(crate) fn fixed_iterations(g: &Graph, node: &Node) -> Option<i64> {
    let trip = constant_int(g, node.inputs.first().copied().flatten()?)?;
    let starts = match node.inputs.get(1).copied().flatten() {
        None => true,
        Some(c) => constant_int(g, c)? == 1,
    };
    let body = node.subgraphs().next()?;
    (starts && body_never_stops(body)).then_some(trip)
}

fn refusal_in(g: &Graph) -> Option<String> {
    for (_, node) in g.nodes() {
        if node.domain().is_empty()
            && node.op_type == "Loop"
            && let Some(n) = fixed_iterations(g, node)
            && n > MAX_LOOP_ITERATIONS
        {
            return Some(format!(
                "node '{}' (Loop) runs {n} iterations (a constant trip count, and a condition that stays true), more than the {MAX_LOOP_ITERATIONS} verification waits for; skip verification with --no-verify",
                node.name_or_op()
            ));
        }
        if let Some(why) = node.subgraphs().find_map(refusal_in) {
            return Some(why);
        }
    }
    None
}

/// Why verification cannot run the model's loops, if it cannot.
pub fn refusal(model: &Model) -> Option<String> {
    refusal_in(&model.graph)
}

#[cfg(test)]
mod tests {
    use super::*;
    use infopt_ir::builder::{GraphBuilder, dims};
    use infopt_ir::{Attribute, DataType};

    /// `Loop(trip, true, x)` whose body adds 1 and passes `cond` on through
    /// `identities` Identity nodes, or computes it (`x < 10`) when `computed`.
    fn loop_model(trip: i64, computed: bool) -> Model {
        let mut body = GraphBuilder::new();
        body.input("i", DataType::Int64, dims(&[]));
        let cond = body.input("cond", DataType::Bool, dims(&[]));
        let v = body.input("v", DataType::Float, dims(&["1"]));
        let one = body.f32("one", &[1], &[1.0]);
        let next = body.op("Add", &[v, one], vec![]);
        let cond_out = if computed {
            let ten = body.f32("ten", &[1], &[10.0]);
            let less = body.op("Less", &[next, ten], vec![]);
            let axes = body.i64("axes", &[1], &[0]);
            body.op("Squeeze", &[less, axes], vec![])
        } else {
            body.op("Identity", &[cond], vec![])
        };
        body.output(cond_out, "cond_out", DataType::Bool, Some(dims(&[])));
        body.output(next, "v_out", DataType::Float, Some(dims(&["1"])));
        let body = body.into_graph();
        let mut b = GraphBuilder::new();
        let x = b.input("x", DataType::Float, dims(&["1"]));
        let m = b.i64("M", &[], &[trip]);
        let t = b.initializer(
            "c",
            Tensor::from_raw(DataType::Bool, vec![], vec![1u8].into()),
        );
        let y = b.op("Loop", &[m, t, x], vec![Attribute::graph("body", body)]);
        b.output(y, "y", DataType::Float, None);
        b.build(17)
    }

    #[test]
    fn a_for_loop_of_a_huge_constant_count_is_refused_naming_the_node() {
        assert_eq!(
            refusal(&loop_model(1 << 62, false)).as_deref(),
            Some(
                "node 'loop_1' (Loop) runs 4611686018427387904 iterations (a constant trip count, and a condition that stays true), more than the 1048576 verification waits for; skip verification with --no-verify"
            )
        );
        assert_eq!(refusal(&loop_model(200, false)), None);
        // A while-loop may stop at any iteration.
        assert_eq!(refusal(&loop_model(1 << 62, true)), None);
    }
}
