//! Node attributes with typed accessors.

use crate::error::{IrError, Result};
use crate::graph::{Graph, Node};
use crate::proto::{AttributeProto, TensorProto, attribute_type as at};
use crate::tensor::Tensor;

// `Attribute` is defined in graph.rs, beside `Node` and `Graph`: the three
// types hold each other (a node's attributes hold subgraphs). Its
// constructors and the node's typed accessors are here.
pub use crate::graph::Attribute;

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

/// Typed access to a node's attributes, with errors naming the node.
impl Node {
    pub fn attr(&self, name: &str) -> Option<&Attribute> {
        self.attributes.iter().find(|a| a.name() == name)
    }

    pub fn set_attr(&mut self, attr: Attribute) {
        match self.attributes.iter_mut().find(|a| a.name() == attr.name()) {
            Some(slot) => *slot = attr,
            None => self.attributes.push(attr),
        }
    }

    pub fn remove_attr(&mut self, name: &str) {
        self.attributes.retain(|a| a.name() != name);
    }

    fn attr_error(&self, attr: &str, problem: String) -> IrError {
        IrError::Attribute {
            node: self.name_or_op().to_string(),
            op: self.op_type.clone(),
            attr: attr.to_string(),
            problem,
        }
    }

    fn typed_attr(&self, name: &str, want: i32) -> Result<Option<&Attribute>> {
        match self.attr(name) {
            None => Ok(None),
            Some(a) if a.proto.ref_attr_name.is_some() => Err(self.attr_error(
                name,
                "refers to a function attribute and has no value here".into(),
            )),
            Some(a) if a.kind() == want => Ok(Some(a)),
            Some(a) => Err(self.attr_error(
                name,
                format!(
                    "expected {}, found {}",
                    kind_name(want),
                    kind_name(a.kind())
                ),
            )),
        }
    }

    pub fn attr_int(&self, name: &str) -> Result<Option<i64>> {
        Ok(self.typed_attr(name, at::INT)?.and_then(|a| a.proto.i))
    }

    pub fn attr_int_or(&self, name: &str, default: i64) -> Result<i64> {
        Ok(self.attr_int(name)?.unwrap_or(default))
    }

    pub fn attr_float(&self, name: &str) -> Result<Option<f32>> {
        Ok(self.typed_attr(name, at::FLOAT)?.and_then(|a| a.proto.f))
    }

    pub fn attr_float_or(&self, name: &str, default: f32) -> Result<f32> {
        Ok(self.attr_float(name)?.unwrap_or(default))
    }

    pub fn attr_ints(&self, name: &str) -> Result<Option<&[i64]>> {
        Ok(self
            .typed_attr(name, at::INTS)?
            .map(|a| a.proto.ints.as_slice()))
    }

    pub fn attr_floats(&self, name: &str) -> Result<Option<&[f32]>> {
        Ok(self
            .typed_attr(name, at::FLOATS)?
            .map(|a| a.proto.floats.as_slice()))
    }

    pub fn attr_string(&self, name: &str) -> Result<Option<String>> {
        match self.typed_attr(name, at::STRING)? {
            None => Ok(None),
            Some(a) => {
                let bytes = a.proto.s.clone().unwrap_or_default();
                String::from_utf8(bytes)
                    .map(Some)
                    .map_err(|_| self.attr_error(name, "is not valid UTF-8".into()))
            }
        }
    }

    pub fn attr_tensor(&self, name: &str) -> Result<Option<Tensor>> {
        Ok(self
            .typed_attr(name, at::TENSOR)?
            .and_then(|a| a.proto.t.clone())
            .map(Tensor::from_proto))
    }
}
