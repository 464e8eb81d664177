//! Test set-up the verify tests share.

use infopt_ir::builder::{GraphBuilder, dims};
use infopt_ir::{Attribute, DataType, Model};
use infopt_runtime::{HostTensor, IoSpec};
use infopt_verify::{Dataset, Sample};

/// `x [1, 4] -> [Relu] -> MatMul(w) -> Add(b) -> Softmax`: a classifier
/// head, and a second output of the logits (judged by cosine only). The
/// Relu (`relu_first`) gives candidates that differ in `w` a node to share.
pub fn classifier(w: &[f32], relu_first: bool) -> Model {
    let mut b = GraphBuilder::new();
    let x = b.input("x", DataType::Float, dims(&["1", "4"]));
    let x = match relu_first {
        true => b.op("Relu", &[x], vec![]),
        false => x,
    };
    let w = b.f32("w", &[4, 3], w);
    let bias = b.f32("b", &[3], &[0.1, -0.2, 0.05]);
    let mm = b.op("MatMul", &[x, w], vec![]);
    let logits = b.op("Add", &[mm, bias], vec![]);
    let p = b.op("Softmax", &[logits], vec![Attribute::int("axis", -1)]);
    b.output(p, "probs", DataType::Float, Some(dims(&["1", "3"])));
    b.output(logits, "logits", DataType::Float, Some(dims(&["1", "3"])));
    b.build(13)
}

pub const W: [f32; 12] = [
    0.5, -0.3, 0.2, 0.1, 0.4, -0.6, -0.2, 0.3, 0.7, 0.6, -0.1, 0.05,
];

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
