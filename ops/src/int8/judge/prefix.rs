//! Probes that run only the part of a candidate that differs from a base
//! model. The ranking probes each weighted layer alone in INT8 with every
//! other one as in the base (the ranking's context): everything upstream of
//! that layer computes what the base computed on the same samples, and on
//! EfficientNet-B0, YOLOv8n and XFeat that is about half of each probe's
//! arithmetic. The base is run once on the probe samples with every tensor
//! it computes kept; a candidate's nodes that compute the same as a base
//! node (the same op and attributes on the same inputs, recursively, down
//! to the same graph inputs and weights) are cut away and their tensors fed
//! to the rest from the base's run.
//!
//! Only where probes do not go together (see `together.rs`): a union of
//! probes computes what its members share once as well.
//!
//! Cuts never fall on a QuantizeLinear's or DequantizeLinear's output, so
//! that every Q/DQ pattern ONNX Runtime fuses into an integer kernel in the
//! whole candidate is whole in the cut one too. What can still differ is
//! the float rounding of a fused kernel that the cut splits (a Conv and the
//! Add after it), which is far below the quantization noise a probe
//! measures: on ONNX Runtime PP-OCRv4 det's and YOLOv8n's ranking losses
//! were equal to the last bit; tract observes through a plan of its own,
//! and ULFD's moved by at most 1.9% (relative) there, the search the same.

use std::collections::{HashMap, HashSet};
use std::hash::{DefaultHasher, Hash, Hasher};
use std::path::Path;
use std::sync::Mutex;

use bytes::Bytes;
use infopt_ir::graph::is_nondeterministic;
use infopt_ir::proto::ValueInfoProto;
use infopt_ir::{DataType, Dim, Graph, GraphIo, Model, NodeId, Tensor, TensorType, ValueId};
use infopt_runtime::{HostTensor, InputShapes, IoSpec, Observe};
use infopt_verify::ChosenBackend;
use infopt_verify::evaluate::{self, Fed, Heads, Judged, Reference};

use crate::error::{ErrorKind, OpsError, OpsResult};

/// The least share of the base's computed elements a candidate must take
/// from the base for its probe to run cut: below it the saving is less than
/// the copies of the fed tensors and a second kind of session cost.
const LEAST_SHARE: f64 = 0.2;

/// Memory the base's tensors may take: a quarter of what is available
/// (PP-OCRv4 det at 640x640, every tensor of 4 samples kept, took more
/// than the half of 2 GB first allowed here).
pub(in crate::int8) fn budget() -> usize {
    let available = infopt_verify::memory::available_bytes().unwrap_or(0);
    usize::try_from(available / 4).unwrap_or(usize::MAX)
}

/// The report's count of probes run cut.
pub(in crate::int8) const CUT_PROBES: &str = "probes cut to what differs from the base";

/// A base model's tensors on the first probe samples, by what computes
/// them (see the module comment).
pub(in crate::int8) struct Prefix {
    /// The structural keys of every tensor the base computes.
    known: HashSet<u64>,
    /// The base's kept tensor by the structural key of what computes it
    /// (only those a cut may fall on are kept: see [`cut_points`]).
    slots: HashMap<u64, usize>,
    /// Elements of each base tensor (on one sample).
    elements: Vec<usize>,
    /// Elements of every base tensor together.
    total: usize,
    /// Per sample, the base's tensors by slot.
    tensors: Vec<Vec<HostTensor>>,
    weights: WeightKeys,
}

/// Keys of weights by content, remembered by buffer: the candidates share
/// their unchanged weights' buffers with the model they were built from,
/// so each is hashed once. The buffer is kept with its key, so that its
/// address cannot be reused by another while remembered.
#[derive(Default)]
struct WeightKeys {
    seen: Mutex<HashMap<(usize, usize), (Bytes, u64)>>,
}

