//! Several models of one origin as one model that computes each of their
//! outputs, sharing what they compute alike.
//!
//! The INT8 search probes dozens of candidates that differ from the float
//! model in one layer each. Run one by one, each pays a session and
//! recomputes the float layers in front of its own; as one model, a node
//! that reads the same values with the same op and attributes in two
//! candidates is one node (value numbering across the models), so the float
//! prefix is computed once and one session serves them all. PP-OCR and
//! YOLOv8-sized candidates, 64 of them: half the runs' time, a fifth of the
//! sessions'.
//!
//! The union's outputs are each model's outputs in turn (model 0's, then
//! model 1's, ...), so a run's outputs split into equal chunks. A model
//! output that is the same value as an earlier one's gets its own name
//! through an Identity: ONNX names each graph output once.
//!
//! Declined (None): models whose inputs or output counts differ, nodes with
//! subgraphs (their captures name outer values, renamed here), local
//! functions, random ops (two draws are not one), graph inputs with
//! default initializers, and differing opset imports.

use std::collections::{HashMap, HashSet};
use std::hash::{DefaultHasher, Hash, Hasher};

use crate::graph::{Graph, GraphIo, Node, ValueId, is_nondeterministic};
use crate::model::Model;
use crate::tensor::Tensor;

/// The union and how its outputs split.
pub struct Union {
    pub model: Model,
    /// Outputs per model: the union's outputs are `models.len()` chunks of it.
    pub outputs_each: usize,
    /// Models in the union.
    pub models: usize,
    /// Nodes of the union against the models' nodes summed (what sharing saved).
    pub nodes: usize,
    pub nodes_apart: usize,
}

/// What makes two nodes of the union one: op, domain, attributes (encoded,
/// sorted), the union's values they read, and their output count.
type NodeKey = (String, String, Vec<Vec<u8>>, Vec<Option<ValueId>>, usize);

/// Whether two initializers hold the same tensor: bytes shared by the
/// models built from one original are the same buffer, compared by address
/// before by content.
fn same_tensor(a: &Tensor, b: &Tensor) -> bool {
    if a.dtype() != b.dtype() || a.dims() != b.dims() {
        return false;
    }
    match (&a.proto.raw_data, &b.proto.raw_data) {
        (Some(x), Some(y)) if x.as_ptr() == y.as_ptr() && x.len() == y.len() => {
            a.proto.external_data == b.proto.external_data
        }
        _ => a.proto == b.proto,
    }
}

fn tensor_hash(name: &str, t: &Tensor) -> u64 {
    let mut h = DefaultHasher::new();
    name.hash(&mut h);
    t.dtype().code().hash(&mut h);
    t.dims().hash(&mut h);
    h.finish()
}

/// Hands out value and node names unique in the union: a model's own name
/// when still free, else that name with the model's number.
#[derive(Default)]
struct Names {
    taken: HashSet<String>,
}

impl Names {
    fn claim(&mut self, name: &str, model: usize) -> String {
        if self.taken.insert(name.to_string()) {
            return name.to_string();
        }
        let mut n = 0usize;
        loop {
            let candidate = if n == 0 {
                format!("{name}__m{model}")
            } else {
                format!("{name}__m{model}_{n}")
            };
            if self.taken.insert(candidate.clone()) {
                return candidate;
            }
            n += 1;
        }
    }
}

/// One model of the union: its values mapped to the union's.
struct Merging<'u> {
    union: &'u mut Graph,
    names: &'u mut Names,
    nodes: &'u mut HashMap<NodeKey, Vec<Option<ValueId>>>,
    initializers: &'u mut HashMap<u64, Vec<ValueId>>,
    node_names: &'u mut Names,
}

