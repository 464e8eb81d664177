//! External data: tensors whose bytes live in files beside the model.
//!
//! Locations are resolved inside the model's folder only: absolute paths, `..`
//! components and symlinks that lead out of the folder are refused, so a model
//! cannot make infopt read arbitrary files.

use std::collections::HashMap;
use std::fs::File;
use std::path::{Component, Path, PathBuf};

use bytes::Bytes;

use crate::error::{IrError, Result};
use crate::proto::{GraphProto, ModelProto, NodeProto, StringStringEntryProto, TensorProto};
use crate::tensor::{ExternalOrigin, Tensor};

/// Maps each external-data file once and hands out zero-copy slices of it.
pub struct ExternalResolver {
    base_dir: PathBuf,
    /// The model's folder with symlinks resolved, or why it could not be
    /// resolved: without it no location can be proven to stay inside, so
    /// every external reference is refused (fail closed).
    canonical_base: std::result::Result<PathBuf, String>,
    files: HashMap<PathBuf, Bytes>,
}

fn entry<'a>(entries: &'a [StringStringEntryProto], key: &str) -> Option<&'a str> {
    entries
        .iter()
        .find(|e| e.key.as_deref() == Some(key))
        .and_then(|e| e.value.as_deref())
}

impl ExternalResolver {
    pub fn new(base_dir: &Path) -> ExternalResolver {
        // A model path without a folder part (`model.onnx`) has the empty path
        // as its parent; that folder is the working directory.
        let base_dir = if base_dir.as_os_str().is_empty() {
            PathBuf::from(".")
        } else {
            base_dir.to_path_buf()
        };
        let canonical_base = std::fs::canonicalize(&base_dir).map_err(|e| {
            format!(
                "cannot resolve the model's folder {}: {e}",
                base_dir.display()
            )
        });
        ExternalResolver {
            base_dir,
            canonical_base,
            files: HashMap::new(),
        }
    }

    /// Files mapped so far (for reports).
    pub fn files(&self) -> Vec<PathBuf> {
        let mut v: Vec<PathBuf> = self.files.keys().cloned().collect();
        v.sort();
        v
    }

    /// Replaces the external reference of `proto` by its bytes (a slice of the
    /// mapped file) and returns where they came from.
    pub fn resolve(&mut self, name: &str, proto: &mut TensorProto) -> Result<ExternalOrigin> {
        let err = |problem: String| IrError::ExternalData {
            tensor: name.to_string(),
            problem,
        };
        let entries = proto.external_data.clone();
        let location = entry(&entries, "location")
            .ok_or_else(|| err("has no 'location' entry".into()))?
            .to_string();
        let parse = |key: &str| -> Result<Option<u64>> {
            match entry(&entries, key) {
                None => Ok(None),
                Some(s) => s
                    .trim()
                    .parse::<u64>()
                    .map(Some)
                    .map_err(|_| err(format!("'{key}' is '{s}', not a non-negative integer"))),
            }
        };
        let offset = parse("offset")?.unwrap_or(0);
        let length = parse("length")?;
        let path = self.checked_path(&location).map_err(err)?;
        let data = match self.files.get(&path) {
            Some(d) => d.clone(),
            None => {
                let d = map_file(&path).map_err(|e| {
                    err(format!(
                        "cannot read '{location}' ({}): {e}",
                        path.display()
                    ))
                })?;
                self.files.insert(path.clone(), d.clone());
                d
            }
        };
        let size = data.len() as u64;
        if offset > size {
            return Err(err(format!(
                "offset {offset} is past the end of '{location}' ({size} bytes); the data file does not match the model"
            )));
        }
        let length = length.unwrap_or(size - offset);
        let end = offset.checked_add(length).filter(|&e| e <= size).ok_or_else(|| {
            err(format!(
                "offset {offset} + length {length} runs past the end of '{location}' ({size} bytes); the data file does not match the model"
            ))
        })?;
        let tensor = Tensor::from_proto(TensorProto {
            raw_data: None,
            ..proto.clone()
        });
        if let Some(expected) = tensor.numel().and_then(|n| tensor.dtype().storage_bytes(n))
            && expected as u64 != length
        {
            return Err(err(format!(
                "'{location}' holds {length} bytes for it, but its type and shape need {expected}"
            )));
        }
        proto.raw_data = Some(data.slice(offset as usize..end as usize));
        proto.external_data.clear();
        proto.data_location = None;
        Ok(ExternalOrigin {
            location,
            offset,
            length,
            entries,
        })
    }

