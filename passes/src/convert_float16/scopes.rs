//! The conversion inside If/Loop/Scan subgraphs.
//!
//! Each subgraph is planned and rewritten like the main graph, with its
//! inputs and outputs kept float32: the If/Loop/Scan node's outputs keep
//! their types, so both branches of an If agree and a Loop's carried state
//! has one type in and out, and readers outside see what they saw before.
//! What a subgraph reads from an enclosing graph is typed by the enclosing
//! graph *after* its rewrite: a value computed there in the half type is
//! read directly by the subgraph's converted nodes and through a Cast by
//! its float32 ones; a float32 value read in half gets a Cast inside the
//! subgraph, except a weight that every reader, in every subgraph, reads in
//! half: it is converted in place where it is stored. A precision override
//! to float32 on the If/Loop/Scan node keeps its subgraphs float32 whole
//! (how the float32 island search keeps them).

use std::collections::{HashMap, HashSet};

use infopt_ir::{DataType, Graph, Node, NodeId, ValueId};

use super::half_type::ConvertFloat;
use super::plan::{Plan, PlanTree};
use super::rewrite::RewriteStats;
use super::values;
use crate::pass::{PassCx, PassError};
use crate::precision::PrecisionMap;

/// What the conversion did, over the main graph and every subgraph.
#[derive(Default)]
pub(super) struct Totals {
    pub stats: RewriteStats,
    pub converted: usize,
    pub kept: usize,
    pub islands: usize,
    pub removed: usize,
    /// Converted nodes inside subgraphs, and the subgraphs holding them.
    pub sub_converted: usize,
    pub subgraphs: usize,
}


impl PlanTree {
    /// Whether the plan converts a node of `g` (subgraphs included) that
    /// `pick` selects; a selected If/Loop/Scan counts when its subgraphs
    /// convert anything.
    pub(super) fn converts_any(&self, g: &Graph, pick: &dyn Fn(&Node) -> bool) -> bool {
        for (id, node) in g.nodes() {
            let picked = pick(node);
            if picked && self.plan.convert.contains(&id) {
                return true;
            }
            for (ai, a) in node.attributes.iter().enumerate() {
                for (si, sg) in a.subgraphs.iter().enumerate() {
                    let Some(t) = self.subs.get(&(id, ai, si)) else {
                        continue;
                    };
                    let sub_pick: &dyn Fn(&Node) -> bool = if picked { &|_| true } else { pick };
                    if t.converts_any(sg, sub_pick) {
                        return true;
                    }
                }
            }
        }
        false
    }
}

/// The element types a subgraph of `g` sees by name: `outer`, then `g`'s
/// own values.
fn scope_of(g: &Graph, outer: &HashMap<String, DataType>) -> HashMap<String, DataType> {
    let mut scope = outer.clone();
    for v in g.value_ids() {
        let value = g.value(v);
        if value.outer {
            continue;
        }
        if let Some(t) = g.value_type(v) {
            scope.insert(value.name.clone(), t.dtype);
        }
    }
    scope
}

impl ConvertFloat {
    /// Plans `g` and, recursively, its subgraphs. `kept`: why an enclosing
    /// If/Loop/Scan node stays float32 with its subgraphs (then nothing
    /// here converts).
    #[allow(clippy::too_many_arguments)]
    pub(super) fn plan_tree(
        &self,
        g: &Graph,
        opset: i64,
        map: &PrecisionMap,
        cx: &mut PassCx,
        scope: &HashMap<String, DataType>,
        keep_io: bool,
        kept: Option<&str>,
    ) -> PlanTree {
        let plan = match kept {
            Some(_) => Plan::typed(g, scope),
            None => self.plan(g, opset, map, cx, scope, keep_io),
        };
        let islands = plan.islands(g).len();
        let inner = scope_of(g, scope);
        let mut subs = HashMap::new();
        for (id, node) in g.nodes() {
            if !node.has_subgraphs() {
                continue;
            }
            let why = match kept {
                Some(w) => Some(w.to_string()),
                None => match map.override_for(node) {
                    Some(o) if o.to != self.to.precision() => {
                        let why = o
                            .why
                            .clone()
                            .unwrap_or_else(|| format!("the override for {} says {}", o.selector, o.to));
                        cx.decline(
                            node.name_or_op(),
                            format!("kept in fp32 with its subgraphs: {why}"),
                        );
                        Some(why)
                    }
                    _ => None,
                },
            };
            for (ai, a) in node.attributes.iter().enumerate() {
                for (si, sg) in a.subgraphs.iter().enumerate() {
                    let tree = self.plan_tree(sg, opset, map, cx, &inner, true, why.as_deref());
                    subs.insert((id, ai, si), tree);
                }
            }
        }
        PlanTree {
            plan,
            subs,
            islands,
        }
    }

    /// Rewrites `g` by its plan, then its subgraphs by theirs, with the
    /// types `g` has after its rewrite. `outer_now`: the element types of
    /// the enclosing graphs' values after theirs.
    pub(super) fn rewrite_tree(
        &self,
        g: &mut Graph,
        tree: &PlanTree,
        cx: &mut PassCx,
        outer_now: &HashMap<String, DataType>,
        keep_io: bool,
        totals: &mut Totals,
    ) -> Result<(), PassError> {
        let half = self.to.dtype();
        // Values read from the enclosing graph that it now computes in half.
        let outer_half: HashSet<ValueId> = g
            .value_ids()
            .filter(|&v| {
                let value = g.value(v);
                value.outer
                    && tree.plan.dt(v) == DataType::Float
                    && outer_now.get(&value.name) == Some(&half)
            })
            .collect();
        let stats = self.rewrite(g, &tree.plan, cx, keep_io, &outer_half, tree)?;
        totals.removed += values::cancel_casts(g);
        totals.converted += tree.plan.convert.len();
        totals.kept += tree.plan.kept;
        totals.islands += tree.islands;
        totals.stats.add(&stats);
        // Casts added and removed here may have renamed what the subgraphs
        // read: link their captures again before typing them.
        let controls: Vec<NodeId> = g
            .nodes()
            .filter(|(_, n)| n.has_subgraphs())
            .map(|(id, _)| id)
            .collect();
        for &id in &controls {
            g.refresh_captures(id);
        }
        let now = scope_of(g, outer_now);
        for id in controls {
            let count = g.node(id).attributes.len();
            for ai in 0..count {
                let subgraphs = g.node(id).attributes[ai].subgraphs.len();
                for si in 0..subgraphs {
                    let Some(sub) = tree.subs.get(&(id, ai, si)) else {
                        continue;
                    };
                    let sg = &mut g.node_mut(id).attributes[ai].subgraphs[si];
                    self.rewrite_tree(sg, sub, cx, &now, true, totals)?;
                    if sub.plan.convert.is_empty() {
                        continue;
                    }
                    totals.subgraphs += 1;
                    totals.sub_converted += sub.plan.convert.len();
                }
            }
            g.refresh_captures(id);
        }
        Ok(())
    }
}
