//! The Python forms of keyword values turned into the options' own forms,
//! keyword by keyword: `input_shapes={"x": [1, 3, 224, 224]}` becomes
//! `["x:1x3x224x224"]` (the text `--input-shape` takes, parsed later by the
//! same code), `precision={"Softmax": "fp32"}` becomes `["Softmax=fp32"]`,
//! `verify=False` becomes `no_verify: true`, and so on. What a keyword's
//! value means is decided where the command line's flag is: here it only
//! changes shape.

use serde_json::Value;

use super::ordered::Kw;
use crate::save_args::DEFAULT_EXTERNAL_THRESHOLD;

/// One keyword as an options field: the field's name and value, and the
/// keyword the caller wrote (for messages).
#[derive(Debug, Clone)]
pub struct Entry {
    pub field: String,
    pub value: Value,
    pub keyword: String,
}

/// What a keyword turned into.
#[derive(Debug)]
pub enum Translated {
    /// A field of the options (or of one of their settings groups).
    Field(Entry),
    /// `pipeline={...}`: the pipeline as YAML text (JSON is YAML).
    PipelineText(String),
    /// `report=`: the files to write the report to.
    Reports(Vec<String>),
    /// Not given (`None`, `external_data=False`): the default stays.
    Nothing,
}

/// A value of the wrong kind: `(value shown, what was expected)`.
pub type Wrong = (String, String);

