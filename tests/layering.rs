//! The binary crate's modules form no cycle, and no command imports another
//! (what two commands share lives in a module below them). Read from the
//! `crate::` and `super::` paths of `src/`: a `use` or a qualified path.
//! No crate of the workspace has a cycle between its files (the rule is in
//! `layering/modgraph.rs`).

#[path = "layering/modgraph.rs"]
mod modgraph;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// File-level checks of `ops/` and `src/` (cycles of files, no clap or exit
/// code in ops, no flow logic in src).
#[path = "layering/files.rs"]
mod files;

/// The crate's modules: the file's first path component under `src/`
/// (`commands/optimize.rs` is in `commands`), `lib.rs` and `main.rs` aside.
fn sources(dir: &Path) -> Vec<(PathBuf, String)> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                let rel = path.strip_prefix(dir).unwrap().to_path_buf();
                let text = std::fs::read_to_string(&path).unwrap();
                out.push((rel, text));
            }
        }
    }
    out.sort();
    out
}

/// The text without `//` comments (doc comments name modules freely).
fn code(text: &str) -> String {
    text.lines()
        .map(|l| match l.find("//") {
            Some(i) => &l[..i],
            None => l,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

fn is_ident(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

/// The first segment after each `prefix` (`crate::a::b` -> `a`;
/// `crate::{a, b::c}` -> `a`, `b`).
fn targets(code: &str, prefix: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let mut rest = code;
    while let Some(i) = rest.find(prefix) {
        let before = rest[..i].chars().next_back();
        rest = &rest[i + prefix.len()..];
        if before.is_some_and(is_ident) {
            continue;
        }
        if let Some(group) = rest.strip_prefix('{') {
            let end = group.find('}').unwrap_or(group.len());
            for item in group[..end].split(',') {
                let name: String = item.trim().chars().take_while(|&c| is_ident(c)).collect();
                if !name.is_empty() {
                    out.insert(name);
                }
            }
        } else {
            let name: String = rest.chars().take_while(|&c| is_ident(c)).collect();
            if !name.is_empty() {
                out.insert(name);
            }
        }
    }
    out
}

fn module_of(rel: &Path) -> Option<String> {
    let first = rel.components().next()?.as_os_str().to_str()?;
    let name = first.strip_suffix(".rs").unwrap_or(first);
    (name != "lib" && name != "main").then(|| name.to_string())
}

fn find_cycle(edges: &BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
    fn visit(
        n: &str,
        edges: &BTreeMap<String, BTreeSet<String>>,
        path: &mut Vec<String>,
        done: &mut BTreeSet<String>,
    ) -> Option<Vec<String>> {
        if let Some(i) = path.iter().position(|p| p == n) {
            let mut cycle = path[i..].to_vec();
            cycle.push(n.to_string());
            return Some(cycle);
        }
        if done.contains(n) {
            return None;
        }
        path.push(n.to_string());
        for m in edges.get(n).into_iter().flatten() {
            if let Some(c) = visit(m, edges, path, done) {
                return Some(c);
            }
        }
        path.pop();
        done.insert(n.to_string());
        None
    }
    let mut done = BTreeSet::new();
    edges
        .keys()
        .find_map(|n| visit(n, edges, &mut Vec::new(), &mut done))
}

/// The binary crate's sources and the `ops` crate's: the same rules hold
/// in both.
fn crates() -> [(PathBuf, &'static str); 2] {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    // (folder, a module its commands surely use: the scan must see that edge)
    [(root.join("src"), "exit"), (root.join("ops/src"), "stages")]
}

#[test]
fn the_modules_of_src_form_no_cycle() {
    for (dir, used) in crates() {
        modules_form_no_cycle(&dir, used);
    }
}

fn modules_form_no_cycle(dir: &Path, used: &str) {
    let files = sources(dir);
    let modules: BTreeSet<String> = files.iter().filter_map(|(p, _)| module_of(p)).collect();
    let mut edges: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (rel, text) in &files {
        let Some(from) = module_of(rel) else { continue };
        for to in targets(&code(text), "crate::") {
            if to != from && modules.contains(&to) {
                edges.entry(from.clone()).or_default().insert(to);
            }
        }
    }
    assert!(
        edges.get("commands").is_some_and(|e| e.contains(used)),
        "the scan finds no edge: {edges:?}"
    );
    if let Some(cycle) = find_cycle(&edges) {
        panic!("module cycle in {}: {}", dir.display(), cycle.join(" -> "));
    }
}

#[test]
fn no_command_imports_another() {
    for (dir, _) in crates() {
        no_command_imports_another_in(&dir);
    }
}

fn no_command_imports_another_in(dir: &Path) {
    let files = sources(dir);
    let commands: BTreeSet<String> = files
        .iter()
        .filter_map(|(p, _)| {
            let mut c = p.components();
            (c.next()?.as_os_str() == "commands")
                .then(|| c.next())
                .flatten()
                .and_then(|f| f.as_os_str().to_str())
                .map(|f| f.trim_end_matches(".rs").to_string())
                .filter(|f| f != "mod")
        })
        .collect();
    assert!(commands.contains("optimize") && commands.contains("bench"));
    let mut found = Vec::new();
    for (rel, text) in &files {
        let parts: Vec<&str> = rel.iter().filter_map(|p| p.to_str()).collect();
        if parts.first() != Some(&"commands") || parts.len() < 2 || parts[1] == "mod.rs" {
            continue;
        }
        let own = parts[1].trim_end_matches(".rs");
        let text = code(text);
        let mut used = targets(&text, "crate::commands::");
        // `super::` in commands/X.rs is `commands`; deeper, it is the command itself.
        if parts.len() == 2 {
            used.extend(targets(&text, "super::"));
        }
        for other in used {
            if other != own && commands.contains(&other) {
                found.push(format!("{} uses commands::{other}", rel.display()));
            }
        }
    }
    assert!(found.is_empty(), "{}", found.join("; "));
}

#[test]
fn the_scan_reads_grouped_and_nested_paths() {
    let t = targets(
        "use crate::{a, b::c, d::{e}};\nlet x = crate::f::g(); mycrate::h;",
        "crate::",
    );
    assert_eq!(t, BTreeSet::from(["a", "b", "d", "f"].map(String::from)));
    let mut edges = BTreeMap::new();
    edges.insert("a".to_string(), BTreeSet::from(["b".to_string()]));
    edges.insert("b".to_string(), BTreeSet::from(["a".to_string()]));
    assert_eq!(find_cycle(&edges).unwrap(), ["a", "b", "a"]);
}

/// The source folder of every crate: the workspace members named in the
/// root `Cargo.toml`, plus the root package's `src/`.
fn crate_folders() -> Vec<(String, PathBuf)> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let manifest = std::fs::read_to_string(root.join("Cargo.toml")).unwrap();
    let start = manifest
        .find("members")
        .expect("a [workspace] members list");
    let list = &manifest[start..];
    let list = &list[list.find('[').unwrap() + 1..list.find(']').unwrap()];
    let mut out: Vec<(String, PathBuf)> = list
        .split(',')
        .map(|m| m.trim().trim_matches('"').to_string())
        .filter(|m| !m.is_empty())
        .map(|m| (m.clone(), root.join(&m).join("src")))
        .collect();
    out.push(("src".to_string(), root.join("src")));
    out
}

#[test]
fn every_workspace_crate_is_scanned() {
    let names: Vec<String> = crate_folders().into_iter().map(|(n, _)| n).collect();
    for expected in [
        "ir",
        "passes",
        "calibration",
        "runtime",
        "verify",
        "python",
        "fuzz",
        "src",
    ] {
        assert!(
            names.iter().any(|n| n == expected),
            "{expected} missing from {names:?}"
        );
    }
    for (name, dir) in crate_folders() {
        assert!(
            dir.join("lib.rs").exists() || dir.join("main.rs").exists(),
            "{name}: no crate root in {}",
            dir.display()
        );
    }
}

#[test]
fn no_crate_has_a_file_level_module_cycle() {
    let mut failures = Vec::new();
    let mut total_edges = 0;
    for (name, dir) in crate_folders() {
        let g = modgraph::graph(&modgraph::read_folder(&dir));
        total_edges += g.edges.values().map(|e| e.len()).sum::<usize>();
        let found = modgraph::cycles(&g);
        let lines: Vec<String> = found
            .iter()
            .map(|c| format!("  {name}: {}", modgraph::describe(&g, c)))
            .collect();
        failures.extend(lines);
    }
    assert!(
        total_edges > 100,
        "the scan finds almost no dependency ({total_edges} edges)"
    );
    assert!(
        failures.is_empty(),
        "file-level module cycles (file:line -> file it uses):\n{}",
        failures.join("\n")
    );
}

/// `passes` holds the pipeline, not the job (DESIGN.md, "One job, resolved
/// once"): no type of gates, verification or tolerances, and no tolerance
/// value, in its code. Names are read from the code (comments and strings
/// blanked); a type counts by its name, a value by the field and constant
/// names a tolerance goes by.
#[test]
fn passes_holds_no_gate_or_tolerance_types() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("passes/src");
    let sources = modgraph::read_folder(&dir);
    assert!(sources.len() > 20, "passes/src not read");
    let job_words = ["gate", "tolerance", "verif", "criterion"];
    let tolerance_names = ["rtol", "atol", "min_cosine", "max_scaled_error"];
    let mut found = Vec::new();
    for source in &sources {
        let stem = source.path.to_string_lossy().to_lowercase();
        if job_words.iter().any(|w| stem.contains(w)) {
            found.push(format!(
                "{}: a module named for the job",
                source.path.display()
            ));
        }
        let toks = modgraph::tokens(&modgraph::blank(&source.text));
        for w in toks.windows(2) {
            let (kw, name) = (w[0].text.as_str(), w[1].text.as_str());
            let lower = name.to_lowercase();
            if matches!(kw, "struct" | "enum" | "type" | "trait")
                && job_words.iter().any(|j| lower.contains(j))
            {
                found.push(format!(
                    "{}:{}: {kw} {name}",
                    source.path.display(),
                    w[1].line
                ));
            }
        }
        for t in &toks {
            let lower = t.text.to_lowercase();
            if tolerance_names
                .iter()
                .any(|n| lower == *n || lower.ends_with(&format!("_{n}")))
            {
                found.push(format!("{}:{}: {}", source.path.display(), t.line, t.text));
            }
        }
    }
    assert!(
        found.is_empty(),
        "passes holds the job's settings: {}",
        found.join("; ")
    );
}

#[test]
fn the_job_settings_check_sees_a_gate_type() {
    // The check above reads type names: a gate type would be seen.
    let toks = modgraph::tokens(&modgraph::blank(
        "pub struct GatesConfig { min_cosine: f64 }",
    ));
    assert!(
        toks.windows(2)
            .any(|w| w[0].text == "struct" && w[1].text.to_lowercase().contains("gate"))
    );
    assert!(toks.iter().any(|t| t.text == "min_cosine"));
}

/// `passes` returns no command-line text: its errors and notes say what is
/// wrong in the pipeline's terms, and a front end adds how its user spells
/// the fix (`--fp16`, a keyword argument). Read from the code before the
/// first `#[cfg(test)]` (tests may word messages as a front end does), with
/// `//` comments removed: `--` then a letter there is inside a string.
#[test]
fn passes_returns_no_command_line_flags() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("passes/src");
    let mut found = Vec::new();
    for source in modgraph::read_folder(&dir) {
        let shipped = source.text.split("#[cfg(test)]").next().unwrap_or("");
        for (i, line) in code(shipped).lines().enumerate() {
            if let Some(at) = flag_at(line) {
                found.push(format!(
                    "{}:{}: {}",
                    source.path.display(),
                    i + 1,
                    &line[at..]
                ));
            }
        }
    }
    assert!(
        found.is_empty(),
        "flag text in passes: {}",
        found.join("; ")
    );
}

/// Where `--` followed by a lowercase letter starts in `line`.
fn flag_at(line: &str) -> Option<usize> {
    line.match_indices("--").map(|(i, _)| i).find(|&i| {
        line[i + 2..].starts_with(|c: char| c.is_ascii_lowercase())
            && !line[..i].ends_with(|c: char| c.is_ascii_alphanumeric())
    })
}

#[test]
fn the_flag_check_sees_a_flag_in_a_message() {
    assert_eq!(flag_at(r#"Err(format!("add --fp16 or --bf16"))"#), Some(17));
    assert_eq!(flag_at(&code("let x = a - -b; // --fp16")), None);
    assert_eq!(flag_at("x-->y"), None);
}
