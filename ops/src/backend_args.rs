//! Backend options shared by the commands that run models.

use std::path::PathBuf;

use infopt_runtime::DefaultedDim;
use infopt_runtime::ort_backend::OptLevel;
use infopt_verify::{BackendKind, BackendOptions, ChosenBackend};

use crate::error::{OpsError, OpsResult};

/// Backend selection, shared by `optimize`, `bench` and `compare`.
#[derive(Debug, Clone, serde::Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct BackendSettings {
    /// Backend to run in: tract (embedded) or ort (ONNX Runtime, loaded at run time).
    pub backend: Option<String>,
    /// ONNX Runtime library (default: $ORT_DYLIB_PATH, else the onnxruntime package of
    /// python3 or of a .venv above the working directory).
    pub ort_dylib: Option<PathBuf>,
    /// Threads inside one operator (ort; tract runs on one thread). Default: ONNX
    /// Runtime's, one per physical core.
    pub threads: Option<usize>,
    /// ONNX Runtime graph optimization level (verification runs the original
    /// at `disable`, its reference, and the optimized model at this level).
    pub ort_opt_level: String,
    /// ONNX Runtime execution providers in priority order (repeatable or comma-separated,
    /// e.g. cuda,cpu). Default: CPU.
    pub execution_providers: Vec<String>,
    /// An option of a provider --ep lists, EP:KEY=VALUE, passed to ONNX Runtime as it is
    /// (repeatable), e.g. cuda:prefer_nhwc=1, cuda:use_tf32=0.
    pub ep_options: Vec<String>,
    /// Time with inputs and outputs bound on the device (ONNX Runtime IoBinding; needs
    /// --backend ort --ep cuda): inputs copied there once, outputs written to device
    /// buffers allocated once. Without it, each timed run copies inputs in and outputs
    /// out (host to host, into reused buffers). Reports say which was measured.
    pub io_binding: bool,
}

/// ONNX Runtime graph optimization level.
pub const DEFAULT_ORT_OPT_LEVEL: &str = "all";

impl Default for BackendSettings {
    fn default() -> Self {
        BackendSettings {
            backend: None,
            ort_dylib: None,
            threads: None,
            ort_opt_level: DEFAULT_ORT_OPT_LEVEL.into(),
            execution_providers: Vec::new(),
            ep_options: Vec::new(),
            io_binding: false,
        }
    }
}

impl BackendSettings {
    /// The backend options, checked.
    pub fn options(&self) -> OpsResult<BackendOptions> {
        let ort_opt_level: OptLevel = self
            .ort_opt_level
            .parse()
            .map_err(|e: infopt_runtime::RuntimeError| OpsError::usage(e))?;
        Ok(BackendOptions {
            ort_dylib: self.ort_dylib.clone(),
            threads: self.threads,
            ort_opt_level,
            execution_providers: self.execution_providers.clone(),
            ep_options: self
                .ep_options
                .iter()
                .map(|o| o.parse())
                .collect::<Result<_, infopt_runtime::RuntimeError>>()
                .map_err(OpsError::usage)?,
            map_weights: false,
            reference_tf32_off: false,
            no_spin: false,
            transfer: if self.io_binding {
                infopt_runtime::Transfer::DeviceResident
            } else {
                infopt_runtime::Transfer::HostToHost
            },
        })
    }

    /// Whether models run in ONNX Runtime with the CUDA provider first
    /// (`--backend ort --ep cuda...`).
    pub fn runs_on_cuda(&self) -> OpsResult<bool> {
        Ok(matches!(self.explicit()?, Some(BackendKind::Ort))
            && self.execution_providers.first().is_some_and(|e| {
                matches!(
                    e.to_ascii_lowercase().as_str(),
                    "cuda" | "cudaexecutionprovider"
                )
            }))
    }

    /// Refuses `--io-binding` where it cannot take effect, before any work:
    /// device-resident timing needs ONNX Runtime's CUDA provider, and a command
    /// run that times nothing (`times` false) would drop it.
    pub fn check_io_binding(&self, times: bool, what_times: &str) -> OpsResult {
        if !self.io_binding {
            return Ok(());
        }
        let ort = matches!(self.explicit()?, Some(BackendKind::Ort));
        let cuda = self.execution_providers.iter().any(|e| {
            matches!(
                e.to_ascii_lowercase().as_str(),
                "cuda" | "cudaexecutionprovider"
            )
        });
        if !(ort && cuda) {
            return Err(OpsError::usage(
                infopt_runtime::transfer::DEVICE_RESIDENT_NEEDS_CUDA,
            ));
        }
        if !times {
            return Err(OpsError::usage(format!(
                "--io-binding changes only how latency is timed, and this run times nothing: {what_times}"
            )));
        }
        Ok(())
    }

    /// `--backend`, if given.
    pub fn explicit(&self) -> OpsResult<Option<BackendKind>> {
        Ok(self
            .backend
            .as_deref()
            .map(BackendKind::parse)
            .transpose()?)
    }

    /// Builds `--backend`, or `default` when it is not given.
    pub fn build(&self, default: BackendKind) -> OpsResult<ChosenBackend> {
        let options = self.options()?;
        let kind = self.explicit()?.unwrap_or(default);
        let chosen = ChosenBackend::build(kind, &options)?;
        for n in chosen.option_notes(&options) {
            crate::progress::note("backend", format!("note: {n}"));
        }
        Ok(chosen)
    }
}

/// "input `x` dim 0 (batch) unbound, took 1; ...": shared by bench and compare.
pub fn defaulted_dim_note(d: &DefaultedDim) -> String {
    format!(
        "input `{}` dim {} ({}) unbound, took {}; set it with --input-shape",
        d.input,
        d.axis,
        d.symbol.as_deref().unwrap_or("unnamed"),
        d.value
    )
}
