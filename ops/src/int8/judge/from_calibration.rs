//! The calibration's runs as the judge's reference outputs. Judged on the
//! calibration samples (the data has no others), the judge ran the
//! original on every one of them for its reference, which the calibration
//! had just done (PP-OCRv4 rec: 64 runs and their sessions, 1.4 s of 11 s;
//! magika 0.3 s of 1.7 s). The calibration runs the model at the quantize
//! step, the original after the float passes, at ONNX Runtime's level
//! `disable`: its outputs are the original's to float rounding. Only where
//! the samples both ran agree (the same inputs, outputs within a relative
//! 1e-4) are the calibration's outputs taken for the rest.

use infopt_calibration::run::KeptRun;
use infopt_runtime::HostTensor;
use infopt_verify::evaluate::Reference;

use super::Judge;

/// Relative L2 distance within which the calibration's outputs count as
/// the original's (float passes and graph optimizations move them by
/// about 1e-6).
const AGREE: f64 = 1e-4;

impl Judge<'_> {
    /// The calibration's runs of its samples, in data order (see the
    /// module comment).
    pub fn with_calibration_runs(mut self, runs: Vec<KeptRun>) -> Self {
        self.calibration_runs = runs;
        self
    }

    /// The judged samples from the reference's end up to `want` (within
    /// `room` bytes) from the calibration's runs, following the reference
    /// kept so far; None where they are not all there, the judged samples
    /// are not the calibration's, or the samples both ran disagree.
    pub(super) fn calibration_outputs(&self, want: usize, room: usize) -> Option<Reference> {
        let r = self.reference.as_ref()?;
        let len = r.len();
        if !self.on_calibration || r.skipped != 0 || len == 0 {
            return None;
        }
        let runs = &self.calibration_runs;
        // The calibration ran every sample of the data (it has no others).
        let end = want.min(self.calibrated);
        if runs.len() < end || runs.iter().take(end).enumerate().any(|(i, k)| k.index != i) {
            return None;
        }
        let agree = (0..len).all(|i| {
            r.sample(i)
                .is_some_and(|(inputs, expected)| same_run(inputs, expected, &runs[i]))
        });
        if !agree {
            return None;
        }
        let mut bytes = 0usize;
        let mut samples = Vec::new();
        for k in &runs[len..end] {
            bytes += k
                .inputs
                .iter()
                .chain(&k.outputs)
                .map(|t| t.len() * t.dtype().size_of().max(1))
                .sum::<usize>();
            if bytes > room {
                return None;
            }
            samples.push((k.origin.clone(), k.inputs.clone(), k.outputs.clone()));
        }
        self.costs
            .count("original: outputs the calibration computed", samples.len());
        Some(r.following(samples, true))
    }
}

/// Whether `run` fed `inputs` and computed `expected` (to float rounding).
fn same_run(inputs: &[HostTensor], expected: &[HostTensor], run: &KeptRun) -> bool {
    let same_inputs = inputs.len() == run.inputs.len()
        && inputs
            .iter()
            .zip(&run.inputs)
            .all(|(a, b)| a.shape() == b.shape() && a.data() == b.data());
    same_inputs
        && expected.len() == run.outputs.len()
        && expected.iter().zip(&run.outputs).all(|(a, b)| close(a, b))
}

/// Same name, shape and dtype, and values within [`AGREE`] (relative L2),
/// non-finite values where the other has the same.
fn close(a: &HostTensor, b: &HostTensor) -> bool {
    if a.name() != b.name() || a.shape() != b.shape() || a.dtype() != b.dtype() {
        return false;
    }
    let (x, y) = (a.to_f64_vec(), b.to_f64_vec());
    let mut diff = 0.0f64;
    let mut norm = 0.0f64;
    for (p, q) in x.iter().zip(&y) {
        if !p.is_finite() || !q.is_finite() {
            if p.to_bits() != q.to_bits() && !(p.is_nan() && q.is_nan()) {
                return false;
            }
            continue;
        }
        diff += (p - q) * (p - q);
        norm += p * p;
    }
    diff <= AGREE * AGREE * norm.max(f64::MIN_POSITIVE)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(name: &str, v: Vec<f32>) -> HostTensor {
        HostTensor::from_vec(vec![v.len()], v).unwrap().named(name)
    }

    #[test]
    fn outputs_agree_to_float_rounding_and_no_further() {
        let a = t("y", vec![1.0, 2.0, 3.0]);
        assert!(close(&a, &t("y", vec![1.0, 2.0, 3.000_001])));
        assert!(!close(&a, &t("y", vec![1.0, 2.0, 3.01])));
        assert!(!close(&a, &t("z", vec![1.0, 2.0, 3.0])));
        assert!(!close(&a, &t("y", vec![1.0, 2.0])));
        let inf = t("y", vec![f32::INFINITY, 1.0]);
        assert!(close(&inf, &t("y", vec![f32::INFINITY, 1.0])));
        assert!(!close(&inf, &t("y", vec![f32::NEG_INFINITY, 1.0])));
    }

    #[test]
    fn a_run_is_the_same_only_with_the_same_inputs() {
        let run = KeptRun {
            index: 0,
            origin: "0000.npz".into(),
            inputs: vec![t("x", vec![0.5, 1.5])],
            outputs: vec![t("y", vec![1.0, 2.0])],
        };
        let y = [t("y", vec![1.0, 2.0])];
        assert!(same_run(&[t("x", vec![0.5, 1.5])], &y, &run));
        assert!(!same_run(&[t("x", vec![0.5, 1.25])], &y, &run));
        assert!(!same_run(&[t("x", vec![0.5, 1.5])], &[], &run));
    }
}