    fn checked_path(&self, location: &str) -> std::result::Result<PathBuf, String> {
        let rel = Path::new(location);
        if location.is_empty() {
            return Err("has an empty 'location'".into());
        }
        if rel.is_absolute() || location.starts_with('\\') || location.contains(':') {
            return Err(format!(
                "location '{location}' is an absolute path; external data must be a relative path inside the model's folder"
            ));
        }
        if rel.components().any(|c| matches!(c, Component::ParentDir)) {
            return Err(format!(
                "location '{location}' contains '..'; external data must stay inside the model's folder"
            ));
        }
        let path = self.base_dir.join(rel);
        if !path.exists() {
            return Err(format!(
                "file '{location}' not found in {} (copy the data file next to the model)",
                self.base_dir.display()
            ));
        }
        let canonical = std::fs::canonicalize(&path)
            .map_err(|e| format!("cannot resolve '{location}': {e}"))?;
        let base = self.canonical_base.as_ref().map_err(|e| {
            format!("{e}; refusing to read '{location}' without proof it stays inside")
        })?;
        if !canonical.starts_with(base) {
            return Err(format!(
                "location '{location}' resolves to {} outside the model's folder (through a symlink); refusing to read it",
                canonical.display()
            ));
        }
        Ok(canonical)
    }
}

/// Calls `f(tensor name, location)` for every external tensor of a model:
/// initializers, sparse initializers and attribute tensors of every graph,
/// subgraph and function.
pub fn for_each_external(model: &ModelProto, f: &mut dyn FnMut(&str, &str)) {
    fn tensor(t: &TensorProto, f: &mut dyn FnMut(&str, &str)) {
        if let Some(loc) = entry(&t.external_data, "location") {
            f(t.name.as_deref().unwrap_or(""), loc);
        }
    }
    fn nodes(ns: &[NodeProto], f: &mut dyn FnMut(&str, &str)) {
        for n in ns {
            for a in &n.attribute {
                a.t.iter().chain(&a.tensors).for_each(|t| tensor(t, f));
                a.g.iter().chain(&a.graphs).for_each(|g| graph(g, f));
            }
        }
    }
    fn graph(g: &GraphProto, f: &mut dyn FnMut(&str, &str)) {
        g.initializer.iter().for_each(|t| tensor(t, f));
        for s in &g.sparse_initializer {
            s.values.iter().chain(&s.indices).for_each(|t| tensor(t, f));
        }
        nodes(&g.node, f);
    }
    model.graph.iter().for_each(|g| graph(g, f));
    model.functions.iter().for_each(|func| nodes(&func.node, f));
}

/// Checks every external-data location a model file names, without reading
/// the data, for callers that hand the file to a runtime that resolves
/// external data itself (and might follow a symlink out of the folder). A
/// file that does not decode passes: the runtime reports that itself.
pub fn check_locations(model_path: &Path) -> Result<()> {
    use prost::Message;
    let bytes = map_file(model_path).map_err(|source| IrError::Read {
        path: model_path.into(),
        source,
    })?;
    let Ok(model) = ModelProto::decode(bytes) else {
        return Ok(());
    };
    let resolver = ExternalResolver::new(model_path.parent().unwrap_or(Path::new("")));
    let mut first_error = None;
    for_each_external(&model, &mut |name, location| {
        if first_error.is_none()
            && let Err(problem) = resolver.checked_path(location)
        {
            first_error = Some(IrError::ExternalData {
                tensor: name.to_string(),
                problem,
            });
        }
    });
    first_error.map_or(Ok(()), Err)
}

/// Maps a file read-only and wraps the map in `Bytes` (zero copy).
pub fn map_file(path: &Path) -> std::io::Result<Bytes> {
    let file = File::open(path)?;
    let len = file.metadata()?.len();
    if len == 0 {
        return Ok(Bytes::new());
    }
    // SAFETY: the map is read-only. infopt never writes to files it has mapped
    // (outputs go to a new file that is renamed into place); another process
    // truncating the file while we run would be a user error we cannot prevent.
    let map = unsafe { memmap2::Mmap::map(&file)? };
    Ok(Bytes::from_owner(Mapped::register(map, file)))
}

/// A live file mapping made by [`map_file`]: its address range and the file
/// it maps (kept open, so its bytes can also be copied by the kernel).
struct MappedRange {
    start: usize,
    end: usize,
    file: std::sync::Arc<File>,
}

/// The live file mappings made by [`map_file`]. A range is removed before
/// its map is unmapped, under this lock, so an address here is always a live
/// read-only file mapping.
static MAPPED: std::sync::Mutex<Vec<MappedRange>> = std::sync::Mutex::new(Vec::new());

/// A file map that keeps its range in [`MAPPED`] while it lives.
struct Mapped(memmap2::Mmap);

impl Mapped {
    fn register(map: memmap2::Mmap, file: File) -> Mapped {
        let start = map.as_ptr() as usize;
        if let Ok(mut ranges) = MAPPED.lock() {
            ranges.push(MappedRange {
                start,
                end: start + map.len(),
                file: std::sync::Arc::new(file),
            });
        }
        Mapped(map)
    }
}

impl AsRef<[u8]> for Mapped {
    fn as_ref(&self) -> &[u8] {
        &self.0
    }
}

