//! How far the indices a Gather or GatherND reads with can reach, when they
//! are counted by a `Range(0, n, 1)`.
//!
//! torch's dynamo exporter writes `mask[batch_idx, kv_idx]` as a GatherND
//! whose indices are `Range(0, batch)` and `Range(0, past + seq)`, unsqueezed,
//! expanded to a common shape and concatenated on the last axis. The graph
//! runs only where the mask's axes are at least that long, so verification
//! must size them so: [`crate::relations`] takes each such axis equal to its
//! bound, a size the graph accepts (as it does for `mask[:, :key_len]`).

use infopt_ir::infer::GraphFacts;
use infopt_ir::{Dim, Graph, ValueId};

/// Producers followed back from an index tensor, at most.
const MAX_DEPTH: usize = 16;

/// The exclusive upper bound of an integer tensor's values.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Bound {
    /// Every element is in `0..n`.
    All(Dim),
    /// Index tuples on the last axis: component `k` is in `0..bounds[k]`.
    Components(Vec<Dim>),
}

/// The bound of `v`'s values, when they come from `Range(0, n, 1)` through
/// ops that only move or copy elements; `None` for anything else.
pub fn bound(g: &Graph, facts: &GraphFacts, v: ValueId) -> Option<Bound> {
    bound_at(g, facts, v, 0)
}

fn bound_at(g: &Graph, facts: &GraphFacts, v: ValueId, depth: usize) -> Option<Bound> {
    if depth > MAX_DEPTH {
        return None;
    }
    let (id, _) = g.value(v).producer?;
    let node = g.node(id);
    if !node.domain().is_empty() {
        return None;
    }
    let input = |slot: usize| node.inputs.get(slot).copied().flatten();
    let scalar_value = |slot: usize| -> Option<Dim> {
        let value = facts.get(input(slot)?)?.value.as_ref()?;
        (value.elems.len() == 1).then(|| value.elems[0].clone())
    };
    match node.op_type.as_str() {
        "Range" => {
            let counts_from_zero = matches!(scalar_value(0), Some(Dim::Known(0)))
                && matches!(scalar_value(2), Some(Dim::Known(1)));
            let limit = scalar_value(1)?;
            (counts_from_zero && !matches!(limit, Dim::Unknown)).then_some(Bound::All(limit))
        }
        // Elements moved or copied, never changed (Cast between integer
        // types of indices keeps the small values a Range counts).
        "Unsqueeze" | "Squeeze" | "Expand" | "Reshape" | "Transpose" | "Identity" | "Flatten"
        | "Cast" => match bound_at(g, facts, input(0)?, depth + 1)? {
            Bound::All(n) => Some(Bound::All(n)),
            // Component tuples survive only an op that leaves the last axis
            // alone (Expand could broadcast it).
            Bound::Components(c) if node.is("Identity") => Some(Bound::Components(c)),
            Bound::Components(_) => None,
        },
        // Index tuples built one component at a time on the last axis.
        "Concat" => {
            let rank = facts.get(v)?.shape()?.len();
            let axis = node.attr_int_or("axis", 0).ok()?;
            let last = axis == -1 || usize::try_from(axis).ok() == rank.checked_sub(1);
            if !last {
                return None;
            }
            let mut components = Vec::new();
            for part in node.inputs.iter().copied() {
                let part = part?;
                let width = facts.get(part)?.shape()?.last()?.clone();
                match (width, bound_at(g, facts, part, depth + 1)?) {
                    (Dim::Known(1), Bound::All(n)) => components.push(n),
                    (_, Bound::Components(c)) => components.extend(c),
                    _ => return None,
                }
            }
            Some(Bound::Components(components))
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use infopt_ir::builder::{GraphBuilder, dims};
    use infopt_ir::infer::{self, InferReport, Opsets, Scope};
    use infopt_ir::{Attribute, DataType};

    /// The bound of `Unsqueeze(Range(start, Shape(x)[0], 1))` for `x: [n]`.
    fn bound_of_range_from(start: i64) -> Option<Bound> {
        let mut b = GraphBuilder::new();
        let x = b.input("x", DataType::Float, dims(&["n"]));
        let shape = b.op("Shape", &[x], vec![]);
        let i0 = b.i64("i0", &[], &[0]);
        let n = b.op("Gather", &[shape, i0], vec![Attribute::int("axis", 0)]);
        let (from, step) = (b.i64("from", &[], &[start]), b.i64("step", &[], &[1]));
        let r = b.op("Range", &[from, n, step], vec![]);
        let axes = b.i64("axes", &[1], &[-1]);
        let u = b.op("Unsqueeze", &[r, axes], vec![]);
        b.output(u, "y", DataType::Int64, None);
        let mut g = b.into_graph();
        let facts = infer::infer_graph(
            &mut g,
            Opsets::onnx(13),
            &Scope::default(),
            &mut InferReport::default(),
        );
        bound(&g, &facts, u)
    }

    #[test]
    fn a_range_from_zero_bounds_its_indices_by_its_count() {
        assert_eq!(
            bound_of_range_from(0),
            Some(Bound::All(Dim::Sym("n".into())))
        );
    }

    #[test]
    fn a_range_from_elsewhere_bounds_nothing() {
        // Only the count exporters write is read; other starts and steps
        // are left out (relations may be incomplete, never made up).
        assert_eq!(bound_of_range_from(1), None);
    }
}
