//! Where the shim and TensorRT's libraries are.
//!
//! The shim (`libinfopt_trt_shim.so`, built by runtime/tensorrt/build.sh): `--trt-shim`,
//! then `INFOPT_TRT_SHIM`, then next to the infopt executable (and in `../lib` from it).
//!
//! TensorRT (`libnvinfer.so.N` and `libnvonnxparser.so.N`, N = the major the shim was
//! compiled for): `--trt-lib DIR`, then `TENSORRT_LIB`, then the `tensorrt_libs` folder of
//! a pip install (`pip install tensorrt-cu12` puts the libraries there): in
//! `$VIRTUAL_ENV` and every `.venv` above the working directory or the executable, then
//! as the Python interpreters see it; then `LD_LIBRARY_PATH` and the usual system
//! folders. A folder given explicitly (flag or variable) that lacks the libraries is an
//! error, not a reason to look further.
//!
//! TensorRT-RTX (`libtensorrt_rtx.so.1`, `libtensorrt_onnxparser_rtx.so.1`) is looked for
//! the same way, with `TENSORRT_RTX_LIB` and the pip folder `tensorrt_rtx_libs`: the rows
//! of the flavour table ([`super::flavor`]) name the files, folder and variable.
//!
//! libcudart (only timing needs it) is looked for beside TensorRT, in a pip install's
//! `nvidia/cuda_runtime/lib`, and in the system folders; if none is found the shim tries
//! the usual sonames itself.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use serde::Serialize;

use super::flavor::{self, FlavorSpec};
use crate::error::{Result, RuntimeError};

pub const SHIM_ENV: &str = "INFOPT_TRT_SHIM";
pub const LIB_ENV: &str = "TENSORRT_LIB";
pub const SHIM_FILE: &str = "libinfopt_trt_shim.so";

/// How to get TensorRT `major`, ending every "not found" message. PyPI's `tensorrt-cu12`
/// and `tensorrt-cu13` are TensorRT 11 since 11.0; TensorRT 10 is `tensorrt-cu12<11`.
pub fn install_hint(major: u32) -> String {
    if let Some(spec) = flavor::FLAVORS
        .iter()
        .find(|f| f.major == major && f.id == "rtx")
    {
        return install_hint_for(spec);
    }
    let pip = if major >= 11 {
        "`pip install tensorrt-cu12` (CUDA 12; tensorrt-cu13 for CUDA 13)".to_string()
    } else {
        format!("`pip install 'tensorrt-cu12<{}'`", major + 1)
    };
    format!(
        "install it with {pip} or unpack NVIDIA's TensorRT {major} tarball, then pass --trt-lib DIR (the folder holding libnvinfer.so.{major}) or set TENSORRT_LIB"
    )
}

/// How to get a flavour's libraries, ending its "not found" messages.
pub fn install_hint_for(spec: &FlavorSpec) -> String {
    if spec.id != "rtx" {
        return install_hint(spec.major);
    }
    format!(
        "install it with {} (it builds engines without a GPU), then pass --trt-lib DIR (the folder holding {}) or set {}",
        spec.install, spec.nvinfer, spec.lib_env
    )
}

/// The flavour whose libraries have soname major `major` (10, 11; 1 is TensorRT-RTX).
fn spec_of_major(major: u32) -> Option<&'static FlavorSpec> {
    flavor::FLAVORS.iter().find(|f| f.major == major)
}

/// How to get the shim.
pub const SHIM_HINT: &str = "infopt carries built-in shims when its build could have cargo fetch the trtx-sys headers (any build with network access to crates.io; after an offline build, bash scripts/fetch-trt-headers.sh, then cargo build); otherwise build one with runtime/tensorrt/build.sh (see docs/tensorrt.md) and pass --trt-shim PATH, set INFOPT_TRT_SHIM, or put it next to the infopt executable";

pub(crate) fn unavailable(message: String) -> RuntimeError {
    RuntimeError::Unavailable {
        runtime: "TensorRT".into(),
        message,
    }
}

