//! Dense host arrays: a [`Tensor`] decoded into a typed vector, and back.
//!
//! Data movement (Gather, Transpose, Slice, ...) works on any element type
//! through index lists ([`Array::take`]). Arithmetic goes through [`Num`]:
//! floats are computed in f64 and rounded once to the output type (for `+ - *
//! /` and `sqrt` this is exactly the correctly rounded result in f32, f16 and
//! bf16), integers in i128 and wrapped to the output type.

use bytes::Bytes;
use half::{bf16, f16};

use crate::dtype::DataType;
use crate::proto::TensorProto;
use crate::tensor::Tensor;

use super::error::KernelError;

#[derive(Clone, Debug, PartialEq)]
pub enum Buf {
    F32(Vec<f32>),
    F64(Vec<f64>),
    F16(Vec<f16>),
    Bf16(Vec<bf16>),
    I8(Vec<i8>),
    I16(Vec<i16>),
    I32(Vec<i32>),
    I64(Vec<i64>),
    U8(Vec<u8>),
    U16(Vec<u16>),
    U32(Vec<u32>),
    U64(Vec<u64>),
    Bool(Vec<bool>),
    Str(Vec<Vec<u8>>),
}

/// Applies a generic expression to the vector inside a [`Buf`], keeping the variant.
macro_rules! map_buf {
    ($buf:expr, |$v:ident| $body:expr) => {
        match $buf {
            Buf::F32($v) => Buf::F32($body),
            Buf::F64($v) => Buf::F64($body),
            Buf::F16($v) => Buf::F16($body),
            Buf::Bf16($v) => Buf::Bf16($body),
            Buf::I8($v) => Buf::I8($body),
            Buf::I16($v) => Buf::I16($body),
            Buf::I32($v) => Buf::I32($body),
            Buf::I64($v) => Buf::I64($body),
            Buf::U8($v) => Buf::U8($body),
            Buf::U16($v) => Buf::U16($body),
            Buf::U32($v) => Buf::U32($body),
            Buf::U64($v) => Buf::U64($body),
            Buf::Bool($v) => Buf::Bool($body),
            Buf::Str($v) => Buf::Str($body),
        }
    };
}

/// Evaluates a generic expression on the vector inside a [`Buf`].
macro_rules! with_buf {
    ($buf:expr, |$v:ident| $body:expr) => {
        match $buf {
            Buf::F32($v) => $body,
            Buf::F64($v) => $body,
            Buf::F16($v) => $body,
            Buf::Bf16($v) => $body,
            Buf::I8($v) => $body,
            Buf::I16($v) => $body,
            Buf::I32($v) => $body,
            Buf::I64($v) => $body,
            Buf::U8($v) => $body,
            Buf::U16($v) => $body,
            Buf::U32($v) => $body,
            Buf::U64($v) => $body,
            Buf::Bool($v) => $body,
            Buf::Str($v) => $body,
        }
    };
}

/// Numeric view of a buffer for arithmetic.
#[derive(Clone, Debug, PartialEq)]
pub enum Num {
    F(Vec<f64>),
    I(Vec<i128>),
    B(Vec<bool>),
}

#[derive(Clone, Debug, PartialEq)]
pub struct Array {
    pub dims: Vec<usize>,
    pub buf: Buf,
}

