//! Keyword values as JSON with the order of every dict kept: Python's dicts
//! are ordered, and `precision={...}` applies its entries in the order
//! written (serde_json's own `Value` sorts the keys of an object).

use serde::de::{self, Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::Value;

/// A JSON value whose objects keep their keys in order.
#[derive(Debug, Clone, PartialEq)]
pub enum Kw {
    Plain(Value),
    Array(Vec<Kw>),
    Object(Vec<(String, Kw)>),
}

impl Kw {
    /// As serde_json's value (objects sorted): for fields whose order does
    /// not matter.
    pub fn value(&self) -> Value {
        match self {
            Kw::Plain(v) => v.clone(),
            Kw::Array(items) => Value::Array(items.iter().map(Kw::value).collect()),
            Kw::Object(entries) => Value::Object(
                entries
                    .iter()
                    .map(|(k, v)| (k.clone(), v.value()))
                    .collect(),
            ),
        }
    }

    /// JSON text with the keys in the order given.
    pub fn text(&self) -> String {
        match self {
            Kw::Plain(v) => v.to_string(),
            Kw::Array(items) => {
                let inner: Vec<String> = items.iter().map(Kw::text).collect();
                format!("[{}]", inner.join(","))
            }
            Kw::Object(entries) => {
                let inner: Vec<String> = entries
                    .iter()
                    .map(|(k, v)| format!("{}:{}", Value::from(k.as_str()), v.text()))
                    .collect();
                format!("{{{}}}", inner.join(","))
            }
        }
    }
}

struct KwVisitor;

impl<'de> Visitor<'de> for KwVisitor {
    type Value = Kw;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a JSON value")
    }
    fn visit_bool<E: de::Error>(self, v: bool) -> Result<Kw, E> {
        Ok(Kw::Plain(Value::Bool(v)))
    }
    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Kw, E> {
        Ok(Kw::Plain(Value::from(v)))
    }
    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Kw, E> {
        Ok(Kw::Plain(Value::from(v)))
    }
    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Kw, E> {
        Ok(Kw::Plain(Value::from(v)))
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<Kw, E> {
        Ok(Kw::Plain(Value::from(v)))
    }
    fn visit_string<E: de::Error>(self, v: String) -> Result<Kw, E> {
        Ok(Kw::Plain(Value::from(v)))
    }
    fn visit_unit<E: de::Error>(self) -> Result<Kw, E> {
        Ok(Kw::Plain(Value::Null))
    }
    fn visit_none<E: de::Error>(self) -> Result<Kw, E> {
        Ok(Kw::Plain(Value::Null))
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Kw, A::Error> {
        let mut items = Vec::new();
        while let Some(item) = seq.next_element::<Kw>()? {
            items.push(item);
        }
        Ok(Kw::Array(items))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Kw, A::Error> {
        let mut entries = Vec::new();
        while let Some((k, v)) = map.next_entry::<String, Kw>()? {
            entries.push((k, v));
        }
        Ok(Kw::Object(entries))
    }
}

impl<'de> Deserialize<'de> for Kw {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Kw, D::Error> {
        d.deserialize_any(KwVisitor)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn objects_keep_their_order() {
        let kw: Kw =
            serde_json::from_str(r#"{"z": 1, "a": [true, {"y": "s", "b": null}]}"#).unwrap();
        assert_eq!(kw.text(), r#"{"z":1,"a":[true,{"y":"s","b":null}]}"#);
        assert_eq!(kw.value()["a"][1]["y"], "s");
    }
}
