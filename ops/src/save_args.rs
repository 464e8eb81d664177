//! Options shared by every command that writes a model.

use infopt_ir::{ExternalDataPolicy, SaveOptions};

use crate::error::{OpsError, OpsResult};

#[derive(Debug, Clone, Default, serde::Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SaveSettings {
    /// Store every initializer of at least THRESHOLD bytes in an external-data
    /// file next to the output (default threshold 1024). Without this flag,
    /// tensors that were external stay external, and a model over 2 GiB gets
    /// external data automatically.
    pub external_data: Option<u64>,
    /// Store every tensor inside the model file (fails above protobuf's 2 GiB limit).
    pub inline: bool,
    /// Name of the external-data file (default: `<output file name>.data`; when the
    /// existing output reads that file, `NAME.1.data` is written and the old file
    /// removed once the new model is in place).
    pub data_file: Option<String>,
}

/// `--external-data` without a threshold: initializers of at least this many bytes.
pub const DEFAULT_EXTERNAL_THRESHOLD: u64 = 1024;

impl SaveSettings {
    pub fn options(&self) -> OpsResult<SaveOptions> {
        let external = match (self.external_data, self.inline) {
            (Some(t), _) => ExternalDataPolicy::Threshold(t),
            (None, true) => ExternalDataPolicy::Inline,
            (None, false) => ExternalDataPolicy::Auto,
        };
        if let Some(name) = &self.data_file
            && (name.contains('/') || name.contains('\\') || name == ".." || name.is_empty())
        {
            return Err(OpsError::usage(format!(
                "--data-file '{name}' must be a plain file name; it is written next to the output"
            )));
        }
        Ok(SaveOptions {
            external,
            data_file_name: self.data_file.clone(),
            ..Default::default()
        })
    }
}
