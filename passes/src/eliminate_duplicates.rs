//! Common-subexpression elimination and deduplication of initializers.
//!
//! ## What it does
//! Two initializers with the same type, shape and bytes become one; two nodes
//! with the same op, domain, attributes and inputs become one (the first in
//! topological order stays, readers of the other are redirected). Merging
//! cascades: nodes that become identical because their inputs merged are
//! merged in the same sweep.
//!
//! ## When it declines
//! Non-deterministic ops (`RandomNormal`, `Bernoulli`, ...), nodes with
//! subgraphs, ops of custom domains (unknown semantics), and pairs whose
//! outputs are both graph outputs (each output must stay a distinct value).
//! Initializers that are also graph inputs are never merged (they can be
//! overridden at run time).
//!
//! ## Numerics
//! Exact: the merged values are computed by the same op from the same inputs.
//!
//! ## Example
//! `a = Shape(x)`, `b = Shape(x)`, `y = Concat(a, b)` becomes
//! `a = Shape(x)`, `y = Concat(a, a)`.

crate::register_pass! {
    name: "eliminate-duplicates",
    kind: Eliminate,
    file: "eliminate_duplicates.rs",
    options: crate::registry::NoOptions,
    build: |_| EliminateDuplicates,
}

use std::collections::HashMap;
use std::hash::{DefaultHasher, Hash, Hasher};

use infopt_ir::{Graph, Model, NodeId, ValueId};

use crate::pass::{Pass, PassCx, PassError};
use crate::rule::for_each_graph_mut;
use crate::util::{is_known_domain, is_nondeterministic, is_renamable};

pub struct EliminateDuplicates;

/// A few windows of a tensor's bytes plus its length: enough to tell almost
/// every pair of different tensors apart without reading (or paging in) whole
/// multi-gigabyte weights. Candidates that share a key are compared in full.
fn sample(bytes: &[u8]) -> (usize, &[u8], &[u8], &[u8]) {
    const W: usize = 256;
    let n = bytes.len();
    let mid = n / 2;
    (
        n,
        &bytes[..n.min(W)],
        &bytes[mid.min(n.saturating_sub(W))..(mid + W).min(n)],
        &bytes[n.saturating_sub(W)..],
    )
}

fn dedup_initializers(g: &mut Graph) -> usize {
    let mut seen: HashMap<u64, Vec<ValueId>> = HashMap::new();
    let mut merged = 0;
    let inits: Vec<ValueId> = g.initializers().map(|(v, _)| v).collect();
    for v in inits {
        if g.is_graph_input(v) {
            continue;
        }
        let t = g.value(v).initializer.as_ref().expect("initializer");
        let Ok(bytes) = t.raw_bytes() else { continue };
        let mut h = DefaultHasher::new();
        t.dtype().code().hash(&mut h);
        t.dims().hash(&mut h);
        sample(&bytes).hash(&mut h);
        if t.dtype() == infopt_ir::DataType::String {
            t.proto.string_data.hash(&mut h);
        }
        let key = h.finish();
        let candidates = seen.entry(key).or_default();
        let same = candidates.iter().copied().find(|&c| {
            let a = g.value(c).initializer.as_ref().expect("initializer");
            a.dtype() == t.dtype()
                && a.dims() == t.dims()
                && a.raw_bytes().ok() == t.raw_bytes().ok()
                && a.proto.string_data == t.proto.string_data
        });
        match same {
            Some(keep)
                if g.can_replace(v, keep)
                    && !(g.is_graph_output(v) && g.is_graph_output(keep))
                    && (!g.is_graph_output(v) || is_renamable(g, keep)) =>
            {
                g.replace_all_uses(v, keep);
                g.remove_value(v);
                merged += 1;
            }
            _ => candidates.push(v),
        }
    }
    merged
}

/// Key of a node for CSE: op, domain, inputs, encoded attributes, output count.
type NodeKey = (String, String, Vec<Option<ValueId>>, Vec<Vec<u8>>, usize);

/// Key of a node for CSE: op, domain, inputs and encoded attributes.
fn node_key(g: &Graph, id: NodeId) -> Option<NodeKey> {
    let n = g.node(id);
    if n.has_subgraphs() || is_nondeterministic(&n.op_type) || !is_known_domain(n.domain()) {
        return None;
    }
    Some((
        n.op_type.clone(),
        n.domain().to_string(),
        n.inputs.clone(),
        n.encoded_attributes(),
        n.outputs.len(),
    ))
}

fn cse(g: &mut Graph, cx: &mut PassCx) -> Result<usize, PassError> {
    g.sort_topologically()?;
    let mut table: HashMap<_, NodeId> = HashMap::new();
    let mut merged = 0;
    for id in g.node_ids() {
        if g.try_node(id).is_none() {
            continue;
        }
        let Some(key) = node_key(g, id) else { continue };
        let Some(&keep) = table.get(&key) else {
            table.insert(key, id);
            continue;
        };
        let dup_outs: Vec<Option<ValueId>> = g.node(id).outputs.clone();
        let keep_outs: Vec<Option<ValueId>> = g.node(keep).outputs.clone();
        let conflict = dup_outs.iter().zip(&keep_outs).any(|(d, k)| match (d, k) {
            (Some(d), Some(k)) => {
                (g.is_graph_output(*d) && g.is_graph_output(*k))
                    || (g.is_graph_output(*d) && !is_renamable(g, *k))
            }
            (Some(d), None) => g.reader_count(*d) > 0,
            _ => false,
        });
        let conflict = conflict
            || dup_outs.iter().zip(&keep_outs).any(|(d, k)| match (d, k) {
                (Some(d), Some(k)) => !g.can_replace(*d, *k),
                _ => false,
            });
        if conflict {
            let at = g.node(id).name_or_op().to_string();
            let other = g.node(keep).name_or_op().to_string();
            cx.decline(
                &at,
                format!(
                    "duplicate of '{other}' but both outputs are part of the graph's interface"
                ),
            );
            continue;
        }
        for (d, k) in dup_outs.iter().zip(&keep_outs) {
            if let (Some(d), Some(k)) = (d, k) {
                g.replace_all_uses(*d, *k);
            }
        }
        g.remove_node(id);
        for v in dup_outs.into_iter().flatten() {
            g.remove_value(v);
        }
        merged += 1;
    }
    Ok(merged)
}

impl Pass for EliminateDuplicates {
    fn name(&self) -> &'static str {
        "eliminate-duplicates"
    }

    fn run(&self, model: &mut Model, cx: &mut PassCx) -> Result<usize, PassError> {
        let mut count = 0;
        for_each_graph_mut(&mut model.graph, &mut |g| {
            count += dedup_initializers(g);
            count += cse(g, cx)?;
            Ok(())
        })?;
        Ok(count)
    }
}
