//! The measurements of time that decide what an INT8 run writes (which
//! placement, whether INT8 beats float, how many samples rank a model of
//! unknown sizes), recorded in order in the run's report, or answered from
//! an earlier report's record (`--int8-timings EARLIER.json`). Everything
//! else an INT8 run decides comes from counts and exact figures, so a run
//! given the same model, data, options and these answers writes the same
//! bytes: a release pipeline can pin a model whose INT8 ties float, which
//! the clock decides one way or the other from run to run.

use std::path::{Path, PathBuf};
use std::sync::Mutex;

use sha2::{Digest, Sha256};

use crate::error::{OpsError, OpsResult};
use crate::report::int8::RecordedTiming;
use infopt_ir::Model;

/// Where a run's timing answers come from, and the record of them.
pub struct Timings {
    /// The earlier report and its answers, when replaying.
    replay: Option<(PathBuf, Vec<RecordedTiming>)>,
    /// Every answer given so far (measured or replayed).
    given: Mutex<Vec<RecordedTiming>>,
}

impl Timings {
    /// Answers from the clock.
    pub fn measured() -> Timings {
        Timings {
            replay: None,
            given: Mutex::new(Vec::new()),
        }
    }

    /// For a run of `optimize --int8` on `target`, judged on its data or
    /// not (`judged`): answers from `report` (see [`Timings::from_report`]),
    /// refused where that run times nothing (the tensorrt target, or
    /// nothing judged), since the record would then change nothing.
    pub fn for_run(
        report: Option<&Path>,
        target: infopt_passes::Target,
        judged: bool,
    ) -> OpsResult<Timings> {
        if report.is_some() && target == infopt_passes::Target::Tensorrt {
            return Err(OpsError::usage(
                "--int8-timings: on the tensorrt target nothing is timed in ONNX Runtime, so no timing decides the model written: drop it (or use --target portable or onnxruntime)",
            ));
        }
        if report.is_some() && !judged {
            return Err(OpsError::usage(
                "--int8-timings: with --no-verify the INT8 model is neither judged nor timed, so no timing decides it: drop one of the two",
            ));
        }
        Timings::from_report(report)
    }

    /// Answers from `report`, a JSON report of an earlier `--int8` run
    /// (its `int8.timings`), or from the clock when None.
    pub fn from_report(report: Option<&Path>) -> OpsResult<Timings> {
        let Some(path) = report else {
            return Ok(Timings::measured());
        };
        let shown = path.display();
        let text = std::fs::read_to_string(path).map_err(|e| {
            OpsError::usage(format!(
                "--int8-timings {shown}: cannot read it: {e} (give the JSON report of an earlier --int8 run, written with --report FILE.json)"
            ))
        })?;
        let json: serde_json::Value = serde_json::from_str(&text).map_err(|e| {
            OpsError::usage(format!(
                "--int8-timings {shown}: not a JSON report: {e} (give the JSON report of an earlier --int8 run, written with --report FILE.json)"
            ))
        })?;
        let Some(list) = json.get("int8").and_then(|i| i.get("timings")) else {
            return Err(OpsError::usage(format!(
                "--int8-timings {shown}: no int8.timings in it (give the JSON report of an earlier --int8 run of this infopt, written with --report FILE.json)"
            )));
        };
        let answers: Vec<RecordedTiming> = serde_json::from_value(list.clone()).map_err(|e| {
            OpsError::usage(format!(
                "--int8-timings {shown}: its int8.timings do not read as timings: {e}"
            ))
        })?;
        Ok(Timings {
            replay: Some((path.to_path_buf(), answers)),
            given: Mutex::new(Vec::new()),
        })
    }

    /// The answer to measurement `what`: the earlier report's next one
    /// when replaying (an error when it measured something else there:
    /// this run is not that run), else `measure`'s, recorded.
    pub(super) fn answer(
        &self,
        what: Vec<String>,
        measure: impl FnOnce() -> OpsResult<Vec<f64>>,
    ) -> OpsResult<Vec<f64>> {
        let asked = self.given().len();
        let ms: Vec<Option<f64>> = match &self.replay {
            Some((path, answers)) => {
                let Some(earlier) = answers.get(asked) else {
                    return Err(OpsError::usage(format!(
                        "--int8-timings {}: it records {} timing(s) and this run asks for another ({}): the model, data or options differ from that run's; run without --int8-timings",
                        path.display(),
                        answers.len(),
                        what.join(", ")
                    )));
                };
                if earlier.what != what {
                    return Err(OpsError::usage(format!(
                        "--int8-timings {}: its timing {} was of {}, this run's is of {}: the model, data or options differ from that run's; run without --int8-timings",
                        path.display(),
                        asked + 1,
                        earlier.what.join(", "),
                        what.join(", ")
                    )));
                }
                earlier.ms.clone()
            }
            None => measure()?
                .into_iter()
                .map(|m| m.is_finite().then_some(m))
                .collect(),
        };
        let out = ms.iter().map(|m| m.unwrap_or(f64::NAN)).collect();
        self.given().push(RecordedTiming { what, ms });
        Ok(out)
    }

    /// Every answer given, in order (for the report).
    pub(super) fn recorded(&self) -> Vec<RecordedTiming> {
        self.given().clone()
    }

