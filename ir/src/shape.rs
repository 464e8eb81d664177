//! Tensor types with symbolic dimensions.

use std::fmt;

use crate::dtype::DataType;

/// The largest rank inference believes. A shape *tensor* whose declared
/// length is larger (a crafted `[1000000000000]` fed to Reshape) is not a
/// shape any runtime accepts; inference leaves such a result unknown instead
/// of allocating one entry per claimed dim.
pub const MAX_RANK: usize = 256;

/// One dimension of a tensor shape.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Dim {
    Known(i64),
    /// A named symbolic dimension (`batch`, `seq`).
    Sym(String),
    /// Neither value nor name is known.
    Unknown,
}

/// Element type and (possibly unknown) shape of a tensor value.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TensorType {
    pub dtype: DataType,
    /// `None` when even the rank is unknown.
    pub shape: Option<Vec<Dim>>,
}

impl fmt::Display for Dim {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Dim::Known(v) => write!(f, "{v}"),
            Dim::Sym(s) => f.write_str(s),
            Dim::Unknown => f.write_str("?"),
        }
    }
}

impl fmt::Display for TensorType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.dtype)?;
        match &self.shape {
            None => f.write_str("[?..]"),
            Some(dims) => {
                f.write_str("[")?;
                for (i, d) in dims.iter().enumerate() {
                    if i > 0 {
                        f.write_str(",")?;
                    }
                    write!(f, "{d}")?;
                }
                f.write_str("]")
            }
        }
    }
}

impl TensorType {
    /// Concrete dims when every dim is known.
    pub fn known_dims(&self) -> Option<Vec<i64>> {
        self.shape
            .as_ref()?
            .iter()
            .map(|d| match d {
                Dim::Known(v) => Some(*v),
                _ => None,
            })
            .collect()
    }
}
