//! `infopt convert`: load and save a model unchanged (lossless round trip),
//! choosing where the weights go.

use std::path::PathBuf;

use crate::exit::{OpsError, OpsResult};

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Model to read.
    pub model: PathBuf,
    /// Where to write the model.
    #[arg(short, long)]
    pub output: PathBuf,
    #[command(flatten)]
    pub save: crate::args::SaveArgs,
}

pub fn run(args: Args) -> OpsResult {
    let mut model = infopt_ops::models::load_model(&args.model)?;
    let options = infopt_ops::save_args::SaveSettings::from(args.save).options()?;
    let summary = model
        .save(&args.output, &options)
        .map_err(OpsError::from_ir)?;
    infopt_ops::models::print_save_summary(&args.output, &summary);
    Ok(())
}
