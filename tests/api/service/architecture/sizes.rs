//! Sizes read from the library's sources (issue 51): lines of code of a file (neither blank nor comment-only, before
//! the file's `#[cfg(test)]` module) and lines of each function outside test code, from its `fn` line to its closing
//! brace (rustfmt puts that brace alone at the `fn` line's indent).

use std::path::Path;

/// A function of the library's non-test code: where it is, its name and its length in lines.
pub struct Function {
    pub file: String,
    pub name: String,
    pub line: usize,
    pub lines: usize,
}

/// Whether `path` (relative to the crate) is a test file: `tests.rs`, or a file under a `tests` folder of `src`.
pub fn is_test_file(path: &str) -> bool {
    path.ends_with("/tests.rs") || path.contains("/tests/")
}

/// The part of `text` before its `#[cfg(test)]` module (all of it without one).
fn non_test(text: &str) -> Vec<&str> {
    text.lines().take_while(|line| line.trim() != "#[cfg(test)]").collect()
}

/// Lines of code: neither blank nor comment-only, before the `#[cfg(test)]` module.
pub fn lines_of_code(text: &str) -> usize {
    non_test(text)
        .iter()
        .map(|line| line.trim())
        .filter(|line| !line.is_empty() && !line.starts_with("//"))
        .count()
}

/// The name of the function a line opens (`fn`, after `pub`, `pub(…)`, `const`, `async`, `unsafe`), if any.
fn function_name(line: &str) -> Option<&str> {
    let mut rest = line.trim_start();
    loop {
        let word = rest.split_whitespace().next()?;
        match word {
            "fn" => {
                let name = rest["fn".len()..].trim_start();
                let end = name
                    .find(|c: char| !(c.is_alphanumeric() || c == '_'))
                    .unwrap_or(name.len());
                return (end > 0).then(|| &name[..end]);
            }
            "const" | "async" | "unsafe" | "pub" => rest = rest[word.len()..].trim_start(),
            _ if word.starts_with("pub(") => rest = rest[rest.find(')')? + 1..].trim_start(),
            _ => return None,
        }
    }
}

/// The functions with a body in `text` (non-test part), with their lengths.
pub fn functions(file: &str, text: &str) -> Vec<Function> {
    let lines = non_test(text);
    let mut found = Vec::new();
    for (at, line) in lines.iter().enumerate() {
        let Some(name) = function_name(line) else {
            continue;
        };
        if line.trim_end().ends_with('}') {
            continue; // a body on the `fn` line
        }
        let indent = &line[..line.len() - line.trim_start().len()];
        // A declaration without a body (a trait's) ends in `;` before any line ends in `{`.
        let Some(open) = lines[at..]
            .iter()
            .position(|l| l.trim_end().ends_with('{') || l.trim_end().ends_with(';'))
        else {
            continue;
        };
        if lines[at + open].trim_end().ends_with(';') {
            continue;
        }
        let close = format!("{indent}}}");
        if let Some(end) = lines[at..].iter().position(|l| l.trim_end() == close) {
            found.push(Function {
                file: file.to_string(),
                name: name.to_string(),
                line: at + 1,
                lines: end + 1,
            });
        }
    }
    found
}

/// `path` relative to `root`, with `/` between its parts.
pub fn relative(root: &Path, path: &Path) -> String {
    let path = path.strip_prefix(root).unwrap_or(path);
    path.components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect::<Vec<_>>()
        .join("/")
}
