//! IR → ONNX protobuf, and writing models to disk.
//!
//! Writing is streamed: the model is encoded through a small buffer straight
//! into the output file, so saving a 2 GB model does not need 2 GB of memory
//! on top of the (memory-mapped) input. Output goes to temporary files in the
//! destination folder that are renamed into place (see [`crate::atomic`]), so
//! a reader never sees a half-written model and the input is never opened for
//! writing.
//!
//! A model and its external data are two files, and two renames cannot be one
//! atomic step. So the model's rename is the single commit point: the new data
//! goes to a file name the current output does *not* reference (`OUT.data`, or
//! `OUT.1.data` when the current `OUT` uses `OUT.data`; the two alternate), it
//! is in place and durable before the new model is renamed over `OUT`, and the
//! old data file is removed only after that. At every moment `OUT` is the old
//! model with its old data or the new model with its new data.

use std::collections::HashSet;
use std::io::Write;
use std::path::{Path, PathBuf};

use bytes::{BufMut, Bytes, buf::UninitSlice};
use prost::Message;

pub use crate::atomic::{FailPoint, SaveStep, write_atomically};
use crate::atomic::{Injector, folder_of, random_token, stage, sync_dir};
use crate::error::{IrError, Result};
use crate::graph::Graph;
use crate::model::Model;
use crate::proto::{
    AttributeProto, GraphProto, ModelProto, NodeProto, StringStringEntryProto, TensorProto,
    ValueInfoProto, data_location,
};
use crate::tensor::Tensor;

/// protobuf cannot encode a message of 2 GiB or more; keep a margin.
pub const PROTOBUF_LIMIT: u64 = (2u64 << 30) - (16 << 20);

/// Which tensors to store in an external-data file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ExternalDataPolicy {
    /// Tensors that were external when loaded stay external, and when the
    /// model had external data every other initializer of at least 1 KiB goes
    /// external too; a model without external data stays inline unless it
    /// would pass protobuf's 2 GiB limit, in which case every tensor of at
    /// least 1 KiB goes external.
    Auto,
    /// Every initializer of at least this many bytes goes external.
    Threshold(u64),
    /// Everything inline; an error if the model is too large for that.
    Inline,
}

#[derive(Clone, Debug)]
pub struct SaveOptions {
    pub external: ExternalDataPolicy,
    /// File name (in the output folder) of the external data; default
    /// `<output file name>.data`. When the current output reads that file,
    /// its `.1` variant is written instead (see the module doc).
    pub data_file_name: Option<String>,
    /// Largest model file to write inline; above it weights go external
    /// (protobuf's limit; lowered in tests to exercise the switch).
    pub size_limit: u64,
    /// Tests only: fail (or crash) at one step of writing.
    #[doc(hidden)]
    pub fail_at: Option<FailPoint>,
}

impl Default for SaveOptions {
    fn default() -> Self {
        SaveOptions {
            external: ExternalDataPolicy::Auto,
            data_file_name: None,
            size_limit: PROTOBUF_LIMIT,
            fail_at: None,
        }
    }
}

/// Fails when `path`'s folder does not exist, so commands can say so before
/// their (possibly long) work instead of after it.
pub fn check_output_folder(path: &Path) -> Result<()> {
    let folder = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => return Ok(()),
    };
    if folder.is_dir() {
        return Ok(());
    }
    Err(IrError::NoOutputFolder {
        path: path.to_path_buf(),
        folder: folder.to_path_buf(),
    })
}

/// What a save wrote.
#[derive(Clone, Debug, Default)]
pub struct SaveSummary {
    pub model_bytes: u64,
    pub external_file: Option<PathBuf>,
    pub external_bytes: u64,
    pub external_tensors: usize,
}

/// Decides per tensor where it goes and collects the external payload.
struct ExternalPlan {
    threshold: Option<u64>,
    keep_loaded_external: bool,
    /// Point tensors loaded from external data back at their source files
    /// instead of copying them (in-memory encodings for runtimes).
    reference_sources: bool,
    location: String,
    chunks: Vec<(u64, Bytes)>,
    end: u64,
}

