//! Shape and type inference with symbolic dims.
//!
//! [`infer_shapes`] walks every graph in topological order, applies one rule
//! per op (see the files of this module, one per op family) and records what
//! it learns in `value_info` (and in the graph output declarations). Rules
//! never guess: a dim they cannot prove is `Dim::Unknown`, an op without a
//! rule yields nothing and is counted in [`InferReport::blocked`]. A fact the
//! model already states is never replaced by a less precise one; when the
//! model's fact contradicts an inferred one the model's is kept and the
//! contradiction is listed in [`InferReport::conflicts`].
//!
//! Besides types, inference tracks the *values* of small integer tensors
//! (shape tensors) as lists of dims: `Shape(x)` of `x: [batch, 3]` has value
//! `[batch, 3]`, and Gather/Concat/Slice/Unsqueeze/arithmetic on such values
//! keep them. That is what lets `Reshape(y, Concat(Gather(Shape(x), 0), [-1]))`
//! get the output shape `[batch, ...]`, and what lets constant folding collapse
//! shape scaffolding once the dims are fixed ([`GraphFacts::known_value`]).
//!
//! Assumption: symbolic dims are non-negative (they are sizes).

pub mod sym;

mod contrib;
mod control;
mod elementwise;
mod facts;
mod linalg;
mod ml;
mod nn;
mod reduce;
mod rule_cx;
mod shape_ops;

use crate::dtype::DataType;
use crate::graph::{Graph, ValueId};
use crate::model::Model;
use crate::shape::{Dim, TensorType};
use crate::stats::op_key;
use crate::tensor::Tensor;

// The facts and the rule context sit below the rule files (facts.rs,
// rule_cx.rs); this file is the driver that dispatches to the rules.
pub use facts::{Fact, GraphFacts, InferReport, MAX_VALUE_ELEMS, Opsets, Scope, SymValue};
use rule_cx::RuleCx;

/// The tensor a `Constant` node holds (any of its value attributes).
pub fn constant_value(node: &crate::graph::Node) -> Option<Tensor> {
    shape_ops::constant_tensor(node)
}

pub(crate) use constant_value as shape_ops_constant;

/// Infers types and shapes of every value of the model (main graph and all
/// subgraphs) and records them in `value_info` and the output declarations.
pub fn infer_shapes(model: &mut Model) -> InferReport {
    let opsets = Opsets::of(model);
    let mut report = InferReport::default();
    infer_graph(&mut model.graph, opsets, &Scope::default(), &mut report);
    report
}

/// Infers one graph (and, recursively, its subgraphs) in the given scope.
pub fn infer_graph(
    g: &mut Graph,
    opsets: Opsets,
    scope: &Scope,
    report: &mut InferReport,
) -> GraphFacts {
    infer_graph_with(g, opsets, scope, &[], report)
}

