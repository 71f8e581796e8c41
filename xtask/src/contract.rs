//! The contract inside the repository: `docs/contract.md` lists every clause
//! id (`L6`, `D19`, ...) that the code, the docs and the tests cite, each with
//! what it promises and the tests that prove it. [`check`] reads the tree and
//! says where the two disagree:
//!
//! * an id cited somewhere that the document does not list;
//! * a clause the document lists that no test names (a test names a clause
//!   by its id in a comment or doc, or by a test function's name starting
//!   with the id in lower case, `fn d19_...`);
//! * a test the document lists as a proof that does not exist (no such file,
//!   or no `fn NAME` in it);
//! * a clause listed twice.
//!
//! *Test sources* are the files under a `tests/` or `benches/` folder and the
//! part of any other `.rs` file from its first `#[cfg(test)]` on. Benches
//! count because `cargo xtask ci` runs them, and one clause (D10) is a
//! measurement.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The document, relative to the workspace root.
pub const DOCUMENT: &str = "docs/contract.md";

/// The folders and files the ids are looked for in, relative to the root.
pub const SCANNED: &[&str] = &[
    "crates",
    "xtask",
    "tests",
    "docs",
    ".ci",
    "README.md",
    "ARCHITECTURE.md",
    "BENCHMARKS.md",
    "CONTRIBUTING.md",
];

/// The clause families: the letter every id starts with.
pub const FAMILIES: &str = "BCDFGHLPSTX";

/// How many files the walk reads at most, so that a tree made to be endless
/// (a symlink loop) ends with a problem rather than a hang.
const MAX_FILES: usize = 20_000;

/// One clause row of the document.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Clause {
    /// Its id, `L6`.
    pub id: String,
    /// The tests it names as proofs: (file relative to the root, function).
    pub proofs: Vec<(String, String)>,
}

/// Reads the clause rows of the document's text: lines `| ID | promise |
/// proved by |` whose first cell is an id. A proof is a backticked path
/// followed by a backticked function name.
pub fn clauses(text: &str) -> Vec<Clause> {
    let mut rows = Vec::new();
    for line in text.lines() {
        let cells: Vec<&str> = line
            .trim()
            .trim_matches('|')
            .split('|')
            .map(str::trim)
            .collect();
        if cells.len() < 3 || !is_id(cells[0]) {
            continue;
        }
        let ticked: Vec<&str> = cells[cells.len() - 1]
            .split('`')
            .skip(1)
            .step_by(2)
            .collect();
        let proofs = ticked
            .chunks(2)
            .filter(|pair| pair.len() == 2)
            .map(|pair| (pair[0].to_owned(), pair[1].to_owned()))
            .collect();
        rows.push(Clause {
            id: cells[0].to_owned(),
            proofs,
        });
    }
    rows
}

/// Whether `word` is a clause id: a family letter and one or two digits.
fn is_id(word: &str) -> bool {
    let mut chars = word.chars();
    let Some(first) = chars.next() else {
        return false;
    };
    let digits = chars.as_str();
    FAMILIES.contains(first)
        && (1..=2).contains(&digits.len())
        && digits.bytes().all(|b| b.is_ascii_digit())
        && !digits.starts_with('0')
}

/// The ids `text` cites: upper-case tokens (`L6`, `D19`) standing alone, and
/// the lower-case prefixes of function names (`fn d19_...`).
pub fn cited(text: &str) -> BTreeSet<String> {
    let mut ids = BTreeSet::new();
    let words = text.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'));
    let mut after_fn = false;
    for word in words {
        if word.is_empty() {
            continue;
        }
        if is_id(word) {
            ids.insert(word.to_owned());
        }
        let prefix = word
            .split_once('_')
            .map(|(prefix, _)| prefix)
            .filter(|_| after_fn);
        if let Some(prefix) = prefix.filter(|p| p.starts_with(|c: char| c.is_ascii_lowercase())) {
            let upper = prefix.to_ascii_uppercase();
            if is_id(&upper) {
                ids.insert(upper);
            }
        }
        after_fn = word == "fn";
    }
    ids
}

/// Whether a file's name makes it one the ids are looked for in.
fn scanned_file(path: &Path) -> bool {
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
    matches!(
        path.extension().and_then(|e| e.to_str()),
        Some("rs" | "md" | "toml" | "yaml" | "yml" | "sh")
    ) || name == "run"
}

