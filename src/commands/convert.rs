//! `infopt convert`: load and save a model unchanged (lossless round trip),
//! choosing where the weights go.

use std::path::PathBuf;

use infopt_ir::{ExternalDataPolicy, SaveOptions};

use crate::exit::{CliError, CliResult};

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Model to read.
    pub model: PathBuf,
    /// Where to write the model.
    #[arg(short, long)]
    pub output: PathBuf,
    /// Store every initializer of at least THRESHOLD bytes in an external-data
    /// file next to the output (default threshold 1024).
    #[arg(long, value_name = "THRESHOLD", num_args = 0..=1, default_missing_value = "1024", conflicts_with = "inline")]
    pub external_data: Option<u64>,
    /// Store every tensor inside the model file (fails above protobuf's 2 GiB limit).
    #[arg(long)]
    pub inline: bool,
    /// Name of the external-data file (default: `<output file name>.data`).
    #[arg(long, value_name = "FILE")]
    pub data_file: Option<String>,
}

pub fn run(args: Args) -> CliResult {
    let mut model = super::load_model(&args.model)?;
    let external = match (args.external_data, args.inline) {
        (Some(t), _) => ExternalDataPolicy::Threshold(t),
        (None, true) => ExternalDataPolicy::Inline,
        (None, false) => ExternalDataPolicy::Auto,
    };
    if let Some(name) = &args.data_file {
        if name.contains('/') || name.contains('\\') || name == ".." {
            return Err(CliError::usage(format!(
                "--data-file '{name}' must be a plain file name; it is written next to the output"
            )));
        }
    }
    let options = SaveOptions {
        external,
        data_file_name: args.data_file.clone(),
        ..Default::default()
    };
    let summary = model
        .save(&args.output, &options)
        .map_err(CliError::from_ir)?;
    match &summary.external_file {
        Some(f) => eprintln!(
            "wrote {} ({} bytes) and {} ({} tensors, {} bytes)",
            args.output.display(),
            summary.model_bytes,
            f.display(),
            summary.external_tensors,
            summary.external_bytes
        ),
        None => eprintln!(
            "wrote {} ({} bytes)",
            args.output.display(),
            summary.model_bytes
        ),
    }
    Ok(())
}
