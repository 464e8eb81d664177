//! The ONNX Runtime adapter: the only module that touches the `ort` crate.
//!
//! ONNX Runtime is never linked or downloaded at build time (`ort` with `load-dynamic`):
//! the shared library is found at run time ([`find_dylib`]) and loaded once per process.
//! Discovery order:
//! 1. an explicit path ([`OrtOptions::dylib`], the CLI's `--ort-dylib`);
//! 2. the `ORT_DYLIB_PATH` environment variable;
//! 3. the `onnxruntime` Python package seen by `python3`, then by a `.venv/bin/python`
//!    found above the working directory or the executable: the library is
//!    `onnxruntime/capi/libonnxruntime.so*` inside the package.
//!
//! A path given explicitly (1 or 2) that names no file is an error, not a reason to look
//! further: a user who set it expects that library.
//!
//! `ort` allows one library and one environment per process, so both live in a
//! process-wide slot; every [`OrtBackend`] shares them, and asking for a different library
//! after the first is an error.
//!
//! Loading: the model bytes go to `CreateSessionFromArray`; external-data locations are
//! resolved against the model folder through the session config entry
//! `session.model_external_initializers_file_folder_path`. Input shapes are resolved with
//! [`resolve_input_shapes`] against the inputs the session declares, but the session
//! itself keeps the model's dynamic dims (no free-dimension overrides): it runs the model
//! the way a deployment with the same file would.

use std::collections::HashMap;
use std::ffi::OsString;
use std::fmt;
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::sync::Mutex;

use ort::environment::Environment;
use ort::ep::ArbitrarilyConfigurableExecutionProvider;
use ort::session::builder::{GraphOptimizationLevel, SessionBuilder};
use ort::session::{OutputSelector, RunOptions, Session, SessionInputValue, SessionOutputs};
use ort::value::{DynValue, TensorElementType, TensorRef, ValueType};
use serde::Serialize;

use crate::backend::{
    Backend, DimSpec, InputShapes, IoSpec, LoadedModel, Observe, Observing, ShapeResolution,
    TensorSink, ViewSink, check_run_inputs, resolve_input_shapes,
};
use crate::error::{Result, RuntimeError};
use crate::tensor::{DType, HostTensor, TensorData};
use crate::transfer::{RunEachTime, TimedRun, Transfer};
use crate::view::{DataView, TensorView};

mod binding;
mod profiling;
mod sequences;
mod strings;

pub use profiling::PROFILE_DIR_VAR;
// The backend's name in errors, in binding.rs (the file below this one).
use binding::BACKEND;

/// The environment variable naming the library, as the `ort` crate reads it.
pub const DYLIB_ENV: &str = "ORT_DYLIB_PATH";

/// ONNX Runtime's graph optimization level.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum OptLevel {
    /// No graph optimization.
    Disable,
    /// Level 1: constant folding, redundant node removal, simple fusions.
    Basic,
    /// Level 2: complex fusions (attention, layer norm, GELU, ...).
    Extended,
    /// Everything, including layout optimizations (ONNX Runtime's default).
    #[default]
    All,
}

impl OptLevel {
    pub const NAMES: [&'static str; 4] = ["disable", "basic", "extended", "all"];

    pub fn name(self) -> &'static str {
        match self {
            OptLevel::Disable => "disable",
            OptLevel::Basic => "basic",
            OptLevel::Extended => "extended",
            OptLevel::All => "all",
        }
    }

    fn to_ort(self) -> GraphOptimizationLevel {
        match self {
            OptLevel::Disable => GraphOptimizationLevel::Disable,
            OptLevel::Basic => GraphOptimizationLevel::Level1,
            OptLevel::Extended => GraphOptimizationLevel::Level2,
            OptLevel::All => GraphOptimizationLevel::All,
        }
    }
}

impl fmt::Display for OptLevel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for OptLevel {
    type Err = RuntimeError;

    fn from_str(s: &str) -> Result<OptLevel> {
        Ok(match s.to_ascii_lowercase().as_str() {
            "disable" | "disabled" | "none" | "0" => OptLevel::Disable,
            "basic" | "1" => OptLevel::Basic,
            "extended" | "2" => OptLevel::Extended,
            "all" | "99" => OptLevel::All,
            _ => {
                return Err(RuntimeError::InvalidArgument(format!(
                    "unknown ONNX Runtime optimization level `{s}` (choose one of {})",
                    OptLevel::NAMES.join(", ")
                )));
            }
        })
    }
}

/// Options of the ONNX Runtime backend.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct OrtOptions {
    /// The shared library; `None` discovers it (see the module doc).
    pub dylib: Option<PathBuf>,
    /// Threads inside one operator; `None` keeps ONNX Runtime's default (one per
    /// physical core).
    pub intra_threads: Option<usize>,
    pub opt_level: OptLevel,
    /// Execution providers in priority order, by name (`cpu`, `cuda`, `tensorrt`,
    /// `CUDAExecutionProvider`, ...). Empty means CPU only. ONNX Runtime falls back to CPU
    /// for nodes the listed providers do not take.
    pub execution_providers: Vec<String>,
    /// Provider options (`cuda:prefer_nhwc=1`), passed to ONNX Runtime as
    /// they are; each must name a provider of `execution_providers`.
    pub ep_options: Vec<EpOption>,
    /// Keep weights in the external-data files, memory-mapped, instead of
    /// on the heap: ONNX Runtime maps external data, but its CPU kernels
    /// copy constant weights into packed buffers and its graph optimizer
    /// folds constants into new tensors. This turns both off (prepacking
    /// and graph optimization), so a model bigger than memory runs, more
    /// slowly, with only its activations and inline tensors on the heap.
    pub map_weights: bool,
    /// Intra-op threads sleep as soon as a run ends instead of spinning for
    /// the next one (ONNX Runtime's default spins). For sessions whose runs
    /// alternate with work of the caller's (comparing outputs, building the
    /// next candidate): on a 2-core machine the spinning threads took a
    /// quarter of the INT8 search's CPU samples (`pause`), from that work.
    /// Timed sessions keep spinning, as the user's would.
    pub no_spin: bool,
    /// Observing sessions (every intermediate a graph output) allocate from
    /// the CPU arena, which reuses a run's buffers for the next, instead of
    /// plain allocations freed after each run. Plain allocations fault
    /// every page of every output in again each run (a third of DNSMOS's
    /// calibration time was the kernel's: 32 s against 22 s in the arena,
    /// peak memory +5%); the arena keeps a run's peak reserved until the
    /// session ends, up to twice it where it grew in powers of two, so the
    /// caller sets this only where that fits (see calibration's sizing
    /// from the first run).
    pub observe_in_arena: bool,
    /// Most bytes of observed tensors one run of an observing session
    /// hands out (None: [`OBSERVE_BUDGET_BYTES`]); more are observed in
    /// further runs, each running the graph as far as its tensors. For a
    /// caller that sized its sessions to the memory: DNSMOS observes 367 MB
    /// a sample, so at 256 MB every sample ran one and a half times.
    pub observe_budget_bytes: Option<usize>,
}

/// One provider option, `EP:KEY=VALUE` on the command line (`cuda:prefer_nhwc=1`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct EpOption {
    /// The provider, as `--ep` names it (`cuda`, `CUDAExecutionProvider`, ...).
    pub ep: String,
    pub key: String,
    pub value: String,
}

impl std::str::FromStr for EpOption {
    type Err = RuntimeError;
    fn from_str(s: &str) -> Result<EpOption> {
        let bad = || {
            RuntimeError::InvalidArgument(format!(
                "execution provider option `{s}`: expected EP:KEY=VALUE, e.g. cuda:prefer_nhwc=1"
            ))
        };
        let (ep, rest) = s.split_once(':').ok_or_else(bad)?;
        let (key, value) = rest.split_once('=').ok_or_else(bad)?;
        let (ep, key) = (ep.trim(), key.trim());
        if ep.is_empty() || key.is_empty() {
            return Err(bad());
        }
        Ok(EpOption {
            ep: ep.to_string(),
            key: key.to_string(),
            value: value.trim().to_string(),
        })
    }
}

