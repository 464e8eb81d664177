//! The real shim (runtime/tensorrt/infopt_trt_shim.cpp), compiled against TensorRT 11.4's
//! headers, loaded by the Rust side and pointed at stand-in TensorRT and CUDA libraries
//! (tests/tensorrt_fakes/*.c) that export the symbols the shim looks up. Without a GPU or
//! TensorRT this exercises everything up to TensorRT's first object: the shim's dlopen and
//! dlsym, its version check, its status codes and messages, and the Rust side's loading
//! and error mapping. A last test checks the Rust mirror of the C ABI (`tensorrt::ffi`)
//! against the header: struct sizes, field offsets and constants.
//!
//! Needs g++ and the TensorRT headers shipped in the `trtx-sys` crate's source
//! (scripts/check-trt-shim.sh fetches them into $CARGO_HOME; INFOPT_TRT_HEADERS points
//! elsewhere). Without them the tests say so on stderr and pass, unless
//! INFOPT_REQUIRE_TRT_SHIM_TEST=1 (scripts/check-trt-shim.sh sets it), which makes a
//! missing prerequisite a failure.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use infopt_runtime::RuntimeError;
use infopt_runtime::tensorrt::ffi::ShimApi;
use infopt_runtime::tensorrt::{EngineBuildConfig, LibSearch, TensorRt};

const CRATE_DIR: &str = env!("CARGO_MANIFEST_DIR");

fn headers() -> Option<(PathBuf, PathBuf)> {
    if let Some(dir) = std::env::var_os("INFOPT_TRT_HEADERS") {
        let dir = PathBuf::from(dir);
        return Some((dir.clone(), dir));
    }
    let home = std::env::var_os("CARGO_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cargo")))?;
    for registry in std::fs::read_dir(home.join("registry").join("src")).ok()? {
        let Ok(registry) = registry else { continue };
        let Ok(crates) = std::fs::read_dir(registry.path()) else {
            continue;
        };
        for krate in crates.flatten() {
            let name = krate.file_name().to_string_lossy().into_owned();
            let root = krate.path().join("TensorRT-Headers");
            let trt = root.join("TRT-Enterprise-11.4");
            if name.starts_with("trtx-sys-0.9.1") && trt.join("NvInfer.h").is_file() {
                return Some((trt, root));
            }
        }
    }
    None
}

fn run(cmd: &mut Command) -> Result<(), String> {
    let out = cmd.output().map_err(|e| format!("{cmd:?}: {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "{cmd:?} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        ))
    }
}

struct Built {
    _dir: tempfile::TempDir,
    shim: PathBuf,
    fakes: PathBuf,
}

/// Compiles the shim and the fakes once per test binary.
fn built() -> Option<&'static Built> {
    static BUILT: OnceLock<Option<Built>> = OnceLock::new();
    BUILT
        .get_or_init(|| {
            let required = std::env::var_os("INFOPT_REQUIRE_TRT_SHIM_TEST").is_some();
            let skip = |why: String| {
                assert!(!required, "{why}");
                eprintln!("skipping the real-shim tests: {why}");
                None
            };
            let Some((trt, stub)) = headers() else {
                return skip(
                    "TensorRT 11.4 headers not found (run scripts/check-trt-shim.sh once)".into(),
                );
            };
            let dir = tempfile::tempdir().unwrap();
            let shim = dir.path().join("libinfopt_trt_shim.so");
            let src = Path::new(CRATE_DIR).join("tensorrt");
            let compiled = run(Command::new("g++")
                .args(["-std=c++17", "-shared", "-fPIC", "-isystem"])
                .arg(&trt)
                .arg("-isystem")
                .arg(&stub)
                .arg("-I")
                .arg(&src)
                .arg(src.join("infopt_trt_shim.cpp"))
                .arg("-o")
                .arg(&shim)
                .arg("-ldl"));
            if let Err(e) = compiled {
                return skip(e);
            }
            let fakes_src = Path::new(CRATE_DIR).join("tests").join("tensorrt_fakes");
            let fakes = dir.path().join("fakes");
            std::fs::create_dir_all(&fakes).unwrap();
            let c = |source: &str, out: &str, defines: &[&str]| {
                run(Command::new("g++")
                    .args(["-x", "c", "-shared", "-fPIC"])
                    .args(defines)
                    .arg(fakes_src.join(source))
                    .arg("-o")
                    .arg(fakes.join(out)))
                .unwrap();
            };
            c(
                "fake_nvinfer.c",
                "nvinfer_11_4.so",
                &["-DFAKE_VERSION=110400"],
            );
            c(
                "fake_nvinfer.c",
                "nvinfer_10_3.so",
                &["-DFAKE_VERSION=100300"],
            );
            c("fake_onnxparser.c", "onnxparser.so", &[]);
            c("fake_cudart.c", "cudart.so", &[]);
            c("fake_builder_resource.c", "builder_resource.so", &[]);
            Some(Built {
                _dir: dir,
                shim,
                fakes,
            })
        })
        .as_ref()
}

