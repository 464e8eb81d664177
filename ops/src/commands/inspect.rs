//! `infopt inspect`: what a model contains.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

use infopt_ir::stats::GraphStats;
use infopt_ir::{Dim, Graph, GraphIo, Model};
use serde::Serialize;

use crate::error::OpsResult;

/// `inspect`'s options.
#[derive(Debug, Clone, Default, serde::Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct InspectOptions {
    /// Model to inspect.
    pub model: PathBuf,
}

/// Version of the JSON layout below; bumped on incompatible changes.
pub const INSPECT_SCHEMA_VERSION: u32 = 1;

#[derive(Serialize, Debug)]
pub struct Io {
    pub name: String,
    pub dtype: String,
    /// Dims: a number, a symbol name, or null when unknown; null shape when the rank is unknown.
    pub shape: Option<Vec<serde_json::Value>>,
}

#[derive(Serialize, Debug)]
pub struct Opset {
    pub domain: String,
    pub version: i64,
}

#[derive(Serialize, Debug)]
pub struct Inspection {
    pub schema_version: u32,
    pub path: String,
    pub file_bytes: u64,
    pub ir_version: Option<i64>,
    pub producer_name: Option<String>,
    pub producer_version: Option<String>,
    pub opsets: Vec<Opset>,
    pub inputs: Vec<Io>,
    pub outputs: Vec<Io>,
    pub nodes: usize,
    pub ops: BTreeMap<String, usize>,
    pub subgraphs: usize,
    pub subgraph_nodes: usize,
    pub subgraph_ops: BTreeMap<String, usize>,
    pub initializers: usize,
    pub parameters: u64,
    pub parameter_bytes: u64,
    pub external_data_files: Vec<String>,
    pub external_tensors: usize,
    pub custom_domains: Vec<String>,
    pub functions: Vec<String>,
    pub metadata: BTreeMap<String, String>,
}

fn describe_io(g: &Graph, io: &GraphIo) -> Io {
    let name = g.value(io.value).name.clone();
    let ty = io
        .info
        .r#type
        .as_ref()
        .and_then(infopt_ir::TensorType::from_proto)
        .or_else(|| g.value_type(io.value));
    match ty {
        Some(t) => Io {
            name,
            dtype: t.dtype.name(),
            shape: t.shape.map(|dims| {
                dims.into_iter()
                    .map(|d| match d {
                        Dim::Known(v) => serde_json::Value::from(v),
                        Dim::Sym(s) => serde_json::Value::from(s),
                        Dim::Unknown => serde_json::Value::Null,
                    })
                    .collect()
            }),
        },
        None => Io {
            name,
            dtype: "non-tensor".into(),
            shape: None,
        },
    }
}

fn count_external(g: &Graph) -> usize {
    let here = g
        .initializers()
        .filter(|(_, t)| t.external.is_some())
        .count();
    here + g
        .nodes()
        .flat_map(|(_, n)| n.subgraphs())
        .map(count_external)
        .sum::<usize>()
}

fn collect_domains(g: &Graph, out: &mut BTreeSet<String>) {
    for (_, n) in g.nodes() {
        if !n.domain().is_empty() {
            out.insert(n.domain().to_string());
        }
        for sg in n.subgraphs() {
            collect_domains(sg, out);
        }
    }
}

pub fn inspect(model: &Model, path: &std::path::Path) -> Inspection {
    let stats = GraphStats::of_model(model);
    let g = &model.graph;
    let mut domains = BTreeSet::new();
    collect_domains(g, &mut domains);
    let src = model.source.clone().unwrap_or_default();
    let dir = path.parent().unwrap_or(std::path::Path::new(""));
    let canonical_dir = std::fs::canonicalize(dir).unwrap_or_default();
    Inspection {
        schema_version: INSPECT_SCHEMA_VERSION,
        path: path.display().to_string(),
        file_bytes: src.file_size,
        ir_version: model.meta.ir_version,
        producer_name: model.meta.producer_name.clone(),
        producer_version: model.meta.producer_version.clone(),
        opsets: model
            .meta
            .opset_import
            .iter()
            .map(|o| Opset {
                domain: o.domain.clone().unwrap_or_default(),
                version: o.version.unwrap_or(0),
            })
            .collect(),
        inputs: g
            .inputs
            .iter()
            .filter(|io| g.value(io.value).initializer.is_none())
            .map(|io| describe_io(g, io))
            .collect(),
        outputs: g.outputs.iter().map(|io| describe_io(g, io)).collect(),
        nodes: stats.nodes,
        ops: stats.ops,
        subgraphs: stats.subgraphs,
        subgraph_nodes: stats.subgraph_nodes,
        subgraph_ops: stats.subgraph_ops,
        initializers: stats.initializers,
        parameters: stats.parameters,
        parameter_bytes: stats.parameter_bytes,
        external_data_files: src
            .external_files
            .iter()
            .map(|f| {
                f.strip_prefix(&canonical_dir)
                    .unwrap_or(f)
                    .display()
                    .to_string()
            })
            .collect(),
        external_tensors: count_external(g),
        custom_domains: domains.into_iter().collect(),
        functions: model
            .meta
            .functions
            .iter()
            .map(|f| {
                let d = f.domain.clone().unwrap_or_default();
                infopt_ir::stats::op_key(&d, f.name.as_deref().unwrap_or(""))
            })
            .collect(),
        metadata: model
            .meta
            .metadata_props
            .iter()
            .map(|e| {
                (
                    e.key.clone().unwrap_or_default(),
                    e.value.clone().unwrap_or_default(),
                )
            })
            .collect(),
    }
}

