//! Errors that say what kind of failure they are, so the CLI picks an exit
//! code from the kind, never from the message.

use std::fmt;

use infopt_runtime::RuntimeError;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ErrorKind {
    /// The command line or configuration is wrong (a bad shape, no such backend).
    Usage,
    /// The model cannot be read or no backend can even load it.
    Load,
    /// The candidate model does not compute the same outputs.
    Mismatch,
    /// The model loads but cannot be run to check it (shapes it does not
    /// accept, an op no available backend runs).
    CannotVerify,
    /// A runtime that is required here is not installed.
    Unavailable,
    /// A bug.
    Internal,
}

/// A one-line error and its kind.
#[derive(Debug, Clone)]
pub struct VerifyError {
    pub kind: ErrorKind,
    pub message: String,
}

impl VerifyError {
    pub fn new(kind: ErrorKind, message: impl fmt::Display) -> VerifyError {
        VerifyError {
            kind,
            message: message.to_string(),
        }
    }

    pub fn usage(message: impl fmt::Display) -> VerifyError {
        VerifyError::new(ErrorKind::Usage, message)
    }

    /// A runtime error, with `kind` for the ones that are not configuration
    /// problems (a missing library, a bad option: those are usage errors).
    pub fn runtime(e: RuntimeError, kind: ErrorKind) -> VerifyError {
        match e {
            RuntimeError::InvalidArgument(m) => VerifyError::usage(m),
            RuntimeError::Unavailable { .. } => VerifyError::new(ErrorKind::Unavailable, e),
            e => VerifyError::new(kind, e),
        }
    }

    /// Prefixes the message (`"model.onnx: "`).
    pub fn context(mut self, prefix: impl fmt::Display) -> VerifyError {
        self.message = format!("{prefix}: {}", self.message);
        self
    }
}

impl fmt::Display for VerifyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for VerifyError {}

pub type Result<T, E = VerifyError> = std::result::Result<T, E>;
