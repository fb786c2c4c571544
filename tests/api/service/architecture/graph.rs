//! The library's module graph, read from its sources: every module (a file, or an inline `mod name { … }`), and
//! every path a module's code names that resolves into another module, with the file and line that names it.
//!
//! A reader, not a compiler: it lexes the sources (comments and literals dropped), follows `mod` blocks, expands
//! `use` trees, and resolves `crate::`, `super::`, `self::` and paths that start with a child module of the module
//! they are written in. Code under `#[cfg(test)]` is read too but marked, since test code may import anything.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// A module's path below the crate root (`["chain", "client"]`); the root is empty.
pub type ModPath = Vec<String>;

/// One path named in a module's code that resolves into another module of the crate.
#[derive(Debug, Clone)]
pub struct Import {
    pub from: ModPath,
    pub to: ModPath,
    /// The file and line that names it, relative to the crate (`src/chain/client.rs:12`).
    pub at: String,
    /// Inside `#[cfg(test)]` code, or in a module only compiled for tests.
    pub test: bool,
}

/// The modules of the library (the root included) with whether each exists only for tests, and the imports between
/// them.
pub struct Graph {
    pub modules: BTreeMap<ModPath, bool>,
    pub imports: Vec<Import>,
}

/// An import lifted to the folder where it crosses: in `folder`, child `from` names something in child `to`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct SiblingEdge {
    pub folder: ModPath,
    pub from: String,
    pub to: String,
}

impl Graph {
    /// Reads every `.rs` file under `src` except the binary's `main.rs`.
    pub fn read(root: &Path) -> Graph {
        let src = root.join("src");
        let mut files = Vec::new();
        super::source_files(&src, &mut files);
        files.sort();
        let mut scans = Vec::new();
        let mut modules: BTreeMap<ModPath, bool> = BTreeMap::new();
        for file in files {
            let relative = file.strip_prefix(&src).expect("under src").to_path_buf();
            let Some(module) = file_module(&relative) else {
                continue;
            };
            let text = std::fs::read_to_string(&file).expect("a readable source file");
            let shown = file.strip_prefix(root).unwrap_or(&file).display().to_string();
            let scan = scan(&text, &module, &shown);
            modules.entry(module).or_insert(false);
            for (declared, test) in &scan.declared {
                let entry = modules.entry(declared.clone()).or_insert(false);
                *entry |= *test;
            }
            scans.push(scan);
        }
        // A module only for tests makes everything below it only for tests.
        let test_roots: Vec<ModPath> = modules.iter().filter(|(_, t)| **t).map(|(m, _)| m.clone()).collect();
        for (module, test) in modules.iter_mut() {
            *test |= test_roots.iter().any(|r| module.starts_with(r));
        }
        let names: BTreeSet<ModPath> = modules.keys().cloned().collect();
        let mut imports = Vec::new();
        for scan in scans {
            for named in scan.named {
                let Some(to) = resolve(&named.from, &named.path, &names) else {
                    continue;
                };
                if to == named.from {
                    continue;
                }
                let test = named.test || modules[&named.from] || modules[&to];
                imports.push(Import {
                    from: named.from,
                    to,
                    at: named.at,
                    test,
                });
            }
        }
        Graph { modules, imports }
    }

    /// The modules compiled outside tests, the root aside.
    pub fn module_count(&self) -> usize {
        self.modules.iter().filter(|(m, test)| !m.is_empty() && !**test).count()
    }

    /// Every import outside test code between two modules where neither holds the other, lifted to the folder
    /// where their paths part, with the first file and line that makes it. A child naming its parent's items
    /// (`super::Item`), or a parent naming its children, is no edge: a parent and its descendants are not siblings.
    pub fn sibling_edges(&self) -> BTreeMap<SiblingEdge, String> {
        let mut edges = BTreeMap::new();
        for import in self.imports.iter().filter(|i| !i.test) {
            let common = import.from.iter().zip(&import.to).take_while(|(a, b)| a == b).count();
            if common == import.from.len() || common == import.to.len() {
                continue;
            }
            let edge = SiblingEdge {
                folder: import.from[..common].to_vec(),
                from: import.from[common].clone(),
                to: import.to[common].clone(),
            };
            edges.entry(edge).or_insert_with(|| import.at.clone());
        }
        edges
    }
}

/// The module a file holds: `chain/client.rs` and `chain/client/mod.rs` are `chain::client`, `lib.rs` the root.
fn file_module(relative: &Path) -> Option<ModPath> {
    let mut parts: Vec<String> = relative
        .components()
        .map(|c| c.as_os_str().to_str().expect("a UTF-8 path").to_string())
        .collect();
    let last = parts.pop()?;
    let stem = last.strip_suffix(".rs")?;
    match (parts.is_empty(), stem) {
        (true, "lib") => Some(Vec::new()),
        (true, "main") => None,
        (_, "mod") => Some(parts),
        _ => {
            parts.push(stem.to_string());
            Some(parts)
        }
    }
}

