//! Turns a panic inside a pass into an error that names the pass and the node.
//!
//! A panic is a bug in infopt, but a hostile model must never make the tool
//! print a backtrace or die with exit 101: the driver runs each pass under
//! `catch_unwind`, and a process-wide panic hook (installed once) stays quiet
//! for panics on a thread that is inside a guarded pass, remembering where the
//! panic happened for the error instead. Panics elsewhere reach the hook that
//! was installed before (the test harness's, the CLI's).

use std::cell::{Cell, RefCell};
use std::panic::{self, AssertUnwindSafe};
use std::sync::Once;

thread_local! {
    static GUARDED: Cell<u32> = const { Cell::new(0) };
    static LOCATION: RefCell<Option<String>> = const { RefCell::new(None) };
}

static INSTALL: Once = Once::new();

fn install_hook() {
    INSTALL.call_once(|| {
        let previous = panic::take_hook();
        panic::set_hook(Box::new(move |info| {
            if GUARDED.with(Cell::get) > 0 {
                let at = info
                    .location()
                    .map(|l| format!("{}:{}", l.file(), l.line()));
                LOCATION.with(|c| {
                    if let Ok(mut c) = c.try_borrow_mut() {
                        *c = at;
                    }
                });
            } else {
                previous(info);
            }
        }));
    });
}

/// What a caught panic said and where.
#[derive(Debug, Clone)]
pub struct Caught {
    /// The panic message on one line.
    pub message: String,
    /// `file:line` of the panic, when the hook saw it.
    pub location: Option<String>,
}

/// Runs `f`; a panic inside it comes back as `Err` without printing anything.
pub fn catch_quietly<T>(f: impl FnOnce() -> T) -> Result<T, Caught> {
    install_hook();
    LOCATION.with(|c| c.borrow_mut().take());
    GUARDED.with(|g| g.set(g.get() + 1));
    let result = panic::catch_unwind(AssertUnwindSafe(f));
    GUARDED.with(|g| g.set(g.get().saturating_sub(1)));
    result.map_err(|payload| {
        let text = payload
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| payload.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "unknown panic payload".into());
        Caught {
            message: text.split_whitespace().collect::<Vec<_>>().join(" "),
            location: LOCATION.with(|c| c.borrow_mut().take()),
        }
    })
}
