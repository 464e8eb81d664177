//! The file-level module graph of one crate's source folder, read from the
//! text (no compiler, no dependencies), and its cycles.
//!
//! # The rule
//! Each `.rs` file under the folder is one node, named by its module path
//! (`a/b.rs` and `a/b/mod.rs` are `a::b`; `lib.rs` is the root, ``).
//! File A depends on file B when A's code names an item of B:
//! - a path that resolves into B: `crate::b::x`, `super::x` or `super::b::x`
//!   (inline `mod tests { … }` blocks count as levels of their own, so a
//!   test module's `super::` is its own file), `self::b::x`, or `b::x` where
//!   `b` is a child module of A or a name A imported with `use`;
//! - a private `use` of such a path (an import is there to be used);
//! - a `pub use` (a re-export) only where A's own code also uses the name it
//!   binds: re-exporting is declaring, like `mod b;`, and a path through a
//!   re-export resolves to the file that defines the item (`crate::X` with
//!   `pub use b::X;` in `lib.rs` is a dependency on `b`, not on `lib.rs`).
//!
//! A path resolves to the deepest module file it walks through: `crate::a::B`
//! is `a` when `a/b.rs` does not exist. Declaring `mod b;` is no dependency,
//! so a parent and its child form a cycle only when each uses the other's
//! items.
//!
//! Test code is left out: an item under `#[cfg(test)]` (a `mod tests { … }`,
//! a test-only `use`) and a file declared only under it (`#[cfg(test)] mod
//! testutil;`). A test is a client of the module, as an integration test
//! is: a rule's unit test that runs the driver which dispatches to the rule
//! is no cycle in the code that ships.
//!
//! A macro invocation's argument that is the bare name of a child module
//! names that child: `builtin_passes! { fold_constants, … }` in `lib.rs`
//! expands to `fold_constants::INFO`.
//!
//! Comments, strings and character literals are blanked first; `pub(in path)`
//! is a visibility, not a use. Method calls are not paths: a dependency
//! reached only through `value.method()` is not seen.
//!
//! A cycle is a strongly connected component of more than one file.
//!
//! `main.rs` beside a `lib.rs` is a crate of its own that reaches the library
//! by name: it adds no edge between the library's files and is left out.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// A module path: `["a", "b"]` for `crate::a::b`, empty for the crate root.
pub type ModPath = Vec<String>;

/// The module graph of one crate: nodes, and for each dependency the first
/// line (1-based) of the file that names it.
#[derive(Debug, Default)]
pub struct Graph {
    pub files: BTreeMap<ModPath, PathBuf>,
    pub edges: BTreeMap<ModPath, BTreeMap<ModPath, usize>>,
}

/// One file of a crate, by module path, with its text.
pub struct Source {
    pub module: ModPath,
    pub path: PathBuf,
    pub text: String,
}

/// The `.rs` files of a source folder (`<crate>/src`) as module sources.
pub fn read_folder(dir: &Path) -> Vec<Source> {
    let mut files = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                files.push(path);
            }
        }
    }
    files.sort();
    let has_lib = dir.join("lib.rs").exists();
    files
        .into_iter()
        .filter_map(|path| {
            let rel = path.strip_prefix(dir).unwrap().to_path_buf();
            if has_lib && rel == Path::new("main.rs") {
                return None;
            }
            let text = std::fs::read_to_string(&path).unwrap();
            Some(Source {
                module: module_path(&rel),
                path: rel,
                text,
            })
        })
        .collect()
}

/// `a/b.rs` and `a/b/mod.rs` -> `["a", "b"]`; `lib.rs`, `main.rs` -> `[]`.
pub fn module_path(rel: &Path) -> ModPath {
    let mut parts: Vec<String> = rel
        .iter()
        .map(|p| p.to_string_lossy().into_owned())
        .collect();
    if let Some(last) = parts.pop() {
        let stem = last.trim_end_matches(".rs");
        let root_file = parts.is_empty() && (stem == "lib" || stem == "main");
        if stem != "mod" && !root_file {
            parts.push(stem.to_string());
        }
    }
    parts
}