/// External tensors are aligned so runtimes can map them directly.
const EXTERNAL_ALIGN: u64 = 64;

impl ExternalPlan {
    fn none() -> ExternalPlan {
        ExternalPlan {
            threshold: None,
            keep_loaded_external: false,
            reference_sources: false,
            location: String::new(),
            chunks: Vec::new(),
            end: 0,
        }
    }

    fn place(&mut self, tensor: &Tensor, proto: &mut TensorProto) -> Result<()> {
        if self.reference_sources {
            if let Some(origin) = &tensor.external {
                // Only when the bytes are still the ones read from that file.
                if proto
                    .raw_data
                    .as_ref()
                    .is_some_and(|d| d.len() as u64 == origin.length)
                {
                    proto.raw_data = None;
                    proto.external_data = origin.entries.clone();
                    proto.data_location = Some(data_location::EXTERNAL);
                }
            }
            return Ok(());
        }
        let size = tensor.payload_bytes() as u64;
        let wanted = self.threshold.is_some_and(|t| size >= t)
            || (self.keep_loaded_external && tensor.external.is_some());
        if !wanted || tensor.dtype() == crate::dtype::DataType::String {
            return Ok(());
        }
        let data: Bytes = match tensor.raw_bytes()? {
            std::borrow::Cow::Borrowed(_) => proto.raw_data.clone().unwrap_or_default(),
            std::borrow::Cow::Owned(v) => Bytes::from(v),
        };
        let offset = self.end.div_ceil(EXTERNAL_ALIGN) * EXTERNAL_ALIGN;
        let length = data.len() as u64;
        self.end = offset + length;
        self.chunks.push((offset, data));
        proto.raw_data = None;
        proto.float_data.clear();
        proto.int32_data.clear();
        proto.int64_data.clear();
        proto.double_data.clear();
        proto.uint64_data.clear();
        let entry = |k: &str, v: String| StringStringEntryProto {
            key: Some(k.into()),
            value: Some(v),
        };
        proto.external_data = vec![
            entry("location", self.location.clone()),
            entry("offset", offset.to_string()),
            entry("length", length.to_string()),
        ];
        proto.data_location = Some(data_location::EXTERNAL);
        Ok(())
    }
}

impl Model {
    /// The whole model as a protobuf message with every tensor inline.
    pub fn to_proto(&self) -> Result<ModelProto> {
        // Names are made unique exactly as `save` does, so what a runtime
        // checks is the model that gets written.
        let mut named = self.clone();
        named.graph.assign_unique_names();
        named.to_proto_with(&mut ExternalPlan::none())
    }

    /// Encodes the model with every tensor inline (for runtimes and tests).
    pub fn to_bytes(&self) -> Result<Vec<u8>> {
        let proto = self.to_proto()?;
        let len = proto.encoded_len() as u64;
        if len > PROTOBUF_LIMIT {
            return Err(IrError::TooLarge { size: len });
        }
        Ok(proto.encode_to_vec())
    }

    /// Encodes the model in memory for a runtime: tensors that were loaded from
    /// external data and are unchanged keep pointing at their files (resolve
    /// them against the source model's folder), so a model over 2 GiB can be
    /// handed to a runtime without copying its weights into the message.
    pub fn to_bytes_referencing_sources(&self) -> Result<Vec<u8>> {
        let mut plan = ExternalPlan {
            reference_sources: true,
            ..ExternalPlan::none()
        };
        let mut named = self.clone();
        named.graph.assign_unique_names();
        let proto = named.to_proto_with(&mut plan)?;
        let len = proto.encoded_len() as u64;
        if len > PROTOBUF_LIMIT {
            return Err(IrError::TooLarge { size: len });
        }
        Ok(proto.encode_to_vec())
    }

    fn to_proto_with(&self, plan: &mut ExternalPlan) -> Result<ModelProto> {
        let mut proto = self.meta.clone();
        proto.graph = Some(graph_to_proto(&self.graph, plan)?);
        Ok(proto)
    }

