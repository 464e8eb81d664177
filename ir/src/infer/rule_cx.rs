//! What a rule sees.

use super::facts::{Fact, GraphFacts, Opsets, SymValue};
use crate::dtype::DataType;
use crate::graph::{Graph, Node, NodeId};
use crate::shape::Dim;
use crate::tensor::Tensor;

/// What a rule sees: the node, its inputs' facts and constants.
pub(crate) struct RuleCx<'a> {
    pub node: &'a Node,
    pub opsets: Opsets,
    pub inputs: Vec<Option<Fact>>,
    pub consts: Vec<Option<&'a Tensor>>,
    /// Output value names (for fresh symbols of data-dependent dims).
    pub out_names: Vec<String>,
}

impl<'a> RuleCx<'a> {
    pub(super) fn new(g: &'a Graph, id: NodeId, opsets: Opsets, facts: &GraphFacts) -> RuleCx<'a> {
        let node = g.node(id);
        let inputs = node
            .inputs
            .iter()
            .map(|i| {
                i.map(|v| {
                    facts.get(v).cloned().unwrap_or_else(|| {
                        g.value_type(v)
                            .map(|ty| Fact { ty, value: None })
                            .unwrap_or_else(Fact::unknown)
                    })
                })
            })
            .collect();
        let consts = node
            .inputs
            .iter()
            .map(|i| i.and_then(|v| g.constant(v)))
            .collect();
        let out_names = node
            .outputs
            .iter()
            .map(|o| o.map(|v| g.value(v).name.clone()).unwrap_or_default())
            .collect();
        RuleCx {
            node,
            opsets,
            inputs,
            consts,
            out_names,
        }
    }

    pub fn opset(&self) -> i64 {
        self.opsets.onnx
    }

    pub fn n_inputs(&self) -> usize {
        self.inputs.len()
    }

    pub fn has_input(&self, i: usize) -> bool {
        matches!(self.inputs.get(i), Some(Some(_)))
    }

    pub fn fact(&self, i: usize) -> Option<&Fact> {
        self.inputs.get(i)?.as_ref()
    }

    pub fn dtype(&self, i: usize) -> DataType {
        self.fact(i)
            .map(|f| f.ty.dtype)
            .unwrap_or(DataType::Undefined)
    }

    pub fn shape(&self, i: usize) -> Option<&[Dim]> {
        self.fact(i)?.shape()
    }

    pub fn rank(&self, i: usize) -> Option<usize> {
        self.shape(i).map(|s| s.len())
    }

    pub fn value(&self, i: usize) -> Option<&SymValue> {
        self.fact(i)?.value.as_ref()
    }

    /// Integer values of input `i` when all known (constant or inferred).
    pub fn ints(&self, i: usize) -> Option<Vec<i64>> {
        if let Some(t) = self.consts.get(i).copied().flatten()
            && let Ok(v) = t.to_i64_vec()
        {
            return Some(v);
        }
        self.value(i)?.known()
    }

    /// A float constant scalar/vector input.
    pub fn floats(&self, i: usize) -> Option<Vec<f64>> {
        self.consts.get(i).copied().flatten()?.to_f64_vec().ok()
    }

    pub fn attr_int(&self, name: &str, default: i64) -> i64 {
        self.node.attr_int(name).ok().flatten().unwrap_or(default)
    }

    pub fn attr_int_opt(&self, name: &str) -> Option<i64> {
        self.node.attr_int(name).ok().flatten()
    }

    pub fn attr_ints(&self, name: &str) -> Option<Vec<i64>> {
        self.node.attr_ints(name).ok().flatten().map(|a| a.to_vec())
    }

    pub fn attr_floats(&self, name: &str) -> Option<Vec<f32>> {
        self.node
            .attr_floats(name)
            .ok()
            .flatten()
            .map(|a| a.to_vec())
    }

    pub fn attr_string(&self, name: &str) -> Option<String> {
        self.node.attr_string(name).ok().flatten()
    }

    /// Fact of an output with the dtype of input `i` and the given shape.
    pub fn like(&self, i: usize, shape: Option<Vec<Dim>>) -> Fact {
        Fact::new(self.dtype(i), shape)
    }

    /// A fresh symbol for a data-dependent dim of output `slot`.
    pub fn fresh(&self, slot: usize, what: &str) -> Dim {
        let base: String = self
            .out_names
            .get(slot)
            .map(|n| {
                n.chars()
                    .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
                    .collect()
            })
            .unwrap_or_default();
        Dim::Sym(format!("{what}_{}", base.trim_matches('_')))
    }
}
