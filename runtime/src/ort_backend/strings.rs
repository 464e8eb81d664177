//! String tensors as int64 ids (see [`crate::string_ids`]): outputs (a
//! classifier trained on class names: skl2onnx writes its labels as
//! strings) are read as ids, so a comparison sees each changed label as a
//! changed integer, as it sees an int64 label output; inputs (a categorical
//! feature, a phoneme) are fed from ids, turned back into their strings.
//! Without this every command on such a model stopped at "cannot run the
//! original model", or at "holds strings" for an input.

use ort::session::SessionInputValue;
use ort::value::{DynValue, TensorElementType, ValueType};

use super::binding::BACKEND;
use crate::backend::{DimSpec, IoSpec};
use crate::error::{Result, RuntimeError};
use crate::string_ids;
use crate::tensor::{DType, HostTensor, TensorData};

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

/// The spec of a string input or output: int64 ids of the declared shape.
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
    let ids = string_ids::ids_of(strings);
    HostTensor::new(Some(name.to_string()), shape, TensorData::I64(ids))
}

/// The string tensor a string input is fed: `t`'s ids as their strings.
pub(super) fn to_ort_strings(t: &HostTensor) -> Result<SessionInputValue<'static>> {
    let TensorData::I64(ids) = t.data() else {
        return Err(RuntimeError::InvalidArgument(format!(
            "a string input is fed as int64 ids, not {:?}",
            t.dtype()
        )));
    };
    let strings = string_ids::strings_of(ids);
    let value = ort::value::Tensor::from_string_array((t.shape().to_vec(), &strings[..]))
        .map_err(|e| RuntimeError::InvalidArgument(e.to_string()))?;
    Ok(SessionInputValue::from(value.into_dyn()))
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
