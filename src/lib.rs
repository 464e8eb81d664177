//! infopt's command line: arguments → options → [`infopt_ops`] → render →
//! exit code ([`cli`]). The commands themselves live in the `infopt-ops`
//! crate.

pub mod api;
pub mod cli;
pub mod cli_reference;
pub mod commands;

pub mod exit;

pub use infopt_ops::{
    backend_args, gates, half, inputs_arg, int8, job, models, outcome, progress, report,
    save_args, shape_args, stages, tract_eval,
};
