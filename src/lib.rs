//! infopt as a library: the commands as functions that take their options and
//! return a report value ([`commands`]'s `execute` functions), and the
//! command-line front end ([`cli`]). The `infopt` binary and the Python
//! module are both thin callers of this crate, so `infopt --help` from the
//! wheel and `infopt.optimize(...)` run the same code.

pub mod api;
pub mod backend_args;
pub mod cli;
pub mod cli_reference;
pub mod commands;
pub mod exit;
pub mod gates;
pub mod half;
pub mod inputs_arg;
pub mod int8;
pub mod job;
pub mod job_file;
pub mod models;
pub mod outcome;
pub mod progress;
pub mod report;
pub mod save_args;
pub mod shape_args;
pub mod stages;
pub mod tract_eval;
