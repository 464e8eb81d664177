//! `infopt doctor`: what this machine can run (tract, ONNX Runtime, TensorRT, GPU, CPU
//! features) and how to fix each missing piece. Always exits 0: everything but tract is
//! optional.

use std::process::{Command, Stdio};

use infopt_runtime::Backend;
use infopt_runtime::ort_backend::{self, OrtBackend, OrtOptions};
use infopt_runtime::tensorrt::{self, FlavorSpec, TensorRt, TrtOptions, discover, flavor};
use serde::Serialize;

use crate::exit::{ErrorKind, OpsError, OpsResult};

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Print JSON instead of a table.
    #[arg(long)]
    pub json: bool,
    /// ONNX Runtime library to check (default: found as `--backend ort` finds it).
    #[arg(long, value_name = "PATH")]
    pub ort_dylib: Option<std::path::PathBuf>,
    /// TensorRT shim to check (default: INFOPT_TRT_SHIM, then next to infopt).
    #[arg(long, value_name = "PATH")]
    pub trt_shim: Option<std::path::PathBuf>,
    /// Folder of libnvinfer (default: TENSORRT_LIB, pip installs, system folders).
    #[arg(long, value_name = "DIR")]
    pub trt_lib: Option<std::path::PathBuf>,
}

#[derive(Serialize, Debug, Clone, Copy, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    Ok,
    Missing,
    /// Present but unusable (wrong version, fails to load).
    Broken,
}

/// One component.
#[derive(Serialize, Debug)]
pub struct Item {
    pub name: String,
    pub status: Status,
    pub version: Option<String>,
    /// Where it was found, providers, devices.
    pub detail: String,
    /// What to do when it is missing or broken.
    pub fix: Option<String>,
}

#[derive(Serialize, Debug)]
pub struct Cpu {
    pub arch: String,
    pub logical_cores: usize,
    /// Detected features among those the runtimes use.
    pub features: Vec<String>,
    /// Checked but absent.
    pub missing: Vec<String>,
}

#[derive(Serialize, Debug)]
pub struct DoctorReport {
    pub schema_version: u32,
    pub infopt_version: String,
    pub os: String,
    pub items: Vec<Item>,
    pub cpu: Cpu,
}

fn tract() -> Item {
    let b = infopt_runtime::TractBackend;
    Item {
        name: "tract".into(),
        status: Status::Ok,
        version: Some(b.version()),
        detail: "built in (default backend; one thread)".into(),
        fix: None,
    }
}

const ORT_FIX: &str = "pip install 'infopt[ort]' where infopt came from pip, else pip install onnxruntime (in python3 or a .venv above the working directory), or set ORT_DYLIB_PATH to libonnxruntime.so";

fn onnxruntime(dylib: Option<&std::path::Path>) -> Item {
    let loc = match ort_backend::find_dylib(dylib) {
        Ok(l) => l,
        Err(e) => {
            return Item {
                name: "ONNX Runtime".into(),
                status: Status::Missing,
                version: None,
                detail: first_clause(&e.to_string()),
                fix: Some(ORT_FIX.into()),
            };
        }
    };
    let found = format!("{} (from {})", loc.path.display(), loc.source);
    match OrtBackend::new(OrtOptions {
        dylib: Some(loc.path.clone()),
        ..Default::default()
    }) {
        Ok(b) => Item {
            name: "ONNX Runtime".into(),
            status: Status::Ok,
            version: Some(b.library_version().to_string()),
            detail: format!(
                "{found}; execution providers: {}",
                b.available_providers().join(", ")
            ),
            fix: None,
        },
        Err(e) => Item {
            name: "ONNX Runtime".into(),
            status: Status::Broken,
            version: None,
            detail: format!("{found}: {e}"),
            fix: Some(format!(
                "infopt needs ONNX Runtime >= 1.17: {ORT_FIX} (pip install -U onnxruntime)"
            )),
        },
    }
}

/// The part of an error before its fix hint (the doctor prints its own fix).
fn first_clause(message: &str) -> String {
    message
        .split("; ")
        .next()
        .unwrap_or(message)
        .trim()
        .to_string()
}

