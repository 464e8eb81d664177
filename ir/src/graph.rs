//! The arena graph.
//!
//! Nodes and values live in vectors and are addressed by [`NodeId`] /
//! [`ValueId`]. Each value knows its producer and its uses, so "who reads this"
//! is a lookup, not a scan. Names are labels kept for ONNX, reports and
//! calibration caches: a rewrite keeps the name of the value it replaces, and
//! names are made unique once, when the graph is saved.

use std::collections::{HashMap, HashSet};

use crate::error::{IrError, Result};
use crate::proto::{
    AttributeProto, GraphProto, NodeProto, SparseTensorProto, TypeProto, ValueInfoProto,
    tensor_shape, type_proto,
};
use crate::shape::{Dim, TensorType};
use crate::tensor::Tensor;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct NodeId(pub u32);

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ValueId(pub u32);

/// How a node uses a value.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Slot {
    /// As its input number `n`.
    Input(u32),
    /// Through one of its subgraphs, which reads the value from the enclosing scope.
    Capture,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Use {
    pub node: NodeId,
    pub slot: Slot,
}

#[derive(Clone, Debug, Default)]
pub struct Value {
    pub name: String,
    /// The node and output slot that computes this value.
    pub producer: Option<(NodeId, u32)>,
    /// Constant data (a graph initializer).
    pub initializer: Option<Tensor>,
    /// A sparse initializer. Boxed, as `info` is: a value is kept per
    /// tensor of the graph, in every copy of it, and these are rare.
    pub sparse: Option<Box<SparseTensorProto>>,
    /// The `value_info` entry describing this value (its name field unused).
    pub info: Option<Box<ValueInfoProto>>,
    /// Defined in an enclosing graph; only subgraphs have such values.
    pub outer: bool,
    pub uses: Vec<Use>,
}

/// One node attribute. Graph-valued attributes hold IR graphs; everything else
/// stays in the original proto so it round-trips unchanged.
#[derive(Clone, Debug)]
pub struct Attribute {
    /// The attribute without its graph fields (`g`, `graphs`).
    pub proto: AttributeProto,
    /// The subgraph(s) of a GRAPH / GRAPHS attribute.
    pub subgraphs: Vec<Graph>,
    /// True when the subgraph came from the singular `g` field.
    pub single_graph: bool,
}

#[derive(Clone, Debug, Default)]
pub struct Node {
    pub name: Option<String>,
    pub op_type: String,
    pub domain: Option<String>,
    /// `None` is an omitted optional input (an empty name in ONNX).
    pub inputs: Vec<Option<ValueId>>,
    pub outputs: Vec<Option<ValueId>>,
    pub attributes: Vec<Attribute>,
    /// Remaining NodeProto fields (doc_string, overload, metadata_props,
    /// device_configurations), kept for the round trip.
    pub extra: NodeProto,
}

/// A graph input or output: the value and the ValueInfoProto that declared it.
#[derive(Clone, Debug)]
pub struct GraphIo {
    pub value: ValueId,
    pub info: ValueInfoProto,
}

#[derive(Clone, Debug, Default)]
pub struct Graph {
    nodes: Vec<Option<Node>>,
    values: Vec<Option<Value>>,
    /// Node order as loaded / inserted. Saved in topological order.
    pub(crate) order: Vec<NodeId>,
    pub inputs: Vec<GraphIo>,
    pub outputs: Vec<GraphIo>,
    pub(crate) initializer_order: Vec<ValueId>,
    pub(crate) sparse_order: Vec<ValueId>,
    pub(crate) value_info_order: Vec<ValueId>,
    /// name, doc_string, quantization_annotation, metadata_props.
    pub meta: GraphProto,
}

/// Ops whose result differs between runs; never merged, shared or folded.
pub fn is_nondeterministic(op: &str) -> bool {
    matches!(
        op,
        "RandomNormal"
            | "RandomUniform"
            | "RandomNormalLike"
            | "RandomUniformLike"
            | "Multinomial"
            | "Bernoulli"
    )
}

