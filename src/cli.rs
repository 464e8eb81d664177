//! The command-line entry point: arguments → command → exit code. Shared by
//! the `infopt` binary and the Python wheel's `infopt` script.

use std::ffi::OsString;
use std::sync::Once;

use clap::Parser;

use crate::exit::{CliError, CliResult, Exit};

/// Rust ignores SIGPIPE, so printing into a closed pipe (`infopt passes list
/// | head`) fails as a write error. A command-line tool should end quietly
/// like any Unix tool when its reader goes away. (Python ignores SIGPIPE too,
/// so the wheel's script needs this as much as the binary.)
#[cfg(unix)]
fn restore_sigpipe() {
    // SAFETY: called before the command starts any thread; setting a
    // signal's disposition to its default has no other effect.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
}

/// Registrations every front end needs once per process: passes of other
/// crates join the registry; constant folding may ask tract for ops the
/// reference kernels lack, and puts each kind of fold to ONNX Runtime.
pub fn init() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        infopt_calibration::quantize::register();
        infopt_passes::fold_constants::register_fallback_evaluator(crate::tract_eval::factory);
        // Each kind of fold checked once against ONNX Runtime (issue 30).
        infopt_passes::fold_constants::register_fold_check(infopt_verify::fold_check::checked);
    });
}

/// Runs `f` so that a panic (a bug in infopt, whatever the input) becomes
/// one line and exit 1 (Internal), never a backtrace or exit 101.
pub fn guarded<T>(f: impl FnOnce() -> CliResult<T>) -> CliResult<T> {
    infopt_passes::panic_guard::catch_quietly(|| {
        // Test hook (debug builds only), like the driver's.
        #[cfg(debug_assertions)]
        if std::env::var("INFOPT_INJECT_PANIC").is_ok_and(|p| p == "cli") {
            panic!("injected panic");
        }
        f()
    })
    .unwrap_or_else(|c| {
        Err(CliError::new(
            Exit::Internal,
            format!(
                "internal error: {}{}; this is a bug in infopt (please report it with the model)",
                c.message,
                c.location.map(|l| format!(" ({l})")).unwrap_or_default()
            ),
        ))
    })
}

/// The whole command line: parses `args` (the first is the program name),
/// runs the command, prints its error as one line and returns the exit code.
pub fn main<I, T>(args: I) -> Exit
where
    I: IntoIterator<Item = T>,
    T: Into<OsString> + Clone,
{
    #[cfg(unix)]
    restore_sigpipe();
    let args: Vec<OsString> = args.into_iter().map(Into::into).collect();
    let mut cli = match crate::commands::Cli::try_parse_from(&args) {
        Ok(cli) => cli,
        Err(e) => {
            let code = if e.use_stderr() {
                Exit::Usage
            } else {
                Exit::Ok
            };
            let _ = e.print();
            return code;
        }
    };
    if let crate::commands::Command::BuildEngine(a) = &mut cli.command {
        // `--matrix` writes each entry's command from the user's own arguments.
        a.argv = args
            .iter()
            .map(|a| a.to_string_lossy().into_owned())
            .skip_while(|a| a != "build-engine")
            .skip(1)
            .collect();
    }
    init();
    match guarded(|| crate::commands::run(cli)) {
        Ok(()) => Exit::Ok,
        Err(e) => {
            eprintln!("error: {}", e.message.replace('\n', " "));
            e.exit
        }
    }
}
