//! Per-layer precision: one map for every backend.
//!
//! ```yaml
//! precision:
//!   default: fp16              # fp32 | fp16 | bf16 | int8
//!   overrides:
//!     - { op: Softmax, to: fp32 }
//!     - { name: "/head/.*", to: fp32 }   # node name, regex (full match)
//! ```
//! The pipeline hands the map to the passes through `cx.side`;
//! `convert-float16` / `convert-bfloat16` read it to choose the nodes they
//! convert, and `quantize-int8` reads it to choose the layers it quantizes.
//! On the command line: `--precision NAME_OR_OP=fp32` (a bare op type matches
//! the op, anything else a node name, exactly or as a regex).

pub mod check;
mod pipeline;

// Applying precision options to a pipeline is in pipeline.rs, above the
// pipeline types (config.rs), which read the map from this file.
pub use pipeline::{ApplyError, apply_to_pipeline, converts_to_half};

use std::fmt;

use infopt_ir::Node;
use serde::Deserialize;

/// The precision a layer runs in.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Precision {
    Fp32,
    Fp16,
    Bf16,
    Int8,
}

pub const PRECISION_NAMES: [&str; 4] = ["fp32", "fp16", "bf16", "int8"];

impl Precision {
    pub fn as_str(self) -> &'static str {
        match self {
            Precision::Fp32 => "fp32",
            Precision::Fp16 => "fp16",
            Precision::Bf16 => "bf16",
            Precision::Int8 => "int8",
        }
    }

    /// Parses `fp16` (also `float16`, `half`, ...); the error says "did you mean".
    pub fn parse(text: &str) -> Result<Precision, String> {
        let t = text.trim().to_ascii_lowercase();
        let p = match t.as_str() {
            "fp32" | "float32" | "float" | "f32" => Precision::Fp32,
            "fp16" | "float16" | "half" | "f16" => Precision::Fp16,
            "bf16" | "bfloat16" => Precision::Bf16,
            "int8" | "i8" => Precision::Int8,
            _ => {
                let hint = crate::suggest::closest(&t, &PRECISION_NAMES)
                    .map(|n| format!("did you mean '{n}'? "))
                    .unwrap_or_default();
                return Err(format!(
                    "unknown precision '{text}'; {hint}valid: {}",
                    PRECISION_NAMES.join(", ")
                ));
            }
        };
        Ok(p)
    }
}

impl fmt::Display for Precision {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What an override matches.
#[derive(Clone, Debug)]
pub enum Selector {
    /// An op type of the default domain (`Softmax`).
    Op(String),
    /// A node name, exactly or as a regex matching the whole name.
    Name { text: String, regex: regex::Regex },
    /// Exactly this node name (no regex): how tools address a node they measured.
    Exact(String),
}

impl PartialEq for Selector {
    fn eq(&self, other: &Selector) -> bool {
        match (self, other) {
            (Selector::Op(a), Selector::Op(b)) => a == b,
            (Selector::Name { text: a, .. }, Selector::Name { text: b, .. }) => a == b,
            (Selector::Exact(a), Selector::Exact(b)) => a == b,
            _ => false,
        }
    }
}

impl Selector {
    /// A node-name selector; the regex must match the whole name.
    pub fn name(text: &str) -> Result<Selector, String> {
        let regex = regex::Regex::new(&format!("^(?:{text})$")).map_err(|e| {
            format!(
                "name pattern '{text}' is not a valid regex: {}",
                first_line(&e.to_string())
            )
        })?;
        Ok(Selector::Name {
            text: text.to_string(),
            regex,
        })
    }

    /// A selector of exactly one node name (regex characters in the name
    /// are literal): what tools use to address a node they measured.
    pub fn exact(name: &str) -> Selector {
        Selector::Exact(name.to_string())
    }

    /// An op selector; unknown op types get "did you mean".
    pub fn op(text: &str) -> Result<Selector, String> {
        if !KNOWN_OPS.contains(&text) {
            let hint = crate::suggest::closest(text, KNOWN_OPS)
                .map(|n| format!("did you mean '{n}'? "))
                .unwrap_or_default();
            return Err(format!(
                "unknown op type '{text}' in a precision override; {hint}(use `name:` for a node name)"
            ));
        }
        Ok(Selector::Op(text.to_string()))
    }

