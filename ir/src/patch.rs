//! `Patch`: the unit of a local rewrite.
//!
//! A rule reads `&Graph` and returns a `Patch` describing new nodes and
//! initializers, which old values they replace, and which nodes go. The graph
//! checks the whole patch before touching anything, so a rule can never leave a
//! half-rewritten graph.

use std::collections::{HashSet, VecDeque};

use crate::error::{IrError, Result};
use crate::graph::{Graph, Node, NodeId, Slot, Use, ValueId};
use crate::shape::TensorType;
use crate::tensor::Tensor;

/// A value a patch refers to: existing, or created by the patch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PatchValue {
    Existing(ValueId),
    /// Output `output` of the patch's node number `node`.
    NewNode {
        node: usize,
        output: usize,
    },
    /// The patch's initializer number.
    NewInit(usize),
}

#[derive(Clone, Debug)]
pub struct NewNode {
    /// op_type, domain, name, attributes (inputs/outputs are ignored).
    pub node: Node,
    pub inputs: Vec<Option<PatchValue>>,
    /// Output names; an empty name takes the name of the value it replaces.
    pub output_names: Vec<String>,
}

#[derive(Clone, Debug, Default)]
pub struct Patch {
    pub nodes: Vec<NewNode>,
    pub initializers: Vec<(String, Tensor)>,
    /// Every reader of the first value (that exists before the patch: the
    /// patch's own nodes keep reading it) reads the second instead, graph
    /// outputs and subgraph captures included.
    pub rewire: Vec<(ValueId, PatchValue)>,
    /// Only the listed node inputs that read a value read another instead:
    /// inserting a node on one edge (a Cast or a Q/DQ pair in front of some
    /// consumers of a tensor, the others keep the original).
    pub redirect: Vec<Redirect>,
    pub remove: Vec<NodeId>,
    /// `value_info` types to record on values after the patch is applied
    /// (e.g. a fused node's output keeps the type of the value it replaces).
    pub types: Vec<(PatchValue, TensorType)>,
}

/// Some readers of `old` read `new` instead (see [`Patch::redirect_uses`]).
#[derive(Clone, Debug)]
pub struct Redirect {
    pub old: ValueId,
    /// Node inputs (never captures) that currently read `old`.
    pub uses: Vec<Use>,
    pub new: PatchValue,
}

impl Patch {
    pub fn new() -> Patch {
        Patch::default()
    }

    /// Adds a node with `outputs` outputs; returns its index in the patch.
    pub fn add_node(
        &mut self,
        node: Node,
        inputs: Vec<Option<PatchValue>>,
        output_names: Vec<String>,
    ) -> usize {
        self.nodes.push(NewNode {
            node,
            inputs,
            output_names,
        });
        self.nodes.len() - 1
    }

    pub fn add_initializer(&mut self, name: &str, tensor: Tensor) -> PatchValue {
        self.initializers.push((name.to_string(), tensor));
        PatchValue::NewInit(self.initializers.len() - 1)
    }

    pub fn replace(&mut self, old: ValueId, new: PatchValue) {
        self.rewire.push((old, new));
    }

    /// The node inputs in `uses` read `new` instead of `old`; other readers of
    /// `old` (and graph outputs) are left alone.
    pub fn redirect_uses(&mut self, old: ValueId, uses: Vec<Use>, new: PatchValue) {
        self.redirect.push(Redirect { old, uses, new });
    }

    /// Inserts `node` on the edges from `value` to the node inputs `uses`:
    /// the new node reads `value` as its input `input_slot` (other inputs
    /// given in `inputs`), and those readers read its first output instead.
    /// Returns the new node's output.
    pub fn insert_on_edge(
        &mut self,
        value: ValueId,
        uses: Vec<Use>,
        node: Node,
        mut inputs: Vec<Option<PatchValue>>,
        input_slot: usize,
        output_name: String,
    ) -> PatchValue {
        if inputs.len() <= input_slot {
            inputs.resize(input_slot + 1, None);
        }
        inputs[input_slot] = Some(PatchValue::Existing(value));
        let n = self.add_node(node, inputs, vec![output_name]);
        let out = PatchValue::NewNode { node: n, output: 0 };
        self.redirect_uses(value, uses, out);
        out
    }

