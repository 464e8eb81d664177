//! `GraphBuilder`: small models in code, for tests and examples.

use crate::attr::Attribute;
use crate::dtype::DataType;
use crate::graph::{Graph, GraphIo, Node, Value, ValueId};
use crate::model::Model;
use crate::proto::ValueInfoProto;
use crate::shape::{Dim, TensorType};
use crate::tensor::Tensor;

pub struct GraphBuilder {
    graph: Graph,
    counter: usize,
}

impl Default for GraphBuilder {
    fn default() -> Self {
        GraphBuilder::new()
    }
}

/// Parses `"batch"` as a symbol, `"3"` as a known dim and `"?"` as an
/// unknown dim. (Negative numbers stay: tests also spell shape *values*,
/// where `-1` is an element, with it.)
pub fn dims(spec: &[&str]) -> Vec<Dim> {
    spec.iter()
        .map(|s| match s.parse::<i64>() {
            Ok(v) => Dim::Known(v),
            Err(_) if *s == "?" => Dim::Unknown,
            Err(_) => Dim::Sym(s.to_string()),
        })
        .collect()
}

fn info_of(ty: &TensorType) -> ValueInfoProto {
    ValueInfoProto {
        r#type: Some(ty.to_proto(None)),
        ..Default::default()
    }
}

impl GraphBuilder {
    pub fn new() -> GraphBuilder {
        GraphBuilder {
            graph: Graph::new("main"),
            counter: 0,
        }
    }

    pub fn input(&mut self, name: &str, dtype: DataType, shape: Vec<Dim>) -> ValueId {
        let v = self.graph.add_value(Value::named(name));
        let ty = TensorType {
            dtype,
            shape: Some(shape),
        };
        self.graph.inputs.push(GraphIo {
            value: v,
            info: info_of(&ty),
        });
        v
    }

    pub fn initializer(&mut self, name: &str, tensor: Tensor) -> ValueId {
        self.graph.add_initializer(name, tensor)
    }

    pub fn f32(&mut self, name: &str, dims: &[i64], values: &[f32]) -> ValueId {
        self.initializer(name, Tensor::from_f32(dims.to_vec(), values))
    }

    pub fn i64(&mut self, name: &str, dims: &[i64], values: &[i64]) -> ValueId {
        self.initializer(name, Tensor::from_i64(dims.to_vec(), values))
    }

    /// Adds a node with one output and returns it.
    pub fn op(&mut self, op: &str, inputs: &[ValueId], attributes: Vec<Attribute>) -> ValueId {
        self.op_n(op, inputs, attributes, 1)[0]
    }

    /// Adds a node with `outputs` outputs; names are `<op>_<k>` / `<op>_<k>_out<i>`.
    pub fn op_n(
        &mut self,
        op: &str,
        inputs: &[ValueId],
        attributes: Vec<Attribute>,
        outputs: usize,
    ) -> Vec<ValueId> {
        self.counter += 1;
        let name = format!("{}_{}", op.to_lowercase(), self.counter);
        let node = Node {
            name: Some(name.clone()),
            op_type: op.to_string(),
            inputs: inputs.iter().map(|&v| Some(v)).collect(),
            attributes,
            ..Default::default()
        };
        let names: Vec<String> = (0..outputs)
            .map(|i| {
                if outputs == 1 {
                    format!("{name}_out")
                } else {
                    format!("{name}_out{i}")
                }
            })
            .collect();
        let refs: Vec<&str> = names.iter().map(|s| s.as_str()).collect();
        let id = self.graph.add_node(node, &refs);
        self.graph
            .node(id)
            .outputs
            .iter()
            .flatten()
            .copied()
            .collect()
    }

    /// Marks `v` as a graph output with the given type; renames it to `name`.
    pub fn output(&mut self, v: ValueId, name: &str, dtype: DataType, shape: Option<Vec<Dim>>) {
        self.graph.value_mut(v).name = name.to_string();
        let ty = TensorType { dtype, shape };
        self.graph.outputs.push(GraphIo {
            value: v,
            info: info_of(&ty),
        });
    }

    pub fn graph_mut(&mut self) -> &mut Graph {
        &mut self.graph
    }

    pub fn build(self, opset: i64) -> Model {
        Model::new(self.graph, opset)
    }

    pub fn into_graph(self) -> Graph {
        self.graph
    }
}
