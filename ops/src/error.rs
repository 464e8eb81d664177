//! The error every command returns: what kind of failure it is and one line
//! saying what went wrong and how to fix it. Front ends map the kind to what
//! they show (the command line to an exit code in `src/exit.rs`, the Python
//! module to an exception class); this crate names no exit code.

use std::fmt;

/// What kind of failure a command ended with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ErrorKind {
    /// A bug in infopt (please report it).
    Internal,
    /// Bad options or configuration.
    Usage,
    /// The model could not be read: missing, not ONNX, invalid, bad external data.
    Load,
    /// The optimized model does not compute the same outputs within tolerance.
    Verify,
    /// A release gate (accuracy or latency) failed.
    Gate,
    /// The output could not be written.
    Write,
    /// Verification could not run: the model loads, but no available backend
    /// runs it at the sizes tried (the message says which `--input-shape`
    /// would let it, or `--no-verify`). `optimize` writes the output anyway
    /// when its pipeline changed only how the model is stored.
    CannotVerify,
    /// A runtime the command needs is not installed (TensorRT for
    /// `build-engine`, ONNX Runtime when asked for); the message says how to
    /// get it.
    Unavailable,
    /// The caller asked the command to stop (its [`crate::progress::Sink`]
    /// said no at a stage boundary).
    Interrupted,
}

/// A one-line error and its kind.
#[derive(Debug)]
pub struct OpsError {
    pub kind: ErrorKind,
    pub message: String,
}

impl OpsError {
    pub fn new(kind: ErrorKind, message: impl fmt::Display) -> OpsError {
        OpsError {
            kind,
            message: message.to_string(),
        }
    }

    pub fn usage(message: impl fmt::Display) -> OpsError {
        OpsError::new(ErrorKind::Usage, message)
    }

    /// Classifies an IR error: reading/decoding problems are load errors,
    /// writing problems are write errors.
    pub fn from_ir(e: infopt_ir::IrError) -> OpsError {
        use infopt_ir::IrError as E;
        let kind = match &e {
            E::Write { .. } | E::TooLarge { .. } | E::NoOutputFolder { .. } => ErrorKind::Write,
            E::WouldOverwriteInput { .. } => ErrorKind::Usage,
            _ => ErrorKind::Load,
        };
        OpsError::new(kind, e)
    }
}

impl From<infopt_verify::VerifyError> for OpsError {
    fn from(e: infopt_verify::VerifyError) -> OpsError {
        use infopt_verify::ErrorKind as K;
        let kind = match e.kind {
            K::Usage => ErrorKind::Usage,
            K::Load => ErrorKind::Load,
            K::Mismatch => ErrorKind::Verify,
            K::CannotVerify => ErrorKind::CannotVerify,
            K::Unavailable => ErrorKind::Unavailable,
            K::Internal => ErrorKind::Internal,
        };
        OpsError::new(kind, e.message)
    }
}

impl From<infopt_passes::PassError> for OpsError {
    /// Pipeline mistakes are usage errors, a malformed model found by a pass
    /// a model error, anything else a bug.
    fn from(e: infopt_passes::PassError) -> OpsError {
        use infopt_passes::PassError as P;
        match e {
            P::Config(m) => OpsError::usage(m),
            P::Model(m) => OpsError::new(ErrorKind::Load, m),
            // The way around a crashed pass, in the command line's words.
            P::Panicked { ref pass, .. } => OpsError::new(
                ErrorKind::Internal,
                format!("{e}; --disable {pass} skips the pass"),
            ),
            other => OpsError::new(ErrorKind::Internal, other),
        }
    }
}

impl fmt::Display for OpsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for OpsError {}

pub type OpsResult<T = ()> = Result<T, OpsError>;