/// Like [`infer_graph`], with facts about the graph inputs supplied by the
/// enclosing node (Loop/Scan bodies): their dims win over the graph's own
/// declarations (the element type, and the rank on a conflict, are the
/// declaration's).
pub(crate) fn infer_graph_with(
    g: &mut Graph,
    opsets: Opsets,
    scope: &Scope,
    input_facts: &[Option<Fact>],
    report: &mut InferReport,
) -> GraphFacts {
    let mut facts = GraphFacts::default();
    // Seed: graph inputs, initializers, outer values.
    for v in g.value_ids().collect::<Vec<_>>() {
        if let Some(f) = seed_fact(g, v, scope) {
            facts.facts.insert(v, f);
        }
    }
    let mut corrected = Vec::new();
    for (slot, (io, given)) in g.inputs.iter().zip(input_facts).enumerate() {
        let Some(given) = given else { continue };
        let merged = match facts.facts.get(&io.value) {
            Some(declared) => {
                let mut scratch = InferReport::default();
                let mut ty = merge_types(
                    &declared.ty,
                    &given.ty,
                    "",
                    &mut scratch,
                    RankConflict::Declared,
                );
                // Of the same rank, the enclosing node's fact is the shape:
                // for a Loop's carried value it is what every iteration
                // agrees on, where the exporter often declares the initial
                // value's (torchvision's Mask R-CNN paste loop declares its
                // growing mask list [0, 320, 320]; taken as fixed, the
                // body's Concat onto it looked empty and was dropped).
                if let (Some(d), Some(gs)) = (&declared.ty.shape, &given.ty.shape)
                    && d.len() == gs.len()
                {
                    ty.shape = Some(gs.clone());
                    // A fixed dim the iterations do not keep is written
                    // back too: passes read the declaration.
                    if d.iter()
                        .zip(gs)
                        .any(|(a, b)| matches!(a, Dim::Known(_)) && a != b)
                    {
                        corrected.push((slot, ty.clone()));
                    }
                }
                Fact { ty, value: None }
            }
            None => Fact {
                ty: given.ty.clone(),
                value: None,
            },
        };
        facts.facts.insert(io.value, merged);
    }
    for (slot, ty) in corrected {
        let io = &mut g.inputs[slot];
        io.info.r#type = Some(ty.to_proto(io.info.r#type.as_ref()));
        let v = io.value;
        if g.value(v).info.is_some() {
            g.set_value_type(v, &ty);
        }
        report.updated += 1;
    }
    let order = g.topological_order().unwrap_or_else(|_| g.node_ids());
    for id in order {
        let outs: Vec<Option<ValueId>> = g.node(id).outputs.clone();
        let inferred: Option<Vec<Fact>> = if g.node(id).has_subgraphs() {
            control::infer(g, id, opsets, &facts, scope, report, infer_graph_with)
        } else {
            let cx = RuleCx::new(g, id, opsets, &facts);
            match infer_node(&cx) {
                Some(v) => Some(v),
                None => {
                    let node = g.node(id);
                    *report
                        .blocked
                        .entry(op_key(node.domain(), &node.op_type))
                        .or_default() += 1;
                    None
                }
            }
        };
        let inferred = inferred.unwrap_or_default();
        for (slot, out) in outs.iter().enumerate() {
            let Some(out) = *out else { continue };
            let new = inferred.get(slot).cloned().unwrap_or_else(Fact::unknown);
            let merged = record(g, out, sane(new), report);
            facts.facts.insert(out, merged);
        }
    }
    facts
}

/// A rule computes dims from attributes and values a file may set to
/// anything; a negative size or an absurd rank is not a fact about a tensor,
/// so it becomes unknown before anything downstream sizes a buffer by it.
fn sane(mut f: Fact) -> Fact {
    if let Some(shape) = &mut f.ty.shape {
        if shape.len() > crate::shape::MAX_RANK {
            f.ty.shape = None;
        } else {
            for d in shape.iter_mut() {
                if matches!(d, Dim::Known(v) if *v < 0) {
                    *d = Dim::Unknown;
                }
            }
        }
    }
    f
}

/// The fact a value starts with: its initializer, declaration or outer fact.
fn seed_fact(g: &Graph, v: ValueId, scope: &Scope) -> Option<Fact> {
    let value = g.value(v);
    if value.outer {
        return scope
            .facts
            .get(&value.name)
            .cloned()
            .or_else(|| value.tensor_type().map(|ty| Fact { ty, value: None }));
    }
    if let Some(t) = g.constant(v) {
        return Some(Fact::of_tensor(t));
    }
    if g.is_graph_input(v) || value.producer.is_none() {
        return g.value_type(v).map(|ty| Fact {
            ty: canonical_type(ty),
            value: None,
        });
    }
    None
}

fn canonical_type(mut ty: TensorType) -> TensorType {
    if let Some(s) = ty.shape.as_mut() {
        for d in s.iter_mut() {
            *d = sym::canonical(d);
        }
    }
    ty
}

/// Merges the model's fact for `v` with an inferred one, writes the result
/// to the graph when it is more precise, and returns it.
fn record(g: &mut Graph, v: ValueId, inferred: Fact, report: &mut InferReport) -> Fact {
    let existing = g.value_type(v);
    let name = g.value(v).name.clone();
    let merged_ty = match &existing {
        None => inferred.ty.clone(),
        Some(e) => merge_types(e, &inferred.ty, &name, report, RankConflict::Inferred),
    };
    let fact = Fact {
        ty: merged_ty.clone(),
        value: inferred.value,
    };
    if merged_ty.dtype == DataType::Undefined || existing.as_ref() == Some(&merged_ty) {
        return fact;
    }
    if g.is_graph_input(v) || g.value(v).initializer.is_some() || g.value(v).outer {
        return fact;
    }
    report.updated += 1;
    let is_output = g.is_graph_output(v);
    let in_value_info = g.value(v).info.is_some();
    if is_output {
        for io in g.outputs.iter_mut().filter(|io| io.value == v) {
            io.info.r#type = Some(merged_ty.to_proto(io.info.r#type.as_ref()));
        }
    }
    if !is_output || in_value_info {
        g.set_value_type(v, &merged_ty);
    }
    fact
}

