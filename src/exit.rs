//! Exit codes (documented in README.md; stable across releases) and the
//! error type commands return.

use std::fmt;
use std::process::ExitCode;

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

/// A one-line error and the exit code it maps to.
#[derive(Debug)]
pub struct CliError {
    pub exit: Exit,
    pub message: String,
}

impl CliError {
    pub fn new(exit: Exit, message: impl fmt::Display) -> CliError {
        CliError {
            exit,
            message: message.to_string(),
        }
    }

    pub fn usage(message: impl fmt::Display) -> CliError {
        CliError::new(Exit::Usage, message)
    }

    /// Classifies an IR error: reading/decoding problems are load errors,
    /// writing problems are write errors.
    pub fn from_ir(e: infopt_ir::IrError) -> CliError {
        use infopt_ir::IrError as E;
        let exit = match &e {
            E::Write { .. } | E::TooLarge { .. } | E::NoOutputFolder { .. } => Exit::Write,
            E::WouldOverwriteInput { .. } => Exit::Usage,
            _ => Exit::Load,
        };
        CliError::new(exit, e)
    }
}

impl From<infopt_verify::VerifyError> for CliError {
    fn from(e: infopt_verify::VerifyError) -> CliError {
        use infopt_verify::ErrorKind as K;
        let exit = match e.kind {
            K::Usage => Exit::Usage,
            K::Load => Exit::Load,
            K::Mismatch => Exit::Verify,
            K::CannotVerify => Exit::CannotVerify,
            K::Unavailable => Exit::Unavailable,
            K::Internal => Exit::Internal,
        };
        CliError::new(exit, e.message)
    }
}

impl From<infopt_passes::PassError> for CliError {
    /// Pipeline mistakes are usage errors, a malformed model found by a pass
    /// a model error, anything else a bug.
    fn from(e: infopt_passes::PassError) -> CliError {
        use infopt_passes::PassError as P;
        match e {
            P::Config(m) => CliError::usage(m),
            P::Model(m) => CliError::new(Exit::Load, m),
            // The way around a crashed pass, in the command line's words.
            P::Panicked { ref pass, .. } => CliError::new(
                Exit::Internal,
                format!("{e}; --disable {pass} skips the pass"),
            ),
            other => CliError::new(Exit::Internal, other),
        }
    }
}

impl fmt::Display for CliError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

pub type CliResult<T = ()> = Result<T, CliError>;
