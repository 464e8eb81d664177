//! The field names of a struct that derives `serde::Deserialize`, read from
//! serde itself: the derive hands them to `deserialize_struct`, so the
//! keyword check (`keywords.rs`) lists exactly the fields the options
//! structs have (skipped ones excluded) and cannot drift from them.

use serde::Deserialize;
use serde::de::{self, Deserializer, Visitor};

/// The "error" that carries the names out of the derive.
#[derive(Debug)]
struct Found(&'static [&'static str]);

impl std::fmt::Display for Found {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "fields {:?}", self.0)
    }
}

impl std::error::Error for Found {}

impl de::Error for Found {
    fn custom<T: std::fmt::Display>(_: T) -> Found {
        Found(&[])
    }
}

/// A deserializer that answers every request with the field names asked for.
struct Probe;

impl<'de> Deserializer<'de> for Probe {
    type Error = Found;

    fn deserialize_any<V: Visitor<'de>>(self, _: V) -> Result<V::Value, Found> {
        Err(Found(&[]))
    }

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        fields: &'static [&'static str],
        _visitor: V,
    ) -> Result<V::Value, Found> {
        Err(Found(fields))
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string
        bytes byte_buf option unit unit_struct newtype_struct seq tuple
        tuple_struct map enum identifier ignored_any
    }
}

/// The names of `T`'s deserialized fields (empty for a type that is not a
/// plain struct).
pub fn of<T: for<'de> Deserialize<'de>>() -> &'static [&'static str] {
    match T::deserialize(Probe) {
        Err(Found(fields)) => fields,
        Ok(_) => &[],
    }
}

#[cfg(test)]
mod tests {
    #[derive(serde::Deserialize)]
    #[allow(dead_code)]
    struct Two {
        a: u8,
        #[serde(skip)]
        hidden: u8,
        b: String,
    }

    #[test]
    fn lists_the_deserialized_fields() {
        assert_eq!(super::of::<Two>(), ["a", "b"]);
    }
}
