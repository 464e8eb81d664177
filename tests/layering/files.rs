//! File-level layering of the `ops` crate and the binary crate: every `.rs`
//! file is a node, every path it names into another file of its crate
//! (`crate::a::b`, `super::x`, `self::x`, or a child module declared in it)
//! an edge. A cycle of files is refused, as are clap and exit codes in
//! `ops`, one command of `ops` importing another, and flow logic in `src/`.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// A crate's files by module path (`lib.rs` is `[]`, `a/b.rs` is `[a, b]`).
pub struct Crate {
    pub files: BTreeMap<Vec<String>, (PathBuf, String)>,
}

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The text without comments (doc comments name modules freely) and
/// without string literals' contents (messages name paths too).
pub fn code(text: &str) -> String {
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

pub fn load(dir: &Path) -> Crate {
    let mut files = BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
                continue;
            }
            if path.extension().is_none_or(|e| e != "rs") {
                continue;
            }
            let rel = path.strip_prefix(dir).unwrap();
            let mut module: Vec<String> = rel
                .iter()
                .map(|p| p.to_string_lossy().trim_end_matches(".rs").to_string())
                .collect();
            if matches!(
                module.last().map(String::as_str),
                Some("mod" | "lib" | "main")
            ) {
                module.pop();
            }
            let text = code(&std::fs::read_to_string(&path).unwrap());
            // main.rs and lib.rs are both the root: keep lib.rs.
            if module.is_empty() && files.contains_key(&module) && rel.ends_with("main.rs") {
                continue;
            }
            files.insert(module, (rel.to_path_buf(), text));
        }
    }
    Crate { files }
}

fn is_ident(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

/// Every path that starts at one of `starts` (`crate`, `super`, `self`, a
/// child module), with `{a, b::c}` groups expanded one level deep:
/// `crate::{a, b::c}` gives `[crate, a]` and `[crate, b, c]`.
pub fn paths(code: &str, starts: &BTreeSet<String>) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    let chars: Vec<char> = code.chars().collect();
    let mut i = 0;
    while i < chars.len() {
        if !is_ident(chars[i]) || (i > 0 && (is_ident(chars[i - 1]) || chars[i - 1] == ':')) {
            i += 1;
            continue;
        }
        let (path, end) = read_path(&chars, i);
        i = end.max(i + 1);
        let Some(first) = path.first() else { continue };
        let group = chars.get(end) == Some(&'{');
        if (path.len() < 2 && !group) || !starts.contains(first) {
            continue;
        }
        // A group right after the path: `prefix::{a, b::c}`.
        if group {
            let close = (end..chars.len())
                .find(|&k| chars[k] == '}')
                .unwrap_or(chars.len());
            let inner: String = chars[end + 1..close].iter().collect();
            for item in inner.split(',') {
                let item: Vec<String> = item
                    .trim()
                    .split("::")
                    .map(|s| s.chars().take_while(|&c| is_ident(c)).collect::<String>())
                    .take_while(|s| !s.is_empty())
                    .collect();
                let mut p = path.clone();
                p.extend(item);
                out.push(p);
            }
        } else {
            out.push(path);
        }
    }
    out
}

/// The `a::b::c` path at `i`, and where it ends (after a trailing `::`).
fn read_path(chars: &[char], mut i: usize) -> (Vec<String>, usize) {
    let mut path = Vec::new();
    loop {
        let start = i;
        while i < chars.len() && is_ident(chars[i]) {
            i += 1;
        }
        if i == start {
            break;
        }
        path.push(chars[start..i].iter().collect());
        if chars.get(i) == Some(&':') && chars.get(i + 1) == Some(&':') {
            i += 2;
        } else {
            break;
        }
    }
    (path, i)
}