    pub fn remove_node(&mut self, node: NodeId) {
        if !self.remove.contains(&node) {
            self.remove.push(node);
        }
    }

    /// Records `ty` as the `value_info` type of `v` once the patch is applied.
    pub fn set_type(&mut self, v: PatchValue, ty: TensorType) {
        self.types.push((v, ty));
    }

    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty()
            && self.initializers.is_empty()
            && self.rewire.is_empty()
            && self.redirect.is_empty()
            && self.remove.is_empty()
    }
}

impl Graph {
    fn check_patch_value(&self, p: &Patch, v: PatchValue, before_node: usize) -> Result<()> {
        match v {
            PatchValue::Existing(id) => {
                self.try_value(id)
                    .ok_or_else(|| IrError::Invalid("patch refers to a removed value".into()))?;
                if let Some((n, _)) = self.value(id).producer
                    && p.remove.contains(&n)
                {
                    return Err(IrError::Invalid(format!(
                        "patch reads '{}' from a node it removes",
                        self.value(id).name
                    )));
                }
            }
            PatchValue::NewNode { node, output } => {
                if node >= before_node || output >= p.nodes[node].output_names.len() {
                    return Err(IrError::Invalid(
                        "patch refers to a node output it does not create first".into(),
                    ));
                }
            }
            PatchValue::NewInit(i) => {
                if i >= p.initializers.len() {
                    return Err(IrError::Invalid(
                        "patch refers to a missing initializer".into(),
                    ));
                }
            }
        }
        Ok(())
    }

    /// Existing nodes whose outputs `v` is computed from, through the patch's
    /// own nodes (for a new node: the producers of everything it reads).
    fn patch_sources(&self, p: &Patch, v: PatchValue, out: &mut HashSet<NodeId>) {
        let mut stack = vec![v];
        let mut seen_new: HashSet<usize> = HashSet::new();
        while let Some(v) = stack.pop() {
            match v {
                PatchValue::Existing(id) => {
                    if let Some((n, _)) = self.value(id).producer {
                        out.insert(n);
                    }
                }
                PatchValue::NewNode { node, .. } => {
                    if seen_new.insert(node) {
                        stack.extend(p.nodes[node].inputs.iter().flatten().copied());
                    }
                }
                PatchValue::NewInit(_) => {}
            }
        }
    }

    /// A rewire or redirect must not make a value depend on itself: the
    /// readers it redirects must not reach (through the graph as it stays)
    /// any node the new value is computed from.
    fn check_patch_acyclic(&self, p: &Patch, removed: &HashSet<NodeId>) -> Result<()> {
        let mut edges: Vec<(Vec<NodeId>, PatchValue, ValueId)> = Vec::new();
        for &(old, new) in &p.rewire {
            let readers = self.value(old).uses.iter().map(|u| u.node).collect();
            edges.push((readers, new, old));
        }
        for r in &p.redirect {
            edges.push((r.uses.iter().map(|u| u.node).collect(), r.new, r.old));
        }
        // Marks indexed by node id (ids are dense), one stamp per search: the
        // search walks everything downstream of the readers, so on a graph of
        // thousands of nodes this runs for every patch and must be cheap.
        // What is marked: 1 = removed, 2 = a source; `seen` = visited in the
        // search with that stamp.
        let len = self.node_slots();
        let mut role = vec![0u8; len];
        for n in removed {
            role[n.0 as usize] = 1;
        }
        let mut seen = vec![0u32; len];
        let mut queue: VecDeque<NodeId> = VecDeque::new();
        for (stamp, (readers, new, old)) in (1u32..).zip(edges) {
            let mut sources = HashSet::new();
            self.patch_sources(p, new, &mut sources);
            sources.retain(|n| !removed.contains(n));
            if sources.is_empty() {
                continue;
            }
            for n in &sources {
                role[n.0 as usize] = 2;
            }
            queue.clear();
            queue.extend(readers.into_iter().filter(|n| role[n.0 as usize] != 1));
            let mut cycle = None;
            while let Some(n) = queue.pop_front() {
                let i = n.0 as usize;
                if seen[i] == stamp {
                    continue;
                }
                seen[i] = stamp;
                if role[i] == 2 {
                    cycle = Some(n);
                    break;
                }
                for v in self.node(n).outputs.iter().flatten() {
                    for u in &self.value(*v).uses {
                        let j = u.node.0 as usize;
                        if role[j] != 1 && seen[j] != stamp {
                            queue.push_back(u.node);
                        }
                    }
                }
            }
            if let Some(n) = cycle {
                return Err(IrError::Invalid(format!(
                    "patch would create a cycle: node '{}' reads the replacement of '{}' and also feeds it",
                    self.node(n).name_or_op(),
                    self.value(old).name
                )));
            }
            for n in &sources {
                role[n.0 as usize] = 0;
            }
        }
        Ok(())
    }

