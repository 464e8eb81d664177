//! The half type a conversion targets, the pass's options, and the pass
//! itself: what every other file of the pass reads.


use infopt_ir::DataType;

use crate::precision::Precision;

/// The half type a conversion targets.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Half {
    F16,
    Bf16,
}

impl Half {
    pub fn dtype(self) -> DataType {
        match self {
            Half::F16 => DataType::Float16,
            Half::Bf16 => DataType::Bfloat16,
        }
    }

    pub fn precision(self) -> Precision {
        match self {
            Half::F16 => Precision::Fp16,
            Half::Bf16 => Precision::Bf16,
        }
    }

    pub(super) fn pass_name(self) -> &'static str {
        match self {
            Half::F16 => "convert-float16",
            Half::Bf16 => "convert-bfloat16",
        }
    }

    pub(super) fn type_name(self) -> &'static str {
        match self {
            Half::F16 => "float16",
            Half::Bf16 => "bfloat16",
        }
    }

    /// Suffix of derived value names (`w` → `w.fp16`).
    pub(super) fn suffix(self) -> &'static str {
        self.precision().as_str()
    }
}

fn default_true() -> bool {
    true
}

/// Options of `convert-float16` / `convert-bfloat16`.
#[derive(Clone, Debug, PartialEq, Eq, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConvertOptions {
    /// Keep graph inputs and outputs float32 (one Cast each): users feed float32.
    #[serde(default = "default_true")]
    pub keep_io_types: bool,
    /// Also convert the `com.microsoft` ops the onnxruntime target's fusions
    /// emit (Attention, SkipLayerNormalization, BiasGelu, FastGelu, Gelu, QuickGelu) to
    /// float16: ONNX Runtime's CUDA provider has float16 kernels for them, its
    /// CPU provider float32 ones only (verify such a model with `--backend ort
    /// --ep cuda`). Off: they stay float32 islands with Casts around them.
    #[serde(default)]
    pub contrib_ops: bool,
}

impl Default for ConvertOptions {
    fn default() -> Self {
        ConvertOptions {
            keep_io_types: true,
            contrib_ops: false,
        }
    }
}


/// The pass, for either half type.
pub struct ConvertFloat {
    pub to: Half,
    pub options: ConvertOptions,
}
