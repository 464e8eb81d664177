//! TensorRT flavours (TensorRT 10, TensorRT 11, TensorRT-RTX 1.x) and what differs between
//! them, read from one table (`flavor_table.rs`, shared with runtime/build.rs).

use super::version::TrtVersion;
use crate::error::{Result, RuntimeError};

mod table {
    include!("flavor_table.rs");
}
pub use table::{
    FLAVORS, FlavorSpec, HEADERS_CRATE, HEADERS_CRATE_SHA256, HEADERS_CRATE_VERSION, VersionCheck,
};

/// The `--trt-flavor` spellings, for messages.
pub fn flavor_ids() -> Vec<&'static str> {
    FLAVORS.iter().map(|f| f.id).collect()
}

/// The flavour spelled `id` (`trt10`, `trt11`, `rtx`; `10`, `11` and `tensorrt-rtx` too).
pub fn by_id(id: &str) -> Result<&'static FlavorSpec> {
    let id = id.trim().to_ascii_lowercase();
    let canonical = match id.as_str() {
        "10" | "tensorrt10" | "tensorrt-10" => "trt10",
        "11" | "tensorrt11" | "tensorrt-11" => "trt11",
        "tensorrt-rtx" | "tensorrt_rtx" | "trt-rtx" => "rtx",
        other => other,
    };
    FLAVORS.iter().find(|f| f.id == canonical).ok_or_else(|| {
        RuntimeError::InvalidArgument(format!(
            "unknown TensorRT flavour `{id}`; use one of {}",
            flavor_ids().join(", ")
        ))
    })
}

/// The flavour of a shim, from what it reports (`compiled_flavor`, `compiled_major`).
pub fn of_shim(abi_flavor: i32, major: u32) -> Option<&'static FlavorSpec> {
    FLAVORS
        .iter()
        .find(|f| f.abi_flavor == abi_flavor && f.major == major)
}

impl FlavorSpec {
    /// Whether a library of `lib` can be driven by a shim compiled against `headers`.
    pub fn accepts(&self, headers: TrtVersion, lib: TrtVersion) -> bool {
        match self.version_check {
            VersionCheck::Major => headers.major == lib.major,
            VersionCheck::MajorMinor => headers.major == lib.major && headers.minor == lib.minor,
        }
    }

    /// Compute capabilities (SM numbers) this flavour can target at `version`; empty
    /// when it builds for the GPU it runs on.
    pub fn supported_compute_capabilities(&self, version: TrtVersion) -> Vec<u32> {
        self.compute_capabilities
            .iter()
            .filter(|(_, since)| version.minor >= *since)
            .map(|(sm, _)| *sm)
            .collect()
    }

    /// Checks `--compute-capability` values against what this flavour supports at
    /// `version`; the error lists the supported ones.
    pub fn check_compute_capabilities(&self, version: TrtVersion, wanted: &[u32]) -> Result<()> {
        if wanted.is_empty() {
            return Ok(());
        }
        let supported = self.supported_compute_capabilities(version);
        if supported.is_empty() {
            return Err(RuntimeError::InvalidArgument(format!(
                "--compute-capability is a TensorRT-RTX setting; {} builds for the GPU it runs on (use --trt-flavor rtx)",
                self.display
            )));
        }
        let list = supported
            .iter()
            .map(u32::to_string)
            .collect::<Vec<_>>()
            .join(", ");
        for sm in wanted {
            if !supported.contains(sm) {
                return Err(RuntimeError::InvalidArgument(format!(
                    "--compute-capability {sm} is not supported by {} {version}; supported: {list}",
                    self.display
                )));
            }
        }
        let mut seen = std::collections::HashSet::new();
        if let Some(dup) = wanted.iter().find(|sm| !seen.insert(**sm)) {
            return Err(RuntimeError::InvalidArgument(format!(
                "--compute-capability lists {dup} twice"
            )));
        }
        Ok(())
    }

