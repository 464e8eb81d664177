//! A whole ONNX model: the main graph plus the model-level fields.

use std::path::PathBuf;

use crate::error::{IrError, Result};
use crate::graph::Graph;
use crate::proto::ModelProto;

/// The newest default-domain opset released ONNX defines (onnx 1.23, which
/// ONNX Runtime 1.32 supports too).
pub const NEWEST_ONNX_OPSET: i64 = 28;
/// The newest `ai.onnx.ml` opset of the same release.
pub const NEWEST_ONNX_ML_OPSET: i64 = 5;

/// Where a model was loaded from.
#[derive(Clone, Debug, Default)]
pub struct SourceInfo {
    pub path: Option<PathBuf>,
    pub file_size: u64,
    /// External-data files the model's tensors were read from.
    pub external_files: Vec<PathBuf>,
}

#[derive(Clone, Debug)]
pub struct Model {
    /// Every model-level field (ir_version, opsets, producer, metadata_props,
    /// functions, training_info, ...). `graph` is always `None` here: the graph
    /// lives in [`Model::graph`].
    pub meta: ModelProto,
    pub graph: Graph,
    pub source: Option<SourceInfo>,
}

/// The IR version a model importing default-domain `opset` needs at least
/// (the table of ONNX's releases; ONNX Runtime refuses an IR older than that).
pub fn min_ir_version(opset: i64) -> i64 {
    match opset {
        ..=8 => 3,
        9 => 4,
        10 => 5,
        11 => 6,
        12..=14 => 7,
        15..=18 => 8,
        19..=20 => 9,
        21..=22 => 10,
        23 => 11,
        _ => 12,
    }
}

impl Model {
    /// A new model around `graph`, importing the default ONNX domain at `opset`.
    pub fn new(graph: Graph, opset: i64) -> Model {
        Model {
            meta: ModelProto {
                ir_version: Some(crate::IR_VERSION_DEFAULT),
                producer_name: Some("infopt".into()),
                opset_import: vec![crate::proto::OperatorSetIdProto {
                    domain: Some(String::new()),
                    version: Some(opset),
                }],
                ..Default::default()
            },
            graph,
            source: None,
        }
    }

    /// The imported version of `domain` ("" or "ai.onnx" for the default domain).
    pub fn opset(&self, domain: &str) -> Option<i64> {
        let norm = |d: &str| {
            if d == "ai.onnx" {
                String::new()
            } else {
                d.to_string()
            }
        };
        let want = norm(domain);
        self.meta
            .opset_import
            .iter()
            .find(|o| norm(o.domain.as_deref().unwrap_or("")) == want)
            .and_then(|o| o.version)
    }

    /// Refuses an import of the default or `ai.onnx.ml` domain at a version
    /// released ONNX does not define: the passes read an op's meaning from its
    /// opset, and runtimes refuse or misread such a model (tract once
    /// panicked loading a default-domain opset of 1000).
    pub fn check_opset_imports(&self) -> Result<()> {
        for import in &self.meta.opset_import {
            let domain = import.domain.as_deref().unwrap_or("");
            let (label, newest) = match domain {
                "" | "ai.onnx" => ("the default domain (ai.onnx)", NEWEST_ONNX_OPSET),
                "ai.onnx.ml" => ("ai.onnx.ml", NEWEST_ONNX_ML_OPSET),
                _ => continue,
            };
            let version = import.version.unwrap_or(0);
            if !(1..=newest).contains(&version) {
                return Err(IrError::UnknownOpset {
                    domain: label.to_string(),
                    version,
                    newest,
                });
            }
        }
        Ok(())
    }

    pub fn ir_version(&self) -> Option<i64> {
        self.meta.ir_version
    }
}
