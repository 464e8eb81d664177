//! Constant tensors (initializers, `Constant` values).
//!
//! A [`Tensor`] keeps the `TensorProto` it was loaded from, so every field
//! round-trips. Its bytes are a [`Bytes`]: either owned, or a zero-copy slice of
//! the memory-mapped model or external-data file.

use std::borrow::Cow;

use bytes::Bytes;

use crate::dtype::DataType;
use crate::error::IrError;
use crate::proto::{StringStringEntryProto, TensorProto, data_location};

/// Where a tensor's bytes lived on disk when it was loaded from external data.
#[derive(Clone, Debug, PartialEq)]
pub struct ExternalOrigin {
    pub location: String,
    pub offset: u64,
    pub length: u64,
    /// The original `external_data` entries, kept to describe the source model.
    pub entries: Vec<StringStringEntryProto>,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Tensor {
    /// The tensor as ONNX stores it. `name` is not used here: the value that
    /// holds the tensor carries the name. External data is already resolved:
    /// `raw_data` holds the bytes and `external_data` is empty.
    /// Boxed: a graph holds one per initializer, in every copy of it.
    pub proto: Box<TensorProto>,
    /// Set when the bytes came from an external-data file.
    pub external: Option<ExternalOrigin>,
}

impl Tensor {
    /// Wraps a loaded proto. The caller has resolved external data.
    pub fn from_proto(mut proto: TensorProto) -> Tensor {
        proto.name = None;
        Tensor {
            proto: Box::new(proto),
            external: None,
        }
    }

    /// A tensor with raw little-endian bytes.
    pub fn from_raw(dtype: DataType, dims: Vec<i64>, data: Bytes) -> Tensor {
        Tensor {
            proto: Box::new(TensorProto {
                dims,
                data_type: Some(dtype.code()),
                raw_data: Some(data),
                ..Default::default()
            }),
            external: None,
        }
    }

    pub fn from_f32(dims: Vec<i64>, values: &[f32]) -> Tensor {
        let bytes: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
        Tensor::from_raw(DataType::Float, dims, Bytes::from(bytes))
    }

    pub fn from_i64(dims: Vec<i64>, values: &[i64]) -> Tensor {
        let bytes: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
        Tensor::from_raw(DataType::Int64, dims, Bytes::from(bytes))
    }

    pub fn dtype(&self) -> DataType {
        DataType::from_code(self.proto.data_type.unwrap_or(0))
    }

    pub fn dims(&self) -> &[i64] {
        &self.proto.dims
    }

    /// Number of elements (1 for a scalar), or `None` if a dim is negative or
    /// the product overflows.
    pub fn numel(&self) -> Option<usize> {
        self.proto.dims.iter().try_fold(1usize, |acc, &d| {
            usize::try_from(d).ok().and_then(|d| acc.checked_mul(d))
        })
    }

    /// Bytes of payload this tensor carries (raw, typed or string data).
    pub fn payload_bytes(&self) -> usize {
        let p = &self.proto;
        p.raw_data.as_ref().map_or(0, |b| b.len())
            + p.float_data.len() * 4
            + p.int32_data.len() * 4
            + p.int64_data.len() * 8
            + p.double_data.len() * 8
            + p.uint64_data.len() * 8
            + p.string_data.iter().map(|s| s.len()).sum::<usize>()
    }

    /// True when the data is in `raw_data` (the form that external data uses).
    pub fn has_raw_data(&self) -> bool {
        self.proto.raw_data.is_some()
    }

    /// The data as little-endian bytes in `raw_data` layout, converting from the
    /// typed fields when needed. Strings have no raw layout.
    pub fn raw_bytes(&self) -> Result<Cow<'_, [u8]>, IrError> {
        if let Some(raw) = &self.proto.raw_data {
            return Ok(Cow::Borrowed(raw));
        }
        let p = &self.proto;
        let dtype = self.dtype();
        let out: Vec<u8> = match dtype {
            DataType::Float | DataType::Complex64 => {
                p.float_data.iter().flat_map(|v| v.to_le_bytes()).collect()
            }
            DataType::Double | DataType::Complex128 => {
                p.double_data.iter().flat_map(|v| v.to_le_bytes()).collect()
            }
            DataType::Int64 => p.int64_data.iter().flat_map(|v| v.to_le_bytes()).collect(),
            DataType::Uint64 => p.uint64_data.iter().flat_map(|v| v.to_le_bytes()).collect(),
            DataType::Uint32 => p
                .uint64_data
                .iter()
                .flat_map(|v| (*v as u32).to_le_bytes())
                .collect(),
            DataType::Int32 => p.int32_data.iter().flat_map(|v| v.to_le_bytes()).collect(),
            DataType::Int16 | DataType::Uint16 | DataType::Float16 | DataType::Bfloat16 => p
                .int32_data
                .iter()
                .flat_map(|v| (*v as u16).to_le_bytes())
                .collect(),
            DataType::Int8
            | DataType::Uint8
            | DataType::Bool
            | DataType::Float8E4M3Fn
            | DataType::Float8E4M3Fnuz
            | DataType::Float8E5M2
            | DataType::Float8E5M2Fnuz
            | DataType::Float8E8M0 => p.int32_data.iter().map(|v| *v as u8).collect(),
            other => {
                return Err(IrError::Unsupported(format!(
                    "tensor data of type {other} stored in typed fields"
                )));
            }
        };
        Ok(Cow::Owned(out))
    }