/// Which rank stands when a declaration and inference disagree on it.
#[derive(Clone, Copy)]
enum RankConflict {
    /// A body input: the body's own declaration.
    Declared,
    /// A node's output: what the node makes. A file declaring another rank
    /// (a fuzzed `value_info`) is wrong, and ONNX Runtime's merge takes the
    /// inferred shape too; kept, the declared rank spread to the values
    /// after it and a saved ConvInteger met dilations of the wrong length.
    Inferred,
}

fn merge_types(
    e: &TensorType,
    i: &TensorType,
    name: &str,
    report: &mut InferReport,
    rank_conflict: RankConflict,
) -> TensorType {
    let dtype = if e.dtype != DataType::Undefined {
        if i.dtype != DataType::Undefined && i.dtype != e.dtype {
            report.conflicts.push(format!(
                "'{name}': the model says {}, inference says {}; kept the model's",
                e.dtype, i.dtype
            ));
        }
        e.dtype
    } else {
        i.dtype
    };
    let shape = match (&e.shape, &i.shape) {
        (None, s) | (s, None) => s.clone(),
        (Some(a), Some(b)) if a.len() != b.len() => {
            let (kept, which) = match rank_conflict {
                RankConflict::Declared => (a, "the model's"),
                RankConflict::Inferred => (b, "inference's"),
            };
            report.conflicts.push(format!(
                "'{name}': the model says rank {} ({}), inference says rank {} ({}); kept {which}",
                a.len(),
                fmt_dims(a),
                b.len(),
                fmt_dims(b)
            ));
            Some(kept.clone())
        }
        (Some(a), Some(b)) => {
            let mut out = Vec::with_capacity(a.len());
            for (k, (x, y)) in a.iter().zip(b).enumerate() {
                out.push(match (x, y) {
                    (Dim::Known(p), Dim::Known(q)) => {
                        if p != q {
                            report.conflicts.push(format!(
                                "'{name}': dim {k} is {p} in the model, inference says {q}; kept the model's"
                            ));
                        }
                        Dim::Known(*p)
                    }
                    (Dim::Known(p), _) => Dim::Known(*p),
                    (_, Dim::Known(q)) => Dim::Known(*q),
                    (_, Dim::Sym(s)) => Dim::Sym(s.clone()),
                    (x, Dim::Unknown) => x.clone(),
                });
            }
            Some(out)
        }
    };
    TensorType { dtype, shape }
}

pub fn fmt_dims(d: &[Dim]) -> String {
    format!(
        "[{}]",
        d.iter()
            .map(|x| x.to_string())
            .collect::<Vec<_>>()
            .join(",")
    )
}

/// Dispatches a node without subgraphs to its rule. `None`: no rule.
fn infer_node(cx: &RuleCx) -> Option<Vec<Fact>> {
    crate::context::enter_node(cx.node);
    match cx.node.domain() {
        "" => elementwise::infer(cx)
            .or_else(|| shape_ops::infer(cx))
            .or_else(|| nn::infer(cx))
            .or_else(|| linalg::infer(cx))
            .or_else(|| reduce::infer(cx)),
        "com.microsoft" => contrib::infer(cx),
        "ai.onnx.ml" => ml::infer(cx),
        _ => None,
    }
}

#[cfg(test)]
pub(crate) mod testutil {
    use super::*;
    use crate::attr::Attribute;
    use crate::builder::GraphBuilder;
    use crate::graph::Node;

    /// Infers `op` on inputs of the given types (None = omitted input) and
    /// constants, returning the output facts.
    pub fn run(
        op: &str,
        opset: i64,
        inputs: &[Input],
        attrs: Vec<Attribute>,
        n_out: usize,
    ) -> Vec<Fact> {
        run_in("", op, opset, inputs, attrs, n_out)
    }

    pub enum Input {
        T(DataType, Vec<Dim>),
        Unranked(DataType),
        C(Box<Tensor>),
        None,
    }

    pub fn d(spec: &[&str]) -> Vec<Dim> {
        crate::builder::dims(spec)
    }

    pub fn f32s(spec: &[&str]) -> Input {
        Input::T(DataType::Float, d(spec))
    }

    pub fn i64c(v: &[i64]) -> Input {
        Input::C(Box::new(Tensor::from_i64(vec![v.len() as i64], v)))
    }

    pub fn i64s(v: i64) -> Input {
        Input::C(Box::new(Tensor::from_i64(vec![], &[v])))
    }

