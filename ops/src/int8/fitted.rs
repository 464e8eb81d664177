//! Ranges fitted on the probe samples themselves: the best ranges any
//! calibration could give a placement judged on those samples.
//!
//! After the calibration's first sample, a placement's accuracy is probed
//! with that one sample's ranges, which clip whatever the other samples
//! reach beyond them: speechmos's PLCMOS (clips of different loudness) lost
//! 135x the portable placement's noise in ONNX Runtime's placement there,
//! and came within 0.03 of the target with every sample's ranges. Before a
//! placement is ruled out on the first sample's word, it is probed again
//! with ranges that fit the probe samples: what misses there too misses
//! with any calibration.

use std::ops::Range;

use infopt_calibration::run::{CalibrateOptions, DataSource, Target, collect, table_of};
use infopt_calibration::{DEFAULT_BINS, Method, RangeTable};
use infopt_ir::Model;
use infopt_verify::ChosenBackend;

use super::context::Context;
use super::costs::Costs;
use crate::error::{OpsError, OpsResult};

/// Min-max ranges of `mid`'s tensors over the samples at `samples` of
/// `src`. None where the data cannot be sliced (it does not say how many
/// samples it has): the caller keeps the first sample's word.
pub(super) fn on_samples(
    cx: &Context<'_>,
    mid: &Model,
    (src, backend): (&DataSource, &ChosenBackend),
    samples: Range<usize>,
    costs: &Costs,
) -> OpsResult<Option<RangeTable>> {
    let t = std::time::Instant::now();
    let bytes = mid.to_bytes().map_err(OpsError::from_ir)?;
    let target = Target {
        model: mid,
        file_bytes: &bytes,
        dir: cx.dir,
    };
    let options = CalibrateOptions {
        method: Method::MinMax,
        samples: None,
        batch: 1,
        bins: DEFAULT_BINS,
        keep_runs: 0,
        quantizable: None,
    };
    let slice = |n: usize| samples.start.min(n)..samples.end.min(n);
    let collected = match collect(
        &target,
        backend,
        cx.shapes,
        src,
        &options,
        Some(&slice),
        &mut |_, _| {},
    ) {
        Ok(c) => c,
        // Not sliceable (a stream of unknown length): not an error here.
        Err(e) if e.kind == infopt_verify::ErrorKind::Usage => return Ok(None),
        Err(e) => return Err(e.into()),
    };
    let table = table_of(
        &collected.collector,
        Method::MinMax,
        collected.model_sha256,
        &collected.full_range,
        collected.samples,
    )
    .map_err(OpsError::usage)?;
    costs.add(
        "placement: ranges fitted on the probe samples",
        1,
        t.elapsed().as_secs_f64(),
    );
    Ok(Some(table))
}

/// Test hook (debug builds only): INFOPT_TEST_INT8_FIRST_SAMPLE_LOST=1
/// stands for first-sample ranges that lost every placement but the
/// target's far from the accuracy target (on a test model's samples one
/// sample's ranges clip too little to show it), for the end-to-end test of
/// what ranges fitted on the probe samples then decide.
#[cfg(debug_assertions)]
pub(super) fn test_first_sample_lost(noise: &mut [super::speed::Noise]) {
    if std::env::var("INFOPT_TEST_INT8_FIRST_SAMPLE_LOST").is_ok_and(|v| v == "1") {
        for n in noise.iter_mut().skip(1) {
            n.loss = f64::INFINITY;
            n.margin = -1.0;
        }
    }
}