/// The text with comments, string literals and character literals replaced
/// by spaces (newlines kept, so line numbers hold).
pub fn blank(text: &str) -> String {
    let c: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    let ident = |ch: char| ch.is_alphanumeric() || ch == '_';
    let keep_newlines = |s: &[char], out: &mut String| {
        for &ch in s {
            out.push(if ch == '\n' { '\n' } else { ' ' });
        }
    };
    let mut i = 0;
    while i < c.len() {
        let prev_ident = i > 0 && ident(c[i - 1]);
        let end = if c[i] == '/' && c.get(i + 1) == Some(&'/') {
            c[i..]
                .iter()
                .position(|&ch| ch == '\n')
                .map_or(c.len(), |n| i + n)
        } else if c[i] == '/' && c.get(i + 1) == Some(&'*') {
            let (mut depth, mut j) = (1, i + 2);
            while j < c.len() && depth > 0 {
                if c[j] == '/' && c.get(j + 1) == Some(&'*') {
                    depth += 1;
                    j += 1;
                } else if c[j] == '*' && c.get(j + 1) == Some(&'/') {
                    depth -= 1;
                    j += 1;
                }
                j += 1;
            }
            j
        } else if c[i] == 'r'
            && (!prev_ident || (i > 0 && c[i - 1] == 'b' && (i < 2 || !ident(c[i - 2]))))
            && {
                let hashes = c[i + 1..].iter().take_while(|&&ch| ch == '#').count();
                c.get(i + 1 + hashes) == Some(&'"')
            }
        {
            let hashes = c[i + 1..].iter().take_while(|&&ch| ch == '#').count();
            let mut j = i + 2 + hashes;
            while j < c.len()
                && !(c[j] == '"'
                    && c[j + 1..]
                        .iter()
                        .take(hashes)
                        .filter(|&&ch| ch == '#')
                        .count()
                        == hashes)
            {
                j += 1;
            }
            (j + 1 + hashes).min(c.len())
        } else if c[i] == '"' {
            let mut j = i + 1;
            while j < c.len() && c[j] != '"' {
                j += if c[j] == '\\' { 2 } else { 1 };
            }
            (j + 1).min(c.len())
        } else if c[i] == '\'' && c.get(i + 1) == Some(&'\\') {
            let mut j = i + 2;
            while j < c.len() && c[j] != '\'' {
                j += 1;
            }
            (j + 1).min(c.len())
        } else if c[i] == '\'' && c.get(i + 2) == Some(&'\'') {
            i + 3
        } else {
            out.push(c[i]);
            i += 1;
            continue;
        };
        keep_newlines(&c[i..end], &mut out);
        i = end;
    }
    out
}

/// A token: an identifier or keyword, `::`, or one punctuation character.
#[derive(Debug, Clone, PartialEq)]
pub struct Tok {
    pub text: String,
    pub line: usize,
}

pub fn tokens(code: &str) -> Vec<Tok> {
    let c: Vec<char> = code.chars().collect();
    let mut out = Vec::new();
    let (mut i, mut line) = (0, 1);
    while i < c.len() {
        let ch = c[i];
        if ch == '\n' {
            line += 1;
            i += 1;
        } else if ch.is_whitespace() {
            i += 1;
        } else if ch.is_alphanumeric() || ch == '_' {
            let n = c[i..]
                .iter()
                .take_while(|&&x| x.is_alphanumeric() || x == '_')
                .count();
            out.push(Tok {
                text: c[i..i + n].iter().collect(),
                line,
            });
            i += n;
        } else if ch == ':' && c.get(i + 1) == Some(&':') {
            out.push(Tok {
                text: "::".into(),
                line,
            });
            i += 2;
        } else {
            out.push(Tok {
                text: ch.to_string(),
                line,
            });
            i += 1;
        }
    }
    out
}

/// One path a file names, with where it stands: the inline modules around
/// it (`mod tests { … }`) and the line.
#[derive(Debug, Clone)]
struct Named {
    inline: Vec<String>,
    segs: Vec<String>,
    line: usize,
}

