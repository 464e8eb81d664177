//! What an engine build is asked to do, and its checks against the TensorRT version.

use std::path::PathBuf;
use std::time::Duration;

use serde::Serialize;

use super::flavor::FlavorSpec;
use super::layers::{EngineMemory, LayerInfo, LayerSource};
use super::version::TrtVersion;
use crate::error::{Result, RuntimeError};

/// The largest builder optimization level TensorRT 10/11 accept.
pub const MAX_OPT_LEVEL: u8 = 5;

/// Min/opt/max dims of one network input. All profiles of a build go into one TensorRT
/// optimization profile (the one `trtexec --minShapes/--optShapes/--maxShapes` makes).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Profile {
    pub input: String,
    pub min: Vec<i64>,
    pub opt: Vec<i64>,
    pub max: Vec<i64>,
}

impl Profile {
    /// One fixed shape: min = opt = max.
    pub fn fixed(input: impl Into<String>, dims: Vec<i64>) -> Profile {
        Profile {
            input: input.into(),
            min: dims.clone(),
            opt: dims.clone(),
            max: dims,
        }
    }

    fn check(&self) -> Result<()> {
        let bad = |message: String| {
            Err(RuntimeError::InputShape {
                input: self.input.clone(),
                message,
            })
        };
        let rank = self.min.len();
        if self.opt.len() != rank || self.max.len() != rank {
            return bad(format!(
                "min/opt/max have ranks {}/{}/{}; give the same rank for all three",
                rank,
                self.opt.len(),
                self.max.len()
            ));
        }
        if rank > super::ffi::MAX_DIMS {
            return bad(format!(
                "rank {rank} is above TensorRT's limit of {}",
                super::ffi::MAX_DIMS
            ));
        }
        for axis in 0..rank {
            let (lo, mid, hi) = (self.min[axis], self.opt[axis], self.max[axis]);
            if lo < 0 {
                return bad(format!("dim {axis} is negative ({lo})"));
            }
            if !(lo <= mid && mid <= hi) {
                return bad(format!(
                    "dim {axis}: need min <= opt <= max, got {lo}/{mid}/{hi}"
                ));
            }
        }
        Ok(())
    }
}

/// The precision of a per-layer override (TensorRT 10 `ILayer::setPrecision`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum LayerPrecision {
    Fp32,
    Fp16,
    Bf16,
    Int8,
}

impl LayerPrecision {
    /// The spelling `trtexec --layerPrecisions` uses.
    pub fn trtexec_name(self) -> &'static str {
        match self {
            LayerPrecision::Fp32 => "fp32",
            LayerPrecision::Fp16 => "fp16",
            LayerPrecision::Bf16 => "bf16",
            LayerPrecision::Int8 => "int8",
        }
    }

    pub(crate) fn abi_code(self) -> i32 {
        match self {
            LayerPrecision::Fp32 => super::ffi::PRECISION_FP32,
            LayerPrecision::Fp16 => super::ffi::PRECISION_FP16,
            LayerPrecision::Bf16 => super::ffi::PRECISION_BF16,
            LayerPrecision::Int8 => super::ffi::PRECISION_INT8,
        }
    }
}

impl std::str::FromStr for LayerPrecision {
    type Err = RuntimeError;
    fn from_str(s: &str) -> Result<Self> {
        match s.to_ascii_lowercase().as_str() {
            "fp32" | "float32" | "float" => Ok(LayerPrecision::Fp32),
            "fp16" | "float16" | "half" => Ok(LayerPrecision::Fp16),
            "bf16" | "bfloat16" => Ok(LayerPrecision::Bf16),
            "int8" => Ok(LayerPrecision::Int8),
            other => Err(RuntimeError::InvalidArgument(format!(
                "unknown layer precision `{other}`; use fp32, fp16, bf16 or int8"
            ))),
        }
    }
}

/// One layer forced to a precision. `layer` is the TensorRT layer name, which the ONNX
/// parser takes from the ONNX node name.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LayerOverride {
    pub layer: String,
    pub precision: LayerPrecision,
}

/// TensorRT 10's weakly typed precision controls. TensorRT 11 removed all of them:
/// there, precision comes from the ONNX graph (convert it with infopt's precision passes).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Trt10Precision {
    /// `BuilderFlag::kFP16`.
    pub fp16: bool,
    /// `BuilderFlag::kBF16`.
    pub bf16: bool,
    /// `BuilderFlag::kINT8` (explicit quantization: scales from the graph's Q/DQ nodes).
    pub int8: bool,
    /// Per-layer `setPrecision` + `setOutputType`.
    pub layer_overrides: Vec<LayerOverride>,
    /// With overrides: obey them (`kOBEY_PRECISION_CONSTRAINTS`) rather than prefer them
    /// (`kPREFER_PRECISION_CONSTRAINTS`, which lets TensorRT fall back when no kernel exists).
    pub obey_constraints: bool,
}

impl Trt10Precision {
    /// True when any TensorRT-10-only control is set.
    pub fn is_set(&self) -> bool {
        self.fp16 || self.bf16 || self.int8 || !self.layer_overrides.is_empty()
    }

    /// The flags that are set, spelled as the CLI spells them (for messages).
    pub fn flag_names(&self) -> Vec<&'static str> {
        let mut out = Vec::new();
        if self.fp16 {
            out.push("--fp16");
        }
        if self.bf16 {
            out.push("--bf16");
        }
        if self.int8 {
            out.push("--int8");
        }
        if !self.layer_overrides.is_empty() {
            out.push("--layer-precision");
        }
        out
    }
}