impl Buf {
    pub fn len(&self) -> usize {
        with_buf!(self, |v| v.len())
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn dtype(&self) -> DataType {
        match self {
            Buf::F32(_) => DataType::Float,
            Buf::F64(_) => DataType::Double,
            Buf::F16(_) => DataType::Float16,
            Buf::Bf16(_) => DataType::Bfloat16,
            Buf::I8(_) => DataType::Int8,
            Buf::I16(_) => DataType::Int16,
            Buf::I32(_) => DataType::Int32,
            Buf::I64(_) => DataType::Int64,
            Buf::U8(_) => DataType::Uint8,
            Buf::U16(_) => DataType::Uint16,
            Buf::U32(_) => DataType::Uint32,
            Buf::U64(_) => DataType::Uint64,
            Buf::Bool(_) => DataType::Bool,
            Buf::Str(_) => DataType::String,
        }
    }

    /// Elements at `idx`, in order.
    #[allow(clippy::clone_on_copy)]
    pub fn take(&self, idx: &[usize]) -> Buf {
        map_buf!(self, |v| idx.iter().map(|&i| v[i].clone()).collect())
    }

    /// Concatenation of buffers of the same type.
    #[allow(clippy::clone_on_copy)]
    pub fn concat(parts: &[&Buf]) -> Option<Buf> {
        let first = parts.first()?;
        macro_rules! cat {
            ($variant:ident) => {{
                let mut out = Vec::new();
                for p in parts {
                    match p {
                        Buf::$variant(v) => out.extend(v.iter().cloned()),
                        _ => return None,
                    }
                }
                Buf::$variant(out)
            }};
        }
        Some(match first {
            Buf::F32(_) => cat!(F32),
            Buf::F64(_) => cat!(F64),
            Buf::F16(_) => cat!(F16),
            Buf::Bf16(_) => cat!(Bf16),
            Buf::I8(_) => cat!(I8),
            Buf::I16(_) => cat!(I16),
            Buf::I32(_) => cat!(I32),
            Buf::I64(_) => cat!(I64),
            Buf::U8(_) => cat!(U8),
            Buf::U16(_) => cat!(U16),
            Buf::U32(_) => cat!(U32),
            Buf::U64(_) => cat!(U64),
            Buf::Bool(_) => cat!(Bool),
            Buf::Str(_) => cat!(Str),
        })
    }

    pub fn to_num(&self) -> Option<Num> {
        Some(match self {
            Buf::F32(v) => Num::F(v.iter().map(|&x| x as f64).collect()),
            Buf::F64(v) => Num::F(v.clone()),
            Buf::F16(v) => Num::F(v.iter().map(|x| x.to_f64()).collect()),
            Buf::Bf16(v) => Num::F(v.iter().map(|x| x.to_f64()).collect()),
            Buf::I8(v) => Num::I(v.iter().map(|&x| x as i128).collect()),
            Buf::I16(v) => Num::I(v.iter().map(|&x| x as i128).collect()),
            Buf::I32(v) => Num::I(v.iter().map(|&x| x as i128).collect()),
            Buf::I64(v) => Num::I(v.iter().map(|&x| x as i128).collect()),
            Buf::U8(v) => Num::I(v.iter().map(|&x| x as i128).collect()),
            Buf::U16(v) => Num::I(v.iter().map(|&x| x as i128).collect()),
            Buf::U32(v) => Num::I(v.iter().map(|&x| x as i128).collect()),
            Buf::U64(v) => Num::I(v.iter().map(|&x| x as i128).collect()),
            Buf::Bool(v) => Num::B(v.clone()),
            Buf::Str(_) => return None,
        })
    }

    /// Integer elements as i64 (shape tensors, axes, indices).
    pub fn to_i64(&self) -> Option<Vec<i64>> {
        match self.to_num()? {
            Num::I(v) => v.into_iter().map(|x| i64::try_from(x).ok()).collect(),
            _ => None,
        }
    }

    /// Rounds f64 results to a float type.
    pub fn from_f64(dtype: DataType, v: Vec<f64>) -> Option<Buf> {
        Some(match dtype {
            DataType::Float => Buf::F32(v.into_iter().map(|x| x as f32).collect()),
            DataType::Double => Buf::F64(v),
            DataType::Float16 => Buf::F16(v.into_iter().map(f16::from_f64).collect()),
            DataType::Bfloat16 => Buf::Bf16(v.into_iter().map(bf16::from_f64).collect()),
            _ => return None,
        })
    }

    /// Wraps i128 results to an integer type (two's complement, like C casts).
    pub fn from_i128(dtype: DataType, v: Vec<i128>) -> Option<Buf> {
        Some(match dtype {
            DataType::Int8 => Buf::I8(v.into_iter().map(|x| x as i8).collect()),
            DataType::Int16 => Buf::I16(v.into_iter().map(|x| x as i16).collect()),
            DataType::Int32 => Buf::I32(v.into_iter().map(|x| x as i32).collect()),
            DataType::Int64 => Buf::I64(v.into_iter().map(|x| x as i64).collect()),
            DataType::Uint8 => Buf::U8(v.into_iter().map(|x| x as u8).collect()),
            DataType::Uint16 => Buf::U16(v.into_iter().map(|x| x as u16).collect()),
            DataType::Uint32 => Buf::U32(v.into_iter().map(|x| x as u32).collect()),
            DataType::Uint64 => Buf::U64(v.into_iter().map(|x| x as u64).collect()),
            _ => return None,
        })
    }

    pub fn from_num(dtype: DataType, n: Num) -> Option<Buf> {
        match n {
            Num::F(v) => Buf::from_f64(dtype, v),
            Num::I(v) => Buf::from_i128(dtype, v),
            Num::B(v) => (dtype == DataType::Bool).then_some(Buf::Bool(v)),
        }
    }

    /// One element repeated `n` times.
    #[allow(clippy::clone_on_copy)]
    pub fn repeat(&self, i: usize, n: usize) -> Buf {
        map_buf!(self, |v| vec![v[i].clone(); n])
    }
}

/// Elements of `dims`, saturating: dims a file states (a Reshape target of
/// [2^32, 2^32]) may multiply past `usize`, and a saturated count never
/// equals a buffer's length.
pub fn numel(dims: &[usize]) -> usize {
    dims.iter().fold(1usize, |acc, &d| acc.saturating_mul(d))
}

impl Array {
    pub fn new(dims: Vec<usize>, buf: Buf) -> Array {
        debug_assert_eq!(numel(&dims), buf.len());
        Array { dims, buf }
    }