/// Finds the shim: `explicit`, then `env_value` (`INFOPT_TRT_SHIM`), then `exe_dir` and
/// `exe_dir/../lib`.
pub fn find_shim(
    explicit: Option<&Path>,
    env_value: Option<OsString>,
    exe_dir: Option<&Path>,
) -> Result<PathBuf> {
    if let Some(p) = explicit {
        return if p.is_file() {
            Ok(p.to_path_buf())
        } else {
            Err(unavailable(format!(
                "the TensorRT shim --trt-shim {} is not a file; {SHIM_HINT}",
                p.display()
            )))
        };
    }
    if let Some(v) = env_value.filter(|v| !v.is_empty()) {
        let p = PathBuf::from(v);
        return if p.is_file() {
            Ok(p)
        } else {
            Err(unavailable(format!(
                "the TensorRT shim {SHIM_ENV}={} is not a file; {SHIM_HINT}",
                p.display()
            )))
        };
    }
    let mut looked = Vec::new();
    if let Some(dir) = exe_dir {
        for candidate in [dir.join(SHIM_FILE), dir.join("../lib").join(SHIM_FILE)] {
            if candidate.is_file() {
                return Ok(candidate);
            }
            looked.push(candidate.display().to_string());
        }
    }
    Err(unavailable(format!(
        "the TensorRT shim {SHIM_FILE} was not found (no --trt-shim, no {SHIM_ENV}{}{}); {SHIM_HINT}",
        if looked.is_empty() { "" } else { ", not at " },
        looked.join(" or ")
    )))
}

/// Where a TensorRT library folder came from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum LibSource {
    /// `--trt-lib`.
    Explicit,
    /// `TENSORRT_LIB`.
    EnvVar,
    /// A pip install's `tensorrt_libs` folder.
    PipPackage,
    /// `LD_LIBRARY_PATH` or a system folder.
    System,
}

impl std::fmt::Display for LibSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            LibSource::Explicit => "--trt-lib",
            LibSource::EnvVar => LIB_ENV,
            LibSource::PipPackage => "a pip install",
            LibSource::System => "the system library path",
        })
    }
}

/// The libraries the shim opens.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct TrtLibs {
    pub nvinfer: PathBuf,
    pub onnxparser: PathBuf,
    pub cudart: Option<PathBuf>,
    pub source: LibSource,
}

/// The folders to search, in order. [`LibSearch::from_environment`] fills it from the
/// process; tests spell it out.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LibSearch {
    /// `--trt-lib`.
    pub explicit: Option<PathBuf>,
    /// `TENSORRT_LIB`.
    pub env: Option<PathBuf>,
    /// `TENSORRT_RTX_LIB`.
    pub rtx_env: Option<PathBuf>,
    /// `tensorrt_libs` / `tensorrt_rtx_libs` folders of pip installs, best first.
    pub pip_dirs: Vec<PathBuf>,
    /// `LD_LIBRARY_PATH` and system folders.
    pub system_dirs: Vec<PathBuf>,
}

impl LibSearch {
    /// The search of this process: `explicit` (`--trt-lib`), `TENSORRT_LIB`, pip installs
    /// (asking the Python interpreters only if no virtual environment has one), the system.
    pub fn from_environment(explicit: Option<PathBuf>) -> LibSearch {
        let var = |name: &str| {
            std::env::var_os(name)
                .filter(|v| !v.is_empty())
                .map(PathBuf::from)
        };
        let env = var(LIB_ENV);
        let rtx_env = flavor::by_id("rtx").ok().and_then(|f| var(f.lib_env));
        let mut roots = Vec::new();
        if let Some(v) = std::env::var_os("VIRTUAL_ENV").filter(|v| !v.is_empty()) {
            roots.push(PathBuf::from(v));
        }
        let mut starts = Vec::new();
        if let Ok(cwd) = std::env::current_dir() {
            starts.push(cwd);
        }
        if let Ok(exe) = std::env::current_exe()
            && let Some(dir) = exe.parent()
        {
            starts.push(dir.to_path_buf());
        }
        for start in &starts {
            for dir in start.ancestors() {
                let venv = dir.join(".venv");
                if venv.is_dir() && !roots.contains(&venv) {
                    roots.push(venv);
                }
            }
        }
        let mut pip_dirs = pip_dirs_in_venvs(&roots);
        // Only when no virtual environment has TensorRT: asking an interpreter costs a
        // process start.
        if explicit.is_none() && env.is_none() && rtx_env.is_none() && pip_dirs.is_empty() {
            for python in crate::ort_backend::python_candidates() {
                for folder in pip_folders() {
                    if let Some(dir) = crate::python::package_dir(&python, folder)
                        && !pip_dirs.contains(&dir)
                    {
                        pip_dirs.push(dir);
                    }
                }
            }
        }
        let mut system_dirs: Vec<PathBuf> = std::env::var_os("LD_LIBRARY_PATH")
            .map(|v| {
                std::env::split_paths(&v)
                    .filter(|p| !p.as_os_str().is_empty())
                    .collect()
            })
            .unwrap_or_default();
        for dir in [
            "/usr/lib/x86_64-linux-gnu",
            "/usr/lib/aarch64-linux-gnu",
            "/usr/local/lib",
            "/usr/lib64",
            "/usr/lib",
            "/opt/tensorrt/lib",
            "/usr/local/tensorrt/lib",
            "/usr/local/cuda/lib64",
        ] {
            let dir = PathBuf::from(dir);
            if !system_dirs.contains(&dir) {
                system_dirs.push(dir);
            }
        }
        LibSearch {
            explicit,
            env,
            rtx_env,
            pip_dirs,
            system_dirs,
        }
    }

