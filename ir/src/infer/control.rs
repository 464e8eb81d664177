//! If, Loop and Scan: inference inside the subgraphs, and the node's outputs
//! from the subgraphs' outputs.
//!
//! Loop-carried values and Scan states may change shape from one iteration to
//! the next. The body is first inferred on scratch copies, assuming the
//! carried values keep the initial facts; the assumption is kept only if the
//! body's outputs confirm it (a fixed point), otherwise the carried values are
//! joined (differing dims become unknown) and, failing that, left unknown.
//! Only the confirmed facts are written into the body.

use crate::dtype::DataType;
use crate::graph::{Graph, NodeId, ValueId};
use crate::shape::Dim;
use crate::stats::op_key;

use super::facts::{Fact, GraphFacts, InferGraph, InferReport, Opsets, Scope};

/// The least precise fact covering both (differing dims become unknown).
pub(crate) fn join(a: &Fact, b: &Fact) -> Fact {
    let dtype = match (a.ty.dtype, b.ty.dtype) {
        (x, y) if x == y => x,
        (DataType::Undefined, y) => y,
        (x, DataType::Undefined) => x,
        _ => DataType::Undefined,
    };
    let shape = match (a.shape(), b.shape()) {
        (Some(x), Some(y)) if x.len() == y.len() => Some(
            x.iter()
                .zip(y)
                .map(|(p, q)| if p == q { p.clone() } else { Dim::Unknown })
                .collect(),
        ),
        _ => None,
    };
    let value = if a.value == b.value {
        a.value.clone()
    } else {
        None
    };
    Fact {
        ty: crate::shape::TensorType { dtype, shape },
        value,
    }
}

fn output_facts(sub: &Graph, facts: &GraphFacts) -> Vec<Fact> {
    sub.outputs
        .iter()
        .map(|io| {
            facts
                .get(io.value)
                .cloned()
                .or_else(|| sub.value_type(io.value).map(|ty| Fact { ty, value: None }))
                .unwrap_or_else(Fact::unknown)
        })
        .collect()
}

fn input_fact(g: &Graph, facts: &GraphFacts, v: Option<ValueId>) -> Option<Fact> {
    let v = v?;
    Some(
        facts
            .get(v)
            .cloned()
            .or_else(|| g.value_type(v).map(|ty| Fact { ty, value: None }))
            .unwrap_or_else(Fact::unknown),
    )
}

/// Takes the subgraphs of attribute `name` out of the node (put them back with [`restore`]).
fn take(g: &mut Graph, id: NodeId, name: &str) -> Option<(usize, Vec<Graph>)> {
    let node = g.node_mut(id);
    let i = node
        .attributes
        .iter()
        .position(|a| a.name() == name && !a.subgraphs.is_empty())?;
    Some((i, std::mem::take(&mut node.attributes[i].subgraphs)))
}

fn restore(g: &mut Graph, id: NodeId, taken: (usize, Vec<Graph>)) {
    g.node_mut(id).attributes[taken.0].subgraphs = taken.1;
}

/// Is the value constant-true (an initializer or a known value)?
fn const_bool(g: &Graph, facts: &GraphFacts, v: Option<ValueId>) -> Option<bool> {
    let v = v?;
    if let Some(t) = g.constant(v) {
        return t
            .to_i64_vec()
            .ok()
            .and_then(|x| (x.len() == 1).then(|| x[0] != 0));
    }
    match facts.get(v)?.value.as_ref()?.known()?.as_slice() {
        [x] => Some(*x != 0),
        _ => None,
    }
}

/// What a Loop body is inferred with: the driver (see [`InferGraph`]), the
/// opsets and the scope it reads.
struct BodyCx<'a> {
    infer_graph_with: InferGraph,
    opsets: Opsets,
    scope: &'a Scope,
}

