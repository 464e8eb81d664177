//! What every call of a command needs around it: the registrations of the
//! process (once), and a panic turned into an [`ErrorKind::Internal`] error.

use std::sync::Once;

use crate::error::{ErrorKind, OpsError, OpsResult};

/// Registrations every front end needs once per process: passes of other
/// crates join the registry; constant folding may ask tract for ops the
/// reference kernels lack, and puts each kind of fold to ONNX Runtime.
pub fn init() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        infopt_calibration::quantize::register();
        infopt_passes::fold_constants::register_fallback_evaluator(crate::tract_eval::factory);
        // Each kind of fold checked once against ONNX Runtime (issue 30).
        infopt_passes::fold_constants::register_fold_check(infopt_verify::fold_check::checked);
    });
}

/// Runs `f` so that a panic (a bug in infopt, whatever the input) becomes
/// one line and an internal error, never a backtrace.
pub fn guarded<T>(f: impl FnOnce() -> OpsResult<T>) -> OpsResult<T> {
    infopt_passes::panic_guard::catch_quietly(f).unwrap_or_else(|c| {
        Err(OpsError::new(
            ErrorKind::Internal,
            format!(
                "internal error: {}{}; this is a bug in infopt (please report it with the model)",
                c.message,
                c.location.map(|l| format!(" ({l})")).unwrap_or_default()
            ),
        ))
    })
}