    pub fn dtype(&self) -> DataType {
        self.buf.dtype()
    }

    pub fn numel(&self) -> usize {
        self.buf.len()
    }

    pub fn rank(&self) -> usize {
        self.dims.len()
    }

    pub fn reshaped(&self, dims: Vec<usize>) -> Array {
        Array {
            dims,
            buf: self.buf.clone(),
        }
    }

    pub fn take(&self, idx: &[usize], dims: Vec<usize>) -> Array {
        Array {
            dims,
            buf: self.buf.take(idx),
        }
    }

    pub fn i64s(dims: Vec<usize>, v: Vec<i64>) -> Array {
        Array {
            dims,
            buf: Buf::I64(v),
        }
    }

    /// Decodes a tensor (raw or typed fields). Sub-byte and float8 types are unsupported.
    pub fn from_tensor(t: &Tensor) -> Result<Array, KernelError> {
        let dims: Vec<usize> = t
            .dims()
            .iter()
            .map(|&d| {
                usize::try_from(d).map_err(|_| KernelError::invalid(format!("negative dim {d}")))
            })
            .collect::<Result<_, _>>()?;
        let n = dims
            .iter()
            .try_fold(1usize, |acc, &d| acc.checked_mul(d))
            .ok_or_else(|| KernelError::invalid(format!("dims {:?} overflow", t.dims())))?;
        let dtype = t.dtype();
        if dtype == DataType::String {
            let s = t.proto.string_data.clone();
            if s.len() != n {
                return Err(KernelError::invalid(format!(
                    "string tensor has {} elements for {n}",
                    s.len()
                )));
            }
            return Ok(Array {
                dims,
                buf: Buf::Str(s),
            });
        }
        let width = match dtype {
            DataType::Float | DataType::Int32 | DataType::Uint32 => 4,
            DataType::Double | DataType::Int64 | DataType::Uint64 => 8,
            DataType::Float16 | DataType::Bfloat16 | DataType::Int16 | DataType::Uint16 => 2,
            DataType::Int8 | DataType::Uint8 | DataType::Bool => 1,
            other => return Err(KernelError::Unsupported(format!("tensors of type {other}"))),
        };
        let raw = t
            .raw_bytes()
            .map_err(|e| KernelError::invalid(e.to_string()))?;
        if n.checked_mul(width) != Some(raw.len()) {
            return Err(KernelError::invalid(format!(
                "tensor data has {} bytes, its shape {:?} needs {n} elements of {width}",
                raw.len(),
                t.dims()
            )));
        }
        macro_rules! le {
            ($t:ty, $w:expr) => {
                raw.chunks_exact($w)
                    .map(|c| <$t>::from_le_bytes(c.try_into().expect("chunk width")))
                    .collect()
            };
        }
        let buf = match dtype {
            DataType::Float => Buf::F32(le!(f32, 4)),
            DataType::Double => Buf::F64(le!(f64, 8)),
            DataType::Float16 => Buf::F16(le!(f16, 2)),
            DataType::Bfloat16 => Buf::Bf16(le!(bf16, 2)),
            DataType::Int8 => Buf::I8(raw.iter().map(|&b| b as i8).collect()),
            DataType::Int16 => Buf::I16(le!(i16, 2)),
            DataType::Int32 => Buf::I32(le!(i32, 4)),
            DataType::Int64 => Buf::I64(le!(i64, 8)),
            DataType::Uint8 => Buf::U8(raw.to_vec()),
            DataType::Uint16 => Buf::U16(le!(u16, 2)),
            DataType::Uint32 => Buf::U32(le!(u32, 4)),
            DataType::Uint64 => Buf::U64(le!(u64, 8)),
            DataType::Bool => Buf::Bool(raw.iter().map(|&b| b != 0).collect()),
            _ => unreachable!("width checked above"),
        };
        Ok(Array { dims, buf })
    }