/// Where the library path came from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum DylibSource {
    /// `OrtOptions::dylib` (`--ort-dylib`).
    Explicit,
    /// The `ORT_DYLIB_PATH` environment variable.
    EnvVar,
    /// The `onnxruntime` package of this Python interpreter.
    Python { python: PathBuf },
}

impl fmt::Display for DylibSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DylibSource::Explicit => f.write_str("--ort-dylib"),
            DylibSource::EnvVar => f.write_str(DYLIB_ENV),
            DylibSource::Python { python } => {
                write!(f, "the onnxruntime package of {}", python.display())
            }
        }
    }
}

/// A discovered ONNX Runtime library.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DylibLocation {
    pub path: PathBuf,
    pub source: DylibSource,
}

/// How to get a library, appended to every "not found" message.
const FIX_HINT: &str = "install it with `pip install onnxruntime` (for the python3 on PATH, or in a .venv of this project) or set ORT_DYLIB_PATH to libonnxruntime.so";

/// Finds the library: `explicit`, then `ORT_DYLIB_PATH`, then the Python interpreters of
/// [`python_candidates`].
pub fn find_dylib(explicit: Option<&Path>) -> Result<DylibLocation> {
    find_dylib_in(explicit, std::env::var_os(DYLIB_ENV), &python_candidates())
}

/// [`find_dylib`] with the environment spelled out: `env_value` is the value of
/// `ORT_DYLIB_PATH` (an empty value counts as unset) and `pythons` the interpreters to ask,
/// in order.
pub fn find_dylib_in(
    explicit: Option<&Path>,
    env_value: Option<OsString>,
    pythons: &[PathBuf],
) -> Result<DylibLocation> {
    if let Some(p) = explicit {
        if !p.is_file() {
            return Err(RuntimeError::InvalidArgument(format!(
                "ONNX Runtime library not found: --ort-dylib {} is not a file; {FIX_HINT}",
                p.display()
            )));
        }
        return Ok(DylibLocation {
            path: p.to_path_buf(),
            source: DylibSource::Explicit,
        });
    }
    if let Some(v) = env_value.filter(|v| !v.is_empty()) {
        let p = PathBuf::from(v);
        if !p.is_file() {
            return Err(RuntimeError::InvalidArgument(format!(
                "ONNX Runtime library not found: {DYLIB_ENV}={} is not a file; fix or unset it (unset, infopt asks python3 for the onnxruntime package); {FIX_HINT}",
                p.display()
            )));
        }
        return Ok(DylibLocation {
            path: p,
            source: DylibSource::EnvVar,
        });
    }
    for python in pythons {
        if let Some(dir) = python_package_dir(python)
            && let Some(path) = library_in_package(&dir)
        {
            return Ok(DylibLocation {
                path,
                source: DylibSource::Python {
                    python: python.clone(),
                },
            });
        }
    }
    let asked: Vec<String> = pythons.iter().map(|p| p.display().to_string()).collect();
    Err(RuntimeError::InvalidArgument(format!(
        "ONNX Runtime library not found: no --ort-dylib, no {DYLIB_ENV}, and no onnxruntime package visible to {}; {FIX_HINT}",
        if asked.is_empty() {
            "any Python interpreter".to_string()
        } else {
            asked.join(" or ")
        }
    )))
}

/// The interpreters asked for an `onnxruntime` package: `python3` on PATH, then every
/// `.venv/bin/python` in the folders above the working directory and above the running
/// executable (so a checkout's `.venv` is found from `target/debug/infopt` too).
pub fn python_candidates() -> Vec<PathBuf> {
    let mut out = vec![PathBuf::from("python3")];
    let mut roots: Vec<PathBuf> = Vec::new();
    if let Ok(cwd) = std::env::current_dir() {
        roots.push(cwd);
    }
    if let Ok(exe) = std::env::current_exe()
        && let Some(dir) = exe.parent()
    {
        roots.push(dir.to_path_buf());
    }
    for root in roots {
        for dir in root.ancestors() {
            let py = dir.join(".venv").join("bin").join("python");
            if py.is_file() && !out.contains(&py) {
                out.push(py);
            }
        }
    }
    out
}

/// The folder of the `onnxruntime` package as `python` sees it, without importing it.
fn python_package_dir(python: &Path) -> Option<PathBuf> {
    crate::python::package_dir(python, "onnxruntime")
}

/// `capi/libonnxruntime.so*` (or the macOS / Windows name) inside a package folder. With
/// several versioned names, the last in byte order.
fn library_in_package(package: &Path) -> Option<PathBuf> {
    let capi = package.join("capi");
    let mut found: Vec<PathBuf> = std::fs::read_dir(&capi)
        .ok()?
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .filter(|p| {
            let name = p.file_name().and_then(|n| n.to_str()).unwrap_or("");
            name.starts_with("libonnxruntime.so")
                || (name.starts_with("libonnxruntime.") && name.ends_with(".dylib"))
                || name == "onnxruntime.dll"
        })
        .filter(|p| p.is_file())
        .collect();
    found.sort();
    found.pop()
}

/// The loaded library and the process's ONNX Runtime environment.
struct OrtLib {
    path: PathBuf,
    source: DylibSource,
    version: String,
    env: Environment,
    /// `GetAvailableProviders`: the execution providers this build has.
    providers: Vec<String>,
}

/// The library, once loaded. Leaked on purpose: `ort` keeps the library open for the
/// process's lifetime anyway.
static LIBRARY: Mutex<Option<&'static OrtLib>> = Mutex::new(None);

/// Reads the version string through `OrtGetApiBase`, which also checks that the file is
/// an ONNX Runtime library before `ort` takes it.
fn library_version(path: &Path) -> std::result::Result<String, String> {
    // SAFETY: loading a shared library runs its initializers; the path is the ONNX
    // Runtime library the user pointed at or that pip installed.
    let lib = unsafe { libloading::Library::new(path) }.map_err(|e| e.to_string())?;
    type GetApiBase = unsafe extern "C" fn() -> *const ort::sys::OrtApiBase;
    // SAFETY: `OrtGetApiBase` has this signature in every ONNX Runtime release.
    let get: libloading::Symbol<GetApiBase> =
        unsafe { lib.get(b"OrtGetApiBase") }.map_err(|_| {
            "it does not export OrtGetApiBase (not an ONNX Runtime library?)".to_string()
        })?;
    // SAFETY: see above; the base struct is static inside the library.
    let base = unsafe { get() };
    if base.is_null() {
        return Err("OrtGetApiBase returned null".into());
    }
    // SAFETY: `GetVersionString` returns a static NUL-terminated string.
    let version = unsafe { std::ffi::CStr::from_ptr(((*base).GetVersionString)()) };
    Ok(version.to_string_lossy().into_owned())
}

/// The execution providers compiled into the loaded library.
fn available_providers() -> Vec<String> {
    let mut names: *mut *mut std::ffi::c_char = std::ptr::null_mut();
    let mut count: std::ffi::c_int = 0;
    let api = ort::api();
    // SAFETY: documented C API use: the list is released below with its count.
    let status = unsafe { (api.GetAvailableProviders)(&mut names, &mut count) };
    // SAFETY: a status pointer from the API.
    if unsafe { ort::Error::result_from_status(status) }.is_err() || names.is_null() {
        return vec!["CPUExecutionProvider".into()];
    }
    let mut out = Vec::new();
    for i in 0..count.max(0) as usize {
        // SAFETY: `names` holds `count` NUL-terminated strings.
        let s = unsafe { std::ffi::CStr::from_ptr(*names.add(i)) };
        out.push(s.to_string_lossy().into_owned());
    }
    // SAFETY: releases what GetAvailableProviders allocated.
    let status = unsafe { (api.ReleaseAvailableProviders)(names, count) };
    // SAFETY: a status pointer from the API.
    let _ = unsafe { ort::Error::result_from_status(status) };
    out
}

fn same_file(a: &Path, b: &Path) -> bool {
    match (std::fs::canonicalize(a), std::fs::canonicalize(b)) {
        (Ok(a), Ok(b)) => a == b,
        _ => a == b,
    }
}

