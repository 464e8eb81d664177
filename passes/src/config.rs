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
//! verify: { enabled: true, rtol: 1.0e-4, atol: 1.0e-5 }
//! ```
//! A pass with options is a one-key map: `- fold-constants: { max_tensor_bytes: 1048576 }`.
//! Unknown keys and pass names are errors with line and column.

use std::collections::BTreeMap;
use std::fmt;

use serde::Deserialize;
use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, Visitor};

use crate::pass::{Pass, PassError, Target};
use crate::registry;

/// A pass and its typed options.
#[derive(Clone, Debug, PartialEq)]
pub enum PassConfig {
    ConstantsToInitializers,
    EliminateIdentity,
    EliminateDuplicates,
    EliminateDead,
    FuseConvBn,
    FuseMatmulAdd,
    FuseConvActivation,
    FusePadConv,
    PerturbWeight,
    SimplifyReshape,
    RemoveInitializerInputs,
    FuseParallelMatmul,
    InferShapes,
    FixShapes(crate::fix_shapes::FixShapesOptions),
    FoldConstants(crate::fold_constants::FoldConstantsOptions),
}

impl PassConfig {
    pub fn name(&self) -> &'static str {
        match self {
            PassConfig::ConstantsToInitializers => "constants-to-initializers",
            PassConfig::EliminateIdentity => "eliminate-identity",
            PassConfig::EliminateDuplicates => "eliminate-duplicates",
            PassConfig::EliminateDead => "eliminate-dead",
            PassConfig::FuseConvBn => "fuse-conv-bn",
            PassConfig::FuseMatmulAdd => "fuse-matmul-add",
            PassConfig::FuseConvActivation => "fuse-conv-activation",
            PassConfig::FusePadConv => "fuse-pad-conv",
            PassConfig::PerturbWeight => "perturb-weight",
            PassConfig::SimplifyReshape => "simplify-reshape",
            PassConfig::RemoveInitializerInputs => "remove-initializer-inputs",
            PassConfig::FuseParallelMatmul => "fuse-parallel-matmul",
            PassConfig::InferShapes => "infer-shapes",
            PassConfig::FixShapes(_) => "fix-shapes",
            PassConfig::FoldConstants(_) => "fold-constants",
        }
    }

    pub fn build(&self) -> Box<dyn Pass> {
        match self {
            PassConfig::ConstantsToInitializers => {
                Box::new(crate::constants_to_initializers::ConstantsToInitializers)
            }
            PassConfig::EliminateIdentity => Box::new(crate::eliminate_identity::EliminateIdentity),
            PassConfig::EliminateDuplicates => {
                Box::new(crate::eliminate_duplicates::EliminateDuplicates)
            }
            PassConfig::EliminateDead => Box::new(crate::eliminate_dead::EliminateDead),
            PassConfig::FuseConvBn => Box::new(crate::fuse_conv_bn::FuseConvBn),
            PassConfig::FuseMatmulAdd => Box::new(crate::fuse_matmul_add::FuseMatmulAdd),
            PassConfig::FuseConvActivation => {
                Box::new(crate::fuse_conv_activation::FuseConvActivation)
            }
            PassConfig::FusePadConv => Box::new(crate::fuse_pad_conv::FusePadConv),
            PassConfig::PerturbWeight => Box::new(crate::perturb_weight::PerturbWeight),
            PassConfig::SimplifyReshape => Box::new(crate::simplify_reshape::SimplifyReshape),
            PassConfig::RemoveInitializerInputs => {
                Box::new(crate::remove_initializer_inputs::RemoveInitializerInputs)
            }
            PassConfig::FuseParallelMatmul => {
                Box::new(crate::fuse_parallel_matmul::FuseParallelMatmul)
            }
            PassConfig::InferShapes => Box::new(crate::infer_shapes::InferShapes),
            PassConfig::FixShapes(o) => {
                Box::new(crate::fix_shapes::FixShapes { options: o.clone() })
            }
            PassConfig::FoldConstants(o) => {
                Box::new(crate::fold_constants::FoldConstants::new(o.clone()))
            }
        }
    }

    /// The pass with default options, by name.
    pub fn from_name(name: &str) -> Result<PassConfig, String> {
        let info = registry::find(name).ok_or_else(|| registry::unknown_pass_message(name))?;
        if info.hidden
            && std::env::var(crate::perturb_weight::TEST_PASSES_ENV).as_deref() != Ok("1")
        {
            return Err(registry::unknown_pass_message(name));
        }
        Ok((info.default_config)())
    }
}

