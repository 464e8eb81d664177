//! Compiles the TensorRT shim (runtime/tensorrt/) once per header folder of the flavour
//! table (src/tensorrt/flavor_table.rs) and embeds the shared libraries in the crate, so
//! a plain `cargo build` gives an infopt that builds TensorRT-RTX engines with nothing
//! else to compile. The shims link only libdl: TensorRT is opened at run time.
//!
//! The headers come from the source of the `trtx-sys` crate (NVIDIA's TensorRT 11.4 and
//! TensorRT-RTX 1.3–1.7 headers), looked for in this order:
//! 1. `INFOPT_TRT_HEADERS_ROOT` (a folder holding `TRT-RTX-1.7/`, ... and `cuda_runtime_api.h`);
//! 2. the crate unpacked in cargo's registry (`cargo fetch` of it, or scripts/fetch-trt-headers.sh);
//! 3. its `.crate` file in cargo's registry cache, unpacked into OUT_DIR;
//!
//! The build script never downloads anything itself: fetching is cargo's job
//! (scripts/fetch-trt-headers.sh, which scripts/setup-venv.sh runs, does `cargo fetch`).
//! While the headers are missing, the script asks cargo to rerun it once they appear in
//! the registry, so a build after that fetch embeds the shims without `cargo clean`.
//!
//! When none works, or no C++ compiler is found, the crate builds without embedded shims
//! (a cargo warning says why) and infopt asks for `--trt-shim` at run time.
//! `INFOPT_TRT_NO_SHIMS=1` skips all of this.

use std::path::{Path, PathBuf};
use std::process::Command;

#[allow(dead_code)]
mod flavor_table {
    include!("src/tensorrt/flavor_table.rs");
}
use flavor_table::{FLAVORS, HEADERS_CRATE, HEADERS_CRATE_SHA256, HEADERS_CRATE_VERSION};

struct Built {
    flavor: &'static str,
    major: u32,
    minor: u32,
    headers: &'static str,
    path: PathBuf,
}

fn main() {
    println!("cargo:rerun-if-changed=tensorrt/infopt_trt_shim.cpp");
    println!("cargo:rerun-if-changed=tensorrt/infopt_trt_shim.h");
    println!("cargo:rerun-if-changed=src/tensorrt/flavor_table.rs");
    for var in ["INFOPT_TRT_HEADERS_ROOT", "INFOPT_TRT_NO_SHIMS", "CXX"] {
        println!("cargo:rerun-if-env-changed={var}");
    }
    let out_dir = PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    let built = if std::env::var_os("INFOPT_TRT_NO_SHIMS").is_some_and(|v| !v.is_empty()) {
        Vec::new()
    } else {
        match find_headers(&out_dir) {
            Ok(root) => compile_all(&root, &out_dir),
            Err(why) => {
                println!(
                    "cargo:warning=infopt: no built-in TensorRT shims ({why}); build-engine will need --trt-shim. Run scripts/fetch-trt-headers.sh (network once), then rebuild"
                );
                Vec::new()
            }
        }
    };
    write_table(&out_dir, &built);
}

/// The `TensorRT-Headers` folder of the `trtx-sys` source.
fn find_headers(out_dir: &Path) -> Result<PathBuf, String> {
    if let Some(root) = std::env::var_os("INFOPT_TRT_HEADERS_ROOT").filter(|v| !v.is_empty()) {
        let root = PathBuf::from(root);
        println!("cargo:rerun-if-changed={}", root.display());
        return if root.is_dir() {
            Ok(root)
        } else {
            Err(format!(
                "INFOPT_TRT_HEADERS_ROOT={} is not a folder",
                root.display()
            ))
        };
    }
    let cargo_home = std::env::var_os("CARGO_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cargo")))
        .ok_or("neither CARGO_HOME nor HOME is set")?;
    let crate_dir = format!("{HEADERS_CRATE}-{HEADERS_CRATE_VERSION}");
    for index in read_dirs(&cargo_home.join("registry").join("src")) {
        let headers = index.join(&crate_dir).join("TensorRT-Headers");
        if headers.join("cuda_runtime_api.h").is_file() {
            return Ok(headers);
        }
    }
    let unpacked = out_dir.join(&crate_dir).join("TensorRT-Headers");
    if unpacked.join("cuda_runtime_api.h").is_file() {
        return Ok(unpacked);
    }
    let crate_file = format!("{crate_dir}.crate");
    let cached = read_dirs(&cargo_home.join("registry").join("cache"))
        .into_iter()
        .map(|index| index.join(&crate_file))
        .find(|p| p.is_file());
    let Some(archive) = cached else {
        // Rerun once the fetch script has put the crate into the registry.
        for index in read_dirs(&cargo_home.join("registry").join("src")) {
            let expected = index
                .join(&crate_dir)
                .join("TensorRT-Headers")
                .join("cuda_runtime_api.h");
            println!("cargo:rerun-if-changed={}", expected.display());
        }
        // A path that did not exist does not make cargo rerun this script
        // when it appears; the registry's cache folder, which gains the
        // `.crate` when the fetch script runs, does (a build made before the
        // fetch kept "no built-in shim" for good).
        for index in read_dirs(&cargo_home.join("registry").join("cache")) {
            println!("cargo:rerun-if-changed={}", index.display());
        }
        return Err(format!(
            "{HEADERS_CRATE} {HEADERS_CRATE_VERSION} is not in cargo's registry: run scripts/fetch-trt-headers.sh (or scripts/setup-venv.sh), then build again"
        ));
    };
    check_sha256(&archive)?;
    let status = Command::new("tar")
        .arg("-xzf")
        .arg(&archive)
        .arg("-C")
        .arg(out_dir)
        .arg(format!("{crate_dir}/TensorRT-Headers"))
        .status()
        .map_err(|e| format!("cannot run tar: {e}"))?;
    if !status.success() || !unpacked.join("cuda_runtime_api.h").is_file() {
        return Err(format!("cannot unpack {}", archive.display()));
    }
    Ok(unpacked)
}

