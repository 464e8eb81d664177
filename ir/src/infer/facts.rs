//! What inference knows: facts about values, the scope a subgraph reads, the
//! opsets the rules depend on, and the report of what it did not manage.

use std::collections::{BTreeMap, HashMap};

use crate::dtype::DataType;
use crate::graph::{Graph, ValueId};
use crate::model::Model;
use crate::shape::{Dim, TensorType};
use crate::tensor::Tensor;

/// Largest integer tensor whose value inference tracks.
pub const MAX_VALUE_ELEMS: usize = 64;

/// What inference did not manage.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct InferReport {
    /// Op key (`Conv`, `com.example::Fancy`) → nodes of that op without a rule.
    pub blocked: BTreeMap<String, usize>,
    /// Facts stated by the model that contradict inference (the model's fact is kept).
    pub conflicts: Vec<String>,
    /// Values whose recorded type became more precise.
    pub updated: usize,
}

impl InferReport {
    pub fn merge(&mut self, other: InferReport) {
        for (k, v) in other.blocked {
            *self.blocked.entry(k).or_default() += v;
        }
        self.conflicts.extend(other.conflicts);
        self.updated += other.updated;
    }
}

/// The value of a small integer tensor of rank 0 or 1, element by element.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SymValue {
    /// True for a rank-0 tensor (then `elems` has one element).
    pub scalar: bool,
    pub elems: Vec<Dim>,
}

impl SymValue {
    pub fn vector(elems: Vec<Dim>) -> SymValue {
        SymValue {
            scalar: false,
            elems,
        }
    }

    pub fn scalar(d: Dim) -> SymValue {
        SymValue {
            scalar: true,
            elems: vec![d],
        }
    }

    /// The elements when all are known.
    pub fn known(&self) -> Option<Vec<i64>> {
        self.elems
            .iter()
            .map(|d| match d {
                Dim::Known(v) => Some(*v),
                _ => None,
            })
            .collect()
    }

    pub fn dims(&self) -> Vec<i64> {
        if self.scalar {
            vec![]
        } else {
            vec![self.elems.len() as i64]
        }
    }

    /// Reads an integer constant tensor (rank ≤ 1, at most [`MAX_VALUE_ELEMS`]).
    pub fn from_tensor(t: &Tensor) -> Option<SymValue> {
        if !is_int(t.dtype()) || t.dims().len() > 1 || t.numel()? > MAX_VALUE_ELEMS {
            return None;
        }
        let v = t.to_i64_vec().ok()?;
        if v.len() != t.numel()? {
            return None;
        }
        Some(SymValue {
            scalar: t.dims().is_empty(),
            elems: v.into_iter().map(Dim::Known).collect(),
        })
    }

    /// The tensor of a fully known value, in `dtype` (an integer type).
    pub fn to_tensor(&self, dtype: DataType) -> Option<Tensor> {
        let v = self.known()?;
        let dims = self.dims();
        let bytes: Vec<u8> = match dtype {
            DataType::Int64 => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
            DataType::Int32 => v
                .iter()
                .map(|&x| i32::try_from(x).ok())
                .collect::<Option<Vec<_>>>()?
                .iter()
                .flat_map(|x| x.to_le_bytes())
                .collect(),
            DataType::Bool if v.iter().all(|&x| x == 0 || x == 1) => {
                v.iter().map(|&x| x as u8).collect()
            }
            _ => return None,
        };
        Some(Tensor::from_raw(dtype, dims, bytes.into()))
    }
}

pub(crate) fn is_int(d: DataType) -> bool {
    use DataType::*;
    matches!(
        d,
        Int64 | Int32 | Int16 | Int8 | Uint8 | Uint16 | Uint32 | Uint64
    )
}

/// What is known about one value.
#[derive(Clone, Debug, PartialEq)]
pub struct Fact {
    /// `dtype` is `Undefined` when unknown; `shape` is `None` when the rank is unknown.
    pub ty: TensorType,
    pub value: Option<SymValue>,
}

impl Fact {
    pub fn unknown() -> Fact {
        Fact {
            ty: TensorType {
                dtype: DataType::Undefined,
                shape: None,
            },
            value: None,
        }
    }

    pub fn new(dtype: DataType, shape: Option<Vec<Dim>>) -> Fact {
        Fact {
            ty: TensorType { dtype, shape },
            value: None,
        }
    }

    pub fn with_value(mut self, value: Option<SymValue>) -> Fact {
        self.value = value;
        self
    }

    pub fn of_tensor(t: &Tensor) -> Fact {
        Fact {
            ty: TensorType {
                dtype: t.dtype(),
                shape: Some(t.dims().iter().map(|&d| Dim::Known(d)).collect()),
            },
            value: SymValue::from_tensor(t),
        }
    }

    pub fn shape(&self) -> Option<&[Dim]> {
        self.ty.shape.as_deref()
    }
}

/// Facts about values of enclosing graphs, by name (what a subgraph can read).
#[derive(Clone, Debug, Default)]
pub struct Scope {
    pub facts: HashMap<String, Fact>,
}

/// Opset versions the rules depend on.
#[derive(Clone, Copy, Debug)]
pub struct Opsets {
    /// The default ONNX domain.
    pub onnx: i64,
    /// `com.microsoft`, when imported.
    pub microsoft: Option<i64>,
}

impl Opsets {
    pub fn of(model: &Model) -> Opsets {
        Opsets {
            onnx: model.opset("").unwrap_or(1),
            microsoft: model.opset("com.microsoft"),
        }
    }

    pub fn onnx(version: i64) -> Opsets {
        Opsets {
            onnx: version,
            microsoft: Some(1),
        }
    }
}

/// Facts inferred for one graph (its own values; subgraphs record theirs in
/// their `value_info`).
#[derive(Clone, Debug, Default)]
pub struct GraphFacts {
    pub facts: HashMap<ValueId, Fact>,
}

impl GraphFacts {
    pub fn get(&self, v: ValueId) -> Option<&Fact> {
        self.facts.get(&v)
    }

    /// The constant a value is known to hold (an integer shape tensor whose
    /// elements are all known), even if the node computing it reads
    /// non-constant tensors (`Shape` of a tensor with a fixed shape).
    pub fn known_value(&self, v: ValueId) -> Option<Tensor> {
        let f = self.facts.get(&v)?;
        f.value.as_ref()?.to_tensor(f.ty.dtype)
    }

    /// The scope a subgraph of this graph sees: `outer` plus these facts by name.
    pub fn scope_for_subgraphs(&self, g: &Graph, outer: &Scope) -> Scope {
        let mut scope = outer.clone();
        for (&v, f) in &self.facts {
            if let Some(value) = g.try_value(v) {
                scope.facts.insert(value.name.clone(), f.clone());
            }
        }
        scope
    }
}

/// Normalizes a possibly negative axis against `rank`.
pub(crate) fn norm_axis(axis: i64, rank: usize) -> Option<usize> {
    let r = rank as i64;
    let a = if axis < 0 { axis + r } else { axis };
    (0..r).contains(&a).then_some(a as usize)
}

/// Infers one graph given facts about its inputs: the driver's
/// `infer_graph_with`, handed to the control-flow rules so that they recurse
/// into subgraphs without naming the driver (which dispatches to them).
pub(crate) type InferGraph =
    fn(&mut Graph, Opsets, &Scope, &[Option<Fact>], &mut InferReport) -> GraphFacts;
