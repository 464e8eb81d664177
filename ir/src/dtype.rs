//! ONNX element types (`TensorProto.DataType`).

use std::fmt;

/// An ONNX tensor element type. Unknown codes are kept as `Other` so a model
/// using a type newer than this build still round-trips.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DataType {
    Undefined,
    Float,
    Uint8,
    Int8,
    Uint16,
    Int16,
    Int32,
    Int64,
    String,
    Bool,
    Float16,
    Double,
    Uint32,
    Uint64,
    Complex64,
    Complex128,
    Bfloat16,
    Float8E4M3Fn,
    Float8E4M3Fnuz,
    Float8E5M2,
    Float8E5M2Fnuz,
    Uint4,
    Int4,
    Float4E2M1,
    Float8E8M0,
    Uint2,
    Int2,
    Other(i32),
}

const TABLE: &[(i32, DataType, &str)] = &[
    (0, DataType::Undefined, "undefined"),
    (1, DataType::Float, "float32"),
    (2, DataType::Uint8, "uint8"),
    (3, DataType::Int8, "int8"),
    (4, DataType::Uint16, "uint16"),
    (5, DataType::Int16, "int16"),
    (6, DataType::Int32, "int32"),
    (7, DataType::Int64, "int64"),
    (8, DataType::String, "string"),
    (9, DataType::Bool, "bool"),
    (10, DataType::Float16, "float16"),
    (11, DataType::Double, "float64"),
    (12, DataType::Uint32, "uint32"),
    (13, DataType::Uint64, "uint64"),
    (14, DataType::Complex64, "complex64"),
    (15, DataType::Complex128, "complex128"),
    (16, DataType::Bfloat16, "bfloat16"),
    (17, DataType::Float8E4M3Fn, "float8e4m3fn"),
    (18, DataType::Float8E4M3Fnuz, "float8e4m3fnuz"),
    (19, DataType::Float8E5M2, "float8e5m2"),
    (20, DataType::Float8E5M2Fnuz, "float8e5m2fnuz"),
    (21, DataType::Uint4, "uint4"),
    (22, DataType::Int4, "int4"),
    (23, DataType::Float4E2M1, "float4e2m1"),
    (24, DataType::Float8E8M0, "float8e8m0"),
    (25, DataType::Uint2, "uint2"),
    (26, DataType::Int2, "int2"),
];

impl DataType {
    pub fn from_code(code: i32) -> DataType {
        TABLE
            .iter()
            .find(|(c, _, _)| *c == code)
            .map(|(_, t, _)| *t)
            .unwrap_or(DataType::Other(code))
    }

    pub fn code(self) -> i32 {
        match self {
            DataType::Other(c) => c,
            t => TABLE
                .iter()
                .find(|(_, x, _)| *x == t)
                .map(|(c, _, _)| *c)
                .unwrap_or(0),
        }
    }

    /// Short lowercase name used in reports (`float32`, `int64`, ...).
    pub fn name(self) -> String {
        match self {
            DataType::Other(c) => format!("dtype#{c}"),
            t => TABLE
                .iter()
                .find(|(_, x, _)| *x == t)
                .map(|(_, _, n)| n.to_string())
                .unwrap_or_default(),
        }
    }

    /// Size of one element in bits, when the type has a fixed size.
    pub fn bit_width(self) -> Option<usize> {
        use DataType::*;
        Some(match self {
            Bool | Uint8 | Int8 | Float8E4M3Fn | Float8E4M3Fnuz | Float8E5M2 | Float8E5M2Fnuz
            | Float8E8M0 => 8,
            Uint16 | Int16 | Float16 | Bfloat16 => 16,
            Float | Int32 | Uint32 => 32,
            Double | Int64 | Uint64 | Complex64 => 64,
            Complex128 => 128,
            Uint4 | Int4 | Float4E2M1 => 4,
            Uint2 | Int2 => 2,
            Undefined | String | Other(_) => return None,
        })
    }

    /// Bytes needed to store `count` elements in `raw_data` (sub-byte types are packed).
    pub fn storage_bytes(self, count: usize) -> Option<usize> {
        let bits = self.bit_width()?;
        Some((count.checked_mul(bits)?).div_ceil(8))
    }

    pub fn is_float(self) -> bool {
        use DataType::*;
        matches!(
            self,
            Float
                | Double
                | Float16
                | Bfloat16
                | Float8E4M3Fn
                | Float8E4M3Fnuz
                | Float8E5M2
                | Float8E5M2Fnuz
                | Float8E8M0
                | Float4E2M1
        )
    }
}

impl fmt::Display for DataType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_round_trip() {
        for code in -1..40 {
            assert_eq!(DataType::from_code(code).code(), code);
        }
        assert_eq!(DataType::from_code(1), DataType::Float);
        assert_eq!(DataType::Int4.storage_bytes(3), Some(2));
        assert_eq!(DataType::String.storage_bytes(3), None);
    }
}
