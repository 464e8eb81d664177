//! ONNX Runtime's own per-node profile, for finding where a model's time goes
//! on a provider (which kernels a float16 model still spends its time in, on
//! the GPU, say): with `INFOPT_ORT_PROFILE_DIR=DIR` set, every ONNX Runtime
//! session infopt creates writes ONNX Runtime's profile (Chrome trace JSON,
//! one event per node run with its op type, provider and duration) into DIR
//! when the session is dropped.
//!
//! An environment variable rather than a flag: it is a diagnostic for the
//! person tuning a deployment, it applies to every command that runs models
//! (bench, compare, optimize's verification), and it changes no result.

use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};

/// The variable that turns the profile on.
pub const PROFILE_DIR_VAR: &str = "INFOPT_ORT_PROFILE_DIR";

/// Sessions created so far in this process: ONNX Runtime names a profile
/// `PREFIX_<date and time to the second>.json`, so two sessions created in
/// the same second would share a file without a number in the prefix.
static SESSIONS: AtomicUsize = AtomicUsize::new(0);

/// The profile prefix for the next session (`DIR/session-N`), or `None` when
/// profiling is off. The folder is created if it is missing.
pub fn next_prefix() -> std::io::Result<Option<PathBuf>> {
    let Some(dir) = std::env::var_os(PROFILE_DIR_VAR).filter(|d| !d.is_empty()) else {
        return Ok(None);
    };
    let dir = PathBuf::from(dir);
    std::fs::create_dir_all(&dir)?;
    let n = SESSIONS.fetch_add(1, Ordering::Relaxed);
    Ok(Some(dir.join(format!("session-{n}"))))
}
