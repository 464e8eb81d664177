//! Test set-up the verify tests share.

use infopt_runtime::{HostTensor, IoSpec};
use infopt_verify::{Dataset, Sample};

/// Samples held in memory, in order (a dataset that counts what is read).
pub struct Samples {
    all: Vec<Vec<f32>>,
    next: usize,
}

impl Samples {
    pub fn new(n: usize) -> Samples {
        let all = (0..n)
            .map(|i| {
                let t = i as f32;
                vec![(t * 0.37).sin(), (t * 0.91).cos(), t * 0.05 - 0.4, 0.3]
            })
            .collect();
        Samples { all, next: 0 }
    }
}

impl Dataset for Samples {
    fn describe(&self) -> String {
        format!("{} test samples", self.all.len())
    }
    fn meaningful(&self) -> bool {
        true
    }
    fn sample_count(&self) -> Option<usize> {
        Some(self.all.len())
    }
    fn next_sample(&mut self, _inputs: &[IoSpec]) -> Result<Option<Sample>, String> {
        let Some(v) = self.all.get(self.next) else {
            return Ok(None);
        };
        let t = HostTensor::from_vec(vec![1, 4], v.clone())
            .map_err(|e| e.to_string())?
            .named("x");
        self.next += 1;
        Ok(Some(Sample {
            index: self.next - 1,
            origin: format!("sample {}", self.next - 1),
            tensors: vec![t],
        }))
    }
}
