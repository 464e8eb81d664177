//! What `ops` and the binary crate may hold: no clap, exit code or printing
//! in `ops`, no function in `ops` over 120 lines, and no flow logic in `src/`.
//! (File-level cycles are `no_crate_has_a_file_level_module_cycle`'s, for
//! every crate; commands importing each other, `no_command_imports_another`.)

use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The text without comments (doc comments name modules freely) and
/// without string literals' contents (messages name paths too).
fn code(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for line in text.lines() {
        let mut in_str = false;
        let mut prev = ' ';
        let mut chars = line.chars().peekable();
        while let Some(c) = chars.next() {
            if !in_str && c == '/' && chars.peek() == Some(&'/') {
                break;
            }
            if c == '"' && prev != '\\' {
                in_str = !in_str;
                out.push(c);
            } else if !in_str {
                out.push(c);
            }
            prev = if prev == '\\' && c == '\\' { ' ' } else { c };
        }
        out.push('\n');
    }
    out
}

fn is_ident(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

/// A crate's files (paths relative to `dir`) as [`code`] sees them.
fn load(dir: &Path) -> Vec<(PathBuf, String)> {
    super::sources(dir)
        .into_iter()
        .map(|(rel, text)| (rel, code(&text)))
        .collect()
}

#[test]
fn ops_has_no_clap_and_names_no_exit_code() {
    let manifest = std::fs::read_to_string(root().join("ops/Cargo.toml")).unwrap();
    assert!(!manifest.contains("clap"), "ops/Cargo.toml names clap");
    let krate = load(&root().join("ops/src"));
    let mut found = Vec::new();
    for (path, code) in krate.iter() {
        for word in ["clap", "Exit", "ExitCode", "exit"] {
            let named = code.match_indices(word).any(|(i, _)| {
                let before = code[..i].chars().next_back();
                let after = code[i + word.len()..].chars().next();
                !before.is_some_and(is_ident) && !after.is_some_and(is_ident)
            });
            if named {
                found.push(format!("{} names `{word}`", path.display()));
            }
        }
    }
    assert!(found.is_empty(), "{}", found.join("; "));
}

/// Progress goes through the caller's `Progress`; reports are values. So
/// `ops` writes nothing to stdout or stderr, and draws no bar itself.
#[test]
fn ops_prints_nothing() {
    let manifest = std::fs::read_to_string(root().join("ops/Cargo.toml")).unwrap();
    assert!(
        !manifest.contains("indicatif"),
        "ops/Cargo.toml names indicatif"
    );
    let krate = load(&root().join("ops/src"));
    let mut found = Vec::new();
    for (path, code) in krate.iter() {
        for what in [
            "println!",
            "print!",
            "eprintln!",
            "eprint!",
            "dbg!",
            "stdout()",
            "stderr()",
        ] {
            let named = code
                .match_indices(what)
                .any(|(i, _)| !code[..i].chars().next_back().is_some_and(is_ident));
            if named {
                found.push(format!("{} uses {what}", path.display()));
            }
        }
    }
    assert!(found.is_empty(), "{}", found.join("; "));
}

/// The binary crate is arguments → options → ops → render → exit code: a
/// line budget, each command's `run` one screen long, and none of the
/// crates that do the work named outside what it converts.
#[test]
fn src_holds_no_flow_logic() {
    let krate = load(&root().join("src"));
    let lines: usize = krate.iter().map(|(_, code)| code.lines().count()).sum();
    assert!(
        lines <= 2500,
        "src/ has {lines} lines of code (budget 2500)"
    );
    let mut long = Vec::new();
    for (path, code) in krate.iter() {
        if !path.starts_with("commands") {
            continue;
        }
        let all: Vec<&str> = code.lines().collect();
        if let Some(start) = all.iter().position(|l| l.starts_with("pub fn run(")) {
            let len = all[start..]
                .iter()
                .position(|l| *l == "}")
                .unwrap_or(all.len());
            if len > 40 {
                long.push(format!("{}: run is {len} lines", path.display()));
            }
        }
        for flow in ["infopt_verify::Verifier", "stages::", "run_passes"] {
            if code.contains(flow) {
                long.push(format!("{} names {flow}", path.display()));
            }
        }
    }
    assert!(long.is_empty(), "{}", long.join("; "));
}

/// Every function of `ops` (from its `fn` line to the brace that closes it
/// at the same indentation) is at most this long: a longer one is stages
/// that want names.
const MAX_FN_LINES: usize = 120;

#[test]
fn no_function_in_ops_is_over_120_lines() {
    let krate = load(&root().join("ops/src"));
    let mut long = Vec::new();
    let mut seen = 0;
    for (path, code) in krate.iter() {
        let lines: Vec<&str> = code.lines().collect();
        for (i, line) in lines.iter().enumerate() {
            let body = line.trim_start();
            let indent = &line[..line.len() - body.len()];
            let body = ["pub(crate) ", "pub(super) ", "pub "]
                .iter()
                .find_map(|p| body.strip_prefix(p))
                .unwrap_or(body);
            // One-line functions close on their own line.
            if !body.starts_with("fn ") || line.trim_end().ends_with('}') {
                continue;
            }
            let close = format!("{indent}}}");
            let Some(len) = lines[i + 1..].iter().position(|l| *l == close) else {
                continue;
            };
            seen += 1;
            if len + 2 > MAX_FN_LINES {
                let name: String = body[3..].chars().take_while(|&c| is_ident(c)).collect();
                long.push(format!(
                    "{}:{} {name} is {} lines",
                    path.display(),
                    i + 1,
                    len + 2
                ));
            }
        }
    }
    assert!(seen > 100, "the scan finds only {seen} functions");
    assert!(long.is_empty(), "{}", long.join("; "));
}