    /// Writes the model to `path` (atomically), with external data as `options` say.
    /// Refuses to write over the model's own input files.
    pub fn save(&mut self, path: &Path, options: &SaveOptions) -> Result<SaveSummary> {
        check_output_folder(path)?;
        self.refuse_overwriting_inputs(path)?;
        self.graph.assign_unique_names();
        let file_name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .ok_or_else(|| {
                IrError::Invalid(format!("output path {} has no file name", path.display()))
            })?;
        let wanted = options
            .data_file_name
            .clone()
            .unwrap_or_else(|| format!("{file_name}.data"));
        let (location, old_data) = data_location(path, &wanted);
        let dir = path.parent().unwrap_or(Path::new("")).to_path_buf();

        let mut plan = ExternalPlan {
            location: location.clone(),
            ..ExternalPlan::none()
        };
        match options.external {
            ExternalDataPolicy::Inline => {}
            ExternalDataPolicy::Threshold(t) => plan.threshold = Some(t),
            ExternalDataPolicy::Auto => {
                plan.keep_loaded_external = true;
                // A model that kept its weights outside keeps doing so, also
                // for weights a pass created (fused or folded from external ones).
                if self
                    .source
                    .as_ref()
                    .is_some_and(|src| !src.external_files.is_empty())
                {
                    plan.threshold = Some(1024);
                }
            }
        }
        let mut proto = self.to_proto_with(&mut plan)?;
        let mut size = proto.encoded_len() as u64;
        if size > options.size_limit {
            match options.external {
                ExternalDataPolicy::Inline => return Err(IrError::TooLarge { size }),
                _ => {
                    plan = ExternalPlan {
                        threshold: Some(1024),
                        keep_loaded_external: true,
                        ..plan
                    };
                    plan.chunks.clear();
                    plan.end = 0;
                    proto = self.to_proto_with(&mut plan)?;
                    size = proto.encoded_len() as u64;
                    if size > options.size_limit {
                        return Err(IrError::TooLarge { size });
                    }
                }
            }
        }

        let mut summary = SaveSummary {
            model_bytes: size,
            ..Default::default()
        };
        let inject = Injector::new(options.fail_at);
        let werr = |path: &Path, source| IrError::Write {
            path: path.to_path_buf(),
            source,
        };
        let out_dir = folder_of(path);
        let mut data: Option<(PathBuf, PathBuf)> = None; // (temporary, final)
        if !plan.chunks.is_empty() {
            let data_path = dir.join(&location);
            self.refuse_overwriting_inputs(&data_path)?;
            let tmp = stage(
                out_dir,
                &location,
                &inject,
                (SaveStep::WriteData, SaveStep::SyncData),
                |w| {
                    let mut pos = 0u64;
                    for (offset, data) in &plan.chunks {
                        let pad = (offset - pos) as usize;
                        w.write_all(&[0u8; EXTERNAL_ALIGN as usize][..pad])?;
                        w.write_mapped(data)?;
                        pos = offset + data.len() as u64;
                    }
                    Ok(())
                },
            )
            .map_err(|e| werr(&data_path, e))?;
            summary.external_file = Some(data_path.clone());
            summary.external_bytes = plan.end;
            summary.external_tensors = plan.chunks.len();
            data = Some((tmp, data_path));
        }
        let file_name = file_name.as_str();
        let model_tmp = match stage(
            out_dir,
            file_name,
            &inject,
            (SaveStep::WriteModel, SaveStep::SyncModel),
            |w| encode_streaming(&proto, w),
        ) {
            Ok(t) => t,
            Err(e) => {
                if let Some((tmp, _)) = &data {
                    inject.remove(tmp);
                }
                return Err(werr(path, e));
            }
        };
        // The new data goes in place first, under a name the current OUT does
        // not read; then the model's rename commits the pair.
        if let Some((tmp, data_path)) = &data {
            let placed = inject
                .at(SaveStep::RenameData)
                .and_then(|()| std::fs::rename(tmp, data_path))
                .map_err(|e| werr(data_path, e))
                .and_then(|()| {
                    inject
                        .at(SaveStep::SyncDirAfterData)
                        .and_then(|()| sync_dir(out_dir))
                        .map_err(|e| werr(data_path, e))
                });
            if let Err(e) = placed {
                inject.remove(tmp);
                inject.remove(data_path);
                inject.remove(&model_tmp);
                return Err(e);
            }
        }
        if let Err(e) = inject
            .at(SaveStep::RenameModel)
            .and_then(|()| std::fs::rename(&model_tmp, path))
        {
            inject.remove(&model_tmp);
            if let Some((_, data_path)) = &data {
                inject.remove(data_path);
            }
            return Err(werr(path, e));
        }
        // Committed: from here on OUT is the new model with its data.
        inject
            .at(SaveStep::SyncDirAfterModel)
            .and_then(|()| sync_dir(out_dir))
            .map_err(|e| werr(path, e))?;
        for old in old_data {
            if data.is_some() && old == location {
                continue;
            }
            let old = dir.join(old);
            // Never a file the model being saved was read from.
            if self.refuse_overwriting_inputs(&old).is_err() {
                continue;
            }
            inject
                .at(SaveStep::RemoveOldData)
                .and_then(|()| std::fs::remove_file(&old))
                .map_err(|e| werr(&old, e))?;
        }
        Ok(summary)
    }

