//! String outputs (a classifier trained on class names: skl2onnx writes its
//! labels as strings) read as int64 ids, one per distinct string, in the
//! order the process first meets them. Equal strings get equal ids in every
//! model and run of the process, so a comparison sees each changed label as
//! a changed integer, as it sees an int64 label output; the host tensors
//! have no string type. Without this every command on such a model stopped
//! at "cannot run the original model".

use std::collections::HashMap;
use std::sync::{LazyLock, Mutex};

use ort::value::{DynValue, TensorElementType, ValueType};

use super::binding::BACKEND;
use crate::backend::{DimSpec, IoSpec};
use crate::error::{Result, RuntimeError};
use crate::tensor::{DType, HostTensor, TensorData};

/// Every distinct string met so far, with its id.
static IDS: LazyLock<Mutex<HashMap<String, i64>>> = LazyLock::new(Default::default);

/// Whether `ty` is a string tensor.
pub(super) fn is_string_tensor(ty: &ValueType) -> bool {
    matches!(
        ty,
        ValueType::Tensor {
            ty: TensorElementType::String,
            ..
        }
    )
}

/// The output's spec: int64 ids of the declared shape.
pub(super) fn spec(name: &str, shape: &[i64]) -> IoSpec {
    let dims = shape
        .iter()
        .map(|&d| match usize::try_from(d) {
            Ok(d) => DimSpec::Known(d),
            Err(_) => DimSpec::Unknown,
        })
        .collect();
    IoSpec {
        name: name.to_string(),
        dtype: DType::I64,
        dims: Some(dims),
    }
}

/// The string tensor `v` as ids.
pub(super) fn to_host(name: &str, v: &DynValue) -> Result<HostTensor> {
    let (shape, strings) = v.try_extract_strings().map_err(|e| RuntimeError::Run {
        backend: BACKEND.into(),
        message: format!("output `{name}`: {e}"),
    })?;
    let shape: Vec<usize> = shape.iter().map(|&d| d.max(0) as usize).collect();
    let mut known = IDS.lock().unwrap_or_else(|p| p.into_inner());
    let ids: Vec<i64> = strings
        .into_iter()
        .map(|s| {
            let next = known.len() as i64;
            *known.entry(s).or_insert(next)
        })
        .collect();
    HostTensor::new(Some(name.to_string()), shape, TensorData::I64(ids))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn equal_strings_get_equal_ids_across_tensors() {
        let a = ort::value::Tensor::from_string_array(([3usize], &["cat", "dog", "cat"][..]))
            .expect("a string tensor");
        let b = ort::value::Tensor::from_string_array(([2usize], &["dog", "cat"][..]))
            .expect("a string tensor");
        let ta = to_host("a", &a.into_dyn()).expect("read");
        let tb = to_host("b", &b.into_dyn()).expect("read");
        let (a, b) = (ta.to_f64_vec(), tb.to_f64_vec());
        assert_eq!(a[0], a[2]);
        assert_ne!(a[0], a[1]);
        assert_eq!(b, vec![a[1], a[0]]);
        assert_eq!(ta.shape(), &[3]);
    }
}
