//! The command-line entry point: arguments → command → exit code. Shared by
//! the `infopt` binary and the Python wheel's `infopt` script.

use std::ffi::OsString;

use clap::Parser;

use crate::exit::{Exit, OpsResult};

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

/// Registrations every front end needs once per process.
pub fn init() {
    infopt_ops::guard::init();
}

/// Runs `f` so that a panic (a bug in infopt, whatever the input) becomes
/// one line and exit 1 (Internal), never a backtrace or exit 101.
pub fn guarded<T>(f: impl FnOnce() -> OpsResult<T>) -> OpsResult<T> {
    infopt_ops::guard::guarded(|| {
        // Test hook (debug builds only), like the driver's.
        #[cfg(debug_assertions)]
        if std::env::var("INFOPT_INJECT_PANIC").is_ok_and(|p| p == "cli") {
            panic!("injected panic");
        }
        f()
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
    let progress = crate::progress::Terminal;
    let ran =
        infopt_ops::progress::with_progress(&progress, || guarded(|| crate::commands::run(cli)));
    match ran {
        Ok(()) => Exit::Ok,
        Err(e) => {
            eprintln!("error: {}", e.message.replace('\n', " "));
            Exit::from(e.kind)
        }
    }
}
