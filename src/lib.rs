//! infopt's command line: arguments → options → [`infopt_ops`] → render →
//! exit code ([`cli`]). The commands themselves live in the `infopt-ops`
//! crate.

pub mod api;
pub mod args;
pub mod cli;
pub mod cli_reference;
pub mod commands;
pub mod exit;
pub mod progress;
pub mod report;