    fn refuse_overwriting_inputs(&self, path: &Path) -> Result<()> {
        let Some(src) = &self.source else {
            return Ok(());
        };
        let Ok(target) = std::fs::canonicalize(path) else {
            return Ok(());
        };
        let inputs = src
            .path
            .iter()
            .cloned()
            .chain(src.external_files.iter().cloned());
        for input in inputs {
            if std::fs::canonicalize(&input).ok().as_deref() == Some(target.as_path()) {
                return Err(IrError::WouldOverwriteInput {
                    path: path.to_path_buf(),
                });
            }
        }
        Ok(())
    }
}

/// External-data locations a model file references (every tensor in every
/// graph, attribute and function). `None` when the file exists but cannot be
/// read as a model: then nothing can be assumed about what it references.
fn referenced_locations(path: &Path) -> Option<HashSet<PathBuf>> {
    let mut out = HashSet::new();
    if !path.exists() {
        return Some(out);
    }
    let bytes = crate::external::map_file(path).ok()?;
    let proto = ModelProto::decode(bytes).ok()?;
    crate::external::for_each_external(&proto, &mut |_, location| {
        out.insert(normalize(location));
    });
    Some(out)
}

/// `./w.bin` and `w.bin` name the same file.
fn normalize(location: &str) -> PathBuf {
    Path::new(location)
        .components()
        .filter(|c| !matches!(c, std::path::Component::CurDir))
        .collect()
}

/// The data file name for this save, and the data files of the current
/// output to remove once the new model is in place. `wanted` (`OUT.data` or
/// `--data-file`) is used unless the current `OUT` references it; then its
/// alternate (`OUT.1.data`); if the current `OUT` references both, or exists
/// but cannot be read, a fresh unique name. Only `wanted` and its alternate
/// are ever removed, and only when the current `OUT` references them.
fn data_location(out: &Path, wanted: &str) -> (String, Vec<String>) {
    let alternate = match wanted.strip_suffix(".data") {
        Some(stem) => format!("{stem}.1.data"),
        None => format!("{wanted}.1"),
    };
    let Some(refs) = referenced_locations(out) else {
        return (format!("{wanted}.{}", random_token()), Vec::new());
    };
    let uses = |name: &str| refs.contains(&normalize(name));
    let location = match (uses(wanted), uses(&alternate)) {
        (false, _) => wanted.to_string(),
        (true, false) => alternate.clone(),
        (true, true) => format!("{wanted}.{}", random_token()),
    };
    let old = [wanted.to_string(), alternate]
        .into_iter()
        .filter(|n| uses(n))
        .collect();
    (location, old)
}

/// Where a model is encoded to: a writer that may take bytes lying in a
/// mapped input file by a copy inside the kernel (an output file), or by a
/// plain write (the default).
pub trait ModelWriter: Write {
    fn write_mapped(&mut self, data: &[u8]) -> std::io::Result<()> {
        self.write_all(data)
    }
}

impl ModelWriter for Vec<u8> {}

