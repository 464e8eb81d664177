//! Choosing and building a backend: a typed kind instead of names, and the
//! facts reports print about it.

use std::path::PathBuf;

use infopt_runtime::ort_backend::{OptLevel, OrtBackend, OrtOptions};
use infopt_runtime::{Backend, TractBackend, TractOneShot, Transfer};
use serde::Serialize;

use crate::error::{ErrorKind, Result, VerifyError};

/// The backends infopt runs models in.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum BackendKind {
    /// tract with its graph optimizer: slower to load, faster per run.
    Tract,
    /// tract without its optimizer: for one-shot runs of large graphs, whose
    /// optimization costs more than it saves.
    TractOneShot,
    /// ONNX Runtime, loaded at run time.
    Ort,
}

impl BackendKind {
    /// Parses a `--backend` value.
    pub fn parse(name: &str) -> Result<BackendKind> {
        match name.to_ascii_lowercase().as_str() {
            "tract" => Ok(BackendKind::Tract),
            "ort" | "onnxruntime" => Ok(BackendKind::Ort),
            other => Err(VerifyError::usage(format!(
                "unknown backend `{other}` (choose one of {})",
                infopt_runtime::ort_backend::BACKEND_NAMES.join(", ")
            ))),
        }
    }

    pub fn is_tract(self) -> bool {
        matches!(self, BackendKind::Tract | BackendKind::TractOneShot)
    }
}

/// Options of the backends (`--ort-dylib`, `--threads`, `--ort-opt-level`, `--ep`).
#[derive(Clone, Debug, Default)]
pub struct BackendOptions {
    pub ort_dylib: Option<PathBuf>,
    pub threads: Option<usize>,
    pub ort_opt_level: OptLevel,
    pub execution_providers: Vec<String>,
    /// Provider options (`--ep-option cuda:prefer_nhwc=1`).
    pub ep_options: Vec<infopt_runtime::ort_backend::EpOption>,
    /// ONNX Runtime runs with the weights memory-mapped (see
    /// `OrtOptions::map_weights`): set by the verifier for models whose
    /// weights do not fit in memory.
    pub map_weights: bool,
    /// How timed runs move data (`--io-binding`: device-resident).
    pub transfer: Transfer,
    /// On CUDA, run the reference without TF32 (float32 as specified): set for
    /// precision changes, whose candidates are judged against true float32.
    pub reference_tf32_off: bool,
    /// ONNX Runtime's threads sleep between runs (see `OrtOptions::no_spin`):
    /// for a backend whose runs alternate with the caller's work.
    pub no_spin: bool,
}

/// The backend as reports describe it.
#[derive(Serialize, Debug, Clone)]
pub struct BackendInfo {
    pub name: String,
    /// The runtime whose outputs for the original are the reference: ONNX
    /// Runtime (graph optimizations off) when it is available, tract only
    /// when it is not or cannot run the original.
    pub reference_runtime: String,
    pub version: String,
    /// Intra-op threads; `None` is the backend's default.
    pub threads: Option<usize>,
    /// ONNX Runtime only: the level the candidate runs at, as the user will
    /// run it.
    pub opt_level: Option<String>,
    /// ONNX Runtime only: the level the original (the reference) runs at.
    /// Always `disable`: ORT's own fusions are another optimizer, and one
    /// that mis-fuses (its LayerNorm fusion on a Pow with swapped operands)
    /// would make the reference outputs wrong and refuse a correct rewrite.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reference_opt_level: Option<String>,
    pub execution_providers: Vec<String>,
    /// ONNX Runtime only: the shared library in use.
    pub library: Option<String>,
    /// Weights stay memory-mapped in their files (prepacking and graph
    /// optimization off): the model did not fit in memory.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub weights_mapped: bool,
    /// How the latencies measured in this backend moved data: `host-to-host`
    /// (inputs in and outputs out on every run) or `device-resident`.
    pub transfer: Transfer,
    /// ONNX Runtime on CUDA: the reference ran with TF32 off (`cuda:use_tf32=0`),
    /// float32 as specified.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub reference_tf32_off: bool,
}

impl BackendInfo {
    /// The backend as the reference runs it: ONNX Runtime at the reference's
    /// level (what calibration observes the original in); others unchanged.
    pub fn at_reference(&self) -> BackendInfo {
        let mut info = self.clone();
        if let Some(level) = info.reference_opt_level.clone() {
            info.opt_level = Some(level);
        }
        info
    }

    /// The reference as messages name it.
    pub fn reference_description(&self) -> String {
        match &self.reference_opt_level {
            Some(level) => format!(
                "the original in {} at graph optimization level {level}",
                self.reference_runtime
            ),
            None => format!("the original in {}", self.reference_runtime),
        }
    }

    pub fn describe(&self) -> String {
        let mut parts = Vec::new();
        parts.push(match self.threads {
            Some(n) => format!("threads {n}"),
            None => "threads default".into(),
        });
        match (&self.opt_level, &self.reference_opt_level) {
            (Some(l), Some(r)) if l != r || self.reference_tf32_off => parts.push(format!(
                "opt {l}, original at opt {r}{}",
                if self.reference_tf32_off {
                    " without TF32"
                } else {
                    ""
                }
            )),
            (Some(l), _) => parts.push(format!("opt {l}")),
            _ => {}
        }
        if self.weights_mapped {
            parts.push("weights memory-mapped, prepacking off".into());
        }
        if !self.execution_providers.is_empty() {
            parts.push(self.execution_providers.join(" > "));
        }
        if self.transfer == Transfer::DeviceResident {
            parts.push(format!("timing {}", self.transfer));
        }
        format!("{} ({})", self.version, parts.join(", "))
    }
}