/// One row per TensorRT flavour (TensorRT 10, 11, TensorRT-RTX): whether its libraries
/// are installed, which version, whether a shim drives it, what it can target. A shim
/// given with --trt-shim / INFOPT_TRT_SHIM gets a row of its own.
fn tensorrt(args: &Args) -> Vec<Item> {
    let mut items = Vec::new();
    let env_shim = std::env::var_os(discover::SHIM_ENV).filter(|v| !v.is_empty());
    if args.trt_shim.is_some() || env_shim.is_some() {
        items.push(explicit_shim(args));
    }
    items.push(builtin_shims(tensorrt::embedded::EMBEDDED_SHIMS));
    let search = discover::LibSearch::from_environment(args.trt_lib.clone());
    for spec in flavor::FLAVORS {
        items.push(flavor_item(args, &search, spec));
    }
    items
}

/// How to get built-in shims into an infopt that has none.
const SHIMS_FIX: &str = "build infopt with network access to crates.io: its build has cargo fetch the TensorRT headers (the trtx-sys crate) and compiles the shims (after an offline build: bash scripts/fetch-trt-headers.sh, then cargo build); or install a wheel that has them (pip install infopt); or build one shim with bash runtime/tensorrt/build.sh and pass --trt-shim";

/// The shims compiled into this infopt, whatever TensorRT is installed: the row says
/// whether `build-engine` can drive a TensorRT without `--trt-shim`.
fn builtin_shims(shims: &[tensorrt::embedded::EmbeddedShim]) -> Item {
    let name = BUILTIN_SHIMS_ROW.to_string();
    if shims.is_empty() {
        return Item {
            name,
            status: Status::Missing,
            version: None,
            detail:
                "this infopt was built without the TensorRT headers: build-engine needs --trt-shim"
                    .into(),
            fix: Some(SHIMS_FIX.into()),
        };
    }
    // "TensorRT 11 11.4; TensorRT-RTX 1.3, 1.4, ...", in the flavour table's order.
    let version = flavor::FLAVORS
        .iter()
        .filter_map(|f| {
            let list: Vec<String> = shims
                .iter()
                .filter(|s| s.flavor == f.id)
                .map(|s| format!("{}.{}", s.major, s.minor))
                .collect();
            (!list.is_empty()).then(|| format!("{} {}", f.display, list.join(", ")))
        })
        .collect::<Vec<_>>()
        .join("; ");
    Item {
        name,
        status: Status::Ok,
        version: Some(version),
        detail: format!(
            "compiled from the {} {} headers: {}",
            flavor::HEADERS_CRATE,
            flavor::HEADERS_CRATE_VERSION,
            shims
                .iter()
                .map(|s| s.headers)
                .collect::<Vec<_>>()
                .join(", ")
        ),
        fix: None,
    }
}

/// The name of [`builtin_shims`]' row (`doctor --json` readers look it up).
pub const BUILTIN_SHIMS_ROW: &str = "TensorRT shims (built in)";

fn explicit_shim(args: &Args) -> Item {
    let name = "TensorRT shim".to_string();
    match TensorRt::open(&TrtOptions {
        shim: args.trt_shim.clone(),
        lib_dir: args.trt_lib.clone(),
        flavor: None,
    }) {
        Ok(trt) => Item {
            name,
            status: Status::Ok,
            version: Some(trt.version().to_string()),
            detail: format!(
                "{} drives {} at {}",
                trt.shim_path().map(|p| p.display().to_string()).unwrap_or_default(),
                trt.flavor().display,
                trt.libraries().nvinfer.display()
            ),
            fix: None,
        },
        Err(e) => Item {
            name,
            status: Status::Broken,
            version: None,
            detail: first_clause(&e.to_string()),
            fix: Some("rebuild the shim for the installed TensorRT (bash runtime/tensorrt/build.sh), or unset INFOPT_TRT_SHIM / drop --trt-shim to use the built-in shims".into()),
        },
    }
}