impl Drop for Mapped {
    fn drop(&mut self) {
        let start = self.0.as_ptr() as usize;
        if let Ok(mut ranges) = MAPPED.lock() {
            ranges.retain(|r| r.start != start);
        }
    }
}

/// The mapped file that `data` lies in, and where in it `data` starts.
#[cfg(unix)]
fn mapped_source(data: &[u8]) -> Option<(std::sync::Arc<File>, u64)> {
    let (start, end) = (data.as_ptr() as usize, data.as_ptr() as usize + data.len());
    let ranges = MAPPED.lock().ok()?;
    ranges
        .iter()
        .find(|r| r.start <= start && end <= r.end)
        .map(|r| (r.file.clone(), (start - r.start) as u64))
}

/// Fills `dst` (as long as `data`) with the bytes of `data` by reading them
/// from the file, when `data` lies in a file mapping made by [`map_file`]:
/// the kernel copies them from the page cache, and the mapping's pages are
/// not faulted into this process (its resident set does not grow by the
/// model). Returns how many leading bytes of `dst` were filled (0 when
/// `data` is not mapped, or on any error); the caller copies the rest from
/// `data` itself, so a refusal here only costs memory.
#[cfg(unix)]
pub fn read_mapped_into(data: &[u8], dst: &mut [u8]) -> usize {
    use std::os::unix::fs::FileExt;
    let Some((source, offset)) = mapped_source(data) else {
        return 0;
    };
    let want = data.len().min(dst.len());
    let mut done = 0usize;
    while done < want {
        match source.read_at(&mut dst[done..want], offset + done as u64) {
            Ok(0) | Err(_) => break,
            Ok(n) => done += n,
        }
    }
    done
}

#[cfg(not(unix))]
pub fn read_mapped_into(_data: &[u8], _dst: &mut [u8]) -> usize {
    0
}

/// Tells the kernel that the pages of every file mapping are not needed
/// now. They leave this process's resident set (RSS) and come back from the
/// page cache, unchanged, when read again: reading a weight once (to fold
/// it, to hash it, to write it) no longer keeps the whole model resident
/// next to the tensors the passes create.
pub fn release_mapped_pages() {
    let Ok(ranges) = MAPPED.lock() else { return };
    for r in ranges.iter() {
        advise_dont_need(r.start, r.end);
    }
}

/// [`release_mapped_pages`] for the whole pages of `data`, when it lies in
/// a file mapping (a tensor just written out); nothing otherwise.
pub fn release_if_mapped(data: &[u8]) {
    let (start, end) = (data.as_ptr() as usize, data.as_ptr() as usize + data.len());
    let Ok(ranges) = MAPPED.lock() else { return };
    if ranges.iter().any(|r| r.start <= start && end <= r.end) {
        advise_dont_need(start, end);
    }
}

/// `madvise(MADV_DONTNEED)` over the whole pages inside `[start, end)`,
/// which the caller has checked lie in a live read-only file mapping (held
/// under the [`MAPPED`] lock): for such a mapping the advice only drops
/// pages that are re-read from the unchanged file, never data.
#[cfg(unix)]
fn advise_dont_need(start: usize, end: usize) {
    const PAGE: usize = 4096;
    let first = start.div_ceil(PAGE) * PAGE;
    let last = end / PAGE * PAGE;
    if last > first {
        // SAFETY: [first, last) is page-aligned and inside a live read-only
        // file mapping (see above); MADV_DONTNEED on it cannot change what
        // any reader of the mapping sees.
        unsafe {
            libc::madvise(
                first as *mut libc::c_void,
                last - first,
                libc::MADV_DONTNEED,
            );
        }
    }
}

#[cfg(not(unix))]
fn advise_dont_need(_start: usize, _end: usize) {}

#[cfg(test)]
mod release_tests {
    use super::*;

    #[test]
    fn released_pages_read_back_unchanged_and_heap_data_is_left_alone() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("weights.bin");
        let data: Vec<u8> = (0..3 * 4096 + 100).map(|i| (i % 251) as u8).collect();
        std::fs::write(&path, &data).unwrap();
        let mapped = map_file(&path).unwrap();
        assert_eq!(&mapped[..], &data[..]);
        release_mapped_pages();
        assert_eq!(&mapped[..], &data[..]);
        release_if_mapped(&mapped[10..3 * 4096]);
        assert_eq!(&mapped[..], &data[..]);
        // Not a file mapping: nothing happens to it (MADV_DONTNEED would
        // zero anonymous pages).
        let heap = data.clone();
        release_if_mapped(&heap);
        assert_eq!(heap, data);
        // An unmapped range is forgotten.
        let start = mapped.as_ptr() as usize;
        drop(mapped);
        assert!(!MAPPED.lock().unwrap().iter().any(|r| r.start == start));
    }
}