impl WeightKeys {
    fn key(&self, t: &Tensor) -> Option<u64> {
        let content = match &t.proto.raw_data {
            Some(b) => {
                let at = (b.as_ptr() as usize, b.len());
                let mut seen = self.seen.lock().ok()?;
                match seen.get(&at) {
                    Some((_, k)) => *k,
                    None => {
                        let k = hash_of(&b[..]);
                        seen.insert(at, (b.clone(), k));
                        k
                    }
                }
            }
            None => hash_of(&t.raw_bytes().ok()?[..]),
        };
        Some(hash_of(&("weight", t.dtype().code(), t.dims(), content)))
    }
}

fn hash_of<T: Hash + ?Sized>(x: &T) -> u64 {
    let mut h = DefaultHasher::new();
    x.hash(&mut h);
    h.finish()
}

/// The structural key of every tensor of `g` that has one: a graph input by
/// its name, a weight by its content, a node's output by the node's op,
/// attributes and input keys. None where the graph has a cycle. Nodes with
/// subgraphs (what they read from outside is not among their inputs) and
/// random ones give their outputs no key, nor do the nodes reading those.
fn structural_keys(g: &Graph, weights: &WeightKeys) -> Option<HashMap<ValueId, u64>> {
    let order = g.topological_order().ok()?;
    let mut keys = HashMap::new();
    for io in &g.inputs {
        keys.insert(io.value, hash_of(&("input", &g.value(io.value).name)));
    }
    for (v, t) in g.initializers() {
        if !g.is_graph_input(v)
            && let Some(k) = weights.key(t)
        {
            keys.insert(v, k);
        }
    }
    for id in order {
        let n = g.node(id);
        if n.has_subgraphs() || is_nondeterministic(&n.op_type) {
            continue;
        }
        let inputs: Option<Vec<u64>> = n
            .inputs
            .iter()
            .map(|i| match i {
                None => Some(0),
                Some(v) => keys.get(v).copied(),
            })
            .collect();
        let Some(inputs) = inputs else { continue };
        let node = hash_of(&(&n.op_type, n.domain(), n.encoded_attributes(), inputs));
        for (slot, o) in n.outputs.iter().enumerate() {
            if let Some(o) = o {
                keys.insert(*o, hash_of(&(node, slot)));
            }
        }
    }
    Some(keys)
}

/// Where a cut candidate's input comes from.
enum Source {
    /// The sample's own input at this position.
    Sample(usize),
    /// The base's tensor in this slot.
    Base(usize),
}

impl Prefix {
    /// Runs `base` on the first `limit` samples of `reference`, keeping every
    /// tensor it computes. None where the samples differ in shape (one
    /// session would not run them all), where the tensors would take more
    /// than `budget` bytes, or where the base has no keys.
    pub(in crate::int8) fn capture(
        chosen: &ChosenBackend,
        base: &Model,
        dir: &Path,
        reference: &Reference,
        limit: usize,
        budget: usize,
    ) -> OpsResult<Option<Prefix>> {
        let samples = limit.min(reference.len());
        let shape_of = |i: usize| {
            reference
                .sample_inputs(i)
                .map(|x| x.iter().map(|t| t.shape().to_vec()).collect::<Vec<_>>())
        };
        let Some(first) = shape_of(0) else {
            return Ok(None);
        };
        if (1..samples).any(|i| shape_of(i).as_ref() != Some(&first)) {
            return Ok(None);
        }
        let weights = WeightKeys::default();
        let Some(keys) = structural_keys(&base.graph, &weights) else {
            return Ok(None);
        };
        let mut shapes = InputShapes::default();
        for (spec, dims) in reference.input_specs().iter().zip(&first) {
            shapes.shapes.insert(spec.name.clone(), dims.clone());
        }
        let g = &base.graph;
        let known: HashSet<u64> = g
            .nodes()
            .flat_map(|(_, n)| n.outputs.iter().flatten())
            .filter(|v| !g.is_graph_output(**v))
            .filter_map(|v| keys.get(v).copied())
            .collect();
        let loaded = infopt_verify::observe::load_observing(
            chosen.backend.as_ref(),
            base,
            dir,
            &shapes,
            &Observe::Names(cut_points(g)),
        )?;
        let mut slots = HashMap::new();
        let mut names = Vec::new();
        for name in loaded.observed() {
            let key = base.graph.find_value(name).and_then(|v| keys.get(&v));
            if let Some(&k) = key
                && !slots.contains_key(&k)
            {
                slots.insert(k, names.len());
                names.push(name.clone());
            }
        }
        let index: HashMap<&str, usize> = names
            .iter()
            .enumerate()
            .map(|(i, n)| (n.as_str(), i))
            .collect();
        let mut tensors = Vec::with_capacity(samples);
        let mut bytes = 0usize;
        for i in 0..samples {
            let Some(inputs) = reference.sample_inputs(i) else {
                return Ok(None);
            };
            let mut kept: Vec<Option<HostTensor>> = vec![None; names.len()];
            loaded
                .run_observed(inputs, &mut |t| {
                    if let Some(&s) = t.name().and_then(|n| index.get(n)) {
                        bytes += t.len() * t.dtype().size_of().max(1);
                        kept[s] = Some(t.clone());
                    }
                    Ok(())
                })
                .map_err(|e| {
                    OpsError::new(ErrorKind::Verify, format!("observing the base: {e}"))
                })?;
            // The first sample's tensors tell what all of them would take.
            if bytes.saturating_mul(samples) / (i + 1) > budget {
                return Ok(None);
            }
            let Some(kept) = kept.into_iter().collect::<Option<Vec<_>>>() else {
                return Ok(None);
            };
            tensors.push(kept);
        }
        let elements: Vec<usize> = tensors
            .first()
            .map(|ts| ts.iter().map(HostTensor::len).collect())
            .unwrap_or_default();
        Ok(Some(Prefix {
            known,
            slots,
            total: elements.iter().sum(),
            elements,
            tensors,
            weights,
        }))
    }

