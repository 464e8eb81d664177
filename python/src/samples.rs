//! The caller's samples (`calib_data=` / `data=` given an iterable) as a
//! dataset, without files: each sample is pulled from Python when the
//! command reads it, taking the GIL for that moment.
//!
//! The command opens the data more than once (INT8: the first sample for
//! the input sizes, the calibration samples, then the held-out ones), so
//! `infopt/_samples.py` wraps the iterable: a list or tuple is read by
//! index, a one-shot iterator (a generator) is pulled only as far as the
//! command reads and its samples are kept in memory for the next reading.

use std::sync::Arc;

use pyo3::prelude::*;

use infopt_calibration::run::OpenSamples;
use infopt_runtime::IoSpec;
use infopt_verify::{Dataset, Sample};

use crate::arrays;
use crate::sink::{Stop, stop};

/// What a dataset says when Python raised: the command stops, and the
/// exception itself is raised to the caller.
const RAISED: &str = "the calibration data raised an exception";

/// The wrapped iterable (`_samples.Samples`: `get(i)`, `count()`).
pub struct PySamples {
    source: Arc<Py<PyAny>>,
    stopped: Stop,
}

impl PySamples {
    pub fn new(source: Py<PyAny>, stopped: Stop) -> PySamples {
        PySamples {
            source: Arc::new(source),
            stopped,
        }
    }
}

impl OpenSamples for PySamples {
    fn open(&self) -> Box<dyn Dataset> {
        let count = Python::attach(|py| {
            self.source
                .bind(py)
                .call_method0("count")
                .and_then(|c| c.extract::<Option<usize>>())
                .ok()
                .flatten()
        });
        Box::new(Reader {
            source: self.source.clone(),
            stopped: self.stopped.clone(),
            next: 0,
            count,
        })
    }
}

/// One reading of the samples, from the first.
struct Reader {
    source: Arc<Py<PyAny>>,
    stopped: Stop,
    next: usize,
    /// Known for a list, not for an iterator.
    count: Option<usize>,
}

impl Dataset for Reader {
    fn describe(&self) -> String {
        match self.count {
            Some(n) => format!("{n} samples from a Python iterable"),
            None => "samples from a Python iterable".into(),
        }
    }

    fn meaningful(&self) -> bool {
        true
    }

    fn sample_count(&self) -> Option<usize> {
        self.count
    }

    fn next_sample(&mut self, inputs: &[IoSpec]) -> Result<Option<Sample>, String> {
        let index = self.next;
        let pulled = Python::attach(|py| -> PyResult<Option<Result<_, String>>> {
            let got = self.source.bind(py).call_method1("get", (index,))?;
            if got.is_none() {
                return Ok(None);
            }
            Ok(Some(arrays::tensors(&got)))
        });
        let arrays = match pulled {
            Err(e) => {
                stop(&self.stopped, e);
                return Err(RAISED.into());
            }
            Ok(None) => return Ok(None),
            Ok(Some(arrays)) => arrays.map_err(|e| format!("calibration sample {index}: {e}"))?,
        };
        self.next += 1;
        let origin = format!("calibration sample {index}");
        let tensors = infopt_verify::inputs::fit_inputs(inputs, &arrays, &origin)?;
        Ok(Some(Sample {
            index,
            origin,
            tensors,
        }))
    }
}