    pub fn matches(&self, node: &Node) -> bool {
        match self {
            Selector::Op(op) => node.is(op),
            Selector::Name { text, regex } => node
                .name
                .as_deref()
                .is_some_and(|n| n == text || regex.is_match(n)),
            Selector::Exact(name) => node.name.as_deref() == Some(name.as_str()),
        }
    }
}

impl Selector {
    /// The selector as written: the op type, the name or the regex.
    pub fn source_text(&self) -> &str {
        match self {
            Selector::Op(op) => op,
            Selector::Name { text, .. } => text,
            Selector::Exact(name) => name,
        }
    }
}

impl fmt::Display for Selector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Selector::Op(op) => write!(f, "op {op}"),
            Selector::Name { text, .. } => write!(f, "name '{text}'"),
            Selector::Exact(name) => write!(f, "node '{name}'"),
        }
    }
}

fn first_line(s: &str) -> String {
    s.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect::<Vec<_>>()
        .join(" ")
}

#[derive(Clone, Debug, PartialEq)]
pub struct Override {
    pub selector: Selector,
    pub to: Precision,
    /// Why the override exists, when a tool (not the user) added it: the
    /// automatic float32 islands put their measurement here, and the pass
    /// that obeys the override reports it.
    pub why: Option<String>,
}

/// The precision of every node: the first matching override, else `default`.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct PrecisionMap {
    /// `None`: the precision of the pass that reads the map (a
    /// `convert-float16` step converts what no override keeps).
    pub default: Option<Precision>,
    pub overrides: Vec<Override>,
}

impl PrecisionMap {
    /// The precision of `node` (fp32 when nothing says otherwise).
    pub fn precision_of(&self, node: &Node) -> Precision {
        self.override_for(node)
            .map(|o| o.to)
            .or(self.default)
            .unwrap_or(Precision::Fp32)
    }

    /// The first override matching `node`.
    pub fn override_for(&self, node: &Node) -> Option<&Override> {
        self.overrides.iter().find(|o| o.selector.matches(node))
    }

    /// The override that keeps `node` in a float type, out of INT8
    /// (`quantize-int8` leaves it float; the INT8 search never offers it).
    pub fn kept_float(&self, node: &Node) -> Option<&Override> {
        self.override_for(node).filter(|o| o.to != Precision::Int8)
    }

    /// Whether the user's map fixes the precision of the node named `name`
    /// in `g` (an override without a tool's `why`, to any precision): an
    /// accuracy search never offers it as a candidate.
    pub fn fixes(&self, g: &infopt_ir::Graph, name: &str) -> bool {
        g.find_node(name)
            .and_then(|id| self.override_for(g.node(id)))
            .is_some_and(|o| o.why.is_none())
    }

    /// The nodes of `g` the map keeps out of INT8, as `name (fp32)`, in
    /// graph order: what reports list as kept by the user.
    pub fn kept_float_nodes(&self, g: &infopt_ir::Graph) -> Vec<String> {
        g.nodes()
            .filter_map(|(_, n)| {
                self.kept_float(n)
                    .map(|o| format!("{} ({})", n.name_or_op(), o.to))
            })
            .collect()
    }

    /// Adds a command-line `NAME_OR_OP=PRECISION`; it wins over the YAML's
    /// overrides (it is matched first).
    pub fn add_arg(&mut self, arg: &str) -> Result<(), String> {
        let o = parse_override_arg(arg)?;
        self.overrides.insert(0, o);
        Ok(())
    }
}

/// Parses a command-line override `NAME_OR_OP=fp32`: a bare op type (as
/// listed in [`KNOWN_OPS`]) selects the op; anything else a node name (exact
/// or regex). The error is `'ARG': what is wrong`; the caller puts the name
/// of its option in front (`--precision 'ARG': ...`).
pub fn parse_override_arg(arg: &str) -> Result<Override, String> {
    parse_override(arg).map_err(|why| format!("'{arg}': {why}"))
}

/// [`parse_override_arg`], with the error saying only what is wrong.
pub(crate) fn parse_override(arg: &str) -> Result<Override, String> {
    let usage = "expected NAME_OR_OP=PRECISION (e.g. Softmax=fp32 or '/head/.*=fp32')";
    let (sel, to) = arg.rsplit_once('=').ok_or_else(|| usage.to_string())?;
    let sel = sel.trim();
    if sel.is_empty() {
        return Err(format!("nothing before '='; {usage}"));
    }
    let to = Precision::parse(to)?;
    let selector = if KNOWN_OPS.contains(&sel) {
        Selector::Op(sel.to_string())
    } else {
        Selector::name(sel)?
    };
    Ok(Override {
        selector,
        to,
        why: None,
    })
}