/// A TensorRT folder for the shim: `nvinfer` and `parser` are fake file names (or None
/// for an empty, unloadable file).
fn trt_folder(
    b: &Built,
    nvinfer: Option<&str>,
    parser: Option<&str>,
) -> (tempfile::TempDir, LibSearch) {
    let t = tempfile::tempdir().unwrap();
    let place = |fake: Option<&str>, name: &str| match fake {
        Some(f) => {
            std::fs::copy(b.fakes.join(f), t.path().join(name)).unwrap();
        }
        None => std::fs::write(t.path().join(name), b"").unwrap(),
    };
    place(nvinfer, "libnvinfer.so.11");
    place(parser, "libnvonnxparser.so.11");
    place(Some("cudart.so"), "libcudart.so.12");
    place(
        Some("builder_resource.so"),
        "libnvinfer_builder_resource.so.11.4.0",
    );
    place(
        Some("builder_resource.so"),
        "libnvinfer_builder_resource_win.so.11.4.0",
    );
    let search = LibSearch {
        explicit: Some(t.path().to_path_buf()),
        ..Default::default()
    };
    (t, search)
}

#[test]
fn the_real_shim_speaks_this_abi_for_tensorrt_11() {
    let Some(b) = built() else { return };
    let api = ShimApi::load(&b.shim).unwrap();
    // SAFETY: both take no arguments and return constants.
    let (abi, major) = unsafe { ((api.abi_version)(), (api.compiled_major)()) };
    assert_eq!(
        (abi, major),
        (infopt_runtime::tensorrt::ffi::ABI_VERSION, 11)
    );
}

#[test]
fn opens_a_matching_library_then_reports_tensorrts_failures() {
    let Some(b) = built() else { return };
    let (t, search) = trt_folder(b, Some("nvinfer_11_4.so"), Some("onnxparser.so"));
    let trt = TensorRt::open_with(ShimApi::load(&b.shim).unwrap(), &search).unwrap();
    assert_eq!(trt.version().to_string(), "11.4.0");
    let loaded = |name: &str| t.path().join(format!("{name}.loaded")).exists();
    assert!(
        !loaded("libnvinfer_builder_resource.so.11.4.0"),
        "loaded before any build"
    );
    // The fake builder factory returns NULL, as TensorRT does when it cannot start.
    let e = trt
        .build_engine(b"not onnx", &EngineBuildConfig::default())
        .unwrap_err();
    assert!(matches!(e, RuntimeError::Load { .. }), "{e:?}");
    assert_eq!(
        e.to_string(),
        "TensorRT cannot load the model: createInferBuilder failed"
    );
    // The builder's kernel library beside libnvinfer was preloaded; the Windows one not.
    assert!(loaded("libnvinfer_builder_resource.so.11.4.0"));
    assert!(!loaded("libnvinfer_builder_resource_win.so.11.4.0"));
    // Timing loads the (fake) CUDA runtime, then stops at TensorRT's runtime factory.
    let e = trt.time_engine(b"plan", &[], 1, 2).unwrap_err();
    assert!(matches!(e, RuntimeError::Run { .. }), "{e:?}");
    assert_eq!(
        e.to_string(),
        "TensorRT failed to run the model: createInferRuntime failed"
    );
}