    pub fn to_tensor(&self) -> Tensor {
        let dims: Vec<i64> = self.dims.iter().map(|&d| d as i64).collect();
        if let Buf::Str(s) = &self.buf {
            return Tensor::from_proto(TensorProto {
                dims,
                data_type: Some(DataType::String.code()),
                string_data: s.clone(),
                ..Default::default()
            });
        }
        let bytes: Vec<u8> = match &self.buf {
            Buf::F32(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
            Buf::F64(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
            Buf::F16(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
            Buf::Bf16(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
            Buf::I8(v) => v.iter().map(|&x| x as u8).collect(),
            Buf::I16(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
            Buf::I32(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
            Buf::I64(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
            Buf::U8(v) => v.clone(),
            Buf::U16(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
            Buf::U32(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
            Buf::U64(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
            Buf::Bool(v) => v.iter().map(|&b| b as u8).collect(),
            Buf::Str(_) => unreachable!("handled above"),
        };
        Tensor::from_raw(self.dtype(), dims, Bytes::from(bytes))
    }
}

/// Row-major strides.
pub fn strides(dims: &[usize]) -> Vec<usize> {
    let mut s = vec![1; dims.len()];
    for i in (0..dims.len().saturating_sub(1)).rev() {
        s[i] = s[i + 1] * dims[i + 1];
    }
    s
}

/// Flat indices of the elements picked by per-axis index lists (a cartesian product).
pub fn select(dims: &[usize], per_axis: &[Vec<usize>]) -> Vec<usize> {
    let st = strides(dims);
    let mut out = vec![0usize];
    for (axis, picks) in per_axis.iter().enumerate() {
        let mut next = Vec::with_capacity(out.len() * picks.len());
        for base in &out {
            for &p in picks {
                next.push(base + p * st[axis]);
            }
        }
        out = next;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_every_type() {
        let cases: Vec<Buf> = vec![
            Buf::F32(vec![1.5, -2.0]),
            Buf::F64(vec![1e300, -0.0]),
            Buf::F16(vec![f16::from_f32(0.5), f16::from_f32(-3.0)]),
            Buf::Bf16(vec![bf16::from_f32(1.0), bf16::from_f32(256.0)]),
            Buf::I8(vec![-128, 127]),
            Buf::I16(vec![-3, 4]),
            Buf::I32(vec![i32::MIN, 7]),
            Buf::I64(vec![i64::MAX, -1]),
            Buf::U8(vec![0, 255]),
            Buf::U16(vec![65535, 1]),
            Buf::U32(vec![u32::MAX, 2]),
            Buf::U64(vec![u64::MAX, 3]),
            Buf::Bool(vec![true, false]),
            Buf::Str(vec![b"a".to_vec(), "é".as_bytes().to_vec()]),
        ];
        for b in cases {
            let a = Array::new(vec![2], b);
            let t = a.to_tensor();
            assert_eq!(Array::from_tensor(&t).unwrap(), a);
        }
    }

    #[test]
    fn select_is_a_cartesian_product() {
        assert_eq!(select(&[2, 3], &[vec![1], vec![0, 2]]), vec![3, 5]);
        assert_eq!(strides(&[2, 3, 4]), vec![12, 4, 1]);
    }
}
