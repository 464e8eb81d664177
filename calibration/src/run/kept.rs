//! The calibration's runs kept for a judge of the same samples: each
//! sample's inputs and the model's outputs on it. INT8 judges its
//! candidates on the calibration samples when the data has no others, and
//! ran the original on every one of them again for its reference outputs
//! (PP-OCRv4 rec: 64 runs and 6 sessions, 1.4 s of an 11 s command); the
//! calibration has just computed them, as its graph outputs.

use std::sync::Mutex;

use infopt_runtime::HostTensor;

/// One calibration sample (a batch of one) and the model's outputs on it.
#[derive(Clone, Debug)]
pub struct KeptRun {
    /// Its position in the data.
    pub index: usize,
    pub origin: String,
    pub inputs: Vec<HostTensor>,
    pub outputs: Vec<HostTensor>,
}

/// Keeps runs while their tensors fit a budget of bytes; runs from
/// sessions side by side arrive in any order.
pub(crate) struct Keeper {
    budget: usize,
    kept: Mutex<(usize, Vec<KeptRun>)>,
}

fn bytes_of(ts: &[HostTensor]) -> usize {
    ts.iter()
        .map(|t| t.len() * t.dtype().size_of().max(1))
        .sum()
}

impl Keeper {
    pub(crate) fn new(budget: usize) -> Keeper {
        Keeper {
            budget,
            kept: Mutex::new((0, Vec::new())),
        }
    }

    /// Keeps sample `index`'s run when it fits what is left of the budget.
    pub(crate) fn keep(
        &self,
        index: usize,
        origin: &str,
        inputs: &[HostTensor],
        outputs: Vec<HostTensor>,
    ) {
        let size = bytes_of(inputs) + bytes_of(&outputs);
        let Ok(mut kept) = self.kept.lock() else {
            return;
        };
        if kept.0.saturating_add(size) > self.budget {
            return;
        }
        kept.0 += size;
        kept.1.push(KeptRun {
            index,
            origin: origin.to_string(),
            inputs: inputs.to_vec(),
            outputs,
        });
    }

    /// The runs kept, in data order.
    pub(crate) fn into_runs(self) -> Vec<KeptRun> {
        let mut runs = self.kept.into_inner().map(|k| k.1).unwrap_or_default();
        runs.sort_by_key(|r| r.index);
        runs
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(n: usize) -> HostTensor {
        HostTensor::from_vec(vec![n], vec![0f32; n]).unwrap()
    }

    #[test]
    fn runs_come_back_in_data_order_within_the_budget() {
        let k = Keeper::new(3 * 8 * 4);
        k.keep(2, "c", &[t(4)], vec![t(4)]);
        k.keep(0, "a", &[t(4)], vec![t(4)]);
        k.keep(1, "b", &[t(4)], vec![t(4)]);
        k.keep(3, "d", &[t(4)], vec![t(4)]);
        let runs = k.into_runs();
        let order: Vec<usize> = runs.iter().map(|r| r.index).collect();
        // Three fit the budget of 96 bytes: the fourth to arrive is left out.
        assert_eq!(order, vec![0, 1, 2]);
        assert_eq!(runs[1].origin, "b");
    }
}