/// Everything `build_engine` sets on the builder.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct EngineBuildConfig {
    /// `setMemoryPoolLimit(MemoryPoolType::kWORKSPACE, ..)`; `None` keeps TensorRT's
    /// default (the device's memory).
    pub workspace_bytes: Option<u64>,
    /// `setBuilderOptimizationLevel` (0..=5); `None` keeps TensorRT's default (3).
    pub opt_level: Option<u8>,
    /// Shapes of the dynamic inputs; every dynamic input needs one.
    pub profiles: Vec<Profile>,
    /// A timing cache file to start from; a file that does not exist yet starts an empty
    /// cache. The updated cache comes back in [`BuiltEngine::timing_cache_bytes`].
    pub timing_cache: Option<PathBuf>,
    /// `BuilderFlag::kERROR_ON_TIMING_CACHE_MISS`: fail instead of timing a tactic the
    /// cache lacks (reproducible builds).
    pub error_on_timing_cache_miss: bool,
    /// TensorRT 10: build strongly typed (`kSTRONGLY_TYPED`), precision from the graph.
    /// TensorRT 11 always builds strongly typed.
    pub strongly_typed: bool,
    /// TensorRT 10 only.
    pub precision: Trt10Precision,
    /// The .onnx file the bytes came from, so the parser finds external data beside it.
    pub model_path: Option<PathBuf>,
    /// TensorRT-RTX: the GPUs (SM numbers, 86 = SM 8.6) the engine is compiled for when
    /// first loaded; empty keeps its default (8.0, 8.6, 8.9, 12.0).
    pub compute_capabilities: Vec<u32>,
}

impl EngineBuildConfig {
    /// Checks the configuration against itself and against the TensorRT version that will
    /// build it. Errors are one line naming the option and the fix.
    pub fn validate(&self, flavor: &FlavorSpec, version: TrtVersion) -> Result<()> {
        if let Some(level) = self.opt_level
            && level > MAX_OPT_LEVEL
        {
            return Err(RuntimeError::InvalidArgument(format!(
                "builder optimization level {level} is out of range; use 0..={MAX_OPT_LEVEL}"
            )));
        }
        if self.workspace_bytes == Some(0) {
            return Err(RuntimeError::InvalidArgument(
                "a workspace of 0 bytes leaves TensorRT no scratch memory; give a size such as 1G, or omit it".into(),
            ));
        }
        let mut seen = std::collections::HashSet::new();
        for p in &self.profiles {
            if !seen.insert(p.input.as_str()) {
                return Err(RuntimeError::InputShape {
                    input: p.input.clone(),
                    message: "shapes given twice; give each input once".into(),
                });
            }
            p.check()?;
        }
        if self.error_on_timing_cache_miss && self.timing_cache.is_none() {
            return Err(RuntimeError::InvalidArgument(
                "erroring on timing cache misses needs a timing cache; give --timing-cache FILE"
                    .into(),
            ));
        }
        let flags = self.precision.flag_names();
        if flavor.strongly_typed_only && !flags.is_empty() {
            return Err(RuntimeError::InvalidArgument(format!(
                "{} builds strongly typed networks, so {} has no meaning there: convert the model's precision with infopt (convert-float16, convert-bfloat16, quantize-int8) and build without it",
                flavor.describe(version),
                flags.join("/")
            )));
        }
        if self.error_on_timing_cache_miss && !flavor.timing_cache {
            return Err(RuntimeError::InvalidArgument(format!(
                "{} has no timing cache (a deprecated no-op there), so --error-on-timing-cache-miss cannot hold; drop it",
                flavor.display
            )));
        }
        flavor.check_compute_capabilities(version, &self.compute_capabilities)?;
        if self.strongly_typed && !flags.is_empty() {
            return Err(RuntimeError::InvalidArgument(format!(
                "a strongly typed build takes precision from the graph; drop {} or drop --strongly-typed",
                flags.join("/")
            )));
        }
        for o in &self.precision.layer_overrides {
            if o.layer.is_empty() {
                return Err(RuntimeError::InvalidArgument(
                    "a layer precision override has an empty layer name".into(),
                ));
            }
        }
        Ok(())
    }

    /// Whether TensorRT builds this configuration strongly typed.
    pub fn builds_strongly_typed(&self, flavor: &FlavorSpec) -> bool {
        flavor.strongly_typed_only || self.strongly_typed
    }
}

/// A built engine and what TensorRT said about it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct BuiltEngine {
    /// The serialized engine (a `.plan` / `.engine` file's content).
    #[serde(skip)]
    pub bytes: Vec<u8>,
    /// Layers of the engine with their precision: from the engine inspector (with a
    /// GPU), or from the builder's detailed log (TensorRT-RTX without a GPU).
    pub layers: Vec<LayerInfo>,
    /// Where `layers` came from.
    pub layer_source: LayerSource,
    /// The memory totals the builder logged.
    pub memory: Option<EngineMemory>,
    /// What the builder logged about the engine (its `Layers:` message and totals).
    #[serde(skip)]
    pub build_log: String,
    /// The inspector's JSON as TensorRT wrote it (what `trtexec --exportLayerInfo` saves).
    #[serde(skip)]
    pub layer_json: String,
    /// Wall time of the shim's build call (parse, build, serialize, inspect).
    pub build_time: Duration,
    /// The timing cache after the build, to save for the next one.
    #[serde(skip)]
    pub timing_cache_bytes: Option<Vec<u8>>,
    /// TensorRT's warnings during the build.
    pub warnings: Vec<String>,
    /// The TensorRT that built it.
    pub trt_version: TrtVersion,
    /// Its flavour (`FlavorSpec::id`).
    pub flavor: &'static str,
    /// The compute capabilities it was built for (empty: the flavour's default).
    pub compute_capabilities: Vec<u32>,
}
