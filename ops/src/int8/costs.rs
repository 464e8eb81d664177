//! What the INT8 calibration and accuracy search spent, step by step: how
//! many candidates were built, judged on every sample or probed on a few,
//! how many sessions and runs each model took, and the seconds of each. One
//! progress line at the end and the report's `int8.costs` say it, so that a
//! slow run shows where its time went without a profiler, and tests can
//! check what was (not) done without timing anything.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::time::Instant;

pub use crate::report::int8::StepCost;

/// Counts and seconds by step (interior mutability: the judge and the
/// search share one).
#[derive(Default)]
pub struct Costs {
    steps: RefCell<BTreeMap<&'static str, StepCost>>,
}

impl Costs {
    /// `count` more of `step`, which took `seconds`.
    pub fn add(&self, step: &'static str, count: usize, seconds: f64) {
        let mut steps = self.steps.borrow_mut();
        let c = steps.entry(step).or_default();
        c.count += count;
        c.seconds += seconds;
    }

    /// `count` more of `step`, timed elsewhere (or not at all).
    pub fn count(&self, step: &'static str, count: usize) {
        self.add(step, count, 0.0);
    }

    /// Runs `f` as one more of `step`, timed.
    pub fn time<R>(&self, step: &'static str, f: impl FnOnce() -> R) -> R {
        let t = Instant::now();
        let r = f();
        self.add(step, 1, t.elapsed().as_secs_f64());
        r
    }

    /// Seconds per one of `step`, once some were timed.
    pub fn mean_seconds(&self, step: &'static str) -> Option<f64> {
        let steps = self.steps.borrow();
        let c = steps.get(step)?;
        (c.count > 0 && c.seconds > 0.0).then(|| c.seconds / c.count as f64)
    }

    /// Every step so far, by name.
    pub fn steps(&self) -> BTreeMap<String, StepCost> {
        self.steps
            .borrow()
            .iter()
            .map(|(k, v)| (k.to_string(), v.clone()))
            .collect()
    }

    /// `step: 3 in 1.20 s; ...`, steps with seconds first, slowest first.
    pub fn line(&self) -> String {
        let steps = self.steps.borrow();
        let mut timed: Vec<(&&str, &StepCost)> = steps.iter().collect();
        timed.sort_by(|a, b| b.1.seconds.total_cmp(&a.1.seconds));
        timed
            .iter()
            .map(|(k, v)| {
                if v.seconds > 0.0 {
                    format!("{k}: {} in {:.2} s", v.count, v.seconds)
                } else {
                    format!("{k}: {}", v.count)
                }
            })
            .collect::<Vec<_>>()
            .join("; ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn steps_add_up_and_the_line_puts_the_slowest_first() {
        let c = Costs::default();
        c.add("candidate: runs", 8, 0.5);
        c.add("candidate: runs", 64, 2.0);
        c.count("probed on a few samples", 3);
        let v = c.time("built", || 7);
        assert_eq!(v, 7);
        let steps = c.steps();
        assert_eq!(steps["candidate: runs"].count, 72);
        assert!((steps["candidate: runs"].seconds - 2.5).abs() < 1e-12);
        assert_eq!(steps["probed on a few samples"].count, 3);
        assert_eq!(steps["built"].count, 1);
        let line = c.line();
        assert!(
            line.starts_with("candidate: runs: 72 in 2.50 s; "),
            "{line}"
        );
        assert!(line.ends_with("probed on a few samples: 3"), "{line}");
    }
}
