// The TensorRT flavours infopt knows, as data. This file is plain data with no `use`: the
// crate includes it (`tensorrt::flavor`) and so does runtime/build.rs, which compiles one
// shim per header folder listed here. Discovery, `doctor`, the build plan and the
// trtexec-equivalent command read the same rows.

/// How a shim checks the library it opens against the headers it was compiled with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[allow(dead_code)]
pub enum VersionCheck {
    /// Same major (TensorRT 10, 11: the virtual interfaces are stable within a major).
    Major,
    /// Same major and minor (TensorRT-RTX: interfaces grow between minors).
    MajorMinor,
}

/// One flavour of TensorRT.
#[derive(Debug)]
#[allow(dead_code)]
pub struct FlavorSpec {
    /// `--trt-flavor` spelling.
    pub id: &'static str,
    /// For messages: "TensorRT 11", "TensorRT-RTX".
    pub display: &'static str,
    /// `INFOPT_TRT_FLAVOR_*` the shim reports.
    pub abi_flavor: i32,
    /// `NV_TENSORRT_MAJOR` of its headers and the soname suffix of its libraries.
    pub major: u32,
    /// The builder library's file name.
    pub nvinfer: &'static str,
    /// The ONNX parser library's file name.
    pub onnxparser: &'static str,
    /// The folder a pip install puts both in (`site-packages/<folder>`).
    pub pip_folder: &'static str,
    /// The environment variable naming a folder with both libraries.
    pub lib_env: &'static str,
    /// How to install it, for "not found" messages.
    pub install: &'static str,
    /// Builds strongly typed networks only: precision comes from the ONNX graph.
    pub strongly_typed_only: bool,
    /// Takes builder precision flags (kFP16/kBF16/kINT8) and per-layer precisions.
    pub precision_flags: bool,
    /// `IBuilderConfig::setComputeCapability` targets, as (SM number, first minor that
    /// has it). Empty: the flavour builds for the GPU it runs on.
    pub compute_capabilities: &'static [(u32, u32)],
    /// Needs a GPU to build (TensorRT 10/11 tune kernels on the device); TensorRT-RTX
    /// builds ahead of time on the CPU.
    pub builds_without_gpu: bool,
    /// Has a working timing cache (a deprecated no-op in TensorRT-RTX).
    pub timing_cache: bool,
    pub version_check: VersionCheck,
    /// Header folders of the `trtx-sys` crate source the built-in shims are compiled from
    /// (`TensorRT-Headers/<folder>`), each `<prefix>-<major>.<minor>`.
    pub headers: &'static [&'static str],
}

/// TensorRT 10, 11 and TensorRT-RTX 1.x.
pub const FLAVORS: &[FlavorSpec] = &[
    FlavorSpec {
        id: "trt10",
        display: "TensorRT 10",
        abi_flavor: 0,
        major: 10,
        nvinfer: "libnvinfer.so.10",
        onnxparser: "libnvonnxparser.so.10",
        pip_folder: "tensorrt_libs",
        lib_env: "TENSORRT_LIB",
        install: "`pip install 'tensorrt-cu12<11'`",
        strongly_typed_only: false,
        precision_flags: true,
        compute_capabilities: &[],
        builds_without_gpu: false,
        timing_cache: true,
        version_check: VersionCheck::Major,
        headers: &[],
    },
    FlavorSpec {
        id: "trt11",
        display: "TensorRT 11",
        abi_flavor: 0,
        major: 11,
        nvinfer: "libnvinfer.so.11",
        onnxparser: "libnvonnxparser.so.11",
        pip_folder: "tensorrt_libs",
        lib_env: "TENSORRT_LIB",
        install: "`pip install tensorrt-cu12` (CUDA 12; tensorrt-cu13 for CUDA 13)",
        strongly_typed_only: true,
        precision_flags: false,
        compute_capabilities: &[],
        builds_without_gpu: false,
        timing_cache: true,
        version_check: VersionCheck::Major,
        headers: &["TRT-Enterprise-11.4"],
    },
    FlavorSpec {
        id: "rtx",
        display: "TensorRT-RTX",
        abi_flavor: 1,
        major: 1,
        nvinfer: "libtensorrt_rtx.so.1",
        onnxparser: "libtensorrt_onnxparser_rtx.so.1",
        pip_folder: "tensorrt_rtx_libs",
        lib_env: "TENSORRT_RTX_LIB",
        install: "`pip install tensorrt-rtx-cu13-libs==1.7.1.116` (or tensorrt-rtx-cu12-libs)",
        strongly_typed_only: true,
        precision_flags: false,
        // SM 7.5 is declared but fails FP32 GEMMs; there is no Hopper (SM 9.0) target.
        compute_capabilities: &[(80, 3), (86, 3), (89, 3), (120, 3), (121, 5)],
        builds_without_gpu: true,
        timing_cache: false,
        version_check: VersionCheck::MajorMinor,
        headers: &[
            "TRT-RTX-1.3",
            "TRT-RTX-1.4",
            "TRT-RTX-1.5",
            "TRT-RTX-1.6",
            "TRT-RTX-1.7",
        ],
    },
];

/// The `trtx-sys` release whose source carries the headers above, and the SHA-256 of its
/// `.crate` file (crates.io's checksum), checked before build.rs unpacks a cached copy.
pub const HEADERS_CRATE: &str = "trtx-sys";
pub const HEADERS_CRATE_VERSION: &str = "0.9.1+rtx1.7";
pub const HEADERS_CRATE_SHA256: &str =
    "5480ee056292951daa1bc74532162d6cb75190f091e45d7d97c0c356916ae171";