/// The passes that read the precision map.
pub const PRECISION_PASSES: [&str; 3] = ["convert-float16", "convert-bfloat16", "quantize-int8"];

/// YAML form of one override: `{ op: X, to: P }` or `{ name: RE, to: P }`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct OverrideSpec {
    #[serde(default)]
    op: Option<String>,
    #[serde(default)]
    name: Option<String>,
    to: String,
}

impl<'de> Deserialize<'de> for Override {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Override, D::Error> {
        use serde::de::Error;
        let o = OverrideSpec::deserialize(d)?;
        let to = Precision::parse(&o.to).map_err(D::Error::custom)?;
        let selector = match (o.op, o.name) {
            (Some(op), None) => Selector::op(&op).map_err(D::Error::custom)?,
            (None, Some(name)) => Selector::name(&name).map_err(D::Error::custom)?,
            _ => {
                return Err(D::Error::custom(
                    "a precision override has exactly one of `op:` or `name:`",
                ));
            }
        };
        Ok(Override {
            selector,
            to,
            why: None,
        })
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct MapSpec {
    #[serde(default)]
    default: Option<String>,
    #[serde(default)]
    overrides: Vec<Override>,
}

impl<'de> Deserialize<'de> for PrecisionMap {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<PrecisionMap, D::Error> {
        use serde::de::Error;
        let spec = MapSpec::deserialize(d)?;
        let default = spec
            .default
            .as_deref()
            .map(Precision::parse)
            .transpose()
            .map_err(D::Error::custom)?;
        Ok(PrecisionMap {
            default,
            overrides: spec.overrides,
        })
    }
}

/// Op types of the default ONNX domain (for "did you mean" and for telling
/// an op from a node name on the command line).
pub const KNOWN_OPS: &[&str] = &[
    "Abs",
    "Acos",
    "Acosh",
    "Add",
    "AffineGrid",
    "And",
    "ArgMax",
    "ArgMin",
    "Asin",
    "Asinh",
    "Atan",
    "Atanh",
    "Attention",
    "AveragePool",
    "BatchNormalization",
    "Bernoulli",
    "BitShift",
    "BitwiseAnd",
    "BitwiseNot",
    "BitwiseOr",
    "BitwiseXor",
    "BlackmanWindow",
    "Cast",
    "CastLike",
    "Ceil",
    "Celu",
    "CenterCropPad",
    "Clip",
    "Col2Im",
    "Compress",
    "Concat",
    "ConcatFromSequence",
    "Constant",
    "ConstantOfShape",
    "Conv",
    "ConvInteger",
    "ConvTranspose",
    "Cos",
    "Cosh",
    "CumSum",
    "DFT",
    "DeformConv",
    "DepthToSpace",
    "DequantizeLinear",
    "Det",
    "Div",
    "Dropout",
    "DynamicQuantizeLinear",
    "Einsum",
    "Elu",
    "Equal",
    "Erf",
    "Exp",
    "Expand",
    "EyeLike",
    "Flatten",
    "Floor",
    "GRU",
    "Gather",
    "GatherElements",
    "GatherND",
    "Gelu",
    "Gemm",
    "GlobalAveragePool",
    "GlobalLpPool",
    "GlobalMaxPool",
    "Greater",
    "GreaterOrEqual",
    "GridSample",
    "GroupNormalization",
    "HammingWindow",
    "HannWindow",
    "HardSigmoid",
    "HardSwish",
    "Hardmax",
    "Identity",
    "If",
    "ImageDecoder",
    "InstanceNormalization",
    "IsInf",
    "IsNaN",
    "LRN",
    "LSTM",
    "LayerNormalization",
    "LeakyRelu",
    "Less",
    "LessOrEqual",
    "Log",
    "LogSoftmax",
    "Loop",
    "LpNormalization",
    "LpPool",
    "MatMul",
    "MatMulInteger",
    "Max",
    "MaxPool",
    "MaxRoiPool",
    "MaxUnpool",
    "Mean",
    "MeanVarianceNormalization",
    "MelWeightMatrix",
    "Min",
    "Mish",
    "Mod",
    "Mul",
    "Multinomial",
    "Neg",
    "NegativeLogLikelihoodLoss",
    "NonMaxSuppression",
    "NonZero",
    "Not",
    "OneHot",
    "Optional",
    "OptionalGetElement",
    "OptionalHasElement",
    "Or",
    "PRelu",
    "Pad",
    "Pow",
    "QLinearConv",
    "QLinearMatMul",
    "QuantizeLinear",
    "RMSNormalization",
    "RNN",
    "RandomNormal",
    "RandomNormalLike",
    "RandomUniform",
    "RandomUniformLike",
    "Range",
    "Reciprocal",
    "ReduceL1",
    "ReduceL2",
    "ReduceLogSum",
    "ReduceLogSumExp",
    "ReduceMax",
    "ReduceMean",
    "ReduceMin",
    "ReduceProd",
    "ReduceSum",
    "ReduceSumSquare",
    "RegexFullMatch",
    "Relu",
    "Reshape",
    "Resize",
    "ReverseSequence",
    "RoiAlign",
    "RotaryEmbedding",
    "Round",
    "STFT",
    "Scan",
    "Scatter",
    "ScatterElements",
    "ScatterND",
    "Selu",
    "SequenceAt",
    "SequenceConstruct",
    "SequenceEmpty",
    "SequenceErase",
    "SequenceInsert",
    "SequenceLength",
    "SequenceMap",
    "Shape",
    "Shrink",
    "Sigmoid",
    "Sign",
    "Sin",
    "Sinh",
    "Size",
    "Slice",
    "Softmax",
    "SoftmaxCrossEntropyLoss",
    "Softplus",
    "Softsign",
    "SpaceToDepth",
    "Split",
    "SplitToSequence",
    "Sqrt",
    "Squeeze",
    "StringConcat",
    "StringNormalizer",
    "StringSplit",
    "Sub",
    "Sum",
    "Swish",
    "Tan",
    "Tanh",
    "TensorScatter",
    "TfIdfVectorizer",
    "ThresholdedRelu",
    "Tile",
    "TopK",
    "Transpose",
    "Trilu",
    "Unique",
    "Unsqueeze",
    "Upsample",
    "Where",
    "Xor",
];

#[cfg(test)]
mod tests {
    use super::*;