impl Node {
    /// The attributes, each encoded, in a sorted order: two nodes whose
    /// lists are equal have the same attributes whatever their order.
    pub fn encoded_attributes(&self) -> Vec<Vec<u8>> {
        use prost::Message;
        let mut attrs: Vec<Vec<u8>> = self
            .attributes
            .iter()
            .map(|a| a.proto.encode_to_vec())
            .collect();
        attrs.sort();
        attrs
    }

    pub fn new(op_type: &str) -> Node {
        Node {
            op_type: op_type.to_string(),
            ..Default::default()
        }
    }

    pub fn name_or_op(&self) -> &str {
        match self.name.as_deref() {
            Some(n) if !n.is_empty() => n,
            _ => &self.op_type,
        }
    }

    /// Domain with the ONNX default spelled as "".
    pub fn domain(&self) -> &str {
        match self.domain.as_deref() {
            None | Some("ai.onnx") => "",
            Some(d) => d,
        }
    }

    /// True for an op of the default ONNX domain with this type.
    pub fn is(&self, op_type: &str) -> bool {
        self.op_type == op_type && self.domain().is_empty()
    }

    /// All subgraphs held by this node's attributes.
    pub fn subgraphs(&self) -> impl Iterator<Item = &Graph> {
        self.attributes.iter().flat_map(|a| a.subgraphs.iter())
    }

    pub fn subgraphs_mut(&mut self) -> impl Iterator<Item = &mut Graph> {
        self.attributes
            .iter_mut()
            .flat_map(|a| a.subgraphs.iter_mut())
    }

    pub fn has_subgraphs(&self) -> bool {
        self.attributes.iter().any(|a| !a.subgraphs.is_empty())
    }
}

impl Value {
    pub fn named(name: &str) -> Value {
        Value {
            name: name.to_string(),
            ..Default::default()
        }
    }

    /// The tensor type declared in `value_info`, if any.
    pub fn tensor_type(&self) -> Option<TensorType> {
        self.info
            .as_ref()
            .and_then(|i| i.r#type.as_ref())
            .and_then(TensorType::from_proto)
    }
}

impl Graph {
    pub fn new(name: &str) -> Graph {
        Graph {
            meta: GraphProto {
                name: Some(name.to_string()),
                ..Default::default()
            },
            ..Default::default()
        }
    }

    pub fn name(&self) -> &str {
        self.meta.name.as_deref().unwrap_or("")
    }

    // ----- access -----

    pub fn node(&self, id: NodeId) -> &Node {
        self.nodes[id.0 as usize]
            .as_ref()
            .expect("node id refers to a removed node")
    }

    pub fn node_mut(&mut self, id: NodeId) -> &mut Node {
        self.nodes[id.0 as usize]
            .as_mut()
            .expect("node id refers to a removed node")
    }

    /// One more than the largest node id ever given out (ids index this).
    pub(crate) fn node_slots(&self) -> usize {
        self.nodes.len()
    }

    pub fn try_node(&self, id: NodeId) -> Option<&Node> {
        self.nodes.get(id.0 as usize).and_then(|n| n.as_ref())
    }

    pub fn value(&self, id: ValueId) -> &Value {
        self.values[id.0 as usize]
            .as_ref()
            .expect("value id refers to a removed value")
    }

    pub fn value_mut(&mut self, id: ValueId) -> &mut Value {
        self.values[id.0 as usize]
            .as_mut()
            .expect("value id refers to a removed value")
    }

    pub fn try_value(&self, id: ValueId) -> Option<&Value> {
        self.values.get(id.0 as usize).and_then(|v| v.as_ref())
    }

    /// Live nodes in their current order (not necessarily topological after edits).
    pub fn node_ids(&self) -> Vec<NodeId> {
        self.order.clone()
    }

    pub fn nodes(&self) -> impl Iterator<Item = (NodeId, &Node)> {
        self.order.iter().map(move |&id| (id, self.node(id)))
    }

    pub fn node_count(&self) -> usize {
        self.order.len()
    }

    /// The node at position `i` of the current order.
    pub fn node_at(&self, i: usize) -> NodeId {
        self.order[i]
    }

