//! Exit codes (documented in README.md; stable across releases): the
//! mapping from a command's [`ErrorKind`] to the process's exit status.

use std::process::ExitCode;

pub use infopt_ops::error::{ErrorKind, OpsError, OpsResult};

/// The process exit codes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Exit {
    /// Success.
    Ok = 0,
    /// A bug in infopt (please report it).
    Internal = 1,
    /// Bad command line or configuration.
    Usage = 2,
    /// The model could not be read: missing, not ONNX, invalid, bad external data.
    Load = 3,
    /// The optimized model does not compute the same outputs within tolerance.
    Verify = 4,
    /// A release gate (accuracy or latency) failed.
    Gate = 5,
    /// The output could not be written.
    Write = 6,
    /// Verification could not run: the model loads, but no available backend
    /// runs it at the sizes tried (the message says which `--input-shape`
    /// would let it, or `--no-verify`). `optimize` writes the output anyway
    /// when its pipeline changed only how the model is stored.
    CannotVerify = 7,
    /// A runtime the command needs is not installed (TensorRT for
    /// `build-engine`, ONNX Runtime when asked for); the message says how to
    /// get it.
    Unavailable = 8,
    /// A library caller asked the command to stop (Ctrl-C in Python); the
    /// command line never returns it (Ctrl-C ends the process there).
    Interrupted = 130,
}

impl From<Exit> for ExitCode {
    fn from(e: Exit) -> ExitCode {
        ExitCode::from(e as u8)
    }
}

impl From<ErrorKind> for Exit {
    /// The only place a command's error kind becomes a process exit code.
    fn from(kind: ErrorKind) -> Exit {
        match kind {
            ErrorKind::Internal => Exit::Internal,
            ErrorKind::Usage => Exit::Usage,
            ErrorKind::Load => Exit::Load,
            ErrorKind::Verify => Exit::Verify,
            ErrorKind::Gate => Exit::Gate,
            ErrorKind::Write => Exit::Write,
            ErrorKind::CannotVerify => Exit::CannotVerify,
            ErrorKind::Unavailable => Exit::Unavailable,
            ErrorKind::Interrupted => Exit::Interrupted,
        }
    }
}

impl From<&OpsError> for Exit {
    fn from(e: &OpsError) -> Exit {
        Exit::from(e.kind)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kind_has_its_documented_code() {
        let codes = [
            (ErrorKind::Internal, 1),
            (ErrorKind::Usage, 2),
            (ErrorKind::Load, 3),
            (ErrorKind::Verify, 4),
            (ErrorKind::Gate, 5),
            (ErrorKind::Write, 6),
            (ErrorKind::CannotVerify, 7),
            (ErrorKind::Unavailable, 8),
            (ErrorKind::Interrupted, 130),
        ];
        for (kind, code) in codes {
            assert_eq!(Exit::from(kind) as u8, code, "{kind:?}");
        }
    }
}