fn shape_text(io: &Io) -> String {
    match &io.shape {
        None => "[?]".into(),
        Some(d) => {
            let parts: Vec<String> = d
                .iter()
                .map(|v| match v {
                    serde_json::Value::String(s) => s.clone(),
                    serde_json::Value::Null => "?".into(),
                    other => other.to_string(),
                })
                .collect();
            format!("[{}]", parts.join(", "))
        }
    }
}

pub fn render_text(i: &Inspection) -> String {
    use std::fmt::Write;
    let mut s = String::new();
    let _ = writeln!(s, "model       {} ({} bytes)", i.path, i.file_bytes);
    let producer = match (&i.producer_name, &i.producer_version) {
        (Some(n), Some(v)) => format!("{n} {v}"),
        (Some(n), None) => n.clone(),
        _ => "-".into(),
    };
    let _ = writeln!(s, "producer    {producer}");
    let ir = i.ir_version.map(|v| v.to_string()).unwrap_or("-".into());
    let _ = writeln!(s, "ir_version  {ir}");
    let opsets: Vec<String> = i
        .opsets
        .iter()
        .map(|o| {
            format!(
                "{}:{}",
                if o.domain.is_empty() {
                    "ai.onnx"
                } else {
                    &o.domain
                },
                o.version
            )
        })
        .collect();
    let _ = writeln!(s, "opsets      {}", opsets.join(", "));
    for (label, list) in [("inputs", &i.inputs), ("outputs", &i.outputs)] {
        let _ = writeln!(s, "{label}:");
        for io in list {
            let _ = writeln!(s, "  {:<24} {:<9} {}", io.name, io.dtype, shape_text(io));
        }
    }
    let _ = writeln!(s, "nodes       {} ({} op types)", i.nodes, i.ops.len());
    for (op, n) in &i.ops {
        let _ = writeln!(s, "  {op:<32} {n:>6}");
    }
    if i.subgraphs > 0 {
        let _ = writeln!(
            s,
            "subgraphs   {} with {} nodes",
            i.subgraphs, i.subgraph_nodes
        );
        for (op, n) in &i.subgraph_ops {
            let _ = writeln!(s, "  {op:<32} {n:>6}");
        }
    }
    let _ = writeln!(
        s,
        "parameters  {} in {} initializers ({} bytes)",
        i.parameters, i.initializers, i.parameter_bytes
    );
    if !i.external_data_files.is_empty() {
        let _ = writeln!(
            s,
            "external    {} tensors in {}",
            i.external_tensors,
            i.external_data_files.join(", ")
        );
    }
    if !i.custom_domains.is_empty() {
        let _ = writeln!(s, "custom      {}", i.custom_domains.join(", "));
    }
    if !i.functions.is_empty() {
        let _ = writeln!(s, "functions   {}", i.functions.join(", "));
    }
    for (k, v) in &i.metadata {
        let _ = writeln!(s, "metadata    {k} = {v}");
    }
    s
}

/// What `infopt inspect` reports, without printing.
pub fn execute(args: &InspectOptions) -> OpsResult<Inspection> {
    let model = crate::models::load_model(&args.model)?;
    Ok(inspect(&model, &args.model))
}

impl crate::outcome::CommandReport for Inspection {
    fn command(&self) -> &'static str {
        "inspect"
    }
    fn text(&self) -> String {
        render_text(self)
    }
    fn markdown(&self) -> String {
        crate::outcome::fenced(&format!("infopt inspect: {}", self.path), &self.text())
    }
    fn summary(&self) -> crate::ci::CiSummary<'_> {
        crate::ci::CiSummary {
            title: "infopt inspect".into(),
            subject: format!("`{}`", self.path),
            details: Some(self.markdown()),
            ..Default::default()
        }
    }
}
