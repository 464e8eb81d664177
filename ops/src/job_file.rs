//! A job file: one YAML file with the pipeline of passes (`version`,
//! `target`, `passes`, `inputs`, `symbols`, `precision`) and the job's own
//! sections, `verify:` (how the result is checked, see
//! `infopt_verify::config`) and `gates:` (what a release must meet, see
//! `crate::gates::config`). The passes read the pipeline; the job reads the
//! rest. The file format is one, and unchanged.

use std::ops::{Deref, DerefMut};

use infopt_passes::PipelineConfig;
use infopt_passes::config::parse_yaml;
use infopt_passes::pass::PassError;
use infopt_verify::config::VerifyConfig;
use serde::Deserialize;

use crate::gates::config::GatesConfig;

/// A job file, parsed. It derefs to its pipeline, which is what most code
/// reads.
#[derive(Clone, Debug, PartialEq)]
pub struct JobFile {
    pub pipeline: PipelineConfig,
    pub verify: VerifyConfig,
    pub gates: GatesConfig,
}

/// The job's sections of the file; the pipeline's keys are read (and a
/// misspelt key refused) by `PipelineConfig::from_yaml`.
#[derive(Deserialize)]
struct Sections {
    #[serde(default)]
    verify: VerifyConfig,
    #[serde(default)]
    gates: GatesConfig,
}

impl JobFile {
    /// Parses a job file. `origin` names the source in errors (a file path).
    pub fn from_yaml(text: &str, origin: &str) -> Result<JobFile, PassError> {
        let pipeline = PipelineConfig::from_yaml(text, origin)?;
        let sections: Sections = parse_yaml(text, origin)?;
        Ok(JobFile {
            pipeline,
            verify: sections.verify,
            gates: sections.gates,
        })
    }

    /// A job of `pipeline` with the default verification and no gates.
    pub fn from_pipeline(pipeline: PipelineConfig) -> JobFile {
        JobFile {
            pipeline,
            verify: VerifyConfig::default(),
            gates: GatesConfig::default(),
        }
    }
}

impl Deref for JobFile {
    type Target = PipelineConfig;
    fn deref(&self) -> &PipelineConfig {
        &self.pipeline
    }
}

impl DerefMut for JobFile {
    fn deref_mut(&mut self) -> &mut PipelineConfig {
        &mut self.pipeline
    }
}
