//! TensorRT: build engines from ONNX and time them, through the infopt TensorRT shim.
//!
//! TensorRT's API is C++, so infopt talks to it through a small C++ library with a C ABI,
//! `libinfopt_trt_shim.so` (source in runtime/tensorrt/, built on a TensorRT machine with
//! runtime/tensorrt/build.sh). infopt loads the shim at run time and the shim loads
//! TensorRT at run time: infopt builds and runs without TensorRT, and says what is missing
//! ([`RuntimeError::Unavailable`]) when an operation needs it. [`discover`] documents where
//! both are looked for.
//!
//! A shim is compiled for one flavour ([`flavor`]: TensorRT 10, TensorRT 11, TensorRT-RTX
//! 1.x) and version. runtime/build.rs compiles one per header folder of the `trtx-sys`
//! crate source into this crate ([`embedded`]); [`TensorRt::open`] picks the one matching
//! the library it finds. TensorRT 11 and TensorRT-RTX build strongly typed networks only
//! (precision comes from the ONNX graph); TensorRT 10 also takes builder precision flags
//! and per-layer overrides ([`Trt10Precision`]). TensorRT-RTX builds without a GPU: then
//! the engine is never deserialized and its kernels come from the builder's log
//! ([`layers::parse_build_log`]).
//!
//! ```no_run
//! use infopt_runtime::tensorrt::{EngineBuildConfig, Profile, TensorRt, TrtOptions};
//! # fn main() -> Result<(), infopt_runtime::RuntimeError> {
//! let trt = TensorRt::open(&TrtOptions::default())?;
//! let onnx = std::fs::read("model.onnx").unwrap();
//! let cfg = EngineBuildConfig {
//!     workspace_bytes: Some(1 << 30),
//!     profiles: vec![Profile { input: "x".into(), min: vec![1, 3, 224, 224], opt: vec![8, 3, 224, 224], max: vec![32, 3, 224, 224] }],
//!     ..Default::default()
//! };
//! let engine = trt.build_engine(&onnx, &cfg)?;
//! let latency = trt.time_engine(&engine.bytes, &[], 10, 100)?;
//! # let _ = latency; Ok(()) }
//! ```

pub mod args;
pub mod config;
pub mod discover;
pub mod embedded;
pub mod ffi;
pub mod flavor;
pub mod layers;
pub mod version;

#[cfg(test)]
mod tests;

/// A recording test double of the shim's C ABI (tests only; the `test-double` feature
/// exposes it to other crates' tests).
#[cfg(any(test, feature = "test-double"))]
#[doc(hidden)]
pub mod test_double;

use std::ffi::{CStr, CString, c_char};
use std::path::{Path, PathBuf};
use std::ptr::NonNull;
use std::time::Instant;

pub use config::{
    BuiltEngine, EngineBuildConfig, LayerOverride, LayerPrecision, Profile, Trt10Precision,
};
pub use discover::{LibSearch, LibSource, TrtLibs};
pub use flavor::FlavorSpec;
pub use layers::{EngineMemory, EnginePrecision, LayerInfo, LayerSource, TensorInfo};
pub use version::TrtVersion;

use crate::error::{Result, RuntimeError};
use crate::timing::Latency;
use discover::unavailable;

const BACKEND: &str = "TensorRT";

/// Where to find the shim and TensorRT (the CLI's `--trt-shim`, `--trt-lib` and
/// `--trt-flavor`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TrtOptions {
    pub shim: Option<PathBuf>,
    pub lib_dir: Option<PathBuf>,
    /// A [`flavor::by_id`] spelling; `None`: TensorRT 11/10 where a GPU is present and
    /// installed, TensorRT-RTX otherwise.
    pub flavor: Option<String>,
}

/// An opened TensorRT: the shim, and TensorRT loaded by it.
#[derive(Debug)]
pub struct TensorRt {
    api: ffi::ShimApi,
    lib: NonNull<ffi::TrtLib>,
    version: TrtVersion,
    libs: TrtLibs,
    shim_path: Option<PathBuf>,
    flavor: &'static FlavorSpec,
    /// The version of the headers the shim was compiled against.
    shim_version: TrtVersion,
    /// Whether the shim is one of the built-in ones.
    builtin_shim: bool,
    gpu: bool,
    /// The TensorRT library as infopt opened it to read its version before choosing a
    /// built-in shim, kept loaded so the shim's dlopen reuses it.
    _probe: Option<libloading::Library>,
}