/// Infers the body with carried inputs at a fixed point; returns the body's output facts.
fn infer_body(
    cx: &BodyCx,
    body: &mut Graph,
    fixed: &[Option<Fact>],
    carried_initial: &[Fact],
    carried_out_offset: usize,
    report: &mut InferReport,
) -> Vec<Fact> {
    let mut candidate: Vec<Fact> = carried_initial.to_vec();
    let mut confirmed = None;
    for _ in 0..3 {
        let mut trial = body.clone();
        let mut given: Vec<Option<Fact>> = fixed.to_vec();
        given.extend(candidate.iter().cloned().map(Some));
        let mut scratch = InferReport::default();
        let facts = (cx.infer_graph_with)(&mut trial, cx.opsets, cx.scope, &given, &mut scratch);
        let outs = output_facts(&trial, &facts);
        let next: Vec<Fact> = candidate
            .iter()
            .enumerate()
            .map(|(i, c)| match outs.get(carried_out_offset + i) {
                Some(o) => join(c, o),
                None => Fact::unknown(),
            })
            .collect();
        if next.iter().zip(&candidate).all(|(a, b)| a.ty == b.ty) {
            confirmed = Some(candidate.clone());
            break;
        }
        candidate = next;
    }
    let carried: Vec<Option<Fact>> = match confirmed {
        Some(c) => c
            .into_iter()
            .map(|mut f| {
                f.value = None;
                Some(f)
            })
            .collect(),
        // No fixed point: only the element types are trusted.
        None => carried_initial
            .iter()
            .map(|f| Some(Fact::new(f.ty.dtype, None)))
            .collect(),
    };
    let mut given: Vec<Option<Fact>> = fixed.to_vec();
    given.extend(carried);
    let facts = (cx.infer_graph_with)(body, cx.opsets, cx.scope, &given, report);
    output_facts(body, &facts)
}

