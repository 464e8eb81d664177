//! The command line's progress: lines on stderr, a bar for long stages when
//! stderr is a terminal, and never a stop (Ctrl-C ends the process).

use std::io::IsTerminal;

use infopt_ops::progress::Progress;

pub struct Terminal;

impl Progress for Terminal {
    fn line(&self, _stage: &str, line: &str) {
        eprintln!("{line}");
    }
    /// Every small step is too many lines for a terminal: it gets the
    /// sampled ones, or a bar.
    fn event(&self, _stage: &str, _line: &str) {}
    fn sampled(&self, _stage: &str, line: &str) {
        eprintln!("{line}");
    }
    fn draws_bars(&self) -> bool {
        std::io::stderr().is_terminal()
    }
}
