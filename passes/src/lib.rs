//! infopt passes: the `Pass` trait, the registry, YAML pipelines, the driver,
//! and one file per pass.

pub mod config;
pub mod driver;
pub mod panic_guard;
pub mod par;
pub mod pass;
pub mod pass_info;
pub mod pattern;
pub mod pipeline_edit;
pub mod precision;
pub mod registry;
pub mod rule;
pub mod suggest;
pub mod util;

pub mod attention_pattern;
pub mod branch_check;
pub(crate) mod fold_fill;
pub mod gemm_bias;
pub mod matmul_nd_gemm;
pub mod redundant_ops;
pub mod reshape_sink;
pub mod scale_into_weights;

/// Every built-in pass, one line each, in the order a default pipeline would
/// run them: `mod` of the pass's file plus its registry entry (the file
/// declares the entry itself with [`register_pass!`]).
macro_rules! builtin_passes {
    ($($module:ident),* $(,)?) => {
        $(pub mod $module;)*

        /// The built-in passes' registry entries, in pipeline order.
        pub(crate) fn builtin_passes() -> &'static [&'static pass_info::PassInfo] {
            &[$(&$module::INFO),*]
        }
    };
}

builtin_passes! {
    remove_initializer_inputs,
    constants_to_initializers,
    fix_shapes,
    upgrade_opset,
    infer_shapes,
    fold_constants,
    simplify_reshape,
    eliminate_identity,
    eliminate_duplicates,
    fuse_layer_norm,
    fuse_rms_norm,
    fuse_gelu,
    fuse_activation_patterns,
    unflatten_gemm,
    fuse_ort_attention,
    fuse_attention,
    fuse_embed_layer_norm,
    fuse_skip_layer_norm,
    fuse_bias_gelu,
    fuse_quick_gelu,
    fuse_pad_conv,
    fuse_conv_bn,
    fuse_parallel_matmul,
    fuse_slices_to_split,
    fuse_space_to_depth,
    lower_prelu,
    lower_mish,
    fuse_matmul_add,
    fuse_conv_activation,
    eliminate_dead,
    convert_float16,
    convert_bfloat16,
    perturb_weight,
}

#[doc(hidden)]
pub use erased_serde as __erased_serde;

pub use config::{PassConfig, PipelineConfig, Step};
pub use driver::{DriverOptions, Flow, PassRecord, PipelineRun, run_pipeline, run_pipeline_with};
pub use pass::{
    Declined, ExecutionProviders, InstalledProviders, Pass, PassCx, PassError, SideData, Target,
};
pub use precision::{Precision, PrecisionMap};