/// `infer_graph_with` is the driver, passed in (see [`InferGraph`]).
pub(crate) fn infer(
    g: &mut Graph,
    id: NodeId,
    opsets: Opsets,
    facts: &GraphFacts,
    scope: &Scope,
    report: &mut InferReport,
    infer_graph_with: InferGraph,
) -> Option<Vec<Fact>> {
    let sub_scope = facts.scope_for_subgraphs(g, scope);
    let node = g.node(id);
    let op = if node.domain().is_empty() {
        node.op_type.clone()
    } else {
        String::new()
    };
    let inputs: Vec<Option<Fact>> = node
        .inputs
        .clone()
        .into_iter()
        .map(|v| input_fact(g, facts, v))
        .collect();
    let n_out = node.outputs.len();
    match op.as_str() {
        "If" => {
            let cond = const_bool(g, facts, node.inputs.first().copied().flatten());
            let mut branch_outs: Vec<Vec<Fact>> = Vec::new();
            for (k, name) in ["then_branch", "else_branch"].iter().enumerate() {
                let Some(mut taken) = take(g, id, name) else {
                    continue;
                };
                if let Some(sub) = taken.1.first_mut() {
                    let f = infer_graph_with(sub, opsets, &sub_scope, &[], report);
                    let outs = output_facts(sub, &f);
                    // A constant condition: only the taken branch matters.
                    if cond.is_none() || cond == Some(k == 0) {
                        branch_outs.push(outs);
                    }
                }
                restore(g, id, taken);
            }
            let out = match branch_outs.as_slice() {
                [a] => a.clone(),
                [a, b] => a.iter().zip(b).map(|(x, y)| join(x, y)).collect(),
                _ => vec![],
            };
            Some(out)
        }
        "Loop" => {
            let Some(mut taken) = take(g, id, "body") else {
                return Some(vec![]);
            };
            let carried_initial: Vec<Fact> = inputs
                .iter()
                .skip(2)
                .map(|f| f.clone().unwrap_or_else(Fact::unknown))
                .collect();
            let n_carried = carried_initial.len();
            let fixed = vec![
                Some(Fact::new(DataType::Int64, Some(vec![]))),
                Some(Fact::new(DataType::Bool, Some(vec![]))),
            ];
            let mut out = Vec::new();
            if let Some(body) = taken.1.first_mut() {
                let body_cx = BodyCx {
                    infer_graph_with,
                    opsets,
                    scope: &sub_scope,
                };
                let outs = infer_body(&body_cx, body, &fixed, &carried_initial, 1, report);
                // Trip count: M iterations when the body passes its condition through unchanged.
                let passthrough =
                    body.outputs.first().map(|o| o.value) == body.inputs.get(1).map(|i| i.value);
                let node = g.node(id);
                let m_input = node.inputs.first().copied().flatten();
                let cond_input = node.inputs.get(1).copied().flatten();
                let cond_true =
                    cond_input.is_none() || const_bool(g, facts, cond_input) == Some(true);
                let m = m_input.and_then(|v| {
                    g.constant(v)
                        .and_then(|t| t.to_i64_vec().ok())
                        .or_else(|| facts.get(v)?.value.as_ref()?.known())
                });
                let trips = match (passthrough && cond_true, m.as_deref()) {
                    (true, Some([m])) => Dim::Known((*m).max(0)),
                    _ => Dim::Unknown,
                };
                for (i, init) in carried_initial.iter().enumerate() {
                    let o = outs.get(1 + i).cloned().unwrap_or_else(Fact::unknown);
                    // Zero iterations return the initial value.
                    out.push(if trips == Dim::Unknown || trips == Dim::Known(0) {
                        join(init, &o)
                    } else {
                        o
                    });
                }
                for o in outs.iter().skip(1 + n_carried) {
                    let shape = o.shape().map(|s| {
                        let mut v = vec![trips.clone()];
                        v.extend(s.iter().cloned());
                        v
                    });
                    out.push(Fact::new(o.ty.dtype, shape));
                }
            }
            restore(g, id, taken);
            out.truncate(n_out);
            Some(out)
        }
        "Scan" if opsets.onnx >= 9 => {
            let Some(mut taken) = take(g, id, "body") else {
                return Some(vec![]);
            };
            let node = g.node(id);
            let m = node
                .attr_int("num_scan_inputs")
                .ok()
                .flatten()
                .unwrap_or(0)
                .max(0) as usize;
            let n_states = inputs.len().saturating_sub(m);
            let in_axes = node
                .attr_ints("scan_input_axes")
                .ok()
                .flatten()
                .map(|a| a.to_vec())
                .unwrap_or_else(|| vec![0; m]);
            let out_axes = node
                .attr_ints("scan_output_axes")
                .ok()
                .flatten()
                .map(|a| a.to_vec());
            let states: Vec<Fact> = inputs[..n_states]
                .iter()
                .map(|f| f.clone().unwrap_or_else(Fact::unknown))
                .collect();
            let mut seq_len = Dim::Unknown;
            let mut elems: Vec<Option<Fact>> = Vec::new();
            for (k, f) in inputs[n_states..].iter().enumerate() {
                let f = f.clone().unwrap_or_else(Fact::unknown);
                let shape = f.shape().and_then(|s| {
                    let a = super::facts::norm_axis(*in_axes.get(k).unwrap_or(&0), s.len())?;
                    if k == 0 {
                        seq_len = s[a].clone();
                    }
                    let mut e = s.to_vec();
                    e.remove(a);
                    Some(e)
                });
                elems.push(Some(Fact::new(f.ty.dtype, shape)));
            }
            let mut out = Vec::new();
            if let Some(body) = taken.1.first_mut() {
                // Body inputs: states first, then scan elements; infer_body wants the
                // fixed inputs first, so reorder through a wrapper of given facts.
                let outs = infer_scan_body(
                    infer_graph_with,
                    body,
                    opsets,
                    &sub_scope,
                    &states,
                    &elems,
                    report,
                );
                for (i, init) in states.iter().enumerate() {
                    let o = outs.get(i).cloned().unwrap_or_else(Fact::unknown);
                    out.push(if seq_len == Dim::Unknown {
                        join(init, &o)
                    } else {
                        o
                    });
                }
                for (k, o) in outs.iter().skip(n_states).enumerate() {
                    let shape = o.shape().and_then(|s| {
                        let axis = out_axes
                            .as_ref()
                            .and_then(|a| a.get(k).copied())
                            .unwrap_or(0);
                        let a = super::facts::norm_axis(axis, s.len() + 1)?;
                        let mut v = s.to_vec();
                        v.insert(a, seq_len.clone());
                        Some(v)
                    });
                    out.push(Fact::new(o.ty.dtype, shape));
                }
            }
            restore(g, id, taken);
            out.truncate(n_out);
            Some(out)
        }
        _ => {
            // Unknown semantics: still infer inside the subgraphs, but the
            // node's outputs stay unknown.
            let n_attrs = g.node(id).attributes.len();
            for a in 0..n_attrs {
                let mut subs = std::mem::take(&mut g.node_mut(id).attributes[a].subgraphs);
                for sg in &mut subs {
                    infer_graph_with(sg, opsets, &sub_scope, &[], report);
                }
                g.node_mut(id).attributes[a].subgraphs = subs;
            }
            let node = g.node(id);
            *report
                .blocked
                .entry(op_key(node.domain(), &node.op_type))
                .or_default() += 1;
            None
        }
    }
}