/// The execution providers compiled into the ONNX Runtime library infopt
/// finds ([`find_dylib`]: `explicit`, `ORT_DYLIB_PATH`, a Python's
/// onnxruntime package), loading it once per process. PyPI's `onnxruntime`
/// has the CPU provider (and Azure's remote one); `onnxruntime-gpu` adds CUDA
/// and TensorRT.
pub fn installed_providers(explicit: Option<&Path>) -> Result<Vec<String>> {
    let loc = find_dylib(explicit)?;
    Ok(load_library(&loc)?.providers.clone())
}

/// Loads the library at `loc` (once per process) and creates the environment.
fn load_library(loc: &DylibLocation) -> Result<&'static OrtLib> {
    let mut slot = LIBRARY.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(lib) = *slot {
        if same_file(&lib.path, &loc.path) {
            return Ok(lib);
        }
        return Err(RuntimeError::InvalidArgument(format!(
            "ONNX Runtime is already loaded from {} ({}) in this process; cannot load {} ({}) as well",
            lib.path.display(),
            lib.source,
            loc.path.display(),
            loc.source
        )));
    }
    let path = std::fs::canonicalize(&loc.path).unwrap_or_else(|_| loc.path.clone());
    let unusable = |why: String| {
        RuntimeError::InvalidArgument(format!(
            "ONNX Runtime library {} (from {}) cannot be used: {why}",
            path.display(),
            loc.source
        ))
    };
    let version = library_version(&path).map_err(unusable)?;
    let env = ort::init_from(&path)
        .map_err(|e| unusable(e.to_string()))?
        .with_name("infopt")
        .build()
        .map_err(|e| unusable(e.to_string()))?;
    let lib: &'static OrtLib = Box::leak(Box::new(OrtLib {
        path,
        source: loc.source.clone(),
        version,
        env,
        providers: available_providers(),
    }));
    *slot = Some(lib);
    Ok(lib)
}

/// Lower case without an `ExecutionProvider` suffix: `CUDAExecutionProvider` → `cuda`.
fn ep_key(name: &str) -> String {
    let lower = name.to_ascii_lowercase();
    let key = lower
        .strip_suffix("executionprovider")
        .unwrap_or(&lower)
        .to_string();
    match key.as_str() {
        "trt" => "tensorrt".into(),
        "onednn" => "dnnl".into(),
        "directml" => "dml".into(),
        _ => key,
    }
}

/// Execution providers ONNX Runtime has, by key, for telling "unknown" from
/// "not in this build".
const KNOWN_EPS: &[&str] = &[
    "cpu",
    "cuda",
    "tensorrt",
    "nvtensorrtrtx",
    "openvino",
    "dnnl",
    "xnnpack",
    "qnn",
    "snpe",
    "rocm",
    "migraphx",
    "coreml",
    "dml",
    "webgpu",
    "webnn",
    "azure",
    "vitisai",
    "cann",
    "acl",
    "armnn",
    "nnapi",
    "rknpu",
    "js",
    "tvm",
    "vsinpu",
];

/// How an execution provider is registered with a session.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Ep {
    /// Always present; nothing to register.
    Cpu,
    Cuda,
    TensorRt,
    /// Through the generic `SessionOptionsAppendExecutionProvider` by name.
    Generic {
        canonical: String,
        short: String,
    },
}

/// The name the generic registration function knows an EP by.
fn generic_ep_name(canonical: &str) -> String {
    match ep_key(canonical).as_str() {
        "xnnpack" => "XNNPACK",
        "openvino" => "OpenVINO",
        "qnn" => "QNN",
        "snpe" => "SNPE",
        "webgpu" => "WebGPU",
        "webnn" => "WebNN",
        "azure" => "AZURE",
        "vitisai" => "VitisAI",
        "coreml" => "CoreML",
        "dml" => "DML",
        "nvtensorrtrtx" => "NvTensorRtRtx",
        _ => canonical,
    }
    .to_string()
}

/// Maps requested names to the library's providers, with a one-line error for an unknown
/// name or a provider this build lacks.
fn resolve_eps(lib: &OrtLib, names: &[String]) -> Result<Vec<(String, Ep)>> {
    let mut out = Vec::new();
    for name in names {
        let key = ep_key(name.trim());
        let Some(canonical) = lib.providers.iter().find(|p| ep_key(p) == key) else {
            let available = lib.providers.join(", ");
            let message = if KNOWN_EPS.contains(&key.as_str()) {
                let hint = match key.as_str() {
                    "cuda" | "tensorrt" => {
                        " (for CUDA and TensorRT: `pip install onnxruntime-gpu` and point infopt at its library)"
                    }
                    _ => "",
                };
                format!(
                    "execution provider `{name}` is not available in ONNX Runtime {} at {} (it has: {available}){hint}",
                    lib.version,
                    lib.path.display()
                )
            } else {
                format!(
                    "unknown execution provider `{name}`; ONNX Runtime {} at {} has: {available}",
                    lib.version,
                    lib.path.display()
                )
            };
            return Err(RuntimeError::InvalidArgument(message));
        };
        let ep = match key.as_str() {
            "cpu" => Ep::Cpu,
            "cuda" => Ep::Cuda,
            "tensorrt" => Ep::TensorRt,
            _ => Ep::Generic {
                canonical: canonical.clone(),
                short: generic_ep_name(canonical),
            },
        };
        if !out.iter().any(|(c, _)| c == canonical) {
            out.push((canonical.clone(), ep));
        }
    }
    Ok(out)
}

/// The ONNX Runtime backend.
pub struct OrtBackend {
    lib: &'static OrtLib,
    options: OrtOptions,
    eps: Vec<(String, Ep)>,
}

impl fmt::Debug for OrtBackend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OrtBackend")
            .field("library", &self.lib.path)
            .field("version", &self.lib.version)
            .field("options", &self.options)
            .finish()
    }
}

impl OrtBackend {
    /// Finds and loads the library (see the module doc) and checks the options: an
    /// unknown or unavailable execution provider, or zero threads, is an error here.
    pub fn new(options: OrtOptions) -> Result<OrtBackend> {
        if options.intra_threads == Some(0) {
            return Err(RuntimeError::InvalidArgument(
                "the number of ONNX Runtime threads must be at least 1".into(),
            ));
        }
        let loc = find_dylib(options.dylib.as_deref())?;
        let lib = load_library(&loc)?;
        let eps = resolve_eps(lib, &options.execution_providers)?;
        for o in &options.ep_options {
            let key = ep_key(&o.ep);
            if key == "cpu" || !eps.iter().any(|(c, _)| ep_key(c) == key) {
                return Err(RuntimeError::InvalidArgument(format!(
                    "execution provider option `{}:{}={}` names no provider that --ep lists (it lists: {})",
                    o.ep,
                    o.key,
                    o.value,
                    if options.execution_providers.is_empty() {
                        "cpu".to_string()
                    } else {
                        options.execution_providers.join(", ")
                    }
                )));
            }
        }
        Ok(OrtBackend { lib, options, eps })
    }

    /// The library in use (canonical path).
    pub fn library_path(&self) -> &Path {
        &self.lib.path
    }

    /// How the library was found.
    pub fn library_source(&self) -> &DylibSource {
        &self.lib.source
    }

    /// The library's version string, e.g. `1.31.1`.
    pub fn library_version(&self) -> &str {
        &self.lib.version
    }

    /// Execution providers compiled into the library.
    pub fn available_providers(&self) -> &[String] {
        &self.lib.providers
    }

    /// The providers sessions register, canonical names, in priority order (CPU last,
    /// always present).
    pub fn execution_providers(&self) -> Vec<String> {
        let mut out: Vec<String> = self
            .eps
            .iter()
            .filter(|(_, e)| *e != Ep::Cpu)
            .map(|(c, _)| c.clone())
            .collect();
        out.push("CPUExecutionProvider".into());
        out
    }

    pub fn options(&self) -> &OrtOptions {
        &self.options
    }

    /// The CUDA device sessions run on (`--ep-option cuda:device_id=N`, else 0),
    /// when the CUDA provider is registered.
    fn cuda_device(&self) -> Result<Option<i32>> {
        if !self.eps.iter().any(|(_, e)| *e == Ep::Cuda) {
            return Ok(None);
        }
        let chosen = self
            .options
            .ep_options
            .iter()
            .rfind(|o| ep_key(&o.ep) == "cuda" && o.key == "device_id");
        match chosen {
            None => Ok(Some(0)),
            Some(o) => o.value.parse::<i32>().map(Some).map_err(|_| {
                RuntimeError::InvalidArgument(format!(
                    "execution provider option `cuda:device_id={}`: expected a device number, e.g. cuda:device_id=0",
                    o.value
                ))
            }),
        }
    }

