//! Judging a candidate INT8 model against the original on the data: the
//! samples after the calibration ones, or the calibration samples when the
//! data has no others (the first judgement finds out which, and every later
//! one uses the same samples, so that candidates are compared on one set).

use infopt_calibration::run::DataSource;
use infopt_ir::Model;
use infopt_verify::ChosenBackend;
use infopt_verify::evaluate::{self, HeldOut};

use super::{Context, open_again};
use crate::exit::CliResult;

pub(super) struct Judge<'a> {
    pub src: &'a DataSource,
    pub backend: &'a ChosenBackend,
    pub cx: &'a Context<'a>,
    /// The model at the quantize step (the data is opened for its inputs).
    pub mid: &'a Model,
    pub classifiers: &'a [String],
    /// Samples skipped before the judged ones, once known.
    pub skip: Option<usize>,
    /// Whether the judged samples are the calibration ones.
    pub on_calibration: bool,
    /// Samples calibration used.
    pub calibrated: usize,
    /// Samples judged at most.
    pub limit: usize,
}

impl Judge<'_> {
    /// `candidate` on every judged sample.
    pub fn judge(&mut self, candidate: &Model) -> CliResult<HeldOut> {
        self.judge_on(candidate, self.limit)
    }

    /// `candidate` on the first `limit` judged samples.
    pub fn judge_on(&mut self, candidate: &Model, limit: usize) -> CliResult<HeldOut> {
        let pair = evaluate::Pair {
            chosen: self.backend,
            original: self.cx.original,
            candidate,
            dir: self.cx.dir,
            shapes: self.cx.shapes,
        };
        let run = |skip: usize| -> CliResult<HeldOut> {
            let mut data = open_again(self.src, self.backend, self.cx, self.mid)?;
            Ok(evaluate::held_out(
                &pair,
                data.as_mut(),
                skip,
                limit,
                self.classifiers,
            )?)
        };
        if let Some(skip) = self.skip {
            let mut h = run(skip)?;
            h.on_calibration_samples = self.on_calibration;
            return Ok(h);
        }
        let h = run(self.calibrated)?;
        if h.samples > 0 {
            self.skip = Some(h.skipped);
            return Ok(h);
        }
        // No sample beyond the calibration ones: judge on those.
        self.skip = Some(0);
        self.on_calibration = true;
        let mut h = run(0)?;
        h.on_calibration_samples = true;
        Ok(h)
    }
}
