//! Host tensors: the backend-neutral way inputs and outputs cross the runtime boundary.
//!
//! A [`HostTensor`] owns its elements in a typed vector ([`TensorData`]), row-major, with
//! a shape of `usize` dims and an optional name (the ONNX value name). Backends convert to
//! and from their own tensor types in their adapter modules.

use std::fmt;

use half::{bf16, f16};
use serde::Serialize;

use crate::error::{Result, RuntimeError};

/// Element type of a tensor, named after the ONNX `TensorProto.DataType` it maps to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum DType {
    F32,
    F64,
    F16,
    BF16,
    I8,
    I16,
    I32,
    I64,
    U8,
    U16,
    U32,
    U64,
    Bool,
}

impl DType {
    /// Every dtype a [`HostTensor`] can hold.
    pub const ALL: [DType; 13] = [
        DType::F32,
        DType::F64,
        DType::F16,
        DType::BF16,
        DType::I8,
        DType::I16,
        DType::I32,
        DType::I64,
        DType::U8,
        DType::U16,
        DType::U32,
        DType::U64,
        DType::Bool,
    ];

    /// The dtype for an ONNX `TensorProto.DataType` code, if a host tensor can hold it.
    pub fn from_onnx(code: i32) -> Option<DType> {
        Some(match code {
            1 => DType::F32,
            2 => DType::U8,
            3 => DType::I8,
            4 => DType::U16,
            5 => DType::I16,
            6 => DType::I32,
            7 => DType::I64,
            9 => DType::Bool,
            10 => DType::F16,
            11 => DType::F64,
            12 => DType::U32,
            13 => DType::U64,
            16 => DType::BF16,
            _ => return None,
        })
    }

    /// The ONNX `TensorProto.DataType` code of this dtype.
    pub fn onnx_code(self) -> i32 {
        match self {
            DType::F32 => 1,
            DType::U8 => 2,
            DType::I8 => 3,
            DType::U16 => 4,
            DType::I16 => 5,
            DType::I32 => 6,
            DType::I64 => 7,
            DType::Bool => 9,
            DType::F16 => 10,
            DType::F64 => 11,
            DType::U32 => 12,
            DType::U64 => 13,
            DType::BF16 => 16,
        }
    }

    /// Lower-case name as used in reports (`f32`, `i64`, `bool`, ...).
    pub fn name(self) -> &'static str {
        match self {
            DType::F32 => "f32",
            DType::F64 => "f64",
            DType::F16 => "f16",
            DType::BF16 => "bf16",
            DType::I8 => "i8",
            DType::I16 => "i16",
            DType::I32 => "i32",
            DType::I64 => "i64",
            DType::U8 => "u8",
            DType::U16 => "u16",
            DType::U32 => "u32",
            DType::U64 => "u64",
            DType::Bool => "bool",
        }
    }

    pub fn is_float(self) -> bool {
        matches!(self, DType::F32 | DType::F64 | DType::F16 | DType::BF16)
    }

    pub fn is_integer(self) -> bool {
        !self.is_float() && self != DType::Bool
    }

    /// Size of one element in bytes.
    pub fn size_of(self) -> usize {
        match self {
            DType::Bool | DType::I8 | DType::U8 => 1,
            DType::F16 | DType::BF16 | DType::I16 | DType::U16 => 2,
            DType::F32 | DType::I32 | DType::U32 => 4,
            DType::F64 | DType::I64 | DType::U64 => 8,
        }
    }
}

impl fmt::Display for DType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The elements of a host tensor, row-major.
#[derive(Debug, Clone, PartialEq)]
pub enum TensorData {
    F32(Vec<f32>),
    F64(Vec<f64>),
    F16(Vec<f16>),
    BF16(Vec<bf16>),
    I8(Vec<i8>),
    I16(Vec<i16>),
    I32(Vec<i32>),
    I64(Vec<i64>),
    U8(Vec<u8>),
    U16(Vec<u16>),
    U32(Vec<u32>),
    U64(Vec<u64>),
    Bool(Vec<bool>),
}

/// Applies `$body` to the typed vector inside a [`TensorData`], whatever its dtype.
macro_rules! with_data {
    ($data:expr, $v:ident => $body:expr) => {
        match $data {
            TensorData::F32($v) => $body,
            TensorData::F64($v) => $body,
            TensorData::F16($v) => $body,
            TensorData::BF16($v) => $body,
            TensorData::I8($v) => $body,
            TensorData::I16($v) => $body,
            TensorData::I32($v) => $body,
            TensorData::I64($v) => $body,
            TensorData::U8($v) => $body,
            TensorData::U16($v) => $body,
            TensorData::U32($v) => $body,
            TensorData::U64($v) => $body,
            TensorData::Bool($v) => $body,
        }
    };
}

