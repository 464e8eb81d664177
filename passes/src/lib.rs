//! infopt passes: the `Pass` trait, the registry, YAML pipelines, the driver,
//! and one file per pass.

pub mod config;
pub mod driver;
pub mod panic_guard;
pub mod pass;
pub mod registry;
pub mod rule;
pub mod util;

pub mod constants_to_initializers;
pub mod eliminate_dead;
pub mod eliminate_duplicates;
pub mod eliminate_identity;
pub mod fix_shapes;
pub mod fold_constants;
pub mod fuse_conv_activation;
pub mod fuse_conv_bn;
pub mod fuse_matmul_add;
pub mod fuse_pad_conv;
pub mod fuse_parallel_matmul;
pub mod infer_shapes;
pub mod perturb_weight;
pub mod remove_initializer_inputs;
pub mod simplify_reshape;

pub use config::{PassConfig, PipelineConfig, Step, VerifyConfig};
pub use driver::{DriverOptions, Flow, PassRecord, PipelineRun, run_pipeline};
pub use pass::{Declined, Pass, PassCx, PassError, Target};
