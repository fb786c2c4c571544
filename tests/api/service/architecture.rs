//! The module layering (docs/architecture.md): each top-level module of the library imports only modules of its
//! own layer or below, and no folder's modules (the crate root's included) import each other in a circle. Read from
//! the sources (`graph`), so a new upward import or a new circle fails here rather than in a review.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use graph::{Graph, SiblingEdge, shown};

mod graph;
mod sizes;

/// Top-level modules by layer, lowest first. A module may import from its own layer (without a cycle) and below.
const LAYERS: &[&[&str]] = &[
    &["domain"],
    &["config", "telemetry", "batch"],
    &[
        "store",
        "chain",
        "vault",
        "signer",
        "llm",
        "events",
        "metrics",
        "rate_limit",
        "net",
    ],
    &[
        "auth",
        "custody",
        "transfers",
        "delegations",
        "sponsor",
        "tools",
        "x402",
        "webhooks",
        "offers",
        "sell",
    ],
    &["chat", "watcher"],
    &["state", "http", "mcp"],
    &["app"],
];

fn layer_of(module: &str) -> Option<usize> {
    LAYERS.iter().position(|layer| layer.contains(&module))
}

/// Cycles inside a folder that are known and left for now, each with why: `(folder, the modules of the cycle)`.
/// The folder check passes while every cycle it finds lies within one of these (a cycle may shrink, never grow),
/// and fails when one of them is gone (remove it here).
const ALLOWED_CYCLES: &[(&str, &[&str])] = &[];

/// Most lines of code a file of `src` may have (test files and `#[cfg(test)]` modules aside).
const MAX_FILE_LINES_OF_CODE: usize = 600;
/// Most lines a non-test function may have.
const MAX_FUNCTION_LINES: usize = 100;

/// Functions that are tables (one entry a line: examples, a mapping), allowed past `MAX_FUNCTION_LINES`:
/// `(file, function)`.
const TABLES: &[(&str, &str)] = &[
    ("src/domain/audit/snapshots.rs", "examples"),
    ("src/http/openapi/examples.rs", "component"),
    ("src/http/openapi/errors.rs", "example"),
    ("src/http/error.rs", "from"),
];

/// Long functions known and left for now, to be cut into named steps: `(file, function)`. The check passes while
/// each long function is a table or listed here, and fails when one listed here is no longer long (remove it).
const LONG_FOR_NOW: &[(&str, &str)] = &[];

