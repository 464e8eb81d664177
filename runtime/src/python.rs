//! Asking a Python interpreter where a package lives, without importing it
//! (importing onnxruntime or tensorrt_libs would load their native libraries).

use std::path::{Path, PathBuf};

/// The folder of `package` as `python` sees it (a regular package's folder, or
/// the first location of a namespace package); `None` when it has none.
pub(crate) fn package_dir(python: &Path, package: &str) -> Option<PathBuf> {
    let script = format!(
        "import importlib.util, os\ns = importlib.util.find_spec('{package}')\nprint(os.path.dirname(s.origin) if s and s.origin else (list(s.submodule_search_locations)[0] if s and s.submodule_search_locations else ''))"
    );
    let out = std::process::Command::new(python)
        .args(["-c", &script])
        .stdin(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .output()
        .ok()?;
    if !out.status.success() {
        return None;
    }
    let text = String::from_utf8(out.stdout).ok()?;
    let dir = text.trim();
    (!dir.is_empty()).then(|| PathBuf::from(dir))
}
