//! IR → ONNX protobuf, and writing models to disk.
//!
//! Writing is streamed: the model is encoded through a small buffer straight
//! into the output file, so saving a 2 GB model does not need 2 GB of memory
//! on top of the (memory-mapped) input. Output goes to a temporary file in the
//! destination folder that is renamed into place, so a reader never sees a
//! half-written model and the input is never opened for writing.

use std::collections::HashSet;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use bytes::{BufMut, Bytes, buf::UninitSlice};
use prost::Message;

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
    /// File name (in the output folder) of the external data; default `<output file name>.data`.
    pub data_file_name: Option<String>,
    /// Largest model file to write inline; above it weights go external
    /// (protobuf's limit; lowered in tests to exercise the switch).
    pub size_limit: u64,
}

impl Default for SaveOptions {
    fn default() -> Self {
        SaveOptions {
            external: ExternalDataPolicy::Auto,
            data_file_name: None,
            size_limit: PROTOBUF_LIMIT,
        }
    }
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
        self.refuse_overwriting_inputs(path)?;
        self.graph.assign_unique_names();
        let file_name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .ok_or_else(|| {
                IrError::Invalid(format!("output path {} has no file name", path.display()))
            })?;
        let location = options
            .data_file_name
            .clone()
            .unwrap_or_else(|| format!("{file_name}.data"));
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
        if !plan.chunks.is_empty() {
            let data_path = dir.join(&location);
            self.refuse_overwriting_inputs(&data_path)?;
            write_atomically(&data_path, |w| {
                let mut pos = 0u64;
                for (offset, data) in &plan.chunks {
                    let pad = (offset - pos) as usize;
                    w.write_all(&[0u8; EXTERNAL_ALIGN as usize][..pad])?;
                    w.write_all(data)?;
                    pos = offset + data.len() as u64;
                }
                Ok(())
            })?;
            summary.external_file = Some(data_path);
            summary.external_bytes = plan.end;
            summary.external_tensors = plan.chunks.len();
        }
        write_atomically(path, |w| encode_streaming(&proto, w))?;
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

/// Writes through a temporary file in the same folder, renamed on success.
pub fn write_atomically(
    path: &Path,
    write: impl FnOnce(&mut BufWriter<File>) -> std::io::Result<()>,
) -> Result<()> {
    let dir = path
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let tmp = dir.join(format!(".{name}.infopt-tmp-{}", std::process::id()));
    let werr = |source| IrError::Write {
        path: path.to_path_buf(),
        source,
    };
    let result = (|| {
        let file = File::create(&tmp)?;
        let mut w = BufWriter::with_capacity(1 << 20, file);
        write(&mut w)?;
        w.flush()?;
        Ok(())
    })();
    if let Err(e) = result {
        let _ = std::fs::remove_file(&tmp);
        return Err(werr(e));
    }
    std::fs::rename(&tmp, path).map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        werr(e)
    })
}

/// A `BufMut` over a writer, so prost can encode straight into a file.
struct StreamBuf<'a, W: Write> {
    out: &'a mut W,
    buf: Vec<u8>,
    error: Option<std::io::Error>,
}

const STREAM_CHUNK: usize = 1 << 20;

impl<W: Write> StreamBuf<'_, W> {
    fn flush(&mut self) {
        if self.error.is_none()
            && !self.buf.is_empty()
            && let Err(e) = self.out.write_all(&self.buf)
        {
            self.error = Some(e);
        }
        self.buf.clear();
    }
}

// SAFETY: `chunk_mut` hands out the spare capacity of `buf`, and `advance_mut`
// only extends `buf`'s length over bytes the caller has initialized, as the
// `BufMut` contract requires.
unsafe impl<W: Write> BufMut for StreamBuf<'_, W> {
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

    fn put_slice(&mut self, src: &[u8]) {
        if src.len() >= STREAM_CHUNK {
            self.flush();
            if self.error.is_none()
                && let Err(e) = self.out.write_all(src)
            {
                self.error = Some(e);
            }
        } else {
            if self.buf.len() + src.len() > self.buf.capacity() {
                self.flush();
            }
            self.buf.extend_from_slice(src);
        }
    }
}

/// Encodes `proto` into `out` without materializing the whole message.
pub fn encode_streaming<W: Write>(proto: &ModelProto, out: &mut W) -> std::io::Result<()> {
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
        proto.initializer.push(t);
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
            let mut name = self.value(v).name.clone();
            if name.is_empty() {
                name = match self.value(v).producer {
                    Some((n, slot)) => format!("{}_output_{slot}", self.node(n).name_or_op()),
                    None => "value".to_string(),
                };
            }
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