/// The module `path` (named in module `from`) lands in: the longest prefix that is a module. `None` when the path
/// starts outside the crate (another crate, a local name, an item brought in by `use`).
pub fn resolve(from: &[String], path: &[String], modules: &BTreeSet<ModPath>) -> Option<ModPath> {
    let (mut base, rest): (ModPath, &[String]) = match path.first().map(String::as_str) {
        Some("crate") => (Vec::new(), &path[1..]),
        Some("self") => (from.to_vec(), &path[1..]),
        Some("super") => {
            let ups = path.iter().take_while(|s| *s == "super").count();
            (from[..from.len().checked_sub(ups)?].to_vec(), &path[ups..])
        }
        Some(first) => {
            let mut child = from.to_vec();
            child.push(first.to_string());
            if !modules.contains(&child) {
                return None;
            }
            (from.to_vec(), path)
        }
        None => return None,
    };
    let mut found = base.clone();
    for segment in rest {
        base.push(segment.clone());
        if !modules.contains(&base) {
            break;
        }
        found = base.clone();
    }
    Some(found)
}

/// A path as written, before resolving.
#[derive(Debug)]
pub struct Named {
    pub from: ModPath,
    pub path: Vec<String>,
    pub at: String,
    pub test: bool,
}

/// What one file says: the paths its code names, and the modules it declares (`mod x;` or `mod x { … }`) with
/// whether each is under `#[cfg(test)]`.
pub struct Scan {
    pub named: Vec<Named>,
    pub declared: Vec<(ModPath, bool)>,
}

#[derive(Debug, Clone, PartialEq)]
enum Tok {
    Ident(String),
    PathSep,
    Punct(char),
}

/// The tokens of a source text with their lines, comments and literals left out.
fn lex(text: &str) -> Vec<(Tok, usize)> {
    let chars: Vec<char> = text.chars().collect();
    let mut out = Vec::new();
    let (mut i, mut line) = (0, 1);
    let at = |i: usize| chars.get(i).copied().unwrap_or('\0');
    // Skips a quoted literal whose opening quote is at `i`, with `hashes` `#` after the closing quote (raw when
    // `raw`); returns the index after it.
    let skip_quoted = |mut i: usize, raw: bool, hashes: usize, line: &mut usize| -> usize {
        i += 1;
        while i < chars.len() {
            match chars[i] {
                '\\' if !raw => i += 1,
                '\n' => *line += 1,
                '"' if (1..=hashes).all(|h| chars.get(i + h) == Some(&'#')) => return i + 1 + hashes,
                _ => {}
            }
            i += 1;
        }
        i
    };
    while i < chars.len() {
        let c = chars[i];
        if c == '\n' {
            line += 1;
            i += 1;
        } else if c.is_whitespace() {
            i += 1;
        } else if c == '/' && at(i + 1) == '/' {
            while i < chars.len() && chars[i] != '\n' {
                i += 1;
            }
        } else if c == '/' && at(i + 1) == '*' {
            let mut depth = 0;
            while i < chars.len() {
                if chars[i] == '/' && at(i + 1) == '*' {
                    depth += 1;
                    i += 2;
                } else if chars[i] == '*' && at(i + 1) == '/' {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    line += usize::from(chars[i] == '\n');
                    i += 1;
                }
            }
        } else if c == '"' {
            i = skip_quoted(i, false, 0, &mut line);
        } else if c == '\'' {
            // A character literal ('a', '\n', '\u{1F600}') or a lifetime ('a, 'static).
            if at(i + 1) == '\\' {
                i += 2;
                while i < chars.len() && chars[i] != '\'' {
                    i += 1;
                }
                i += 1;
            } else if at(i + 2) == '\'' {
                i += 3;
            } else {
                i += 1;
                while at(i).is_alphanumeric() || at(i) == '_' {
                    i += 1;
                }
            }
        } else if c.is_alphanumeric() || c == '_' {
            let start = i;
            while at(i).is_alphanumeric() || at(i) == '_' {
                i += 1;
            }
            let word: String = chars[start..i].iter().collect();
            let prefix = matches!(word.as_str(), "b" | "r" | "br" | "c" | "cr");
            if prefix && at(i) == '"' {
                i = skip_quoted(i, word.contains('r'), 0, &mut line);
            } else if prefix && word.contains('r') && at(i) == '#' && (at(i + 1) == '#' || at(i + 1) == '"') {
                let hashes = chars[i..].iter().take_while(|c| **c == '#').count();
                i = skip_quoted(i + hashes, true, hashes, &mut line);
            } else if word == "r" && at(i) == '#' {
                // A raw identifier (r#type).
                i += 1;
                let start = i;
                while at(i).is_alphanumeric() || at(i) == '_' {
                    i += 1;
                }
                out.push((Tok::Ident(chars[start..i].iter().collect()), line));
            } else if word == "b" && at(i) == '\'' {
                i += 1;
                if at(i) == '\\' {
                    i += 1;
                }
                i += 1;
                while i < chars.len() && chars[i] != '\'' {
                    i += 1;
                }
                i += 1;
            } else {
                out.push((Tok::Ident(word), line));
            }
        } else if c == ':' && at(i + 1) == ':' {
            out.push((Tok::PathSep, line));
            i += 2;
        } else {
            out.push((Tok::Punct(c), line));
            i += 1;
        }
    }
    out
}

