//! `Patch`: the unit of a local rewrite.
//!
//! A rule reads `&Graph` and returns a `Patch` describing new nodes and
//! initializers, which old values they replace, and which nodes go. The graph
//! checks the whole patch before touching anything, so a rule can never leave a
//! half-rewritten graph.

use std::collections::HashSet;

use crate::error::{IrError, Result};
use crate::graph::{Graph, Node, NodeId, ValueId};
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
    /// Every reader of the first value reads the second instead.
    pub rewire: Vec<(ValueId, PatchValue)>,
    pub remove: Vec<NodeId>,
    /// `value_info` types to record on values after the patch is applied
    /// (e.g. a fused node's output keeps the type of the value it replaces).
    pub types: Vec<(PatchValue, TensorType)>,
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
        for (v, _) in &patch.types {
            self.check_patch_value(patch, *v, patch.nodes.len())?;
        }
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
            self.replace_all_uses(old, new);
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