    /// Finds `libnvinfer.so.{major}` and `libnvonnxparser.so.{major}` in one folder
    /// (major 1: TensorRT-RTX's libraries).
    pub fn find(&self, major: u32) -> Result<TrtLibs> {
        match spec_of_major(major) {
            Some(spec) => self.find_flavor(spec),
            None => self.search(&Wanted::major(major, self)),
        }
    }

    /// Finds the libraries of `spec` in one folder.
    pub fn find_flavor(&self, spec: &FlavorSpec) -> Result<TrtLibs> {
        self.search(&Wanted::flavor(spec, self))
    }

    /// The one search every flavour goes through: the folder the user named (flag, then
    /// the flavour's variable) decides alone; otherwise the first pip or system folder
    /// holding both libraries.
    fn search(&self, wanted: &Wanted) -> Result<TrtLibs> {
        let explicit = [
            (self.explicit.as_ref(), LibSource::Explicit, "--trt-lib"),
            (wanted.env, LibSource::EnvVar, wanted.env_name),
        ];
        for (dir, source, spelled) in explicit {
            let Some(dir) = dir else { continue };
            return match wanted.libs_in(dir) {
                Some((nvinfer, onnxparser)) => Ok(TrtLibs {
                    cudart: self.find_cudart(dir),
                    nvinfer,
                    onnxparser,
                    source,
                }),
                None => Err(unavailable(format!(
                    "{spelled} {}: {}",
                    dir.display(),
                    wanted.missing_in(dir)
                ))),
            };
        }
        let folders = self
            .pip_dirs
            .iter()
            .map(|d| (d, LibSource::PipPackage))
            .chain(self.system_dirs.iter().map(|d| (d, LibSource::System)));
        let mut other_majors = Vec::new();
        for (dir, source) in folders {
            if let Some((nvinfer, onnxparser)) = wanted.libs_in(dir) {
                return Ok(TrtLibs {
                    cudart: self.find_cudart(dir),
                    nvinfer,
                    onnxparser,
                    source,
                });
            }
            if let Some(major) = wanted.versioned_major {
                for other in present_majors(dir).into_iter().filter(|m| *m != major) {
                    other_majors.push(format!("libnvinfer.so.{other} in {}", dir.display()));
                }
            }
        }
        let mismatch = match wanted.versioned_major {
            Some(major) if !other_majors.is_empty() => format!(
                " (found {}: rebuild the shim against that version's headers with runtime/tensorrt/build.sh, or install TensorRT {major})",
                other_majors.join(", ")
            ),
            _ => String::new(),
        };
        Err(unavailable(format!(
            "{} ({}, {}) not found: no --trt-lib, no {}, no pip install with a {} folder, nothing in LD_LIBRARY_PATH or the system folders{mismatch}; {}",
            wanted.display,
            wanted.nvinfer,
            wanted.onnxparser,
            wanted.env_name,
            wanted.pip_folder,
            wanted.hint
        )))
    }