/// Whether `relative` lies under a `tests/` or `benches/` folder.
fn in_test_folder(relative: &Path) -> bool {
    relative
        .components()
        .any(|c| matches!(c.as_os_str().to_str(), Some("tests" | "benches")))
}

/// Every file under `path` (or `path` itself), skipping build output.
fn walk(path: &Path, out: &mut Vec<PathBuf>, problems: &mut Vec<String>) {
    if out.len() >= MAX_FILES {
        return;
    }
    let Ok(meta) = std::fs::symlink_metadata(path) else {
        return;
    };
    if meta.is_file() {
        out.push(path.to_path_buf());
    } else if meta.is_dir() {
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
        if matches!(name, "target" | ".git") || name.starts_with("mutants.out") {
            return;
        }
        let Ok(entries) = std::fs::read_dir(path) else {
            problems.push(format!("{}: cannot list the folder", path.display()));
            return;
        };
        let mut children: Vec<PathBuf> = entries.flatten().map(|e| e.path()).collect();
        children.sort();
        for child in children {
            walk(&child, out, problems);
        }
    }
}

/// Every way the tree at `root` and its document disagree, one line each;
/// empty when they agree.
pub fn check(root: &Path) -> Vec<String> {
    let mut problems = Vec::new();
    let document = root.join(DOCUMENT);
    let text = match std::fs::read_to_string(&document) {
        Ok(text) => text,
        Err(err) => return vec![format!("{DOCUMENT}: cannot read: {err}")],
    };
    let rows = clauses(&text);
    let mut listed: BTreeMap<&str, &Clause> = BTreeMap::new();
    for row in &rows {
        if listed.insert(&row.id, row).is_some() {
            problems.push(format!("{DOCUMENT}: {} is listed twice", row.id));
        }
    }

    let mut files = Vec::new();
    for entry in SCANNED {
        walk(&root.join(entry), &mut files, &mut problems);
    }
    if files.len() >= MAX_FILES {
        problems.push(format!(
            "more than {MAX_FILES} files to read: the walk stopped"
        ));
    }
    // Where each id is cited (its first file), and which ids tests name.
    let mut cited_at: BTreeMap<String, PathBuf> = BTreeMap::new();
    let mut named_by_tests: BTreeSet<String> = BTreeSet::new();
    for file in &files {
        let relative = file.strip_prefix(root).unwrap_or(file);
        if relative == Path::new(DOCUMENT) || !scanned_file(file) {
            continue;
        }
        let Ok(text) = std::fs::read_to_string(file) else {
            continue;
        };
        for id in cited(&text) {
            cited_at.entry(id).or_insert_with(|| relative.to_path_buf());
        }
        if file.extension().and_then(|e| e.to_str()) == Some("rs") {
            let test_part = if in_test_folder(relative) {
                Some(text.as_str())
            } else {
                text.find("#[cfg(test)]").map(|at| &text[at..])
            };
            named_by_tests.extend(test_part.map(cited).unwrap_or_default());
        }
    }

    for (id, at) in &cited_at {
        if !listed.contains_key(id.as_str()) {
            problems.push(format!(
                "{}: cites {id}, which {DOCUMENT} does not list",
                at.display()
            ));
        }
    }
    for row in &rows {
        if !named_by_tests.contains(&row.id) {
            problems.push(format!(
                "{DOCUMENT}: {} is listed but no test names it (its id in a test's comment, or `fn {}_...`)",
                row.id,
                row.id.to_ascii_lowercase()
            ));
        }
        if row.proofs.is_empty() {
            problems.push(format!(
                "{DOCUMENT}: {} names no test that proves it",
                row.id
            ));
        }
        for (path, function) in &row.proofs {
            match std::fs::read_to_string(root.join(path)) {
                Err(_) => problems.push(format!(
                    "{DOCUMENT}: {} is proved by {path}, which does not exist",
                    row.id
                )),
                Ok(source) if !defines(&source, function) => problems.push(format!(
                    "{DOCUMENT}: {} is proved by `{function}` in {path}, which has no `fn {function}`",
                    row.id
                )),
                Ok(_) => {}
            }
        }
    }
    problems
}

/// Whether `source` defines a function `name`.
fn defines(source: &str, name: &str) -> bool {
    source
        .match_indices(&format!("fn {name}"))
        .any(|(at, found)| {
            source[at + found.len()..]
                .chars()
                .next()
                .is_some_and(|c| c == '(' || c == '<')
        })
}
