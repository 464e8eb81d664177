//! Layers of a built engine, read from the engine inspector's JSON
//! (`IEngineInspector::getEngineInformation(LayerInformationFormat::kJSON)`), or, where
//! the engine cannot be deserialized (TensorRT-RTX on a machine without a GPU), from the
//! builder's detailed log ([`parse_build_log`]).
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
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Default)]
pub struct LayerInfo {
    /// TensorRT's layer name: fused layers join the ONNX node names with " + ".
    pub name: String,
    /// "CaskConvolution", "Reformat", ...; absent without detailed profiling.
    pub layer_type: Option<String>,
    pub precision: EnginePrecision,
    /// The format string the precision was read from.
    pub format: Option<String>,
    /// Activation inputs, weights and outputs with their datatypes (build log only).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub inputs: Vec<TensorInfo>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub constants: Vec<TensorInfo>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub outputs: Vec<TensorInfo>,
    /// The ONNX nodes fused into this kernel (build log only: `Metadata: [ONNX Layer: ..]`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub onnx_nodes: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tactic: Option<String>,
}

impl Default for EnginePrecision {
    fn default() -> Self {
        EnginePrecision::Unknown
    }
}

/// One tensor of a kernel, as the build log lists it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct TensorInfo {
    pub name: String,
    pub dims: Vec<i64>,
    pub datatype: EnginePrecision,
}

impl TensorInfo {
    fn elements(&self) -> u64 {
        self.dims.iter().map(|&d| d.max(1) as u64).product()
    }
}

/// Where a build's layer table came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum LayerSource {
    /// The engine inspector of the deserialized engine (a GPU was present).
    Inspector,
    /// The builder's `Layers:` message (no GPU: the engine was never deserialized).
    BuildLog,
    /// Neither (the builder logged no layer table).
    None,
}

/// The memory totals the builder logs (`Total Weights Memory: N bytes`, ...).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct EngineMemory {
    pub max_scratch_bytes: Option<u64>,
    pub weights_bytes: Option<u64>,
    pub activation_bytes: Option<u64>,
    pub host_persistent_bytes: Option<u64>,
    pub device_persistent_bytes: Option<u64>,
}

/// Reads the memory totals from the build log; `None` when it has none.
pub fn parse_memory(log: &str) -> Option<EngineMemory> {
    let mut m = EngineMemory::default();
    let mut any = false;
    for line in log.lines() {
        let Some((key, rest)) = line.split_once(':') else {
            continue;
        };
        let Some(bytes) = rest
            .trim()
            .strip_suffix("bytes")
            .and_then(|n| n.trim().parse::<u64>().ok())
        else {
            continue;
        };
        let slot = match key.trim() {
            "Max Scratch Memory" => &mut m.max_scratch_bytes,
            "Total Weights Memory" => &mut m.weights_bytes,
            "Total Activation Memory" => &mut m.activation_bytes,
            "Total Host Persistent Memory" => &mut m.host_persistent_bytes,
            "Total Device Persistent Memory" => &mut m.device_persistent_bytes,
            _ => continue,
        };
        *slot = Some(bytes);
        any = true;
    }
    any.then_some(m)
}

/// Parses the builder's `Layers:` message (ProfilingVerbosity::kDETAILED, verbose
/// severity): one line per kernel, `Name: .., LayerType: .., Inputs: [ {..} ],
/// Constants: [..], Outputs: [..], TacticName: .., StreamId: .., Metadata: [ONNX Layer: ..]`
/// with the fused ONNX nodes separated by 0x1F. `None` when the log has no such message.
pub fn parse_build_log(log: &str) -> Option<Vec<LayerInfo>> {
    let start = log.find("Layers:")?;
    let mut layers = Vec::new();
    for line in log[start + "Layers:".len()..].lines() {
        let line = line.trim_end();
        if line.starts_with("I/O Tensors:") || line.starts_with("Bindings:") {
            break;
        }
        if let Some(layer) = parse_kernel_line(line) {
            layers.push(layer);
        }
    }
    Some(layers)
}

fn parse_kernel_line(line: &str) -> Option<LayerInfo> {
    let rest = line.strip_prefix("Name: ")?;
    let (name, rest) = rest.split_once(", LayerType: ")?;
    let (layer_type, rest) = rest.split_once(", Inputs: ")?;
    let (inputs, rest) = bracketed(rest)?;
    let rest = rest.strip_prefix(", Constants: ")?;
    let (constants, rest) = bracketed(rest)?;
    let rest = rest.strip_prefix(", Outputs: ")?;
    let (outputs, rest) = bracketed(rest)?;
    let tactic = rest
        .strip_prefix(", TacticName: ")
        .and_then(|t| t.split(", ").next())
        .map(str::trim)
        .filter(|t| !t.is_empty())
        .map(str::to_string);
    let onnx_nodes = rest
        .find("Metadata: ")
        .map(|i| fused_nodes(&rest[i + "Metadata: ".len()..]))
        .unwrap_or_default();
    let inputs = tensors(inputs);
    let constants = tensors(constants);
    let outputs = tensors(outputs);
    let precision = realized_precision(&inputs, &constants, &outputs);
    Some(LayerInfo {
        name: name.to_string(),
        layer_type: Some(layer_type.to_string()),
        precision,
        format: None,
        inputs,
        constants,
        outputs,
        onnx_nodes,
        tactic,
    })
}

