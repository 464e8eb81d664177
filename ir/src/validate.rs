//! Structural validation: the invariants every pass must keep.

use std::collections::HashSet;

use crate::error::{IrError, Result};
use crate::graph::{Graph, Slot};

/// Inputs (min, max) and outputs (min, max) of common ONNX ops; ops not listed
/// are not checked.
fn arity(op: &str) -> Option<((usize, usize), (usize, usize))> {
    const ANY: usize = usize::MAX;
    Some(match op {
        "Relu" | "Sigmoid" | "Tanh" | "Erf" | "Exp" | "Log" | "Sqrt" | "Neg" | "Abs"
        | "Reciprocal" | "Identity" | "Shape" | "Size" | "Softmax" | "LogSoftmax" | "Flatten"
        | "Transpose" | "GlobalAveragePool" | "GlobalMaxPool" | "Not" | "Floor" | "Ceil"
        | "Cast" | "LeakyRelu" | "HardSigmoid" | "Elu" | "Selu" | "Softplus" | "Gelu" => {
            ((1, 1), (1, 1))
        }
        "Add" | "Sub" | "Mul" | "Div" | "Pow" | "MatMul" | "Equal" | "Less" | "Greater" | "And"
        | "Or" | "Reshape" | "Expand" | "Tile" | "PRelu" | "Mod" => ((2, 2), (1, 1)),
        "Conv" | "ConvTranspose" | "Gemm" => ((2, 3), (1, 1)),
        "BatchNormalization" => ((5, 5), (1, 3)),
        "LayerNormalization" => ((2, 3), (1, 3)),
        "Concat" | "Sum" | "Max" | "Min" | "Mean" => ((1, ANY), (1, 1)),
        "Gather" | "GatherElements" | "GatherND" => ((2, 2), (1, 1)),
        "Where" => ((3, 3), (1, 1)),
        "Slice" => ((1, 5), (1, 1)),
        "Unsqueeze" | "Squeeze" => ((1, 2), (1, 1)),
        "Split" => ((1, 2), (1, ANY)),
        "Dropout" => ((1, 3), (1, 2)),
        "MaxPool" => ((1, 1), (1, 2)),
        "AveragePool" => ((1, 1), (1, 1)),
        "If" => ((1, 1), (1, ANY)),
        "Loop" => ((2, ANY), (1, ANY)),
        "ConstantOfShape" => ((1, 1), (1, 1)),
        "Constant" => ((0, 0), (1, 1)),
        "Range" => ((3, 3), (1, 1)),
        "QuantizeLinear" | "DequantizeLinear" => ((2, 3), (1, 1)),
        _ => return None,
    })
}

impl Graph {
    /// Checks the graph: acyclic, every input defined exactly once, use lists
    /// consistent, unique graph input/output names, arity of known ops, and
    /// subgraph references resolving to an enclosing scope.
    pub fn validate(&self) -> Result<()> {
        self.validate_in(&HashSet::new())
    }