/// The modules a file declares (`mod x;` / `pub mod x;`).
fn children(code: &str) -> BTreeSet<String> {
    code.lines()
        .filter_map(|l| {
            let l = l.trim();
            let l = l.strip_prefix("pub ").unwrap_or(l);
            let l = l.strip_prefix("pub(crate) ").unwrap_or(l);
            l.strip_prefix("mod ")?
                .strip_suffix(';')
                .map(str::to_string)
        })
        .collect()
}

impl Crate {
    /// The file a path names: the longest prefix that is a file's module.
    fn file_of(&self, module: &[String]) -> Option<Vec<String>> {
        (0..=module.len())
            .rev()
            .map(|n| module[..n].to_vec())
            .find(|m| self.files.contains_key(m))
    }

    /// file -> the files it names.
    pub fn edges(&self) -> BTreeMap<Vec<String>, BTreeSet<Vec<String>>> {
        let mut edges: BTreeMap<Vec<String>, BTreeSet<Vec<String>>> = BTreeMap::new();
        for (module, (_, code)) in &self.files {
            let kids = children(code);
            let mut starts: BTreeSet<String> = ["crate", "super", "self"].map(String::from).into();
            starts.extend(kids.iter().cloned());
            for path in paths(code, &starts) {
                let mut target: Vec<String> = match path[0].as_str() {
                    "crate" => Vec::new(),
                    "self" => module.clone(),
                    "super" => module[..module.len().saturating_sub(1)].to_vec(),
                    _ => module.clone(),
                };
                let mut rest = &path[..];
                match path[0].as_str() {
                    "crate" | "self" => rest = &path[1..],
                    "super" => {
                        rest = &path[1..];
                        while rest.first().is_some_and(|s| s == "super") {
                            target.pop();
                            rest = &rest[1..];
                        }
                    }
                    _ => {}
                }
                target.extend(rest.iter().cloned());
                if let Some(file) = self.file_of(&target)
                    && &file != module
                    && !file.is_empty()
                {
                    edges.entry(module.clone()).or_default().insert(file);
                }
            }
        }
        edges
    }
}

pub fn find_cycle(edges: &BTreeMap<Vec<String>, BTreeSet<Vec<String>>>) -> Option<Vec<String>> {
    fn visit(
        n: &Vec<String>,
        edges: &BTreeMap<Vec<String>, BTreeSet<Vec<String>>>,
        path: &mut Vec<Vec<String>>,
        done: &mut BTreeSet<Vec<String>>,
    ) -> Option<Vec<String>> {
        if let Some(i) = path.iter().position(|p| p == n) {
            let mut cycle: Vec<String> = path[i..].iter().map(|m| m.join("::")).collect();
            cycle.push(n.join("::"));
            return Some(cycle);
        }
        if done.contains(n) {
            return None;
        }
        path.push(n.clone());
        for m in edges.get(n).into_iter().flatten() {
            if let Some(c) = visit(m, edges, path, done) {
                return Some(c);
            }
        }
        path.pop();
        done.insert(n.clone());
        None
    }
    let mut done = BTreeSet::new();
    edges
        .keys()
        .find_map(|n| visit(n, edges, &mut Vec::new(), &mut done))
}

/// Every group of files that reach each other (strongly connected, more
/// than one file), so that one run names every cycle.
pub fn cycles(edges: &BTreeMap<Vec<String>, BTreeSet<Vec<String>>>) -> Vec<Vec<String>> {
    let reach = |from: &Vec<String>| {
        let mut seen = BTreeSet::new();
        let mut stack = vec![from.clone()];
        while let Some(n) = stack.pop() {
            for m in edges.get(&n).into_iter().flatten() {
                if seen.insert(m.clone()) {
                    stack.push(m.clone());
                }
            }
        }
        seen
    };
    let reached: BTreeMap<&Vec<String>, BTreeSet<Vec<String>>> =
        edges.keys().map(|n| (n, reach(n))).collect();
    let mut groups: BTreeSet<Vec<String>> = BTreeSet::new();
    for (n, r) in &reached {
        let group: Vec<String> = r
            .iter()
            .filter(|m| reached.get(m).is_some_and(|back| back.contains(*n)))
            .map(|m| m.join("::"))
            .collect();
        if group.len() > 1 {
            groups.insert(group);
        }
    }
    groups.into_iter().collect()
}