impl TensorData {
    pub fn dtype(&self) -> DType {
        match self {
            TensorData::F32(_) => DType::F32,
            TensorData::F64(_) => DType::F64,
            TensorData::F16(_) => DType::F16,
            TensorData::BF16(_) => DType::BF16,
            TensorData::I8(_) => DType::I8,
            TensorData::I16(_) => DType::I16,
            TensorData::I32(_) => DType::I32,
            TensorData::I64(_) => DType::I64,
            TensorData::U8(_) => DType::U8,
            TensorData::U16(_) => DType::U16,
            TensorData::U32(_) => DType::U32,
            TensorData::U64(_) => DType::U64,
            TensorData::Bool(_) => DType::Bool,
        }
    }

    pub fn len(&self) -> usize {
        with_data!(self, v => v.len())
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Every element widened to `f64` (exact for all dtypes except 64-bit integers beyond
    /// 2^53; `true` is 1.0).
    pub fn to_f64_vec(&self) -> Vec<f64> {
        match self {
            TensorData::F32(v) => v.iter().map(|&x| f64::from(x)).collect(),
            TensorData::F64(v) => v.clone(),
            TensorData::F16(v) => v.iter().map(|x| x.to_f64()).collect(),
            TensorData::BF16(v) => v.iter().map(|x| x.to_f64()).collect(),
            TensorData::I8(v) => v.iter().map(|&x| f64::from(x)).collect(),
            TensorData::I16(v) => v.iter().map(|&x| f64::from(x)).collect(),
            TensorData::I32(v) => v.iter().map(|&x| f64::from(x)).collect(),
            TensorData::I64(v) => v.iter().map(|&x| x as f64).collect(),
            TensorData::U8(v) => v.iter().map(|&x| f64::from(x)).collect(),
            TensorData::U16(v) => v.iter().map(|&x| f64::from(x)).collect(),
            TensorData::U32(v) => v.iter().map(|&x| f64::from(x)).collect(),
            TensorData::U64(v) => v.iter().map(|&x| x as f64).collect(),
            TensorData::Bool(v) => v.iter().map(|&x| if x { 1.0 } else { 0.0 }).collect(),
        }
    }
}

/// A Rust element type that a [`HostTensor`] can hold.
pub trait Element: Copy + Sized + 'static {
    const DTYPE: DType;
    fn wrap(v: Vec<Self>) -> TensorData;
    fn slice(data: &TensorData) -> Option<&[Self]>;
}

macro_rules! element {
    ($t:ty, $variant:ident) => {
        impl Element for $t {
            const DTYPE: DType = DType::$variant;
            fn wrap(v: Vec<Self>) -> TensorData {
                TensorData::$variant(v)
            }
            fn slice(data: &TensorData) -> Option<&[Self]> {
                match data {
                    TensorData::$variant(v) => Some(v),
                    _ => None,
                }
            }
        }
    };
}

element!(f32, F32);
element!(f64, F64);
element!(f16, F16);
element!(bf16, BF16);
element!(i8, I8);
element!(i16, I16);
element!(i32, I32);
element!(i64, I64);
element!(u8, U8);
element!(u16, U16);
element!(u32, U32);
element!(u64, U64);
element!(bool, Bool);

/// A tensor in host memory: optional name, shape, typed row-major data.
#[derive(Debug, Clone, PartialEq)]
pub struct HostTensor {
    pub name: Option<String>,
    shape: Vec<usize>,
    data: TensorData,
}

impl HostTensor {
    /// Builds a tensor, checking that the element count matches the shape.
    pub fn new(name: Option<String>, shape: Vec<usize>, data: TensorData) -> Result<HostTensor> {
        let expected = element_count(&shape).ok_or_else(|| RuntimeError::InvalidTensor {
            name: name.clone().unwrap_or_default(),
            message: format!("shape {shape:?} overflows the address space"),
        })?;
        if expected != data.len() {
            return Err(RuntimeError::InvalidTensor {
                name: name.unwrap_or_default(),
                message: format!(
                    "shape {shape:?} needs {expected} elements, the data holds {}",
                    data.len()
                ),
            });
        }
        Ok(HostTensor { name, shape, data })
    }

    /// Builds an unnamed tensor from a typed vector.
    pub fn from_vec<T: Element>(shape: Vec<usize>, data: Vec<T>) -> Result<HostTensor> {
        HostTensor::new(None, shape, T::wrap(data))
    }

    /// A rank-0 tensor holding one value.
    pub fn scalar<T: Element>(value: T) -> HostTensor {
        HostTensor {
            name: None,
            shape: vec![],
            data: T::wrap(vec![value]),
        }
    }

    /// Sets the name, builder style.
    pub fn named(mut self, name: impl Into<String>) -> HostTensor {
        self.name = Some(name.into());
        self
    }

    pub fn name(&self) -> Option<&str> {
        self.name.as_deref()
    }

    pub fn dtype(&self) -> DType {
        self.data.dtype()
    }

    pub fn shape(&self) -> &[usize] {
        &self.shape
    }

    pub fn data(&self) -> &TensorData {
        &self.data
    }

    pub fn into_data(self) -> TensorData {
        self.data
    }

    /// Number of elements.
    pub fn len(&self) -> usize {
        self.data.len()
    }

    pub fn is_empty(&self) -> bool {
        self.data.is_empty()
    }

