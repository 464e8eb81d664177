//! The shim's C ABI (runtime/tensorrt/infopt_trt_shim.h), mirrored type by type.
//!
//! [`ShimApi`] is a table of `extern "C"` function pointers: loaded from the shim library
//! with [`ShimApi::load`], or filled with a test double's functions in tests. Nothing else
//! in the crate calls the shim directly. Change this file, the header and
//! `ABI_VERSION` together.

use std::ffi::{c_char, c_void};
use std::path::Path;

/// `INFOPT_TRT_ABI_VERSION` of the header this file mirrors.
pub const ABI_VERSION: i32 = 2;

/// Status codes (`INFOPT_TRT_OK`, `INFOPT_TRT_ERR_*`).
pub const STATUS_OK: i32 = 0;
pub const STATUS_FAILED: i32 = 1;
pub const STATUS_MISSING: i32 = 2;
pub const STATUS_VERSION: i32 = 3;

/// `INFOPT_TRT_FLAVOR_*`: what `compiled_flavor` answers.
pub const FLAVOR_TENSORRT: i32 = 0;
pub const FLAVOR_RTX: i32 = 1;

/// `INFOPT_TRT_MAX_DIMS`, TensorRT's `Dims::MAX_DIMS`.
pub const MAX_DIMS: usize = 8;

/// Layer precision codes (`INFOPT_TRT_FP32` ...).
pub const PRECISION_FP32: i32 = 0;
pub const PRECISION_FP16: i32 = 1;
pub const PRECISION_BF16: i32 = 2;
pub const PRECISION_INT8: i32 = 3;

/// Opaque `InfoptTrtLib`.
#[repr(C)]
pub struct TrtLib {
    _private: [u8; 0],
}

#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct ProfileEntry {
    pub input: *const c_char,
    pub nb_dims: i32,
    pub min: [i64; MAX_DIMS],
    pub opt: [i64; MAX_DIMS],
    pub max: [i64; MAX_DIMS],
}

#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct Shape {
    pub input: *const c_char,
    pub nb_dims: i32,
    pub dims: [i64; MAX_DIMS],
}

#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct LayerPrecision {
    pub layer: *const c_char,
    pub precision: i32,
}

#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct BuildConfig {
    pub workspace_bytes: u64,
    pub opt_level: i32,
    pub profile: *const ProfileEntry,
    pub nb_profile: u64,
    pub timing_cache: *const u8,
    pub timing_cache_size: u64,
    pub error_on_timing_cache_miss: i32,
    pub strongly_typed: i32,
    pub fp16: i32,
    pub bf16: i32,
    pub int8: i32,
    pub layer_precisions: *const LayerPrecision,
    pub nb_layer_precisions: u64,
    pub obey_precision_constraints: i32,
    pub model_path: *const c_char,
    pub inspect_engine: i32,
    pub compute_capabilities: *const i32,
    pub nb_compute_capabilities: u64,
}

#[repr(C)]
#[derive(Debug)]
pub struct BuildResult {
    pub engine: *mut u8,
    pub engine_size: u64,
    pub timing_cache: *mut u8,
    pub timing_cache_size: u64,
    pub layer_json: *mut c_char,
    pub warnings: *mut c_char,
    pub build_log: *mut c_char,
}

impl Default for BuildResult {
    fn default() -> Self {
        BuildResult {
            engine: std::ptr::null_mut(),
            engine_size: 0,
            timing_cache: std::ptr::null_mut(),
            timing_cache_size: 0,
            layer_json: std::ptr::null_mut(),
            warnings: std::ptr::null_mut(),
            build_log: std::ptr::null_mut(),
        }
    }
}

