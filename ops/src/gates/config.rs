//! Release gates of a job (`gates:` in the job file): thresholds a release must meet,
//! checked after optimizing (accuracy against the original, latency, size, structure).
//!
//! ```yaml
//! gates:
//!   min_cosine: 0.9999                  # every output
//!   max_abs: { logits: 1.0e-3, "*": 1.0e-2 }  # per output; "*" is every other output
//!   max_rel: 0.01
//!   min_topk_agreement: 0.99            # top-1; or { min: 0.99, k: 5, output: logits }
//!   max_latency_ratio: 1.05             # optimized / original (or / --baseline), medians
//!   # or { max: 1.05, quantile: 0.1 }: the ratio of 10th percentiles (busy machines)
//!   max_file_size: 10M                  # bytes, or K/M/G/T (binary units)
//!   max_nodes: 500
//!   forbid_ops: [com.microsoft, Loop]   # op types or domains, subgraphs included
//!   max_opset: 17                       # of the default ONNX domain
//! ```
//! This file holds only the data; `super` evaluates it.

use std::collections::BTreeMap;
use std::fmt;

use serde::Deserialize;
use serde::de::{self, Deserializer, MapAccess, Visitor};

/// Every gate name, in the order reports list them.
pub const GATE_NAMES: &[&str] = &[
    "min_cosine",
    "max_abs",
    "max_rel",
    "min_topk_agreement",
    "max_latency_ratio",
    "max_file_size",
    "max_nodes",
    "forbid_ops",
    "max_opset",
];

/// The key of a per-output threshold that applies to every output not named.
pub const ALL_OUTPUTS: &str = "*";

#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GatesConfig {
    /// Lowest cosine similarity per output.
    #[serde(default)]
    pub min_cosine: PerOutput,
    /// Largest absolute difference per output.
    #[serde(default)]
    pub max_abs: PerOutput,
    /// Largest relative difference per output.
    #[serde(default)]
    pub max_rel: PerOutput,
    /// Fraction of rows whose reference top-1 class is among the candidate's top k.
    #[serde(default)]
    pub min_topk_agreement: Option<TopKGate>,
    /// Largest ratio of latencies (medians, or another quantile), candidate / reference.
    #[serde(default)]
    pub max_latency_ratio: Option<LatencyGate>,
    /// Largest file size of the result (model file plus external data), as written
    /// (`10485760`, `10M`, `1.5G`).
    #[serde(default)]
    pub max_file_size: Option<SizeText>,
    /// Largest node count, subgraphs included.
    #[serde(default)]
    pub max_nodes: Option<u64>,
    /// Op types (`Loop`) or domains (`com.microsoft`) the result must not contain.
    #[serde(default)]
    pub forbid_ops: Vec<String>,
    /// Largest imported opset of the default ONNX domain.
    #[serde(default)]
    pub max_opset: Option<i64>,
}

impl GatesConfig {
    pub fn is_empty(&self) -> bool {
        *self == GatesConfig::default()
    }

    /// True when a gate needs the outputs of both models.
    pub fn has_accuracy(&self) -> bool {
        !self.min_cosine.0.is_empty()
            || !self.max_abs.0.is_empty()
            || !self.max_rel.0.is_empty()
            || self.min_topk_agreement.is_some()
    }

    pub fn has_structure(&self) -> bool {
        self.max_file_size.is_some()
            || self.max_nodes.is_some()
            || !self.forbid_ops.is_empty()
            || self.max_opset.is_some()
    }
}

/// Thresholds by output name ([`ALL_OUTPUTS`] for the outputs not named). A plain number
/// in YAML applies to every output.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct PerOutput(pub BTreeMap<String, f64>);

impl PerOutput {
    /// The threshold for `output`: its own, else the one for every output.
    pub fn for_output(&self, output: &str) -> Option<f64> {
        self.0
            .get(output)
            .or_else(|| self.0.get(ALL_OUTPUTS))
            .copied()
    }
}