    /// The elements as a typed slice, if `T` is this tensor's element type.
    pub fn as_slice<T: Element>(&self) -> Option<&[T]> {
        T::slice(&self.data)
    }

    /// Every element widened to `f64` (see [`TensorData::to_f64_vec`]).
    pub fn to_f64_vec(&self) -> Vec<f64> {
        self.data.to_f64_vec()
    }
}

impl HostTensor {
    /// Items `start..end` along the first axis (a sample range of a batch).
    pub fn slice_outer(&self, start: usize, end: usize) -> Result<HostTensor> {
        let outer = *self
            .shape
            .first()
            .ok_or_else(|| RuntimeError::InvalidTensor {
                name: self.name.clone().unwrap_or_default(),
                message: "a scalar has no first axis to slice".into(),
            })?;
        if start > end || end > outer {
            return Err(RuntimeError::InvalidTensor {
                name: self.name.clone().unwrap_or_default(),
                message: format!("items {start}..{end} of a first axis of {outer}"),
            });
        }
        let per = self.shape[1..].iter().product::<usize>();
        let (a, b) = (start * per, end * per);
        macro_rules! slice {
            ($($v:ident),*) => {
                match &self.data {
                    $(TensorData::$v(x) => TensorData::$v(x[a..b].to_vec()),)*
                }
            };
        }
        let data = slice!(
            F32, F64, F16, BF16, I8, I16, I32, I64, U8, U16, U32, U64, Bool
        );
        let mut shape = self.shape.clone();
        shape[0] = end - start;
        HostTensor::new(self.name.clone(), shape, data)
    }

    /// Joins tensors of equal trailing shape and dtype along the first axis
    /// (samples into a batch).
    pub fn concat_outer(parts: &[HostTensor]) -> Result<HostTensor> {
        let first = parts
            .first()
            .ok_or_else(|| RuntimeError::InvalidArgument("nothing to concatenate".into()))?;
        let name = first.name.clone();
        let mut outer = 0;
        for p in parts {
            if p.dtype() != first.dtype()
                || p.shape.get(1..) != first.shape.get(1..)
                || p.shape.is_empty()
            {
                return Err(RuntimeError::InvalidTensor {
                    name: name.clone().unwrap_or_default(),
                    message: format!(
                        "cannot batch a {} {:?} with a {} {:?}",
                        first.dtype(),
                        first.shape,
                        p.dtype(),
                        p.shape
                    ),
                });
            }
            outer += p.shape[0];
        }
        let mut data = first.data.clone();
        for p in &parts[1..] {
            data.extend_from(&p.data);
        }
        let mut shape = first.shape.clone();
        shape[0] = outer;
        HostTensor::new(name, shape, data)
    }
}

impl TensorData {
    /// Appends `other`, which has the same dtype (checked by the caller).
    fn extend_from(&mut self, other: &TensorData) {
        macro_rules! ext {
            ($($v:ident),*) => {
                match (self, other) {
                    $((TensorData::$v(a), TensorData::$v(b)) => a.extend_from_slice(b),)*
                    _ => {}
                }
            };
        }
        ext!(
            F32, F64, F16, BF16, I8, I16, I32, I64, U8, U16, U32, U64, Bool
        );
    }
}

/// Product of dims, `None` on overflow. The empty shape (a scalar) has one element.
pub fn element_count(shape: &[usize]) -> Option<usize> {
    shape.iter().try_fold(1usize, |acc, &d| acc.checked_mul(d))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn onnx_codes_round_trip() {
        for dt in DType::ALL {
            assert_eq!(DType::from_onnx(dt.onnx_code()), Some(dt));
        }
        assert_eq!(DType::from_onnx(8), None); // string
        assert_eq!(DType::from_onnx(0), None);
    }

    #[test]
    fn new_checks_element_count() {
        assert!(HostTensor::from_vec(vec![2, 3], vec![0f32; 6]).is_ok());
        let err = HostTensor::from_vec(vec![2, 3], vec![0f32; 5]).unwrap_err();
        assert!(err.to_string().contains("needs 6 elements"), "{err}");
        let s = HostTensor::scalar(3i64);
        assert_eq!(s.shape(), &[] as &[usize]);
        assert_eq!(s.len(), 1);
        assert!(
            HostTensor::from_vec::<u8>(vec![0, 4], vec![])
                .unwrap()
                .is_empty()
        );
    }

    #[test]
    fn typed_access_and_widening() {
        let t = HostTensor::from_vec(vec![3], vec![true, false, true])
            .unwrap()
            .named("m");
        assert_eq!(t.dtype(), DType::Bool);
        assert_eq!(t.name(), Some("m"));
        assert_eq!(t.as_slice::<bool>(), Some(&[true, false, true][..]));
        assert!(t.as_slice::<f32>().is_none());
        assert_eq!(t.to_f64_vec(), vec![1.0, 0.0, 1.0]);
        let h =
            HostTensor::from_vec(vec![2], vec![f16::from_f32(0.5), f16::from_f32(-2.0)]).unwrap();
        assert_eq!(h.to_f64_vec(), vec![0.5, -2.0]);
    }
}