fn check_sha256(archive: &Path) -> Result<(), String> {
    let out = Command::new("sha256sum")
        .arg(archive)
        .output()
        .map_err(|e| format!("cannot run sha256sum: {e}"))?;
    let text = String::from_utf8_lossy(&out.stdout);
    if text.split_whitespace().next() == Some(HEADERS_CRATE_SHA256) {
        Ok(())
    } else {
        let _ = std::fs::remove_file(archive);
        Err(format!(
            "{} does not have the SHA-256 crates.io publishes for {HEADERS_CRATE} {HEADERS_CRATE_VERSION}",
            archive.display()
        ))
    }
}

fn read_dirs(dir: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut dirs: Vec<PathBuf> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.is_dir())
        .collect();
    dirs.sort();
    dirs
}

/// Compiles every header folder of every flavour, in parallel (each takes seconds).
fn compile_all(root: &Path, out_dir: &Path) -> Vec<Built> {
    let compiler = match cc::Build::new()
        .cpp(true)
        .cargo_metadata(false)
        .try_get_compiler()
    {
        Ok(c) => c,
        Err(e) => {
            println!("cargo:warning=infopt: no built-in TensorRT shims (no C++ compiler: {e})");
            return Vec::new();
        }
    };
    let manifest = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").expect("cargo sets it"));
    let shim_dir = manifest.join("tensorrt");
    let jobs: Vec<(&'static str, u32, u32, &'static str)> = FLAVORS
        .iter()
        .flat_map(|f| {
            f.headers.iter().filter_map(move |h| {
                let (major, minor) = version_of(h)?;
                Some((f.id, major, minor, *h))
            })
        })
        .collect();
    let handles: Vec<_> = jobs
        .into_iter()
        .map(|(flavor, major, minor, headers)| {
            let include = root.join(headers);
            let root = root.to_path_buf();
            let shim_dir = shim_dir.clone();
            let path = out_dir.join(format!("libinfopt_trt_shim-{headers}.so"));
            let mut cmd = compiler.to_command();
            cmd.args([
                "-std=c++17",
                "-O2",
                "-g0",
                "-s",
                "-shared",
                "-fPIC",
                "-Wall",
                "-Wextra",
            ])
            .arg("-isystem")
            .arg(&include)
            .arg("-isystem")
            .arg(&root)
            .arg("-I")
            .arg(&shim_dir)
            .arg(shim_dir.join("infopt_trt_shim.cpp"))
            .arg("-o")
            .arg(&path)
            .arg("-ldl");
            std::thread::spawn(move || {
                let result = if !include.join("NvInfer.h").is_file() {
                    Err(format!("{} has no NvInfer.h", include.display()))
                } else {
                    match cmd.output() {
                        Ok(o) if o.status.success() => Ok(()),
                        Ok(o) => Err(String::from_utf8_lossy(&o.stderr)
                            .lines()
                            .find(|l| l.contains("error"))
                            .unwrap_or("compiler failed")
                            .to_string()),
                        Err(e) => Err(e.to_string()),
                    }
                };
                (
                    Built {
                        flavor,
                        major,
                        minor,
                        headers,
                        path,
                    },
                    result,
                )
            })
        })
        .collect();
    let mut built = Vec::new();
    for h in handles {
        match h.join() {
            Ok((b, Ok(()))) => built.push(b),
            Ok((b, Err(e))) => println!(
                "cargo:warning=infopt: the TensorRT shim for {} did not compile: {e}",
                b.headers
            ),
            Err(_) => println!("cargo:warning=infopt: a shim compile thread panicked"),
        }
    }
    built
}

/// `TRT-RTX-1.7` -> (1, 7).
fn version_of(headers: &str) -> Option<(u32, u32)> {
    let v = headers.rsplit('-').next()?;
    let (major, minor) = v.split_once('.')?;
    Some((major.parse().ok()?, minor.parse().ok()?))
}

fn write_table(out_dir: &Path, built: &[Built]) {
    let mut src = String::from(
        "// Generated by runtime/build.rs: the shims compiled into this crate.\n\
         pub static EMBEDDED_SHIMS: &[EmbeddedShim] = &[\n",
    );
    for b in built {
        src.push_str(&format!(
            "    EmbeddedShim {{ flavor: {:?}, major: {}, minor: {}, headers: {:?}, bytes: include_bytes!({:?}) }},\n",
            b.flavor,
            b.major,
            b.minor,
            b.headers,
            b.path.display().to_string()
        ));
    }
    src.push_str("];\n");
    std::fs::write(out_dir.join("embedded_shims.rs"), src).expect("OUT_DIR is writable");
}
