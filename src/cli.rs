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

/// A crash inside a native library (ONNX Runtime segfaulting on a graph
/// it should have refused) ended the process with no word: exit 139 from
/// the shell. The handler says in one line where it happened and what to
/// try, and exits 1 (internal error). Only what a signal handler may do:
/// static text written with write(2), then _exit.
#[cfg(unix)]
fn report_fatal_signals() {
    extern "C" fn on_fatal(sig: libc::c_int) {
        let name: &[u8] = match sig {
            libc::SIGSEGV => b"a segmentation fault",
            libc::SIGBUS => b"a bus error",
            libc::SIGILL => b"an illegal instruction",
            _ => b"a floating-point exception",
        };
        let stage = infopt_runtime::native_stage::describe().as_bytes();
        let parts: [&[u8]; 5] = [
            b"error: infopt crashed with ",
            name,
            if stage.is_empty() { b"" } else { b" " },
            stage,
            if stage.is_empty() {
                b": a bug (or a stack overflow); please report it with the model (exit 1)\n"
            } else if infopt_runtime::native_stage::running() {
                // Sizes the graph cannot take (onnx-asr's wespeaker front
                // end at 3 samples, less than its window) end ONNX Runtime
                // this way as well as a fault of its own.
                b": a fault in that library on this model or on the input sizes it was given, not a verdict on it; rerun with the model's real input sizes (--input-shape NAME:DIMS, or --inputs FILE.npz), with --backend tract, or with --no-verify, and please report it with the model (exit 1)\n"
            } else {
                b": a fault in that library on this model, not a verdict on it; rerun with --backend tract (or --no-verify), and please report it with the model (exit 1)\n"
            },
        ];
        for p in parts {
            // SAFETY: write(2) is async-signal-safe; the buffers are static.
            unsafe {
                libc::write(2, p.as_ptr().cast(), p.len());
            }
        }
        // SAFETY: _exit is async-signal-safe and ends the process at once.
        unsafe { libc::_exit(1) }
    }
    for sig in [libc::SIGSEGV, libc::SIGBUS, libc::SIGILL, libc::SIGFPE] {
        // SAFETY: installs a handler that only writes static text and
        // exits; on the alternate stack where one is set (Rust's threads
        // have one, for stack overflows).
        unsafe {
            let mut action: libc::sigaction = std::mem::zeroed();
            action.sa_sigaction = on_fatal as *const () as usize;
            action.sa_flags = libc::SA_ONSTACK;
            libc::sigemptyset(&mut action.sa_mask);
            libc::sigaction(sig, &action, std::ptr::null_mut());
        }
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
    #[cfg(unix)]
    report_fatal_signals();
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
