//! ZipMap's output, a sequence of maps (one per row, from class label to
//! probability: how skl2onnx and onnxmltools write a classifier's
//! probabilities unless told `zipmap=False`), read as one `[rows, classes]`
//! float tensor. The keys are the node's attribute, the same in both models
//! a comparison reads, and ONNX Runtime hands each map's entries in its own
//! fixed order, so column `j` is the same class in every row and model.
//! Without this every command on such a model stopped at "cannot run the
//! original model".

use ort::value::{DynMapValueType, DynValue, TensorElementType, ValueType};

use super::binding::BACKEND;
use crate::backend::{DimSpec, IoSpec};
use crate::error::{Result, RuntimeError};
use crate::tensor::{DType, HostTensor, TensorData};

/// Whether `ty` is a sequence of maps to float that this module reads.
pub(super) fn is_map_sequence(ty: &ValueType) -> bool {
    matches!(ty, ValueType::Sequence(inner) if matches!(
        **inner,
        ValueType::Map {
            key: TensorElementType::Int64 | TensorElementType::String,
            value: TensorElementType::Float32,
        }
    ))
}

/// The output's spec: a float tensor of unknown rows and classes.
pub(super) fn spec(name: &str) -> IoSpec {
    IoSpec {
        name: name.to_string(),
        dtype: DType::F32,
        dims: Some(vec![DimSpec::Unknown, DimSpec::Unknown]),
    }
}

/// The sequence of maps `v` as a `[rows, classes]` tensor.
pub(super) fn to_host(name: &str, v: &DynValue) -> Result<HostTensor> {
    let failed = |message: String| RuntimeError::Run {
        backend: BACKEND.into(),
        message: format!("output `{name}`: {message}"),
    };
    let maps = v
        .try_extract_sequence::<DynMapValueType>()
        .map_err(|e| failed(e.to_string()))?;
    let mut classes = None;
    let mut data: Vec<f32> = Vec::new();
    for (row, map) in maps.iter().enumerate() {
        let values: Vec<f32> = match map.dtype() {
            ValueType::Map {
                key: TensorElementType::String,
                ..
            } => map
                .try_extract_key_values::<String, f32>()
                .map(|kv| kv.into_iter().map(|(_, p)| p).collect()),
            _ => map
                .try_extract_key_values::<i64, f32>()
                .map(|kv| kv.into_iter().map(|(_, p)| p).collect()),
        }
        .map_err(|e| failed(e.to_string()))?;
        match classes {
            None => classes = Some(values.len()),
            Some(k) if k != values.len() => {
                return Err(failed(format!(
                    "row {row} maps {} classes where row 0 maps {k}",
                    values.len()
                )));
            }
            Some(_) => {}
        }
        data.extend(values);
    }
    let shape = vec![maps.len(), classes.unwrap_or(0)];
    HostTensor::new(Some(name.to_string()), shape, TensorData::F32(data))
}