/// One name a `use` binds (`None` for a glob or `as _`).
#[derive(Debug, Clone)]
struct Import {
    path: Named,
    binding: Option<String>,
    public: bool,
}

/// What one file names: its imports and the other paths in its code.
#[derive(Debug, Default)]
struct FileScan {
    imports: Vec<Import>,
    paths: Vec<Named>,
    /// How often each identifier appears outside `use` items.
    idents: BTreeMap<String, usize>,
    /// `#[macro_export]` macros defined here (they live at the crate root).
    macros: BTreeSet<String>,
    /// Child modules declared only for tests (`#[cfg(test)] mod x;`).
    test_children: BTreeSet<String>,
    /// Bare identifiers passed to macro invocations outside inline modules,
    /// with their lines.
    macro_args: Vec<(String, usize)>,
}

/// At `toks[i]`, the `#` of `#[cfg(test)]` or `#[cfg(all(test, …))]`.
fn is_cfg_test(toks: &[Tok], i: usize) -> bool {
    let t: Vec<&str> = toks[i..].iter().take(7).map(|t| t.text.as_str()).collect();
    matches!(t.as_slice(), ["#", "[", "cfg", "(", "test", ")", "]"])
        || matches!(t.as_slice(), ["#", "[", "cfg", "(", "all", "(", "test", ..])
}

/// The index after the item that starts at `toks[i]`: after its `;` or
/// after the `}` that closes its first `{`.
fn item_end(toks: &[Tok], mut i: usize) -> usize {
    // Skip the attribute itself (and any following ones) first.
    while toks.get(i).is_some_and(|t| t.text == "#") {
        let mut depth = 0;
        while i < toks.len() {
            match toks[i].text.as_str() {
                "[" => depth += 1,
                "]" => {
                    depth -= 1;
                    if depth == 0 {
                        i += 1;
                        break;
                    }
                }
                _ => {}
            }
            i += 1;
        }
    }
    let mut depth = 0;
    while i < toks.len() {
        match toks[i].text.as_str() {
            ";" if depth == 0 => return i + 1,
            "{" => depth += 1,
            "}" => {
                depth -= 1;
                if depth == 0 {
                    return i + 1;
                }
            }
            _ => {}
        }
        i += 1;
    }
    i
}

fn is_ident(t: &str) -> bool {
    t.chars()
        .next()
        .is_some_and(|c| c.is_alphanumeric() || c == '_')
}

/// Parses a use tree at `toks[i..]` under `prefix`; returns the index after it.
fn use_tree(
    toks: &[Tok],
    mut i: usize,
    prefix: Vec<String>,
    out: &mut Vec<(Vec<String>, Option<String>)>,
) -> usize {
    let mut path = prefix;
    while i < toks.len() {
        let t = toks[i].text.as_str();
        if t == "::" {
            i += 1;
        } else if t == "{" {
            i += 1;
            while i < toks.len() && toks[i].text != "}" {
                if toks[i].text == "," {
                    i += 1;
                } else {
                    i = use_tree(toks, i, path.clone(), out);
                }
            }
            return i + 1;
        } else if t == "*" {
            out.push((path, None));
            return i + 1;
        } else if is_ident(t) {
            path.push(t.to_string());
            i += 1;
            if toks.get(i).is_some_and(|t| t.text == "::") {
                continue;
            }
            if path.last().is_some_and(|s| s == "self") {
                path.pop();
            }
            let mut binding = path.last().cloned();
            if toks.get(i).is_some_and(|t| t.text == "as") {
                binding = toks.get(i + 1).map(|t| t.text.clone()).filter(|b| b != "_");
                i += 2;
            }
            out.push((path, binding));
            return i;
        } else {
            return i;
        }
    }
    i
}

