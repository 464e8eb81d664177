//! Compiles the TensorRT shim (runtime/tensorrt/) once per header folder of the flavour
//! table (src/tensorrt/flavor_table.rs) and embeds the shared libraries in the crate, so
//! a plain `cargo build` gives an infopt that builds TensorRT-RTX engines with nothing
//! else to compile. The shims link only libdl: TensorRT is opened at run time.
//!
//! The headers come from the source of the `trtx-sys` crate (NVIDIA's TensorRT 11.4 and
//! TensorRT-RTX 1.3–1.7 headers), looked for in this order:
//! 1. `INFOPT_TRT_HEADERS_ROOT` (a folder holding `TRT-RTX-1.7/`, ... and `cuda_runtime_api.h`);
//! 2. the crate unpacked in cargo's registry;
//! 3. its `.crate` file in cargo's registry cache, unpacked into OUT_DIR;
//! 4. none of those: the script has cargo fetch it. It writes a throwaway manifest that
//!    depends on `trtx-sys =VERSION` into OUT_DIR and runs `$CARGO fetch` on it, so the
//!    download is cargo's own (same CARGO_HOME, registry, source replacement, proxy and
//!    checksum check as the build), then looks again (2, 3).
//!
//! So `cargo build`, `cargo install --path .` and the wheel build embed the shims with no
//! step of their own. Offline (or with `INFOPT_TRT_FETCH=0`) the crate builds without
//! embedded shims, with a cargo warning saying why, and infopt asks for `--trt-shim` at
//! run time. Cargo reruns the script when `INFOPT_TRT_FETCH` or `CARGO_NET_OFFLINE`
//! changes or when build.rs changes: scripts/fetch-trt-headers.sh touches it after
//! fetching, so the build after it embeds the shims without `cargo clean`. (Watching the
//! registry would not do: cargo never checks the modification times of paths under
//! `$CARGO_HOME/registry`, which it takes as immutable; and watching a path that does
//! not exist would rebuild this crate and everything above it on every offline build.)
//!
//! When no C++ compiler is found the crate also builds without embedded shims.
//! `INFOPT_TRT_NO_SHIMS=1` skips all of this.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

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
    for var in [
        "INFOPT_TRT_HEADERS_ROOT",
        "INFOPT_TRT_NO_SHIMS",
        "INFOPT_TRT_FETCH",
        "CARGO_NET_OFFLINE",
        "CXX",
    ] {
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
                    "cargo:warning=infopt: no built-in TensorRT shims ({why}); build-engine will need --trt-shim. With network access to crates.io, run `bash scripts/fetch-trt-headers.sh` (it makes the next build rerun this script), then build again"
                );
                Vec::new()
            }
        }
    };
    write_table(&out_dir, &built);
}

/// The `TensorRT-Headers` folder of the `trtx-sys` source: found locally, else fetched
/// by cargo and found then.
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
    let cargo_home = cargo_home()?;
    if let Some(found) = find_local(&cargo_home, out_dir)? {
        return Ok(found);
    }
    let fetched = cargo_fetch(out_dir);
    if let Some(found) = find_local(&cargo_home, out_dir)? {
        return Ok(found);
    }
    Err(match fetched {
        Ok(()) => format!(
            "cargo fetched {HEADERS_CRATE} {HEADERS_CRATE_VERSION} but its TensorRT-Headers folder is not in {}",
            cargo_home.join("registry").display()
        ),
        Err(why) => why,
    })
}

/// The folder cargo keeps its registry in (build scripts inherit the build's
/// environment, so this is the build's own).
fn cargo_home() -> Result<PathBuf, String> {
    std::env::var_os("CARGO_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cargo")))
        .ok_or_else(|| "neither CARGO_HOME nor HOME is set".to_string())
}

