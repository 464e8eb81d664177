//! Borrowed tensors: a backend's own output buffer, lent to an observer
//! without a copy.
//!
//! Observing a model's intermediates for calibration reads every element of
//! every tensor once. Copying each one into a [`HostTensor`] first doubles the
//! memory traffic and holds a second copy of everything a run returns; a
//! [`TensorView`] lets the observer read the backend's buffer where it lies,
//! for as long as the sink call lasts.

use half::{bf16, f16};

use crate::error::Result;
use crate::tensor::{DType, HostTensor, TensorData};

/// Elements of a borrowed tensor, row-major.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum DataView<'a> {
    F32(&'a [f32]),
    F64(&'a [f64]),
    F16(&'a [f16]),
    BF16(&'a [bf16]),
    I8(&'a [i8]),
    I16(&'a [i16]),
    I32(&'a [i32]),
    I64(&'a [i64]),
    U8(&'a [u8]),
    U16(&'a [u16]),
    U32(&'a [u32]),
    U64(&'a [u64]),
    Bool(&'a [bool]),
}

/// Applies `$body` to the typed slice inside a [`DataView`], whatever its dtype.
macro_rules! with_view {
    ($data:expr, $v:ident => $body:expr) => {
        match $data {
            DataView::F32($v) => $body,
            DataView::F64($v) => $body,
            DataView::F16($v) => $body,
            DataView::BF16($v) => $body,
            DataView::I8($v) => $body,
            DataView::I16($v) => $body,
            DataView::I32($v) => $body,
            DataView::I64($v) => $body,
            DataView::U8($v) => $body,
            DataView::U16($v) => $body,
            DataView::U32($v) => $body,
            DataView::U64($v) => $body,
            DataView::Bool($v) => $body,
        }
    };
}

impl DataView<'_> {
    pub fn dtype(&self) -> DType {
        match self {
            DataView::F32(_) => DType::F32,
            DataView::F64(_) => DType::F64,
            DataView::F16(_) => DType::F16,
            DataView::BF16(_) => DType::BF16,
            DataView::I8(_) => DType::I8,
            DataView::I16(_) => DType::I16,
            DataView::I32(_) => DType::I32,
            DataView::I64(_) => DType::I64,
            DataView::U8(_) => DType::U8,
            DataView::U16(_) => DType::U16,
            DataView::U32(_) => DType::U32,
            DataView::U64(_) => DType::U64,
            DataView::Bool(_) => DType::Bool,
        }
    }

    pub fn len(&self) -> usize {
        with_view!(self, v => v.len())
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// An owned copy of the elements.
    pub fn to_data(&self) -> TensorData {
        match *self {
            DataView::F32(v) => TensorData::F32(v.to_vec()),
            DataView::F64(v) => TensorData::F64(v.to_vec()),
            DataView::F16(v) => TensorData::F16(v.to_vec()),
            DataView::BF16(v) => TensorData::BF16(v.to_vec()),
            DataView::I8(v) => TensorData::I8(v.to_vec()),
            DataView::I16(v) => TensorData::I16(v.to_vec()),
            DataView::I32(v) => TensorData::I32(v.to_vec()),
            DataView::I64(v) => TensorData::I64(v.to_vec()),
            DataView::U8(v) => TensorData::U8(v.to_vec()),
            DataView::U16(v) => TensorData::U16(v.to_vec()),
            DataView::U32(v) => TensorData::U32(v.to_vec()),
            DataView::U64(v) => TensorData::U64(v.to_vec()),
            DataView::Bool(v) => TensorData::Bool(v.to_vec()),
        }
    }
}

impl<'a> DataView<'a> {
    /// Borrows the elements of owned data.
    pub fn of(data: &'a TensorData) -> DataView<'a> {
        match data {
            TensorData::F32(v) => DataView::F32(v),
            TensorData::F64(v) => DataView::F64(v),
            TensorData::F16(v) => DataView::F16(v),
            TensorData::BF16(v) => DataView::BF16(v),
            TensorData::I8(v) => DataView::I8(v),
            TensorData::I16(v) => DataView::I16(v),
            TensorData::I32(v) => DataView::I32(v),
            TensorData::I64(v) => DataView::I64(v),
            TensorData::U8(v) => DataView::U8(v),
            TensorData::U16(v) => DataView::U16(v),
            TensorData::U32(v) => DataView::U32(v),
            TensorData::U64(v) => DataView::U64(v),
            TensorData::Bool(v) => DataView::Bool(v),
        }
    }
}

/// A named tensor whose elements belong to someone else (a backend's run
/// result, or a [`HostTensor`]).
#[derive(Debug, Clone, PartialEq)]
pub struct TensorView<'a> {
    name: &'a str,
    shape: Vec<usize>,
    data: DataView<'a>,
}

impl<'a> TensorView<'a> {
    /// A view; `None` when the element count does not match the shape (a
    /// backend bug, never silently misread).
    pub fn new(name: &'a str, shape: Vec<usize>, data: DataView<'a>) -> Option<TensorView<'a>> {
        let count = crate::tensor::element_count(&shape)?;
        (count == data.len()).then_some(TensorView { name, shape, data })
    }

    /// Borrows a host tensor (unnamed tensors get the empty name).
    pub fn of(t: &'a HostTensor) -> TensorView<'a> {
        TensorView {
            name: t.name().unwrap_or(""),
            shape: t.shape().to_vec(),
            data: DataView::of(t.data()),
        }
    }

    pub fn name(&self) -> &'a str {
        self.name
    }

    pub fn shape(&self) -> &[usize] {
        &self.shape
    }

    pub fn data(&self) -> DataView<'a> {
        self.data
    }

    pub fn dtype(&self) -> DType {
        self.data.dtype()
    }

    pub fn len(&self) -> usize {
        self.data.len()
    }

    pub fn is_empty(&self) -> bool {
        self.data.is_empty()
    }

    /// An owned copy, named.
    pub fn to_host(&self) -> Result<HostTensor> {
        HostTensor::new(
            Some(self.name.to_string()),
            self.shape.clone(),
            self.data.to_data(),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn views_borrow_and_copy_back_exactly() {
        let t = HostTensor::from_vec(vec![2, 2], vec![1.0f32, -2.0, 3.5, 0.0])
            .unwrap()
            .named("x");
        let v = TensorView::of(&t);
        assert_eq!(
            (v.name(), v.shape(), v.dtype(), v.len()),
            ("x", &[2, 2][..], DType::F32, 4)
        );
        assert_eq!(v.to_host().unwrap(), t);
        assert!(
            matches!(v.data(), DataView::F32(s) if s.as_ptr() == t.as_slice::<f32>().unwrap().as_ptr())
        );
        let h = HostTensor::from_vec(vec![1], vec![f16::from_f32(0.5)]).unwrap();
        assert_eq!(TensorView::of(&h).to_host().unwrap(), h.named(""));
    }

    #[test]
    fn a_view_whose_data_does_not_fill_its_shape_is_refused() {
        let data = [1i64, 2, 3];
        assert!(TensorView::new("a", vec![3], DataView::I64(&data)).is_some());
        assert!(TensorView::new("a", vec![2, 2], DataView::I64(&data)).is_none());
        assert!(TensorView::new("a", vec![usize::MAX, 2], DataView::I64(&data)).is_none());
    }
}