fn scan(text: &str) -> FileScan {
    let toks = tokens(&blank(text));
    let mut scan = FileScan::default();
    // Inline modules open around the cursor: (name, brace depth inside it).
    let mut inline: Vec<(String, usize)> = Vec::new();
    let mut depth = 0usize;
    let mut exported = false;
    let mut i = 0;
    let text_at = |k: usize| toks.get(k).map_or("", |t| t.text.as_str());
    while i < toks.len() {
        let t = toks[i].text.as_str();
        let here: Vec<String> = inline.iter().map(|(n, _)| n.clone()).collect();
        if t == "#" && is_cfg_test(&toks, i) {
            let end = item_end(&toks, i);
            let item: Vec<&str> = toks[i..end].iter().map(|t| t.text.as_str()).collect();
            if let [.., "mod", name, ";"] = item.as_slice() {
                scan.test_children.insert(name.to_string());
            }
            i = end;
            continue;
        }
        match t {
            "macro_export" => exported = true,
            "macro_rules" if text_at(i + 1) == "!" && exported => {
                scan.macros.insert(text_at(i + 2).to_string());
            }
            "!" if is_ident(text_at(i.wrapping_sub(1)))
                && text_at(i.wrapping_sub(1)) != "macro_rules"
                && matches!(text_at(i + 1), "{" | "(" | "[")
                && inline.is_empty() =>
            {
                let mut level = 0usize;
                for t in &toks[i + 1..] {
                    match t.text.as_str() {
                        "{" | "(" | "[" => level += 1,
                        "}" | ")" | "]" => {
                            level -= 1;
                            if level == 0 {
                                break;
                            }
                        }
                        w if is_ident(w) => scan.macro_args.push((w.to_string(), t.line)),
                        _ => {}
                    }
                }
            }
            "!" if is_ident(text_at(i.wrapping_sub(1)))
                && text_at(i.wrapping_sub(1)) != "macro_rules"
                && matches!(text_at(i + 1), "{" | "(" | "[")
                && inline.is_empty() =>
            {
                let mut level = 0usize;
                for t in &toks[i + 1..] {
                    match t.text.as_str() {
                        "{" | "(" | "[" => level += 1,
                        "}" | ")" | "]" => {
                            level -= 1;
                            if level == 0 {
                                break;
                            }
                        }
                        w if is_ident(w) => scan.macro_args.push((w.to_string(), t.line)),
                        _ => {}
                    }
                }
            }
            "{" => depth += 1,
            "}" => {
                if inline.last().is_some_and(|(_, d)| *d == depth) {
                    inline.pop();
                }
                depth = depth.saturating_sub(1);
            }
            "mod" if is_ident(text_at(i + 1)) && text_at(i + 2) == "{" => {
                inline.push((text_at(i + 1).to_string(), depth + 1));
            }
            "use" if text_at(i.wrapping_sub(1)) != "::" => {
                // `pub use` or `pub(…) use`.
                let mut before = i.wrapping_sub(1);
                if text_at(before) == ")" {
                    while before < toks.len() && text_at(before) != "(" {
                        before = before.wrapping_sub(1);
                    }
                    before = before.wrapping_sub(1);
                }
                let public = text_at(before) == "pub";
                let mut trees = Vec::new();
                let end = use_tree(&toks, i + 1, Vec::new(), &mut trees);
                for (segs, binding) in trees {
                    let path = Named {
                        inline: here.clone(),
                        segs,
                        line: toks[i].line,
                    };
                    scan.imports.push(Import {
                        path,
                        binding,
                        public,
                    });
                }
                i = end;
                continue;
            }
            _ if is_ident(t) && text_at(i + 1) == "::" && text_at(i.wrapping_sub(1)) != "::" => {
                let visibility =
                    text_at(i.wrapping_sub(1)) == "in" && text_at(i.wrapping_sub(2)) == "(";
                let mut segs = vec![t.to_string()];
                let mut j = i + 1;
                while text_at(j) == "::" && is_ident(text_at(j + 1)) {
                    segs.push(text_at(j + 1).to_string());
                    j += 2;
                }
                if !visibility {
                    scan.paths.push(Named {
                        inline: here,
                        segs,
                        line: toks[i].line,
                    });
                }
            }
            _ => {}
        }
        if matches!(t, "{" | "}" | ";") {
            exported = false;
        }
        if is_ident(t) {
            *scan.idents.entry(t.to_string()).or_default() += 1;
        }
        i += 1;
    }
    scan
}

