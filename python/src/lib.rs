//! `infopt._infopt`: the commands of the `infopt` library crate, callable
//! from Python. The Python package (`python/infopt/`) builds the arguments,
//! maps failures to its exception classes and wraps reports; this module
//! only crosses the boundary: it releases the GIL while a command works,
//! forwards progress lines to a Python callback, and stops the command at
//! the next stage when Python has a pending signal (Ctrl-C).

use std::sync::{Arc, Mutex};

use pyo3::prelude::*;

use infopt::progress::{self, Sink};

mod metric;

/// Receives a command's progress on its worker thread; takes the GIL only
/// for the moment of a callback or a signal check.
struct PySink {
    callback: Option<Py<PyAny>>,
    /// The Python error that stopped the command (KeyboardInterrupt, or one
    /// the callback raised), re-raised once the command returns.
    stopped: Arc<Mutex<Option<PyErr>>>,
}

impl PySink {
    fn stop(&self, e: PyErr) {
        if let Ok(mut s) = self.stopped.lock() {
            s.get_or_insert(e);
        }
    }

    fn is_stopped(&self) -> bool {
        self.stopped.lock().map(|s| s.is_some()).unwrap_or(true)
    }
}

impl Sink for PySink {
    fn line(&self, stage: &str, line: &str) {
        let Some(cb) = &self.callback else { return };
        if self.is_stopped() {
            return;
        }
        if let Err(e) = Python::attach(|py| cb.call1(py, (stage, line)).map(drop)) {
            self.stop(e);
        }
    }

    fn proceed(&self) -> bool {
        if self.is_stopped() {
            return false;
        }
        match Python::attach(|py| py.check_signals()) {
            Ok(()) => true,
            Err(e) => {
                self.stop(e);
                false
            }
        }
    }
}

/// A command's result as Python values: exit code (0 when it passed), the
/// one-line message of its failure, and its report (command, JSON, Markdown,
/// text) when it got that far.
type Returned = (u8, Option<String>, Option<(String, String, String, String)>);

/// Runs one command (`args` without the program name) and returns
/// `(exit_code, message, report)`; `progress(stage, line)` is called for
/// progress lines when given; `metric(samples)` scores INT8 candidates (see
/// `metric.rs`) when given.
#[pyfunction]
#[pyo3(signature = (args, progress=None, metric=None))]
fn run(
    py: Python<'_>,
    args: Vec<String>,
    progress: Option<Py<PyAny>>,
    metric: Option<Py<PyAny>>,
) -> PyResult<Returned> {
    let stopped = Arc::new(Mutex::new(None));
    let sink = PySink {
        callback: progress,
        stopped: stopped.clone(),
    };
    let finished = py.detach(move || {
        progress::with_sink(Box::new(sink), || match metric {
            Some(callable) => {
                infopt::int8::metric::with_metric(Box::new(metric::PyMetric { callable }), || {
                    infopt::api::execute(args)
                })
            }
            None => infopt::api::execute(args),
        })
    });
    if let Some(e) = stopped.lock().ok().and_then(|mut s| s.take()) {
        return Err(e);
    }
    let (code, message) = match finished.failure {
        Some(e) => (e.exit as u8, Some(e.message.replace('\n', " "))),
        None => (0, None),
    };
    let report = finished
        .report
        .map(|r| (r.command.to_string(), r.json, r.markdown, r.text));
    Ok((code, message, report))
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
