//! Every command's report as a [`CommandReport`]: the renderings a front end
//! asks for (the Python module's `to_markdown()`, a notebook's HTML) come
//! from the same functions the command line prints with.

use crate::commands::bench::{self, BenchReport};
use crate::commands::build_engine::report::{self as engine, EngineReport};
use crate::commands::calibrate::{self, CalibrateReport};
use crate::commands::compare::{self, CompareReport};
use crate::commands::inspect::{self, Inspection};
use crate::outcome::CommandReport;
use crate::report::ci::{render_gates_text, render_markdown};
use crate::report::{Report, render, summaries};

/// A terminal text as Markdown: a heading and the text verbatim.
fn fenced(title: &str, text: &str) -> String {
    format!("## {title}\n\n```text\n{}\n```\n", text.trim_end())
}

impl CommandReport for Report {
    fn command(&self) -> &'static str {
        "optimize"
    }
    fn text(&self) -> String {
        render::render(self, false)
    }
    fn markdown(&self) -> String {
        render::render(self, true)
    }
}

impl CommandReport for EngineReport {
    fn command(&self) -> &'static str {
        "build-engine"
    }
    fn text(&self) -> String {
        engine::render(self, false)
    }
    fn markdown(&self) -> String {
        engine::render(self, true)
    }
}

impl CommandReport for CompareReport {
    fn command(&self) -> &'static str {
        "compare"
    }
    fn text(&self) -> String {
        let mut s = compare::render_text(self);
        if let Some(g) = &self.gates {
            s.push_str(&render_gates_text(g));
        }
        s
    }
    fn markdown(&self) -> String {
        render_markdown(&summaries::compare(self))
    }
}

impl CommandReport for BenchReport {
    fn command(&self) -> &'static str {
        "bench"
    }
    fn text(&self) -> String {
        let mut s = bench::render_text(self);
        if let Some(g) = &self.gates {
            s.push_str(&render_gates_text(g));
        }
        s
    }
    fn markdown(&self) -> String {
        render_markdown(&summaries::bench(self))
    }
}

impl CommandReport for Inspection {
    fn command(&self) -> &'static str {
        "inspect"
    }
    fn text(&self) -> String {
        inspect::render_text(self)
    }
    fn markdown(&self) -> String {
        fenced(&format!("infopt inspect: {}", self.path), &self.text())
    }
}

impl CommandReport for CalibrateReport {
    fn command(&self) -> &'static str {
        "calibrate"
    }
    fn text(&self) -> String {
        calibrate::render_text(self)
    }
    fn markdown(&self) -> String {
        fenced(&format!("infopt calibrate: {}", self.model), &self.text())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_text_becomes_a_fenced_block_under_a_heading() {
        assert_eq!(
            fenced("infopt inspect: m.onnx", "nodes 3\n\n"),
            "## infopt inspect: m.onnx\n\n```text\nnodes 3\n```\n"
        );
    }
}
