//! Tidy checks over the whole workspace's sources, as ordinary tests:
//!
//! * no source file outside tests is past [`MAX_LINES`] lines, a unit-test
//!   module at the file's end not counted: a longer file is a folder waiting
//!   to happen;
//! * one loop drives the scheduler's core: no production source but the
//!   scheduler's two drivers ([`DRIVERS`]: the `Driver` loop, and `Inline`
//!   for modelled time) asks the core for its calls (`poll_action`), so every
//!   call goes out through one of them, with the owner's gate in front of it;
//! * every image the workspace's Markdown shows (`![...](path)`) is a file
//!   in the repository: a screenshot the README promises is there.
//!
//! Each check is a function over file texts, and a test proves it fails on a
//! text that breaks it.

use std::path::{Path, PathBuf};

/// The only production sources that may ask the core for its calls.
const DRIVERS: &[&str] = &[
    "crates/billet-scheduler/src/driver.rs",
    "crates/billet-scheduler/src/inline.rs",
];

/// The most lines a source file may have before its trailing test module.
const MAX_LINES: usize = 1_000;

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("tests/ sits in the workspace")
        .to_path_buf()
}

/// Every `.rs` file under `dir`, recursively, in a stable order.
fn sources(dir: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let mut dirs = vec![dir.to_path_buf()];
    while let Some(dir) = dirs.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|ext| ext == "rs") {
                found.push(path);
            }
        }
    }
    found.sort();
    found
}

/// The `src/` folders of every crate in the workspace, xtask's included.
fn source_dirs() -> Vec<PathBuf> {
    let root = workspace();
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(root.join("crates"))
        .expect("crates/ is readable")
        .flatten()
        .map(|entry| entry.path().join("src"))
        .filter(|src| src.is_dir())
        .collect();
    dirs.push(root.join("xtask").join("src"));
    dirs.sort();
    dirs
}

/// The lines of `text` before its last top-level `#[cfg(test)]` (all of
/// them when it has none).
fn lines_before_tests(text: &str) -> usize {
    let lines: Vec<&str> = text.lines().collect();
    lines
        .iter()
        .rposition(|line| *line == "#[cfg(test)]")
        .unwrap_or(lines.len())
}

/// Each file of `files` (path, text) longer than [`MAX_LINES`] before its
/// trailing test module, with that count.
fn too_long<'a>(files: impl IntoIterator<Item = (&'a str, &'a str)>) -> Vec<(String, usize)> {
    files
        .into_iter()
        .map(|(path, text)| (path.to_owned(), lines_before_tests(text)))
        .filter(|(_, lines)| *lines > MAX_LINES)
        .collect()
}

/// The files of `files` (path, text) that ask a scheduler core for its calls
/// themselves, by line.
fn drive_the_core_themselves<'a>(
    files: impl IntoIterator<Item = (&'a str, &'a str)>,
) -> Vec<String> {
    let mut found = Vec::new();
    for (path, text) in files {
        for (n, line) in text.lines().enumerate() {
            let code = line.split("//").next().unwrap_or("");
            if code.contains(".poll_action(") {
                found.push(format!("{path}:{}", n + 1));
            }
        }
    }
    found
}

fn read_all(paths: &[PathBuf]) -> Vec<(String, String)> {
    let root = workspace();
    paths
        .iter()
        .map(|path| {
            let text = std::fs::read_to_string(path).expect("a source is readable");
            let shown = path.strip_prefix(&root).unwrap_or(path);
            (shown.display().to_string(), text)
        })
        .collect()
}

#[test]
fn no_source_file_outside_tests_is_over_a_thousand_lines() {
    let paths: Vec<PathBuf> = source_dirs().iter().flat_map(|d| sources(d)).collect();
    assert!(paths.len() > 50, "found the sources: {}", paths.len());
    let files = read_all(&paths);
    let long = too_long(files.iter().map(|(p, t)| (p.as_str(), t.as_str())));
    assert!(
        long.is_empty(),
        "make these folders of modules (lines before the trailing test module): {long:?}"
    );
}

#[test]
fn the_length_check_catches_a_long_file_and_spares_its_tests() {
    let long = "fn f() {}\n".repeat(MAX_LINES + 1);
    let fits = format!(
        "{}#[cfg(test)]\nmod tests {{\n{}}}\n",
        "fn f() {}\n".repeat(MAX_LINES),
        "    fn g() {}\n".repeat(500)
    );
    let found = too_long([("long.rs", long.as_str()), ("fits.rs", fits.as_str())]);
    assert_eq!(found, [("long.rs".to_owned(), MAX_LINES + 1)]);
}

#[test]
fn only_the_schedulers_drivers_ask_the_core_for_its_calls() {
    let paths: Vec<PathBuf> = source_dirs().iter().flat_map(|d| sources(d)).collect();
    let files = read_all(&paths);
    for driver in DRIVERS {
        let (_, text) = files
            .iter()
            .find(|(path, _)| path == driver)
            .unwrap_or_else(|| panic!("{driver} is a source"));
        assert!(
            !drive_the_core_themselves([(*driver, text.as_str())]).is_empty(),
            "{driver} drives the core: the check reads the calls it is to find"
        );
    }
    let others = files
        .iter()
        .filter(|(path, _)| !DRIVERS.contains(&path.as_str()))
        .map(|(p, t)| (p.as_str(), t.as_str()));
    let found = drive_the_core_themselves(others);
    assert!(
        found.is_empty(),
        "drive the core through billet_scheduler::Driver (its Hooks give a gate and a tap) or Inline, not by hand: {found:?}"
    );
}

#[test]
fn the_loop_check_catches_a_second_loop() {
    let engine =
        "fn step(&mut self) {\n    while let Some(action) = self.core.poll_action() {}\n}\n";
    let said = "// the core's poll_action( is asked by the Driver only\n";
    let found = drive_the_core_themselves([("engine.rs", engine), ("said.rs", said)]);
    assert_eq!(found, ["engine.rs:2"]);
}

/// The local images `text` (Markdown) shows that are not files under `root`,
/// relative to `dir` (the Markdown file's folder).
fn missing_images(text: &str, dir: &Path) -> Vec<String> {
    text.split("![")
        .skip(1)
        .filter_map(|rest| {
            let target = rest.split_once("](")?.1.split_once(')')?.0;
            let path = target.split_whitespace().next()?;
            (!path.contains("://") && !dir.join(path).is_file()).then(|| path.to_owned())
        })
        .collect()
}

#[test]
fn every_image_the_markdown_shows_is_in_the_repository() {
    let root = workspace();
    let mut missing = Vec::new();
    let mut shown = 0;
    for name in [
        "README.md",
        "BENCHMARKS.md",
        "ARCHITECTURE.md",
        "CONTRIBUTING.md",
    ] {
        let path = root.join(name);
        let Ok(text) = std::fs::read_to_string(&path) else {
            continue;
        };
        shown += text.matches("![").count();
        missing.extend(
            missing_images(&text, &root)
                .into_iter()
                .map(|image| format!("{name}: {image}")),
        );
    }
    assert!(shown > 0, "the README shows the status page's screenshot");
    assert!(
        missing.is_empty(),
        "images shown but not in the repository: {missing:?}"
    );
}

#[test]
fn the_image_check_catches_a_missing_screenshot() {
    let root = workspace();
    let text = "![the page](docs/status-page.png) and ![gone](docs/no-such.png) and ![far](https://example.com/x.png)";
    assert_eq!(missing_images(text, &root), ["docs/no-such.png"]);
}
