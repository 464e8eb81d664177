//! ONNX sequence outputs read as tensors, the host tensors having no
//! sequence type. Without this every command on such a model stopped at
//! "cannot run the original model".
//!
//! - ZipMap's output, a sequence of maps (one per row, from class label to
//!   probability: how skl2onnx and onnxmltools write a classifier's
//!   probabilities unless told `zipmap=False`): one `[rows, classes]` float
//!   tensor. The keys are the node's attribute, the same in both models a
//!   comparison reads, and ONNX Runtime hands each map's entries in its own
//!   fixed order, so column `j` is the same class in every row and model.
//! - A sequence of tensors (SplitToSequence's): its tensors flattened one
//!   after the other into one rank-1 tensor, float32 for float elements and
//!   int64 for integer ones. Two models whose sequences differ in structure
//!   then differ in length, which a comparison reports.

use ort::value::{DynMapValueType, DynTensorValueType, DynValue, TensorElementType, ValueType};

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

/// A run error on output `name`.
fn failed(name: &str, message: String) -> RuntimeError {
    RuntimeError::Run {
        backend: BACKEND.into(),
        message: format!("output `{name}`: {message}"),
    }
}

/// The sequence of maps `v` as a `[rows, classes]` tensor.
pub(super) fn to_host(name: &str, v: &DynValue) -> Result<HostTensor> {
    let failed = |message: String| failed(name, message);
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

/// Whether `ty` is a sequence of numeric tensors.
pub(super) fn is_tensor_sequence(ty: &ValueType) -> bool {
    matches!(ty, ValueType::Sequence(inner) if matches!(
        **inner,
        ValueType::Tensor { ty, .. } if ty != TensorElementType::String
    ))
}

/// The element type a sequence of tensors `ty` is read as.
fn flat_dtype(ty: &ValueType) -> DType {
    match ty {
        ValueType::Sequence(inner) => match **inner {
            ValueType::Tensor {
                ty:
                    TensorElementType::Float16
                    | TensorElementType::Bfloat16
                    | TensorElementType::Float32
                    | TensorElementType::Float64,
                ..
            } => DType::F32,
            _ => DType::I64,
        },
        _ => DType::F32,
    }
}

/// The spec of a sequence of tensors: rank 1, of unknown length.
pub(super) fn flat_spec(name: &str, ty: &ValueType) -> IoSpec {
    IoSpec {
        name: name.to_string(),
        dtype: flat_dtype(ty),
        dims: Some(vec![DimSpec::Unknown]),
    }
}

/// The sequence of tensors `v`, flattened one after the other; `read`
/// reads one tensor (the backend's reader of outputs).
pub(super) fn flat_to_host(
    name: &str,
    v: &DynValue,
    read: impl Fn(&str, &DynValue) -> Result<HostTensor>,
) -> Result<HostTensor> {
    let failed = |message: String| failed(name, message);
    let tensors = v
        .try_extract_sequence::<DynTensorValueType>()
        .map_err(|e| failed(e.to_string()))?;
    let mut values: Vec<f64> = Vec::new();
    for t in tensors {
        values.extend(read(name, &t.into_dyn())?.to_f64_vec());
    }
    let shape = vec![values.len()];
    let data = match flat_dtype(v.dtype()) {
        DType::F32 => TensorData::F32(values.into_iter().map(|x| x as f32).collect()),
        _ => TensorData::I64(values.into_iter().map(|x| x as i64).collect()),
    };
    HostTensor::new(Some(name.to_string()), shape, data)
}