    /// Checks `patch` against the graph without changing anything.
    pub fn check_patch(&self, patch: &Patch) -> Result<()> {
        let removed: HashSet<NodeId> = patch.remove.iter().copied().collect();
        for &n in &patch.remove {
            self.try_node(n)
                .ok_or_else(|| IrError::Invalid("patch removes a node that is gone".into()))?;
        }
        for (i, nn) in patch.nodes.iter().enumerate() {
            for v in nn.inputs.iter().flatten() {
                self.check_patch_value(patch, *v, i)?;
            }
        }
        let mut rewired: HashSet<ValueId> = HashSet::new();
        for &(old, new) in &patch.rewire {
            self.try_value(old)
                .ok_or_else(|| IrError::Invalid("patch rewires a removed value".into()))?;
            self.check_patch_value(patch, new, patch.nodes.len())?;
            if new == PatchValue::Existing(old) || !rewired.insert(old) {
                return Err(IrError::Invalid(format!(
                    "patch rewires '{}' twice or to itself",
                    self.value(old).name
                )));
            }
            if let PatchValue::Existing(n) = new
                && !self.can_replace(old, n)
            {
                return Err(IrError::Invalid(format!(
                    "a subgraph reading '{}' has a local value named '{}'",
                    self.value(old).name,
                    self.value(n).name
                )));
            }
        }
        for r in &patch.redirect {
            self.try_value(r.old)
                .ok_or_else(|| IrError::Invalid("patch redirects a removed value".into()))?;
            self.check_patch_value(patch, r.new, patch.nodes.len())?;
            let old = self.value(r.old);
            if rewired.contains(&r.old) {
                return Err(IrError::Invalid(format!(
                    "patch both rewires and redirects '{}'",
                    old.name
                )));
            }
            for u in &r.uses {
                if !matches!(u.slot, Slot::Input(_)) || !old.uses.contains(u) {
                    return Err(IrError::Invalid(format!(
                        "patch redirects a use of '{}' that does not exist (or is a subgraph capture)",
                        old.name
                    )));
                }
                if removed.contains(&u.node) {
                    return Err(IrError::Invalid(format!(
                        "patch redirects '{}' into node '{}', which it removes",
                        old.name,
                        self.node(u.node).name_or_op()
                    )));
                }
            }
        }
        for (v, _) in &patch.types {
            self.check_patch_value(patch, *v, patch.nodes.len())?;
        }
        self.check_patch_acyclic(patch, &removed)?;
        // Every output of a removed node must have lost all readers outside the
        // removed set, or be rewired.
        for &n in &patch.remove {
            for v in self.node(n).outputs.iter().flatten() {
                if rewired.contains(v) {
                    continue;
                }
                let value = self.value(*v);
                let outside = value.uses.iter().any(|u| !removed.contains(&u.node));
                if outside || self.is_graph_output(*v) {
                    return Err(IrError::Invalid(format!(
                        "patch removes node '{}' but '{}' is still read",
                        self.node(n).name_or_op(),
                        value.name
                    )));
                }
            }
        }
        Ok(())
    }