// SAFETY: the shim serializes calls on one handle with a mutex, and the handle is not tied
// to the thread that created it.
unsafe impl Send for TensorRt {}

impl Drop for TensorRt {
    fn drop(&mut self) {
        // SAFETY: `lib` came from the shim's `open` and is closed once, here.
        unsafe { (self.api.close)(self.lib.as_ptr()) }
    }
}

impl TensorRt {
    /// Finds and loads the shim, then TensorRT. A shim given with `--trt-shim`,
    /// `INFOPT_TRT_SHIM` or found next to the executable decides the flavour; otherwise
    /// the flavour is `options.flavor` or the default, and the built-in shim matching
    /// the library's version is used.
    pub fn open(options: &TrtOptions) -> Result<TensorRt> {
        let requested = options.flavor.as_deref().map(flavor::by_id).transpose()?;
        let gpu = flavor::gpu_present();
        let search = LibSearch::from_environment(options.lib_dir.clone());
        let exe_dir = std::env::current_exe()
            .ok()
            .and_then(|p| p.parent().map(Path::to_path_buf));
        let env_shim = std::env::var_os(discover::SHIM_ENV).filter(|v| !v.is_empty());
        let explicit = options.shim.is_some() || env_shim.is_some();
        match discover::find_shim(options.shim.as_deref(), env_shim, exe_dir.as_deref()) {
            Ok(shim) => {
                let api = ffi::ShimApi::load(&shim)
                    .map_err(|e| unavailable(format!("{e}; {}", discover::SHIM_HINT)))?;
                let mut trt = TensorRt::open_with_gpu(api, &search, gpu)?;
                if let Some(want) = requested
                    && want.id != trt.flavor.id
                {
                    return Err(unavailable(format!(
                        "--trt-flavor {} but the shim {} is built for {}; drop --trt-shim/{} to use the built-in shims, or give a shim of that flavour",
                        want.id,
                        shim.display(),
                        trt.flavor.display,
                        discover::SHIM_ENV
                    )));
                }
                trt.shim_path = Some(shim);
                Ok(trt)
            }
            Err(e) if explicit => Err(e),
            Err(_) => TensorRt::open_builtin(requested, &search, gpu),
        }
    }

    /// Opens TensorRT through the built-in shim of `requested` (or the default flavour).
    fn open_builtin(
        requested: Option<&'static FlavorSpec>,
        search: &LibSearch,
        gpu: bool,
    ) -> Result<TensorRt> {
        let spec = match requested {
            Some(s) => s,
            None => default_flavor(search, gpu),
        };
        if embedded::shims_of(spec).is_empty() {
            return Err(unavailable(format!(
                "this infopt has no built-in shim for {} (built-in: {}); {}",
                spec.display,
                builtin_summary(),
                discover::SHIM_HINT
            )));
        }
        let libs = search.find_flavor(spec)?;
        let (probe, lib_version) = probe_version(&libs.nvinfer, spec)?;
        let Some(shim) = embedded::shim_for(spec, lib_version) else {
            return Err(unavailable(format!(
                "{} at {} has no matching built-in shim (this infopt has {} {}); install {} or build a shim against its headers with runtime/tensorrt/build.sh and pass --trt-shim",
                spec.describe(lib_version),
                libs.nvinfer.display(),
                spec.display,
                embedded::versions_of(spec),
                spec.install
            )));
        };
        let path = embedded::materialize(shim)?;
        let api = ffi::ShimApi::load(&path)
            .map_err(|e| unavailable(format!("the built-in shim: {e}")))?;
        let mut trt = TensorRt::open_with_gpu(api, search, gpu)?;
        trt.shim_path = Some(path);
        trt.builtin_shim = true;
        trt._probe = Some(probe);
        Ok(trt)
    }

    /// Opens TensorRT through an already loaded shim (or a test double).
    pub fn open_with(api: ffi::ShimApi, search: &LibSearch) -> Result<TensorRt> {
        TensorRt::open_with_gpu(api, search, flavor::gpu_present())
    }

