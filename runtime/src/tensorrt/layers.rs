//! Layers of a built engine, read from the engine inspector's JSON
//! (`IEngineInspector::getEngineInformation(LayerInformationFormat::kJSON)`).
//!
//! With `ProfilingVerbosity::kDETAILED` the JSON is `{"Layers": [{"Name", "LayerType",
//! "Inputs": [{"Name", "Dimensions", "Format/Datatype"}], "Outputs": [...], ...}],
//! "Bindings": [...]}`; with `kLAYER_NAMES_ONLY` each layer is just its name. The
//! precision is not a field of its own: it is named inside the tensors' format strings
//! ("Row major linear FP16 format", "Thirty-two wide channel vectorized row major Int8
//! format", "Half", ...). A layer's precision is that of its first output (of its first
//! input for a layer without outputs); formats TensorRT could not resolve ("N/A due to
//! dynamic shapes") give [`EnginePrecision::Unknown`].

use serde::Serialize;
use serde_json::Value;

use crate::error::{Result, RuntimeError};

/// A data type named in a TensorRT format string.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum EnginePrecision {
    Fp32,
    Fp16,
    Bf16,
    Fp8,
    Fp4,
    Int8,
    Int4,
    Int32,
    Int64,
    Uint8,
    Bool,
    Unknown,
}

impl std::fmt::Display for EnginePrecision {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let s = match self {
            EnginePrecision::Fp32 => "fp32",
            EnginePrecision::Fp16 => "fp16",
            EnginePrecision::Bf16 => "bf16",
            EnginePrecision::Fp8 => "fp8",
            EnginePrecision::Fp4 => "fp4",
            EnginePrecision::Int8 => "int8",
            EnginePrecision::Int4 => "int4",
            EnginePrecision::Int32 => "int32",
            EnginePrecision::Int64 => "int64",
            EnginePrecision::Uint8 => "uint8",
            EnginePrecision::Bool => "bool",
            EnginePrecision::Unknown => "unknown",
        };
        f.write_str(s)
    }
}

impl EnginePrecision {
    /// The data type a format string names, by its words (case-insensitive).
    pub fn from_format(format: &str) -> EnginePrecision {
        for word in format
            .split(|c: char| !c.is_ascii_alphanumeric())
            .filter(|w| !w.is_empty())
        {
            let p = match word.to_ascii_lowercase().as_str() {
                "fp32" | "float" | "float32" => EnginePrecision::Fp32,
                "fp16" | "half" | "float16" => EnginePrecision::Fp16,
                "bf16" | "bfloat16" => EnginePrecision::Bf16,
                "fp8" | "e4m3" => EnginePrecision::Fp8,
                "fp4" => EnginePrecision::Fp4,
                "int8" => EnginePrecision::Int8,
                "int4" => EnginePrecision::Int4,
                "int32" => EnginePrecision::Int32,
                "int64" => EnginePrecision::Int64,
                "uint8" => EnginePrecision::Uint8,
                "bool" => EnginePrecision::Bool,
                _ => continue,
            };
            return p;
        }
        EnginePrecision::Unknown
    }
}

/// One layer of a built engine.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LayerInfo {
    /// TensorRT's layer name: fused layers join the ONNX node names with " + ".
    pub name: String,
    /// "CaskConvolution", "Reformat", ...; absent without detailed profiling.
    pub layer_type: Option<String>,
    pub precision: EnginePrecision,
    /// The format string the precision was read from.
    pub format: Option<String>,
}

/// Parses the inspector's JSON into layers.
pub fn parse_engine_layers(json: &str) -> Result<Vec<LayerInfo>> {
    let bad = |what: &str| RuntimeError::Load {
        backend: "TensorRT".into(),
        message: format!("the engine inspector's layer information is not as expected: {what}"),
    };
    let root: Value = serde_json::from_str(json).map_err(|e| bad(&e.to_string()))?;
    let layers = root
        .get("Layers")
        .and_then(Value::as_array)
        .ok_or_else(|| bad("no \"Layers\" array"))?;
    layers
        .iter()
        .enumerate()
        .map(|(i, layer)| match layer {
            Value::String(name) => Ok(LayerInfo {
                name: name.clone(),
                layer_type: None,
                precision: EnginePrecision::Unknown,
                format: None,
            }),
            Value::Object(map) => {
                let name = map
                    .get("Name")
                    .and_then(Value::as_str)
                    .ok_or_else(|| bad(&format!("layer {i} has no \"Name\"")))?;
                let format =
                    first_format(map.get("Outputs")).or_else(|| first_format(map.get("Inputs")));
                Ok(LayerInfo {
                    name: name.to_string(),
                    layer_type: map
                        .get("LayerType")
                        .and_then(Value::as_str)
                        .map(str::to_string),
                    precision: format
                        .as_deref()
                        .map_or(EnginePrecision::Unknown, EnginePrecision::from_format),
                    format,
                })
            }
            _ => Err(bad(&format!("layer {i} is neither a name nor an object"))),
        })
        .collect()
}

