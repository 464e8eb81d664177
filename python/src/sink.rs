//! The command's progress, and the Python error that stops it: lines go to
//! a Python callback, Ctrl-C (a pending signal) and an exception in the
//! callback or in the caller's samples stop the command at its next stage,
//! and the error is raised again once it returns.

use std::sync::{Arc, Mutex};

use pyo3::prelude::*;

use infopt_ops::progress::Progress;

/// The Python error that stopped the command (the first one).
pub type Stop = Arc<Mutex<Option<PyErr>>>;

pub fn stop(slot: &Stop, e: PyErr) {
    if let Ok(mut s) = slot.lock() {
        s.get_or_insert(e);
    }
}

pub fn is_stopped(slot: &Stop) -> bool {
    slot.lock().map(|s| s.is_some()).unwrap_or(true)
}

/// Receives a command's progress on its worker thread; takes the GIL only
/// for the moment of a callback or a signal check.
pub struct PySink {
    pub callback: Option<Py<PyAny>>,
    pub stopped: Stop,
}

impl Progress for PySink {
    fn line(&self, stage: &str, line: &str) {
        let Some(cb) = &self.callback else { return };
        if is_stopped(&self.stopped) {
            return;
        }
        if let Err(e) = Python::attach(|py| cb.call1(py, (stage, line)).map(drop)) {
            stop(&self.stopped, e);
        }
    }

    fn proceed(&self) -> bool {
        if is_stopped(&self.stopped) {
            return false;
        }
        match Python::attach(|py| py.check_signals()) {
            Ok(()) => true,
            Err(e) => {
                stop(&self.stopped, e);
                false
            }
        }
    }
}