    /// As [`TensorRt::open_with`], saying whether a GPU is present (without one, builds
    /// never deserialize the engine).
    pub fn open_with_gpu(api: ffi::ShimApi, search: &LibSearch, gpu: bool) -> Result<TensorRt> {
        // SAFETY: both functions take no arguments and only return constants.
        let abi = unsafe { (api.abi_version)() };
        if abi != ffi::ABI_VERSION {
            return Err(unavailable(format!(
                "the TensorRT shim speaks C ABI version {abi} but this infopt expects {}; rebuild the shim from this infopt's runtime/tensorrt/ with build.sh",
                ffi::ABI_VERSION
            )));
        }
        // SAFETY: as above.
        let major = unsafe { (api.compiled_major)() };
        let major = u32::try_from(major).map_err(|_| {
            unavailable(format!("the TensorRT shim reports compiled major {major}"))
        })?;
        // SAFETY: as above.
        let (abi_flavor, compiled) = unsafe { ((api.compiled_flavor)(), (api.compiled_version)()) };
        let spec = flavor::of_shim(abi_flavor, major).ok_or_else(|| {
            unavailable(format!(
                "the TensorRT shim is built for flavour {abi_flavor}, major {major}, which this infopt does not know; rebuild it from this infopt's runtime/tensorrt/"
            ))
        })?;
        let libs = search.find_flavor(spec)?;
        let nvinfer = path_cstring(&libs.nvinfer)?;
        let parser = path_cstring(&libs.onnxparser)?;
        let cudart = libs.cudart.as_deref().map(path_cstring).transpose()?;
        let mut handle: *mut ffi::TrtLib = std::ptr::null_mut();
        let mut error: *mut c_char = std::ptr::null_mut();
        // SAFETY: every pointer is valid for the call; the shim writes `handle` or `error`.
        let status = unsafe {
            (api.open)(
                nvinfer.as_ptr(),
                parser.as_ptr(),
                cudart.as_ref().map_or(std::ptr::null(), |c| c.as_ptr()),
                &mut handle,
                &mut error,
            )
        };
        if status != ffi::STATUS_OK {
            // SAFETY: on failure `error` is null or a shim-allocated string.
            let message = unsafe { take_error(&api, error) };
            return Err(match status {
                ffi::STATUS_MISSING => unavailable(format!(
                    "{message} (found through {}); {}",
                    libs.source,
                    discover::install_hint_for(spec)
                )),
                ffi::STATUS_VERSION => unavailable(message),
                _ => RuntimeError::Load {
                    backend: BACKEND.into(),
                    message,
                },
            });
        }
        let lib = NonNull::new(handle).ok_or_else(|| RuntimeError::Load {
            backend: BACKEND.into(),
            message: "the shim reported success but returned no handle".into(),
        })?;
        // SAFETY: `lib` is a live handle.
        let version = TrtVersion::from_encoded(unsafe { (api.library_version)(lib.as_ptr()) });
        Ok(TensorRt {
            api,
            lib,
            version,
            libs,
            shim_path: None,
            flavor: spec,
            shim_version: TrtVersion::from_encoded(compiled),
            builtin_shim: false,
            gpu,
            _probe: None,
        })
    }

