//! infopt-verify: running models for a purpose. Inputs and datasets,
//! backend choice (a typed kind), the verifier and its criterion,
//! observation and comparison of intermediate tensors, interleaved timing.
//! Commands compose these; none of them lives in a command.

pub mod activations;
pub mod backend;
pub mod config;
pub mod criterion;
pub mod dataset;
pub mod error;
pub mod evaluate;
pub mod fold_check;
pub mod half_io;
pub mod index_bounds;
pub mod inputs;
pub mod intermediates;
pub mod loop_work;
pub mod memory;
pub mod neighbours;
pub mod observe;
mod padding;
pub mod parts;
pub mod relations;
pub mod selection;
pub mod sensitivity;
pub mod shapes;
pub mod size_hints;
pub mod stacked;
pub mod string_inputs;
pub mod timing;
mod top_class;
pub mod tract_limits;
pub mod value_hints;
pub mod verifier;
pub mod work;

pub use backend::{BackendInfo, BackendKind, BackendOptions, ChosenBackend};
pub use criterion::Criterion;
pub use dataset::{Dataset, Sample};
pub use error::{ErrorKind, VerifyError};
pub use inputs::{InputSource, Inputs, ShapeArg};
pub use verifier::{LatencyComparison, Verification, Verifier, VerifyPolicy, worst_abs};
