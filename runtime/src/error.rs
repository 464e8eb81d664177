//! The runtime's error type. Every message is one line and names what it is about
//! (the input, the output, or the backend's own message chain).

use thiserror::Error;

pub type Result<T, E = RuntimeError> = std::result::Result<T, E>;

#[derive(Debug, Error)]
pub enum RuntimeError {
    /// The bytes are not an ONNX `ModelProto`.
    #[error("the model is not a valid ONNX protobuf: {0}")]
    Decode(String),

    /// The backend could not import, type or optimize the model.
    #[error("{backend} cannot load the model: {message}")]
    Load { backend: String, message: String },

    /// The backend's load did not finish within its deadline (tract's
    /// symbolic analysis of some graphs grows without bound); the load was
    /// given up, and its thread may still be working.
    #[error("{backend} cannot load the model: {message}")]
    LoadTimedOut { backend: String, message: String },

    /// The backend's own check of the model refused it: ONNX Runtime's graph
    /// resolution found a node its schema, or its type and shape inference,
    /// rejects. The model is wrong, not the backend (the message names the
    /// node where the backend's text does).
    #[error("{backend} finds the model invalid: {message}")]
    InvalidModel { backend: String, message: String },

    /// The backend failed while running the model.
    #[error("{backend} failed to run the model: {message}")]
    Run { backend: String, message: String },

    /// A model input or output has an element type this crate cannot hold.
    #[error("{kind} `{name}` has element type {dtype}, which {backend} does not support here")]
    UnsupportedDType {
        backend: String,
        kind: &'static str,
        name: String,
        dtype: String,
    },

    /// The shapes requested for an input, or the symbol bindings, do not fit the model.
    #[error("input `{input}`: {message}")]
    InputShape { input: String, message: String },

    /// `InputShapes` names an input or a symbol the model does not have.
    #[error("{0}")]
    UnknownName(String),

    /// A tensor handed to `run` does not match what the model expects.
    #[error("input `{input}`: {message}")]
    InputMismatch { input: String, message: String },

    /// A host tensor whose data does not fit its shape.
    #[error("tensor `{name}`: {message}")]
    InvalidTensor { name: String, message: String },

    /// A caller-side argument is out of range (e.g. zero timed runs).
    #[error("{0}")]
    InvalidArgument(String),

    /// A runtime this operation needs is not installed, not found, or the wrong version
    /// (e.g. TensorRT, or the infopt TensorRT shim). The message names what is missing and
    /// how to get it; the CLI maps this variant to its own exit code.
    #[error("{runtime} is not available: {message}")]
    Unavailable { runtime: String, message: String },
}

/// Joins an error chain into one line: each cause separated by `": "`, newlines and
/// runs of whitespace collapsed, consecutive duplicate causes dropped.
pub(crate) fn one_line<'a>(
    chain: impl IntoIterator<Item = &'a (dyn std::error::Error + 'static)>,
) -> String {
    let mut parts: Vec<String> = Vec::new();
    for cause in chain {
        let text = cause
            .to_string()
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ");
        if text.is_empty() || parts.last() == Some(&text) {
            continue;
        }
        parts.push(text);
    }
    parts.join(": ")
}