#[test]
fn the_file_scan_reads_groups_supers_and_children() {
    let starts: BTreeSet<String> = ["crate", "super", "self", "kid"].map(String::from).into();
    let p = paths(
        "use crate::{a, b::c};\nuse super::super::x::Y;\nlet z = kid::f(); notkid::g; my_crate::h;",
        &starts,
    );
    let p: Vec<String> = p.iter().map(|p| p.join("::")).collect();
    assert_eq!(
        p,
        ["crate::a", "crate::b::c", "super::super::x::Y", "kid::f"]
    );
    assert_eq!(
        code("let s = \"crate::x\"; // crate::y\n"),
        "let s = \"\"; \n"
    );
    let mut edges = BTreeMap::new();
    let (a, b) = (vec!["a".to_string()], vec!["b".to_string()]);
    edges.insert(a.clone(), BTreeSet::from([b.clone()]));
    edges.insert(b.clone(), BTreeSet::from([a.clone()]));
    assert_eq!(find_cycle(&edges).unwrap(), ["a", "b", "a"]);
    assert_eq!(cycles(&edges), [["a", "b"]]);
}

#[test]
fn the_files_of_ops_and_src_form_no_cycle() {
    for dir in ["ops/src", "src"] {
        let krate = load(&root().join(dir));
        let edges = krate.edges();
        let commands: Vec<String> = ["commands".into()].into();
        assert!(
            edges.values().flatten().any(|m| m.starts_with(&commands)),
            "the scan of {dir} finds no edge into commands: {edges:?}"
        );
        let groups = cycles(&edges);
        assert!(
            groups.is_empty(),
            "file cycles in {dir}: {}{}",
            groups
                .iter()
                .map(|g| format!("{{{}}}", g.join(", ")))
                .collect::<Vec<_>>()
                .join(" "),
            find_cycle(&edges)
                .map(|c| format!(" (one: {})", c.join(" -> ")))
                .unwrap_or_default()
        );
    }
}

#[test]
fn ops_has_no_clap_and_names_no_exit_code() {
    let manifest = std::fs::read_to_string(root().join("ops/Cargo.toml")).unwrap();
    assert!(!manifest.contains("clap"), "ops/Cargo.toml names clap");
    let krate = load(&root().join("ops/src"));
    let mut found = Vec::new();
    for (path, code) in krate.files.values() {
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
    for (path, code) in krate.files.values() {
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

#[test]
fn no_ops_command_imports_another() {
    let krate = load(&root().join("ops/src"));
    let edges = krate.edges();
    let command_of = |m: &Vec<String>| -> Option<String> {
        (m.len() >= 2 && m[0] == "commands").then(|| m[1].clone())
    };
    let mut found = Vec::new();
    for (from, tos) in &edges {
        let Some(own) = command_of(from) else {
            continue;
        };
        for to in tos {
            if let Some(other) = command_of(to)
                && other != own
            {
                found.push(format!("{} uses {}", from.join("::"), to.join("::")));
            }
        }
    }
    assert!(
        edges.keys().any(|m| command_of(m).is_some()),
        "the scan finds no command"
    );
    assert!(found.is_empty(), "{}", found.join("; "));
}

/// The binary crate is arguments → options → ops → render → exit code: a
/// line budget, each command's `run` one screen long, and none of the
/// crates that do the work named outside what it converts.
#[test]
fn src_holds_no_flow_logic() {
    let krate = load(&root().join("src"));
    let lines: usize = krate
        .files
        .values()
        .map(|(_, code)| code.lines().count())
        .sum();
    assert!(
        lines <= 2500,
        "src/ has {lines} lines of code (budget 2500)"
    );
    let mut long = Vec::new();
    for (path, code) in krate.files.values() {
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
    for (path, code) in krate.files.values() {
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