impl Merging<'_> {
    /// The union's initializer holding `t` under `name`, if any.
    fn same_initializer(&self, name: &str, t: &Tensor) -> Option<ValueId> {
        self.initializers.get(&tensor_hash(name, t)).and_then(|vs| {
            vs.iter().copied().find(|&v| {
                self.union
                    .value(v)
                    .initializer
                    .as_ref()
                    .is_some_and(|u| same_tensor(u, t))
            })
        })
    }

    fn initializer(&mut self, name: &str, t: &Tensor, model: usize) -> ValueId {
        if let Some(v) = self.same_initializer(name, t) {
            return v;
        }
        let key = tensor_hash(name, t);
        let unique = self.names.claim(name, model);
        let v = self.union.add_initializer(&unique, t.clone());
        self.initializers.entry(key).or_default().push(v);
        v
    }

    /// Adds `model`'s graph (number `k`), which [`shareable`] and the
    /// interface checks passed; returns its outputs' values in the union
    /// and the nodes it added, or None where a value is read before it is
    /// made. `dry`: changes nothing, and counts the
    /// nodes it would add (values it would make get ids past the union's).
    fn add(
        &mut self,
        model: &Model,
        k: usize,
        inputs: &HashMap<String, ValueId>,
        dry: bool,
    ) -> Option<(Vec<ValueId>, usize)> {
        let g = &model.graph;
        let mut added = 0usize;
        let mut virtual_id = u32::MAX;
        let mut fresh = || {
            virtual_id -= 1;
            ValueId(virtual_id)
        };
        let mut map: HashMap<ValueId, ValueId> = HashMap::new();
        for io in &g.inputs {
            let name = &g.value(io.value).name;
            map.insert(io.value, *inputs.get(name)?);
        }
        for (v, t) in g.initializers() {
            let name = g.value(v).name.clone();
            let u = match dry {
                true => self.same_initializer(&name, t).unwrap_or_else(&mut fresh),
                false => self.initializer(&name, t, k),
            };
            map.insert(v, u);
        }
        for id in g.topological_order().ok()? {
            let n = g.node(id);
            let inputs: Vec<Option<ValueId>> = n
                .inputs
                .iter()
                .map(|i| match i {
                    Some(v) => map.get(v).copied().map(Some),
                    None => Some(None),
                })
                .collect::<Option<_>>()?;
            let key: NodeKey = (
                n.op_type.clone(),
                n.domain().to_string(),
                n.encoded_attributes(),
                inputs.clone(),
                n.outputs.len(),
            );
            let outs = match self.nodes.get(&key) {
                Some(outs) => outs.clone(),
                None if dry => {
                    added += 1;
                    n.outputs.iter().map(|o| o.map(|_| fresh())).collect()
                }
                None => {
                    added += 1;
                    let names: Vec<String> = n
                        .outputs
                        .iter()
                        .map(|o| match o {
                            Some(v) => self.names.claim(&g.value(*v).name, k),
                            None => String::new(),
                        })
                        .collect();
                    let refs: Vec<&str> = names.iter().map(String::as_str).collect();
                    let node = Node {
                        name: n
                            .name
                            .as_deref()
                            .filter(|s| !s.is_empty())
                            .map(|s| self.node_names.claim(s, k)),
                        inputs,
                        ..n.clone()
                    };
                    let id = self.union.add_node(node, &refs);
                    let outs = self.union.node(id).outputs.clone();
                    self.nodes.insert(key, outs.clone());
                    outs
                }
            };
            for (o, u) in n.outputs.iter().zip(&outs) {
                if let (Some(o), Some(u)) = (o, u) {
                    map.insert(*o, *u);
                }
            }
        }
        let outs = g
            .outputs
            .iter()
            .map(|io| map.get(&io.value).copied())
            .collect::<Option<_>>()?;
        Some((outs, added))
    }
}

/// Whether `model` holds nothing a union cannot share or rename (see the
/// module comment): no local functions, sparse initializers, inputs with
/// default initializers, subgraphs or random ops.
fn shareable(model: &Model) -> bool {
    let g = &model.graph;
    model.meta.functions.is_empty()
        && g.sparse_initializers().next().is_none()
        && g.inputs
            .iter()
            .all(|io| g.value(io.value).initializer.is_none())
        && g.nodes()
            .all(|(_, n)| !n.has_subgraphs() && !is_nondeterministic(&n.op_type))
}

/// A union built one model at a time, so a caller can stop adding where
/// the union has grown as large as it wants (see [`UnionBuilder::nodes`]).
pub struct UnionBuilder {
    first: Model,
    graph: Graph,
    names: Names,
    node_names: Names,
    nodes: HashMap<NodeKey, Vec<Option<ValueId>>>,
    initializers: HashMap<u64, Vec<ValueId>>,
    inputs: HashMap<String, ValueId>,
    /// Each model's outputs: the union's value, its declaration, the model.
    outputs: Vec<(ValueId, crate::proto::ValueInfoProto, usize)>,
    models: usize,
    nodes_apart: usize,
}