impl ModelWriter for crate::writeback::OutputFile {
    fn write_mapped(&mut self, data: &[u8]) -> std::io::Result<()> {
        crate::writeback::OutputFile::write_mapped(self, data)
    }
}

/// A `BufMut` over a writer, so prost can encode straight into a file.
struct StreamBuf<'a, W: ModelWriter> {
    out: &'a mut W,
    buf: Vec<u8>,
    error: Option<std::io::Error>,
}

const STREAM_CHUNK: usize = 1 << 20;

impl<W: ModelWriter> StreamBuf<'_, W> {
    fn flush(&mut self) {
        if self.error.is_none()
            && !self.buf.is_empty()
            && let Err(e) = self.out.write_all(&self.buf)
        {
            self.error = Some(e);
        }
        self.buf.clear();
        // Weights below STREAM_CHUNK are copied through the buffer from the
        // mapped input: their pages (and those the kernel faulted in around
        // them) need not stay resident once written. bert_deep (1613 small
        // weights, 53 MB) held the whole input resident to the end of the
        // save. madvise skips unpopulated page tables, so this costs little.
        crate::external::release_mapped_pages();
    }
}

// SAFETY: `chunk_mut` hands out the spare capacity of `buf`, and `advance_mut`
// only extends `buf`'s length over bytes the caller has initialized, as the
// `BufMut` contract requires.
unsafe impl<W: ModelWriter> BufMut for StreamBuf<'_, W> {
    fn remaining_mut(&self) -> usize {
        usize::MAX / 2
    }

    unsafe fn advance_mut(&mut self, cnt: usize) {
        let len = self.buf.len() + cnt;
        assert!(len <= self.buf.capacity(), "advance_mut past the chunk");
        // SAFETY: the caller initialized `cnt` bytes of the spare capacity.
        unsafe { self.buf.set_len(len) };
        if self.buf.len() == self.buf.capacity() {
            self.flush();
        }
    }

    fn chunk_mut(&mut self) -> &mut UninitSlice {
        if self.buf.len() == self.buf.capacity() {
            self.flush();
        }
        UninitSlice::uninit(self.buf.spare_capacity_mut())
    }

    // prost writes a `bytes` field (every tensor's `raw_data`) with `put`,
    // whose default copies the source through `chunk_mut` into the buffer:
    // handing its chunks to `put_slice` instead lets a large weight go to
    // the file straight from where it lies.
    fn put<T: bytes::Buf>(&mut self, mut src: T)
    where
        Self: Sized,
    {
        while src.has_remaining() {
            let chunk = src.chunk();
            let n = chunk.len();
            self.put_slice(chunk);
            src.advance(n);
        }
    }

    fn put_slice(&mut self, src: &[u8]) {
        if src.len() >= STREAM_CHUNK {
            self.flush();
            if self.error.is_none()
                && let Err(e) = self.out.write_mapped(src)
            {
                self.error = Some(e);
            }
            // A mapped weight is written: its pages need not stay resident.
            crate::external::release_if_mapped(src);
        } else {
            if self.buf.len() + src.len() > self.buf.capacity() {
                self.flush();
            }
            self.buf.extend_from_slice(src);
        }
    }
}

/// Encodes `proto` into `out` without materializing the whole message.
pub fn encode_streaming<W: ModelWriter>(proto: &ModelProto, out: &mut W) -> std::io::Result<()> {
    let mut sb = StreamBuf {
        out,
        buf: Vec::with_capacity(STREAM_CHUNK),
        error: None,
    };
    proto
        .encode(&mut sb)
        .map_err(|e| std::io::Error::other(format!("protobuf encoding failed: {e}")))?;
    sb.flush();
    match sb.error {
        Some(e) => Err(e),
        None => Ok(()),
    }
}

fn value_info(info: &ValueInfoProto, name: &str) -> ValueInfoProto {
    ValueInfoProto {
        name: Some(name.to_string()),
        ..info.clone()
    }
}