/// Builds the graph of a crate from its sources (see the module doc).
pub fn graph(sources: &[Source]) -> Graph {
    let mut scans: BTreeMap<ModPath, FileScan> = sources
        .iter()
        .map(|s| (s.module.clone(), scan(&s.text)))
        .collect();
    let test_only: BTreeSet<ModPath> = scans
        .iter()
        .flat_map(|(m, s)| {
            s.test_children.iter().map(move |c| {
                let mut child = m.clone();
                child.push(c.clone());
                child
            })
        })
        .collect();
    scans.retain(|m, _| !test_only.contains(m));
    let sources: Vec<&Source> = sources
        .iter()
        .filter(|s| !test_only.contains(&s.module))
        .collect();
    let resolver = Resolver { scans: &scans };
    let mut g = Graph {
        files: sources
            .iter()
            .map(|s| (s.module.clone(), s.path.clone()))
            .collect(),
        ..Graph::default()
    };
    for (from, scan) in &scans {
        let mut add = |to: Option<ModPath>, line: usize| {
            if let Some(to) = to.filter(|to| to != from) {
                let l = g
                    .edges
                    .entry(from.clone())
                    .or_default()
                    .entry(to)
                    .or_insert(line);
                *l = (*l).min(line);
            }
        };
        for import in &scan.imports {
            let used_here = import
                .binding
                .as_ref()
                .is_some_and(|b| scan.idents.contains_key(b));
            if !import.public || used_here {
                add(resolver.resolve(from, &import.path, 0), import.path.line);
            }
        }
        for path in &scan.paths {
            add(resolver.resolve(from, path, 0), path.line);
        }
        for (name, line) in &scan.macro_args {
            let mut child = from.clone();
            child.push(name.clone());
            if scans.contains_key(&child) {
                add(Some(child), *line);
            }
        }
    }
    g
}

struct Resolver<'a> {
    scans: &'a BTreeMap<ModPath, FileScan>,
}

impl Resolver<'_> {
    fn exists(&self, m: &[String]) -> bool {
        self.scans.contains_key(m)
    }

    /// The module file that `named`, written in `file`, resolves into; `None`
    /// for other crates, std, and names of the file's own scope.
    fn resolve(&self, file: &ModPath, named: &Named, depth: usize) -> Option<ModPath> {
        if depth > 8 || named.segs.is_empty() {
            return None;
        }
        let segs = &named.segs;
        let mut module = file.clone();
        let mut inline = named.inline.clone();
        let mut rest = &segs[1..];
        match segs[0].as_str() {
            "crate" => {
                module.clear();
                inline.clear();
            }
            "self" => {}
            "super" => {
                let supers = segs.iter().take_while(|s| *s == "super").count();
                for _ in 0..supers {
                    if inline.pop().is_none() {
                        module.pop()?;
                    }
                }
                rest = &segs[supers..];
            }
            first => {
                let scan = &self.scans[file];
                // `use x;` names `x` itself (a child or another crate).
                let bound = scan
                    .imports
                    .iter()
                    .find(|imp| imp.binding.as_deref() == Some(first) && imp.path.segs != [first]);
                if let Some(imp) = bound {
                    let mut segs = imp.path.segs.clone();
                    segs.extend(rest.iter().cloned());
                    let via = Named {
                        inline: imp.path.inline.clone(),
                        segs,
                        line: named.line,
                    };
                    return self.resolve(file, &via, depth + 1);
                }
                let mut child = file.clone();
                child.push(first.to_string());
                if !self.exists(&child) {
                    return None;
                }
                module = child;
                inline.clear();
            }
        }
        if !inline.is_empty() {
            return Some(module);
        }
        for seg in rest {
            let mut child = module.clone();
            child.push(seg.clone());
            if self.exists(&child) {
                module = child;
            } else if let Some(target) = self.reexport(&module, seg, depth) {
                // A re-export of another crate's item leaves this crate.
                module = target?;
            } else {
                break;
            }
        }
        Some(module)
    }

    /// Where `name`, re-exported by `module` with `pub use`, is defined
    /// (`Some(None)`: in another crate). An exported macro counts as
    /// re-exported by the root from the file that defines it.
    fn reexport(&self, module: &ModPath, name: &str, depth: usize) -> Option<Option<ModPath>> {
        if module.is_empty()
            && let Some((file, _)) = self.scans.iter().find(|(_, s)| s.macros.contains(name))
        {
            return Some(Some(file.clone()));
        }
        let scan = self.scans.get(module)?;
        let import = scan.imports.iter().find(|imp| {
            imp.public && imp.path.inline.is_empty() && imp.binding.as_deref() == Some(name)
        })?;
        Some(self.resolve(module, &import.path, depth + 1))
    }
}