    /// The flavour of the opened TensorRT.
    pub fn flavor(&self) -> &'static FlavorSpec {
        self.flavor
    }

    /// The version of the headers the shim was compiled against.
    pub fn shim_version(&self) -> TrtVersion {
        self.shim_version
    }

    /// Whether the shim is one compiled into infopt.
    pub fn builtin_shim(&self) -> bool {
        self.builtin_shim
    }

    /// Whether a GPU was found (builds inspect the engine only then).
    pub fn gpu_present(&self) -> bool {
        self.gpu
    }

    /// The loaded TensorRT's version (`getInferLibVersion`).
    pub fn version(&self) -> TrtVersion {
        self.version
    }

    /// The libraries the shim opened.
    pub fn libraries(&self) -> &TrtLibs {
        &self.libs
    }

    /// The shim file, when [`TensorRt::open`] found it.
    pub fn shim_path(&self) -> Option<&Path> {
        self.shim_path.as_deref()
    }

    /// Parses the ONNX bytes, builds and serializes an engine, and lists its layers.
    pub fn build_engine(&self, onnx: &[u8], cfg: &EngineBuildConfig) -> Result<BuiltEngine> {
        match self.build_once(onnx, cfg) {
            Err(RuntimeError::Load { backend, message })
                if message.contains("within workspace limit") && cfg.workspace_bytes.is_some() =>
            {
                let _ = backend;
                Err(RuntimeError::InvalidArgument(
                    self.workspace_message(onnx, cfg, &message),
                ))
            }
            other => other,
        }
    }

    /// Why a workspace was too small, with the scratch a build without the limit asks
    /// for (TensorRT does not say it when the limit makes the build fail).
    fn workspace_message(&self, onnx: &[u8], cfg: &EngineBuildConfig, original: &str) -> String {
        let limit = cfg.workspace_bytes.unwrap_or(0);
        let unlimited = EngineBuildConfig {
            workspace_bytes: None,
            ..cfg.clone()
        };
        let needed = self
            .build_once(onnx, &unlimited)
            .ok()
            .and_then(|b| b.memory.and_then(|m| m.max_scratch_bytes));
        match needed {
            Some(n) => format!(
                "--workspace {} is too small: this build needs {n} bytes of scratch memory; raise it to at least --workspace {}",
                args::format_size(limit),
                args::format_size_up(n)
            ),
            None => format!(
                "--workspace {} is too small for this model; raise it (TensorRT: {original})",
                args::format_size(limit)
            ),
        }
    }

    fn build_once(&self, onnx: &[u8], cfg: &EngineBuildConfig) -> Result<BuiltEngine> {
        cfg.validate(self.flavor, self.version)?;
        let mut notices = Vec::new();
        let cache_in = if self.flavor.timing_cache {
            read_timing_cache(cfg)?
        } else {
            if let Some(path) = &cfg.timing_cache {
                notices.push(format!(
                    "{} has no timing cache (a deprecated no-op there): --timing-cache {} was neither read nor written",
                    self.flavor.display,
                    path.display()
                ));
            }
            None
        };
        let ccs: Vec<i32> = cfg.compute_capabilities.iter().map(|&c| c as i32).collect();
        let inputs = AbiStrings::default();
        let mut profile = Vec::with_capacity(cfg.profiles.len());
        for p in &cfg.profiles {
            let mut entry = ffi::ProfileEntry {
                input: inputs.add(&p.input, "input name")?,
                nb_dims: p.min.len() as i32,
                min: [0; ffi::MAX_DIMS],
                opt: [0; ffi::MAX_DIMS],
                max: [0; ffi::MAX_DIMS],
            };
            entry.min[..p.min.len()].copy_from_slice(&p.min);
            entry.opt[..p.opt.len()].copy_from_slice(&p.opt);
            entry.max[..p.max.len()].copy_from_slice(&p.max);
            profile.push(entry);
        }
        let mut overrides = Vec::with_capacity(cfg.precision.layer_overrides.len());
        for o in &cfg.precision.layer_overrides {
            overrides.push(ffi::LayerPrecision {
                layer: inputs.add(&o.layer, "layer name")?,
                precision: o.precision.abi_code(),
            });
        }
        let model_path = match &cfg.model_path {
            Some(p) => Some(path_cstring(p)?),
            None => None,
        };
        let abi_cfg = ffi::BuildConfig {
            workspace_bytes: cfg.workspace_bytes.unwrap_or(0),
            opt_level: cfg.opt_level.map_or(-1, i32::from),
            profile: ptr_or_null(&profile),
            nb_profile: profile.len() as u64,
            timing_cache: cache_in.as_ref().map_or(std::ptr::null(), |c| c.as_ptr()),
            timing_cache_size: cache_in.as_ref().map_or(0, |c| c.len() as u64),
            error_on_timing_cache_miss: cfg.error_on_timing_cache_miss.into(),
            strongly_typed: cfg.strongly_typed.into(),
            fp16: cfg.precision.fp16.into(),
            bf16: cfg.precision.bf16.into(),
            int8: cfg.precision.int8.into(),
            layer_precisions: ptr_or_null(&overrides),
            nb_layer_precisions: overrides.len() as u64,
            obey_precision_constraints: cfg.precision.obey_constraints.into(),
            model_path: model_path.as_ref().map_or(std::ptr::null(), |c| c.as_ptr()),
            inspect_engine: self.gpu.into(),
            compute_capabilities: ptr_or_null(&ccs),
            nb_compute_capabilities: ccs.len() as u64,
        };
        let mut result = ffi::BuildResult::default();
        let mut error: *mut c_char = std::ptr::null_mut();
        let start = Instant::now();
        // SAFETY: every pointer in `abi_cfg` points into locals that outlive the call.
        let status = unsafe {
            (self.api.build)(
                self.lib.as_ptr(),
                onnx.as_ptr(),
                onnx.len() as u64,
                &abi_cfg,
                &mut result,
                &mut error,
            )
        };
        let build_time = start.elapsed();
        if status != ffi::STATUS_OK {
            // SAFETY: on failure `error` is null or a shim-allocated string, and `result`
            // holds at most a build log (released here).
            let message = unsafe {
                (self.api.free_build_result)(&mut result);
                take_error(&self.api, error)
            };
            return Err(match status {
                ffi::STATUS_MISSING => unavailable(message),
                _ => RuntimeError::Load {
                    backend: BACKEND.into(),
                    message: explain_build_error(message),
                },
            });
        }
        // SAFETY: on success the shim filled `result`; it is released right after copying.
        let (bytes, cache_out, json, warnings, build_log) = unsafe {
            let copied = (
                copy_bytes(result.engine, result.engine_size),
                (result.timing_cache_size > 0)
                    .then(|| copy_bytes(result.timing_cache, result.timing_cache_size)),
                copy_string(result.layer_json),
                copy_string(result.warnings),
                copy_string(result.build_log),
            );
            (self.api.free_build_result)(&mut result);
            copied
        };
        if bytes.is_empty() {
            return Err(RuntimeError::Load {
                backend: BACKEND.into(),
                message: "the shim returned an empty engine".into(),
            });
        }
        let (layers, layer_source) = if !json.trim().is_empty() {
            (layers::parse_engine_layers(&json)?, LayerSource::Inspector)
        } else if let Some(layers) = layers::parse_build_log(&build_log) {
            (layers, LayerSource::BuildLog)
        } else {
            (Vec::new(), LayerSource::None)
        };
        let mut warnings: Vec<String> = warnings
            .lines()
            .map(str::to_string)
            .filter(|l| !l.is_empty())
            .collect();
        warnings.extend(notices);
        Ok(BuiltEngine {
            bytes,
            layers,
            layer_source,
            memory: layers::parse_memory(&build_log),
            layer_json: json,
            build_log,
            build_time,
            timing_cache_bytes: cache_out,
            warnings,
            trt_version: self.version,
            flavor: self.flavor.id,
            compute_capabilities: cfg.compute_capabilities.clone(),
        })
    }

    /// Times a serialized engine: `warmup` untimed runs, then `runs` runs each timed on
    /// the GPU with CUDA events (device time of `enqueueV3`, no host copies). Inputs are
    /// zero-filled; an input not in `shapes` runs at its optimization profile's opt shape.
    pub fn time_engine(
        &self,
        engine: &[u8],
        shapes: &[(String, Vec<i64>)],
        warmup: usize,
        runs: usize,
    ) -> Result<Latency> {
        if runs == 0 {
            return Err(RuntimeError::InvalidArgument(
                "latency needs at least one timed run".into(),
            ));
        }
        let too_many =
            |what: &str| RuntimeError::InvalidArgument(format!("{what} above {}", i32::MAX));
        let warmup_i = i32::try_from(warmup).map_err(|_| too_many("warm-up runs"))?;
        let runs_i = i32::try_from(runs).map_err(|_| too_many("timed runs"))?;
        let names = AbiStrings::default();
        let mut abi_shapes = Vec::with_capacity(shapes.len());
        for (name, dims) in shapes {
            if dims.len() > ffi::MAX_DIMS {
                return Err(RuntimeError::InputShape {
                    input: name.clone(),
                    message: format!(
                        "rank {} is above TensorRT's limit of {}",
                        dims.len(),
                        ffi::MAX_DIMS
                    ),
                });
            }
            if let Some(d) = dims.iter().find(|d| **d < 0) {
                return Err(RuntimeError::InputShape {
                    input: name.clone(),
                    message: format!("dim {d} is negative; timing needs concrete shapes"),
                });
            }
            let mut s = ffi::Shape {
                input: names.add(name, "input name")?,
                nb_dims: dims.len() as i32,
                dims: [0; ffi::MAX_DIMS],
            };
            s.dims[..dims.len()].copy_from_slice(dims);
            abi_shapes.push(s);
        }
        let mut times = vec![0f32; runs];
        let mut error: *mut c_char = std::ptr::null_mut();
        // SAFETY: `times` has `runs` slots; the other pointers outlive the call.
        let status = unsafe {
            (self.api.time)(
                self.lib.as_ptr(),
                engine.as_ptr(),
                engine.len() as u64,
                ptr_or_null(&abi_shapes),
                abi_shapes.len() as u64,
                warmup_i,
                runs_i,
                times.as_mut_ptr(),
                &mut error,
            )
        };
        if status != ffi::STATUS_OK {
            // SAFETY: on failure `error` is null or a shim-allocated string.
            let message = unsafe { take_error(&self.api, error) };
            return Err(match status {
                ffi::STATUS_MISSING => unavailable(message),
                _ => RuntimeError::Run {
                    backend: BACKEND.into(),
                    message,
                },
            });
        }
        let samples: Vec<f64> = times.into_iter().map(f64::from).collect();
        Latency::from_samples(warmup, &samples)
    }
}