/// Splits `[ ... ]rest` at the bracket matching the first one.
fn bracketed(text: &str) -> Option<(&str, &str)> {
    let text = text.strip_prefix('[')?;
    let mut depth = 1usize;
    for (i, c) in text.char_indices() {
        match c {
            '[' => depth += 1,
            ']' => {
                depth -= 1;
                if depth == 0 {
                    return Some((&text[..i], &text[i + 1..]));
                }
            }
            _ => {}
        }
    }
    None
}

/// The `{ Name: .., Dimensions: [..], .., Datatype: .., Format: .. }` objects of a list.
fn tensors(list: &str) -> Vec<TensorInfo> {
    let mut out = Vec::new();
    let mut rest = list;
    while let Some(open) = rest.find('{') {
        let Some(close) = rest[open..].find('}') else {
            break;
        };
        let body = &rest[open + 1..open + close];
        rest = &rest[open + close + 1..];
        let field = |key: &str| {
            body.find(key).map(|i| {
                let v = &body[i + key.len()..];
                v.split(", ").next().unwrap_or("").trim()
            })
        };
        let name = field("Name: ").unwrap_or("").to_string();
        let dims = body
            .find("Dimensions: ")
            .and_then(|i| bracketed(&body[i + "Dimensions: ".len()..]))
            .map(|(d, _)| {
                d.split(',')
                    .filter_map(|x| x.trim().parse::<i64>().ok())
                    .collect()
            })
            .unwrap_or_default();
        let datatype =
            field("Datatype: ").map_or(EnginePrecision::Unknown, EnginePrecision::from_format);
        out.push(TensorInfo {
            name,
            dims,
            datatype,
        });
    }
    out
}

/// `[ONNX Layer: a]<0x1F>[ONNX Layer: b]` -> [a, b].
fn fused_nodes(metadata: &str) -> Vec<String> {
    const TAG: &str = "[ONNX Layer: ";
    metadata
        .split('\u{1f}')
        .flat_map(|piece| piece.split("][ONNX Layer: "))
        .map(|p| p.trim())
        .map(|p| p.strip_prefix(TAG).unwrap_or(p))
        .map(|p| p.strip_suffix(']').unwrap_or(p))
        .filter(|p| !p.is_empty())
        .map(str::to_string)
        .collect()
}

fn is_compute_type(p: EnginePrecision) -> bool {
    matches!(
        p,
        EnginePrecision::Fp32
            | EnginePrecision::Fp16
            | EnginePrecision::Bf16
            | EnginePrecision::Fp8
            | EnginePrecision::Fp4
            | EnginePrecision::Int8
            | EnginePrecision::Int4
    )
}

fn is_quantized(p: EnginePrecision) -> bool {
    matches!(
        p,
        EnginePrecision::Int8 | EnginePrecision::Int4 | EnginePrecision::Fp8 | EnginePrecision::Fp4
    )
}

/// The precision a kernel computes in, from its tensors' datatypes (index and shape
/// tensors, Int32/Int64/Bool, do not count):
/// 1. quantized (Int8, ...) when every activation input is of that type and so is its
///    largest weight: an INT8 convolution has Int8 inputs and weights and may write
///    Float (the dequantization is fused), so its output does not say it;
/// 2. otherwise the one type of its inputs and weights when they agree, else the type
///    holding the most elements (a Half convolution with a few Float scales is Half);
/// 3. a kernel without float inputs or weights (a generator) takes its output's type.
pub fn realized_precision(
    inputs: &[TensorInfo],
    constants: &[TensorInfo],
    outputs: &[TensorInfo],
) -> EnginePrecision {
    let acts: Vec<&TensorInfo> = inputs
        .iter()
        .filter(|t| is_compute_type(t.datatype))
        .collect();
    let weights: Vec<&TensorInfo> = constants
        .iter()
        .filter(|t| is_compute_type(t.datatype))
        .collect();
    if let Some(first) = acts.first()
        && is_quantized(first.datatype)
        && acts.iter().all(|t| t.datatype == first.datatype)
    {
        let largest = weights.iter().max_by_key(|t| t.elements());
        if largest.is_none_or(|w| w.datatype == first.datatype) {
            return first.datatype;
        }
    }
    let all: Vec<&TensorInfo> = acts.iter().chain(weights.iter()).copied().collect();
    if all.is_empty() {
        return outputs
            .iter()
            .map(|t| t.datatype)
            .find(|p| is_compute_type(*p))
            .or_else(|| outputs.first().map(|t| t.datatype))
            .unwrap_or(EnginePrecision::Unknown);
    }
    let mut totals: Vec<(EnginePrecision, u64)> = Vec::new();
    for t in &all {
        match totals.iter_mut().find(|(p, _)| *p == t.datatype) {
            Some((_, n)) => *n += t.elements(),
            None => totals.push((t.datatype, t.elements())),
        }
    }
    totals
        .iter()
        .max_by_key(|(_, n)| *n)
        .map_or(EnginePrecision::Unknown, |(p, _)| *p)
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
                ..Default::default()
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
                    // The inspector names a fused layer after its ONNX nodes, " + "-joined.
                    onnx_nodes: name
                        .split(" + ")
                        .map(str::trim)
                        .filter(|n| !n.is_empty())
                        .map(str::to_string)
                        .collect(),
                    layer_type: map
                        .get("LayerType")
                        .and_then(Value::as_str)
                        .map(str::to_string),
                    precision: format
                        .as_deref()
                        .map_or(EnginePrecision::Unknown, EnginePrecision::from_format),
                    format,
                    ..Default::default()
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