fn flavor_item(args: &Args, search: &discover::LibSearch, spec: &'static FlavorSpec) -> Item {
    let name = spec.display.to_string();
    let libs = match search.find_flavor(spec) {
        Ok(l) => l,
        Err(e) => {
            return Item {
                name,
                status: Status::Missing,
                version: None,
                detail: first_clause(&e.to_string()),
                fix: Some(format!(
                    "{}{}",
                    discover::install_hint_for(spec),
                    if spec.builds_without_gpu {
                        " (builds engines on this machine even without a GPU)"
                    } else {
                        " (building needs an NVIDIA GPU)"
                    }
                )),
            };
        }
    };
    let builtin = tensorrt::embedded::versions_of(spec);
    let explicit = args.trt_shim.is_some()
        || std::env::var_os(discover::SHIM_ENV).is_some_and(|v| !v.is_empty());
    if !explicit && tensorrt::embedded::shims_of(spec).is_empty() {
        // Installed, but this infopt has nothing to drive it with: the shim is what is
        // missing, not a working library (see the built-in shims row).
        return Item {
            name,
            status: Status::Missing,
            version: None,
            detail: format!(
                "{} (from {}) is installed, but this infopt has no built-in shim for {}",
                libs.nvinfer.display(),
                libs.source,
                spec.display
            ),
            fix: Some(SHIMS_FIX.into()),
        };
    }
    match TensorRt::open(&TrtOptions {
        shim: None,
        lib_dir: args.trt_lib.clone(),
        flavor: Some(spec.id.to_string()),
    }) {
        Ok(trt) => {
            let ccs = spec.supported_compute_capabilities(trt.version());
            Item {
                name,
                status: Status::Ok,
                version: Some(trt.version().to_string()),
                detail: format!(
                    "{} (from {}); shim {}{}{}{}",
                    libs.nvinfer.display(),
                    libs.source,
                    if trt.builtin_shim() {
                        format!("built in (headers {})", trt.shim_version())
                    } else {
                        trt.shim_path()
                            .map(|p| p.display().to_string())
                            .unwrap_or_default()
                    },
                    if ccs.is_empty() {
                        String::new()
                    } else {
                        format!(
                            "; compute capabilities: {}",
                            ccs.iter()
                                .map(u32::to_string)
                                .collect::<Vec<_>>()
                                .join(", ")
                        )
                    },
                    if spec.builds_without_gpu {
                        "; builds without a GPU"
                    } else {
                        ""
                    },
                    libs.cudart
                        .as_ref()
                        .map(|c| format!("; cudart {}", c.display()))
                        .unwrap_or_default()
                ),
                fix: None,
            }
        }
        Err(e) => Item {
            name,
            status: Status::Broken,
            version: None,
            detail: format!(
                "{} (from {}): {}",
                libs.nvinfer.display(),
                libs.source,
                first_clause(&e.to_string())
            ),
            fix: Some(format!(
                "built-in shims: {builtin}; install a version with one ({}) or build a shim against this version's headers with bash runtime/tensorrt/build.sh and pass --trt-shim",
                spec.install
            )),
        },
    }
}

/// GPUs as `nvidia-smi` lists them: name, compute capability, driver.
fn gpu() -> Item {
    let out = Command::new("nvidia-smi")
        .args([
            "--query-gpu=name,compute_cap,driver_version,memory.total",
            "--format=csv,noheader",
        ])
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .output();
    let lines: Vec<String> = match &out {
        Ok(o) if o.status.success() => String::from_utf8_lossy(&o.stdout)
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty())
            .map(str::to_string)
            .collect(),
        _ => Vec::new(),
    };
    if lines.is_empty() {
        let why = match out {
            Err(_) => "no GPU (nvidia-smi not found)",
            Ok(_) => "no GPU (nvidia-smi lists none)",
        };
        return Item {
            name: "GPU".into(),
            status: Status::Missing,
            version: None,
            detail: why.into(),
            fix: Some(
                "TensorRT and the CUDA execution provider need an NVIDIA GPU and its driver; tract and ONNX Runtime on CPU work without".into(),
            ),
        };
    }
    let detail = lines
        .iter()
        .enumerate()
        .map(|(i, l)| {
            let f: Vec<&str> = l.split(',').map(str::trim).collect();
            match f.as_slice() {
                [name, cc, driver, mem] => {
                    format!("#{i} {name}, compute capability {cc}, driver {driver}, {mem}")
                }
                _ => format!("#{i} {l}"),
            }
        })
        .collect::<Vec<_>>()
        .join("; ");
    Item {
        name: "GPU".into(),
        status: Status::Ok,
        version: None,
        detail,
        fix: None,
    }
}

