//! One module per command that has a report; no command imports another
//! (what two share lives in a module of the crate root).

pub mod bench;
pub mod build_engine;
pub mod calibrate;
pub mod compare;
pub mod inspect;
pub mod optimize;

use crate::error::OpsResult;
use crate::outcome::Outcome;
use crate::progress::{self, Progress};

/// Runs one command: the process's registrations, `progress` installed for
/// the call, a panic turned into an internal error.
fn call<R>(progress: &dyn Progress, f: impl FnOnce() -> OpsResult<R>) -> OpsResult<R> {
    crate::guard::init();
    progress::with_progress(progress, || crate::guard::guarded(f))
}

/// Optimizes a model: load, pipeline, verification, save, gates.
pub fn optimize(
    options: &optimize::OptimizeOptions,
    progress: &dyn Progress,
) -> OpsResult<Outcome<crate::report::Report>> {
    call(progress, || optimize::execute(options.clone()))
}

/// Builds a TensorRT engine (or the ONNX and trtexec commands).
pub fn build_engine(
    options: &build_engine::BuildEngineOptions,
    progress: &dyn Progress,
) -> OpsResult<Outcome<build_engine::report::EngineReport>> {
    call(progress, || build_engine::execute(options.clone()))
}

/// The build matrix of `build-engine --matrix`: one entry per flavour x
/// compute capability x precision.
pub fn build_matrix(
    options: &build_engine::BuildEngineOptions,
    progress: &dyn Progress,
) -> OpsResult<build_engine::matrix::Matrix> {
    call(progress, || build_engine::matrix::plan(options))
}

/// Calibrates a model (or merges calibration parts) into a range table.
pub fn calibrate(
    options: &calibrate::CalibrateOptions,
    progress: &dyn Progress,
) -> OpsResult<Outcome<calibrate::CalibrateReport>> {
    call(progress, || {
        calibrate::execute(options).map(Outcome::passed)
    })
}

/// Times models, interleaved.
pub fn bench(
    options: &bench::BenchOptions,
    progress: &dyn Progress,
) -> OpsResult<Outcome<bench::BenchReport>> {
    call(progress, || bench::execute(options))
}

/// Runs two models on the same inputs and compares their outputs.
pub fn compare(
    options: &compare::CompareOptions,
    progress: &dyn Progress,
) -> OpsResult<Outcome<compare::CompareReport>> {
    call(progress, || compare::execute(options))
}

/// What a model contains.
pub fn inspect(
    options: &inspect::InspectOptions,
    progress: &dyn Progress,
) -> OpsResult<Outcome<inspect::Inspection>> {
    call(progress, || inspect::execute(options).map(Outcome::passed))
}
