//! Pipelines in YAML.
//!
//! ```yaml
//! version: 1
//! target: portable            # portable | onnxruntime | tensorrt
//! passes:
//!   - constants-to-initializers
//!   - fixed-point:              # repeat until no pass changes anything
//!       max_iterations: 8
//!       passes: [eliminate-identity, eliminate-dead]
//! verify: { enabled: true, rtol: 1.0e-4, atol: 1.0e-5 }   # the job's, read by its runner
//! precision:                  # per-layer precision (see precision.rs)
//!   default: fp16
//!   overrides: [{ op: Softmax, to: fp32 }]
//! ```
//! A pass with options is a one-key map: `- fold-constants: { max_tensor_bytes: 1048576 }`.
//! Unknown keys and pass names are errors with line and column.

use std::collections::BTreeMap;
use std::fmt;

use serde::Deserialize;
use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, Visitor};

use crate::pass::{PassError, Target};
use crate::pass_info::PassInfo;
use crate::registry;
// `PassConfig` is defined in pass_info.rs, beside the registry entry it
// points at; re-exported here, where callers have always found it.
pub use crate::pass_info::PassConfig;

impl PassConfig {
    /// The pass with default options, by name.
    pub fn from_name(name: &str) -> Result<PassConfig, String> {
        Ok(usable(name)?.default_config())
    }
}

/// The registry entry of a pass the user may name.
fn usable(name: &str) -> Result<&'static PassInfo, String> {
    let info = registry::find(name).ok_or_else(|| registry::unknown_pass_message(name))?;
    if info.hidden && std::env::var(crate::pass_info::TEST_PASSES_ENV).as_deref() != Ok("1") {
        return Err(registry::unknown_pass_message(name));
    }
    Ok(info)
}

/// Deserializes the options of the pass named `name`.
struct OptionsSeed<'a> {
    name: &'a str,
}

impl<'de> DeserializeSeed<'de> for OptionsSeed<'_> {
    type Value = PassConfig;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<PassConfig, D::Error> {
        let info = usable(self.name).map_err(de::Error::custom)?;
        let mut erased = <dyn erased_serde::Deserializer>::erase(d);
        (info.parse)(Some(&mut erased)).map_err(de::Error::custom)
    }
}

/// One entry of `passes:`.
#[derive(Clone, Debug, PartialEq)]
pub enum Step {
    Pass(PassConfig),
    FixedPoint {
        max_iterations: usize,
        passes: Vec<PassConfig>,
    },
}

pub const DEFAULT_MAX_ITERATIONS: usize = 16;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FixedPointSpec {
    #[serde(default)]
    max_iterations: Option<usize>,
    passes: Vec<Step>,
}

impl<'de> Deserialize<'de> for Step {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Step, D::Error> {
        struct StepVisitor;
        impl<'de> Visitor<'de> for StepVisitor {
            type Value = Step;

            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a pass name, a one-key map `pass-name: {options}`, or `fixed-point: {passes: [...]}`")
            }

            fn visit_str<E: de::Error>(self, name: &str) -> Result<Step, E> {
                if name == "fixed-point" {
                    return Err(E::custom(
                        "`fixed-point` needs a map: `fixed-point: { passes: [...] }`",
                    ));
                }
                PassConfig::from_name(name)
                    .map(Step::Pass)
                    .map_err(E::custom)
            }

            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Step, A::Error> {
                let key: String = map.next_key()?.ok_or_else(|| {
                    de::Error::custom("empty map: expected a pass name as the key")
                })?;
                let step = if key == "fixed-point" {
                    let spec: FixedPointSpec = map.next_value()?;
                    let mut passes = Vec::new();
                    for s in spec.passes {
                        match s {
                            Step::Pass(p) => passes.push(p),
                            Step::FixedPoint { .. } => {
                                return Err(de::Error::custom(
                                    "fixed-point groups cannot be nested",
                                ));
                            }
                        }
                    }
                    let max_iterations = spec.max_iterations.unwrap_or(DEFAULT_MAX_ITERATIONS);
                    if max_iterations == 0 {
                        return Err(de::Error::custom("max_iterations must be at least 1"));
                    }
                    Step::FixedPoint {
                        max_iterations,
                        passes,
                    }
                } else {
                    Step::Pass(map.next_value_seed(OptionsSeed { name: &key })?)
                };
                if let Some(extra) = map.next_key::<String>()? {
                    return Err(de::Error::custom(format!(
                        "a pass entry has exactly one key ('{key}'); '{extra}' belongs in a separate list item or inside its options"
                    )));
                }
                Ok(step)
            }
        }
        d.deserialize_any(StepVisitor)
    }
}