/// The strongly connected components of more than one file (Tarjan), each
/// sorted, in order of their first member.
pub fn cycles(g: &Graph) -> Vec<Vec<ModPath>> {
    struct State<'a> {
        g: &'a Graph,
        index: BTreeMap<ModPath, usize>,
        low: BTreeMap<ModPath, usize>,
        stack: Vec<ModPath>,
        on_stack: BTreeSet<ModPath>,
        out: Vec<Vec<ModPath>>,
    }
    fn visit(s: &mut State, v: &ModPath) {
        let n = s.index.len();
        s.index.insert(v.clone(), n);
        s.low.insert(v.clone(), n);
        s.stack.push(v.clone());
        s.on_stack.insert(v.clone());
        let next: Vec<ModPath> =
            s.g.edges
                .get(v)
                .map(|e| e.keys().cloned().collect())
                .unwrap_or_default();
        for w in next {
            if !s.index.contains_key(&w) {
                visit(s, &w);
                let lw = s.low[&w];
                let lv = s.low.get_mut(v).unwrap();
                *lv = (*lv).min(lw);
            } else if s.on_stack.contains(&w) {
                let iw = s.index[&w];
                let lv = s.low.get_mut(v).unwrap();
                *lv = (*lv).min(iw);
            }
        }
        if s.low[v] == s.index[v] {
            let mut comp = Vec::new();
            while let Some(w) = s.stack.pop() {
                s.on_stack.remove(&w);
                let done = &w == v;
                comp.push(w);
                if done {
                    break;
                }
            }
            if comp.len() > 1 {
                comp.sort();
                s.out.push(comp);
            }
        }
    }
    let mut s = State {
        g,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        out: Vec::new(),
    };
    let nodes: Vec<ModPath> = g.files.keys().chain(g.edges.keys()).cloned().collect();
    for v in nodes {
        if !s.index.contains_key(&v) {
            visit(&mut s, &v);
        }
    }
    s.out.sort();
    s.out
}

