//! Removes everything the graph outputs do not depend on.
//!
//! ## What it does
//! Deletes nodes whose outputs nobody reads, initializers and sparse
//! initializers nobody reads, `value_info` entries of values that no longer
//! exist, unused outer-scope references in subgraphs, local functions no node
//! calls, and opset imports of domains no node uses. Graph inputs and outputs
//! are the model's interface and are always kept.
//!
//! ## When it declines
//! Unread nodes of custom domains (not the ONNX default domain or
//! `com.microsoft`) are kept: their semantics are unknown and they may have
//! side effects. Each is reported as declined.
//!
//! ## Numerics
//! None: nothing that reaches an output changes.
//!
//! ## Example
//! `Shape(x) -> Gather -> (unused)` and an unused initializer `w_old` are
//! removed; `y = Relu(x)` with `y` a graph output stays.

crate::register_pass! {
    name: "eliminate-dead",
    kind: Eliminate,
    file: "eliminate_dead.rs",
    options: crate::registry::NoOptions,
    build: |_| EliminateDead,
    numerics: Exact,
}

use std::collections::BTreeSet;

use infopt_ir::{Graph, Model, NodeId};

use crate::pass::{Pass, PassCx, PassError};
use crate::rule::for_each_graph_mut;
use crate::util::is_known_domain;

pub struct EliminateDead;

fn sweep_graph(g: &mut Graph, cx: &mut PassCx) -> usize {
    let mut removed = 0;
    // Reverse topological order removes whole dead chains in one sweep.
    let order: Vec<NodeId> = g.topological_order().unwrap_or_else(|_| g.node_ids());
    for &id in order.iter().rev() {
        let node = g.node(id);
        let dead = node
            .outputs
            .iter()
            .flatten()
            .all(|&v| g.reader_count(v) == 0);
        if !dead {
            continue;
        }
        if !is_known_domain(node.domain()) {
            let at = node.name_or_op().to_string();
            cx.decline(
                &at,
                format!(
                    "unused node of custom domain '{}' kept: it may have side effects",
                    node.domain()
                ),
            );
            continue;
        }
        let outputs: Vec<_> = node.outputs.iter().flatten().copied().collect();
        g.remove_node(id);
        for v in outputs {
            g.remove_value(v);
        }
        removed += 1;
    }
    // Values left without producer, data or readers: unused initializers,
    // outer references, value_info labels of removed values.
    let values: Vec<_> = g.value_ids().collect();
    for v in values {
        let value = g.value(v);
        if g.reader_count(v) > 0 || g.is_graph_input(v) || value.producer.is_some() {
            continue;
        }
        if value.initializer.is_some() || value.sparse.is_some() {
            removed += 1;
        }
        g.remove_value(v);
    }
    removed
}

/// Domains used by the nodes of `g` and its subgraphs.
fn used_domains(g: &Graph, out: &mut BTreeSet<String>) {
    for (_, n) in g.nodes() {
        out.insert(n.domain().to_string());
        for sg in n.subgraphs() {
            used_domains(sg, out);
        }
    }
}

fn used_ops(g: &Graph, out: &mut BTreeSet<(String, String)>) {
    for (_, n) in g.nodes() {
        out.insert((n.domain().to_string(), n.op_type.clone()));
        for sg in n.subgraphs() {
            used_ops(sg, out);
        }
    }
}

/// Ops a function-body node uses, including those inside its If/Loop
/// bodies (function nodes stay protobuf; they are not IR graphs).
fn function_node_ops(n: &infopt_ir::proto::NodeProto, ops: &mut BTreeSet<(String, String)>) {
    let d = n.domain.clone().unwrap_or_default();
    ops.insert((
        if d == "ai.onnx" { String::new() } else { d },
        n.op_type.clone().unwrap_or_default(),
    ));
    for a in &n.attribute {
        for g in a.g.iter().chain(a.graphs.iter()) {
            for inner in &g.node {
                function_node_ops(inner, ops);
            }
        }
    }
}

impl Pass for EliminateDead {
    fn name(&self) -> &'static str {
        "eliminate-dead"
    }

    fn run(&self, model: &mut Model, cx: &mut PassCx) -> Result<usize, PassError> {
        let mut removed = 0;
        for_each_graph_mut(&mut model.graph, &mut |g| {
            removed += sweep_graph(g, cx);
            Ok(())
        })?;

        // Local functions reachable from the graph (functions may call functions).
        let mut ops = BTreeSet::new();
        used_ops(&model.graph, &mut ops);
        let functions = &model.meta.functions;
        let key = |f: &infopt_ir::proto::FunctionProto| {
            (
                f.domain.clone().unwrap_or_default(),
                f.name.clone().unwrap_or_default(),
            )
        };
        let mut live = vec![false; functions.len()];
        loop {
            let mut grew = false;
            for (i, f) in functions.iter().enumerate() {
                if !live[i] && ops.contains(&key(f)) {
                    live[i] = true;
                    grew = true;
                    for n in &f.node {
                        function_node_ops(n, &mut ops);
                    }
                }
            }
            if !grew {
                break;
            }
        }
        let before = functions.len();
        let mut i = 0;
        model.meta.functions.retain(|_| {
            i += 1;
            live[i - 1]
        });
        removed += before - model.meta.functions.len();

        let mut domains: BTreeSet<String> = ops.iter().map(|(d, _)| d.clone()).collect();
        used_domains(&model.graph, &mut domains);
        let before = model.meta.opset_import.len();
        model.meta.opset_import.retain(|o| {
            let d = o.domain.clone().unwrap_or_default();
            // The default domain is always kept: every model must import it.
            d.is_empty() || d == "ai.onnx" || domains.contains(&d)
        });
        removed += before - model.meta.opset_import.len();
        Ok(removed)
    }
}
