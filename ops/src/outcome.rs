//! What a command's library function returns: its report, and the verdict
//! the command line turns into an exit code. A failed verification or gate
//! still has a report (what failed, by how much), so the failure travels
//! beside it instead of replacing it.

use serde::Serialize;

use crate::ci::CiSummary;
use crate::error::{ErrorKind, OpsError, OpsResult};

/// A report every command can render: JSON through serde, a terminal text,
/// a Markdown rendering, and the CI view of it ([`CiSummary`]: the verdict,
/// the checks and gates) that the Markdown and JUnit report files show.
pub trait CommandReport: Serialize {
    /// The command's name as typed ("optimize", "build-engine").
    fn command(&self) -> &'static str;
    /// What the command prints on a terminal.
    fn text(&self) -> String;
    /// Markdown for a pull-request comment or a notebook.
    fn markdown(&self) -> String;
    /// Pretty JSON, with the report's schema version inside.
    fn json(&self) -> OpsResult<String> {
        serde_json::to_string_pretty(self).map_err(|e| OpsError::new(ErrorKind::Internal, e))
    }
    /// The CI view: by default the command's title and the full Markdown
    /// folded below it, with no checks (a report without gates passes).
    fn summary(&self) -> CiSummary<'_> {
        CiSummary {
            title: format!("infopt {}", self.command()),
            details: Some(self.markdown()),
            ..Default::default()
        }
    }
}

/// A finished command: its report, and why it failed if it did.
#[derive(Debug)]
pub struct Outcome<R> {
    pub report: R,
    /// A verification or gate failure found after the report was complete.
    pub failure: Option<OpsError>,
}

impl<R> Outcome<R> {
    pub fn passed(report: R) -> Outcome<R> {
        Outcome {
            report,
            failure: None,
        }
    }

    pub fn verdict(self) -> OpsResult {
        match self.failure {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }
}

/// A terminal text as Markdown: a heading and the text verbatim (for the
/// reports that have no table of their own).
pub fn fenced(title: &str, text: &str) -> String {
    format!("## {title}\n\n```text\n{}\n```\n", text.trim_end())
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_text_becomes_a_fenced_block_under_a_heading() {
        assert_eq!(
            super::fenced("infopt inspect: m.onnx", "nodes 3\n\n"),
            "## infopt inspect: m.onnx\n\n```text\nnodes 3\n```\n"
        );
    }
}
