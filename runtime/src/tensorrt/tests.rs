//! The Rust side against a test double of the shim's C ABI: `extern "C"` functions that
//! record every call with its arguments and return canned results. Each test runs on its
//! own thread, so the double's state is thread-local.

use std::cell::RefCell;
use std::ffi::{CStr, CString, c_char, c_void};
use std::path::{Path, PathBuf};

use super::ffi::{self, ShimApi};
use super::*;

/// One profile entry as it crossed: input, min, opt, max.
type ProfileCall = (String, Vec<i64>, Vec<i64>, Vec<i64>);

#[derive(Debug, Clone, PartialEq, Default)]
struct BuildCall {
    onnx: Vec<u8>,
    workspace_bytes: u64,
    opt_level: i32,
    profile: Vec<ProfileCall>,
    timing_cache: Option<Vec<u8>>,
    error_on_timing_cache_miss: i32,
    strongly_typed: i32,
    fp16: i32,
    bf16: i32,
    int8: i32,
    layer_precisions: Vec<(String, i32)>,
    obey_precision_constraints: i32,
    model_path: Option<String>,
}

#[derive(Debug, Clone, PartialEq)]
enum Call {
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

struct Canned {
    abi: i32,
    major: i32,
    version: i32,
    open_fails: Option<(i32, &'static str)>,
    build_fails: Option<(i32, &'static str)>,
    time_fails: Option<(i32, &'static str)>,
    engine: Vec<u8>,
    cache_out: Option<Vec<u8>>,
    layer_json: &'static str,
    warnings: Option<&'static str>,
    times: Vec<f32>,
}

impl Canned {
    fn trt(major: i32, version: i32) -> Canned {
        Canned {
            abi: ffi::ABI_VERSION,
            major,
            version,
            open_fails: None,
            build_fails: None,
            time_fails: None,
            engine: b"PLAN-BYTES".to_vec(),
            cache_out: Some(b"NEW-CACHE".to_vec()),
            layer_json: LAYER_JSON,
            warnings: Some("weights clipped\n\nunused input"),
            times: vec![2.0, 1.0, 4.0, 3.0],
        }
    }
}

const LAYER_JSON: &str = r#"{"Layers": [
 {"Name": "/conv/Conv + /relu/Relu", "LayerType": "CaskConvolution",
  "Inputs": [{"Name": "x", "Format/Datatype": "Row major linear FP32 format"}],
  "Outputs": [{"Name": "y", "Format/Datatype": "Channel major FP16 format where channel % 8 == 0"}]},
 {"Name": "/head/Softmax", "LayerType": "Softmax",
  "Inputs": [{"Name": "y", "Format/Datatype": "Half"}],
  "Outputs": [{"Name": "z", "Format/Datatype": "Row major linear FP32 format"}]}
], "Bindings": ["x", "z"]}"#;

struct State {
    canned: Canned,
    calls: Vec<Call>,
    /// Buffers and strings the double handed out and the Rust side has not released.
    live: i64,
}

thread_local! {
    static STATE: RefCell<Option<State>> = const { RefCell::new(None) };
}

fn with<R>(f: impl FnOnce(&mut State) -> R) -> R {
    STATE.with(|s| f(s.borrow_mut().as_mut().expect("double not installed")))
}

fn install(canned: Canned) {
    STATE.with(|s| {
        *s.borrow_mut() = Some(State {
            canned,
            calls: Vec::new(),
            live: 0,
        })
    });
}

fn calls() -> Vec<Call> {
    with(|s| s.calls.clone())
}

fn live() -> i64 {
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
        }
    };
    let fails = with(|s| {
        s.calls.push(Call::Build(call));
        s.canned.build_fails
    });
    if let Some(f) = fails {
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
    for s in [r.layer_json, r.warnings] {
        unsafe { d_free(s.cast()) };
    }
    *r = ffi::BuildResult::default();
}

unsafe extern "C" fn d_close(_lib: *mut ffi::TrtLib) {
    with(|s| s.calls.push(Call::Close));
}

fn double() -> ShimApi {
    ShimApi {
        abi_version: d_abi,
        compiled_major: d_major,
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

/// A folder holding (empty) TensorRT `major` libraries and a libcudart.
fn trt_dir(major: u32) -> (tempfile::TempDir, LibSearch) {
    let t = tempfile::tempdir().unwrap();
    for name in [
        format!("libnvinfer.so.{major}"),
        format!("libnvonnxparser.so.{major}"),
        "libcudart.so.12".to_string(),
    ] {
        std::fs::write(t.path().join(name), b"").unwrap();
    }
    let search = LibSearch {
        explicit: Some(t.path().to_path_buf()),
        ..Default::default()
    };
    (t, search)
}

fn open(canned: Canned) -> (tempfile::TempDir, TensorRt) {
    let major = canned.major as u32;
    install(canned);
    let (dir, search) = trt_dir(major);
    let trt = TensorRt::open_with(double(), &search).unwrap();
    (dir, trt)
}

fn path_string(p: &Path) -> String {
    p.to_str().unwrap().to_string()
}

#[test]
fn open_hands_the_found_libraries_to_the_shim_and_reads_the_version() {
    let (dir, trt) = open(Canned::trt(11, 110400));
    assert_eq!(trt.version().to_string(), "11.4.0");
    assert_eq!(trt.libraries().source, LibSource::Explicit);
    assert_eq!(
        calls(),
        vec![Call::Open {
            nvinfer: path_string(&dir.path().join("libnvinfer.so.11")),
            onnxparser: path_string(&dir.path().join("libnvonnxparser.so.11")),
            cudart: Some(path_string(&dir.path().join("libcudart.so.12"))),
        }]
    );
    drop(trt);
    assert_eq!(calls().last(), Some(&Call::Close));
}

#[test]
fn build_passes_every_tensorrt_10_setting_across_the_boundary() {
    let (dir, trt) = open(Canned::trt(10, 101300));
    let cache = dir.path().join("model.timing");
    std::fs::write(&cache, b"OLD-CACHE").unwrap();
    let cfg = EngineBuildConfig {
        workspace_bytes: Some(3 << 29),
        opt_level: Some(5),
        profiles: vec![
            Profile {
                input: "images".into(),
                min: vec![1, 3, 224, 224],
                opt: vec![8, 3, 224, 224],
                max: vec![32, 3, 224, 224],
            },
            Profile::fixed("scale", vec![1]),
        ],
        timing_cache: Some(cache.clone()),
        error_on_timing_cache_miss: true,
        strongly_typed: false,
        precision: Trt10Precision {
            fp16: true,
            bf16: false,
            int8: true,
            layer_overrides: vec![
                LayerOverride {
                    layer: "/head/Softmax".into(),
                    precision: LayerPrecision::Fp32,
                },
                LayerOverride {
                    layer: "/body/MatMul".into(),
                    precision: LayerPrecision::Bf16,
                },
            ],
            obey_constraints: true,
        },
        model_path: Some(PathBuf::from("/models/net.onnx")),
    };
    let built = trt.build_engine(b"ONNX-BYTES", &cfg).unwrap();
    let Some(Call::Build(call)) = calls().into_iter().nth(1) else {
        panic!("no build call: {:?}", calls());
    };
    assert_eq!(
        call,
        BuildCall {
            onnx: b"ONNX-BYTES".to_vec(),
            workspace_bytes: 1_610_612_736,
            opt_level: 5,
            profile: vec![
                (
                    "images".into(),
                    vec![1, 3, 224, 224],
                    vec![8, 3, 224, 224],
                    vec![32, 3, 224, 224]
                ),
                ("scale".into(), vec![1], vec![1], vec![1]),
            ],
            timing_cache: Some(b"OLD-CACHE".to_vec()),
            error_on_timing_cache_miss: 1,
            strongly_typed: 0,
            fp16: 1,
            bf16: 0,
            int8: 1,
            layer_precisions: vec![
                ("/head/Softmax".into(), ffi::PRECISION_FP32),
                ("/body/MatMul".into(), ffi::PRECISION_BF16),
            ],
            obey_precision_constraints: 1,
            model_path: Some("/models/net.onnx".into()),
        }
    );
    assert_eq!(built.bytes, b"PLAN-BYTES");
    assert_eq!(built.layer_json, LAYER_JSON);
    assert_eq!(built.timing_cache_bytes.as_deref(), Some(&b"NEW-CACHE"[..]));
    assert_eq!(built.warnings, vec!["weights clipped", "unused input"]);
    assert_eq!(built.trt_version.to_string(), "10.13.0");
    let layers: Vec<(&str, EnginePrecision)> = built
        .layers
        .iter()
        .map(|l| (l.name.as_str(), l.precision))
        .collect();
    assert_eq!(
        layers,
        vec![
            ("/conv/Conv + /relu/Relu", EnginePrecision::Fp16),
            ("/head/Softmax", EnginePrecision::Fp32)
        ]
    );
    assert_eq!(live(), 0, "every buffer the shim returned is released");
}

#[test]
fn defaults_cross_as_tensorrt_defaults() {
    let (_dir, trt) = open(Canned::trt(11, 110400));
    trt.build_engine(b"M", &EngineBuildConfig::default())
        .unwrap();
    let Some(Call::Build(call)) = calls().into_iter().nth(1) else {
        panic!("no build call");
    };
    assert_eq!(
        call,
        BuildCall {
            onnx: b"M".to_vec(),
            workspace_bytes: 0,
            opt_level: -1,
            ..Default::default()
        }
    );
}

#[test]
fn a_timing_cache_file_that_does_not_exist_yet_starts_empty() {
    let (dir, trt) = open(Canned::trt(11, 110400));
    let cfg = EngineBuildConfig {
        timing_cache: Some(dir.path().join("new.timing")),
        ..Default::default()
    };
    let built = trt.build_engine(b"M", &cfg).unwrap();
    let Some(Call::Build(call)) = calls().into_iter().nth(1) else {
        panic!("no build call");
    };
    assert_eq!(call.timing_cache, None);
    // The caller saves the updated cache; the write is atomic (no .tmp left behind).
    let path = dir.path().join("sub").join("new.timing");
    save_timing_cache(&path, built.timing_cache_bytes.as_deref().unwrap()).unwrap();
    assert_eq!(std::fs::read(&path).unwrap(), b"NEW-CACHE");
    assert!(!dir.path().join("sub").join("new.timing.tmp").exists());
    // With error-on-miss, a missing cache is refused before TensorRT is asked.
    let strict = EngineBuildConfig {
        timing_cache: Some(dir.path().join("absent.timing")),
        error_on_timing_cache_miss: true,
        ..Default::default()
    };
    let e = trt.build_engine(b"M", &strict).unwrap_err().to_string();
    assert!(e.contains("absent.timing does not exist"), "{e}");
    assert_eq!(calls().len(), 2);
}

#[test]
fn tensorrt_11_refuses_precision_flags_without_calling_the_shim() {
    let (_dir, trt) = open(Canned::trt(11, 110400));
    for precision in [
        Trt10Precision {
            fp16: true,
            ..Default::default()
        },
        Trt10Precision {
            layer_overrides: vec![LayerOverride {
                layer: "a".into(),
                precision: LayerPrecision::Fp32,
            }],
            ..Default::default()
        },
    ] {
        let cfg = EngineBuildConfig {
            precision,
            ..Default::default()
        };
        let e = trt.build_engine(b"M", &cfg).unwrap_err();
        assert!(matches!(e, RuntimeError::InvalidArgument(_)), "{e:?}");
        assert!(
            e.to_string()
                .contains("TensorRT 11.4.0 builds strongly typed networks"),
            "{e}"
        );
    }
    assert_eq!(calls().len(), 1, "only open: {:?}", calls());
}

#[test]
fn tensorrt_10_strongly_typed_crosses_and_excludes_flags() {
    let (_dir, trt) = open(Canned::trt(10, 100800));
    let cfg = EngineBuildConfig {
        strongly_typed: true,
        ..Default::default()
    };
    trt.build_engine(b"M", &cfg).unwrap();
    let Some(Call::Build(call)) = calls().into_iter().nth(1) else {
        panic!("no build call");
    };
    assert_eq!((call.strongly_typed, call.fp16), (1, 0));
    let both = EngineBuildConfig {
        strongly_typed: true,
        precision: Trt10Precision {
            int8: true,
            ..Default::default()
        },
        ..Default::default()
    };
    let e = trt.build_engine(b"M", &both).unwrap_err().to_string();
    assert!(e.contains("drop --int8 or drop --strongly-typed"), "{e}");
}

#[test]
fn invalid_configurations_never_reach_the_shim() {
    let (_dir, trt) = open(Canned::trt(10, 100800));
    let cases: Vec<(EngineBuildConfig, &str)> = vec![
        (
            EngineBuildConfig {
                opt_level: Some(6),
                ..Default::default()
            },
            "optimization level 6 is out of range",
        ),
        (
            EngineBuildConfig {
                workspace_bytes: Some(0),
                ..Default::default()
            },
            "workspace of 0 bytes",
        ),
        (
            EngineBuildConfig {
                profiles: vec![Profile {
                    input: "x".into(),
                    min: vec![4],
                    opt: vec![2],
                    max: vec![8],
                }],
                ..Default::default()
            },
            "input `x`: dim 0: need min <= opt <= max, got 4/2/8",
        ),
        (
            EngineBuildConfig {
                profiles: vec![Profile::fixed("x", vec![1]), Profile::fixed("x", vec![2])],
                ..Default::default()
            },
            "input `x`: shapes given twice",
        ),
        (
            EngineBuildConfig {
                profiles: vec![Profile::fixed("x", vec![1; 9])],
                ..Default::default()
            },
            "rank 9 is above TensorRT's limit of 8",
        ),
        (
            EngineBuildConfig {
                error_on_timing_cache_miss: true,
                ..Default::default()
            },
            "needs a timing cache",
        ),
        (
            EngineBuildConfig {
                profiles: vec![Profile::fixed("x\0y", vec![1])],
                ..Default::default()
            },
            "contains a NUL byte",
        ),
    ];
    for (cfg, needle) in cases {
        let e = trt.build_engine(b"M", &cfg).unwrap_err().to_string();
        assert!(e.contains(needle), "{needle}: {e}");
    }
    assert_eq!(calls().len(), 1, "only open: {:?}", calls());
}

#[test]
fn a_build_error_from_the_shim_is_one_line_and_released() {
    let mut canned = Canned::trt(11, 110400);
    canned.build_fails = Some((
        ffi::STATUS_FAILED,
        "the TensorRT ONNX parser rejected the model: node `/conv` (Conv):\n  kernel   shape mismatch\n",
    ));
    let (_dir, trt) = open(canned);
    let e = trt
        .build_engine(b"M", &EngineBuildConfig::default())
        .unwrap_err();
    assert!(matches!(e, RuntimeError::Load { .. }), "{e:?}");
    assert_eq!(
        e.to_string(),
        "TensorRT cannot load the model: the TensorRT ONNX parser rejected the model: node `/conv` (Conv):; kernel shape mismatch"
    );
    assert_eq!(live(), 0, "the error string is released");
}

#[test]
fn a_failure_without_a_message_still_says_something() {
    install(Canned::trt(11, 110400));
    let api = double();
    // SAFETY: a null error is the documented "no message" case.
    let text = unsafe { take_error(&api, std::ptr::null_mut()) };
    assert_eq!(text, "the TensorRT shim failed without a message");
}

#[test]
fn version_mismatch_is_unavailable_with_the_shims_words() {
    let mut canned = Canned::trt(11, 0);
    canned.open_fails = Some((
        ffi::STATUS_VERSION,
        "TensorRT 10.3 at /x/libnvinfer.so.11 does not match this shim, compiled for TensorRT 11; rebuild the shim",
    ));
    install(canned);
    let (_dir, search) = trt_dir(11);
    let e = TensorRt::open_with(double(), &search).unwrap_err();
    assert!(matches!(e, RuntimeError::Unavailable { .. }), "{e:?}");
    assert_eq!(
        e.to_string(),
        "TensorRT is not available: TensorRT 10.3 at /x/libnvinfer.so.11 does not match this shim, compiled for TensorRT 11; rebuild the shim"
    );
    assert_eq!(live(), 0);
    assert!(
        !calls().contains(&Call::Close),
        "a failed open has no handle to close"
    );
}

#[test]
fn a_library_that_does_not_load_is_unavailable_with_the_install_hint() {
    let mut canned = Canned::trt(10, 0);
    canned.open_fails = Some((
        ffi::STATUS_MISSING,
        "cannot load TensorRT /t/libnvinfer.so.10: libcublas.so.12: cannot open shared object file",
    ));
    install(canned);
    let (_dir, search) = trt_dir(10);
    let e = TensorRt::open_with(double(), &search).unwrap_err();
    let text = e.to_string();
    assert!(matches!(e, RuntimeError::Unavailable { .. }), "{e:?}");
    assert!(
        text.contains("libcublas.so.12: cannot open shared object file (found through --trt-lib)"),
        "{text}"
    );
    assert!(text.contains("pip install 'tensorrt-cu12<11'"), "{text}");
    assert!(text.contains("TensorRT 10 tarball"), "{text}");
    assert!(!text.contains('\n'));
}

#[test]
fn missing_tensorrt_is_reported_before_the_shim_is_asked() {
    install(Canned::trt(11, 110400));
    let empty = tempfile::tempdir().unwrap();
    let search = LibSearch {
        system_dirs: vec![empty.path().to_path_buf()],
        ..Default::default()
    };
    let e = TensorRt::open_with(double(), &search).unwrap_err();
    assert!(matches!(e, RuntimeError::Unavailable { .. }), "{e:?}");
    assert!(
        e.to_string()
            .contains("TensorRT 11 (libnvinfer.so.11, libnvonnxparser.so.11) not found")
    );
    assert!(calls().is_empty());
}

#[test]
fn a_shim_of_another_abi_is_refused() {
    let mut canned = Canned::trt(11, 110400);
    canned.abi = ffi::ABI_VERSION + 1;
    install(canned);
    let (_dir, search) = trt_dir(11);
    let e = TensorRt::open_with(double(), &search)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains(&format!("speaks C ABI version {}", ffi::ABI_VERSION + 1)),
        "{e}"
    );
    assert!(calls().is_empty());
}

#[test]
fn timing_passes_shapes_and_counts_and_summarizes_samples() {
    let (_dir, trt) = open(Canned::trt(11, 110400));
    let latency = trt
        .time_engine(
            b"PLAN",
            &[
                ("images".into(), vec![4, 3, 224, 224]),
                ("scale".into(), vec![1]),
            ],
            3,
            4,
        )
        .unwrap();
    assert_eq!(
        calls()[1],
        Call::Time {
            engine: b"PLAN".to_vec(),
            shapes: vec![
                ("images".into(), vec![4, 3, 224, 224]),
                ("scale".into(), vec![1])
            ],
            warmup: 3,
            runs: 4,
        }
    );
    assert_eq!((latency.warmup, latency.runs), (3, 4));
    assert_eq!(
        (latency.min_ms, latency.median_ms, latency.max_ms),
        (1.0, 2.5, 4.0)
    );
    // Refused before the shim: no runs, negative or too many dims.
    assert!(trt.time_engine(b"PLAN", &[], 0, 0).is_err());
    let e = trt
        .time_engine(b"PLAN", &[("x".into(), vec![-1])], 0, 1)
        .unwrap_err();
    assert_eq!(
        e.to_string(),
        "input `x`: dim -1 is negative; timing needs concrete shapes"
    );
    assert!(
        trt.time_engine(b"PLAN", &[("x".into(), vec![1; 9])], 0, 1)
            .is_err()
    );
    assert_eq!(calls().len(), 2);
}

#[test]
fn timing_errors_map_to_run_or_unavailable() {
    let mut canned = Canned::trt(11, 110400);
    canned.time_fails = Some((ffi::STATUS_FAILED, "enqueueV3 failed: out of memory"));
    let (_dir, trt) = open(canned);
    let e = trt.time_engine(b"PLAN", &[], 1, 1).unwrap_err();
    assert!(matches!(e, RuntimeError::Run { .. }), "{e:?}");
    assert_eq!(
        e.to_string(),
        "TensorRT failed to run the model: enqueueV3 failed: out of memory"
    );
    with(|s| {
        s.canned.time_fails = Some((
            ffi::STATUS_MISSING,
            "cannot find the CUDA runtime (libcudart.so.13/.12/.11.0)",
        ))
    });
    let e = trt.time_engine(b"PLAN", &[], 1, 1).unwrap_err();
    assert!(matches!(e, RuntimeError::Unavailable { .. }), "{e:?}");
    assert_eq!(live(), 0);
}

#[test]
fn loading_a_file_that_is_not_a_shim_is_a_one_line_error() {
    let dir = tempfile::tempdir().unwrap();
    let fake = dir.path().join("libinfopt_trt_shim.so");
    std::fs::write(&fake, b"not an ELF file").unwrap();
    let e = ShimApi::load(&fake).unwrap_err();
    assert!(
        e.starts_with(&format!("cannot load {}", fake.display())),
        "{e}"
    );
    assert!(!e.contains('\n'));
}
