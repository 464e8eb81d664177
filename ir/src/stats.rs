//! Counting what a model contains: op histograms, parameters, subgraphs.

use std::collections::BTreeMap;

use crate::graph::{Graph, ValueId};
use crate::model::Model;

/// Op key as shown in reports: `Conv`, or `com.microsoft::FusedConv` for other domains.
pub fn op_key(domain: &str, op_type: &str) -> String {
    if domain.is_empty() {
        op_type.to_string()
    } else {
        format!("{domain}::{op_type}")
    }
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct GraphStats {
    /// Nodes of the main graph (subgraph nodes not included).
    pub nodes: usize,
    /// Op histogram of the main graph.
    pub ops: BTreeMap<String, usize>,
    /// Nodes inside subgraphs, all nesting levels.
    pub subgraph_nodes: usize,
    /// Op histogram of the nodes inside subgraphs.
    pub subgraph_ops: BTreeMap<String, usize>,
    /// Number of subgraphs (If branches, Loop/Scan bodies), all levels.
    pub subgraphs: usize,
    /// Elements of all initializers and Constant-node tensors (main graph and subgraphs).
    pub parameters: u64,
    /// Bytes of all initializers' data.
    pub parameter_bytes: u64,
    /// Of `parameter_bytes`, the bytes still in external-data files (mapped,
    /// not copied, by a runtime that maps them).
    pub external_parameter_bytes: u64,
    pub initializers: usize,
}

impl GraphStats {
    pub fn of_model(model: &Model) -> GraphStats {
        let mut s = GraphStats::default();
        s.add_graph(&model.graph, false);
        s
    }

    fn add_graph(&mut self, g: &Graph, nested: bool) {
        for (_, t) in g.initializers() {
            self.initializers += 1;
            self.parameters += t.numel().unwrap_or(0) as u64;
            self.parameter_bytes += t.payload_bytes() as u64;
            if t.external.is_some() {
                self.external_parameter_bytes += t.payload_bytes() as u64;
            }
        }
        for (_, node) in g.nodes() {
            // Weights stored as Constant nodes (paddle2onnx, some torch
            // exports) are parameters too.
            if node.is("Constant")
                && let Ok(Some(t)) = node.attr_tensor("value")
            {
                self.parameters += t.numel().unwrap_or(0) as u64;
                self.parameter_bytes += t.payload_bytes() as u64;
            }
            let key = op_key(node.domain(), &node.op_type);
            if nested {
                self.subgraph_nodes += 1;
                *self.subgraph_ops.entry(key).or_default() += 1;
            } else {
                self.nodes += 1;
                *self.ops.entry(key).or_default() += 1;
            }
            for sg in node.subgraphs() {
                self.subgraphs += 1;
                self.add_graph(sg, true);
            }
        }
    }
}

/// The multiply-adds one run of `g`'s main graph does in its convolutions
/// and matrix products (the ops that dominate a CNN's or a transformer's
/// run), with each value's dims from `dims_of` (the weights' from their
/// tensors). None where one of those ops has dims that are not known, or
/// where there is none of them: then a caller needs another measure of the
/// model's cost.
///
/// Unlike a timed run, the count is the same on every run and every
/// machine, so what is sized by it (the INT8 search's ranking samples)
/// does not change from one run of a command to the next.
pub fn multiply_adds(g: &Graph, dims_of: &dyn Fn(ValueId) -> Option<Vec<u64>>) -> Option<u64> {
    let known = |v: Option<ValueId>| -> Option<Vec<u64>> {
        let v = v?;
        match g.constant(v) {
            Some(t) => t.dims().iter().map(|&d| u64::try_from(d).ok()).collect(),
            None => dims_of(v),
        }
    };
    let product = |dims: &[u64]| dims.iter().product::<u64>();
    let mut total: u64 = 0;
    let mut counted = 0usize;
    for (_, n) in g.nodes() {
        if !n.domain().is_empty() {
            continue;
        }
        let input = |i: usize| n.inputs.get(i).copied().flatten();
        let output = n.outputs.first().copied().flatten();
        let macs = match n.op_type.as_str() {
            // Each output element sums Cin/group · kernel products.
            "Conv" => product(&known(output)?) * product(known(input(1))?.get(1..)?),
            // Each input element scatters into Cout/group · kernel outputs.
            "ConvTranspose" => product(&known(input(0))?) * product(known(input(1))?.get(1..)?),
            "MatMul" => product(&known(output)?) * *known(input(0))?.last()?,
            "Gemm" => {
                let a = known(input(0))?;
                let trans_a = n.attr_int_or("transA", 0).ok()? != 0;
                let k = if trans_a { a.first()? } else { a.last()? };
                product(&known(output)?) * *k
            }
            _ => continue,
        };
        total = total.saturating_add(macs);
        counted += 1;
    }
    (counted > 0).then_some(total)
}

#[cfg(test)]
mod tests {
    use super::multiply_adds;
    use crate::{Attribute, Graph, Node, Tensor, ValueId};

    fn node(op: &str, inputs: &[ValueId]) -> Node {
        let mut n = Node::new(op);
        n.inputs = inputs.iter().map(|&v| Some(v)).collect();
        n
    }

    /// x [1,3,8,8] -> Conv 4x3x3x3 (pads 1) -> [1,4,8,8] -> Flatten [1,256]
    /// -> Gemm (transB) with [10,256] -> [1,10].
    fn graph() -> (Graph, [ValueId; 4]) {
        let mut g = Graph::new("g");
        let x = g.add_value(crate::Value::named("x"));
        let w = g.add_initializer("w", Tensor::from_f32(vec![4, 3, 3, 3], &[0.0; 108]));
        let c = g.add_node(node("Conv", &[x, w]), &["c"]);
        let c = g.node(c).outputs[0].unwrap();
        let f = g.add_node(node("Flatten", &[c]), &["f"]);
        let f = g.node(f).outputs[0].unwrap();
        let b = g.add_initializer("b", Tensor::from_f32(vec![10, 256], &[0.0; 2560]));
        let mut gemm = node("Gemm", &[f, b]);
        gemm.attributes.push(Attribute::int("transB", 1));
        let y = g.add_node(gemm, &["y"]);
        let y = g.node(y).outputs[0].unwrap();
        (g, [x, c, f, y])
    }

    #[test]
    fn convolutions_and_products_count_their_multiply_adds() {
        let (g, [x, c, f, y]) = graph();
        let dims = |v: ValueId| -> Option<Vec<u64>> {
            Some(match v {
                v if v == x => vec![1, 3, 8, 8],
                v if v == c => vec![1, 4, 8, 8],
                v if v == f => vec![1, 256],
                v if v == y => vec![1, 10],
                _ => return None,
            })
        };
        // Conv: 256 outputs x 3 channels x 9 taps; Gemm: 10 outputs x 256.
        assert_eq!(multiply_adds(&g, &dims), Some(256 * 27 + 10 * 256));
        // A Conv output of unknown dims: no count rather than a wrong one.
        let unknown_conv = |v: ValueId| if v == c { None } else { dims(v) };
        assert_eq!(multiply_adds(&g, &unknown_conv), None);
        // Nothing to count.
        assert_eq!(multiply_adds(&Graph::new("empty"), &dims), None);
    }
}