/// The headers unpacked in the registry, or unpacked here from the registry's `.crate`.
fn find_local(cargo_home: &Path, out_dir: &Path) -> Result<Option<PathBuf>, String> {
    let crate_dir = format!("{HEADERS_CRATE}-{HEADERS_CRATE_VERSION}");
    for index in read_dirs(&cargo_home.join("registry").join("src")) {
        let headers = index.join(&crate_dir).join("TensorRT-Headers");
        if headers.join("cuda_runtime_api.h").is_file() {
            return Ok(Some(headers));
        }
    }
    let unpacked = out_dir.join(&crate_dir).join("TensorRT-Headers");
    if unpacked.join("cuda_runtime_api.h").is_file() {
        return Ok(Some(unpacked));
    }
    let crate_file = format!("{crate_dir}.crate");
    let cached = read_dirs(&cargo_home.join("registry").join("cache"))
        .into_iter()
        .map(|index| index.join(&crate_file))
        .find(|p| p.is_file());
    let Some(archive) = cached else {
        return Ok(None);
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
    Ok(Some(unpacked))
}

/// How long the fetch may take: a network that drops packets must not hang the build.
const FETCH_DEADLINE: Duration = Duration::from_secs(180);

/// Has cargo download `trtx-sys` into its registry: `$CARGO fetch` on a manifest in
/// OUT_DIR that depends on exactly that version. It runs in this crate's folder, so
/// cargo reads the same configuration files (source replacement, proxies) as the build.
fn cargo_fetch(out_dir: &Path) -> Result<(), String> {
    if std::env::var_os("INFOPT_TRT_FETCH").is_some_and(|v| v == "0") {
        return Err(format!(
            "{HEADERS_CRATE} {HEADERS_CRATE_VERSION} is not in cargo's registry and INFOPT_TRT_FETCH=0"
        ));
    }
    let dir = out_dir.join("trt-headers-fetch");
    let write = |p: PathBuf, text: String| {
        std::fs::write(&p, text).map_err(|e| format!("cannot write {}: {e}", p.display()))
    };
    std::fs::create_dir_all(dir.join("src"))
        .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    // `[workspace]`: its own root, not a stray member of the workspace above OUT_DIR.
    write(
        dir.join("Cargo.toml"),
        format!(
            "[package]\nname = \"infopt-trt-headers\"\nversion = \"0.0.0\"\nedition = \"2021\"\npublish = false\n\n[dependencies]\n{HEADERS_CRATE} = {{ version = \"={HEADERS_CRATE_VERSION}\", default-features = false }}\n\n[workspace]\n"
        ),
    )?;
    write(dir.join("src").join("lib.rs"), String::new())?;
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let manifest_dir = std::env::var_os("CARGO_MANIFEST_DIR").unwrap_or_else(|| ".".into());
    let mut cmd = Command::new(&cargo);
    cmd.arg("fetch")
        .arg("--quiet")
        .arg("--manifest-path")
        .arg(dir.join("Cargo.toml"))
        .current_dir(&manifest_dir)
        .env("CARGO_NET_RETRY", "1")
        .env("CARGO_HTTP_TIMEOUT", "30")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    // Only the crates this platform's build would need.
    if let Some(host) = std::env::var_os("HOST") {
        cmd.arg("--target").arg(host);
    }
    let mut child = cmd
        .spawn()
        .map_err(|e| format!("cannot run {}: {e}", Path::new(&cargo).display()))?;
    // Read while it runs: a full pipe would stall cargo until the deadline.
    let mut pipe = child.stderr.take();
    let reader = std::thread::spawn(move || {
        let mut text = String::new();
        if let Some(p) = pipe.as_mut() {
            let _ = p.read_to_string(&mut text);
        }
        text
    });
    let started = Instant::now();
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) if started.elapsed() > FETCH_DEADLINE => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!(
                    "cargo fetch of {HEADERS_CRATE} {HEADERS_CRATE_VERSION} took over {} s",
                    FETCH_DEADLINE.as_secs()
                ));
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(100)),
            Err(e) => return Err(format!("cargo fetch: {e}")),
        }
    };
    if status.success() {
        return Ok(());
    }
    let stderr = reader.join().unwrap_or_default();
    let last = stderr
        .lines()
        .map(str::trim)
        .rfind(|l| !l.is_empty())
        .unwrap_or("no message");
    Err(format!(
        "cargo could not fetch {HEADERS_CRATE} {HEADERS_CRATE_VERSION} (offline?): {last}"
    ))
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