fn cpu() -> Cpu {
    let mut features = Vec::new();
    let mut missing = Vec::new();
    let mut note = |name: &str, present: bool| {
        if present {
            features.push(name.to_string());
        } else {
            missing.push(name.to_string());
        }
    };
    #[cfg(target_arch = "x86_64")]
    {
        note("sse4.2", std::arch::is_x86_feature_detected!("sse4.2"));
        note("avx", std::arch::is_x86_feature_detected!("avx"));
        note("avx2", std::arch::is_x86_feature_detected!("avx2"));
        note("fma", std::arch::is_x86_feature_detected!("fma"));
        note("f16c", std::arch::is_x86_feature_detected!("f16c"));
        note("avx512f", std::arch::is_x86_feature_detected!("avx512f"));
        note("avx512bw", std::arch::is_x86_feature_detected!("avx512bw"));
        note(
            "avx512vnni",
            std::arch::is_x86_feature_detected!("avx512vnni"),
        );
    }
    #[cfg(target_arch = "aarch64")]
    {
        note("neon", std::arch::is_aarch64_feature_detected!("neon"));
        note("fp16", std::arch::is_aarch64_feature_detected!("fp16"));
        note(
            "dotprod",
            std::arch::is_aarch64_feature_detected!("dotprod"),
        );
        note("sve", std::arch::is_aarch64_feature_detected!("sve"));
    }
    let _ = &mut note;
    Cpu {
        arch: std::env::consts::ARCH.into(),
        logical_cores: std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(1),
        features,
        missing,
    }
}

pub fn collect(args: &Args) -> DoctorReport {
    DoctorReport {
        schema_version: 1,
        infopt_version: env!("CARGO_PKG_VERSION").into(),
        os: format!("{}-{}", std::env::consts::OS, std::env::consts::ARCH),
        items: [tract(), onnxruntime(args.ort_dylib.as_deref())]
            .into_iter()
            .chain(tensorrt(args))
            .chain([gpu()])
            .collect(),
        cpu: cpu(),
    }
}

pub fn render_text(r: &DoctorReport) -> String {
    use comfy_table::presets::UTF8_FULL_CONDENSED;
    let mut t = comfy_table::Table::new();
    t.load_preset(UTF8_FULL_CONDENSED);
    t.set_content_arrangement(comfy_table::ContentArrangement::Dynamic);
    if t.width().is_none() {
        t.set_width(160);
    }
    t.set_header(vec!["component", "status", "version", "details", "fix"]);
    for i in &r.items {
        t.add_row(vec![
            i.name.clone(),
            match i.status {
                Status::Ok => "ok".into(),
                Status::Missing => "missing".into(),
                Status::Broken => "BROKEN".into(),
            },
            i.version.clone().unwrap_or_else(|| "-".into()),
            i.detail.clone(),
            i.fix.clone().unwrap_or_default(),
        ]);
    }
    t.add_row(vec![
        "CPU".to_string(),
        "ok".into(),
        "-".into(),
        format!(
            "{}, {} logical cores; features: {}{}",
            r.cpu.arch,
            r.cpu.logical_cores,
            r.cpu.features.join(" "),
            if r.cpu.missing.is_empty() {
                String::new()
            } else {
                format!("; absent: {}", r.cpu.missing.join(" "))
            }
        ),
        String::new(),
    ]);
    format!("infopt {} on {}\n{t}\n", r.infopt_version, r.os)
}

pub fn run(args: Args) -> OpsResult {
    let report = collect(&args);
    if args.json {
        let text = serde_json::to_string_pretty(&report)
            .map_err(|e| OpsError::new(ErrorKind::Internal, e))?;
        println!("{text}");
    } else {
        print!("{}", render_text(&report));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use infopt_runtime::tensorrt::embedded::EmbeddedShim;

    #[test]
    fn no_built_in_shims_is_missing_with_how_to_get_them() {
        let item = builtin_shims(&[]);
        assert_eq!(item.status, Status::Missing);
        assert!(item.detail.contains("needs --trt-shim"), "{}", item.detail);
        let fix = item.fix.unwrap();
        assert!(
            fix.contains("network access to crates.io") && fix.contains("--trt-shim"),
            "{fix}"
        );
    }

    #[test]
    fn built_in_shims_list_flavours_and_header_versions() {
        let shim = |flavor, major, minor, headers| EmbeddedShim {
            flavor,
            major,
            minor,
            headers,
            bytes: &[],
        };
        let shims = [
            shim("trt11", 11, 4, "TRT-Enterprise-11.4"),
            shim("rtx", 1, 6, "TRT-RTX-1.6"),
            shim("rtx", 1, 7, "TRT-RTX-1.7"),
        ];
        let item = builtin_shims(&shims);
        assert_eq!(item.status, Status::Ok);
        assert_eq!(
            item.version.as_deref(),
            Some("TensorRT 11 11.4; TensorRT-RTX 1.6, 1.7")
        );
        assert_eq!(
            item.detail,
            "compiled from the trtx-sys 0.9.1+rtx1.7 headers: TRT-Enterprise-11.4, TRT-RTX-1.6, TRT-RTX-1.7"
        );
    }
}