    pub fn run_in(
        domain: &str,
        op: &str,
        opset: i64,
        inputs: &[Input],
        attrs: Vec<Attribute>,
        n_out: usize,
    ) -> Vec<Fact> {
        let mut b = GraphBuilder::new();
        let mut ids = Vec::new();
        for (k, i) in inputs.iter().enumerate() {
            ids.push(match i {
                Input::T(dt, dims) => Some(b.input(&format!("in{k}"), *dt, dims.clone())),
                Input::Unranked(dt) => {
                    let v = b.input(&format!("in{k}"), *dt, vec![]);
                    let g = b.graph_mut();
                    let io = g.inputs.last_mut().unwrap();
                    io.info.r#type = Some(
                        TensorType {
                            dtype: *dt,
                            shape: None,
                        }
                        .to_proto(None),
                    );
                    Some(v)
                }
                Input::C(t) => Some(b.initializer(&format!("c{k}"), (**t).clone())),
                Input::None => None,
            });
        }
        let g = b.graph_mut();
        let node = Node {
            name: Some("n".into()),
            op_type: op.into(),
            domain: if domain.is_empty() {
                None
            } else {
                Some(domain.into())
            },
            inputs: ids,
            attributes: attrs,
            ..Default::default()
        };
        let names: Vec<String> = (0..n_out).map(|i| format!("out{i}")).collect();
        let refs: Vec<&str> = names.iter().map(|s| s.as_str()).collect();
        let id = g.add_node(node, &refs);
        let outs = g.node(id).outputs.clone();
        let mut model = b.build(opset);
        let mut opsets = Opsets::of(&model);
        opsets.microsoft = Some(1);
        let mut report = InferReport::default();
        let facts = infer_graph(&mut model.graph, opsets, &Scope::default(), &mut report);
        outs.iter()
            .map(|o| facts.get(o.unwrap()).cloned().unwrap_or_else(Fact::unknown))
            .collect()
    }

    pub fn shape_of(f: &Fact) -> String {
        match f.shape() {
            Some(s) => fmt_dims(s),
            None => "?".into(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::testutil::*;
    use super::*;
    use crate::attr::Attribute;
    use crate::builder::GraphBuilder;

    #[test]
    fn does_not_overwrite_precise_facts_and_reports_conflicts() {
        let mut b = GraphBuilder::new();
        let x = b.input("x", DataType::Float, d(&["batch", "3"]));
        let y = b.op("Relu", &[x], vec![]);
        let z = b.op("Relu", &[y], vec![]);
        b.output(z, "z", DataType::Float, None);
        let g = b.graph_mut();
        // The model says y is [4, 3]: more precise than [batch, 3].
        g.set_value_type(
            y,
            &TensorType {
                dtype: DataType::Float,
                shape: Some(d(&["4", "3"])),
            },
        );
        let mut m = b.build(17);
        let r = infer_shapes(&mut m);
        assert!(r.conflicts.is_empty(), "{:?}", r.conflicts);
        let g = &m.graph;
        assert_eq!(g.value_type(y).unwrap().shape, Some(d(&["4", "3"])));
        // Downstream uses the merged (precise) fact; the output declaration is updated.
        assert_eq!(g.value_type(z).unwrap().shape, Some(d(&["4", "3"])));
        assert!(
            !g.value_info_ids().contains(&z),
            "graph outputs are declared, not listed in value_info"
        );

        // A contradicting fact is kept and reported.
        let mut b = GraphBuilder::new();
        let x = b.input("x", DataType::Float, d(&["2", "3"]));
        let y = b.op("Relu", &[x], vec![]);
        b.graph_mut().set_value_type(
            y,
            &TensorType {
                dtype: DataType::Float,
                shape: Some(d(&["5", "3"])),
            },
        );
        let mut m = b.build(17);
        let r = infer_shapes(&mut m);
        assert_eq!(r.conflicts.len(), 1, "{:?}", r.conflicts);
        assert!(r.conflicts[0].contains("dim 0 is 5"), "{}", r.conflicts[0]);
        assert_eq!(m.graph.value_type(y).unwrap().shape, Some(d(&["5", "3"])));
    }

    /// A `value_info` entry for a graph output that contradicts the output's
    /// own declaration (fuzz seed 4242 case 731: int64 on a Reshape's float
    /// output) does not type the value: the output declaration does, as in
    /// ONNX Runtime, and inference does not write the wrong type onto it.
    #[test]
    fn a_graph_outputs_declaration_wins_over_its_value_info() {
        let mut b = GraphBuilder::new();
        let x = b.input("x", DataType::Float, d(&["2", "3"]));
        let y = b.op("Relu", &[x], vec![]);
        b.output(y, "y", DataType::Float, None);
        b.graph_mut().set_value_type(
            y,
            &TensorType {
                dtype: DataType::Int64,
                shape: None,
            },
        );
        let mut m = b.build(17);
        let r = infer_shapes(&mut m);
        assert!(r.conflicts.is_empty(), "{:?}", r.conflicts);
        let g = &m.graph;
        assert_eq!(g.value_type(y).unwrap().dtype, DataType::Float);
        let declared = g.outputs[0].info.r#type.as_ref();
        assert_eq!(
            declared.and_then(TensorType::from_proto).map(|t| t.dtype),
            Some(DataType::Float)
        );
    }

    #[test]
    fn blocked_ops_are_reported_and_yield_nothing() {
        let mut b = GraphBuilder::new();
        let x = b.input("x", DataType::Float, d(&["2", "3"]));
        let y = b.op("FancyOp", &[x], vec![]);
        let z = b.op("Relu", &[y], vec![]);
        b.output(z, "z", DataType::Float, None);
        let mut m = b.build(17);
        let r = infer_shapes(&mut m);
        assert_eq!(r.blocked.get("FancyOp"), Some(&1));
        assert!(m.graph.value_type(y).is_none());
        // Relu of an unknown input: nothing is known, nothing is written.
        assert_eq!(m.graph.value_type(z).unwrap().shape, None);
    }

    #[test]
    fn shape_values_flow_through_scaffolding() {
        // torch-style: Reshape(x, Concat(Unsqueeze(Gather(Shape(x), 0)), [-1]))
        let mut b = GraphBuilder::new();
        let x = b.input("x", DataType::Float, d(&["batch", "4", "8", "8"]));
        let s = b.op("Shape", &[x], vec![]);
        let i0 = b.initializer("i0", Tensor::from_i64(vec![], &[0]));
        let g0 = b.op("Gather", &[s, i0], vec![Attribute::int("axis", 0)]);
        let ax = b.i64("ax", &[1], &[0]);
        let u = b.op("Unsqueeze", &[g0, ax], vec![]);
        let m1 = b.i64("m1", &[1], &[-1]);
        let c = b.op("Concat", &[u, m1], vec![Attribute::int("axis", 0)]);
        let r = b.op("Reshape", &[x, c], vec![]);
        b.output(r, "y", DataType::Float, None);
        let mut m = b.build(13);
        let mut report = InferReport::default();
        let o = Opsets::of(&m);
        let facts = infer_graph(&mut m.graph, o, &Scope::default(), &mut report);
        assert_eq!(
            facts.get(c).unwrap().value,
            Some(SymValue::vector(d(&["batch", "-1"])))
        );
        assert_eq!(
            m.graph.value_type(r).unwrap().shape,
            Some(d(&["batch", "256"]))
        );
        assert!(facts.known_value(c).is_none());
        assert!(report.blocked.is_empty());
    }

    #[test]
    fn a_range_from_one_length_to_the_sum_of_two_has_the_second_length() {
        // The positions of the new tokens: Range(past, past + seq, 1).
        let mut b = GraphBuilder::new();
        let cache = b.input("cache", DataType::Float, d(&["past"]));
        let ids = b.input("ids", DataType::Int64, d(&["seq"]));
        let i0 = b.initializer("i0", Tensor::from_i64(vec![], &[0]));
        let one = b.initializer("one", Tensor::from_i64(vec![], &[1]));
        let sp = b.op("Shape", &[cache], vec![]);
        let past = b.op("Gather", &[sp, i0], vec![Attribute::int("axis", 0)]);
        let ss = b.op("Shape", &[ids], vec![]);
        let seq = b.op("Gather", &[ss, i0], vec![Attribute::int("axis", 0)]);
        let end = b.op("Add", &[past, seq], vec![]);
        let r = b.op("Range", &[past, end, one], vec![]);
        // Counting down is not a length.
        let back = b.op("Range", &[end, past, one], vec![]);
        b.output(r, "positions", DataType::Int64, None);
        b.output(back, "none", DataType::Int64, None);
        let mut m = b.build(13);
        let mut report = InferReport::default();
        let o = Opsets::of(&m);
        let facts = infer_graph(&mut m.graph, o, &Scope::default(), &mut report);
        assert_eq!(facts.get(r).unwrap().shape(), Some(&d(&["seq"])[..]));
        assert!(!matches!(facts.get(back).unwrap().shape(), Some([Dim::Sym(s)]) if s == "seq"));
    }
}