/// A pipeline: the passes and what they read (target, fixed shapes,
/// precision map).
#[derive(Clone, Debug, PartialEq)]
pub struct PipelineConfig {
    pub version: u32,
    pub target: Target,
    pub passes: Vec<Step>,
    /// Fixed input shapes, `name: [1, 3, 224, 224]`.
    pub inputs: BTreeMap<String, Vec<i64>>,
    /// Values of symbolic dims, `batch: 1`.
    pub symbols: BTreeMap<String, i64>,
    /// Per-layer precision (`precision: {default: fp16, overrides: [...]}`),
    /// handed to the passes through `cx.side`.
    pub precision: Option<crate::precision::PrecisionMap>,
}

/// A job file as the pipeline reads it. The job's own sections, `verify:`
/// and `gates:`, belong to whoever runs the job (verification and release
/// gates are no business of the passes): they are accepted here, so that
/// one file holds both and a misspelt key is still refused, and skipped
/// unread. Fields in the order the file documents them (serde's "expected
/// one of" lists them so).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct JobFileView {
    version: u32,
    #[serde(default)]
    target: Target,
    passes: Vec<Step>,
    #[serde(default, rename = "verify")]
    _verify: de::IgnoredAny,
    #[serde(default)]
    inputs: BTreeMap<String, Vec<i64>>,
    #[serde(default)]
    symbols: BTreeMap<String, i64>,
    #[serde(default, rename = "gates")]
    _gates: de::IgnoredAny,
    #[serde(default)]
    precision: Option<crate::precision::PrecisionMap>,
}

pub const PIPELINE_VERSION: u32 = 1;

impl PipelineConfig {
    /// Parses the pipeline of a job file (the `verify:` and `gates:`
    /// sections are the job's: see [`parse_yaml`] for them). `origin` names
    /// the source in errors (a file path).
    pub fn from_yaml(text: &str, origin: &str) -> Result<PipelineConfig, PassError> {
        let file: JobFileView = parse_yaml(text, origin)?;
        if file.version != PIPELINE_VERSION {
            return Err(PassError::Config(format!(
                "{origin}: pipeline version {} is not supported; this infopt reads version {PIPELINE_VERSION}",
                file.version
            )));
        }
        Ok(PipelineConfig {
            version: file.version,
            target: file.target,
            passes: file.passes,
            inputs: file.inputs,
            symbols: file.symbols,
            precision: file.precision,
        })
    }

    /// A pipeline made of the named passes, in order.
    pub fn from_pass_names(names: &[String], target: Target) -> Result<PipelineConfig, PassError> {
        let passes = names
            .iter()
            .map(|n| {
                PassConfig::from_name(n.trim())
                    .map(Step::Pass)
                    .map_err(PassError::Config)
            })
            .collect::<Result<_, _>>()?;
        Ok(PipelineConfig {
            version: PIPELINE_VERSION,
            target,
            passes,
            inputs: BTreeMap::new(),
            symbols: BTreeMap::new(),
            precision: None,
        })
    }

    /// Every pass name in the pipeline, in order.
    pub fn pass_names(&self) -> Vec<&'static str> {
        self.pass_configs().map(|p| p.name()).collect()
    }

    /// Every pass of the pipeline, those inside fixed-point groups included, in order.
    pub fn pass_configs(&self) -> impl Iterator<Item = &PassConfig> {
        self.passes.iter().flat_map(|step| match step {
            Step::Pass(p) => std::slice::from_ref(p).iter(),
            Step::FixedPoint { passes, .. } => passes.iter(),
        })
    }

    /// [`pass_configs`](Self::pass_configs), to change their options.
    pub fn pass_configs_mut(&mut self) -> impl Iterator<Item = &mut PassConfig> {
        self.passes.iter_mut().flat_map(|step| match step {
            Step::Pass(p) => std::slice::from_mut(p).iter_mut(),
            Step::FixedPoint { passes, .. } => passes.iter_mut(),
        })
    }
}

/// Reads YAML (strict booleans) into `T`, with the one-line errors every
/// section of a job file gives: the first line of the parser's message
/// (line and column), "did you mean" for a misspelt key, `origin` first.
pub fn parse_yaml<T: serde::de::DeserializeOwned>(
    text: &str,
    origin: &str,
) -> Result<T, PassError> {
    let options = serde_saphyr::options! { strict_booleans: true };
    serde_saphyr::from_str_with_options(text, options).map_err(|e| {
        // serde-saphyr adds a source snippet after the first line; errors
        // are one line, and the first one carries line and column.
        let msg = e.to_string();
        let first = msg.lines().next().unwrap_or("").trim();
        let first = first.strip_prefix("error: ").unwrap_or(first);
        PassError::Config(format!(
            "{origin}: {}",
            crate::suggest::suggest_field(first)
        ))
    })
}