    /// Samples the base ran on.
    pub(in crate::int8) fn samples(&self) -> usize {
        self.tensors.len()
    }

    /// `candidate` cut (see [`Prefix::cut`]) and judged on the first
    /// `limit` samples of `reference` in `sessions` sessions of `chosen`.
    /// None where it is not cut or the runtime refuses the cut model: the
    /// caller then runs it whole (the cut is a cost, never a verdict).
    #[allow(clippy::too_many_arguments)]
    pub(in crate::int8) fn judge_cut(
        &self,
        chosen: &ChosenBackend,
        sessions: usize,
        candidate: &Model,
        dir: &Path,
        reference: &Reference,
        limit: usize,
        heads: &Heads,
    ) -> Option<Judged> {
        let (cut, fed) = self.cut(candidate, reference, limit)?;
        evaluate::held_out_against_fed(chosen, sessions, &cut, dir, &fed, reference, limit, heads)
            .ok()
    }

    /// `candidate` without the nodes that compute what the base did, and
    /// what it runs on for the first `limit` samples of `reference`. None
    /// where the cut would save too little (see [`LEAST_SHARE`]) or cannot
    /// be made.
    pub(in crate::int8) fn cut(
        &self,
        candidate: &Model,
        reference: &Reference,
        limit: usize,
    ) -> Option<(Model, Fed)> {
        if limit == 0 || limit > self.samples() {
            return None;
        }
        let g = &candidate.graph;
        let keys = structural_keys(g, &self.weights)?;
        let slot_of = |v: &ValueId| keys.get(v).and_then(|k| self.slots.get(k)).copied();
        let known = |v: &ValueId| keys.get(v).is_some_and(|k| self.known.contains(k));
        let order = g.topological_order().ok()?;
        let cached = self.cached_nodes(g, &order, &known, &slot_of);
        // A share of the kept tensors' elements stands for the share of
        // the work cut away.
        let saved: usize = cached
            .iter()
            .flat_map(|&id| g.node(id).outputs.iter().flatten())
            .filter_map(&slot_of)
            .map(|s| self.elements[s])
            .sum();
        if (saved as f64) < LEAST_SHARE * self.total as f64 {
            return None;
        }
        // The cached nodes' tensors that the rest reads become inputs (a
        // subgraph's capture of one not kept: no cut).
        let fed: Vec<(ValueId, usize)> = order
            .iter()
            .filter(|id| cached.contains(id))
            .flat_map(|&id| g.node(id).outputs.iter().flatten())
            .filter(|&&v| g.value(v).uses.iter().any(|u| !cached.contains(&u.node)))
            .map(|&v| slot_of(&v).map(|s| (v, s)))
            .collect::<Option<_>>()?;
        let mut m = candidate.clone();
        for &id in order.iter().filter(|id| cached.contains(id)) {
            m.graph.remove_node(id);
        }
        for &(v, s) in &fed {
            let t = &self.tensors[0][s];
            let ty = TensorType {
                dtype: DataType::from_code(t.dtype().onnx_code()),
                shape: Some(t.shape().iter().map(|&d| Dim::Known(d as i64)).collect()),
            };
            let name = m.graph.value(v).name.clone();
            m.graph.inputs.push(GraphIo {
                value: v,
                info: ValueInfoProto {
                    name: Some(name),
                    r#type: Some(ty.to_proto(None)),
                    ..Default::default()
                },
            });
        }
        drop_unread(&mut m.graph);
        let fed = self.feeds(&m.graph, &fed, reference, limit)?;
        Some((m, fed))
    }