    fn validate_in(&self, outer_scope: &HashSet<String>) -> Result<()> {
        self.topological_order()?;
        let mut inputs_seen = HashSet::new();
        for io in &self.inputs {
            let name = &self.value(io.value).name;
            if !inputs_seen.insert(name.clone()) {
                return Err(IrError::Invalid(format!(
                    "graph input '{name}' is listed twice"
                )));
            }
        }
        let mut outputs_seen = HashSet::new();
        for io in &self.outputs {
            let v = self.try_value(io.value).ok_or_else(|| {
                IrError::Invalid("a graph output refers to a removed value".into())
            })?;
            if !outputs_seen.insert(v.name.clone()) {
                return Err(IrError::DuplicateOutput {
                    name: v.name.clone(),
                });
            }
            if !self.is_defined(io.value, outer_scope) {
                return Err(IrError::UndefinedOutput {
                    name: v.name.clone(),
                });
            }
        }
        let mut scope: HashSet<String> = outer_scope.clone();
        for v in self.value_ids() {
            if self.is_defined(v, outer_scope) {
                scope.insert(self.value(v).name.clone());
            }
        }
        for (id, node) in self.nodes() {
            let label = || format!("node '{}' ({})", node.name_or_op(), node.op_type);
            for (slot, input) in node.inputs.iter().enumerate() {
                let Some(v) = *input else { continue };
                let value = self.try_value(v).ok_or_else(|| {
                    IrError::Invalid(format!(
                        "{} input {slot} refers to a removed value",
                        label()
                    ))
                })?;
                if !self.is_defined(v, outer_scope) {
                    return Err(IrError::UndefinedInput {
                        node: node.name_or_op().to_string(),
                        op: node.op_type.clone(),
                        input: value.name.clone(),
                    });
                }
                let u = crate::graph::Use {
                    node: id,
                    slot: Slot::Input(slot as u32),
                };
                if !value.uses.contains(&u) {
                    return Err(IrError::Invalid(format!(
                        "{} reads '{}' but the value does not list that use",
                        label(),
                        value.name
                    )));
                }
            }
            for (slot, output) in node.outputs.iter().enumerate() {
                let Some(v) = *output else { continue };
                let value = self.try_value(v).ok_or_else(|| {
                    IrError::Invalid(format!(
                        "{} output {slot} refers to a removed value",
                        label()
                    ))
                })?;
                if value.producer != Some((id, slot as u32)) {
                    return Err(IrError::Invalid(format!(
                        "{} output '{}' has another producer recorded",
                        label(),
                        value.name
                    )));
                }
                if value.initializer.is_some() || self.is_graph_input(v) {
                    return Err(IrError::DuplicateDefinition {
                        name: value.name.clone(),
                        first: label(),
                        second: "an initializer or graph input".into(),
                    });
                }
            }
            if node.domain().is_empty()
                && let Some(((imin, imax), (omin, omax))) = arity(&node.op_type)
            {
                let ni = node.inputs.len();
                let no = node.outputs.len();
                if ni < imin || ni > imax || no < omin || no > omax {
                    return Err(IrError::Invalid(format!(
                        "{} has {ni} inputs and {no} outputs; {} takes {imin}..{} inputs and {omin}..{} outputs",
                        label(),
                        node.op_type,
                        if imax == usize::MAX {
                            "n".to_string()
                        } else {
                            imax.to_string()
                        },
                        if omax == usize::MAX {
                            "n".to_string()
                        } else {
                            omax.to_string()
                        },
                    )));
                }
                // The first `imin` inputs are required (Loop's trip count and
                // condition may be empty): an empty name there made tract
                // index past a Conv's inputs and panic (fuzz seed 8080 case
                // 224: a weight slot left empty before the bias).
                if node.op_type != "Loop"
                    && let Some(slot) = node.inputs.iter().take(imin).position(Option::is_none)
                {
                    return Err(IrError::Invalid(format!(
                        "{} has no input {slot}, which {} requires (its name is empty)",
                        label(),
                        node.op_type
                    )));
                }
            }
            for sg in node.subgraphs() {
                sg.validate_in(&scope)
                    .map_err(|e| IrError::Invalid(format!("in a subgraph of {}: {e}", label())))?;
            }
        }
        for v in self.value_ids() {
            for u in &self.value(v).uses {
                if self.try_node(u.node).is_none() {
                    return Err(IrError::Invalid(format!(
                        "value '{}' lists a use by a removed node",
                        self.value(v).name
                    )));
                }
            }
        }
        Ok(())
    }

    fn is_defined(&self, v: crate::graph::ValueId, outer_scope: &HashSet<String>) -> bool {
        let value = self.value(v);
        if value.outer {
            return outer_scope.contains(&value.name);
        }
        value
            .producer
            .is_some_and(|(n, _)| self.try_node(n).is_some())
            || value.initializer.is_some()
            || value.sparse.is_some()
            || self.is_graph_input(v)
    }
}