    fn build_session(
        &self,
        bytes: &[u8],
        model_dir: Option<&Path>,
        purpose: SessionPurpose,
    ) -> ort::Result<Session> {
        let opt_level = if self.options.map_weights {
            OptLevel::Disable
        } else {
            self.options.opt_level
        };
        // Every failure comes back as an error infopt reports in one line;
        // ONNX Runtime's own log would print it again, in red, to stderr
        // (a verification size that does not run is routine, not an error).
        let mut b = Session::builder(&self.lib.env)?
            .with_optimization_level(opt_level.to_ort())?
            .with_log_level(ort::logging::LogLevel::Fatal)?;
        if self.options.map_weights {
            b = b.with_config_entry("session.disable_prepacking", "1")?;
        }
        if let Some(n) = self.options.intra_threads {
            b = b.with_intra_threads(n)?;
        }
        if self.options.no_spin || purpose == SessionPurpose::Observe {
            // An observing session's runs alternate with the caller's
            // statistics of what it hands out, on every core.
            b = b.with_config_entry("session.intra_op.allow_spinning", "0")?;
        }
        if purpose == SessionPurpose::Observe {
            // Every intermediate is a graph output here, so a run's outputs
            // are as large as all its activations together; the CPU arena
            // would keep their peak reserved (grown in powers of two) for
            // the session's lifetime, and a memory pattern plans buffers
            // that observed outputs never use. Plain allocations are freed
            // as soon as the caller has read a run.
            b = b.with_memory_pattern(false)?;
            if !self.options.observe_in_arena {
                disable_cpu_arena(&mut b)?;
            }
        }
        if let Some(prefix) = profiling::next_prefix().map_err(|e| {
            ort::Error::new(format!(
                "{}: cannot create the profile folder: {e}",
                profiling::PROFILE_DIR_VAR
            ))
        })? {
            b = b.with_profiling(prefix)?;
        }
        if let Some(dir) = model_dir {
            let dir = dir.to_str().ok_or_else(|| {
                ort::Error::new(format!(
                    "the model folder {} is not valid UTF-8",
                    dir.display()
                ))
            })?;
            // An empty folder means the working directory to ONNX Runtime.
            let dir = if dir.is_empty() { "." } else { dir };
            b = b.with_config_entry("session.model_external_initializers_file_folder_path", dir)?;
        }
        let mut typed = Vec::new();
        for (canonical, ep) in &self.eps {
            let options: Vec<(&str, &str)> = self
                .options
                .ep_options
                .iter()
                .filter(|o| ep_key(&o.ep) == ep_key(canonical))
                .map(|o| (o.key.as_str(), o.value.as_str()))
                .collect();
            match ep {
                Ep::Cpu => {}
                Ep::Cuda => {
                    let mut cuda = ort::ep::CUDA::default();
                    for (k, v) in &options {
                        cuda = cuda.with_arbitrary_config(k, v);
                    }
                    typed.push(cuda.build().error_on_failure())
                }
                Ep::TensorRt => {
                    let mut trt = ort::ep::TensorRT::default();
                    for (k, v) in &options {
                        trt = trt.with_arbitrary_config(k, v);
                    }
                    typed.push(trt.build().error_on_failure())
                }
                Ep::Generic { short, .. } => append_generic_ep(&mut b, short, &options)?,
            }
        }
        if !typed.is_empty() {
            b = b.with_execution_providers(typed)?;
        }
        let _stage = crate::native_stage::enter(crate::native_stage::Stage::OrtLoad);
        b.commit_from_memory(bytes)
    }
}

/// What a session is built for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum SessionPurpose {
    /// Runs the model as a deployment would.
    Run,
    /// Hands out every observed intermediate as a graph output.
    Observe,
}

/// Turns the CPU memory arena off (the `ort` crate has no builder method for it).
fn disable_cpu_arena(b: &mut SessionBuilder) -> ort::Result<()> {
    use ort::AsPointer;
    let api = ort::api();
    // SAFETY: documented C API use on a valid session options pointer.
    let status = unsafe { (api.DisableCpuMemArena)(b.ptr_mut()) };
    // SAFETY: a status pointer from the API.
    unsafe { ort::Error::result_from_status(status) }
}

/// Registers an execution provider by name through the C API, with its options.
fn append_generic_ep(
    b: &mut SessionBuilder,
    name: &str,
    options: &[(&str, &str)],
) -> ort::Result<()> {
    use ort::AsPointer;
    let cname = std::ffi::CString::new(name)?;
    let keys = options
        .iter()
        .map(|(k, _)| std::ffi::CString::new(*k))
        .collect::<std::result::Result<Vec<_>, _>>()?;
    let values = options
        .iter()
        .map(|(_, v)| std::ffi::CString::new(*v))
        .collect::<std::result::Result<Vec<_>, _>>()?;
    let key_ptrs: Vec<*const std::ffi::c_char> = keys.iter().map(|k| k.as_ptr()).collect();
    let value_ptrs: Vec<*const std::ffi::c_char> = values.iter().map(|v| v.as_ptr()).collect();
    let api = ort::api();
    // SAFETY: documented C API use; the builder pointer is valid and the key and
    // value arrays (of the same length) outlive the call.
    let status = unsafe {
        (api.SessionOptionsAppendExecutionProvider)(
            b.ptr_mut(),
            cname.as_ptr(),
            key_ptrs.as_ptr(),
            value_ptrs.as_ptr(),
            key_ptrs.len(),
        )
    };
    // SAFETY: a status pointer from the API.
    unsafe { ort::Error::result_from_status(status) }
}

/// Names [`backend_by_name`] accepts.
pub const BACKEND_NAMES: [&str; 2] = ["tract", "ort"];

/// A backend by name: `tract` (embedded, the default) or `ort` (alias `onnxruntime`,
/// configured by `ort_options`; `ort_options` is ignored for tract).
pub fn backend_by_name(name: &str, ort_options: &OrtOptions) -> Result<Box<dyn Backend>> {
    match name.to_ascii_lowercase().as_str() {
        "tract" => Ok(Box::new(crate::TractBackend)),
        "ort" | "onnxruntime" => Ok(Box::new(OrtBackend::new(ort_options.clone())?)),
        _ => Err(RuntimeError::InvalidArgument(format!(
            "unknown backend `{name}` (choose one of {})",
            BACKEND_NAMES.join(", ")
        ))),
    }
}

fn ort_dtype(t: TensorElementType) -> Option<DType> {
    Some(match t {
        TensorElementType::Float32 => DType::F32,
        TensorElementType::Float64 => DType::F64,
        TensorElementType::Float16 => DType::F16,
        TensorElementType::Bfloat16 => DType::BF16,
        TensorElementType::Int8 => DType::I8,
        TensorElementType::Int16 => DType::I16,
        TensorElementType::Int32 => DType::I32,
        TensorElementType::Int64 => DType::I64,
        TensorElementType::Uint8 => DType::U8,
        TensorElementType::Uint16 => DType::U16,
        TensorElementType::Uint32 => DType::U32,
        TensorElementType::Uint64 => DType::U64,
        TensorElementType::Bool => DType::Bool,
        _ => return None,
    })
}