    /// When replaying: the earlier report's answers this run did not ask
    /// for, with its path (the run ended before that one did).
    pub(super) fn unused(&self) -> Option<(PathBuf, usize)> {
        let (path, answers) = self.replay.as_ref()?;
        let left = answers.len().saturating_sub(self.given().len());
        (left > 0).then(|| (path.clone(), left))
    }

    fn given(&self) -> std::sync::MutexGuard<'_, Vec<RecordedTiming>> {
        // A panic elsewhere while holding the lock leaves a list that is
        // still whole: pushes are the only writes.
        self.given.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// `label` and the start of the SHA-256 of `model`'s bytes, naming a timed
/// model in a [`RecordedTiming`] (`label` alone where it does not
/// serialize).
pub(super) fn named(label: &str, model: &Model) -> String {
    match model.to_bytes_referencing_sources() {
        Ok(bytes) => {
            let digest = Sha256::digest(&bytes);
            let hex: String = digest[..8].iter().map(|b| format!("{b:02x}")).collect();
            format!("{label} {hex}")
        }
        Err(_) => label.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn timing(what: &[&str], ms: &[f64]) -> RecordedTiming {
        RecordedTiming {
            what: what.iter().map(|s| s.to_string()).collect(),
            ms: ms.iter().map(|&m| Some(m)).collect(),
        }
    }

    fn report_with(dir: &Path, timings: &[RecordedTiming]) -> PathBuf {
        let path = dir.join("earlier.json");
        let json = serde_json::json!({"int8": {"timings": timings}});
        std::fs::write(&path, json.to_string()).unwrap();
        path
    }

    #[test]
    fn measured_answers_are_recorded_in_order_and_replayed_without_measuring() {
        let t = Timings::measured();
        let what = || vec!["int8 aa".to_string(), "float bb".to_string()];
        assert_eq!(t.answer(what(), || Ok(vec![1.5, 2.0])).unwrap(), [1.5, 2.0]);
        let nan = t.answer(vec!["x".into()], || Ok(vec![f64::NAN])).unwrap();
        assert!(nan[0].is_nan());
        let recorded = t.recorded();
        assert_eq!(recorded[0], timing(&["int8 aa", "float bb"], &[1.5, 2.0]));
        assert_eq!(recorded[1].ms, vec![None]);
        let dir = tempfile::tempdir().unwrap();
        let path = report_with(dir.path(), &recorded);
        let r = Timings::from_report(Some(&path)).unwrap();
        let replayed = r
            .answer(what(), || panic!("a replayed answer is not measured"))
            .unwrap();
        assert_eq!(replayed, [1.5, 2.0]);
        assert_eq!(r.unused().map(|(_, n)| n), Some(1));
        assert!(r.answer(vec!["x".into()], || unreachable!()).unwrap()[0].is_nan());
        assert_eq!(r.unused(), None);
        assert_eq!(r.recorded(), recorded);
        // Figures read back are the ones written, to the last bit.
        let tricky = 23.097535999999998f64;
        let t = Timings::measured();
        t.answer(vec!["float".into()], || Ok(vec![tricky])).unwrap();
        let path = report_with(dir.path(), &t.recorded());
        let r = Timings::from_report(Some(&path)).unwrap();
        let back = r.answer(vec!["float".into()], || unreachable!()).unwrap();
        assert_eq!(back[0].to_bits(), tricky.to_bits());
    }

    #[test]
    fn a_replay_that_asks_for_something_else_or_more_says_so() {
        let dir = tempfile::tempdir().unwrap();
        let path = report_with(dir.path(), &[timing(&["float aa"], &[2.0])]);
        let r = Timings::from_report(Some(&path)).unwrap();
        let err = r
            .answer(vec!["float bb".into()], || unreachable!())
            .unwrap_err();
        assert_eq!(
            err.message,
            format!(
                "--int8-timings {}: its timing 1 was of float aa, this run's is of float bb: the model, data or options differ from that run's; run without --int8-timings",
                path.display()
            )
        );
        let r = Timings::from_report(Some(&path)).unwrap();
        r.answer(vec!["float aa".into()], || unreachable!())
            .unwrap();
        let err = r
            .answer(vec!["rank samples".into()], || unreachable!())
            .unwrap_err();
        assert_eq!(
            err.message,
            format!(
                "--int8-timings {}: it records 1 timing(s) and this run asks for another (rank samples): the model, data or options differ from that run's; run without --int8-timings",
                path.display()
            )
        );
    }

    #[test]
    fn a_file_that_is_not_an_int8_report_is_refused_by_name() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("r.json");
        std::fs::write(&path, r#"{"passes": []}"#).unwrap();
        let err = Timings::from_report(Some(&path)).err().unwrap();
        assert_eq!(
            err.message,
            format!(
                "--int8-timings {}: no int8.timings in it (give the JSON report of an earlier --int8 run of this infopt, written with --report FILE.json)",
                path.display()
            )
        );
        std::fs::write(&path, "not json").unwrap();
        let err = Timings::from_report(Some(&path)).err().unwrap();
        assert!(err.message.contains(": not a JSON report: "), "{err:?}");
        let missing = dir.path().join("missing.json");
        let err = Timings::from_report(Some(&missing)).err().unwrap();
        assert!(err.message.contains(": cannot read it: "), "{err:?}");
    }
}