/// The flavour used when `--trt-flavor` is not given: with a GPU, TensorRT 11 or 10 when
/// installed and a built-in shim drives it; TensorRT-RTX otherwise.
pub fn default_flavor(search: &LibSearch, gpu: bool) -> &'static FlavorSpec {
    let rtx = flavor::FLAVORS
        .iter()
        .find(|f| f.builds_without_gpu)
        .unwrap_or(&flavor::FLAVORS[0]);
    if gpu {
        for spec in flavor::FLAVORS.iter().filter(|f| !f.builds_without_gpu) {
            if !embedded::shims_of(spec).is_empty() && search.find_flavor(spec).is_ok() {
                return spec;
            }
        }
    }
    rtx
}

/// "TensorRT 11 11.4, TensorRT-RTX 1.3–1.7": the built-in shims, for messages.
pub fn builtin_summary() -> String {
    let parts: Vec<String> = flavor::FLAVORS
        .iter()
        .filter(|f| !embedded::shims_of(f).is_empty())
        .map(|f| format!("{} {}", f.display, embedded::versions_of(f)))
        .collect();
    if parts.is_empty() {
        "none".into()
    } else {
        parts.join("; ")
    }
}

/// Reads `getInferLibVersion` of the library at `path`, keeping it loaded.
fn probe_version(path: &Path, spec: &FlavorSpec) -> Result<(libloading::Library, TrtVersion)> {
    let missing = |e: String| {
        unavailable(format!(
            "cannot load {} {}: {e}; {}",
            spec.display,
            path.display(),
            discover::install_hint_for(spec)
        ))
    };
    // SAFETY: loading TensorRT runs its static initializers, which register nothing
    // outside the library; the symbol is `int32_t getInferLibVersion(void)`.
    let library = unsafe { libloading::Library::new(path) }.map_err(|e| missing(e.to_string()))?;
    let encoded = unsafe {
        let f: libloading::Symbol<'_, unsafe extern "C" fn() -> i32> = library
            .get(b"getInferLibVersion\0")
            .map_err(|e| missing(e.to_string()))?;
        f()
    };
    Ok((library, TrtVersion::from_encoded(encoded)))
}

