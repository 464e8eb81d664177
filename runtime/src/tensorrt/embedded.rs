//! The shims compiled into this crate by runtime/build.rs, one per header folder of the
//! flavour table, and their extraction to a file the dynamic loader can open.

use std::path::{Path, PathBuf};

use super::flavor::FlavorSpec;
use super::version::TrtVersion;
use crate::error::{Result, RuntimeError};

/// One built-in shim.
#[derive(Debug)]
pub struct EmbeddedShim {
    /// `FlavorSpec::id`.
    pub flavor: &'static str,
    pub major: u32,
    pub minor: u32,
    /// The header folder it was compiled against (`TRT-RTX-1.7`).
    pub headers: &'static str,
    pub bytes: &'static [u8],
}

include!(concat!(env!("OUT_DIR"), "/embedded_shims.rs"));

impl EmbeddedShim {
    pub fn version(&self) -> TrtVersion {
        TrtVersion {
            major: self.major,
            minor: self.minor,
            patch: 0,
        }
    }
}

/// The built-in shims of `flavor`.
pub fn shims_of(flavor: &FlavorSpec) -> Vec<&'static EmbeddedShim> {
    EMBEDDED_SHIMS
        .iter()
        .filter(|s| s.flavor == flavor.id)
        .collect()
}

/// The built-in shim that drives `lib` (a library of `flavor`), if any.
pub fn shim_for(flavor: &FlavorSpec, lib: TrtVersion) -> Option<&'static EmbeddedShim> {
    shims_of(flavor)
        .into_iter()
        .filter(|s| flavor.accepts(s.version(), lib))
        .max_by_key(|s| (s.major, s.minor))
}

/// "1.3, 1.4, ..." of a flavour's built-in shims, for messages.
pub fn versions_of(flavor: &FlavorSpec) -> String {
    let list: Vec<String> = shims_of(flavor)
        .iter()
        .map(|s| format!("{}.{}", s.major, s.minor))
        .collect();
    if list.is_empty() {
        "none".into()
    } else {
        list.join(", ")
    }
}

/// Writes the shim to a per-user cache file named after its content (once) and returns
/// the path, for `dlopen`.
pub fn materialize(shim: &EmbeddedShim) -> Result<PathBuf> {
    let dir = cache_dir();
    let name = format!(
        "libinfopt_trt_shim-{}-{:016x}.so",
        shim.headers,
        fnv1a(shim.bytes)
    );
    let path = dir.join(name);
    if std::fs::metadata(&path).is_ok_and(|m| m.len() == shim.bytes.len() as u64) {
        return Ok(path);
    }
    let io = |e: std::io::Error| RuntimeError::Unavailable {
        runtime: "TensorRT".into(),
        message: format!(
            "cannot write the built-in TensorRT shim to {}: {e}; set XDG_CACHE_HOME to a writable folder",
            dir.display()
        ),
    };
    std::fs::create_dir_all(&dir).map_err(io)?;
    let tmp = dir.join(format!(".shim-{}.tmp", std::process::id()));
    std::fs::write(&tmp, shim.bytes).map_err(io)?;
    std::fs::rename(&tmp, &path).map_err(io)?;
    Ok(path)
}

fn cache_dir() -> PathBuf {
    let base = std::env::var_os("XDG_CACHE_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| {
            std::env::var_os("HOME")
                .filter(|v| !v.is_empty())
                .map(|h| Path::new(&h).join(".cache"))
        })
        .unwrap_or_else(std::env::temp_dir);
    base.join("infopt")
}

/// FNV-1a: a stable content hash for the cache file name (not for security).
fn fnv1a(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in bytes {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}