fn graph_to_proto(g: &Graph, plan: &mut ExternalPlan) -> Result<GraphProto> {
    let mut proto = g.meta.clone();
    let name_of = |v: crate::graph::ValueId| g.value(v).name.clone();
    for id in g.topological_order()? {
        let node = g.node(id);
        let mut np: NodeProto = node.extra.clone();
        np.input = node
            .inputs
            .iter()
            .map(|v| v.map(name_of).unwrap_or_default())
            .collect();
        np.output = node
            .outputs
            .iter()
            .map(|v| v.map(name_of).unwrap_or_default())
            .collect();
        np.name = node.name.clone();
        np.op_type = Some(node.op_type.clone());
        np.domain = node.domain.clone();
        np.attribute = node
            .attributes
            .iter()
            .map(|a| attribute_to_proto(a, plan))
            .collect::<Result<Vec<AttributeProto>>>()?;
        proto.node.push(np);
    }
    for (v, tensor) in g.initializers() {
        let mut t = tensor.proto.clone();
        t.name = Some(name_of(v));
        plan.place(tensor, &mut t)?;
        proto.initializer.push(*t);
    }
    for (v, sparse) in g.sparse_initializers() {
        let mut s = sparse.clone();
        if let Some(values) = s.values.as_mut() {
            values.name = Some(name_of(v));
        }
        proto.sparse_initializer.push(s);
    }
    proto.input = g
        .inputs
        .iter()
        .map(|io| value_info(&io.info, &name_of(io.value)))
        .collect();
    proto.output = g
        .outputs
        .iter()
        .map(|io| value_info(&io.info, &name_of(io.value)))
        .collect();
    proto.value_info = g
        .value_info_ids()
        .iter()
        .filter_map(|&v| {
            g.try_value(v)
                .and_then(|val| val.info.as_ref().map(|i| value_info(i, &val.name)))
        })
        .collect();
    Ok(proto)
}

fn attribute_to_proto(
    a: &crate::attr::Attribute,
    plan: &mut ExternalPlan,
) -> Result<AttributeProto> {
    let mut p = a.proto.clone();
    if a.single_graph {
        if let Some(g) = a.subgraphs.first() {
            p.g = Some(graph_to_proto(g, plan)?);
        }
    } else {
        p.graphs = a
            .subgraphs
            .iter()
            .map(|g| graph_to_proto(g, plan))
            .collect::<Result<_>>()?;
    }
    Ok(p)
}

impl Graph {
    /// Gives every value a unique, non-empty name before saving. Graph inputs
    /// and outputs and values read by subgraphs keep their names; other values
    /// that collide get a deterministic suffix.
    pub fn assign_unique_names(&mut self) {
        let mut taken: HashSet<String> = HashSet::new();
        self.assign_unique_names_in(&mut taken, true);
    }

    fn assign_unique_names_in(&mut self, taken: &mut HashSet<String>, top: bool) {
        let mut fixed: Vec<crate::graph::ValueId> = Vec::new();
        // The main graph's inputs and outputs are the model's interface; a
        // subgraph's are matched by position and may be renamed.
        if top {
            fixed.extend(self.inputs.iter().map(|io| io.value));
            fixed.extend(self.outputs.iter().map(|io| io.value));
        }
        for v in self.value_ids().collect::<Vec<_>>() {
            let value = self.value(v);
            if value.outer
                || value
                    .uses
                    .iter()
                    .any(|u| u.slot == crate::graph::Slot::Capture)
            {
                fixed.push(v);
            }
        }
        let fixed_set: HashSet<_> = fixed.iter().copied().collect();
        let mut local: HashSet<String> = HashSet::new();
        for &v in &fixed {
            let name = self.value(v).name.clone();
            local.insert(name.clone());
            taken.insert(name);
        }
        let order = self.topological_order().unwrap_or_else(|_| self.node_ids());
        let mut rest: Vec<crate::graph::ValueId> = if top {
            Vec::new()
        } else {
            self.inputs.iter().map(|io| io.value).collect()
        };
        rest.extend(self.initializer_order.iter().copied());
        rest.extend(self.sparse_order.iter().copied());
        for &n in &order {
            rest.extend(self.node(n).outputs.iter().flatten().copied());
        }
        let mut seen: HashSet<crate::graph::ValueId> = HashSet::new();
        for v in rest {
            if fixed_set.contains(&v) || !seen.insert(v) {
                continue;
            }
            let mut name = self.name_for_saving(v);
            if taken.contains(&name) {
                let base = name.clone();
                let mut k = 1;
                while taken.contains(&format!("{base}_{k}")) {
                    k += 1;
                }
                name = format!("{base}_{k}");
            }
            taken.insert(name.clone());
            let before = std::mem::replace(&mut self.value_mut(v).name, name.clone());
            if before != name {
                self.rename_annotations(&before, &name);
            }
        }
        self.assign_unique_node_names(&order);
        for &n in &order {
            for ai in 0..self.node(n).attributes.len() {
                let mut subs = std::mem::take(&mut self.node_mut(n).attributes[ai].subgraphs);
                // Each subgraph must not reuse a name of its ancestors; sibling
                // subgraphs (the two branches of an If) are separate scopes.
                for sg in &mut subs {
                    let mut scoped = taken.clone();
                    sg.assign_unique_names_in(&mut scoped, false);
                }
                self.node_mut(n).attributes[ai].subgraphs = subs;
            }
        }
    }
}