    /// Applies `patch` atomically: it is checked first and then applied in full.
    pub fn apply(&mut self, patch: Patch) -> Result<()> {
        self.check_patch(&patch)?;
        let at = patch
            .remove
            .iter()
            .filter_map(|&n| self.position(n))
            .max()
            .map(|p| p + 1)
            .unwrap_or(self.order.len());
        let inits: Vec<ValueId> = patch
            .initializers
            .into_iter()
            .map(|(name, t)| self.add_initializer(&name, t))
            .collect();
        let mut created: Vec<Vec<Option<ValueId>>> = Vec::new();
        let resolve = |created: &Vec<Vec<Option<ValueId>>>, v: PatchValue| -> Option<ValueId> {
            match v {
                PatchValue::Existing(id) => Some(id),
                PatchValue::NewNode { node, output } => created[node][output],
                PatchValue::NewInit(i) => Some(inits[i]),
            }
        };
        let mut fresh: HashSet<ValueId> = HashSet::new();
        let mut new_nodes: HashSet<NodeId> = HashSet::new();
        for (i, nn) in patch.nodes.into_iter().enumerate() {
            let mut node = nn.node;
            node.inputs = nn
                .inputs
                .iter()
                .map(|v| v.and_then(|v| resolve(&created, v)))
                .collect();
            // Give empty names a placeholder so the node has an output; the
            // rewire below passes the replaced value's name on.
            let names: Vec<String> = nn
                .output_names
                .iter()
                .enumerate()
                .map(|(k, n)| {
                    if n.is_empty() {
                        format!("\u{0}patch{i}.{k}")
                    } else {
                        n.clone()
                    }
                })
                .collect();
            let refs: Vec<&str> = names.iter().map(|s| s.as_str()).collect();
            let id = self.insert_node(at + i, node, &refs);
            new_nodes.insert(id);
            let outs = self.node(id).outputs.clone();
            fresh.extend(outs.iter().flatten().copied());
            created.push(outs);
        }
        for (old, new) in patch.rewire {
            let Some(new) = resolve(&created, new) else {
                continue;
            };
            let old_name = self.value(old).name.clone();
            let was_output = self.is_graph_output(old);
            // Give a new value its final name before the subgraphs that read
            // `old` are pointed at it (they refer to it by name).
            if fresh.contains(&new) && !was_output && self.value(new).name.starts_with('\u{0}') {
                self.value_mut(new).name = old_name.clone();
            }
            // The patch's own nodes keep reading `old` (a node inserted in
            // front of all readers reads the value it replaces).
            let own: Vec<Use> = self
                .value(old)
                .uses
                .iter()
                .filter(|u| new_nodes.contains(&u.node))
                .copied()
                .collect();
            self.value_mut(old)
                .uses
                .retain(|u| !new_nodes.contains(&u.node));
            self.replace_all_uses(old, new);
            self.value_mut(old).uses.extend(own);
            if fresh.contains(&new) && !was_output && self.value(new).name.starts_with('\u{0}') {
                self.value_mut(new).name = old_name;
            }
            // A value created to replace another computes the same tensor: it
            // inherits the declared type, so later rules still see the shape.
            if fresh.contains(&new)
                && self.value(new).info.is_none()
                && let Some(info) = self.value(old).info.clone()
            {
                self.value_mut(new).info = Some(info);
                if !self.value_info_order.contains(&new) {
                    self.value_info_order.push(new);
                }
            }
        }
        for r in patch.redirect {
            let Some(new) = resolve(&created, r.new) else {
                continue;
            };
            for u in r.uses {
                if let Slot::Input(i) = u.slot {
                    self.node_mut(u.node).inputs[i as usize] = Some(new);
                    self.value_mut(r.old).uses.retain(|x| *x != u);
                    self.value_mut(new).uses.push(u);
                }
            }
            if fresh.contains(&new)
                && self.value(new).info.is_none()
                && let Some(info) = self.value(r.old).info.clone()
            {
                // Same shape; the element type may differ (a Cast): the
                // caller records the new type with `set_type`.
                self.value_mut(new).info = Some(info);
                if !self.value_info_order.contains(&new) {
                    self.value_info_order.push(new);
                }
            }
        }
        for v in fresh {
            if self.value(v).name.starts_with('\u{0}') {
                self.value_mut(v).name.clear();
            }
        }
        for (v, ty) in &patch.types {
            if let Some(v) = resolve(&created, *v) {
                self.set_value_type(v, ty);
            }
        }
        for n in patch.remove {
            let outs: Vec<ValueId> = self.node(n).outputs.iter().flatten().copied().collect();
            self.remove_node(n);
            for v in outs {
                if self.value(v).uses.is_empty() && !self.is_graph_output(v) {
                    self.remove_value(v);
                }
            }
        }
        Ok(())
    }
}