/// The declared spec of a session input or output.
fn io_spec(kind: &'static str, name: &str, ty: &ValueType) -> Result<IoSpec> {
    let unsupported = |dtype: String| RuntimeError::UnsupportedDType {
        backend: BACKEND.into(),
        kind,
        name: name.to_string(),
        dtype,
    };
    if kind == "output" && sequences::is_map_sequence(ty) {
        return Ok(sequences::spec(name));
    }
    if kind == "output" && sequences::is_tensor_sequence(ty) {
        return Ok(sequences::flat_spec(name, ty));
    }
    if let ValueType::Tensor { shape, .. } = ty
        && strings::is_string_tensor(ty)
    {
        return Ok(strings::spec(name, shape));
    }
    let ValueType::Tensor {
        ty,
        shape,
        dimension_symbols,
    } = ty
    else {
        return Err(unsupported(ty.to_string()));
    };
    let dtype = ort_dtype(*ty).ok_or_else(|| unsupported(ty.to_string()))?;
    let dims = shape
        .iter()
        .enumerate()
        .map(|(i, &d)| {
            let sym = dimension_symbols.get(i).map(String::as_str).unwrap_or("");
            if d >= 0 {
                DimSpec::Known(d as usize)
            } else if !sym.is_empty() && sym != "?" {
                DimSpec::Symbol(sym.to_string())
            } else {
                DimSpec::Unknown
            }
        })
        .collect();
    Ok(IoSpec {
        name: name.to_string(),
        dtype,
        dims: Some(dims),
    })
}

fn load_error(e: &ort::Error) -> RuntimeError {
    let message = one_line_text(&e.to_string());
    if let Some(message) = ir_version_too_new(&message) {
        return RuntimeError::Load {
            backend: BACKEND.into(),
            message,
        };
    }
    match model_error(e.code(), &message) {
        Some(message) => RuntimeError::InvalidModel {
            backend: BACKEND.into(),
            message,
        },
        None => RuntimeError::Load {
            backend: BACKEND.into(),
            message,
        },
    }
}

/// ONNX Runtime refusing a model whose IR version is newer than it reads,
/// in one line with the two ways out; None for any other message. onnx
/// 1.23's `helper.make_model` writes IR 14 by default, and ONNX Runtime
/// 1.31 reads up to 13: its own text is a C++ source location and a
/// signature before the numbers.
fn ir_version_too_new(message: &str) -> Option<String> {
    let number_after = |key: &str| -> Option<u64> {
        let rest = &message[message.find(key)? + key.len()..];
        let digits: String = rest
            .trim_start()
            .chars()
            .take_while(char::is_ascii_digit)
            .collect();
        digits.parse().ok()
    };
    let model = number_after("Unsupported model IR version:")?;
    let most = number_after("max supported IR version:")?;
    Some(format!(
        "the model's IR version {model} is newer than this ONNX Runtime reads (at most {most}): install a newer onnxruntime, or save the model with ir_version {most} (in Python: `m.ir_version = {most}; onnx.save(m, path)`) if it uses nothing newer"
    ))
}

/// What ONNX Runtime says about the model itself when it resolves the graph
/// to create a session: a node its operator schema rejects, a type or shape
/// inference error, an input nothing defines.
const MODEL_VERDICTS: [&str; 6] = [
    "This is an invalid model",
    "[ShapeInferenceError]",
    "[TypeInferenceError]",
    "Type Error:",
    "Invalid model. Node input",
    "Invalid tensor data type",
];

/// Said in those words, but about ONNX Runtime, not the model: an operator
/// it has no kernel for, an opset or IR version newer than it knows.
const RUNTIME_LIMITS: [&str; 4] = [
    "Could not find an implementation",
    "is under development",
    "ValidateOpsetForDomain",
    "Unsupported model IR version",
];

/// No schema for an operator: the model's fault in the default domain (the
/// operator does not exist at the opset the model imports), ONNX Runtime's
/// limit in any other (a contrib op of another release, a custom domain).
/// ONNX Runtime names the node's domain in `In Node, ("NAME", OP, "DOMAIN", -1)`.
fn unknown_operator_elsewhere(message: &str) -> bool {
    message.contains("No Op registered") && !message.contains(", \"\", -1)")
}

/// The one-line verdict on the model (naming the node first where ONNX
/// Runtime's text names one), when `message` is ONNX Runtime refusing the
/// model as invalid; `None` for every other failure to load.
fn model_error(code: ort::ErrorCode, message: &str) -> Option<String> {
    use ort::ErrorCode as C;
    let refused = matches!(
        code,
        C::GenericFailure | C::InvalidGraph | C::InvalidArgument
    ) && MODEL_VERDICTS.iter().any(|m| message.contains(m))
        && !RUNTIME_LIMITS.iter().any(|m| message.contains(m))
        && !unknown_operator_elsewhere(message);
    if !refused {
        return None;
    }
    // "Load model from PATH failed:" and "[ONNXRuntimeError] : 1 : FAIL :"
    // say nothing about the model.
    let mut text = message
        .strip_prefix("Load model from ")
        .and_then(|rest| rest.split_once(" failed:"))
        .map_or(message, |(_, rest)| rest)
        .trim();
    // Nor does the source location some messages start with.
    if let Some(at) = text.find("This is an invalid model") {
        text = &text[at..];
    }
    Some(node_first(text).unwrap_or_else(|| text.to_string()))
}

/// ONNX Runtime's two ways of naming a node, turned into infopt's
/// `node 'NAME' (OP): what`:
/// `Node (NAME) Op (OP) [ShapeInferenceError] what` and
/// `This is an invalid model. In Node, ("NAME", OP, "DOMAIN", -1) : (...) -> (...) , Error what`.
fn node_first(text: &str) -> Option<String> {
    if let Some(rest) = text.strip_prefix("Node (") {
        let (name, rest) = rest.split_once(") Op (")?;
        let (op, what) = rest.split_once(") ")?;
        return Some(format!("node '{name}' ({op}): {what}"));
    }
    let rest = text.strip_prefix("This is an invalid model. In Node, (\"")?;
    let (name, rest) = rest.split_once("\", ")?;
    let (op, rest) = rest.split_once(", ")?;
    let (_, what) = rest.split_once(" , Error ")?;
    Some(format!("node '{name}' ({op}): {what}"))
}

fn run_error(e: &ort::Error) -> RuntimeError {
    RuntimeError::Run {
        backend: BACKEND.into(),
        message: one_line_text(&e.to_string()),
    }
}