    /// The nodes of `g` that compute what a base node computed (`known`),
    /// none that computes a graph output, less those whose output the
    /// others read where that is a quantizing or dequantizing node's (so
    /// that no cut falls between a Q/DQ pair and the op it feeds) or a
    /// tensor the base did not keep (`slot_of`).
    fn cached_nodes(
        &self,
        g: &Graph,
        order: &[NodeId],
        known: &dyn Fn(&ValueId) -> bool,
        slot_of: &dyn Fn(&ValueId) -> Option<usize>,
    ) -> HashSet<NodeId> {
        let mut cached: HashSet<NodeId> = order
            .iter()
            .copied()
            .filter(|&id| {
                let n = g.node(id);
                n.outputs.iter().flatten().next().is_some()
                    && n.outputs
                        .iter()
                        .flatten()
                        .all(|o| !g.is_graph_output(*o) && known(o))
            })
            .collect();
        loop {
            let pulled: Vec<NodeId> = order
                .iter()
                .filter(|id| !cached.contains(id))
                .flat_map(|&id| g.node(id).inputs.iter().flatten())
                .filter_map(|&v| g.value(v).producer.map(|(p, _)| (v, p)))
                .filter(|(v, p)| {
                    cached.contains(p) && (is_q_or_dq(&g.node(*p).op_type) || slot_of(v).is_none())
                })
                .map(|(_, p)| p)
                .collect();
            if pulled.is_empty() {
                return cached;
            }
            for p in pulled {
                cached.remove(&p);
            }
        }
    }

    /// The tensors the cut graph `g` runs on (its inputs: the samples' own
    /// and the base's `fed`), per sample.
    fn feeds(
        &self,
        g: &Graph,
        fed: &[(ValueId, usize)],
        reference: &Reference,
        limit: usize,
    ) -> Option<Fed> {
        let declared = reference.input_specs();
        let mut sources = Vec::with_capacity(g.inputs.len());
        let mut specs = Vec::with_capacity(g.inputs.len());
        for io in &g.inputs {
            let name = &g.value(io.value).name;
            let source = match declared.iter().position(|s| &s.name == name) {
                Some(j) => Source::Sample(j),
                None => Source::Base(fed.iter().find(|(v, _)| *v == io.value)?.1),
            };
            let dtype = match source {
                Source::Sample(j) => declared[j].dtype,
                Source::Base(s) => self.tensors[0][s].dtype(),
            };
            specs.push(IoSpec {
                name: name.clone(),
                dtype,
                dims: None,
            });
            sources.push(source);
        }
        let mut inputs = Vec::with_capacity(limit);
        for i in 0..limit {
            let own = reference.sample_inputs(i)?;
            let row: Option<Vec<HostTensor>> = sources
                .iter()
                .zip(&specs)
                .map(|(source, spec)| match source {
                    Source::Sample(j) => own.get(*j).cloned(),
                    Source::Base(s) => Some(self.tensors[i][*s].clone().named(&spec.name)),
                })
                .collect();
            inputs.push(row?);
        }
        let mut shapes = InputShapes::default();
        for (spec, t) in specs.iter().zip(inputs.first()?) {
            shapes.shapes.insert(spec.name.clone(), t.shape().to_vec());
        }
        Some(Fed {
            specs,
            shapes,
            inputs,
        })
    }
}