    pub fn value_ids(&self) -> impl Iterator<Item = ValueId> + '_ {
        self.values
            .iter()
            .enumerate()
            .filter(|(_, v)| v.is_some())
            .map(|(i, _)| ValueId(i as u32))
    }

    pub fn initializers(&self) -> impl Iterator<Item = (ValueId, &Tensor)> {
        self.initializer_order
            .iter()
            .filter_map(move |&v| self.value(v).initializer.as_ref().map(|t| (v, t)))
    }

    pub fn sparse_initializers(&self) -> impl Iterator<Item = (ValueId, &SparseTensorProto)> {
        self.sparse_order
            .iter()
            .filter_map(move |&v| self.value(v).sparse.as_deref().map(|t| (v, t)))
    }

    pub fn value_info_ids(&self) -> &[ValueId] {
        &self.value_info_order
    }

    /// First live value with this name (names are unique in a valid graph).
    pub fn find_value(&self, name: &str) -> Option<ValueId> {
        self.value_ids().find(|&v| self.value(v).name == name)
    }

    pub fn find_node(&self, name: &str) -> Option<NodeId> {
        self.order
            .iter()
            .copied()
            .find(|&n| self.node(n).name.as_deref() == Some(name))
    }

    pub fn is_graph_output(&self, v: ValueId) -> bool {
        self.outputs.iter().any(|o| o.value == v)
    }

    pub fn is_graph_input(&self, v: ValueId) -> bool {
        self.inputs.iter().any(|i| i.value == v)
    }

    /// The constant tensor of a value: an initializer that is not also a graph
    /// input (an input with a default can be overridden at run time).
    pub fn constant(&self, v: ValueId) -> Option<&Tensor> {
        let value = self.value(v);
        if self.is_graph_input(v) {
            return None;
        }
        value.initializer.as_ref()
    }

    /// The type of a value: from the graph output declaration, or from
    /// value_info, or from the graph input declaration, or from its
    /// initializer.
    pub fn value_type(&self, v: ValueId) -> Option<TensorType> {
        // A graph output's own declaration wins over a `value_info` entry
        // of the same name, as in ONNX Runtime, which types the value from
        // the former (a fuzzed `value_info` calling a float graph output
        // int64 was kept, written onto the output, and ONNX Runtime then
        // refused the saved model: fuzz seed 4242 case 731). For a graph
        // input, `value_info` wins: verification makes inputs concrete by
        // writing it on a copy.
        let declared = |ios: &[GraphIo]| {
            ios.iter()
                .filter(|io| io.value == v)
                .find_map(|io| io.info.r#type.as_ref().and_then(TensorType::from_proto))
        };
        if let Some(t) = declared(&self.outputs) {
            return Some(t);
        }
        let value = self.value(v);
        if let Some(t) = value.tensor_type() {
            return Some(t);
        }
        if let Some(t) = declared(&self.inputs) {
            return Some(t);
        }
        value.initializer.as_ref().map(|t| TensorType {
            dtype: t.dtype(),
            shape: Some(t.dims().iter().map(|&d| Dim::Known(d)).collect()),
        })
    }

    /// The node that produces `v`, if any.
    pub fn producer(&self, v: ValueId) -> Option<&Node> {
        self.value(v).producer.map(|(n, _)| self.node(n))
    }

    /// Uses of `v` as a node input (captures by subgraphs excluded).
    pub fn input_uses(&self, v: ValueId) -> impl Iterator<Item = (NodeId, u32)> + '_ {
        self.value(v).uses.iter().filter_map(|u| match u.slot {
            Slot::Input(i) => Some((u.node, i)),
            Slot::Capture => None,
        })
    }

    /// Number of readers: node inputs, subgraph captures and graph outputs.
    pub fn reader_count(&self, v: ValueId) -> usize {
        self.value(v).uses.len() + self.outputs.iter().filter(|o| o.value == v).count()
    }

    // ----- editing -----