/// Drops the CUDA errors a build without a GPU adds to TensorRT's own messages (they
/// are about the missing driver, never the cause), and says what a user can do about
/// the failures whose cause is known.
fn explain_build_error(message: String) -> String {
    let kept: Vec<&str> = message
        .split("; ")
        .filter(|part| !(part.contains("cudaError 35") || part.contains("catchCudaError")))
        .collect();
    let message = kept.join("; ");
    if let Some(node) = ort_style_qdq_node(&message) {
        return format!(
            "the TensorRT ONNX parser rejected node `{node}` (DequantizeLinear): its input is INT32, ONNX Runtime-style Q/DQ (an INT32 bias through DequantizeLinear), which TensorRT does not parse; quantize for TensorRT instead: build-engine --int8 --calib-data DIR, or optimize --int8 --target tensorrt"
        );
    }
    message
}

/// The DequantizeLinear node the parser refused for its INT32 input, if that is the error.
fn ort_style_qdq_node(message: &str) -> Option<&str> {
    if !(message.contains("DequantizeLinear") && message.contains("input has type Int32")) {
        return None;
    }
    let start = message.find("node `")? + "node `".len();
    let len = message[start..].find('`')?;
    Some(&message[start..start + len])
}

/// Writes an updated timing cache next to its final place, then renames it over, so an
/// interrupted write never leaves a truncated cache.
pub fn save_timing_cache(path: &Path, bytes: &[u8]) -> Result<()> {
    let io = |e: std::io::Error| {
        RuntimeError::InvalidArgument(format!("cannot write timing cache {}: {e}", path.display()))
    };
    let dir = path
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".tmp");
    let tmp = PathBuf::from(tmp);
    std::fs::create_dir_all(dir).map_err(io)?;
    std::fs::write(&tmp, bytes).map_err(io)?;
    std::fs::rename(&tmp, path).map_err(io)
}

