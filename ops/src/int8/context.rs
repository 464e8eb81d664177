//! What an INT8 run needs from the command, and the two things every
//! stage of it does with that: build a candidate from the model at the
//! quantize step, and open the calibration data again.

use std::path::Path;

use infopt_calibration::Amax;
use infopt_calibration::run::DataSource;
use infopt_ir::Model;
use infopt_passes::{DriverOptions, PipelineConfig, PipelineRun, SideData};
use infopt_runtime::InputShapes;
use infopt_verify::ChosenBackend;

use super::costs::Costs;
use crate::error::{OpsError, OpsResult};
use crate::stages::{self, PassHooks};

/// What `run` needs from the command.
pub struct Context<'a> {
    pub original: &'a Model,
    pub dir: &'a Path,
    pub shapes: &'a InputShapes,
    pub backend: &'a ChosenBackend,
    pub options: &'a DriverOptions,
    /// The command's backend options (to build ONNX Runtime when the model
    /// at the quantize step needs it).
    pub backend_args: &'a crate::backend_args::BackendSettings,
    /// Judge the result on the data (false with --no-verify).
    pub judge: bool,
    /// Seed and vocabulary of the command's generated inputs, which
    /// `random:N` calibration data draws with (see
    /// `infopt_verify::Inputs::generated`).
    pub generated: (u64, u64),
    /// Where the timings that decide come from, and their record.
    pub timings: &'a super::Timings,
}

/// The quantize step and the passes after it on a copy of `mid`, with `amax`.
pub(super) fn quantize_rest(
    mid: &Model,
    from: &PipelineConfig,
    amax: &Amax,
    cx: &Context<'_>,
    costs: &Costs,
) -> OpsResult<(Model, PipelineRun)> {
    costs.time(
        "candidate: built (the quantize step and the passes after it)",
        || {
            let mut side = SideData::default();
            side.insert(amax.clone());
            let mut quantized = mid.clone();
            let run =
                stages::run_passes(&mut quantized, from, cx.options, side, PassHooks::default())?;
            Ok((quantized, run))
        },
    )
}

pub(super) fn open_again(
    src: &DataSource,
    backend: &ChosenBackend,
    cx: &Context<'_>,
    model: &Model,
) -> OpsResult<Box<dyn infopt_verify::Dataset>> {
    // Files need no model; only random data is generated from it.
    if let Some(files) = infopt_calibration::run::open_files(src).map_err(OpsError::usage)? {
        return Ok(files);
    }
    Ok(infopt_calibration::run::open_dataset(
        src,
        backend,
        &model.to_bytes().map_err(OpsError::from_ir)?,
        cx.dir,
        cx.shapes,
    )?)
}
