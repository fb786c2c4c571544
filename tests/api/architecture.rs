//! The module layering (README, "Architecture"): each top-level module of the library imports only modules of its
//! own layer or below, and the graph of top-level modules has no cycle. Read from the sources, so a new upward
//! import fails here rather than in a review.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// Top-level modules by layer, lowest first. A module may import from its own layer (without a cycle) and below.
const LAYERS: &[&[&str]] = &[
    &["domain"],
    &["config", "telemetry"],
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
        "tools",
        "x402",
        "webhooks",
    ],
    &["chat", "watcher"],
    &["state", "http", "mcp"],
    &["app"],
];

fn layer_of(module: &str) -> Option<usize> {
    LAYERS.iter().position(|layer| layer.contains(&module))
}

/// The top-level module a source file belongs to (`src/chat/runner.rs` -> `chat`).
fn module_of(relative: &Path) -> Option<String> {
    let first = relative.components().next()?.as_os_str().to_str()?;
    let name = first.strip_suffix(".rs").unwrap_or(first);
    (name != "lib" && name != "main").then(|| name.to_string())
}

/// Every `crate::<module>` a source text names outside comments, also inside `use crate::{a, b::c}` groups.
fn imports(text: &str) -> BTreeSet<String> {
    let code: String = text
        .lines()
        .filter(|line| !line.trim_start().starts_with("//"))
        .collect::<Vec<_>>()
        .join("\n");
    let mut found = BTreeSet::new();
    let mut rest = code.as_str();
    while let Some(at) = rest.find("crate::") {
        rest = &rest[at + "crate::".len()..];
        if let Some(group) = rest.strip_prefix('{') {
            let end = group.find('}').unwrap_or(group.len());
            for item in group[..end].split(',') {
                let name: String = item
                    .trim()
                    .chars()
                    .take_while(|c| c.is_alphanumeric() || *c == '_')
                    .collect();
                if !name.is_empty() {
                    found.insert(name);
                }
            }
        } else {
            let name: String = rest.chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect();
            found.insert(name);
        }
    }
    found
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

/// `module -> modules it imports`, over the library's sources.
fn module_graph() -> BTreeMap<String, BTreeSet<String>> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    source_files(&src, &mut files);
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for file in files {
        let Some(module) = module_of(file.strip_prefix(&src).expect("under src")) else {
            continue;
        };
        let text = std::fs::read_to_string(&file).expect("a readable source file");
        let edges = graph.entry(module.clone()).or_default();
        edges.extend(imports(&text).into_iter().filter(|m| *m != module));
    }
    graph
}

#[test]
fn every_module_has_a_layer_and_imports_only_its_own_layer_or_below() {
    let graph = module_graph();
    let mut violations = Vec::new();
    for (module, imported) in &graph {
        let Some(own) = layer_of(module) else {
            violations.push(format!("{module} is in no layer: add it to LAYERS and the README"));
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

#[test]
fn the_module_graph_has_no_cycle() {
    let graph = module_graph();
    // Depth-first search with colours: grey on the path, black when done.
    fn visit<'a>(
        node: &'a str,
        graph: &'a BTreeMap<String, BTreeSet<String>>,
        state: &mut BTreeMap<&'a str, bool>,
        path: &mut Vec<&'a str>,
    ) -> Option<Vec<String>> {
        match state.get(node) {
            Some(true) => return None,
            Some(false) => {
                let start = path.iter().position(|n| *n == node).unwrap_or(0);
                let mut cycle: Vec<String> = path[start..].iter().map(|s| s.to_string()).collect();
                cycle.push(node.to_string());
                return Some(cycle);
            }
            None => {}
        }
        state.insert(node, false);
        path.push(node);
        for next in graph.get(node).into_iter().flatten() {
            if let Some(cycle) = visit(next, graph, state, path) {
                return Some(cycle);
            }
        }
        path.pop();
        state.insert(node, true);
        None
    }
    let mut state = BTreeMap::new();
    for node in graph.keys() {
        if let Some(cycle) = visit(node, &graph, &mut state, &mut Vec::new()) {
            panic!("module cycle: {}", cycle.join(" -> "));
        }
    }
}

#[test]
fn the_import_scanner_reads_paths_and_groups() {
    let found = imports(
        "use crate::chain::Chains;\n// see crate::app\nuse crate::{domain::agent::Agent, store};\nx = crate::http::error;",
    );
    assert_eq!(
        found,
        ["chain", "domain", "http", "store"]
            .iter()
            .map(|s| s.to_string())
            .collect::<BTreeSet<_>>()
    );
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

/// The domain is pure (README, "Architecture"): no file under `src/domain` names the database, HTTP or async
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