    pub fn add_value(&mut self, value: Value) -> ValueId {
        let id = ValueId(self.values.len() as u32);
        self.values.push(Some(value));
        id
    }

    /// Adds an initializer value.
    pub fn add_initializer(&mut self, name: &str, tensor: Tensor) -> ValueId {
        let id = self.add_value(Value {
            initializer: Some(tensor),
            ..Value::named(name)
        });
        self.initializer_order.push(id);
        id
    }

    /// Adds `node` at the end of the order; its inputs are linked to their
    /// values and fresh values are created for `output_names`.
    pub fn add_node(&mut self, node: Node, output_names: &[&str]) -> NodeId {
        let at = self.order.len();
        self.insert_node(at, node, output_names)
    }

    /// Like [`Graph::add_node`] but at position `at` of the node order.
    pub fn insert_node(&mut self, at: usize, mut node: Node, output_names: &[&str]) -> NodeId {
        let id = NodeId(self.nodes.len() as u32);
        node.outputs.clear();
        for (slot, name) in output_names.iter().enumerate() {
            if name.is_empty() {
                node.outputs.push(None);
                continue;
            }
            let v = self.add_value(Value {
                producer: Some((id, slot as u32)),
                ..Value::named(name)
            });
            node.outputs.push(Some(v));
        }
        for (slot, input) in node.inputs.iter().enumerate() {
            if let Some(v) = input {
                self.value_mut(*v).uses.push(Use {
                    node: id,
                    slot: Slot::Input(slot as u32),
                });
            }
        }
        self.nodes.push(Some(node));
        let at = at.min(self.order.len());
        self.order.insert(at, id);
        self.link_captures(id);
        id
    }

    /// Registers the outer values that `node`'s subgraphs read as captures.
    pub(crate) fn link_captures(&mut self, id: NodeId) {
        let mut names: Vec<String> = Vec::new();
        for g in self.node(id).subgraphs() {
            g.collect_free_names(&mut names);
        }
        names.sort();
        names.dedup();
        for name in names {
            if let Some(v) = self.find_value(&name) {
                let u = Use {
                    node: id,
                    slot: Slot::Capture,
                };
                if !self.value(v).uses.contains(&u) {
                    self.value_mut(v).uses.push(u);
                }
            }
        }
    }

    /// Recomputes which outer values `node`'s subgraphs read.
    pub fn refresh_captures(&mut self, id: NodeId) {
        let u = Use {
            node: id,
            slot: Slot::Capture,
        };
        for value in self.values.iter_mut().flatten() {
            value.uses.retain(|x| *x != u);
        }
        self.link_captures(id);
    }

    /// Names this graph reads from enclosing scopes (recursively through nested subgraphs).
    pub fn collect_free_names(&self, out: &mut Vec<String>) {
        for v in self.value_ids() {
            let value = self.value(v);
            if value.outer {
                out.push(value.name.clone());
            }
        }
    }

    /// Sets input `slot` of `node` to `value`, keeping use lists right.
    pub fn set_input(&mut self, node: NodeId, slot: usize, value: Option<ValueId>) {
        if let Some(old) = self.node(node).inputs.get(slot).copied().flatten() {
            let u = Use {
                node,
                slot: Slot::Input(slot as u32),
            };
            self.value_mut(old).uses.retain(|x| *x != u);
        }
        let inputs = &mut self.node_mut(node).inputs;
        if inputs.len() <= slot {
            inputs.resize(slot + 1, None);
        }
        inputs[slot] = value;
        if let Some(v) = value {
            self.value_mut(v).uses.push(Use {
                node,
                slot: Slot::Input(slot as u32),
            });
        }
    }

    /// Removes trailing omitted inputs, as ONNX writers do.
    pub fn trim_inputs(&mut self, node: NodeId) {
        let inputs = &mut self.node_mut(node).inputs;
        while matches!(inputs.last(), Some(None)) {
            inputs.pop();
        }
    }