/// Options of a pass that takes none: `{}` or nothing.
#[derive(Deserialize, Debug, Default)]
#[serde(deny_unknown_fields)]
struct NoOptions {}

/// Deserializes the options of the pass named `name`.
struct OptionsSeed<'a> {
    name: &'a str,
}

impl<'de> DeserializeSeed<'de> for OptionsSeed<'_> {
    type Value = PassConfig;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<PassConfig, D::Error> {
        let base = PassConfig::from_name(self.name).map_err(de::Error::custom)?;
        match base {
            // Passes without options.
            PassConfig::ConstantsToInitializers
            | PassConfig::EliminateIdentity
            | PassConfig::EliminateDuplicates
            | PassConfig::EliminateDead
            | PassConfig::FuseConvBn
            | PassConfig::FuseMatmulAdd
            | PassConfig::FuseConvActivation
            | PassConfig::FusePadConv
            | PassConfig::RemoveInitializerInputs
            | PassConfig::FuseParallelMatmul
            | PassConfig::SimplifyReshape
            | PassConfig::PerturbWeight
            | PassConfig::InferShapes => {
                Option::<NoOptions>::deserialize(d)?;
                Ok(base)
            }
            PassConfig::FixShapes(_) => Ok(PassConfig::FixShapes(
                Option::<crate::fix_shapes::FixShapesOptions>::deserialize(d)?.unwrap_or_default(),
            )),
            PassConfig::FoldConstants(_) => Ok(PassConfig::FoldConstants(
                Option::<crate::fold_constants::FoldConstantsOptions>::deserialize(d)?
                    .unwrap_or_default(),
            )),
        }
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

fn default_true() -> bool {
    true
}
fn default_rtol() -> f64 {
    1e-4
}
fn default_atol() -> f64 {
    1e-5
}

/// How `optimize` checks the result against the original.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct VerifyConfig {
    #[serde(default = "default_true")]
    pub enabled: bool,
    #[serde(default = "default_rtol")]
    pub rtol: f64,
    #[serde(default = "default_atol")]
    pub atol: f64,
    /// Seed of the generated inputs.
    #[serde(default)]
    pub seed: u64,
}

impl Default for VerifyConfig {
    fn default() -> Self {
        VerifyConfig {
            enabled: true,
            rtol: default_rtol(),
            atol: default_atol(),
            seed: 0,
        }
    }
}

#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct PipelineConfig {
    pub version: u32,
    #[serde(default)]
    pub target: Target,
    pub passes: Vec<Step>,
    #[serde(default)]
    pub verify: VerifyConfig,
    /// Fixed input shapes, `name: [1, 3, 224, 224]`.
    #[serde(default)]
    pub inputs: BTreeMap<String, Vec<i64>>,
    /// Values of symbolic dims, `batch: 1`.
    #[serde(default)]
    pub symbols: BTreeMap<String, i64>,
}

pub const PIPELINE_VERSION: u32 = 1;

impl PipelineConfig {
    /// Parses a pipeline. `origin` names the source in errors (a file path).
    pub fn from_yaml(text: &str, origin: &str) -> Result<PipelineConfig, PassError> {
        let options = serde_saphyr::options! { strict_booleans: true };
        let config: PipelineConfig =
            serde_saphyr::from_str_with_options(text, options).map_err(|e| {
                // serde-saphyr adds a source snippet after the first line; errors
                // are one line, and the first one carries line and column.
                let msg = e.to_string();
                let first = msg.lines().next().unwrap_or("").trim();
                let first = first.strip_prefix("error: ").unwrap_or(first);
                PassError::Config(format!("{origin}: {first}"))
            })?;
        if config.version != PIPELINE_VERSION {
            return Err(PassError::Config(format!(
                "{origin}: pipeline version {} is not supported; this infopt reads version {PIPELINE_VERSION}",
                config.version
            )));
        }
        Ok(config)
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
            verify: VerifyConfig::default(),
            inputs: BTreeMap::new(),
            symbols: BTreeMap::new(),
        })
    }

    /// Every pass name in the pipeline, in order.
    pub fn pass_names(&self) -> Vec<&'static str> {
        let mut out = Vec::new();
        for s in &self.passes {
            match s {
                Step::Pass(p) => out.push(p.name()),
                Step::FixedPoint { passes, .. } => out.extend(passes.iter().map(|p| p.name())),
            }
        }
        out
    }
}
