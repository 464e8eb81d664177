//! A test double of the shim's C ABI: `extern "C"` functions that record every call
//! with its arguments and return canned results, for the Rust side's tests and (with
//! the `test-double` feature) for the CLI's. Each test installs its own [`Canned`] with
//! [`install`], opens TensorRT with `TensorRt::open_with(double(), &search)` and reads
//! [`calls`] afterwards. The state is one per process, because the code under test
//! may call the shim from a thread of its own (an engine build runs on a worker while
//! the caller reports progress); `install` therefore also takes a process-wide lock
//! that the installing test's thread holds until it ends, so tests that use the
//! double run one at a time.
//!
//! Not a stable API; test code only (it panics when misused).

use std::cell::RefCell;
use std::ffi::{CStr, CString, c_char, c_void};
use std::sync::{Mutex, MutexGuard};

use super::ffi::{self, ShimApi};

/// One profile entry as it crossed: input, min, opt, max.
pub type ProfileCall = (String, Vec<i64>, Vec<i64>, Vec<i64>);

#[derive(Debug, Clone, PartialEq, Default)]
pub struct BuildCall {
    pub onnx: Vec<u8>,
    pub workspace_bytes: u64,
    pub opt_level: i32,
    pub profile: Vec<ProfileCall>,
    pub timing_cache: Option<Vec<u8>>,
    pub error_on_timing_cache_miss: i32,
    pub strongly_typed: i32,
    pub fp16: i32,
    pub bf16: i32,
    pub int8: i32,
    pub layer_precisions: Vec<(String, i32)>,
    pub obey_precision_constraints: i32,
    pub model_path: Option<String>,
    pub inspect_engine: i32,
    pub compute_capabilities: Vec<i32>,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Call {
    Open {
        nvinfer: String,
        onnxparser: String,
        cudart: Option<String>,
    },
    Build(BuildCall),
    Time {
        engine: Vec<u8>,
        shapes: Vec<(String, Vec<i64>)>,
        warmup: i32,
        runs: i32,
    },
    Close,
}

pub struct Canned {
    pub abi: i32,
    pub major: i32,
    /// `INFOPT_TRT_FLAVOR_*` and the headers' version the double claims to be built for.
    pub flavor: i32,
    pub compiled_version: i32,
    pub version: i32,
    pub open_fails: Option<(i32, &'static str)>,
    pub build_fails: Option<(i32, &'static str)>,
    pub time_fails: Option<(i32, &'static str)>,
    pub engine: Vec<u8>,
    pub cache_out: Option<Vec<u8>>,
    pub layer_json: &'static str,
    pub warnings: Option<&'static str>,
    /// What the shim returns as `build_log` (on success and failure).
    pub build_log: Option<&'static str>,
    pub times: Vec<f32>,
}

impl Canned {
    pub fn trt(major: i32, version: i32) -> Canned {
        Canned {
            abi: ffi::ABI_VERSION,
            major,
            flavor: ffi::FLAVOR_TENSORRT,
            compiled_version: major * 10000,
            version,
            open_fails: None,
            build_fails: None,
            time_fails: None,
            engine: b"PLAN-BYTES".to_vec(),
            cache_out: Some(b"NEW-CACHE".to_vec()),
            layer_json: LAYER_JSON,
            warnings: Some("weights clipped\n\nunused input"),
            build_log: None,
            times: vec![2.0, 1.0, 4.0, 3.0],
        }
    }

    /// TensorRT-RTX `minor` without a GPU: no inspector JSON, the layers in the build log.
    pub fn rtx(minor: i32) -> Canned {
        Canned {
            flavor: ffi::FLAVOR_RTX,
            compiled_version: 10000 + minor * 100,
            layer_json: "",
            cache_out: None,
            build_log: Some(RTX_BUILD_LOG),
            ..Canned::trt(1, 10000 + minor * 100 + 1)
        }
    }
}

/// A TensorRT-RTX build log as the shim collects it: the `Layers:` message (shortened
/// from a real one) and the memory totals.
pub const RTX_BUILD_LOG: &str = "Layers:\nName: conv1/Conv_myl0_1, LayerType: correlation, Inputs: [ { Name: x_q, Dimensions: [1,4,32,32], Strides: [4096,1,128,4], StrideOrder: [3,0,2,1], Datatype: Int8, Format: (NHWC) Channel major format }], Constants: [ { Name: w, Dimensions: [8,4,3,3], Strides: [36,1,12,4], StrideOrder: [3,0,2,1], Datatype: Int8, Format: (NHWC) Channel major format }, { Name: b, Dimensions: [1,8,1,1], Strides: [8,1,8,8], StrideOrder: [3,0,2,1], Datatype: Float, Format: (NHWC) Channel major format }], Outputs: [ { Name: y, Dimensions: [1,8,32,32], Strides: [8192,1,256,8], StrideOrder: [3,0,2,1], Datatype: Float, Format: (NHWC) Channel major format }], TacticName: __myelin_CASK_STUB, StreamId: 0, Metadata: [ONNX Layer: conv1/Conv]\u{1f}[ONNX Layer: x_DequantizeLinear]\nName: __myl_MulAdd_myl0_2, LayerType: kgen, Inputs: [ { Name: y, Dimensions: [1,8,32,32], Strides: [8192,1,256,8], StrideOrder: [3,0,2,1], Datatype: Half, Format: (NHWC) Channel major format }], Constants: [], Outputs: [ { Name: z, Dimensions: [1,8,32,32], Strides: [8192,1,256,8], StrideOrder: [3,0,2,1], Datatype: Half, Format: (NHWC) Channel major format }], TacticName: , StreamId: 0, Metadata: [ONNX Layer: relu1/Relu]\nI/O Tensors:\nTotal Weights Memory: 10656 bytes\nMax Scratch Memory: 8257536 bytes";

pub const LAYER_JSON: &str = r#"{"Layers": [
 {"Name": "/conv/Conv + /relu/Relu", "LayerType": "CaskConvolution",
  "Inputs": [{"Name": "x", "Format/Datatype": "Row major linear FP32 format"}],
  "Outputs": [{"Name": "y", "Format/Datatype": "Channel major FP16 format where channel % 8 == 0"}]},
 {"Name": "/head/Softmax", "LayerType": "Softmax",
  "Inputs": [{"Name": "y", "Format/Datatype": "Half"}],
  "Outputs": [{"Name": "z", "Format/Datatype": "Row major linear FP32 format"}]}
], "Bindings": ["x", "z"]}"#;

pub struct State {
    pub canned: Canned,
    pub calls: Vec<Call>,
    /// Buffers and strings the double handed out and the Rust side has not released.
    pub live: i64,
}

static STATE: Mutex<Option<State>> = Mutex::new(None);
/// Held by the thread of the test whose double is installed (see the module doc).
static IN_USE: Mutex<()> = Mutex::new(());

thread_local! {
    static HELD: RefCell<Option<MutexGuard<'static, ()>>> = const { RefCell::new(None) };
}

fn state() -> MutexGuard<'static, Option<State>> {
    // A test that panicked mid-call leaves the lock poisoned; the next install resets it.
    STATE.lock().unwrap_or_else(|p| p.into_inner())
}

/// Runs `f` on the installed double's state (to change what it answers mid-test).
pub fn with<R>(f: impl FnOnce(&mut State) -> R) -> R {
    f(state().as_mut().expect("double not installed"))
}

pub fn install(canned: Canned) {
    HELD.with(|h| {
        let mut h = h.borrow_mut();
        if h.is_none() {
            *h = Some(IN_USE.lock().unwrap_or_else(|p| p.into_inner()));
        }
    });
    *state() = Some(State {
        canned,
        calls: Vec::new(),
        live: 0,
    });
}

pub fn calls() -> Vec<Call> {
    with(|s| s.calls.clone())
}

pub fn live() -> i64 {
    with(|s| s.live)
}

unsafe fn text(p: *const c_char) -> Option<String> {
    (!p.is_null()).then(|| unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned())
}

fn give_string(s: &str) -> *mut c_char {
    with(|st| st.live += 1);
    CString::new(s).unwrap().into_raw()
}

fn give_bytes(b: &[u8]) -> *mut u8 {
    with(|st| st.live += 1);
    Box::into_raw(b.to_vec().into_boxed_slice()).cast()
}

unsafe fn fail(error: *mut *mut c_char, (code, message): (i32, &str)) -> i32 {
    unsafe { *error = give_string(message) };
    code
}

unsafe extern "C" fn d_abi() -> i32 {
    with(|s| s.canned.abi)
}

unsafe extern "C" fn d_major() -> i32 {
    with(|s| s.canned.major)
}

unsafe extern "C" fn d_compiled_version() -> i32 {
    with(|s| s.canned.compiled_version)
}

unsafe extern "C" fn d_flavor() -> i32 {
    with(|s| s.canned.flavor)
}

unsafe extern "C" fn d_open(
    nvinfer: *const c_char,
    onnxparser: *const c_char,
    cudart: *const c_char,
    out: *mut *mut ffi::TrtLib,
    error: *mut *mut c_char,
) -> i32 {
    let call = unsafe {
        Call::Open {
            nvinfer: text(nvinfer).unwrap(),
            onnxparser: text(onnxparser).unwrap(),
            cudart: text(cudart),
        }
    };
    let fails = with(|s| {
        s.calls.push(call);
        s.canned.open_fails
    });
    if let Some(f) = fails {
        return unsafe { fail(error, f) };
    }
    unsafe { *out = std::ptr::NonNull::<ffi::TrtLib>::dangling().as_ptr() };
    0
}

unsafe extern "C" fn d_version(_lib: *const ffi::TrtLib) -> i32 {
    with(|s| s.canned.version)
}

unsafe extern "C" fn d_build(
    _lib: *mut ffi::TrtLib,
    onnx: *const u8,
    onnx_size: u64,
    config: *const ffi::BuildConfig,
    out: *mut ffi::BuildResult,
    error: *mut *mut c_char,
) -> i32 {
    // SAFETY: the caller's pointers are valid for the call (what the real shim assumes).
    let call = unsafe {
        let c = &*config;
        let slice = |p: *const ffi::ProfileEntry, n: u64| {
            if n == 0 {
                assert!(p.is_null(), "empty array passed as a non-null pointer");
                &[][..]
            } else {
                std::slice::from_raw_parts(p, n as usize)
            }
        };
        let profile = slice(c.profile, c.nb_profile)
            .iter()
            .map(|e| {
                let n = e.nb_dims as usize;
                (
                    text(e.input).unwrap(),
                    e.min[..n].to_vec(),
                    e.opt[..n].to_vec(),
                    e.max[..n].to_vec(),
                )
            })
            .collect();
        let layer_precisions = if c.nb_layer_precisions == 0 {
            assert!(c.layer_precisions.is_null());
            Vec::new()
        } else {
            std::slice::from_raw_parts(c.layer_precisions, c.nb_layer_precisions as usize)
                .iter()
                .map(|l| (text(l.layer).unwrap(), l.precision))
                .collect()
        };
        BuildCall {
            onnx: std::slice::from_raw_parts(onnx, onnx_size as usize).to_vec(),
            workspace_bytes: c.workspace_bytes,
            opt_level: c.opt_level,
            profile,
            timing_cache: (!c.timing_cache.is_null()).then(|| {
                std::slice::from_raw_parts(c.timing_cache, c.timing_cache_size as usize).to_vec()
            }),
            error_on_timing_cache_miss: c.error_on_timing_cache_miss,
            strongly_typed: c.strongly_typed,
            fp16: c.fp16,
            bf16: c.bf16,
            int8: c.int8,
            layer_precisions,
            obey_precision_constraints: c.obey_precision_constraints,
            model_path: text(c.model_path),
            inspect_engine: c.inspect_engine,
            compute_capabilities: if c.nb_compute_capabilities == 0 {
                assert!(c.compute_capabilities.is_null());
                Vec::new()
            } else {
                std::slice::from_raw_parts(
                    c.compute_capabilities,
                    c.nb_compute_capabilities as usize,
                )
                .to_vec()
            },
        }
    };
    let fails = with(|s| {
        s.calls.push(Call::Build(call));
        s.canned.build_fails
    });
    let log = with(|s| s.canned.build_log);
    if let Some(f) = fails {
        // The real shim hands back what the builder logged even when the build fails.
        unsafe { (*out).build_log = log.map_or(std::ptr::null_mut(), give_string) };
        return unsafe { fail(error, f) };
    }
    let (engine, cache, json, warnings) = with(|s| {
        (
            s.canned.engine.clone(),
            s.canned.cache_out.clone(),
            s.canned.layer_json,
            s.canned.warnings,
        )
    });
    let r = ffi::BuildResult {
        engine: give_bytes(&engine),
        engine_size: engine.len() as u64,
        timing_cache: cache.as_deref().map_or(std::ptr::null_mut(), give_bytes),
        timing_cache_size: cache.as_ref().map_or(0, |c| c.len() as u64),
        layer_json: give_string(json),
        warnings: warnings.map_or(std::ptr::null_mut(), give_string),
        build_log: log.map_or(std::ptr::null_mut(), give_string),
    };
    unsafe { *out = r };
    0
}

unsafe extern "C" fn d_time(
    _lib: *mut ffi::TrtLib,
    engine: *const u8,
    engine_size: u64,
    shapes: *const ffi::Shape,
    nb_shapes: u64,
    warmup: i32,
    runs: i32,
    times_ms: *mut f32,
    error: *mut *mut c_char,
) -> i32 {
    let call = unsafe {
        Call::Time {
            engine: std::slice::from_raw_parts(engine, engine_size as usize).to_vec(),
            shapes: if nb_shapes == 0 {
                Vec::new()
            } else {
                std::slice::from_raw_parts(shapes, nb_shapes as usize)
                    .iter()
                    .map(|s| {
                        (
                            text(s.input).unwrap(),
                            s.dims[..s.nb_dims as usize].to_vec(),
                        )
                    })
                    .collect()
            },
            warmup,
            runs,
        }
    };
    let (fails, times) = with(|s| {
        s.calls.push(call);
        (s.canned.time_fails, s.canned.times.clone())
    });
    if let Some(f) = fails {
        return unsafe { fail(error, f) };
    }
    for i in 0..runs as usize {
        unsafe { *times_ms.add(i) = times[i % times.len()] };
    }
    0
}

unsafe extern "C" fn d_free(ptr: *mut c_void) {
    if !ptr.is_null() {
        drop(unsafe { CString::from_raw(ptr.cast()) });
        with(|s| s.live -= 1);
    }
}

unsafe extern "C" fn d_free_build_result(r: *mut ffi::BuildResult) {
    let r = unsafe { &mut *r };
    let bytes = |p: *mut u8, n: u64| {
        if !p.is_null() {
            drop(unsafe { Box::from_raw(std::ptr::slice_from_raw_parts_mut(p, n as usize)) });
            with(|s| s.live -= 1);
        }
    };
    bytes(r.engine, r.engine_size);
    bytes(r.timing_cache, r.timing_cache_size);
    for s in [r.layer_json, r.warnings, r.build_log] {
        unsafe { d_free(s.cast()) };
    }
    *r = ffi::BuildResult::default();
}

unsafe extern "C" fn d_close(_lib: *mut ffi::TrtLib) {
    with(|s| s.calls.push(Call::Close));
}

pub fn double() -> ShimApi {
    ShimApi {
        abi_version: d_abi,
        compiled_major: d_major,
        compiled_version: d_compiled_version,
        compiled_flavor: d_flavor,
        open: d_open,
        library_version: d_version,
        build: d_build,
        time: d_time,
        free: d_free,
        free_build_result: d_free_build_result,
        close: d_close,
        _library: None,
    }
}