#[test]
fn refuses_a_library_of_another_major() {
    let Some(b) = built() else { return };
    let (t, search) = trt_folder(b, Some("nvinfer_10_3.so"), Some("onnxparser.so"));
    let e = TensorRt::open_with(ShimApi::load(&b.shim).unwrap(), &search).unwrap_err();
    assert!(matches!(e, RuntimeError::Unavailable { .. }), "{e:?}");
    let text = e.to_string();
    assert!(
        text.starts_with(&format!(
            "TensorRT is not available: TensorRT 10.3 at {} does not match this shim, compiled for TensorRT 11",
            t.path().join("libnvinfer.so.11").display()
        )),
        "{text}"
    );
    assert!(text.contains("runtime/tensorrt/build.sh"), "{text}");
}

#[test]
fn a_library_that_does_not_load_is_unavailable() {
    let Some(b) = built() else { return };
    let (_t, search) = trt_folder(b, None, Some("onnxparser.so"));
    let e = TensorRt::open_with(ShimApi::load(&b.shim).unwrap(), &search).unwrap_err();
    assert!(matches!(e, RuntimeError::Unavailable { .. }), "{e:?}");
    let text = e.to_string();
    assert!(text.contains("cannot load TensorRT"), "{text}");
    assert!(text.contains("pip install tensorrt-cu12"), "{text}");
    assert!(!text.contains('\n'));
    // A loadable library without TensorRT's symbols.
    let (_t, search) = trt_folder(b, Some("onnxparser.so"), Some("onnxparser.so"));
    let e = TensorRt::open_with(ShimApi::load(&b.shim).unwrap(), &search)
        .unwrap_err()
        .to_string();
    assert!(e.contains("is not a TensorRT library"), "{e}");
    // A parser that does not load.
    let (_t, search) = trt_folder(b, Some("nvinfer_11_4.so"), None);
    let e = TensorRt::open_with(ShimApi::load(&b.shim).unwrap(), &search)
        .unwrap_err()
        .to_string();
    assert!(e.contains("cannot load the TensorRT ONNX parser"), "{e}");
}

