//! Errors of the IR crate. Every message is one line, names the node, tensor or
//! file concerned, and where possible says how to fix it.

use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum IrError {
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

    #[error(
        "cannot write {path}: its folder {folder} does not exist; create it first, or choose another output path"
    )]
    NoOutputFolder { path: PathBuf, folder: PathBuf },

    #[error("refusing to overwrite the input file {path}; choose another output path")]
    WouldOverwriteInput { path: PathBuf },

    #[error("{path} is empty (0 bytes): not an ONNX model")]
    EmptyFile { path: PathBuf },

    #[error(
        "{path} is not a valid ONNX model: {detail} (is the file truncated or of another format?)"
    )]
    Decode { path: PathBuf, detail: String },

    #[error("{path} is not an ONNX model: it decodes as protobuf but has {detail}")]
    NotOnnx { path: PathBuf, detail: String },

    #[error("tensor '{tensor}': {problem}")]
    BadTensor { tensor: String, problem: String },

    #[error("external data of tensor '{tensor}': {problem}")]
    ExternalData { tensor: String, problem: String },

    #[error(
        "node '{node}' ({op}) reads '{input}', which no node, initializer or graph input defines"
    )]
    UndefinedInput {
        node: String,
        op: String,
        input: String,
    },

    #[error(
        "value '{name}' is defined twice: by {first} and by {second}; ONNX values must have exactly one producer"
    )]
    DuplicateDefinition {
        name: String,
        first: String,
        second: String,
    },

    #[error("the graph has a cycle through node '{node}' ({op}); ONNX graphs must be acyclic")]
    Cycle { node: String, op: String },

    #[error("graph output '{name}' is listed more than once")]
    DuplicateOutput { name: String },

    #[error("graph output '{name}' is not produced by any node, initializer or input")]
    UndefinedOutput { name: String },

    #[error("node '{node}' ({op}): attribute '{attr}': {problem}")]
    Attribute {
        node: String,
        op: String,
        attr: String,
        problem: String,
    },

    #[error("invalid graph: {0}")]
    Invalid(String),

    #[error(
        "the model imports opset {version} of {domain}, which released ONNX does not define (opsets 1 to {newest}): set the opset import to the version the model was exported at, or export it again"
    )]
    UnknownOpset {
        domain: String,
        version: i64,
        newest: i64,
    },

    #[error("unsupported: {0}")]
    Unsupported(String),

    #[error(
        "the model is {size} bytes, over protobuf's 2 GiB limit; save it with external data (--external-data)"
    )]
    TooLarge { size: u64 },
}

pub type Result<T, E = IrError> = std::result::Result<T, E>;