    /// Elements as f64 (for folding and reports). Errors on non-numeric types.
    pub fn to_f64_vec(&self) -> Result<Vec<f64>, IrError> {
        let raw = self.raw_bytes()?;
        let dtype = self.dtype();
        let v: Vec<f64> = match dtype {
            DataType::Float => raw
                .chunks_exact(4)
                .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]) as f64)
                .collect(),
            DataType::Double => raw
                .chunks_exact(8)
                .map(|c| f64::from_le_bytes(c.try_into().unwrap_or([0; 8])))
                .collect(),
            DataType::Float16 => raw
                .chunks_exact(2)
                .map(|c| half::f16::from_le_bytes([c[0], c[1]]).to_f64())
                .collect(),
            DataType::Bfloat16 => raw
                .chunks_exact(2)
                .map(|c| half::bf16::from_le_bytes([c[0], c[1]]).to_f64())
                .collect(),
            DataType::Int64 => raw
                .chunks_exact(8)
                .map(|c| i64::from_le_bytes(c.try_into().unwrap_or([0; 8])) as f64)
                .collect(),
            DataType::Int32 => raw
                .chunks_exact(4)
                .map(|c| i32::from_le_bytes([c[0], c[1], c[2], c[3]]) as f64)
                .collect(),
            DataType::Uint32 => raw
                .chunks_exact(4)
                .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]) as f64)
                .collect(),
            DataType::Int16 => raw
                .chunks_exact(2)
                .map(|c| i16::from_le_bytes([c[0], c[1]]) as f64)
                .collect(),
            DataType::Uint16 => raw
                .chunks_exact(2)
                .map(|c| u16::from_le_bytes([c[0], c[1]]) as f64)
                .collect(),
            DataType::Int8 => raw.iter().map(|&b| b as i8 as f64).collect(),
            DataType::Uint8 | DataType::Bool => raw.iter().map(|&b| b as f64).collect(),
            other => {
                return Err(IrError::Unsupported(format!(
                    "reading {other} tensor values"
                )));
            }
        };
        Ok(v)
    }

    /// Integer elements (int64/int32/... shape tensors). Errors on float types.
    pub fn to_i64_vec(&self) -> Result<Vec<i64>, IrError> {
        let raw = self.raw_bytes()?;
        match self.dtype() {
            DataType::Int64 => Ok(raw
                .chunks_exact(8)
                .map(|c| i64::from_le_bytes(c.try_into().unwrap_or([0; 8])))
                .collect()),
            DataType::Int32 => Ok(raw
                .chunks_exact(4)
                .map(|c| i32::from_le_bytes([c[0], c[1], c[2], c[3]]) as i64)
                .collect()),
            DataType::Uint64 => Ok(raw
                .chunks_exact(8)
                .map(|c| u64::from_le_bytes(c.try_into().unwrap_or([0; 8])) as i64)
                .collect()),
            DataType::Int8 => Ok(raw.iter().map(|&b| b as i8 as i64).collect()),
            DataType::Uint8 | DataType::Bool => Ok(raw.iter().map(|&b| b as i64).collect()),
            DataType::Int16 => Ok(raw
                .chunks_exact(2)
                .map(|c| i16::from_le_bytes([c[0], c[1]]) as i64)
                .collect()),
            DataType::Uint16 => Ok(raw
                .chunks_exact(2)
                .map(|c| u16::from_le_bytes([c[0], c[1]]) as i64)
                .collect()),
            DataType::Uint32 => Ok(raw
                .chunks_exact(4)
                .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]) as i64)
                .collect()),
            other => Err(IrError::Unsupported(format!(
                "reading {other} tensor as integers"
            ))),
        }
    }

    /// True when `proto` says its data lives in an external file.
    pub fn proto_is_external(proto: &TensorProto) -> bool {
        proto.data_location == Some(data_location::EXTERNAL)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn typed_fields_convert_to_raw() {
        let t = Tensor::from_proto(TensorProto {
            dims: vec![2],
            data_type: Some(DataType::Float16.code()),
            int32_data: vec![0x3c00, 0xc000],
            ..Default::default()
        });
        assert_eq!(t.to_f64_vec().unwrap(), vec![1.0, -2.0]);
        let t = Tensor::from_i64(vec![3], &[1, -2, 3]);
        assert_eq!(t.to_i64_vec().unwrap(), vec![1, -2, 3]);
        assert_eq!(t.numel(), Some(3));
        assert_eq!(t.payload_bytes(), 24);
    }
}