/// Scan bodies take the states first and the scan elements after: the
/// fixed-point search runs over the states with the elements fixed.
fn infer_scan_body(
    infer_graph_with: InferGraph,
    body: &mut Graph,
    opsets: Opsets,
    scope: &Scope,
    states: &[Fact],
    elems: &[Option<Fact>],
    report: &mut InferReport,
) -> Vec<Fact> {
    let mut candidate: Vec<Fact> = states.to_vec();
    let mut confirmed = None;
    for _ in 0..3 {
        let mut trial = body.clone();
        let mut given: Vec<Option<Fact>> = candidate.iter().cloned().map(Some).collect();
        given.extend(elems.iter().cloned());
        let mut scratch = InferReport::default();
        let facts = infer_graph_with(&mut trial, opsets, scope, &given, &mut scratch);
        let outs = output_facts(&trial, &facts);
        let next: Vec<Fact> = candidate
            .iter()
            .enumerate()
            .map(|(i, c)| {
                outs.get(i)
                    .map(|o| join(c, o))
                    .unwrap_or_else(Fact::unknown)
            })
            .collect();
        if next.iter().zip(&candidate).all(|(a, b)| a.ty == b.ty) {
            confirmed = Some(candidate.clone());
            break;
        }
        candidate = next;
    }
    let mut given: Vec<Option<Fact>> = match confirmed {
        Some(c) => c
            .into_iter()
            .map(|mut f| {
                f.value = None;
                Some(f)
            })
            .collect(),
        None => states
            .iter()
            .map(|f| Some(Fact::new(f.ty.dtype, None)))
            .collect(),
    };
    given.extend(elems.iter().cloned());
    let facts = infer_graph_with(body, opsets, scope, &given, report);
    output_facts(body, &facts)
}

#[cfg(test)]
mod tests {
    use super::super::testutil::*;
    use super::super::*;
    use crate::attr::Attribute;
    use crate::builder::GraphBuilder;
    use crate::graph::{GraphIo, Node, Value};
    use crate::proto::ValueInfoProto;

    /// Adds a one-output node and returns its output.
    fn op1(g: &mut Graph, op: &str, inputs: Vec<Option<ValueId>>, out: &str) -> ValueId {
        let n = g.add_node(
            Node {
                op_type: op.into(),
                inputs,
                ..Default::default()
            },
            &[out],
        );
        g.node(n).outputs[0].unwrap()
    }

    fn io(g: &mut Graph, name: &str, ty: Option<TensorType>) -> ValueId {
        let v = g.add_value(Value::named(name));
        let info = ValueInfoProto {
            r#type: ty.map(|t| t.to_proto(None)),
            ..Default::default()
        };
        g.inputs.push(GraphIo { value: v, info });
        v
    }

    fn out(g: &mut Graph, v: ValueId) {
        g.outputs.push(GraphIo {
            value: v,
            info: ValueInfoProto::default(),
        });
    }

    fn outer(g: &mut Graph, name: &str) -> ValueId {
        g.add_value(Value {
            outer: true,
            ..Value::named(name)
        })
    }

    #[test]
    fn if_joins_branches_and_infers_inside() {
        // then: Relu(x) : [n, 4]; else: Transpose(x) : [4, n] → join [?, ?] unless n == 4.
        let mut then_g = Graph::new("then");
        let x1 = outer(&mut then_g, "x");
        let t_out = op1(&mut then_g, "Relu", vec![Some(x1)], "t_out");
        out(&mut then_g, t_out);
        let mut else_g = Graph::new("else");
        let x2 = outer(&mut else_g, "x");
        let e_out = op1(&mut else_g, "Sigmoid", vec![Some(x2)], "e_out");
        out(&mut else_g, e_out);

        let mut b = GraphBuilder::new();
        let _x = b.input("x", DataType::Float, d(&["n", "4"]));
        let c = b.input("c", DataType::Bool, vec![]);
        let y = b.op(
            "If",
            &[c],
            vec![
                Attribute::graph("then_branch", then_g),
                Attribute::graph("else_branch", else_g),
            ],
        );
        b.output(y, "y", DataType::Float, None);
        let mut m = b.build(13);
        let r = infer_shapes(&mut m);
        assert!(r.blocked.is_empty(), "{:?}", r.blocked);
        assert_eq!(m.graph.value_type(y).unwrap().shape, Some(d(&["n", "4"])));
        // Inside the branch, the Relu output type was recorded too.
        let n = m.graph.producer(y).unwrap();
        let then_g = &n.attr("then_branch").unwrap().subgraphs[0];
        assert_eq!(
            then_g.value_type(t_out).unwrap().shape,
            Some(d(&["n", "4"]))
        );
    }