fn crate_root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn source_files(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("src is readable") {
        let path = entry.expect("a directory entry").path();
        if path.is_dir() {
            source_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// `top-level module -> top-level modules it imports`, over the library's sources, test code included.
fn module_graph() -> BTreeMap<String, BTreeSet<String>> {
    let graph = Graph::read(crate_root());
    let mut modules: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for module in graph.modules.keys().filter_map(|m| m.first()) {
        modules.entry(module.clone()).or_default();
    }
    for import in &graph.imports {
        if let (Some(from), Some(to)) = (import.from.first(), import.to.first())
            && from != to
        {
            modules.entry(from.clone()).or_default().insert(to.clone());
        }
    }
    modules
}

#[test]
fn every_module_has_a_layer_and_imports_only_its_own_layer_or_below() {
    let graph = module_graph();
    let mut violations = Vec::new();
    for (module, imported) in &graph {
        let Some(own) = layer_of(module) else {
            violations.push(format!(
                "{module} is in no layer: add it to LAYERS and docs/architecture.md"
            ));
            continue;
        };
        for target in imported {
            match layer_of(target) {
                Some(layer) if layer <= own => {}
                Some(_) => violations.push(format!("{module} (layer {own}) imports {target}, a higher layer")),
                None => violations.push(format!("{module} imports {target}, which is in no layer")),
            }
        }
    }
    assert!(violations.is_empty(), "layering violations:\n{}", violations.join("\n"));
}

/// No folder's children import each other in a circle: for every module with child modules (the crate root
/// included), the graph among its direct children has no cycle. Child A imports child B when code in A's subtree
/// names a path into B's subtree; a module naming its parent's items, or its own children, is no such import, and
/// test code may import anything. Prints the graph's counts (`--nocapture`).
#[test]
fn no_folder_has_a_cycle_among_its_modules() {
    let graph = Graph::read(crate_root());
    let edges = graph.sibling_edges();
    let mut folders: BTreeMap<&[String], BTreeMap<String, BTreeSet<String>>> = BTreeMap::new();
    for edge in edges.keys() {
        folders
            .entry(&edge.folder)
            .or_default()
            .entry(edge.from.clone())
            .or_default()
            .insert(edge.to.clone());
    }
    let mut found = Vec::new();
    for (folder, children) in &folders {
        for cycle in graph::cycles(children) {
            found.push((shown(folder), cycle));
        }
    }
    let allowed = |folder: &str, cycle: &BTreeSet<String>| {
        ALLOWED_CYCLES
            .iter()
            .any(|(f, members)| *f == folder && cycle.iter().all(|m| members.contains(&m.as_str())))
    };
    println!(
        "module graph: {} modules, {} imports between sibling modules, {} cycles inside folders ({} allowed)",
        graph.module_count(),
        edges.len(),
        found.len(),
        found.iter().filter(|(folder, cycle)| allowed(folder, cycle)).count(),
    );
    // Each cycle with one import (file:line) for every edge inside it.
    let named = |folder: &str, cycle: &BTreeSet<String>| {
        let members: Vec<&str> = cycle.iter().map(String::as_str).collect();
        let mut text = format!("cycle in {folder}: {}", members.join(", "));
        for (edge, at) in &edges {
            if shown(&edge.folder) == folder && cycle.contains(&edge.from) && cycle.contains(&edge.to) {
                let SiblingEdge { from, to, .. } = edge;
                text.push_str(&format!("\n  {from} -> {to}: {at}"));
            }
        }
        text
    };
    let mut failures = Vec::new();
    for (folder, cycle) in &found {
        match allowed(folder, cycle) {
            true => println!("allowed {}", named(folder, cycle)),
            false => failures.push(named(folder, cycle)),
        }
    }
    for (folder, members) in ALLOWED_CYCLES {
        let left = found
            .iter()
            .any(|(f, cycle)| f == folder && cycle.iter().any(|m| members.contains(&m.as_str())));
        if !left {
            failures.push(format!(
                "{folder}: {members:?} is no longer a cycle: remove it from ALLOWED_CYCLES"
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// No file of `src` over `MAX_FILE_LINES_OF_CODE` lines of code and no non-test function over `MAX_FUNCTION_LINES`
/// lines, tables (`TABLES`) and the functions left for now (`LONG_FOR_NOW`) aside. Prints the counts and the largest
/// (`--nocapture`).
#[test]
fn no_file_is_over_600_lines_of_code_and_no_function_over_100_lines() {
    let root = crate_root();
    let mut files = Vec::new();
    source_files(&root.join("src"), &mut files);
    files.sort();
    let mut failures = Vec::new();
    let (mut largest_file, mut largest_fn) = ((0, String::new()), (0, String::new()));
    let (mut long_files, mut long_fns, mut tables, mut for_now) = (0, 0, 0, 0);
    let mut still_long = Vec::new();
    for path in &files {
        let file = sizes::relative(root, path);
        if sizes::is_test_file(&file) {
            continue;
        }
        let text = std::fs::read_to_string(path).expect("a source file is readable");
        let code = sizes::lines_of_code(&text);
        largest_file = largest_file.max((code, file.clone()));
        if code > MAX_FILE_LINES_OF_CODE {
            long_files += 1;
            failures.push(format!(
                "{file}: {code} lines of code (at most {MAX_FILE_LINES_OF_CODE})"
            ));
        }
        for f in sizes::functions(&file, &text) {
            let named = |list: &[(&str, &str)]| list.iter().any(|(p, n)| *p == f.file && *n == f.name);
            if named(TABLES) {
                tables += usize::from(f.lines > MAX_FUNCTION_LINES);
                continue;
            }
            largest_fn = largest_fn.max((f.lines, format!("{}:{} {}", f.file, f.line, f.name)));
            if f.lines <= MAX_FUNCTION_LINES {
                continue;
            }
            if named(LONG_FOR_NOW) {
                for_now += 1;
                still_long.push((f.file.clone(), f.name.clone()));
                continue;
            }
            long_fns += 1;
            failures.push(format!(
                "{}:{} fn {}: {} lines (at most {MAX_FUNCTION_LINES})",
                f.file, f.line, f.name, f.lines
            ));
        }
    }
    println!(
        "sizes: {} files, {long_files} over {MAX_FILE_LINES_OF_CODE} lines of code (largest {} at {}); \
         {long_fns} functions over {MAX_FUNCTION_LINES} lines besides {tables} tables and {for_now} left for now \
         (largest not a table: {} lines, {})",
        files.len(),
        largest_file.0,
        largest_file.1,
        largest_fn.0,
        largest_fn.1,
    );
    for (file, name) in LONG_FOR_NOW {
        if !still_long.iter().any(|(f, n)| f == file && n == name) {
            failures.push(format!(
                "{file} fn {name} is no longer over {MAX_FUNCTION_LINES} lines: remove it from LONG_FOR_NOW"
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn the_import_scanner_reads_paths_groups_and_modules() {
    let text = r#"
use crate::chain::Chains;
// see crate::app
/* and crate::state */
const URL: &str = "http://x/ crate::http";
use super::{client::{self, Client}, tokens as t};
use self::inner::Thing;
fn f<'a>(c: char) -> bool { c == '{' || crate::vault::open() }
mod inner {
    use super::super::fees;
    pub struct Thing;
}
#[cfg(test)]
mod tests {
    use crate::app;
}
"#;
    let module = vec!["chain".to_string(), "node".to_string()];
    let scan = graph::scan(text, &module, "src/chain/node.rs");
    let named: Vec<(String, String, String)> = scan
        .named
        .iter()
        .filter(|n| !n.test)
        .map(|n| (n.from.join("::"), n.path.join("::"), n.at.clone()))
        .collect();
    let expected = [
        ("chain::node", "crate::chain::Chains", "src/chain/node.rs:2"),
        ("chain::node", "super::client", "src/chain/node.rs:6"),
        ("chain::node", "super::client::Client", "src/chain/node.rs:6"),
        ("chain::node", "super::tokens", "src/chain/node.rs:6"),
        ("chain::node", "self::inner::Thing", "src/chain/node.rs:7"),
        ("chain::node", "crate::vault::open", "src/chain/node.rs:8"),
        ("chain::node::inner", "super::super::fees", "src/chain/node.rs:10"),
    ];
    let expected: Vec<(String, String, String)> = expected
        .iter()
        .map(|(a, b, c)| (a.to_string(), b.to_string(), c.to_string()))
        .collect();
    assert_eq!(named, expected);
    assert!(scan.named.iter().any(|n| n.test && n.path.join("::") == "crate::app"));
    let modules: BTreeSet<Vec<String>> = [vec![], vec!["chain"], vec!["chain", "fees"], vec!["chain", "node"]]
        .iter()
        .map(|m| m.iter().map(|s| s.to_string()).collect())
        .collect();
    let path = |p: &str| p.split("::").map(str::to_string).collect::<Vec<_>>();
    let inner = path("chain::node::inner");
    assert_eq!(
        graph::resolve(&inner, &path("super::super::fees::Fee"), &modules),
        Some(path("chain::fees"))
    );
    assert_eq!(
        graph::resolve(&module, &path("crate::chain::Chains"), &modules),
        Some(path("chain"))
    );
    assert_eq!(graph::resolve(&module, &path("std::fmt"), &modules), None);
}

/// The MCP server and its tests stay in files a reader takes in at once (STYLE.md: under ~400 lines); the SDK
/// carries the protocol, so a file that grows past this is doing the SDK's work or several jobs.
#[test]
fn the_mcp_files_stay_under_four_hundred_lines() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = vec![root.join("src/http/mcp.rs")];
    source_files(&root.join("src/mcp"), &mut files);
    source_files(&root.join("tests/api/mcp"), &mut files);
    assert!(files.len() > 3, "the MCP files are where this test looks: {files:?}");
    let long: Vec<String> = files
        .iter()
        .map(|file| (file, std::fs::read_to_string(file).expect("readable").lines().count()))
        .filter(|(_, lines)| *lines > 400)
        .map(|(file, lines)| format!("{} has {lines} lines", file.display()))
        .collect();
    assert!(long.is_empty(), "split these: {long:?}");
}

/// Every `§n` the code, the tests, the benchmarks and the docs cite names a section of `docs/api.md` (the contract as
/// this repository keeps it): a section renumbered or a citation of one that was never written fails here.
#[test]
fn every_section_cited_exists_in_the_api_reference() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let reference = std::fs::read_to_string(root.join("docs/api.md")).expect("docs/api.md");
    let sections: BTreeSet<u32> = reference
        .lines()
        .filter_map(|line| line.strip_prefix("## "))
        .filter_map(|heading| heading.split('.').next()?.parse().ok())
        .collect();
    let mut files = Vec::new();
    for dir in ["src", "tests", "bench"] {
        source_files(&root.join(dir), &mut files);
    }
    for doc in [
        "README.md",
        "docs/guide.md",
        "docs/architecture.md",
        "docs/configuration.md",
        "docs/running.md",
        "docs/mcp.md",
        "docs/clients.md",
        "docs/design.md",
        "docs/operations.md",
        "docs/security.md",
    ] {
        files.push(root.join(doc));
    }
    let mut missing = BTreeMap::<u32, Vec<String>>::new();
    for file in &files {
        let text = std::fs::read_to_string(file).unwrap_or_default();
        for (at, _) in text.match_indices('§') {
            let digits: String = text[at + '§'.len_utf8()..]
                .trim_start()
                .chars()
                .take_while(char::is_ascii_digit)
                .collect();
            if let Ok(n) = digits.parse::<u32>()
                && !sections.contains(&n)
            {
                let shown = file.strip_prefix(root).unwrap_or(file).display().to_string();
                missing.entry(n).or_default().push(shown);
            }
        }
    }
    assert!(!sections.is_empty(), "no `## n.` headings read in docs/api.md");
    assert!(missing.is_empty(), "sections cited but not in docs/api.md: {missing:?}");
}

/// The domain is pure (docs/architecture.md): no file under `src/domain` names the database, HTTP or async
/// runtime crates outside comments; the store, the chain client and the services do the I/O.
#[test]
fn the_domain_names_no_database_http_or_runtime_crate() {
    let domain = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/domain");
    let mut files = Vec::new();
    source_files(&domain, &mut files);
    files.push(Path::new(env!("CARGO_MANIFEST_DIR")).join("src/domain.rs"));
    let mut found = Vec::new();
    for file in files {
        let text = std::fs::read_to_string(&file).expect("a readable source file");
        for line in text.lines().filter(|l| !l.trim_start().starts_with("//")) {
            for name in ["sqlx::", "reqwest::", "tokio::", "hyper::", "axum::"] {
                if line.contains(name) {
                    found.push(format!("{}: {}", file.display(), line.trim()));
                }
            }
        }
    }
    assert!(found.is_empty(), "the domain does I/O: {found:#?}");
}

/// The rooms inside `store/`: the store reads facts and applies decisions, it takes none (issue 34). No file under
/// `src/store` calls the one decider, counts a call's allowances, or builds what the decider judges; those are the
/// domain's (`domain::decision`, `domain::outflow`), asked by the transfer service.
#[test]
fn the_store_reads_facts_and_applies_decisions_but_takes_none() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    source_files(&root.join("src/store"), &mut files);
    files.push(root.join("src/store.rs"));
    let mut found = Vec::new();
    for file in files {
        let text = std::fs::read_to_string(&file).expect("a readable source file");
        for line in text.lines().filter(|l| !l.trim_start().starts_with("//")) {
            for name in [
                "decide(",
                "ledger::count(",
                "TypedFacts",
                "decision::Request",
                "CallSite",
                "decision_request(",
                "call_count(",
            ] {
                if line.contains(name) {
                    found.push(format!("{}: {}", file.display(), line.trim()));
                }
            }
        }
    }
    assert!(found.is_empty(), "the store decides: {found:#?}");
}