fn first_format(tensors: Option<&Value>) -> Option<String> {
    tensors?
        .as_array()?
        .first()?
        .get("Format/Datatype")?
        .as_str()
        .map(str::to_string)
}

/// Layer count per precision, in first-seen order (for reports).
pub fn precision_histogram(layers: &[LayerInfo]) -> Vec<(EnginePrecision, usize)> {
    let mut out: Vec<(EnginePrecision, usize)> = Vec::new();
    for l in layers {
        match out.iter_mut().find(|(p, _)| *p == l.precision) {
            Some((_, n)) => *n += 1,
            None => out.push((l.precision, 1)),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_precision_from_format_strings() {
        let cases = [
            ("Row major linear FP16 format", EnginePrecision::Fp16),
            (
                "Thirty-two wide channel vectorized row major Int8 format.",
                EnginePrecision::Int8,
            ),
            ("Float", EnginePrecision::Fp32),
            ("Half", EnginePrecision::Fp16),
            ("Row major linear BF16 format", EnginePrecision::Bf16),
            (
                "Channel major FP16 format where channel % 8 == 0",
                EnginePrecision::Fp16,
            ),
            ("Row major linear Int32 format", EnginePrecision::Int32),
            ("Row major linear FP8 format", EnginePrecision::Fp8),
            ("N/A due to dynamic shapes", EnginePrecision::Unknown),
            ("", EnginePrecision::Unknown),
        ];
        for (text, want) in cases {
            assert_eq!(EnginePrecision::from_format(text), want, "{text}");
        }
    }

    #[test]
    fn parses_detailed_and_names_only_json() {
        let json = r#"{"Layers": [
            {"Name": "/conv1/Conv + /relu1/Relu", "LayerType": "CaskConvolution",
             "Inputs": [{"Name": "x", "Dimensions": [1,3,8,8], "Format/Datatype": "Row major linear FP32 format"}],
             "Outputs": [{"Name": "y", "Dimensions": [1,8,8,8], "Format/Datatype": "Channel major FP16 format where channel % 8 == 0"}]},
            {"Name": "quant", "LayerType": "Scale",
             "Inputs": [{"Name": "y", "Format/Datatype": "Half"}],
             "Outputs": [{"Name": "q", "Format/Datatype": "Thirty-two wide channel vectorized row major Int8 format"}]},
            {"Name": "sink", "Inputs": [{"Name": "q", "Format/Datatype": "Float"}], "Outputs": []},
            "shape-only layer"
        ], "Bindings": ["x", "q"]}"#;
        let layers = parse_engine_layers(json).unwrap();
        let got: Vec<(&str, EnginePrecision)> = layers
            .iter()
            .map(|l| (l.name.as_str(), l.precision))
            .collect();
        assert_eq!(
            got,
            vec![
                ("/conv1/Conv + /relu1/Relu", EnginePrecision::Fp16),
                ("quant", EnginePrecision::Int8),
                ("sink", EnginePrecision::Fp32),
                ("shape-only layer", EnginePrecision::Unknown),
            ]
        );
        assert_eq!(layers[0].layer_type.as_deref(), Some("CaskConvolution"));
        assert_eq!(layers[3].layer_type, None);
        assert_eq!(
            precision_histogram(&layers),
            vec![
                (EnginePrecision::Fp16, 1),
                (EnginePrecision::Int8, 1),
                (EnginePrecision::Fp32, 1),
                (EnginePrecision::Unknown, 1)
            ]
        );
    }

    #[test]
    fn malformed_json_is_an_error_not_a_panic() {
        for bad in [
            "",
            "{",
            "{}",
            r#"{"Layers": 3}"#,
            r#"{"Layers": [{"LayerType": "X"}]}"#,
            r#"{"Layers": [7]}"#,
        ] {
            let e = parse_engine_layers(bad).unwrap_err().to_string();
            assert!(
                e.contains("layer information is not as expected"),
                "{bad}: {e}"
            );
        }
    }
}