fn read_timing_cache(cfg: &EngineBuildConfig) -> Result<Option<Vec<u8>>> {
    let Some(path) = &cfg.timing_cache else {
        return Ok(None);
    };
    match std::fs::read(path) {
        Ok(bytes) => Ok(Some(bytes)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            if cfg.error_on_timing_cache_miss {
                Err(RuntimeError::InvalidArgument(format!(
                    "timing cache {} does not exist, and every tactic would be a cache miss; build once without --error-on-timing-cache-miss to create it",
                    path.display()
                )))
            } else {
                Ok(None)
            }
        }
        Err(e) => Err(RuntimeError::InvalidArgument(format!(
            "cannot read timing cache {}: {e}",
            path.display()
        ))),
    }
}

/// NUL-terminated copies of strings handed to the shim, alive as long as this value.
#[derive(Default)]
struct AbiStrings {
    held: std::cell::RefCell<Vec<CString>>,
}

impl AbiStrings {
    fn add(&self, s: &str, what: &str) -> Result<*const c_char> {
        let c = CString::new(s).map_err(|_| {
            RuntimeError::InvalidArgument(format!(
                "{what} `{}` contains a NUL byte",
                s.escape_debug()
            ))
        })?;
        let ptr = c.as_ptr();
        // Moving a CString does not move its heap buffer, so `ptr` stays valid.
        self.held.borrow_mut().push(c);
        Ok(ptr)
    }
}

fn path_cstring(p: &Path) -> Result<CString> {
    use std::os::unix::ffi::OsStrExt;
    CString::new(p.as_os_str().as_bytes()).map_err(|_| {
        RuntimeError::InvalidArgument(format!("path {} contains a NUL byte", p.display()))
    })
}

fn ptr_or_null<T>(v: &[T]) -> *const T {
    if v.is_empty() {
        std::ptr::null()
    } else {
        v.as_ptr()
    }
}

/// Takes a shim error string: one line (TensorRT's several messages joined by "; "),
/// then releases it.
///
/// # Safety
/// `error` is null or a string allocated by this shim and not yet freed.
unsafe fn take_error(api: &ffi::ShimApi, error: *mut c_char) -> String {
    if error.is_null() {
        return "the TensorRT shim failed without a message".into();
    }
    // SAFETY: per the contract, a NUL-terminated string from the shim.
    let text = unsafe { CStr::from_ptr(error) }
        .to_string_lossy()
        .into_owned();
    // SAFETY: released once, with the shim's own free.
    unsafe { (api.free)(error.cast()) };
    let lines: Vec<String> = text
        .lines()
        .map(|l| l.split_whitespace().collect::<Vec<_>>().join(" "))
        .filter(|l| !l.is_empty())
        .collect();
    lines.join("; ")
}

/// # Safety
/// `ptr` is null or valid for `len` bytes.
unsafe fn copy_bytes(ptr: *const u8, len: u64) -> Vec<u8> {
    if ptr.is_null() || len == 0 {
        return Vec::new();
    }
    // SAFETY: per the contract.
    unsafe { std::slice::from_raw_parts(ptr, len as usize) }.to_vec()
}

/// # Safety
/// `ptr` is null or a NUL-terminated string.
unsafe fn copy_string(ptr: *const c_char) -> String {
    if ptr.is_null() {
        return String::new();
    }
    // SAFETY: per the contract.
    unsafe { CStr::from_ptr(ptr) }
        .to_string_lossy()
        .into_owned()
}