    /// "TensorRT-RTX 1.7" / "TensorRT 11": the display name with a version's
    /// significant part.
    pub fn describe(&self, version: TrtVersion) -> String {
        match self.version_check {
            VersionCheck::MajorMinor => {
                format!("{} {}.{}", self.display, version.major, version.minor)
            }
            VersionCheck::Major => format!("TensorRT {version}"),
        }
    }
}

/// Parses `--compute-capability 86,89,120` (also `8.6`, `sm_86`, `SM86`).
pub fn parse_compute_capabilities(text: &str) -> Result<Vec<u32>> {
    let mut out = Vec::new();
    for part in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let digits = part
            .trim_start_matches(|c: char| c.is_ascii_alphabetic() || c == '_')
            .replace('.', "");
        let sm: u32 = digits.parse().map_err(|_| {
            RuntimeError::InvalidArgument(format!(
                "--compute-capability `{part}` is not an SM number such as 86 or 8.6"
            ))
        })?;
        out.push(sm);
    }
    if out.is_empty() {
        return Err(RuntimeError::InvalidArgument(
            "--compute-capability needs at least one SM number, such as 86,89,120".into(),
        ));
    }
    Ok(out)
}

/// Whether this machine has an NVIDIA GPU with its driver loaded. `INFOPT_TRT_GPU=0`/`1`
/// overrides the guess.
pub fn gpu_present() -> bool {
    if let Some(v) = std::env::var_os("INFOPT_TRT_GPU") {
        return v != "0" && !v.is_empty();
    }
    std::path::Path::new("/proc/driver/nvidia/version").exists()
        || std::path::Path::new("/dev/nvidia0").exists()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(major: u32, minor: u32) -> TrtVersion {
        TrtVersion {
            major,
            minor,
            patch: 0,
        }
    }

    #[test]
    fn flavours_are_found_by_their_spellings() {
        assert_eq!(by_id("rtx").unwrap().nvinfer, "libtensorrt_rtx.so.1");
        assert_eq!(by_id("TensorRT-RTX").unwrap().id, "rtx");
        assert_eq!(by_id("11").unwrap().id, "trt11");
        let e = by_id("12").unwrap_err().to_string();
        assert!(
            e.contains("unknown TensorRT flavour `12`; use one of trt10, trt11, rtx"),
            "{e}"
        );
        assert_eq!(of_shim(1, 1).unwrap().id, "rtx");
        assert_eq!(of_shim(0, 10).unwrap().id, "trt10");
        assert!(of_shim(0, 9).is_none());
    }

    #[test]
    fn rtx_checks_major_and_minor_tensorrt_the_major_only() {
        let rtx = by_id("rtx").unwrap();
        assert!(rtx.accepts(v(1, 7), v(1, 7)));
        assert!(!rtx.accepts(v(1, 6), v(1, 7)));
        let t11 = by_id("trt11").unwrap();
        assert!(t11.accepts(v(11, 4), v(11, 9)));
        assert!(!t11.accepts(v(11, 4), v(10, 4)));
    }

    #[test]
    fn compute_capabilities_are_checked_against_the_version() {
        let rtx = by_id("rtx").unwrap();
        assert_eq!(
            rtx.supported_compute_capabilities(v(1, 3)),
            vec![80, 86, 89, 120]
        );
        assert_eq!(
            rtx.supported_compute_capabilities(v(1, 7)),
            vec![80, 86, 89, 120, 121]
        );
        rtx.check_compute_capabilities(v(1, 7), &[86, 89, 120])
            .unwrap();
        let e = rtx
            .check_compute_capabilities(v(1, 7), &[86, 90])
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("--compute-capability 90 is not supported by TensorRT-RTX 1.7.0; supported: 80, 86, 89, 120, 121"),
            "{e}"
        );
        let e = by_id("trt11")
            .unwrap()
            .check_compute_capabilities(v(11, 4), &[86])
            .unwrap_err()
            .to_string();
        assert!(e.contains("--trt-flavor rtx"), "{e}");
        assert_eq!(
            parse_compute_capabilities("86, 8.9,sm_120").unwrap(),
            vec![86, 89, 120]
        );
        assert!(parse_compute_capabilities("ampere").is_err());
        assert!(parse_compute_capabilities(",").is_err());
    }
}
