//! Model files: loaded into the IR and validated (every command), saved with
//! one line about what was written, or loaded into a backend with the
//! inputs it runs on (what `bench`, `compare` and the latency gate time and run).

use std::path::{Path, PathBuf};
use std::time::Instant;

use infopt_runtime::{Backend, HostTensor, LoadedModel, RuntimeError};

use crate::error::{ErrorKind, OpsError, OpsResult};
use crate::inputs_arg::{InputSource, Inputs};

/// A runtime error as a command's error: configuration problems (no library, bad
/// option) are usage errors, the rest `kind`.
pub fn runtime_error(e: RuntimeError, kind: ErrorKind) -> OpsError {
    match e {
        RuntimeError::InvalidArgument(m) => OpsError::usage(m),
        RuntimeError::Unavailable { .. } => OpsError::new(ErrorKind::Unavailable, e),
        e => OpsError::new(kind, e),
    }
}

/// A model loaded in a backend, with its inputs prepared.
pub struct Loaded {
    pub path: PathBuf,
    pub model: Box<dyn LoadedModel>,
    pub inputs: Vec<HostTensor>,
    pub load_ms: f64,
}

/// Reads a model file (bytes as they are: the backend resolves external data against
/// the model's folder).
pub fn read_model(path: &Path) -> OpsResult<(Vec<u8>, PathBuf)> {
    if !path.is_file() {
        return Err(OpsError::new(
            ErrorKind::Load,
            format!("{} does not exist", path.display()),
        ));
    }
    // The backend resolves external data itself; our checks (inside the
    // model's folder, no symlink escape) come first.
    infopt_ir::external::check_locations(path)
        .map_err(|e| OpsError::new(ErrorKind::Load, format!("{}: {e}", path.display())))?;
    let bytes = std::fs::read(path)
        .map_err(|e| OpsError::new(ErrorKind::Load, format!("{}: {e}", path.display())))?;
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    };
    Ok((bytes, dir))
}

/// Loads one model in the backend and prepares its inputs.
pub fn load(backend: &dyn Backend, path: &Path, inputs: &Inputs) -> OpsResult<Loaded> {
    let (bytes, dir) = read_model(path)?;
    let started = Instant::now();
    let model = backend.load(&bytes, Some(&dir), &inputs.shapes).map_err(|e| match e {
        // Shapes that do not fit the model come from the command line or the file.
        RuntimeError::UnknownName(_) | RuntimeError::InputShape { .. } => {
            let hint = match &inputs.source {
                InputSource::File { path } => {
                    format!(
                        " (the arrays of --inputs {path} must be named after the model inputs and fit their shapes)"
                    )
                }
                InputSource::Generated { .. } => String::new(),
            };
            OpsError::usage(format!("{}: {e}{hint}", path.display()))
        }
        e => {
            let mut e = runtime_error(e, ErrorKind::Load);
            if e.kind != ErrorKind::Usage {
                e.message = format!("{}: {}", path.display(), e.message);
            }
            e
        }
    })?;
    let load_ms = started.elapsed().as_secs_f64() * 1e3;
    let tensors = inputs
        .for_model(model.as_ref())
        .map_err(|m| OpsError::usage(format!("{}: {m}", path.display())))?;
    Ok(Loaded {
        path: path.to_path_buf(),
        model,
        inputs: tensors,
        load_ms,
    })
}

/// Loads and validates a model (structure, and the attributes that size
/// allocations), mapping failures to load errors.
pub fn load_model(path: &Path) -> OpsResult<infopt_ir::Model> {
    if !path.exists() {
        return Err(OpsError::new(
            ErrorKind::Load,
            format!("{} does not exist", path.display()),
        ));
    }
    let model = infopt_ir::Model::load(path).map_err(|e| {
        use infopt_ir::IrError as E;
        let names_path = matches!(
            e,
            E::Read { .. } | E::EmptyFile { .. } | E::Decode { .. } | E::NotOnnx { .. }
        );
        let mut err = OpsError::from_ir(e);
        if !names_path {
            err.message = format!("{}: {}", path.display(), err.message);
        }
        err
    })?;
    model
        .check_opset_imports()
        .map_err(|e| OpsError::new(ErrorKind::Load, format!("{}: {e}", path.display())))?;
    model
        .graph
        .validate()
        .map_err(|e| OpsError::new(ErrorKind::Load, format!("{}: {e}", path.display())))?;
    // Before any pass or runtime sizes a buffer by an attribute.
    model
        .check_attributes()
        .map_err(|e| OpsError::new(ErrorKind::Load, format!("{}: {e}", path.display())))?;
    Ok(model)
}

/// One progress line about what a save wrote.
pub fn print_save_summary(path: &Path, summary: &infopt_ir::SaveSummary) {
    let line = match &summary.external_file {
        Some(f) => format!(
            "wrote {} ({} bytes) and {} ({} tensors, {} bytes)",
            path.display(),
            summary.model_bytes,
            f.display(),
            summary.external_tensors,
            summary.external_bytes
        ),
        None => format!("wrote {} ({} bytes)", path.display(), summary.model_bytes),
    };
    crate::progress::note("save", line);
}
