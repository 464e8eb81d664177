//! The command line's progress: lines on stderr, a bar for long stages when
//! stderr is a terminal, and never a stop (Ctrl-C ends the process).

use std::io::IsTerminal;

use infopt_ops::progress::{Bar, Progress};

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
    fn bar(&self, template: &str, prefix: &str, total: Option<usize>) -> Option<Box<dyn Bar>> {
        if !std::io::stderr().is_terminal() {
            return None;
        }
        let b = match total {
            Some(t) => indicatif::ProgressBar::new(t as u64),
            None => indicatif::ProgressBar::new_spinner(),
        };
        b.set_style(
            indicatif::ProgressStyle::with_template(template)
                .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar())
                .progress_chars("=> "),
        );
        b.set_prefix(prefix.to_string());
        Some(Box::new(TerminalBar(b)))
    }
}

struct TerminalBar(indicatif::ProgressBar);

impl Bar for TerminalBar {
    fn set(&self, done: usize, msg: &str) {
        self.0.set_position(done as u64);
        self.0.set_message(msg.to_string());
    }
    fn finish(&self) {
        self.0.finish_and_clear();
    }
}