    /// Redirects every reader of `old` (node inputs, subgraph captures, graph
    /// outputs) to `new`. A graph output keeps its name: `new` takes the name of
    /// `old` when `old` was a graph output.
    pub fn replace_all_uses(&mut self, old: ValueId, new: ValueId) {
        if old == new {
            return;
        }
        let uses = std::mem::take(&mut self.value_mut(old).uses);
        let old_name = self.value(old).name.clone();
        let new_name = self.value(new).name.clone();
        for u in uses {
            match u.slot {
                Slot::Input(i) => {
                    self.node_mut(u.node).inputs[i as usize] = Some(new);
                    self.value_mut(new).uses.push(u);
                }
                Slot::Capture => {
                    for g in self.node_mut(u.node).subgraphs_mut() {
                        g.rename_outer(&old_name, &new_name);
                    }
                    if !self.value(new).uses.contains(&u) {
                        self.value_mut(new).uses.push(u);
                    }
                }
            }
        }
        let mut was_output = false;
        for o in &mut self.outputs {
            if o.value == old {
                o.value = new;
                was_output = true;
            }
        }
        if was_output {
            // Graph output names are the model's interface: keep them.
            self.rename_annotations(&new_name, &old_name);
            self.value_mut(new).name = old_name.clone();
            self.value_mut(old).name = format!("{old_name}.replaced");
            // Captures of `new` under its former name must follow the rename.
            let capture_nodes: Vec<NodeId> = self
                .value(new)
                .uses
                .iter()
                .filter(|u| u.slot == Slot::Capture)
                .map(|u| u.node)
                .collect();
            for n in capture_nodes {
                for g in self.node_mut(n).subgraphs_mut() {
                    g.rename_outer(&new_name, &old_name);
                }
            }
        }
    }

    /// Points quantization annotations of tensor `from` at `to` (unless `to`
    /// has its own already).
    pub fn rename_annotations(&mut self, from: &str, to: &str) {
        let anns = &mut self.meta.quantization_annotation;
        if from == to || anns.iter().any(|a| a.tensor_name.as_deref() == Some(to)) {
            return;
        }
        for a in anns.iter_mut() {
            if a.tensor_name.as_deref() == Some(from) {
                a.tensor_name = Some(to.to_string());
            }
        }
    }

    /// Renames references to an enclosing-scope value, recursively (into the
    /// nested graphs that read it from here).
    pub fn rename_outer(&mut self, from: &str, to: &str) {
        let ids: Vec<ValueId> = self.value_ids().collect();
        let mut reads = false;
        for v in ids {
            let value = self.value_mut(v);
            if value.outer && value.name == from {
                value.name = to.to_string();
                reads = true;
            }
        }
        if !reads {
            // Nested graphs can only reach `from` through this graph.
            return;
        }
        let nodes = self.order.clone();
        for n in nodes {
            for g in self.node_mut(n).subgraphs_mut() {
                g.rename_outer(from, to);
            }
        }
    }

    /// Whether renaming the enclosing-scope reference `from` to `to` in this
    /// graph (or a nested graph reading `from`) would land on a local value
    /// already called `to` (ONNX lets a subgraph input reuse an outer name).
    pub fn outer_rename_collides(&self, from: &str, to: &str) -> bool {
        if from == to {
            return false;
        }
        let mut reads = false;
        let mut local_to = false;
        for v in self.value_ids() {
            let value = self.value(v);
            if value.outer && value.name == from {
                reads = true;
            } else if !value.outer && value.name == to {
                local_to = true;
            }
        }
        if !reads {
            return false;
        }
        local_to
            || self
                .nodes()
                .any(|(_, n)| n.subgraphs().any(|g| g.outer_rename_collides(from, to)))
    }

    /// Whether [`Graph::replace_all_uses`]`(old, new)` can rewrite every
    /// subgraph reference without capturing the wrong value.
    pub fn can_replace(&self, old: ValueId, new: ValueId) -> bool {
        let old_name = &self.value(old).name;
        let new_name = &self.value(new).name;
        // With `old` a graph output, `new` takes old's name and the subgraphs
        // reading `new` follow; otherwise readers of `old` follow `new`.
        let (renamed, from, to) = if self.is_graph_output(old) {
            (new, new_name, old_name)
        } else {
            (old, old_name, new_name)
        };
        self.value(renamed)
            .uses
            .iter()
            .filter(|u| u.slot == Slot::Capture)
            .all(|u| {
                !self
                    .node(u.node)
                    .subgraphs()
                    .any(|g| g.outer_rename_collides(from, to))
            })
    }