/// How a value is shown in a message: a string without quotes, anything
/// else as JSON.
pub fn shown(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

fn wrong(v: &Kw, expected: &str) -> Wrong {
    (shown(&v.value()), expected.to_string())
}

/// The field a keyword names when it is not the field's own name.
fn field_of(command: &str, keyword: &str) -> String {
    match (command, keyword) {
        // build-engine's --gate is `gate`; the Python API says `gates` everywhere.
        ("build-engine", "gates") => "gate",
        ("calibrate", "calib_data") => "data",
        (_, "verify") => "no_verify",
        (_, "pipeline") => "config",
        (_, "ep") => "execution_providers",
        (_, "ep_option") => "ep_options",
        (_, k) => k,
    }
    .to_string()
}

/// One keyword of `command`, in its options' form.
pub fn translate(command: &str, keyword: &str, value: Kw) -> Result<Translated, Wrong> {
    if value == Kw::Plain(Value::Null) {
        return Ok(Translated::Nothing);
    }
    let field = field_of(command, keyword);
    let value = match (keyword, field.as_str()) {
        ("pipeline", _) if matches!(value, Kw::Object(_)) => {
            return Ok(Translated::PipelineText(value.text()));
        }
        ("report", _) => return Ok(Translated::Reports(strings(&value)?)),
        ("verify", _) => match value {
            Kw::Plain(Value::Bool(v)) => Value::Bool(!v),
            other => return Err(wrong(&other, "True or False")),
        },
        (_, "input_shapes") => Value::from(input_shapes(&value)?),
        (_, "precision" | "gates" | "gate") => Value::from(pairs(&value)?),
        (_, "passes" | "disable" | "execution_providers") => Value::from(comma_list(&value)?),
        (_, "compare" | "shapes" | "ep_options" | "merge") => Value::from(strings(&value)?),
        (_, "external_data") => match value {
            Kw::Plain(Value::Bool(true)) => Value::from(DEFAULT_EXTERNAL_THRESHOLD),
            Kw::Plain(Value::Bool(false)) => return Ok(Translated::Nothing),
            other => other.value(),
        },
        _ => value.value(),
    };
    Ok(Translated::Field(Entry {
        field,
        value,
        keyword: keyword.to_string(),
    }))
}

/// A string or a list of strings (`report="r.json"`, `compare=["b.onnx"]`).
fn strings(v: &Kw) -> Result<Vec<String>, Wrong> {
    match v {
        Kw::Plain(Value::String(s)) => Ok(vec![s.clone()]),
        Kw::Array(items) => items
            .iter()
            .map(|i| match i {
                Kw::Plain(Value::String(s)) => Ok(s.clone()),
                other => Err(wrong(other, "a string")),
            })
            .collect(),
        other => Err(wrong(other, "a string or a list of strings")),
    }
}

/// `"a,b"` or `["a", "b"]` (the flags that take comma lists).
fn comma_list(v: &Kw) -> Result<Vec<String>, Wrong> {
    Ok(strings(v)?
        .iter()
        .flat_map(|s| s.split(','))
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(String::from)
        .collect())
}

/// A value after `=`: lists comma-joined, booleans lower case.
fn scalar(v: &Kw) -> Result<String, Wrong> {
    match v {
        Kw::Plain(Value::String(s)) => Ok(s.clone()),
        Kw::Plain(Value::Number(n)) => Ok(n.to_string()),
        Kw::Plain(Value::Bool(b)) => Ok(b.to_string()),
        Kw::Array(items) => Ok(items
            .iter()
            .map(scalar)
            .collect::<Result<Vec<_>, _>>()?
            .join(",")),
        other => Err(wrong(other, "a string, a number or a list")),
    }
}

/// `{k: v}` → `["k=v", ...]`; a string or list of strings as is.
fn pairs(v: &Kw) -> Result<Vec<String>, Wrong> {
    match v {
        Kw::Object(map) => map
            .iter()
            .map(|(k, v)| Ok(format!("{k}={}", scalar(v)?)))
            .collect(),
        other => strings(other).map_err(|_| wrong(other, "a dict of NAME: VALUE")),
    }
}

/// `{"x": [1, 3, 224, 224]}` → `["x:1x3x224x224"]`, `{"ids": {"batch": 1}}`
/// → `["ids:batch=1"]`; a string or list of `NAME:DIMS` strings as is.
fn input_shapes(v: &Kw) -> Result<Vec<String>, Wrong> {
    let Kw::Object(map) = v else {
        return strings(v).map_err(|_| wrong(v, "a dict of input name: dims"));
    };
    map.iter()
        .map(|(name, dims)| Ok(format!("{name}:{}", shape(dims)?)))
        .collect()
}

fn shape(dims: &Kw) -> Result<String, Wrong> {
    match dims {
        Kw::Plain(Value::String(s)) => Ok(s.clone()),
        Kw::Array(items) => Ok(items
            .iter()
            .map(|d| match d {
                Kw::Plain(Value::Number(n)) if n.is_u64() => Ok(n.to_string()),
                other => Err(wrong(other, "a dim (a whole number)")),
            })
            .collect::<Result<Vec<_>, _>>()?
            .join("x")),
        Kw::Object(symbols) => Ok(symbols
            .iter()
            .map(|(s, v)| Ok(format!("{s}={}", scalar(v)?)))
            .collect::<Result<Vec<_>, Wrong>>()?
            .join(",")),
        other => Err(wrong(other, "a list of dims or a dict of symbol: size")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn kw(value: Value) -> Kw {
        serde_json::from_value(value).unwrap()
    }

    /// `text` as the caller sends it: `json!` would sort the keys.
    fn field(command: &str, keyword: &str, text: &str) -> (String, Value) {
        match translate(command, keyword, serde_json::from_str(text).unwrap()) {
            Ok(Translated::Field(e)) => (e.field, e.value),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn python_forms_become_the_flags_texts() {
        assert_eq!(
            field(
                "optimize",
                "input_shapes",
                r#"{"x": [1, 3, 8, 8], "ids": {"batch": 1}}"#
            ),
            ("input_shapes".into(), json!(["x:1x3x8x8", "ids:batch=1"]))
        );
        assert_eq!(
            field(
                "optimize",
                "gates",
                r#"{"min_cosine": 0.999, "forbid_ops": ["A", "B"]}"#
            ),
            (
                "gates".into(),
                json!(["min_cosine=0.999", "forbid_ops=A,B"])
            )
        );
        assert_eq!(
            field(
                "build-engine",
                "gates",
                r#"{"max_precision_mismatches": 0}"#
            ),
            ("gate".into(), json!(["max_precision_mismatches=0"]))
        );
        assert_eq!(
            field("optimize", "verify", "false"),
            ("no_verify".into(), json!(true))
        );
        assert_eq!(
            field("optimize", "passes", r#""a,b""#),
            ("passes".into(), json!(["a", "b"]))
        );
        assert_eq!(
            field("optimize", "external_data", "true"),
            ("external_data".into(), json!(1024))
        );
        assert!(matches!(
            translate("optimize", "pipeline", kw(json!({"passes": ["x"]}))),
            Ok(Translated::PipelineText(t)) if t == r#"{"passes":["x"]}"#
        ));
    }

    #[test]
    fn a_value_of_the_wrong_kind_says_what_was_expected() {
        let e = translate("optimize", "verify", kw(json!("no"))).unwrap_err();
        assert_eq!(e, ("no".to_string(), "True or False".to_string()));
        let e = translate("optimize", "input_shapes", kw(json!({"x": [1, "n"]}))).unwrap_err();
        assert_eq!(e.0, "n");
    }
}