fn one_line_text(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

impl Backend for OrtBackend {
    /// CPU only; the threads sleep between runs (see `OrtOptions::no_spin`):
    /// sessions side by side would otherwise spin against each other.
    fn with_threads(&self, threads: usize, observing: Observing) -> Option<Box<dyn Backend>> {
        if !self.options.execution_providers.is_empty() {
            return None;
        }
        let mut options = self.options.clone();
        options.intra_threads = Some(threads.max(1));
        options.no_spin = true;
        options.observe_in_arena = observing.in_arena;
        options.observe_budget_bytes = observing.budget_bytes;
        Some(Box::new(OrtBackend {
            lib: self.lib,
            options,
            eps: self.eps.clone(),
        }))
    }

    fn name(&self) -> &str {
        BACKEND
    }

    fn version(&self) -> String {
        format!("onnxruntime {}", self.lib.version)
    }

    fn load(
        &self,
        model_bytes: &[u8],
        model_dir: Option<&Path>,
        input_shapes: &InputShapes,
    ) -> Result<Box<dyn LoadedModel>> {
        let model = self.load_for(model_bytes, model_dir, input_shapes, SessionPurpose::Run)?;
        Ok(Box::new(model))
    }

    /// ONNX Runtime hands out graph outputs only: the caller exposes the
    /// tensors to observe as extra graph outputs (infopt-verify does) and
    /// names them here. Each run then asks for them in groups that fit
    /// the budget (`OrtOptions::observe_budget_bytes`), so no run holds
    /// more than that.
    fn load_observing(
        &self,
        model_bytes: &[u8],
        model_dir: Option<&Path>,
        input_shapes: &InputShapes,
        observe: &Observe,
    ) -> Result<Box<dyn LoadedModel>> {
        let Observe::Names(names) = observe else {
            return Err(RuntimeError::InvalidArgument(
                "ONNX Runtime observes named tensors that the model exposes as graph outputs; name them".into(),
            ));
        };
        let loaded = self.load_for(
            model_bytes,
            model_dir,
            input_shapes,
            SessionPurpose::Observe,
        )?;
        // A tensor the caller could not type (an ai.onnx.ml op's output)
        // may turn out to hold strings: no values to observe (integer ones
        // are, for the first diverging tensor's search).
        let strings: Vec<String> = {
            let session = loaded.session.lock().unwrap_or_else(|p| p.into_inner());
            session
                .outputs()
                .iter()
                .filter(|o| strings::is_string_tensor(o.dtype()))
                .map(|o| o.name().to_string())
                .collect()
        };
        let mut observed = Vec::new();
        let mut outputs = Vec::new();
        for o in loaded.outputs {
            if names.contains(&o.name) {
                if !strings.contains(&o.name) {
                    observed.push(o.name);
                }
            } else {
                outputs.push(o);
            }
        }
        // Keep the caller's order (computation order).
        observed.sort_by_key(|n| names.iter().position(|x| x == n));
        Ok(Box::new(OrtModel {
            outputs,
            observed,
            observing: true,
            observe_budget: self
                .options
                .observe_budget_bytes
                .unwrap_or(OBSERVE_BUDGET_BYTES),
            ..loaded
        }))
    }
}

impl OrtBackend {
    /// A session for `purpose`, with the inputs and outputs it declares.
    fn load_for(
        &self,
        model_bytes: &[u8],
        model_dir: Option<&Path>,
        input_shapes: &InputShapes,
        purpose: SessionPurpose,
    ) -> Result<OrtModel> {
        let session = self
            .build_session(model_bytes, model_dir, purpose)
            .map_err(|e| load_error(&e))?;
        let inputs = session
            .inputs()
            .iter()
            .map(|o| io_spec("input", o.name(), o.dtype()))
            .collect::<Result<Vec<_>>>()?;
        let string_inputs = session
            .inputs()
            .iter()
            .map(|o| strings::is_string_tensor(o.dtype()))
            .collect();
        let outputs = session
            .outputs()
            .iter()
            .map(|o| io_spec("output", o.name(), o.dtype()))
            .collect::<Result<Vec<_>>>()?;
        let resolution = resolve_input_shapes(&inputs, input_shapes)?;
        Ok(OrtModel {
            session: Mutex::new(session),
            inputs,
            string_inputs,
            outputs,
            resolution,
            observed: Vec::new(),
            observing: false,
            observed_bytes: Mutex::new(HashMap::new()),
            observe_budget: OBSERVE_BUDGET_BYTES,
            cuda_device: self.cuda_device()?,
        })
    }
}

/// Most bytes of observed tensors one ONNX Runtime run returns at once,
/// unless the caller sized it (`OrtOptions::observe_budget_bytes`).
pub const OBSERVE_BUDGET_BYTES: usize = 256 << 20;

/// Splits `names` into groups whose known sizes fit `budget`; a tensor of
/// unknown size counts as 1/64 of the budget until a run measures it.
fn observation_groups(
    names: &[String],
    known: &HashMap<String, usize>,
    budget: usize,
) -> Vec<Vec<String>> {
    let mut groups: Vec<Vec<String>> = Vec::new();
    let mut current: Vec<String> = Vec::new();
    let mut used = 0usize;
    for n in names {
        let size = known.get(n).copied().unwrap_or(budget / 64).max(1);
        if !current.is_empty() && used + size > budget {
            groups.push(std::mem::take(&mut current));
            used = 0;
        }
        used += size;
        current.push(n.clone());
    }
    if !current.is_empty() || groups.is_empty() {
        groups.push(current);
    }
    groups
}

/// A model loaded into an ONNX Runtime session.
struct OrtModel {
    /// `Session::run` takes `&mut self`.
    session: Mutex<Session>,
    inputs: Vec<IoSpec>,
    /// Per input: a string tensor, fed from int64 ids (see `strings`).
    string_inputs: Vec<bool>,
    outputs: Vec<IoSpec>,
    resolution: ShapeResolution,
    /// Session outputs that are observed intermediates (not model outputs).
    observed: Vec<String>,
    /// Loaded by `load_observing`: a model asked to observe nothing (every
    /// float tensor of a one-node tree ensemble is a graph output) just
    /// runs, where a plain load asked to observe is the caller's mistake.
    observing: bool,
    /// Byte size of each observed tensor, learnt from earlier runs.
    observed_bytes: Mutex<HashMap<String, usize>>,
    /// Most bytes of observed tensors one run hands out.
    observe_budget: usize,
    /// The CUDA device the session runs on, when the CUDA provider is
    /// registered: device-resident timing binds there.
    cuda_device: Option<i32>,
}

impl OrtModel {
    fn input_values<'a>(
        &'a self,
        inputs: &'a [HostTensor],
    ) -> Result<Vec<(&'a str, SessionInputValue<'a>)>> {
        check_run_inputs(&self.inputs, &self.resolution, inputs)?;
        let mut values: Vec<(&str, SessionInputValue<'_>)> = Vec::with_capacity(inputs.len());
        for ((spec, t), &string) in self.inputs.iter().zip(inputs).zip(&self.string_inputs) {
            let v = match string {
                true => strings::to_ort_strings(t)?,
                false => to_ort(t).map_err(|e| RuntimeError::InputMismatch {
                    input: spec.name.clone(),
                    message: one_line_text(&e.to_string()),
                })?,
            };
            values.push((spec.name.as_str(), v));
        }
        Ok(values)
    }

    /// One run returning exactly `names`.
    fn run_selected(&self, inputs: &[HostTensor], names: &[&str]) -> Result<Vec<HostTensor>> {
        self.with_run(inputs, names, |results| {
            names
                .iter()
                .map(|n| from_ort(n, output(results, n)?))
                .collect()
        })
    }

    /// One run returning `names`, handed to `read` while ONNX Runtime still
    /// owns the values (reading them in place costs no copy).
    fn with_run<T>(
        &self,
        inputs: &[HostTensor],
        names: &[&str],
        read: impl FnOnce(&SessionOutputs<'_>) -> Result<T>,
    ) -> Result<T> {
        let values = self.input_values(inputs)?;
        let mut selector = OutputSelector::no_default();
        for n in names {
            selector = selector.with(*n);
        }
        let options = RunOptions::new()
            .map_err(|e| run_error(&e))?
            .with_outputs(selector);
        let mut session = self.session.lock().unwrap_or_else(|p| p.into_inner());
        let stage = crate::native_stage::enter(crate::native_stage::Stage::OrtRun);
        let results = session
            .run_with_options(values, &options)
            .map_err(|e| run_error(&e))?;
        drop(stage);
        read(&results)
    }
}

/// The value `name` of a run's results.
fn output<'r>(results: &'r SessionOutputs<'_>, name: &str) -> Result<&'r DynValue> {
    results.get(name).ok_or_else(|| RuntimeError::Run {
        backend: BACKEND.into(),
        message: format!("ONNX Runtime returned no value for `{name}`"),
    })
}

/// A borrowed ONNX Runtime view of a host tensor (no copy).
fn to_ort(t: &HostTensor) -> ort::Result<SessionInputValue<'_>> {
    let shape = t.shape().to_vec();
    macro_rules! view {
        ($v:expr) => {
            SessionInputValue::from(TensorRef::from_array_view((shape, $v.as_slice()))?)
        };
    }
    Ok(match t.data() {
        TensorData::F32(v) => view!(v),
        TensorData::F64(v) => view!(v),
        TensorData::F16(v) => view!(v),
        TensorData::BF16(v) => view!(v),
        TensorData::I8(v) => view!(v),
        TensorData::I16(v) => view!(v),
        TensorData::I32(v) => view!(v),
        TensorData::I64(v) => view!(v),
        TensorData::U8(v) => view!(v),
        TensorData::U16(v) => view!(v),
        TensorData::U32(v) => view!(v),
        TensorData::U64(v) => view!(v),
        TensorData::Bool(v) => view!(v),
    })
}

/// Copies an output value into a named host tensor (its view, copied).
fn from_ort(name: &str, v: &DynValue) -> Result<HostTensor> {
    if sequences::is_map_sequence(v.dtype()) {
        return sequences::to_host(name, v);
    }
    if sequences::is_tensor_sequence(v.dtype()) {
        return sequences::flat_to_host(name, v, from_ort);
    }
    if strings::is_string_tensor(v.dtype()) {
        return strings::to_host(name, v);
    }
    view_of(name, v)?.to_host()
}

/// A borrowed view of an output value: ONNX Runtime's own buffer, no copy.
fn view_of<'v>(name: &'v str, v: &'v DynValue) -> Result<TensorView<'v>> {
    let unsupported = |dtype: String| RuntimeError::UnsupportedDType {
        backend: BACKEND.into(),
        kind: "output",
        name: name.to_string(),
        dtype,
    };
    let ty = match v.dtype() {
        ValueType::Tensor { ty, .. } => *ty,
        other => return Err(unsupported(other.to_string())),
    };
    let dtype = ort_dtype(ty).ok_or_else(|| unsupported(ty.to_string()))?;
    macro_rules! borrow {
        ($t:ty, $variant:ident) => {{
            let (shape, data) = v.try_extract_tensor::<$t>().map_err(|e| run_error(&e))?;
            (shape, DataView::$variant(data))
        }};
    }
    let (shape, data) = match dtype {
        DType::F32 => borrow!(f32, F32),
        DType::F64 => borrow!(f64, F64),
        DType::F16 => borrow!(half::f16, F16),
        DType::BF16 => borrow!(half::bf16, BF16),
        DType::I8 => borrow!(i8, I8),
        DType::I16 => borrow!(i16, I16),
        DType::I32 => borrow!(i32, I32),
        DType::I64 => borrow!(i64, I64),
        DType::U8 => borrow!(u8, U8),
        DType::U16 => borrow!(u16, U16),
        DType::U32 => borrow!(u32, U32),
        DType::U64 => borrow!(u64, U64),
        DType::Bool => borrow!(bool, Bool),
    };
    let bad_shape = || RuntimeError::Run {
        backend: BACKEND.into(),
        message: format!(
            "output `{name}` has shape {shape:?} and {} elements",
            data.len()
        ),
    };
    let dims = shape
        .iter()
        .map(|&d| usize::try_from(d))
        .collect::<std::result::Result<Vec<usize>, _>>()
        .map_err(|_| bad_shape())?;
    TensorView::new(name, dims, data).ok_or_else(bad_shape)
}

impl LoadedModel for OrtModel {
    fn inputs(&self) -> &[IoSpec] {
        &self.inputs
    }

    /// IoBinding (see [`binding`]): inputs bound once, outputs into buffers
    /// reused from run to run. Host to host falls back to plain runs for a
    /// model the binding cannot take; device-resident has no fallback.
    fn timed_runner<'a>(
        &'a self,
        inputs: &'a [HostTensor],
        transfer: Transfer,
    ) -> Result<Box<dyn TimedRun + 'a>> {
        check_run_inputs(&self.inputs, &self.resolution, inputs)?;
        // String inputs are made from ids at each run: nothing to bind once.
        if transfer == Transfer::HostToHost && self.string_inputs.contains(&true) {
            return Ok(Box::new(RunEachTime(move || self.run(inputs).map(drop))));
        }
        let bound = binding::BoundRunner::new(
            &self.session,
            &self.inputs,
            &self.outputs,
            inputs,
            transfer,
            self.cuda_device,
        );
        match (bound, transfer) {
            (Ok(r), _) => Ok(Box::new(r)),
            (Err(_), Transfer::HostToHost) => {
                Ok(Box::new(RunEachTime(move || self.run(inputs).map(drop))))
            }
            (Err(e), Transfer::DeviceResident) => Err(e),
        }
    }

    /// Outputs as the session declares them: dtypes, and dims where the model (or ONNX
    /// Runtime's inference at load) fixes them; dynamic dims stay symbols or unknown.
    fn outputs(&self) -> &[IoSpec] {
        &self.outputs
    }

    fn resolution(&self) -> &ShapeResolution {
        &self.resolution
    }

    /// The session runs any shape: only the shapes runs are checked
    /// against change. The observed tensors' sizes learnt at the old shapes
    /// scale with the inputs' (a longer sample's tensors would outgrow the
    /// groups they sized); forgetting them would split the next run into
    /// groups of a 64th of the budget each. The run then learns them.
    fn rebind_shapes(&mut self, at: &InputShapes) -> Result<bool> {
        let elements = |r: &ShapeResolution| -> usize {
            r.input_shapes
                .iter()
                .map(|(_, d)| d.iter().product::<usize>())
                .sum()
        };
        let before = elements(&self.resolution).max(1);
        self.resolution = resolve_input_shapes(&self.inputs, at)?;
        let scale = elements(&self.resolution) as f64 / before as f64;
        if scale != 1.0
            && let Ok(mut sizes) = self.observed_bytes.lock()
        {
            for size in sizes.values_mut() {
                *size = ((*size as f64) * scale).ceil() as usize;
            }
        }
        Ok(true)
    }

    fn run(&self, inputs: &[HostTensor]) -> Result<Vec<HostTensor>> {
        let names: Vec<&str> = self.outputs.iter().map(|o| o.name.as_str()).collect();
        self.run_selected(inputs, &names)
    }

    fn run_observed(
        &self,
        inputs: &[HostTensor],
        sink: &mut TensorSink<'_>,
    ) -> Result<Vec<HostTensor>> {
        self.run_observed_views(inputs, &mut |views| {
            for v in views {
                sink(&v.to_host()?)?;
            }
            Ok(())
        })
    }

    /// Each group of observed tensors is one run; the sink reads the run's
    /// values where ONNX Runtime put them, and they are freed before the
    /// next run, so no more than the budget is held at once.
    fn run_observed_views(
        &self,
        inputs: &[HostTensor],
        sink: &mut ViewSink<'_>,
    ) -> Result<Vec<HostTensor>> {
        if !self.observing {
            return Err(RuntimeError::InvalidArgument(
                "this model was not loaded for observation (use Backend::load_observing)".into(),
            ));
        }
        if self.observed.is_empty() {
            return self.run(inputs);
        }
        let groups = {
            let known = self
                .observed_bytes
                .lock()
                .unwrap_or_else(|p| p.into_inner());
            observation_groups(&self.observed, &known, self.observe_budget)
        };
        // The model's outputs come with the last group: no extra run.
        let last = groups.len().saturating_sub(1);
        let mut outputs = Vec::new();
        for (i, group) in groups.iter().enumerate() {
            let mut names: Vec<&str> = group.iter().map(String::as_str).collect();
            if i == last {
                names.extend(self.outputs.iter().map(|o| o.name.as_str()));
            }
            outputs = self.with_run(inputs, &names, |results| {
                let views = group
                    .iter()
                    .map(|n| view_of(n, output(results, n)?))
                    .collect::<Result<Vec<_>>>()?;
                {
                    let mut known = self
                        .observed_bytes
                        .lock()
                        .unwrap_or_else(|p| p.into_inner());
                    for v in &views {
                        known.insert(v.name().to_string(), v.len() * v.dtype().size_of());
                    }
                }
                sink(&views)?;
                names[group.len()..]
                    .iter()
                    .map(|n| from_ort(n, output(results, n)?))
                    .collect::<Result<Vec<_>>>()
            })?;
        }
        Ok(outputs)
    }

    fn observed(&self) -> &[String] {
        &self.observed
    }

    fn into_any(self: Box<Self>) -> Box<dyn std::any::Any> {
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// ONNX Runtime 1.31's words, as fuzzed models drew them.
    #[test]
    fn onnx_runtime_refusing_the_model_is_a_model_error_naming_the_node() {
        use ort::ErrorCode as C;
        let shape = "Load model from /tmp/m.onnx failed:Node (mm) Op (MatMul) [ShapeInferenceError] Input tensors of wrong rank (0).";
        assert_eq!(
            model_error(C::GenericFailure, shape).as_deref(),
            Some("node 'mm' (MatMul): [ShapeInferenceError] Input tensors of wrong rank (0).")
        );
        let schema = "This is an invalid model. In Node, (\"p2o.Mul.201\", Mul, \"\", -1) : (\"a\": tensor(float),\"b\": tensor(float),) -> (\"c\",) , Error Node (p2o.Mul.201) has input size 3 not in range [min=2, max=2].";
        assert_eq!(
            model_error(C::InvalidGraph, schema).as_deref(),
            Some(
                "node 'p2o.Mul.201' (Mul): Node (p2o.Mul.201) has input size 3 not in range [min=2, max=2]."
            )
        );
        let typed = "Type Error: Data in initializer '431' has element type tensor(float) but usage of initializer in graph expects tensor(int64)";
        assert_eq!(
            model_error(C::GenericFailure, typed).as_deref(),
            Some(typed)
        );
        // ONNX Runtime's own limits are not the model's fault.
        let contrib = "This is an invalid model. In Node, (\"n\", Fancy, \"com.example\", -1) : () -> () , Error No Op registered for Fancy with domain_version of 1";
        assert_eq!(model_error(C::InvalidGraph, contrib), None);
        // An operator the model's own opset does not have is the model's fault.
        let opset = "This is an invalid model. In Node, (\"r\", Reshape, \"\", -1) : (\"x\": tensor(int32),) -> (\"y\",) , Error No Op registered for Reshape with domain_version of 0";
        assert_eq!(
            model_error(C::InvalidGraph, opset).as_deref(),
            Some("node 'r' (Reshape): No Op registered for Reshape with domain_version of 0")
        );
        let kernel = "Could not find an implementation for Foo(1) node with name 'n'";
        assert_eq!(model_error(C::NotImplemented, kernel), None);
        assert_eq!(model_error(C::RuntimeException, shape), None);
    }

    /// ONNX Runtime 1.31's words for a model saved by onnx 1.23's
    /// `helper.make_model` (IR 14).
    #[test]
    fn a_model_newer_than_onnx_runtime_reads_gets_one_line_with_the_way_out() {
        let text = "/onnxruntime_src/onnxruntime/core/graph/model.cc:256 onnxruntime::Model::Model(onnx::ModelProto&&, const onnxruntime::PathString&, const onnxruntime::IOnnxRuntimeOpSchemaRegistryList*, const onnxruntime::logging::Logger&, const onnxruntime::ModelOptions&) Unsupported model IR version: 14, max supported IR version: 13";
        assert_eq!(
            ir_version_too_new(text).as_deref(),
            Some(
                "the model's IR version 14 is newer than this ONNX Runtime reads (at most 13): install a newer onnxruntime, or save the model with ir_version 13 (in Python: `m.ir_version = 13; onnx.save(m, path)`) if it uses nothing newer"
            )
        );
        assert_eq!(ir_version_too_new("Unsupported model IR version: 14"), None);
        assert_eq!(
            ir_version_too_new("Could not find an implementation for Foo(1)"),
            None
        );
    }

    #[test]
    fn opt_levels_parse() {
        for name in OptLevel::NAMES {
            assert_eq!(name.parse::<OptLevel>().unwrap().name(), name);
        }
        assert_eq!("BASIC".parse::<OptLevel>().unwrap(), OptLevel::Basic);
        let e = "fast".parse::<OptLevel>().unwrap_err().to_string();
        assert!(
            e.contains("`fast`") && e.contains("disable, basic, extended, all"),
            "{e}"
        );
    }

    #[test]
    fn ep_options_parse() {
        let o: EpOption = "cuda:prefer_nhwc=1".parse().unwrap();
        assert_eq!(
            o,
            EpOption {
                ep: "cuda".into(),
                key: "prefer_nhwc".into(),
                value: "1".into()
            }
        );
        // The value may hold ':' and '='.
        let o: EpOption = "tensorrt:trt_engine_cache_path=/a:b=c".parse().unwrap();
        assert_eq!(
            (o.key.as_str(), o.value.as_str()),
            ("trt_engine_cache_path", "/a:b=c")
        );
        for bad in ["prefer_nhwc=1", "cuda:prefer_nhwc", ":k=v", "cuda:=1"] {
            let e = bad.parse::<EpOption>().unwrap_err().to_string();
            assert!(e.contains("EP:KEY=VALUE"), "{bad}: {e}");
        }
    }

    #[test]
    fn ep_keys() {
        assert_eq!(ep_key("CUDAExecutionProvider"), "cuda");
        assert_eq!(ep_key("cuda"), "cuda");
        assert_eq!(ep_key("TensorrtExecutionProvider"), "tensorrt");
        assert_eq!(ep_key("TRT"), "tensorrt");
        assert_eq!(ep_key("DnnlExecutionProvider"), "dnnl");
        assert_eq!(ep_key("oneDNN"), "dnnl");
        assert_eq!(generic_ep_name("XnnpackExecutionProvider"), "XNNPACK");
        assert_eq!(
            generic_ep_name("SomethingExecutionProvider"),
            "SomethingExecutionProvider"
        );
    }

    #[test]
    fn discovery_errors_name_the_source_and_the_fix() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("libonnxruntime.so.0");
        let e = find_dylib_in(Some(&missing), None, &[])
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with("ONNX Runtime library not found: --ort-dylib")
                && e.contains("pip install onnxruntime")
                && e.contains("ORT_DYLIB_PATH"),
            "{e}"
        );
        let e = find_dylib_in(None, Some(missing.clone().into_os_string()), &[])
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with("ONNX Runtime library not found: ORT_DYLIB_PATH=")
                && e.contains(&missing.display().to_string())
                && e.contains("pip install onnxruntime"),
            "{e}"
        );
        let nopython = dir.path().join("no-python");
        let e = find_dylib_in(None, Some(OsString::new()), std::slice::from_ref(&nopython))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("no --ort-dylib, no ORT_DYLIB_PATH, and no onnxruntime package visible to")
                && e.contains(&nopython.display().to_string())
                && e.contains("pip install onnxruntime"),
            "{e}"
        );
        assert!(!e.contains('\n'));
    }

    #[test]
    fn explicit_path_wins_and_package_layout_is_found() {
        let dir = tempfile::tempdir().unwrap();
        let capi = dir.path().join("onnxruntime").join("capi");
        std::fs::create_dir_all(&capi).unwrap();
        for f in [
            "libonnxruntime.so.1.24.0",
            "libonnxruntime.so.1.31.1",
            "libonnxruntime_providers_shared.so",
        ] {
            std::fs::write(capi.join(f), b"").unwrap();
        }
        assert_eq!(
            library_in_package(&dir.path().join("onnxruntime")),
            Some(capi.join("libonnxruntime.so.1.31.1"))
        );
        let lib = capi.join("libonnxruntime.so.1.24.0");
        let loc = find_dylib_in(Some(&lib), Some("/nowhere".into()), &[]).unwrap();
        assert_eq!(loc.source, DylibSource::Explicit);
        let loc = find_dylib_in(None, Some(lib.clone().into_os_string()), &[]).unwrap();
        assert_eq!((loc.path, loc.source), (lib, DylibSource::EnvVar));
    }

    #[test]
    fn observing_sessions_allocate_outside_the_arena() {
        // Without the library there is nothing to check (CI has one).
        let Ok(backend) = OrtBackend::new(OrtOptions::default()) else {
            assert!(std::env::var_os("CI").is_none(), "CI has ONNX Runtime");
            return;
        };
        let path =
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures/models/cnn_bn_relu.onnx");
        let bytes = std::fs::read(&path).expect("fixture");
        let x = HostTensor::from_vec(vec![1, 3, 32, 32], vec![0.5f32; 3 * 32 * 32])
            .unwrap()
            .named("input");
        let allocator = |backend: &OrtBackend, purpose| {
            let m = backend
                .load_for(&bytes, None, &InputShapes::new(), purpose)
                .expect("loads");
            let name = m.outputs[0].name.clone();
            m.with_run(std::slice::from_ref(&x), &[name.as_str()], |r| {
                let v = output(r, &name)?;
                let t = v
                    .view()
                    .downcast::<ort::value::DynTensorValueType>()
                    .map_err(|e| run_error(&e))?;
                Ok(t.memory_info().allocator_type())
            })
            .expect("runs")
        };
        use ort::memory::AllocatorType;
        assert_eq!(
            allocator(&backend, SessionPurpose::Run),
            AllocatorType::Arena
        );
        assert_eq!(
            allocator(&backend, SessionPurpose::Observe),
            AllocatorType::Device
        );
        // Where the caller sized it: the arena, its buffers reused run to run.
        let arena = OrtBackend::new(OrtOptions {
            observe_in_arena: true,
            ..OrtOptions::default()
        })
        .expect("the library loaded above");
        assert_eq!(
            allocator(&arena, SessionPurpose::Observe),
            AllocatorType::Arena
        );
    }
}
