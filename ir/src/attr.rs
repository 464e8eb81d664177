//! Node attributes with typed accessors.

use crate::graph::Graph;
use crate::proto::{AttributeProto, TensorProto, attribute_type as at};
use crate::tensor::Tensor;

/// One node attribute. Graph-valued attributes hold IR graphs; everything else
/// stays in the original proto so it round-trips unchanged.
#[derive(Clone, Debug)]
pub struct Attribute {
    /// The attribute without its graph fields (`g`, `graphs`).
    pub proto: AttributeProto,
    /// The subgraph(s) of a GRAPH / GRAPHS attribute.
    pub subgraphs: Vec<Graph>,
    /// True when the subgraph came from the singular `g` field.
    pub single_graph: bool,
}

/// The kind of value an attribute holds, for error messages.
pub fn kind_name(code: i32) -> &'static str {
    match code {
        at::FLOAT => "float",
        at::INT => "int",
        at::STRING => "string",
        at::TENSOR => "tensor",
        at::GRAPH => "graph",
        at::FLOATS => "floats",
        at::INTS => "ints",
        at::STRINGS => "strings",
        at::TENSORS => "tensors",
        at::GRAPHS => "graphs",
        at::SPARSE_TENSOR => "sparse tensor",
        at::SPARSE_TENSORS => "sparse tensors",
        at::TYPE_PROTO => "type",
        at::TYPE_PROTOS => "types",
        _ => "undefined",
    }
}

impl Attribute {
    pub fn name(&self) -> &str {
        self.proto.name.as_deref().unwrap_or("")
    }

    /// The declared type, falling back to the field that is set (IR < 2 models
    /// have no `type`).
    pub fn kind(&self) -> i32 {
        if let Some(t) = self.proto.r#type.filter(|t| *t != at::UNDEFINED) {
            return t;
        }
        let p = &self.proto;
        if p.f.is_some() {
            at::FLOAT
        } else if p.i.is_some() {
            at::INT
        } else if p.s.is_some() {
            at::STRING
        } else if p.t.is_some() {
            at::TENSOR
        } else if self.single_graph {
            at::GRAPH
        } else if !p.floats.is_empty() {
            at::FLOATS
        } else if !p.ints.is_empty() {
            at::INTS
        } else if !p.strings.is_empty() {
            at::STRINGS
        } else if !p.tensors.is_empty() {
            at::TENSORS
        } else if !self.subgraphs.is_empty() {
            at::GRAPHS
        } else {
            at::UNDEFINED
        }
    }

    pub fn int(name: &str, value: i64) -> Attribute {
        Attribute::from_proto(AttributeProto {
            name: Some(name.into()),
            r#type: Some(at::INT),
            i: Some(value),
            ..Default::default()
        })
    }

    pub fn float(name: &str, value: f32) -> Attribute {
        Attribute::from_proto(AttributeProto {
            name: Some(name.into()),
            r#type: Some(at::FLOAT),
            f: Some(value),
            ..Default::default()
        })
    }

    pub fn ints(name: &str, values: Vec<i64>) -> Attribute {
        Attribute::from_proto(AttributeProto {
            name: Some(name.into()),
            r#type: Some(at::INTS),
            ints: values,
            ..Default::default()
        })
    }

    pub fn floats(name: &str, values: Vec<f32>) -> Attribute {
        Attribute::from_proto(AttributeProto {
            name: Some(name.into()),
            r#type: Some(at::FLOATS),
            floats: values,
            ..Default::default()
        })
    }

    pub fn string(name: &str, value: &str) -> Attribute {
        Attribute::from_proto(AttributeProto {
            name: Some(name.into()),
            r#type: Some(at::STRING),
            s: Some(value.as_bytes().to_vec()),
            ..Default::default()
        })
    }

    pub fn tensor(name: &str, value: &Tensor) -> Attribute {
        let proto: TensorProto = (*value.proto).clone();
        Attribute::from_proto(AttributeProto {
            name: Some(name.into()),
            r#type: Some(at::TENSOR),
            t: Some(proto),
            ..Default::default()
        })
    }

    pub fn graph(name: &str, graph: Graph) -> Attribute {
        Attribute {
            proto: AttributeProto {
                name: Some(name.into()),
                r#type: Some(at::GRAPH),
                ..Default::default()
            },
            subgraphs: vec![graph],
            single_graph: true,
        }
    }

    /// An attribute without graphs.
    pub fn from_proto(proto: AttributeProto) -> Attribute {
        Attribute {
            proto,
            subgraphs: Vec::new(),
            single_graph: false,
        }
    }
}