fn is_q_or_dq(op: &str) -> bool {
    matches!(op, "QuantizeLinear" | "DequantizeLinear")
}

/// The ops a probe's candidate changes where it quantizes a tensor: a
/// weighted layer's input, or a QuantizeLinear inserted before it.
fn changes_start_at(op: &str) -> bool {
    matches!(
        op,
        "Conv" | "ConvTranspose" | "MatMul" | "Gemm" | "QuantizeLinear"
    )
}

/// The tensors of `g` a cut may fall on, by name: every computed one (not
/// a graph output) but those a quantizing or dequantizing node computes
/// (no cut falls there) and those read by one node only that reads no
/// other computed tensor and whose change does not start there (a Relu
/// after a Conv): what reads it computes what the base did whenever the
/// tensor does, and is cut away with it. PP-OCRv4 det keeps about half its
/// tensors.
fn cut_points(g: &Graph) -> Vec<String> {
    let computed = |v: ValueId| g.value(v).producer.is_some() || g.is_graph_input(v);
    let mut out = Vec::new();
    for (_, n) in g.nodes() {
        if is_q_or_dq(&n.op_type) {
            continue;
        }
        for &v in n.outputs.iter().flatten() {
            let value = g.value(v);
            if value.name.is_empty() || g.is_graph_output(v) {
                continue;
            }
            let mut readers = value.uses.iter();
            let only_reader = match (readers.next(), readers.next()) {
                (Some(u), None) => Some(g.node(u.node)),
                _ => None,
            };
            let passes_through = only_reader.is_some_and(|r| {
                !changes_start_at(&r.op_type)
                    && !r.has_subgraphs()
                    && r.inputs.iter().flatten().filter(|&&i| computed(i)).count() == 1
            });
            if !passes_through {
                out.push(value.name.clone());
            }
        }
    }
    out
}