    /// Removes a node. Its output values lose their producer; the caller must
    /// have redirected their readers (see [`Graph::remove_unused_value`]).
    pub fn remove_node(&mut self, id: NodeId) {
        let node = self.nodes[id.0 as usize]
            .take()
            .expect("removing a node twice");
        for (slot, input) in node.inputs.iter().enumerate() {
            if let Some(v) = input {
                let u = Use {
                    node: id,
                    slot: Slot::Input(slot as u32),
                };
                if let Some(Some(value)) = self.values.get_mut(v.0 as usize) {
                    value.uses.retain(|x| *x != u);
                }
            }
        }
        // Only nodes with subgraphs capture values; skip the scan otherwise.
        if node.has_subgraphs() {
            for value in self.values.iter_mut().flatten() {
                value
                    .uses
                    .retain(|u| !(u.node == id && u.slot == Slot::Capture));
            }
        }
        for v in node.outputs.iter().flatten() {
            if let Some(Some(value)) = self.values.get_mut(v.0 as usize) {
                value.producer = None;
            }
        }
        self.order.retain(|&n| n != id);
    }

    /// Removes a value that nothing reads and nothing produces any more.
    pub fn remove_value(&mut self, id: ValueId) {
        self.values[id.0 as usize] = None;
        self.initializer_order.retain(|&v| v != id);
        self.sparse_order.retain(|&v| v != id);
        self.value_info_order.retain(|&v| v != id);
    }

    /// Position of `node` in the node order.
    pub fn position(&self, node: NodeId) -> Option<usize> {
        self.order.iter().position(|&n| n == node)
    }

    /// Nodes in a topological order that keeps the current order wherever it
    /// is already valid. Errors on a cycle, naming a node on it.
    pub fn topological_order(&self) -> Result<Vec<NodeId>> {
        let index: HashMap<NodeId, usize> = self
            .order
            .iter()
            .enumerate()
            .map(|(i, &n)| (n, i))
            .collect();
        let mut pending: Vec<usize> = vec![0; self.order.len()];
        let mut readers: Vec<Vec<usize>> = vec![Vec::new(); self.order.len()];
        let mut captures: HashMap<NodeId, Vec<ValueId>> = HashMap::new();
        for v in self.value_ids() {
            for u in &self.value(v).uses {
                if u.slot == Slot::Capture {
                    captures.entry(u.node).or_default().push(v);
                }
            }
        }
        for (i, &n) in self.order.iter().enumerate() {
            let node = self.node(n);
            let mut deps: HashSet<usize> = HashSet::new();
            let captured = captures.get(&n).into_iter().flatten().copied();
            for v in node.inputs.iter().flatten().copied().chain(captured) {
                if let Some((p, _)) = self.value(v).producer
                    && let Some(&pi) = index.get(&p)
                {
                    deps.insert(pi);
                }
            }
            pending[i] = deps.len();
            for d in deps {
                readers[d].push(i);
            }
        }
        // Kahn's algorithm, always taking the earliest ready node in the
        // original order so an already sorted graph keeps its order.
        let mut ready: std::collections::BinaryHeap<std::cmp::Reverse<usize>> = pending
            .iter()
            .enumerate()
            .filter(|(_, p)| **p == 0)
            .map(|(i, _)| std::cmp::Reverse(i))
            .collect();
        let mut out = Vec::with_capacity(self.order.len());
        while let Some(std::cmp::Reverse(i)) = ready.pop() {
            out.push(self.order[i]);
            for &r in &readers[i] {
                pending[r] -= 1;
                if pending[r] == 0 {
                    ready.push(std::cmp::Reverse(r));
                }
            }
        }
        if out.len() != self.order.len() {
            let stuck = self
                .order
                .iter()
                .enumerate()
                .find(|(i, _)| pending[*i] > 0)
                .map(|(_, &n)| n)
                .unwrap_or(self.order[0]);
            let node = self.node(stuck);
            return Err(IrError::Cycle {
                node: node.name_or_op().to_string(),
                op: node.op_type.clone(),
            });
        }
        Ok(out)
    }

