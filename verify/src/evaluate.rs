//! Accuracy of a candidate against the original on held-out samples of a
//! dataset (never the samples a calibration saw): both models run on each
//! sample, and each output is compared over all samples together.

use std::path::Path;

use infopt_ir::Model;
use infopt_runtime::compare::{self, Tolerance};
use infopt_runtime::{HostTensor, InputShapes, LoadedModel, OutputAgreement};

use crate::backend::ChosenBackend;
use crate::dataset::Dataset;
use crate::error::{ErrorKind, Result, VerifyError};

/// The shape of every input of one sample.
type SampleShapes = Vec<Vec<usize>>;

/// What was evaluated.
#[derive(Debug, Clone, serde::Serialize)]
pub struct HeldOut {
    /// Samples skipped first (the calibration samples).
    pub skipped: usize,
    pub samples: usize,
    pub dataset: String,
    /// False for random data.
    pub meaningful: bool,
    /// Per output, over every held-out sample.
    pub outputs: Vec<OutputAgreement>,
}

/// The two models and where they run.
pub struct Pair<'a> {
    pub chosen: &'a ChosenBackend,
    pub original: &'a Model,
    pub candidate: &'a Model,
    /// Folder external data is resolved against.
    pub dir: &'a Path,
    pub shapes: &'a InputShapes,
}

/// Runs both models of `pair` on samples `skip..skip+limit` of `data`.
pub fn held_out(
    pair: &Pair<'_>,
    data: &mut dyn Dataset,
    skip: usize,
    limit: usize,
) -> Result<HeldOut> {
    let (chosen, original, candidate, dir, shapes) = (
        pair.chosen,
        pair.original,
        pair.candidate,
        pair.dir,
        pair.shapes,
    );
    // Loaded at each sample's shapes (a dataset's samples fix every input's
    // shape; the verifier's symbol binding, a batch of 2 say, would
    // contradict them), again only when the shapes change.
    let load = |m: &Model, at: &InputShapes| {
        let bytes = m
            .to_bytes_referencing_sources()
            .map_err(|e| VerifyError::new(ErrorKind::Load, e))?;
        chosen
            .backend
            .load(&bytes, Some(dir), at)
            .map_err(|e| VerifyError::runtime(e, ErrorKind::CannotVerify))
    };
    let mut a = load(original, shapes)?;
    let inputs = a.inputs().to_vec();
    // The candidate, with the sample shapes it was loaded for.
    let mut loaded: Option<(SampleShapes, Box<dyn LoadedModel>)> = None;
    let mut skipped = 0;
    while skipped < skip {
        if data
            .next_sample(&inputs)
            .map_err(VerifyError::usage)?
            .is_none()
        {
            break;
        }
        skipped += 1;
    }
    // Outputs accumulated over samples, as flat f64 per output.
    let mut expected: Vec<(String, Vec<f64>)> = Vec::new();
    let mut actual: Vec<Vec<f64>> = Vec::new();
    let mut samples = 0;
    while samples < limit {
        let Some(s) = data.next_sample(&inputs).map_err(VerifyError::usage)? else {
            break;
        };
        let key: Vec<Vec<usize>> = s.tensors.iter().map(|t| t.shape().to_vec()).collect();
        if loaded.as_ref().is_none_or(|(k, _)| *k != key) {
            let mut at = shapes.clone();
            at.symbols.clear();
            for (t, spec) in s.tensors.iter().zip(&inputs) {
                at.shapes.insert(spec.name.clone(), t.shape().to_vec());
            }
            a = load(original, &at)?;
            loaded = Some((key, load(candidate, &at)?));
        }
        let b = &loaded.as_ref().expect("loaded above").1;
        let run = |m: &dyn infopt_runtime::LoadedModel, x: &[HostTensor]| {
            m.run(x)
                .map_err(|e| VerifyError::new(ErrorKind::Mismatch, format!("{}: {e}", s.origin)))
        };
        let ya = run(a.as_ref(), &s.tensors)?;
        let yb = run(b.as_ref(), &s.tensors)?;
        if expected.is_empty() {
            expected = ya
                .iter()
                .map(|t| (t.name().unwrap_or("").to_string(), Vec::new()))
                .collect();
            actual = vec![Vec::new(); ya.len()];
        }
        for (i, t) in ya.iter().enumerate() {
            if let Some(e) = expected.get_mut(i) {
                e.1.extend(t.to_f64_vec());
            }
        }
        for (i, t) in yb.iter().enumerate() {
            if let Some(o) = actual.get_mut(i) {
                o.extend(t.to_f64_vec());
            }
        }
        samples += 1;
    }
    if samples == 0 {
        return Err(VerifyError::usage(format!(
            "no held-out samples: the data has {skipped} sample(s), all used for calibration; give more data or fewer calibration samples"
        )));
    }
    let tol = Tolerance {
        atol: 0.0,
        rtol: 0.0,
    };
    let outputs = expected
        .iter()
        .zip(&actual)
        .map(|((name, e), a)| compare::compare_values(name, a, e, tol))
        .collect();
    Ok(HeldOut {
        skipped,
        samples,
        dataset: data.describe(),
        meaningful: data.meaningful(),
        outputs,
    })
}