impl<'de> Deserialize<'de> for PerOutput {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<PerOutput, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = PerOutput;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a number, or a map from output name (or \"*\") to a number")
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> Result<PerOutput, E> {
                Ok(PerOutput(BTreeMap::from([(ALL_OUTPUTS.to_string(), v)])))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<PerOutput, E> {
                self.visit_f64(v as f64)
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<PerOutput, E> {
                self.visit_f64(v as f64)
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<PerOutput, A::Error> {
                let mut out = BTreeMap::new();
                while let Some((k, v)) = map.next_entry::<String, f64>()? {
                    out.insert(k, v);
                }
                Ok(PerOutput(out))
            }
        }
        d.deserialize_any(V)
    }
}

/// `min_topk_agreement`: a number (top-1, every classifier output) or
/// `{ min: 0.99, k: 5, output: logits }`.
#[derive(Clone, Debug, PartialEq)]
pub struct TopKGate {
    pub min: f64,
    pub k: usize,
    /// One output; `None`: every output with a last dimension of at least 2.
    pub output: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct TopKMap {
    min: f64,
    #[serde(default)]
    k: Option<usize>,
    #[serde(default)]
    output: Option<String>,
}

impl<'de> Deserialize<'de> for TopKGate {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<TopKGate, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = TopKGate;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a fraction (top-1) or a map { min: 0.99, k: 5, output: NAME }")
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> Result<TopKGate, E> {
                Ok(TopKGate {
                    min: v,
                    k: 1,
                    output: None,
                })
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<TopKGate, E> {
                self.visit_f64(v as f64)
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<TopKGate, E> {
                self.visit_f64(v as f64)
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<TopKGate, A::Error> {
                let m = TopKMap::deserialize(de::value::MapAccessDeserializer::new(map))?;
                let k = m.k.unwrap_or(1);
                if k == 0 {
                    return Err(de::Error::custom(
                        "min_topk_agreement: k must be at least 1",
                    ));
                }
                Ok(TopKGate {
                    min: m.min,
                    k,
                    output: m.output,
                })
            }
        }
        d.deserialize_any(V)
    }
}

/// The latency quantile compared by default: the median.
pub const DEFAULT_LATENCY_QUANTILE: f64 = 0.5;

/// `max_latency_ratio`: a number (ratio of medians) or `{ max: 1.05, quantile: 0.1 }`
/// (ratio of that quantile: a low one measures runs the machine did not interrupt).
#[derive(Clone, Debug, PartialEq)]
pub struct LatencyGate {
    pub max: f64,
    pub quantile: f64,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct LatencyMap {
    max: f64,
    #[serde(default)]
    quantile: Option<f64>,
}

impl<'de> Deserialize<'de> for LatencyGate {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<LatencyGate, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = LatencyGate;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a ratio (of medians) or a map { max: 1.05, quantile: 0.1 }")
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> Result<LatencyGate, E> {
                Ok(LatencyGate {
                    max: v,
                    quantile: DEFAULT_LATENCY_QUANTILE,
                })
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<LatencyGate, E> {
                self.visit_f64(v as f64)
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<LatencyGate, E> {
                self.visit_f64(v as f64)
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<LatencyGate, A::Error> {
                let m = LatencyMap::deserialize(de::value::MapAccessDeserializer::new(map))?;
                Ok(LatencyGate {
                    max: m.max,
                    quantile: m.quantile.unwrap_or(DEFAULT_LATENCY_QUANTILE),
                })
            }
        }
        d.deserialize_any(V)
    }
}

/// A size as written, a byte count or text like `10M`; the CLI parses it.
#[derive(Clone, Debug, PartialEq)]
pub struct SizeText(pub String);

impl<'de> Deserialize<'de> for SizeText {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<SizeText, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = SizeText;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a size in bytes (10485760) or with a unit (10M, 1G)")
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<SizeText, E> {
                Ok(SizeText(v.to_string()))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<SizeText, E> {
                if v < 0 {
                    return Err(E::custom("a size cannot be negative"));
                }
                Ok(SizeText(v.to_string()))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<SizeText, E> {
                Ok(SizeText(v.to_string()))
            }
        }
        d.deserialize_any(V)
    }
}