pub type AbiVersionFn = unsafe extern "C" fn() -> i32;
pub type CompiledMajorFn = unsafe extern "C" fn() -> i32;
pub type CompiledVersionFn = unsafe extern "C" fn() -> i32;
pub type CompiledFlavorFn = unsafe extern "C" fn() -> i32;
pub type OpenFn = unsafe extern "C" fn(
    nvinfer: *const c_char,
    onnxparser: *const c_char,
    cudart: *const c_char,
    out: *mut *mut TrtLib,
    error: *mut *mut c_char,
) -> i32;
pub type LibraryVersionFn = unsafe extern "C" fn(lib: *const TrtLib) -> i32;
pub type BuildFn = unsafe extern "C" fn(
    lib: *mut TrtLib,
    onnx: *const u8,
    onnx_size: u64,
    config: *const BuildConfig,
    out: *mut BuildResult,
    error: *mut *mut c_char,
) -> i32;
pub type TimeFn = unsafe extern "C" fn(
    lib: *mut TrtLib,
    engine: *const u8,
    engine_size: u64,
    shapes: *const Shape,
    nb_shapes: u64,
    warmup: i32,
    runs: i32,
    times_ms: *mut f32,
    error: *mut *mut c_char,
) -> i32;
pub type FreeFn = unsafe extern "C" fn(ptr: *mut c_void);
pub type FreeBuildResultFn = unsafe extern "C" fn(result: *mut BuildResult);
pub type CloseFn = unsafe extern "C" fn(lib: *mut TrtLib);

/// The shim's functions. `_library` keeps the shared library mapped while the pointers
/// are in use (`None` for a test double).
pub struct ShimApi {
    pub abi_version: AbiVersionFn,
    pub compiled_major: CompiledMajorFn,
    pub compiled_version: CompiledVersionFn,
    pub compiled_flavor: CompiledFlavorFn,
    pub open: OpenFn,
    pub library_version: LibraryVersionFn,
    pub build: BuildFn,
    pub time: TimeFn,
    pub free: FreeFn,
    pub free_build_result: FreeBuildResultFn,
    pub close: CloseFn,
    pub _library: Option<libloading::Library>,
}

impl std::fmt::Debug for ShimApi {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ShimApi")
            .field("loaded", &self._library.is_some())
            .finish_non_exhaustive()
    }
}

impl ShimApi {
    /// Loads the shim library and resolves every function. The error is one line
    /// (the loader's message or the missing symbol).
    pub fn load(path: &Path) -> Result<ShimApi, String> {
        // SAFETY: loading runs the shim's static initializers, which only set up the C++
        // runtime; the shim opens nothing until `open` is called.
        let library = unsafe { libloading::Library::new(path) }
            .map_err(|e| format!("cannot load {}: {e}", path.display()))?;
        macro_rules! symbol {
            ($name:literal, $ty:ty) => {{
                // SAFETY: the symbol's type is the one declared in infopt_trt_shim.h; the
                // ABI version is checked before any other call.
                let s: libloading::Symbol<'_, $ty> =
                    unsafe { library.get($name) }.map_err(|e| {
                        format!(
                            "{} is not an infopt TensorRT shim (missing {}): {e}",
                            path.display(),
                            String::from_utf8_lossy(&$name[..$name.len() - 1])
                        )
                    })?;
                *s
            }};
        }
        let abi_version = symbol!(b"infopt_trt_abi_version\0", AbiVersionFn);
        let compiled_major = symbol!(b"infopt_trt_compiled_major\0", CompiledMajorFn);
        let compiled_version = symbol!(b"infopt_trt_compiled_version\0", CompiledVersionFn);
        let compiled_flavor = symbol!(b"infopt_trt_compiled_flavor\0", CompiledFlavorFn);
        let open = symbol!(b"infopt_trt_open\0", OpenFn);
        let library_version = symbol!(b"infopt_trt_library_version\0", LibraryVersionFn);
        let build = symbol!(b"infopt_trt_build\0", BuildFn);
        let time = symbol!(b"infopt_trt_time\0", TimeFn);
        let free = symbol!(b"infopt_trt_free\0", FreeFn);
        let free_build_result = symbol!(b"infopt_trt_free_build_result\0", FreeBuildResultFn);
        let close = symbol!(b"infopt_trt_close\0", CloseFn);
        Ok(ShimApi {
            abi_version,
            compiled_major,
            compiled_version,
            compiled_flavor,
            open,
            library_version,
            build,
            time,
            free,
            free_build_result,
            close,
            _library: Some(library),
        })
    }
}
