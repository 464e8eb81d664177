//! Paddle's `?` dim names. Paddle's exporter names every dynamic dim `?`
//! (PP-OCR's recognizers: `x` of `[-1, 3, ?, ?]`), meaning "unknown", and
//! infopt reads it so (`graph.rs`). TensorRT's parser takes equal names for
//! one dimension: it refused a text line's 32x320 ("API Usage Error (?:
//! Input dimension ...)"), so no PP-OCR recognizer could be built at its
//! own size. A graph written for TensorRT leaves them unnamed.

use crate::model::Model;
use crate::proto::{tensor_shape::DimValue, type_proto::Value};

/// The dim name Paddle's exporter gives every dynamic dim.
pub const UNKNOWN_DIM_NAME: &str = "?";

/// Removes the name `?` from the dims of `model`'s graph inputs and
/// outputs, leaving them dynamic and unnamed; returns how many dims changed.
pub fn unname_unknown_dims(model: &mut Model) -> usize {
    let g = &mut model.graph;
    let mut changed = 0;
    for io in g.inputs.iter_mut().chain(g.outputs.iter_mut()) {
        let Some(Value::TensorType(t)) = io.info.r#type.as_mut().and_then(|t| t.value.as_mut())
        else {
            continue;
        };
        for d in t.shape.iter_mut().flat_map(|s| s.dim.iter_mut()) {
            if matches!(&d.value, Some(DimValue::DimParam(p)) if p == UNKNOWN_DIM_NAME) {
                d.value = None;
                changed += 1;
            }
        }
    }
    changed
}