impl UnionBuilder {
    /// A union of `first` alone (None where it cannot be in a union).
    pub fn new(first: &Model) -> Option<UnionBuilder> {
        if !shareable(first) {
            return None;
        }
        let mut graph = Graph::new(first.graph.name());
        let mut names = Names::default();
        let mut inputs = HashMap::new();
        for io in &first.graph.inputs {
            let name = first.graph.value(io.value).name.clone();
            names.claim(&name, 0);
            let v = graph.add_value(crate::graph::Value::named(&name));
            graph.inputs.push(GraphIo {
                value: v,
                info: io.info.clone(),
            });
            inputs.insert(name, v);
        }
        let first_meta = Model {
            meta: first.meta.clone(),
            graph: Graph::new(first.graph.name()),
            source: first.source.clone(),
        };
        let mut union = UnionBuilder {
            first: first_meta,
            graph,
            names,
            node_names: Names::default(),
            nodes: HashMap::new(),
            initializers: HashMap::new(),
            inputs,
            outputs: Vec::new(),
            models: 0,
            nodes_apart: 0,
        };
        union.add(first).then_some(union)
    }

    /// Adds `model`; false (the union unchanged) where it cannot join.
    pub fn add(&mut self, model: &Model) -> bool {
        if self.models > 0 && !self.joins(model) {
            return false;
        }
        let k = self.models;
        let inputs = std::mem::take(&mut self.inputs);
        let added = self.merging().add(model, k, &inputs, false);
        self.inputs = inputs;
        // `joins` checked what could refuse; a value read before it is
        // made (a graph out of order) is the one refusal left, and it
        // leaves only nodes no output reads.
        let Some((outs, _)) = added else {
            return false;
        };
        for (value, io) in outs.into_iter().zip(&model.graph.outputs) {
            self.outputs.push((value, io.info.clone(), k));
        }
        self.models += 1;
        self.nodes_apart += model.graph.node_count();
        true
    }

    fn merging(&mut self) -> Merging<'_> {
        Merging {
            union: &mut self.graph,
            names: &mut self.names,
            nodes: &mut self.nodes,
            initializers: &mut self.initializers,
            node_names: &mut self.node_names,
        }
    }

    fn joins(&self, model: &Model) -> bool {
        // Against the interface `new` recorded from the first model.
        let g = &model.graph;
        g.outputs.len() * self.models == self.outputs.len()
            && g.inputs.len() == self.graph.inputs.len()
            && g.inputs.iter().zip(&self.graph.inputs).all(|(a, b)| {
                g.value(a.value).name == self.graph.value(b.value).name && a.info == b.info
            })
            && model.meta.opset_import == self.first.meta.opset_import
            && shareable(model)
    }

    /// The nodes `model` would add (None where it cannot join).
    pub fn nodes_added_by(&mut self, model: &Model) -> Option<usize> {
        if !self.joins(model) {
            return None;
        }
        let (k, inputs) = (self.models, std::mem::take(&mut self.inputs));
        let added = self.merging().add(model, k, &inputs, true);
        self.inputs = inputs;
        added.map(|(_, n)| n)
    }

    /// The union's nodes so far.
    pub fn nodes(&self) -> usize {
        self.graph.node_count()
    }

    /// Models added so far.
    pub fn models(&self) -> usize {
        self.models
    }

    /// The union of the models added.
    pub fn finish(self) -> Option<Union> {
        let UnionBuilder {
            first,
            mut graph,
            mut names,
            outputs,
            models,
            nodes_apart,
            ..
        } = self;
        let outputs_each = outputs.len() / models.max(1);
        // Each output its own value, produced by a node (not an input or a
        // constant): the run names each output once.
        let mut listed: HashSet<ValueId> = HashSet::new();
        for (value, mut info, k) in outputs {
            let own = graph.value(value).producer.is_some() && listed.insert(value);
            let value = if own {
                value
            } else {
                let name = names.claim(&graph.value(value).name, k);
                let id = graph.add_node(
                    Node {
                        inputs: vec![Some(value)],
                        ..Node::new("Identity")
                    },
                    &[name.as_str()],
                );
                graph.node(id).outputs.first().copied().flatten()?
            };
            info.name = Some(graph.value(value).name.clone());
            graph.outputs.push(GraphIo { value, info });
        }
        let nodes = graph.node_count();
        Some(Union {
            model: Model {
                meta: first.meta,
                graph,
                source: first.source,
            },
            outputs_each,
            models,
            nodes,
            nodes_apart,
        })
    }
}

/// The union of `models` (see the module comment), or None where they
/// cannot be one model. The models must have one origin: the same inputs,
/// by name, and the same number of outputs.
pub fn union_of(models: &[&Model]) -> Option<Union> {
    let (first, rest) = models.split_first()?;
    let mut union = UnionBuilder::new(first)?;
    for m in rest {
        if !union.add(m) {
            return None;
        }
    }
    union.finish()
}
