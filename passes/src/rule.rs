//! Running local rewrite rules: a rule reads the graph at one node and either
//! does not apply, declines with a reason, or returns a `Patch`.

use infopt_ir::{Graph, Model, NodeId, Patch};

use crate::pass::{PassCx, PassError};

pub enum Outcome {
    /// The rule's pattern is not here; nothing to say.
    Skip,
    /// The pattern is here but the rewrite is unsafe or unprovable.
    Decline(String),
    Rewrite(Patch),
}

/// `decline!("scale of {} is not a constant", name)`.
#[macro_export]
macro_rules! decline {
    ($($t:tt)*) => { return $crate::rule::Outcome::Decline(format!($($t)*)) };
}

/// Returns `Skip` unless the condition holds.
#[macro_export]
macro_rules! require {
    ($cond:expr) => {
        if !$cond {
            return $crate::rule::Outcome::Skip;
        }
    };
}

/// Returns `Skip` if the option is `None`, else unwraps it.
#[macro_export]
macro_rules! require_some {
    ($opt:expr) => {
        match $opt {
            Some(v) => v,
            None => return $crate::rule::Outcome::Skip,
        }
    };
}

/// Applies `rule` at every node of `graph` (in order, including nodes created
/// by earlier rewrites of this sweep) and returns the number of rewrites.
pub fn apply_rule_to_graph(
    graph: &mut Graph,
    cx: &mut PassCx,
    rule: &dyn Fn(&Graph, NodeId, &mut PassCx) -> Outcome,
) -> Result<usize, PassError> {
    apply_rule_to_graph_with(graph, cx, rule, &|_| {})
}

/// [`apply_rule_to_graph`], calling `before_rewrite` with the graph just
/// before each rewrite is applied (it sees the graph the rewrite was found on).
pub fn apply_rule_to_graph_with(
    graph: &mut Graph,
    cx: &mut PassCx,
    rule: &dyn Fn(&Graph, NodeId, &mut PassCx) -> Outcome,
    before_rewrite: &dyn Fn(&Graph),
) -> Result<usize, PassError> {
    let mut count = 0;
    graph.sort_topologically()?;
    let mut i = 0;
    while i < graph.node_count() {
        let id = graph.node_at(i);
        i += 1;
        if graph.try_node(id).is_none() {
            continue;
        }
        infopt_ir::context::enter_node(graph.node(id));
        match rule(graph, id, cx) {
            Outcome::Skip => {}
            Outcome::Decline(reason) => {
                let at = graph.node(id).name_or_op().to_string();
                cx.decline(&at, reason);
            }
            Outcome::Rewrite(patch) => {
                before_rewrite(graph);
                let removed = patch.remove.len();
                // A patch the graph cannot take (it would capture the wrong
                // value in a subgraph, say) is declined, not an error: `apply`
                // checks it first and changes nothing when the check fails.
                if let Err(e) = graph.apply(patch) {
                    let at = graph.node(id).name_or_op().to_string();
                    cx.decline(&at, format!("rewrite not applied: {e}"));
                    continue;
                }
                count += 1;
                // Removed nodes shift the order: step back far enough to see
                // the nodes the patch created where the anchor was.
                i = (i - 1).saturating_sub(removed);
            }
        }
    }
    Ok(count)
}

/// Applies a rule to the main graph and, recursively, to every subgraph.
pub fn apply_rule(
    model: &mut Model,
    cx: &mut PassCx,
    rule: &dyn Fn(&Graph, NodeId, &mut PassCx) -> Outcome,
) -> Result<usize, PassError> {
    let mut total = 0;
    for_each_graph_mut(&mut model.graph, &mut |g| {
        total += apply_rule_to_graph(g, cx, rule)?;
        Ok(())
    })?;
    Ok(total)
}

/// Calls `f` on `graph` and every nested subgraph (innermost first).
pub fn for_each_graph_mut(
    graph: &mut Graph,
    f: &mut dyn FnMut(&mut Graph) -> Result<(), PassError>,
) -> Result<(), PassError> {
    for id in graph.node_ids() {
        let n_attrs = graph.node(id).attributes.len();
        for a in 0..n_attrs {
            let mut subs = std::mem::take(&mut graph.node_mut(id).attributes[a].subgraphs);
            let mut result = Ok(());
            for sg in &mut subs {
                result = for_each_graph_mut(sg, f);
                if result.is_err() {
                    break;
                }
            }
            graph.node_mut(id).attributes[a].subgraphs = subs;
            result?;
        }
        if graph.node(id).has_subgraphs() {
            // A rewritten subgraph may read other outer values than before.
            graph.refresh_captures(id);
        }
    }
    f(graph)
}