/// One cycle as text: its files and the edges inside it with their lines.
pub fn describe(g: &Graph, comp: &[ModPath]) -> String {
    let name = |m: &ModPath| {
        g.files
            .get(m)
            .map_or_else(|| m.join("::"), |p| p.display().to_string())
    };
    let mut parts = Vec::new();
    for from in comp {
        for (to, line) in g.edges.get(from).into_iter().flatten() {
            if comp.contains(to) {
                parts.push(format!("{}:{line} -> {}", name(from), name(to)));
            }
        }
    }
    format!("[{}]", parts.join(", "))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(s: &str) -> ModPath {
        if s.is_empty() {
            Vec::new()
        } else {
            s.split("::").map(String::from).collect()
        }
    }

    /// A crate from `(file, text)` pairs.
    fn crate_of(files: &[(&str, &str)]) -> Graph {
        let sources: Vec<Source> = files
            .iter()
            .map(|(p, t)| Source {
                module: module_path(Path::new(p)),
                path: PathBuf::from(p),
                text: t.to_string(),
            })
            .collect();
        graph(&sources)
    }

    fn deps(g: &Graph, from: &str) -> Vec<String> {
        g.edges
            .get(&m(from))
            .map(|e| e.keys().map(|k| k.join("::")).collect())
            .unwrap_or_default()
    }

    #[test]
    fn module_paths_follow_the_file_layout() {
        assert_eq!(module_path(Path::new("lib.rs")), m(""));
        assert_eq!(module_path(Path::new("a/b.rs")), m("a::b"));
        assert_eq!(module_path(Path::new("a/mod.rs")), m("a"));
    }

    #[test]
    fn comments_strings_and_chars_are_blanked() {
        let code =
            blank("a // crate::x\n\"crate::y\" r#\"crate::\"z\"# '\"' b'\\'' /* crate::w */ 'a");
        assert!(!code.contains("crate"), "{code}");
        assert_eq!(code.lines().count(), 2);
        assert!(code.ends_with("'a"));
    }

    #[test]
    fn paths_resolve_to_the_deepest_module_file() {
        let g = crate_of(&[
            ("lib.rs", "mod a; mod b;"),
            ("a/mod.rs", "pub fn f() { crate::b::c::g(); }"),
            ("b/mod.rs", "pub mod c;"),
            ("b/c.rs", "use crate::{a::f as af, b};\npub fn g() {}"),
        ]);
        assert_eq!(deps(&g, "a"), ["b::c"]);
        assert_eq!(deps(&g, "b::c"), ["a", "b"]);
        assert_eq!(
            deps(&g, "b"),
            Vec::<String>::new(),
            "declaring `mod c` is no dependency"
        );
        assert_eq!(deps(&g, ""), Vec::<String>::new());
    }

    #[test]
    fn super_counts_inline_modules_as_levels() {
        let g = crate_of(&[
            ("lib.rs", "pub mod p;"),
            ("p/mod.rs", "pub mod c; pub struct S;"),
            (
                "p/c.rs",
                "use super::S;\n#[cfg(test)] mod tests { use super::*; fn t() { super::super::S; } }",
            ),
        ]);
        assert_eq!(deps(&g, "p::c"), ["p"]);
        let g = crate_of(&[
            ("lib.rs", "pub mod p;"),
            ("p/mod.rs", "pub mod c;"),
            ("p/c.rs", "mod tests { use super::*; }"),
        ]);
        assert_eq!(
            deps(&g, "p::c"),
            Vec::<String>::new(),
            "a test module's `super` is its own file"
        );
    }

    #[test]
    fn child_modules_and_imported_names_are_followed() {
        let g = crate_of(&[
            ("lib.rs", "mod a; mod b;"),
            ("a/mod.rs", "mod c; fn f() { c::g(); }"),
            ("a/c.rs", "pub fn g() {}"),
            (
                "b.rs",
                "use crate::a;\nfn f() { a::c::g(); std::mem::drop(1); }",
            ),
        ]);
        assert_eq!(deps(&g, "a"), ["a::c"]);
        assert_eq!(deps(&g, "b"), ["a", "a::c"]);
    }

    #[test]
    fn reexports_are_declarations_and_resolve_to_their_definition() {
        let g = crate_of(&[
            (
                "lib.rs",
                "pub mod a; pub mod b; pub use a::Thing; pub use serde as __serde;",
            ),
            ("a.rs", "pub struct Thing;"),
            ("b.rs", "use crate::Thing; fn f() { crate::__serde::x(); }"),
        ]);
        assert_eq!(
            deps(&g, ""),
            Vec::<String>::new(),
            "an unused re-export is no dependency"
        );
        assert_eq!(deps(&g, "b"), ["a"]);
        // A re-export the file itself uses is a dependency.
        let g = crate_of(&[
            (
                "lib.rs",
                "pub mod a; pub use a::Thing; pub fn make() -> Thing { Thing }",
            ),
            ("a.rs", "pub struct Thing;"),
        ]);
        assert_eq!(deps(&g, ""), ["a"]);
    }

    #[test]
    fn a_parent_and_child_using_each_other_is_a_cycle() {
        let sources = [
            ("lib.rs", "pub mod p;"),
            (
                "p/mod.rs",
                "mod c; pub struct Shared; fn f() { c::helper(); }",
            ),
            ("p/c.rs", "use super::Shared; pub fn helper() {}"),
        ];
        let g = crate_of(&sources);
        assert_eq!(cycles(&g), vec![vec![m("p"), m("p::c")]]);
        let text = describe(&g, &cycles(&g)[0]);
        assert_eq!(text, "[p/mod.rs:1 -> p/c.rs, p/c.rs:1 -> p/mod.rs]");
        // The child alone using the parent is layering, not a cycle.
        let g = crate_of(&[
            sources[0],
            ("p/mod.rs", "mod c; pub struct Shared;"),
            sources[2],
        ]);
        assert!(cycles(&g).is_empty());
    }

    #[test]
    fn exported_macros_belong_to_the_file_that_defines_them() {
        let g = crate_of(&[
            ("lib.rs", "pub mod r; pub mod p;"),
            (
                "r.rs",
                "#[macro_export]\n#[doc(hidden)]\nmacro_rules! reg { () => { $crate::r::f() } }\npub fn f() {}",
            ),
            ("p.rs", "crate::reg! {}"),
        ]);
        assert_eq!(deps(&g, "p"), ["r"]);
        assert_eq!(deps(&g, "r"), Vec::<String>::new());
    }

    #[test]
    fn test_code_is_left_out() {
        let g = crate_of(&[
            ("lib.rs", "pub mod p;"),
            (
                "p/mod.rs",
                "pub mod c;\n#[cfg(test)]\nmod testutil;\npub fn run() { c::rule(); }",
            ),
            (
                "p/c.rs",
                "pub fn rule() {}\n#[cfg(test)]\n#[allow(unused)]\nmod tests { use crate::p::run; fn t() { run(); } }",
            ),
            ("p/testutil.rs", "use super::c::rule;"),
        ]);
        assert_eq!(deps(&g, "p"), ["p::c"]);
        assert_eq!(deps(&g, "p::c"), Vec::<String>::new());
        assert!(!g.files.contains_key(&m("p::testutil")));
        // A test-only import is left out too; the next item is not.
        let g = crate_of(&[
            ("lib.rs", "mod a; mod b;"),
            ("a.rs", "#[cfg(test)]\nuse crate::b::x;\nuse crate::b::y;"),
            ("b.rs", ""),
        ]);
        assert_eq!(deps(&g, "a"), ["b"]);
        assert_eq!(g.edges[&m("a")][&m("b")], 3);
    }

    #[test]
    fn child_modules_named_in_a_macro_invocation_are_dependencies() {
        let g = crate_of(&[
            (
                "lib.rs",
                "macro_rules! list { ($($m:ident),*) => { $(pub mod $m;)* } }\nlist! { a, b }\nfn f() { println!(\"{}\", 1); }",
            ),
            ("a.rs", "use crate::registry::find;"),
            ("b.rs", ""),
            ("registry.rs", "pub fn find() { crate::all(); }"),
        ]);
        assert_eq!(deps(&g, ""), ["a", "b"]);
        assert_eq!(cycles(&g), vec![vec![m(""), m("a"), m("registry")]]);
    }

    #[test]
    fn visibility_paths_and_other_crates_are_not_dependencies() {
        let g = crate_of(&[
            ("lib.rs", "pub mod a;"),
            ("a/mod.rs", "pub mod b;"),
            ("a/b.rs", "pub(in crate::a) fn f() { other_crate::a::x(); }"),
        ]);
        assert!(g.edges.is_empty(), "{:?}", g.edges);
    }

    #[test]
    fn three_files_in_a_ring_are_one_cycle() {
        let g = crate_of(&[
            ("lib.rs", "mod a; mod b; mod c; mod d;"),
            ("a.rs", "use crate::b::x;"),
            ("b.rs", "fn f() { crate::c::y(); }"),
            ("c.rs", "use crate::a::{self};"),
            ("d.rs", "use crate::a::z;"),
        ]);
        assert_eq!(cycles(&g), vec![vec![m("a"), m("b"), m("c")]]);
    }
}