/// Reads one file of module `module`, shown in messages as `shown`.
pub fn scan(text: &str, module: &[String], shown: &str) -> Scan {
    let toks = lex(text);
    let is = |i: usize, t: &Tok| toks.get(i).map(|(tok, _)| tok) == Some(t);
    let ident = |i: usize| match toks.get(i) {
        Some((Tok::Ident(s), _)) => Some(s.as_str()),
        _ => None,
    };
    let punct = |c: char| Tok::Punct(c);
    let mut out = Scan {
        named: Vec::new(),
        declared: Vec::new(),
    };
    // Open inline modules: their name, the brace depth inside them, and whether they are test code.
    let mut open: Vec<(String, usize)> = Vec::new();
    let mut depth = 0;
    // Token ranges of `#[cfg(test)]` items.
    let mut tests: Vec<(usize, usize)> = Vec::new();
    let current = |open: &[(String, usize)]| -> ModPath {
        let mut m = module.to_vec();
        m.extend(open.iter().map(|(name, _)| name.clone()));
        m
    };
    let mut i = 0;
    while i < toks.len() {
        let in_test = tests.iter().any(|(a, b)| (*a..*b).contains(&i));
        match &toks[i].0 {
            Tok::Punct('#') if is(i + 1, &punct('[')) => {
                let end = matching(&toks, i + 1);
                let attribute: Vec<&Tok> = toks[i + 2..end].iter().map(|(t, _)| t).collect();
                let cfg_test = [
                    Tok::Ident("cfg".into()),
                    punct('('),
                    Tok::Ident("test".into()),
                    punct(')'),
                ];
                if attribute.len() == 4 && attribute.iter().zip(&cfg_test).all(|(a, b)| *a == b) {
                    tests.push((i, item_end(&toks, end + 1)));
                }
            }
            Tok::Ident(word) if word == "mod" => {
                if let (Some(name), Some(Tok::Punct(next))) = (ident(i + 1), toks.get(i + 2).map(|(t, _)| t)) {
                    let mut declared = current(&open);
                    declared.push(name.to_string());
                    out.declared.push((declared, in_test));
                    if *next == '{' {
                        depth += 1;
                        open.push((name.to_string(), depth));
                        i += 3;
                        continue;
                    }
                }
            }
            Tok::Ident(word) if word == "use" => {
                let end = (i..toks.len()).find(|j| is(*j, &punct(';'))).unwrap_or(toks.len());
                for (path, line) in use_tree(&toks[i + 1..end], Vec::new()) {
                    out.named.push(Named {
                        from: current(&open),
                        path,
                        at: format!("{shown}:{line}"),
                        test: in_test,
                    });
                }
                i = end + 1;
                continue;
            }
            Tok::Ident(first) if is(i + 1, &Tok::PathSep) && !(i > 0 && is(i - 1, &Tok::PathSep)) => {
                let mut path = vec![first.clone()];
                let mut j = i + 1;
                while is(j, &Tok::PathSep)
                    && let Some(segment) = ident(j + 1)
                {
                    path.push(segment.to_string());
                    j += 2;
                }
                out.named.push(Named {
                    from: current(&open),
                    path,
                    at: format!("{shown}:{}", toks[i].1),
                    test: in_test,
                });
                i = j;
                continue;
            }
            Tok::Punct('{') => depth += 1,
            Tok::Punct('}') => {
                if open.last().is_some_and(|(_, d)| *d == depth) {
                    open.pop();
                }
                depth = depth.saturating_sub(1);
            }
            _ => {}
        }
        i += 1;
    }
    out
}

/// The index of the bracket closing the one at `open`.
fn matching(toks: &[(Tok, usize)], open: usize) -> usize {
    let mut depth = 0;
    for (j, (tok, _)) in toks.iter().enumerate().skip(open) {
        match tok {
            Tok::Punct('(' | '[' | '{') => depth += 1,
            Tok::Punct(')' | ']' | '}') => {
                depth -= 1;
                if depth == 0 {
                    return j;
                }
            }
            _ => {}
        }
    }
    toks.len()
}