/// Drops what no node of `g` reads any more: graph inputs, weights and the
/// tensors the removed nodes computed.
fn drop_unread(g: &mut Graph) {
    let unread = |g: &Graph, v: ValueId| g.value(v).uses.is_empty() && !g.is_graph_output(v);
    let inputs: Vec<GraphIo> = g
        .inputs
        .iter()
        .filter(|io| !unread(g, io.value))
        .cloned()
        .collect();
    g.inputs = inputs;
    let dead: Vec<ValueId> = g
        .value_ids()
        .filter(|&v| {
            let value = g.value(v);
            value.producer.is_none() && !g.is_graph_input(v) && unread(g, v)
        })
        .collect();
    for v in dead {
        g.remove_value(v);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use infopt_ir::builder::{GraphBuilder, dims};
    use infopt_verify::evaluate::{self, Heads, Pair};
    use infopt_verify::{BackendKind, BackendOptions, Dataset, Sample};

    const HIDDEN: usize = 8;

    /// `x [1, 4] -> Relu -> MatMul(w1) -> Relu -> [Q/DQ] -> MatMul(w2) ->
    /// Add(b) -> y`: the second MatMul's weight quantized (`int8_w2`) or
    /// not, its input quantized (`qdq_input`) or not, the first weight
    /// moved by `w1_shift`.
    fn two_layers(int8_w2: bool, qdq_input: bool, w1_shift: f32) -> Model {
        let mut b = GraphBuilder::new();
        let x = b.input("x", DataType::Float, dims(&["1", "4"]));
        let w1: Vec<f32> = (0..4 * HIDDEN)
            .map(|i| ((i as f32) * 0.7).sin() + w1_shift)
            .collect();
        let w1 = b.f32("w1", &[4, HIDDEN as i64], &w1);
        let r1 = b.op("Relu", &[x], vec![]);
        let h = b.op("MatMul", &[r1, w1], vec![]);
        let mut h = b.op("Relu", &[h], vec![]);
        let scale = b.f32("scale", &[], &[0.02]);
        let zero = b.initializer(
            "zero",
            Tensor::from_raw(DataType::Int8, vec![], Bytes::from(vec![0u8])),
        );
        if qdq_input {
            let q = b.op("QuantizeLinear", &[h, scale, zero], vec![]);
            h = b.op("DequantizeLinear", &[q, scale, zero], vec![]);
        }
        let w2: Vec<f32> = (0..HIDDEN * 3)
            .map(|i| ((i as f32) * 1.1).cos() * 0.5)
            .collect();
        let w2 = if int8_w2 {
            let q: Vec<u8> = w2.iter().map(|v| (v / 0.02).round() as i8 as u8).collect();
            let q = b.initializer(
                "w2_q",
                Tensor::from_raw(DataType::Int8, vec![HIDDEN as i64, 3], Bytes::from(q)),
            );
            b.op("DequantizeLinear", &[q, scale, zero], vec![])
        } else {
            b.f32("w2", &[HIDDEN as i64, 3], &w2)
        };
        let bias = b.f32("b", &[3], &[0.1, -0.2, 0.05]);
        let y = b.op("MatMul", &[h, w2], vec![]);
        let y = b.op("Add", &[y, bias], vec![]);
        b.output(y, "y", DataType::Float, Some(dims(&["1", "3"])));
        b.build(13)
    }

    /// The nodes of `two_layers(true, true, _)` after its second Relu.
    const SECOND_LAYER_QUANTIZED: [&str; 5] = [
        "QuantizeLinear",
        "DequantizeLinear",
        "DequantizeLinear",
        "MatMul",
        "Add",
    ];

    struct Samples(usize);

    impl Dataset for Samples {
        fn describe(&self) -> String {
            "test samples".into()
        }
        fn meaningful(&self) -> bool {
            true
        }
        fn sample_count(&self) -> Option<usize> {
            Some(5)
        }
        fn next_sample(&mut self, _: &[IoSpec]) -> Result<Option<Sample>, String> {
            if self.0 == 5 {
                return Ok(None);
            }
            let t = self.0 as f32;
            let v = vec![(t * 0.37).sin(), (t * 0.91).cos(), t * 0.2 - 0.4, 0.3];
            self.0 += 1;
            let x = HostTensor::from_vec(vec![1, 4], v)
                .map_err(|e| e.to_string())?
                .named("x");
            Ok(Some(Sample {
                index: self.0 - 1,
                origin: format!("sample {}", self.0 - 1),
                tensors: vec![x],
            }))
        }
    }

    struct Setup {
        chosen: ChosenBackend,
        reference: Reference,
        prefix: Prefix,
    }

    fn setup(base: &Model) -> Setup {
        let chosen = ChosenBackend::build(BackendKind::Tract, &BackendOptions::default()).unwrap();
        let shapes = InputShapes::default();
        let original = two_layers(false, false, 0.0);
        let pair = Pair {
            chosen: &chosen,
            original: &original,
            candidate: &original,
            dir: Path::new("."),
            shapes: &shapes,
        };
        let reference = Reference::collect(&pair, &mut Samples(0), 0, 5, usize::MAX).unwrap();
        let prefix = Prefix::capture(&chosen, base, Path::new("."), &reference, 4, usize::MAX)
            .unwrap()
            .unwrap();
        Setup {
            chosen,
            reference,
            prefix,
        }
    }

    fn ops_of(m: &Model) -> Vec<String> {
        let g = &m.graph;
        let order = g.topological_order().unwrap();
        order.iter().map(|&id| g.node(id).op_type.clone()).collect()
    }

    fn input_names(m: &Model) -> Vec<String> {
        let g = &m.graph;
        g.inputs
            .iter()
            .map(|io| g.value(io.value).name.clone())
            .collect()
    }

    /// The whole candidate and the cut one judged on the same samples.
    fn judged_both_ways(s: &Setup, candidate: &Model, cut: &Model, fed: &Fed) -> [String; 2] {
        let heads = Heads::default();
        let whole = evaluate::held_out_against(
            &s.chosen,
            candidate,
            Path::new("."),
            &InputShapes::default(),
            &s.reference,
            4,
            &heads,
        )
        .unwrap();
        let cut = evaluate::held_out_against_fed(
            &s.chosen,
            1,
            cut,
            Path::new("."),
            fed,
            &s.reference,
            4,
            &heads,
        )
        .unwrap();
        assert_eq!(cut.runs, 4);
        [whole, cut].map(|j| serde_json::to_string(&j.held_out).unwrap())
    }

    #[test]
    fn a_candidate_runs_from_the_first_tensor_it_computes_otherwise_with_the_same_figures() {
        let s = setup(&two_layers(false, false, 0.0));
        let candidate = two_layers(true, true, 0.0);
        let (cut, fed) = s.prefix.cut(&candidate, &s.reference, 4).unwrap();
        // Relu, MatMul, Relu compute what the base did: the rest runs from
        // the second Relu's output, fed from the base's run.
        assert_eq!(ops_of(&cut), SECOND_LAYER_QUANTIZED);
        let relu2 = candidate
            .graph
            .value(candidate.graph.node(candidate.graph.node_at(2)).outputs[0].unwrap())
            .name
            .clone();
        assert_eq!(input_names(&cut), [relu2]);
        assert_eq!(fed.inputs.len(), 4);
        assert_eq!(fed.inputs[0][0].shape(), [1, HIDDEN]);
        assert!(
            cut.graph.find_value("w1").is_none(),
            "the cut-away weight is dropped"
        );
        let [whole, cut] = judged_both_ways(&s, &candidate, &cut, &fed);
        assert_eq!(whole, cut);
    }

    #[test]
    fn no_cut_falls_between_a_quantize_dequantize_pair_and_the_op_it_feeds() {
        // The base quantizes the second MatMul's input as the candidate
        // does: the pair computes the same, and is run again all the same.
        let s = setup(&two_layers(false, true, 0.0));
        let candidate = two_layers(true, true, 0.0);
        let (cut, fed) = s.prefix.cut(&candidate, &s.reference, 4).unwrap();
        assert_eq!(ops_of(&cut), SECOND_LAYER_QUANTIZED);
        assert_eq!(input_names(&cut).len(), 1);
        let [whole, cut] = judged_both_ways(&s, &candidate, &cut, &fed);
        assert_eq!(whole, cut);
    }

    #[test]
    fn only_the_tensors_a_cut_may_fall_on_are_kept_and_the_cut_finds_them() {
        let s = setup(&two_layers(false, false, 0.0));
        // The Relus' outputs, which weighted layers read; not the first
        // MatMul's, which only its Relu reads, nor the graph output.
        assert_eq!(s.prefix.slots.len(), 2);
        assert_eq!(s.prefix.known.len(), 4);
        // Another first weight: the first Relu alone is the base's, and the
        // rest runs from its output.
        let candidate = two_layers(false, false, 0.25);
        let (cut, fed) = s.prefix.cut(&candidate, &s.reference, 4).unwrap();
        assert_eq!(ops_of(&cut), ["MatMul", "Relu", "MatMul", "Add"]);
        let [whole, cut] = judged_both_ways(&s, &candidate, &cut, &fed);
        assert_eq!(whole, cut);
    }

    #[test]
    fn a_candidate_that_differs_from_its_first_node_on_runs_whole() {
        let s = setup(&two_layers(false, false, 0.0));
        let mut candidate = two_layers(false, false, 0.0);
        let first = candidate.graph.node_at(0);
        candidate.graph.node_mut(first).op_type = "Abs".into();
        assert!(s.prefix.cut(&candidate, &s.reference, 4).is_none());
        // More samples than the base ran on.
        assert!(
            s.prefix
                .cut(&two_layers(true, true, 0.0), &s.reference, 5)
                .is_none()
        );
    }
}
