//! The one thing quantization needs from calibration: a symmetric clipping
//! range (amax) per tensor name. Range tables, TensorRT caches and in-place
//! calibration all reduce to this; the `quantize-int8` pass reads it from
//! the pass context's side data.

use std::collections::BTreeMap;

/// amax (> 0, finite) per tensor name; the INT8 scale is `amax / 127`.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Amax(pub BTreeMap<String, f32>);

impl Amax {
    pub fn get(&self, tensor: &str) -> Option<f32> {
        self.0.get(tensor).copied()
    }

    pub fn insert(&mut self, tensor: impl Into<String>, amax: f32) {
        self.0.insert(tensor.into(), amax);
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}