/// Where the item starting at `start` (after an attribute) ends: past its first `;` outside brackets, or past its
/// first braced block, whichever comes first.
fn item_end(toks: &[(Tok, usize)], start: usize) -> usize {
    let mut j = start;
    while j < toks.len() {
        match toks[j].0 {
            Tok::Punct('#') if matches!(toks.get(j + 1), Some((Tok::Punct('['), _))) => j = matching(toks, j + 1),
            Tok::Punct('(' | '[') => j = matching(toks, j),
            Tok::Punct(';') => return j + 1,
            Tok::Punct('{') => return matching(toks, j) + 1,
            _ => {}
        }
        j += 1;
    }
    toks.len()
}

/// The paths a `use` tree names (`super::{a::{b, c}, d}` is `super::a::b`, `super::a::c`, `super::d`), each with
/// the line of its last segment. `self` in a group names the group's prefix; `*` and `as` end a path.
fn use_tree(toks: &[(Tok, usize)], prefix: Vec<String>) -> Vec<(Vec<String>, usize)> {
    if prefix.is_empty() && matches!(toks.first(), Some((Tok::PathSep, _))) {
        // `use ::name`: another crate.
        return Vec::new();
    }
    let mut path = prefix;
    let mut line = toks.first().map_or(0, |(_, l)| *l);
    let mut k = 0;
    while k < toks.len() {
        match &toks[k].0 {
            Tok::Ident(word) if word == "as" => break,
            Tok::Ident(word) if word == "self" && !path.is_empty() => {}
            Tok::Ident(word) => {
                path.push(word.clone());
                line = toks[k].1;
            }
            Tok::Punct('{') => {
                let end = matching(toks, k);
                let inner = &toks[k + 1..end.min(toks.len())];
                let mut found = Vec::new();
                let (mut start, mut nested) = (0, 0);
                for (j, (tok, _)) in inner.iter().enumerate() {
                    match tok {
                        Tok::Punct('{') => nested += 1,
                        Tok::Punct('}') => nested -= 1,
                        Tok::Punct(',') if nested == 0 => {
                            found.extend(use_tree(&inner[start..j], path.clone()));
                            start = j + 1;
                        }
                        _ => {}
                    }
                }
                if start < inner.len() {
                    found.extend(use_tree(&inner[start..], path.clone()));
                }
                return found;
            }
            Tok::Punct('*') => break,
            _ => {}
        }
        k += 1;
    }
    if path.is_empty() {
        Vec::new()
    } else {
        vec![(path, line)]
    }
}

/// The strongly connected groups of more than one node (each holds a cycle), by Tarjan's algorithm.
pub fn cycles(edges: &BTreeMap<String, BTreeSet<String>>) -> Vec<BTreeSet<String>> {
    struct Tarjan<'a> {
        edges: &'a BTreeMap<String, BTreeSet<String>>,
        index: BTreeMap<&'a str, usize>,
        low: BTreeMap<&'a str, usize>,
        stack: Vec<&'a str>,
        on_stack: BTreeSet<&'a str>,
        found: Vec<BTreeSet<String>>,
    }
    impl<'a> Tarjan<'a> {
        fn visit(&mut self, node: &'a str) {
            let n = self.index.len();
            self.index.insert(node, n);
            self.low.insert(node, n);
            self.stack.push(node);
            self.on_stack.insert(node);
            for next in self.edges.get(node).into_iter().flatten() {
                let next = next.as_str();
                if !self.index.contains_key(next) {
                    self.visit(next);
                    let low = self.low[node].min(self.low[next]);
                    self.low.insert(node, low);
                } else if self.on_stack.contains(next) {
                    let low = self.low[node].min(self.index[next]);
                    self.low.insert(node, low);
                }
            }
            if self.low[node] == self.index[node] {
                let mut group = BTreeSet::new();
                while let Some(member) = self.stack.pop() {
                    self.on_stack.remove(member);
                    group.insert(member.to_string());
                    if member == node {
                        break;
                    }
                }
                if group.len() > 1 {
                    self.found.push(group);
                }
            }
        }
    }
    let mut tarjan = Tarjan {
        edges,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        found: Vec::new(),
    };
    for node in edges.keys() {
        if !tarjan.index.contains_key(node.as_str()) {
            tarjan.visit(node);
        }
    }
    tarjan.found
}

/// Shown `crate` for the root, `a::b` otherwise.
pub fn shown(path: &[String]) -> String {
    if path.is_empty() {
        "crate".to_string()
    } else {
        path.join("::")
    }
}