/// A backend ready to load models, with its kind and description.
pub struct ChosenBackend {
    pub kind: BackendKind,
    /// Runs candidates (and the original for timing) as the user will.
    pub backend: Box<dyn Backend>,
    /// Runs the original for its reference outputs where that must differ
    /// from `backend`: ONNX Runtime with graph optimizations disabled.
    pub reference: Option<Box<dyn Backend>>,
    pub info: BackendInfo,
}

impl ChosenBackend {
    /// Builds the backend of `kind`. A missing ONNX Runtime is a usage error
    /// naming where it was looked for and how to install it.
    pub fn build(kind: BackendKind, options: &BackendOptions) -> Result<ChosenBackend> {
        let mut reference = None;
        let (backend, info): (Box<dyn Backend>, BackendInfo) = match kind {
            BackendKind::Tract | BackendKind::TractOneShot => {
                let b: Box<dyn Backend> = if kind == BackendKind::Tract {
                    Box::new(TractBackend)
                } else {
                    Box::new(TractOneShot)
                };
                let info = BackendInfo {
                    name: b.name().into(),
                    reference_runtime: b.name().into(),
                    version: b.version(),
                    threads: Some(1),
                    opt_level: None,
                    reference_opt_level: None,
                    execution_providers: vec![],
                    library: None,
                    weights_mapped: false,
                    transfer: options.transfer,
                    reference_tf32_off: false,
                };
                (b, info)
            }
            BackendKind::Ort => {
                let ort_options = |opt_level| OrtOptions {
                    dylib: options.ort_dylib.clone(),
                    intra_threads: options.threads,
                    opt_level,
                    execution_providers: options.execution_providers.clone(),
                    ep_options: options.ep_options.clone(),
                    map_weights: options.map_weights,
                    no_spin: options.no_spin,
                    // Set only by a caller that sized it (see `Backend::with_threads`).
                    observe_in_arena: false,
                    observe_budget_bytes: None,
                };
                let b = OrtBackend::new(ort_options(options.ort_opt_level))
                    .map_err(|e| VerifyError::runtime(e, ErrorKind::Usage))?;
                // Mapped weights already run with graph optimization off.
                let level = if options.map_weights {
                    OptLevel::Disable
                } else {
                    options.ort_opt_level
                };
                // On the CUDA provider, for a precision change, the reference
                // computes float32 as float32: ONNX Runtime runs float32
                // Conv/MatMul on TF32 tensor cores by default (10 mantissa bits,
                // float16's), which would put the reference's own error next to
                // a float16 candidate's. The user's own `cuda:use_tf32` is kept.
                let cuda = b
                    .execution_providers()
                    .iter()
                    .any(|p| p == "CUDAExecutionProvider");
                let tf32_off = cuda
                    && options.reference_tf32_off
                    && !options.ep_options.iter().any(|o| {
                        o.key == "use_tf32" && o.ep.to_ascii_lowercase().starts_with("cuda")
                    });
                reference = if level == OptLevel::Disable && !tf32_off {
                    None
                } else {
                    let mut ro = ort_options(OptLevel::Disable);
                    if tf32_off {
                        ro.ep_options.push(infopt_runtime::ort_backend::EpOption {
                            ep: "cuda".into(),
                            key: "use_tf32".into(),
                            value: "0".into(),
                        });
                    }
                    let r = OrtBackend::new(ro)
                        .map_err(|e| VerifyError::runtime(e, ErrorKind::Usage))?;
                    Some(Box::new(r) as Box<dyn Backend>)
                };
                let info = BackendInfo {
                    name: b.name().into(),
                    reference_runtime: b.name().into(),
                    version: b.version(),
                    threads: options.threads,
                    opt_level: Some(level.to_string()),
                    reference_opt_level: Some(OptLevel::Disable.to_string()),
                    execution_providers: b.execution_providers(),
                    library: Some(b.library_path().display().to_string()),
                    weights_mapped: options.map_weights,
                    transfer: options.transfer,
                    reference_tf32_off: tf32_off,
                };
                (Box::new(b), info)
            }
        };
        Ok(ChosenBackend {
            kind,
            backend,
            reference,
            info,
        })
    }

    /// The backend that runs the original for its reference outputs.
    pub fn reference_backend(&self) -> &dyn Backend {
        self.reference.as_deref().unwrap_or(self.backend.as_ref())
    }

    /// Notes for options that do not apply to this backend.
    pub fn option_notes(&self, options: &BackendOptions) -> Vec<String> {
        let mut notes = Vec::new();
        if self.kind.is_tract() {
            if options.ort_dylib.is_some()
                || !options.execution_providers.is_empty()
                || !options.ep_options.is_empty()
            {
                notes.push("--ort-dylib, --ep and --ep-option apply to --backend ort only".into());
            }
            if options.threads.is_some_and(|n| n != 1) {
                notes.push("tract runs on one thread; --threads applies to --backend ort".into());
            }
        }
        notes
    }
}