    /// Reorders nodes topologically (see [`Graph::topological_order`]).
    pub fn sort_topologically(&mut self) -> Result<()> {
        self.order = self.topological_order()?;
        Ok(())
    }

    /// Nodes of this graph and all nested subgraphs.
    pub fn total_node_count(&self) -> usize {
        self.nodes()
            .map(|(_, n)| 1 + n.subgraphs().map(|g| g.total_node_count()).sum::<usize>())
            .sum()
    }

    /// Sets the ValueInfo type of `v` to a tensor type.
    pub fn set_value_type(&mut self, v: ValueId, ty: &TensorType) {
        let in_list = self.value_info_order.contains(&v);
        let value = self.value_mut(v);
        let info = value.info.get_or_insert_with(Default::default);
        info.r#type = Some(ty.to_proto(info.r#type.as_ref()));
        if !in_list {
            self.value_info_order.push(v);
        }
    }
}

/// The dim name Paddle's exporter gives every dynamic dim, read as an
/// unknown dim, not one shared symbol (see `crate::unknown_dims`).
pub const UNKNOWN_DIM_NAME: &str = "?";

impl TensorType {
    /// Reads a tensor type from a TypeProto (None for sequences, maps, ...).
    pub fn from_proto(tp: &TypeProto) -> Option<TensorType> {
        match tp.value.as_ref()? {
            type_proto::Value::TensorType(t) => {
                let dtype = crate::dtype::DataType::from_code(t.elem_type.unwrap_or(0));
                let shape = t.shape.as_ref().map(|s| {
                    s.dim
                        .iter()
                        .map(|d| match &d.value {
                            // Paddle exports write -1 for a dynamic dim.
                            Some(tensor_shape::DimValue::DimValue(v)) if *v >= 0 => Dim::Known(*v),
                            Some(tensor_shape::DimValue::DimValue(_)) => Dim::Unknown,
                            // Paddle names every unknown dim "?": not one shared symbol.
                            Some(tensor_shape::DimValue::DimParam(p))
                                if p != UNKNOWN_DIM_NAME && !p.is_empty() =>
                            {
                                Dim::Sym(p.clone())
                            }
                            Some(tensor_shape::DimValue::DimParam(_)) => Dim::Unknown,
                            None => Dim::Unknown,
                        })
                        .collect()
                });
                Some(TensorType { dtype, shape })
            }
            _ => None,
        }
    }

    /// Writes this type as a TypeProto, keeping the denotations of `previous`.
    pub fn to_proto(&self, previous: Option<&TypeProto>) -> TypeProto {
        let old_dims: Vec<tensor_shape::Dimension> = previous
            .and_then(|p| match &p.value {
                Some(type_proto::Value::TensorType(t)) => t.shape.as_ref().map(|s| s.dim.clone()),
                _ => None,
            })
            .unwrap_or_default();
        let shape = self
            .shape
            .as_ref()
            .map(|dims| crate::proto::TensorShapeProto {
                dim: dims
                    .iter()
                    .enumerate()
                    .map(|(i, d)| tensor_shape::Dimension {
                        value: match d {
                            Dim::Known(v) => Some(tensor_shape::DimValue::DimValue(*v)),
                            Dim::Sym(s) => Some(tensor_shape::DimValue::DimParam(s.clone())),
                            Dim::Unknown => None,
                        },
                        denotation: old_dims.get(i).and_then(|d| d.denotation.clone()),
                    })
                    .collect(),
            });
        TypeProto {
            value: Some(type_proto::Value::TensorType(type_proto::Tensor {
                elem_type: Some(self.dtype.code()),
                shape,
            })),
            denotation: previous.and_then(|p| p.denotation.clone()),
        }
    }
}
