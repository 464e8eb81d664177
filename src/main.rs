//! infopt: offline ONNX model optimizer.

mod backend_args;
mod commands;
mod exit;
mod gates;
mod half;
mod inputs_arg;
mod int8;
mod report;
mod shape_args;
mod stages;
mod tract_eval;

use std::process::ExitCode;

use clap::Parser;

use crate::exit::Exit;

/// Rust ignores SIGPIPE, so printing into a closed pipe (`infopt passes list
/// | head`) fails as a write error. A command-line tool should end quietly
/// like any Unix tool when its reader goes away.
#[cfg(unix)]
fn restore_sigpipe() {
    // SAFETY: called first thing in main, before any other thread exists;
    // setting a signal's disposition to its default has no other effect.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
}

fn main() -> ExitCode {
    #[cfg(unix)]
    restore_sigpipe();
    let cli = match commands::Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            let code = if e.use_stderr() {
                Exit::Usage
            } else {
                Exit::Ok
            };
            let _ = e.print();
            return code.into();
        }
    };
    // Passes of other crates join the registry.
    infopt_calibration::quantize::register();
    // Constant folding may ask tract for ops the reference kernels lack.
    infopt_passes::fold_constants::register_fallback_evaluator(tract_eval::factory);
    // A panic is a bug in infopt; whatever the input, the user gets one line
    // and exit 1 (Internal), never a backtrace or exit 101.
    let result = infopt_passes::panic_guard::catch_quietly(|| {
        // Test hook (debug builds only), like the driver's.
        #[cfg(debug_assertions)]
        if std::env::var("INFOPT_INJECT_PANIC").is_ok_and(|p| p == "cli") {
            panic!("injected panic");
        }
        commands::run(cli)
    })
    .unwrap_or_else(|c| {
        Err(exit::CliError::new(
            Exit::Internal,
            format!(
                "internal error: {}{}; this is a bug in infopt (please report it with the model)",
                c.message,
                c.location.map(|l| format!(" ({l})")).unwrap_or_default()
            ),
        ))
    });
    match result {
        Ok(()) => Exit::Ok.into(),
        Err(e) => {
            eprintln!("error: {}", e.message.replace('\n', " "));
            e.exit.into()
        }
    }
}
