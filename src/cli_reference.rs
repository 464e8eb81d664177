//! docs/cli.md: every command's `--help`, generated from the clap
//! definitions so the reference never drifts from the command line. The test
//! below fails when the committed file is stale; `INFOPT_BLESS=1 cargo test
//! -p infopt --lib cli_reference` rewrites it.

use clap::CommandFactory;

use crate::commands::Cli;

/// The command-line reference as Markdown.
pub fn markdown() -> String {
    let mut cli = Cli::command().term_width(100);
    // Building gives each subcommand its full name ("infopt optimize") in its usage line.
    cli.build();
    let mut out = String::from(
        "# infopt command-line reference\n\n\
         Every command's `--help`, generated from the command line's definitions \
         (`src/cli_reference.rs`; a test keeps this file current). The guide is \
         [guide.md](guide.md).\n",
    );
    let mut section = |title: &str, help: String| {
        out.push_str(&format!(
            "\n## `{title}`\n\n```text\n{}\n```\n",
            help.trim_end()
        ));
    };
    section("infopt", cli.render_long_help().to_string());
    for sub in cli.get_subcommands_mut() {
        if sub.get_name() == "help" {
            continue;
        }
        let title = format!("infopt {}", sub.get_name());
        section(&title, sub.render_long_help().to_string());
    }
    out
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    #[test]
    fn docs_cli_md_is_current() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/cli.md");
        let generated = super::markdown();
        if std::env::var_os("INFOPT_BLESS").is_some() {
            std::fs::write(&path, &generated).expect("write docs/cli.md");
        }
        let committed = std::fs::read_to_string(&path).unwrap_or_default();
        assert!(
            generated == committed,
            "docs/cli.md is stale: run `INFOPT_BLESS=1 cargo test -p infopt --lib cli_reference`"
        );
        assert!(generated.contains("## `infopt optimize`"));
        assert!(generated.contains("Usage: infopt optimize [OPTIONS] <MODEL>"));
    }
}
