//! Crash-safe output files.
//!
//! Every output is first written to a temporary file created exclusively
//! (`create_new`, i.e. `O_CREAT|O_EXCL`: a planted file or symlink of that name
//! makes the create fail instead of being followed) under an unpredictable
//! name in the destination folder, flushed and fsynced, then renamed over its
//! final name; the folder is fsynced after the rename so the new entry is
//! durable before success is reported.
//!
//! Tests inject a failure at each step ([`FailPoint`]), either as an error
//! (the normal cleanup runs) or as a crash (the function stops where it is,
//! leaving what a killed process would leave).

use std::cell::Cell;
use std::collections::hash_map::RandomState;
use std::fs::{File, OpenOptions};
use std::hash::{BuildHasher, Hasher};
use std::io;

use crate::writeback::OutputFile;
use std::path::{Path, PathBuf};

/// The steps of writing a model (and its external data), in order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SaveStep {
    WriteData,
    SyncData,
    WriteModel,
    SyncModel,
    RenameData,
    SyncDirAfterData,
    RenameModel,
    SyncDirAfterModel,
    RemoveOldData,
}

impl SaveStep {
    pub const ALL: [SaveStep; 9] = [
        SaveStep::WriteData,
        SaveStep::SyncData,
        SaveStep::WriteModel,
        SaveStep::SyncModel,
        SaveStep::RenameData,
        SaveStep::SyncDirAfterData,
        SaveStep::RenameModel,
        SaveStep::SyncDirAfterModel,
        SaveStep::RemoveOldData,
    ];
}

/// A failure to inject (tests only).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FailPoint {
    pub step: SaveStep,
    /// Stop at once without cleaning up, as a killed process would.
    pub crash: bool,
}

/// Fires the injected failure, and remembers whether it was a crash (then no
/// cleanup may run).
#[derive(Default)]
pub(crate) struct Injector {
    fail: Option<FailPoint>,
    crashed: Cell<bool>,
}

impl Injector {
    pub fn new(fail: Option<FailPoint>) -> Injector {
        Injector {
            fail,
            crashed: Cell::new(false),
        }
    }

    pub fn at(&self, step: SaveStep) -> io::Result<()> {
        match self.fail {
            Some(f) if f.step == step => {
                self.crashed.set(f.crash);
                Err(io::Error::other(format!("injected failure at {step:?}")))
            }
            _ => Ok(()),
        }
    }

    /// Removes `path` unless a crash was injected (best effort).
    pub fn remove(&self, path: &Path) {
        if !self.crashed.get() {
            let _ = std::fs::remove_file(path);
        }
    }
}

/// 64 unpredictable bits: `RandomState` is seeded from the OS's randomness.
pub(crate) fn random_token() -> String {
    let mut h = RandomState::new().build_hasher();
    h.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or_default(),
    );
    h.write_u32(std::process::id());
    format!("{:016x}", h.finish())
}

/// The folder a path lives in (`.` for a bare file name).
pub(crate) fn folder_of(path: &Path) -> &Path {
    path.parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."))
}

/// Creates a new, exclusive temporary file beside `final_name` in `dir`.
fn create_temp(dir: &Path, final_name: &str) -> io::Result<(PathBuf, File)> {
    let mut last = None;
    for _ in 0..16 {
        let path = dir.join(format!(".{final_name}.{}.tmp", random_token()));
        match OpenOptions::new().write(true).create_new(true).open(&path) {
            Ok(f) => return Ok((path, f)),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => last = Some(e),
            Err(e) => return Err(e),
        }
    }
    Err(last.unwrap_or_else(|| io::Error::other("no free temporary name")))
}

/// Writes a temporary file in `dir` (flushed and fsynced) and returns its
/// path; nothing is left behind on failure (unless a crash was injected).
pub(crate) fn stage(
    dir: &Path,
    final_name: &str,
    inject: &Injector,
    steps: (SaveStep, SaveStep),
    write: impl FnOnce(&mut OutputFile) -> io::Result<()>,
) -> io::Result<PathBuf> {
    let (tmp, file) = create_temp(dir, final_name)?;
    let result = (|| {
        let mut w = OutputFile::new(file);
        write(&mut w)?;
        inject.at(steps.0)?;
        let file = w.finish()?;
        inject.at(steps.1)?;
        file.sync_all()
    })();
    match result {
        Ok(()) => Ok(tmp),
        Err(e) => {
            inject.remove(&tmp);
            Err(e)
        }
    }
}

/// Makes renames in `dir` durable.
pub(crate) fn sync_dir(dir: &Path) -> io::Result<()> {
    File::open(dir)?.sync_all()
}

/// Replaces `path` with what `write` produces: an exclusive temporary file in
/// the same folder, fsynced, renamed over `path`, folder fsynced. A reader
/// sees the old file or the new one, never a partial one.
pub fn write_atomically(
    path: &Path,
    write: impl FnOnce(&mut OutputFile) -> io::Result<()>,
) -> crate::Result<()> {
    let werr = |source| crate::IrError::Write {
        path: path.to_path_buf(),
        source,
    };
    let dir = folder_of(path);
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .ok_or_else(|| werr(io::Error::other("the path has no file name")))?;
    let none = Injector::default();
    let tmp = stage(
        dir,
        &name,
        &none,
        (SaveStep::WriteModel, SaveStep::SyncModel),
        write,
    )
    .map_err(werr)?;
    if let Err(e) = std::fs::rename(&tmp, path) {
        let _ = std::fs::remove_file(&tmp);
        return Err(werr(e));
    }
    sync_dir(dir).map_err(werr)
}
