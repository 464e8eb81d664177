//! The crate's error type. Every message is one line that names the file (and line, when
//! there is one) or the tensor involved, and says what to change.

use std::path::PathBuf;

pub type Result<T, E = CalibError> = std::result::Result<T, E>;

#[derive(Debug, thiserror::Error)]
pub enum CalibError {
    #[error("cannot read {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("cannot write {path}: {source}")]
    Write {
        path: PathBuf,
        source: std::io::Error,
    },
    /// A malformed file; `line` is 1-based, 0 when the problem is not tied to a line.
    #[error("{}: {message}", location(path, *line))]
    Parse {
        path: PathBuf,
        line: usize,
        message: String,
    },
    #[error("{path}: cannot decode image: {message}")]
    Image { path: PathBuf, message: String },
    #[error("invalid calibration setting: {0}")]
    Config(String),
}

fn location(path: &std::path::Path, line: usize) -> String {
    if line == 0 {
        path.display().to_string()
    } else {
        format!("{}:{line}", path.display())
    }
}

impl CalibError {
    pub(crate) fn parse(path: impl Into<PathBuf>, line: usize, message: impl Into<String>) -> Self {
        CalibError::Parse {
            path: path.into(),
            line,
            message: message.into(),
        }
    }
}
