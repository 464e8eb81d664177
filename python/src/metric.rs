//! A Python callable as the INT8 search's accuracy metric (`infopt.optimize(...,
//! metric=f)`): called with the outputs of the judged samples, it returns a
//! score, higher is better (see `infopt_ops::int8::metric`). The outputs cross as
//! `[[(name, dtype, shape, bytes), ...] per sample]`; `infopt/_metric.py`
//! turns them into numpy arrays for the user's function.

use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyList};

use infopt_ops::int8::metric::{HostTensor, Metric, raw};

pub struct PyMetric {
    pub callable: Py<PyAny>,
}

impl Metric for PyMetric {
    fn score(&self, samples: &[Vec<(String, HostTensor)>]) -> Result<f64, String> {
        Python::attach(|py| -> PyResult<f64> {
            let all = PyList::empty(py);
            for sample in samples {
                let outputs = PyList::empty(py);
                for (name, t) in sample {
                    let (dtype, shape, bytes) = raw(t);
                    outputs.append((name.as_str(), dtype, shape, PyBytes::new(py, &bytes)))?;
                }
                all.append(outputs)?;
            }
            self.callable.bind(py).call1((all,))?.extract::<f64>()
        })
        .map_err(|e| e.to_string())
    }
}
