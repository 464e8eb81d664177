//! Counting what a model contains: op histograms, parameters, subgraphs.

use std::collections::BTreeMap;

use crate::graph::Graph;
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