    /// libcudart beside TensorRT, in the pip install's CUDA runtime package, or in a
    /// system folder.
    fn find_cudart(&self, trt_dir: &Path) -> Option<PathBuf> {
        let mut dirs = vec![trt_dir.to_path_buf()];
        if let Some(site) = trt_dir.parent() {
            dirs.push(site.join("nvidia").join("cuda_runtime").join("lib"));
            // nvidia-cuda-runtime 13.x installs nvidia/cu13/lib.
            dirs.push(site.join("nvidia").join("cu13").join("lib"));
        }
        dirs.extend(self.system_dirs.iter().cloned());
        dirs.iter()
            .find_map(|d| newest_versioned(d, "libcudart.so."))
    }
}

/// The pip folders of every flavour (`tensorrt_libs`, `tensorrt_rtx_libs`).
fn pip_folders() -> Vec<&'static str> {
    let mut out: Vec<&'static str> = Vec::new();
    for f in flavor::FLAVORS {
        if !out.contains(&f.pip_folder) {
            out.push(f.pip_folder);
        }
    }
    out
}

/// Pip library folders under `lib/python3*/site-packages` of each virtual environment.
fn pip_dirs_in_venvs(roots: &[PathBuf]) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for root in roots {
        let Ok(entries) = std::fs::read_dir(root.join("lib")) else {
            continue;
        };
        let mut pythons: Vec<PathBuf> = entries
            .filter_map(|e| e.ok())
            .map(|e| e.path())
            .filter(|p| {
                p.file_name()
                    .and_then(|n| n.to_str())
                    .is_some_and(|n| n.starts_with("python3"))
            })
            .collect();
        pythons.sort();
        for py in pythons {
            for folder in pip_folders() {
                let dir = py.join("site-packages").join(folder);
                if dir.is_dir() && !out.contains(&dir) {
                    out.push(dir);
                }
            }
        }
    }
    out
}

/// What one library search looks for: two file names, the variable that names their
/// folder, and how to say that they are missing.
struct Wanted<'a> {
    display: String,
    nvinfer: String,
    onnxparser: String,
    env: Option<&'a PathBuf>,
    env_name: &'a str,
    pip_folder: &'a str,
    hint: String,
    /// `libnvinfer.so.N` families: other majors found on the way are named, since a shim
    /// compiled for another major is the likely mistake.
    versioned_major: Option<u32>,
}

impl<'a> Wanted<'a> {
    fn flavor(spec: &'a FlavorSpec, search: &'a LibSearch) -> Wanted<'a> {
        let rtx = spec.id == "rtx";
        Wanted {
            display: spec.display.to_string(),
            nvinfer: spec.nvinfer.to_string(),
            onnxparser: spec.onnxparser.to_string(),
            env: if rtx {
                search.rtx_env.as_ref()
            } else {
                search.env.as_ref()
            },
            env_name: spec.lib_env,
            pip_folder: spec.pip_folder,
            hint: install_hint_for(spec),
            versioned_major: (!rtx).then_some(spec.major),
        }
    }

    /// A TensorRT major the flavour table does not list (a shim built for a newer one).
    fn major(major: u32, search: &'a LibSearch) -> Wanted<'a> {
        Wanted {
            display: format!("TensorRT {major}"),
            nvinfer: format!("libnvinfer.so.{major}"),
            onnxparser: format!("libnvonnxparser.so.{major}"),
            env: search.env.as_ref(),
            env_name: LIB_ENV,
            pip_folder: "tensorrt_libs",
            hint: install_hint(major),
            versioned_major: Some(major),
        }
    }

    fn libs_in(&self, dir: &Path) -> Option<(PathBuf, PathBuf)> {
        let nvinfer = dir.join(&self.nvinfer);
        let parser = dir.join(&self.onnxparser);
        (nvinfer.is_file() && parser.is_file()).then_some((nvinfer, parser))
    }

    /// Why `dir`, a folder the user named, does not have the libraries.
    fn missing_in(&self, dir: &Path) -> String {
        if !dir.is_dir() {
            return format!("not a folder; {}", self.hint);
        }
        let has_nvinfer = dir.join(&self.nvinfer).is_file();
        if let Some(major) = self.versioned_major {
            let others: Vec<String> = present_majors(dir)
                .into_iter()
                .filter(|m| *m != major)
                .map(|m| m.to_string())
                .collect();
            if !has_nvinfer && !others.is_empty() {
                let list = others.join("/");
                return format!(
                    "holds TensorRT {list} but the shim was compiled for TensorRT {major}; rebuild the shim against TensorRT {list}'s headers with runtime/tensorrt/build.sh, or point --trt-lib at TensorRT {major}"
                );
            }
        }
        let mut lacking = Vec::new();
        if !has_nvinfer {
            lacking.push(self.nvinfer.as_str());
        }
        if !dir.join(&self.onnxparser).is_file() {
            lacking.push(self.onnxparser.as_str());
        }
        format!("no {} there; {}", lacking.join(" or "), self.hint)
    }
}