impl Graph {
    /// `v`'s name, or for an unnamed value the name saving gives it (before
    /// making names unique): `<producer>_output_<slot>`. Rewrites that name
    /// things after a value use it to agree with the saved model.
    pub fn name_for_saving(&self, v: crate::graph::ValueId) -> String {
        let value = self.value(v);
        if !value.name.is_empty() {
            return value.name.clone();
        }
        match value.producer {
            Some((n, slot)) => format!("{}_output_{slot}", self.node(n).name_or_op()),
            None => "value".to_string(),
        }
    }

    /// Suffixes node names that repeat one already used in this graph (in
    /// `order`): ONNX Runtime refuses a graph with two nodes of one name, and
    /// a rewrite that derives a node's name from an unnamed value (or two
    /// passes choosing the same name) must not make the model unloadable.
    /// The first node keeps its name; empty names stay empty.
    fn assign_unique_node_names(&mut self, order: &[crate::graph::NodeId]) {
        let mut taken: HashSet<String> = HashSet::new();
        let mut repeated: Vec<crate::graph::NodeId> = Vec::new();
        for &n in order {
            if let Some(name) = self.node(n).name.as_deref()
                && !name.is_empty()
                && !taken.insert(name.to_string())
            {
                repeated.push(n);
            }
        }
        for n in repeated {
            let base = self.node(n).name.clone().unwrap_or_default();
            let mut k = 1;
            while taken.contains(&format!("{base}_{k}")) {
                k += 1;
            }
            let name = format!("{base}_{k}");
            taken.insert(name.clone());
            self.node_mut(n).name = Some(name);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Records the slices handed over whole, and keeps every byte.
    #[derive(Default)]
    struct Recorder {
        bytes: Vec<u8>,
        whole: Vec<usize>,
    }

    impl Write for Recorder {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.bytes.extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    impl ModelWriter for Recorder {
        fn write_mapped(&mut self, data: &[u8]) -> std::io::Result<()> {
            self.whole.push(data.len());
            self.write_all(data)
        }
    }

    #[test]
    fn large_raw_data_reaches_the_writer_whole_and_the_bytes_match_prost() {
        let big: Vec<u8> = (0..STREAM_CHUNK + 4099).map(|i| (i % 239) as u8).collect();
        let small = vec![7u8; 100];
        let tensor = |name: &str, data: &[u8]| TensorProto {
            name: Some(name.into()),
            dims: vec![data.len() as i64],
            data_type: Some(crate::DataType::Uint8.code()),
            raw_data: Some(Bytes::copy_from_slice(data)),
            ..Default::default()
        };
        let proto = ModelProto {
            ir_version: Some(8),
            graph: Some(GraphProto {
                initializer: vec![tensor("big", &big), tensor("small", &small)],
                ..Default::default()
            }),
            ..Default::default()
        };
        let mut out = Recorder::default();
        encode_streaming(&proto, &mut out).unwrap();
        assert_eq!(out.bytes, proto.encode_to_vec());
        assert_eq!(out.whole, vec![big.len()]);
    }
}