/// The Rust mirror (`tensorrt::ffi`) and the C header agree on every struct's size and
/// field offsets and on every constant. Needs only a C compiler and the header.
#[test]
fn the_rust_mirror_matches_the_c_header() {
    use infopt_runtime::tensorrt::ffi;
    use std::mem::{offset_of, size_of};

    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("layout.c");
    let exe = dir.path().join("layout");
    let structs: [(&str, &[&str]); 5] = [
        (
            "InfoptTrtProfileEntry",
            &["input", "nb_dims", "min", "opt", "max"],
        ),
        ("InfoptTrtShape", &["input", "nb_dims", "dims"]),
        ("InfoptTrtLayerPrecision", &["layer", "precision"]),
        (
            "InfoptTrtBuildConfig",
            &[
                "workspace_bytes",
                "opt_level",
                "profile",
                "nb_profile",
                "timing_cache",
                "timing_cache_size",
                "error_on_timing_cache_miss",
                "strongly_typed",
                "fp16",
                "bf16",
                "int8",
                "layer_precisions",
                "nb_layer_precisions",
                "obey_precision_constraints",
                "model_path",
                "inspect_engine",
                "compute_capabilities",
                "nb_compute_capabilities",
            ],
        ),
        (
            "InfoptTrtBuildResult",
            &[
                "engine",
                "engine_size",
                "timing_cache",
                "timing_cache_size",
                "layer_json",
                "warnings",
                "build_log",
            ],
        ),
    ];
    let constants = [
        "INFOPT_TRT_ABI_VERSION",
        "INFOPT_TRT_MAX_DIMS",
        "INFOPT_TRT_OK",
        "INFOPT_TRT_ERR_FAILED",
        "INFOPT_TRT_ERR_MISSING",
        "INFOPT_TRT_ERR_VERSION",
        "INFOPT_TRT_FP32",
        "INFOPT_TRT_FP16",
        "INFOPT_TRT_BF16",
        "INFOPT_TRT_INT8",
        "INFOPT_TRT_FLAVOR_TENSORRT",
        "INFOPT_TRT_FLAVOR_RTX",
    ];
    let mut c = String::from(
        "#include <stdio.h>\n#include <stddef.h>\n#include \"infopt_trt_shim.h\"\nint main(void) {\n",
    );
    for (name, fields) in &structs {
        c += &format!("printf(\"{name} size %zu\\n\", sizeof({name}));\n");
        for f in *fields {
            c += &format!("printf(\"{name}.{f} %zu\\n\", offsetof({name}, {f}));\n");
        }
    }
    for k in constants {
        c += &format!("printf(\"{k} %d\\n\", (int) {k});\n");
    }
    c += "return 0;\n}\n";
    std::fs::write(&src, c).unwrap();
    let compiled = run(Command::new("g++")
        .args(["-x", "c", "-I"])
        .arg(Path::new(CRATE_DIR).join("tensorrt"))
        .arg(&src)
        .arg("-o")
        .arg(&exe));
    if let Err(e) = compiled {
        assert!(
            std::env::var_os("INFOPT_REQUIRE_TRT_SHIM_TEST").is_none(),
            "{e}"
        );
        eprintln!("skipping the layout check: {e}");
        return;
    }
    let out = Command::new(&exe).output().unwrap();
    let c_side = String::from_utf8(out.stdout).unwrap();

    macro_rules! layout {
        ($ty:ty, $name:literal, [$($field:ident),*]) => {{
            let mut s = format!("{} size {}\n", $name, size_of::<$ty>());
            $( s += &format!("{}.{} {}\n", $name, stringify!($field), offset_of!($ty, $field)); )*
            s
        }};
    }
    let mut rust_side = String::new();
    rust_side += &layout!(
        ffi::ProfileEntry,
        "InfoptTrtProfileEntry",
        [input, nb_dims, min, opt, max]
    );
    rust_side += &layout!(ffi::Shape, "InfoptTrtShape", [input, nb_dims, dims]);
    rust_side += &layout!(
        ffi::LayerPrecision,
        "InfoptTrtLayerPrecision",
        [layer, precision]
    );
    rust_side += &layout!(
        ffi::BuildConfig,
        "InfoptTrtBuildConfig",
        [
            workspace_bytes,
            opt_level,
            profile,
            nb_profile,
            timing_cache,
            timing_cache_size,
            error_on_timing_cache_miss,
            strongly_typed,
            fp16,
            bf16,
            int8,
            layer_precisions,
            nb_layer_precisions,
            obey_precision_constraints,
            model_path,
            inspect_engine,
            compute_capabilities,
            nb_compute_capabilities
        ]
    );
    rust_side += &layout!(
        ffi::BuildResult,
        "InfoptTrtBuildResult",
        [
            engine,
            engine_size,
            timing_cache,
            timing_cache_size,
            layer_json,
            warnings,
            build_log
        ]
    );
    for (k, v) in [
        ("INFOPT_TRT_ABI_VERSION", ffi::ABI_VERSION),
        ("INFOPT_TRT_MAX_DIMS", ffi::MAX_DIMS as i32),
        ("INFOPT_TRT_OK", ffi::STATUS_OK),
        ("INFOPT_TRT_ERR_FAILED", ffi::STATUS_FAILED),
        ("INFOPT_TRT_ERR_MISSING", ffi::STATUS_MISSING),
        ("INFOPT_TRT_ERR_VERSION", ffi::STATUS_VERSION),
        ("INFOPT_TRT_FP32", ffi::PRECISION_FP32),
        ("INFOPT_TRT_FP16", ffi::PRECISION_FP16),
        ("INFOPT_TRT_BF16", ffi::PRECISION_BF16),
        ("INFOPT_TRT_INT8", ffi::PRECISION_INT8),
        ("INFOPT_TRT_FLAVOR_TENSORRT", ffi::FLAVOR_TENSORRT),
        ("INFOPT_TRT_FLAVOR_RTX", ffi::FLAVOR_RTX),
    ] {
        rust_side += &format!("{k} {v}\n");
    }
    assert_eq!(rust_side, c_side);
}