    fn node(op: &str, name: &str) -> Node {
        Node {
            name: Some(name.into()),
            ..Node::new(op)
        }
    }

    #[test]
    fn overrides_match_op_exact_name_and_full_regex() {
        let mut m = PrecisionMap {
            default: Some(Precision::Fp16),
            overrides: vec![],
        };
        m.add_arg("Softmax=fp32").unwrap();
        m.add_arg("/head/.*=fp32").unwrap();
        m.add_arg("layer.1=int8").unwrap();
        assert_eq!(m.precision_of(&node("Softmax", "s")), Precision::Fp32);
        assert_eq!(m.precision_of(&node("MatMul", "/head/mm")), Precision::Fp32);
        // Full match: a prefix is not enough.
        assert_eq!(
            m.precision_of(&node("MatMul", "x/head/mm")),
            Precision::Fp16
        );
        assert_eq!(m.precision_of(&node("MatMul", "layer.1")), Precision::Int8);
        assert_eq!(m.precision_of(&node("MatMul", "layer_1")), Precision::Int8);
        assert_eq!(m.precision_of(&node("Relu", "r")), Precision::Fp16);
        assert_eq!(
            PrecisionMap::default().precision_of(&node("Relu", "r")),
            Precision::Fp32
        );
    }

    #[test]
    fn mistakes_are_one_line_with_a_hint() {
        let e = Precision::parse("fp61").unwrap_err();
        assert!(e.contains("did you mean 'fp16'"), "{e}");
        let e = parse_override_arg("Softmax=fp33").unwrap_err();
        assert!(
            e.contains("did you mean 'fp32'") && e.contains("Softmax=fp33"),
            "{e}"
        );
        let e = Selector::op("Sofmax").unwrap_err();
        assert!(e.contains("did you mean 'Softmax'"), "{e}");
        let e = parse_override_arg("([=fp32").unwrap_err();
        assert!(e.contains("regex") && !e.contains('\n'), "{e}");
        assert!(
            parse_override_arg("Softmax")
                .unwrap_err()
                .contains("expected")
        );
    }
}