    #[test]
    fn loop_carried_and_scan_outputs() {
        // body(i, cond, acc): acc2 = Add(acc, w_outer); scan = Identity(acc2)
        let mut body = Graph::new("body");
        io(
            &mut body,
            "i",
            Some(TensorType {
                dtype: DataType::Int64,
                shape: Some(vec![]),
            }),
        );
        let cond = io(
            &mut body,
            "cond",
            Some(TensorType {
                dtype: DataType::Bool,
                shape: Some(vec![]),
            }),
        );
        let acc = io(&mut body, "acc", None);
        let w = outer(&mut body, "w");
        let acc2 = op1(&mut body, "Add", vec![Some(acc), Some(w)], "acc2");
        let scan = op1(&mut body, "Identity", vec![Some(acc2)], "scan");
        out(&mut body, cond);
        out(&mut body, acc2);
        out(&mut body, scan);

        let mut b = GraphBuilder::new();
        let x = b.input("x", DataType::Float, d(&["3", "4"]));
        let _w = b.f32("w", &[4], &[0.0; 4]);
        let m_ = b.i64("m", &[], &[5]);
        let t = b.initializer(
            "t",
            crate::tensor::Tensor::from_raw(DataType::Bool, vec![], vec![1u8].into()),
        );
        let outs = b.op_n("Loop", &[m_, t, x], vec![Attribute::graph("body", body)], 2);
        let mut model = b.build(13);
        infer_shapes(&mut model);
        let g = &model.graph;
        assert_eq!(g.value_type(outs[0]).unwrap().shape, Some(d(&["3", "4"])));
        assert_eq!(
            g.value_type(outs[1]).unwrap().shape,
            Some(d(&["5", "3", "4"]))
        );
    }

    #[test]
    fn loop_with_growing_carried_value_is_not_assumed_stable() {
        // body(i, cond, acc): acc2 = Concat(acc, acc) along 0: the shape changes each iteration.
        let mut body = Graph::new("body");
        io(&mut body, "i", None);
        let cond = io(&mut body, "cond", None);
        let acc = io(&mut body, "acc", None);
        let c = body.add_node(
            Node {
                op_type: "Concat".into(),
                inputs: vec![Some(acc), Some(acc)],
                attributes: vec![Attribute::int("axis", 0)],
                ..Default::default()
            },
            &["acc2"],
        );
        let acc2 = body.node(c).outputs[0].unwrap();
        out(&mut body, cond);
        out(&mut body, acc2);
        let mut b = GraphBuilder::new();
        let x = b.input("x", DataType::Float, d(&["2", "4"]));
        let m_ = b.i64("m", &[], &[3]);
        let outs = b.op_n("Loop", &[m_, x], vec![Attribute::graph("body", body)], 1);
        let _ = outs;
        let mut model = b.build(13);
        // The Loop's condition input is omitted: inputs are M, "", x.
        let loop_id = model.graph.node_ids()[0];
        let xv = model.graph.node(loop_id).inputs[1];
        model.graph.set_input(loop_id, 1, None);
        model.graph.set_input(loop_id, 2, xv);
        infer_shapes(&mut model);
        let ty = model.graph.value_type(outs[0]).unwrap();
        assert_eq!(ty.shape, Some(vec![Dim::Unknown, Dim::Known(4)]));
        let n = model.graph.node(loop_id);
        let body = &n.attr("body").unwrap().subgraphs[0];
        let acc2_ty = body.value_type(acc2).unwrap();
        assert_eq!(acc2_ty.shape.as_ref().unwrap()[1], Dim::Known(4));
        assert_eq!(
            acc2_ty.shape.as_ref().unwrap()[0],
            Dim::Unknown,
            "never the first iteration's 4"
        );
    }

    #[test]
    fn scan_outputs_get_the_sequence_axis() {
        // body(state, elem): s2 = Add(state, elem); out = Identity(elem)
        let mut body = Graph::new("body");
        let st = io(&mut body, "st", None);
        let el = io(&mut body, "el", None);
        let s2 = op1(&mut body, "Add", vec![Some(st), Some(el)], "s2");
        let o = op1(&mut body, "Identity", vec![Some(el)], "o");
        out(&mut body, s2);
        out(&mut body, o);
        let mut b = GraphBuilder::new();
        let init = b.input("init", DataType::Float, d(&["4"]));
        let xs = b.input("xs", DataType::Float, d(&["seq", "4"]));
        let outs = b.op_n(
            "Scan",
            &[init, xs],
            vec![
                Attribute::graph("body", body),
                Attribute::int("num_scan_inputs", 1),
            ],
            2,
        );
        let mut model = b.build(11);
        infer_shapes(&mut model);
        assert_eq!(
            model.graph.value_type(outs[0]).unwrap().shape,
            Some(d(&["4"]))
        );
        assert_eq!(
            model.graph.value_type(outs[1]).unwrap().shape,
            Some(d(&["seq", "4"]))
        );
    }
}