/// Majors of `libnvinfer.so.N` files in `dir`.
fn present_majors(dir: &Path) -> Vec<u32> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut majors: Vec<u32> = entries
        .filter_map(|e| e.ok())
        .filter_map(|e| {
            let name = e.file_name().to_str()?.to_string();
            name.strip_prefix("libnvinfer.so.")?
                .split('.')
                .next()?
                .parse()
                .ok()
        })
        .collect();
    majors.sort_unstable();
    majors.dedup();
    majors
}

/// `prefix` + the highest version found in `dir` (`libcudart.so.12` over `.11.0`).
fn newest_versioned(dir: &Path, prefix: &str) -> Option<PathBuf> {
    let entries = std::fs::read_dir(dir).ok()?;
    let mut found: Vec<(Vec<u32>, PathBuf)> = entries
        .filter_map(|e| e.ok())
        .filter_map(|e| {
            let name = e.file_name().to_str()?.to_string();
            let rest = name.strip_prefix(prefix)?;
            let version: Option<Vec<u32>> = rest.split('.').map(|p| p.parse().ok()).collect();
            Some((version?, e.path()))
        })
        .filter(|(_, p)| p.is_file())
        .collect();
    found.sort();
    found.pop().map(|(_, p)| p)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn touch(dir: &Path, name: &str) {
        std::fs::create_dir_all(dir).unwrap();
        std::fs::write(dir.join(name), b"").unwrap();
    }

    fn unavailable_message(e: RuntimeError) -> String {
        match &e {
            RuntimeError::Unavailable { .. } => e.to_string(),
            other => panic!("expected Unavailable, got {other:?}"),
        }
    }

    #[test]
    fn shim_order_is_flag_env_then_exe_dir() {
        let t = tempfile::tempdir().unwrap();
        let a = t.path().join("a");
        let exe = t.path().join("bin");
        touch(&a, SHIM_FILE);
        touch(&exe, SHIM_FILE);
        let a_shim = a.join(SHIM_FILE);
        assert_eq!(
            find_shim(Some(&a_shim), Some(OsString::from("/nope")), Some(&exe)).unwrap(),
            a_shim
        );
        assert_eq!(
            find_shim(None, Some(a_shim.clone().into_os_string()), Some(&exe)).unwrap(),
            a_shim
        );
        assert_eq!(
            find_shim(None, Some(OsString::new()), Some(&exe)).unwrap(),
            exe.join(SHIM_FILE)
        );
        // ../lib beside the executable's folder.
        let lib = t.path().join("lib");
        touch(&lib, SHIM_FILE);
        let other_bin = t.path().join("bin2");
        std::fs::create_dir_all(&other_bin).unwrap();
        assert_eq!(
            find_shim(None, None, Some(&other_bin)).unwrap(),
            other_bin.join("../lib").join(SHIM_FILE)
        );
    }

    #[test]
    fn missing_shim_names_where_it_looked_and_how_to_build_it() {
        let t = tempfile::tempdir().unwrap();
        let e = unavailable_message(find_shim(None, None, Some(t.path())).unwrap_err());
        assert!(
            e.starts_with(
                "TensorRT is not available: the TensorRT shim libinfopt_trt_shim.so was not found"
            ),
            "{e}"
        );
        assert!(
            e.contains("runtime/tensorrt/build.sh") && e.contains("--trt-shim"),
            "{e}"
        );
        assert!(!e.contains('\n'));
        let e =
            unavailable_message(find_shim(Some(&t.path().join("x.so")), None, None).unwrap_err());
        assert!(
            e.contains("--trt-shim") && e.contains("x.so is not a file"),
            "{e}"
        );
        let e = unavailable_message(find_shim(None, Some("/no/such.so".into()), None).unwrap_err());
        assert!(
            e.contains("INFOPT_TRT_SHIM=/no/such.so is not a file"),
            "{e}"
        );
    }

    #[test]
    fn libs_come_from_the_first_folder_that_has_the_compiled_major() {
        let t = tempfile::tempdir().unwrap();
        let pip = t.path().join("site-packages").join("tensorrt_libs");
        let sys = t.path().join("sys");
        for d in [&pip, &sys] {
            touch(d, "libnvinfer.so.10");
            touch(d, "libnvonnxparser.so.10");
        }
        touch(
            &t.path().join("site-packages/nvidia/cuda_runtime/lib"),
            "libcudart.so.12",
        );
        let search = LibSearch {
            pip_dirs: vec![pip.clone()],
            system_dirs: vec![sys.clone()],
            ..Default::default()
        };
        let libs = search.find(10).unwrap();
        assert_eq!(libs.nvinfer, pip.join("libnvinfer.so.10"));
        assert_eq!(libs.onnxparser, pip.join("libnvonnxparser.so.10"));
        assert_eq!(libs.source, LibSource::PipPackage);
        assert_eq!(
            libs.cudart.as_deref(),
            Some(
                t.path()
                    .join("site-packages/nvidia/cuda_runtime/lib/libcudart.so.12")
                    .as_path()
            )
        );
        // The explicit folder wins over everything.
        let explicit = t.path().join("explicit");
        touch(&explicit, "libnvinfer.so.10");
        touch(&explicit, "libnvonnxparser.so.10");
        touch(&explicit, "libcudart.so.11.0");
        touch(&explicit, "libcudart.so.12");
        let libs = LibSearch {
            explicit: Some(explicit.clone()),
            env: Some(sys.clone()),
            ..search.clone()
        }
        .find(10)
        .unwrap();
        assert_eq!(libs.nvinfer, explicit.join("libnvinfer.so.10"));
        assert_eq!(libs.source, LibSource::Explicit);
        assert_eq!(libs.cudart, Some(explicit.join("libcudart.so.12")));
        let libs = LibSearch {
            env: Some(sys.clone()),
            ..search.clone()
        }
        .find(10)
        .unwrap();
        assert_eq!(
            (libs.nvinfer, libs.source),
            (sys.join("libnvinfer.so.10"), LibSource::EnvVar)
        );
    }

    #[test]
    fn an_explicit_folder_without_the_libraries_is_an_error_naming_it() {
        let t = tempfile::tempdir().unwrap();
        let dir = t.path().join("trt");
        touch(&dir, "libnvinfer.so.11");
        let fallback = t.path().join("sys");
        touch(&fallback, "libnvinfer.so.11");
        touch(&fallback, "libnvonnxparser.so.11");
        let search = LibSearch {
            explicit: Some(dir.clone()),
            system_dirs: vec![fallback],
            ..Default::default()
        };
        let e = unavailable_message(search.find(11).unwrap_err());
        assert!(e.contains(&format!("--trt-lib {}", dir.display())), "{e}");
        assert!(
            e.contains("no libnvonnxparser.so.11 there") && e.contains("pip install tensorrt-cu12"),
            "{e}"
        );
        // A folder holding another major: say so, and how to fix it.
        let e = unavailable_message(search.find(10).unwrap_err());
        assert!(
            e.contains("holds TensorRT 11 but the shim was compiled for TensorRT 10"),
            "{e}"
        );
        assert!(e.contains("runtime/tensorrt/build.sh"), "{e}");
        let e = unavailable_message(
            LibSearch {
                env: Some(t.path().join("nope")),
                ..Default::default()
            }
            .find(10)
            .unwrap_err(),
        );
        assert!(
            e.contains("TENSORRT_LIB") && e.contains("not a folder"),
            "{e}"
        );
    }

    #[test]
    fn nothing_found_is_one_line_with_the_install_hint_and_other_majors() {
        let t = tempfile::tempdir().unwrap();
        let sys = t.path().join("sys");
        touch(&sys, "libnvinfer.so.10.3.0");
        let e = unavailable_message(
            LibSearch {
                system_dirs: vec![sys.clone(), t.path().join("absent")],
                ..Default::default()
            }
            .find(11)
            .unwrap_err(),
        );
        assert!(e.starts_with("TensorRT is not available: TensorRT 11 (libnvinfer.so.11, libnvonnxparser.so.11) not found"), "{e}");
        assert!(
            e.contains(&format!("found libnvinfer.so.10 in {}", sys.display())),
            "{e}"
        );
        assert!(
            e.contains("pip install tensorrt-cu12") && e.contains("--trt-lib"),
            "{e}"
        );
        assert!(!e.contains('\n'));
    }

    #[test]
    fn tensorrt_rtx_goes_through_the_same_search_with_its_own_names_and_variable() {
        let t = tempfile::tempdir().unwrap();
        let rtx = flavor::by_id("rtx").unwrap();
        let pip = t.path().join("site-packages").join(rtx.pip_folder);
        touch(&pip, rtx.nvinfer);
        touch(&pip, rtx.onnxparser);
        // TENSORRT_LIB is TensorRT's variable: it does not hide the RTX pip folder.
        let trt_only = t.path().join("trt");
        touch(&trt_only, "libnvinfer.so.11");
        let search = LibSearch {
            env: Some(trt_only.clone()),
            pip_dirs: vec![pip.clone()],
            ..Default::default()
        };
        let libs = search.find(rtx.major).unwrap();
        assert_eq!(
            (libs.nvinfer, libs.source),
            (pip.join(rtx.nvinfer), LibSource::PipPackage)
        );
        // TENSORRT_RTX_LIB naming a folder without the parser decides alone, by name.
        let half = t.path().join("half");
        touch(&half, rtx.nvinfer);
        let e = unavailable_message(
            LibSearch {
                rtx_env: Some(half.clone()),
                ..search.clone()
            }
            .find_flavor(rtx)
            .unwrap_err(),
        );
        assert!(
            e.contains(&format!(
                "{} {}: no {} there;",
                rtx.lib_env,
                half.display(),
                rtx.onnxparser
            )),
            "{e}"
        );
        assert!(e.contains("tensorrt-rtx-cu13-libs"), "{e}");
        // Nothing anywhere: the RTX names, variable and pip folder, no libnvinfer majors.
        let e = unavailable_message(
            LibSearch {
                system_dirs: vec![trt_only],
                ..Default::default()
            }
            .find_flavor(rtx)
            .unwrap_err(),
        );
        assert!(
            e.contains(&format!(
                "TensorRT-RTX ({}, {}) not found: no --trt-lib, no {}, no pip install with a {} folder",
                rtx.nvinfer, rtx.onnxparser, rtx.lib_env, rtx.pip_folder
            )),
            "{e}"
        );
        assert!(!e.contains("libnvinfer.so.11"), "{e}");
    }

    #[test]
    fn the_install_hint_fits_the_major() {
        let h11 = install_hint(11);
        assert!(
            h11.contains("`pip install tensorrt-cu12`") && h11.contains("libnvinfer.so.11"),
            "{h11}"
        );
        let h10 = install_hint(10);
        assert!(
            h10.contains("`pip install 'tensorrt-cu12<11'`") && h10.contains("TensorRT 10 tarball"),
            "{h10}"
        );
    }

    #[test]
    fn pip_folders_are_found_in_virtual_environments() {
        let t = tempfile::tempdir().unwrap();
        let venv = t.path().join(".venv");
        let libs = venv.join("lib/python3.12/site-packages/tensorrt_libs");
        std::fs::create_dir_all(&libs).unwrap();
        std::fs::create_dir_all(venv.join("lib/python3.11/site-packages")).unwrap();
        assert_eq!(
            pip_dirs_in_venvs(&[venv, t.path().join("none")]),
            vec![libs]
        );
    }
}
