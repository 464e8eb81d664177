//! Paddle's `?` dim names. Paddle's exporter names every dynamic dim `?`
//! (PP-OCR's recognizers: `x` of `[-1, 3, ?, ?]`), meaning "unknown", and
//! infopt reads it so (`TensorType::from_proto`). TensorRT's parser takes
//! equal names for one dimension: it refused a text line's 32x320 ("API
//! Usage Error (?: Input dimension ...)"), so no PP-OCR recognizer could be
//! built at its own size. A graph written for TensorRT leaves them unnamed.

use crate::model::Model;
use crate::proto::tensor_shape::{DimValue, Dimension};
use crate::proto::{ValueInfoProto, type_proto::Value};

pub use crate::graph::UNKNOWN_DIM_NAME;

/// The dims a tensor's value info declares, as written (None for a value
/// of another kind or without a shape).
pub fn declared_dims(info: &ValueInfoProto) -> Option<&[Dimension]> {
    match info.r#type.as_ref()?.value.as_ref()? {
        Value::TensorType(t) => t.shape.as_ref().map(|s| s.dim.as_slice()),
        _ => None,
    }
}

/// [`declared_dims`], to change them in place.
pub fn declared_dims_mut(info: &mut ValueInfoProto) -> Option<&mut Vec<Dimension>> {
    match info.r#type.as_mut()?.value.as_mut()? {
        Value::TensorType(t) => t.shape.as_mut().map(|s| &mut s.dim),
        _ => None,
    }
}

/// Removes the name `?` from the dims of `model`'s graph inputs and
/// outputs, leaving them dynamic and unnamed; returns how many dims changed.
pub fn unname_unknown_dims(model: &mut Model) -> usize {
    let g = &mut model.graph;
    let mut changed = 0;
    for io in g.inputs.iter_mut().chain(g.outputs.iter_mut()) {
        for d in declared_dims_mut(&mut io.info).into_iter().flatten() {
            if matches!(&d.value, Some(DimValue::DimParam(p)) if p == UNKNOWN_DIM_NAME) {
                d.value = None;
                changed += 1;
            }
        }
    }
    changed
}
