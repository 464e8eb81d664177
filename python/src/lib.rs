//! `infopt._infopt`: the commands of `infopt-ops`, callable from Python
//! without a command line. The Python package (`python/infopt/`) gathers
//! the keywords, maps failures to its exception classes and wraps reports;
//! this module only crosses the boundary: it builds the command's options
//! from the keywords (`infopt_ops::keywords`), attaches the caller's samples
//! and arrays (no files), releases the GIL while the command works,
//! forwards progress lines to a Python callback, and stops the command at
//! the next stage when Python has a pending signal (Ctrl-C).

use std::sync::{Arc, Mutex};

use pyo3::prelude::*;

use infopt_calibration::run::Streamed;
use infopt_ops::error::OpsError;
use infopt_ops::keywords::Call;

mod arrays;
mod metric;
mod samples;
mod sink;

use sink::{PySink, Stop};

/// A command's result as Python values: exit code (0 when it passed), the
/// one-line message of its failure, and its report (command, JSON, Markdown,
/// text) when it got that far.
type Returned = (u8, Option<String>, Option<(String, String, String, String)>);

/// What reports call arrays given as `inputs=` (no file names them).
const GIVEN_ARRAYS: &str = "arrays given in memory";

fn failed(e: &OpsError) -> Returned {
    let code = infopt::exit::Exit::from(e.kind) as u8;
    (code, Some(e.message.replace('\n', " ")), None)
}

/// The call: options from the keywords, with the caller's samples and
/// arrays attached.
fn prepare(
    command: &str,
    keywords: &str,
    data: Option<Py<PyAny>>,
    inputs: Option<&Bound<'_, PyAny>>,
    stopped: &Stop,
) -> Result<Call, OpsError> {
    let mut call = infopt_ops::keywords::parse(command, keywords)?;
    if let Some(source) = data {
        let samples = samples::PySamples::new(source, stopped.clone());
        call.options.set_samples(Streamed(Arc::new(samples)))?;
    }
    if let Some(raw) = inputs {
        let arrays = arrays::tensors(raw).map_err(|e| OpsError::usage(format!("inputs: {e}")))?;
        call.options.set_inputs(arrays, GIVEN_ARRAYS)?;
    }
    Ok(call)
}

/// Runs `command` ("optimize", "build-engine", "compare", "bench",
/// "inspect", "calibrate") with `keywords` (its options as one JSON object)
/// and returns `(exit_code, message, report)`. `data`: calibration samples
/// (an `infopt._samples.Samples`); `inputs`: arrays as `[(name, dtype,
/// shape, bytes)]`; `progress(stage, line)` is called for progress lines;
/// `metric(samples)` scores INT8 candidates (see `metric.rs`).
#[pyfunction]
#[pyo3(signature = (command, keywords, data=None, inputs=None, progress=None, metric=None))]
fn run(
    py: Python<'_>,
    command: &str,
    keywords: &str,
    data: Option<Py<PyAny>>,
    inputs: Option<Bound<'_, PyAny>>,
    progress: Option<Py<PyAny>>,
    metric: Option<Py<PyAny>>,
) -> PyResult<Returned> {
    let stopped: Stop = Arc::new(Mutex::new(None));
    let call = match prepare(command, keywords, data, inputs.as_ref(), &stopped) {
        Ok(call) => call,
        Err(e) => return Ok(failed(&e)),
    };
    let sink = PySink {
        callback: progress,
        stopped: stopped.clone(),
    };
    let finished = py.detach(move || match metric {
        Some(callable) => {
            infopt_ops::int8::metric::with_metric(Box::new(metric::PyMetric { callable }), || {
                infopt::api::execute(&call, &sink)
            })
        }
        None => infopt::api::execute(&call, &sink),
    });
    if let Some(e) = stopped.lock().ok().and_then(|mut s| s.take()) {
        return Err(e);
    }
    let report = finished
        .report
        .map(|r| (r.command.to_string(), r.json, r.markdown, r.text));
    Ok(match finished.failure {
        Some(e) => {
            let (code, message, _) = failed(&e);
            (code, message, report)
        }
        None => (0, None, report),
    })
}

/// The whole `infopt` command line (`argv[0]` is the program name): prints
/// like the command and returns its exit code. The wheel's `infopt` script
/// calls this, so the command and the module are one build.
#[pyfunction]
fn main(py: Python<'_>, argv: Vec<String>) -> u8 {
    py.detach(move || infopt::cli::main(argv) as u8)
}

#[pymodule]
fn _infopt(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(run, m)?)?;
    m.add_function(wrap_pyfunction!(main, m)?)?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
