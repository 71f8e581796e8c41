//! The module graph inside each crate (issue 47): no crate's files import each
//! other in a circle, and the reading that proves it finds a circle when one is
//! planted, follows re-exports to the file that defines a name, and leaves test
//! code out.

mod support;

use std::path::{Path, PathBuf};

use support::tree;
use xtask::modules::{ModuleGraph, workspace_circles};

fn rel(dir: &Path, files: &[PathBuf]) -> Vec<String> {
    files
        .iter()
        .map(|f| f.strip_prefix(dir).expect("inside").display().to_string())
        .collect()
}

#[test]
fn no_module_circle_in_any_crate() {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR")).join("../Cargo.toml");
    let targets = workspace_circles(Some(&manifest)).expect("read every crate's modules");
    assert!(
        targets.iter().any(|t| t.package == "billet"),
        "the walk saw the workspace"
    );
    let mut report = String::new();
    for target in &targets {
        for circle in &target.circles {
            report.push_str(&format!(
                "{} ({}): {circle}",
                target.package,
                target.root.display()
            ));
        }
    }
    assert!(report.is_empty(), "module circles:\n{report}");
}

#[test]
fn a_planted_circle_is_found_with_the_names_that_tie_it() {
    let dir = tree(&[
        ("src/lib.rs", "mod a;\nmod b;\nmod c;\n"),
        ("src/a.rs", "use crate::b::Bee;\npub struct Ay;\n"),
        ("src/b.rs", "pub struct Bee(pub super::c::Cee);\n"),
        (
            "src/c.rs",
            "pub struct Cee;\nfn f() { let _ = crate::a::Ay; }\n",
        ),
    ]);
    let graph = ModuleGraph::read(&dir.path().join("src/lib.rs")).expect("read");
    let circles = graph.circles();
    assert_eq!(circles.len(), 1, "{circles:?}");
    assert_eq!(
        rel(dir.path(), &circles[0].files),
        ["src/a.rs", "src/b.rs", "src/c.rs"]
    );
    let text = circles[0].to_string();
    for tie in ["a.rs -> ", "Bee", "Cee", "Ay"] {
        assert!(text.contains(tie), "{tie} missing from {text}");
    }
}

#[test]
fn a_hierarchy_has_no_circle() {
    let dir = tree(&[
        ("src/lib.rs", "mod a;\nmod b;\npub use a::Ay;\n"),
        ("src/a.rs", "use crate::b::Bee;\npub struct Ay(Bee);\n"),
        ("src/b.rs", "pub struct Bee;\n"),
    ]);
    let graph = ModuleGraph::read(&dir.path().join("src/lib.rs")).expect("read");
    assert!(graph.circles().is_empty(), "{:?}", graph.circles());
}

#[test]
fn a_name_reached_through_a_reexport_is_taken_from_the_file_that_defines_it() {
    let dir = tree(&[
        ("src/lib.rs", "mod a;\nmod b;\npub use a::Ay;\n"),
        ("src/a.rs", "pub struct Ay;\n"),
        ("src/b.rs", "use crate::Ay;\npub struct Bee(Ay);\n"),
    ]);
    let root = dir.path().join("src");
    let graph = ModuleGraph::read(&root.join("lib.rs")).expect("read");
    assert_eq!(
        graph.names_taken(&root.join("b.rs"), &root.join("a.rs")),
        ["Ay"]
    );
    assert!(
        graph
            .names_taken(&root.join("b.rs"), &root.join("lib.rs"))
            .is_empty()
    );
}

#[test]
fn a_child_may_take_from_its_parent_but_not_through_a_sibling_of_the_parent() {
    let dir = tree(&[
        ("src/lib.rs", "mod jobs;\nmod store;\n"),
        (
            "src/store.rs",
            "mod rows;\npub struct Store;\nfn f() { rows::read(); }\n",
        ),
        (
            "src/store/rows.rs",
            "use super::Store;\npub fn read() -> Option<Store> { None }\n",
        ),
        ("src/jobs.rs", "pub struct Job;\n"),
    ]);
    let root = dir.path().join("src");
    let graph = ModuleGraph::read(&root.join("lib.rs")).expect("read");
    assert!(graph.circles().is_empty(), "{:?}", graph.circles());
    assert_eq!(
        graph.names_taken(&root.join("store.rs"), &root.join("store/rows.rs")),
        ["read"]
    );

    // The same child reaching its parent through another module is a circle.
    std::fs::write(
        root.join("store/rows.rs"),
        "use crate::jobs::Job;\npub fn read() -> Option<Job> { None }\n",
    )
    .expect("write");
    std::fs::write(
        root.join("jobs.rs"),
        "pub struct Job(crate::store::Store);\n",
    )
    .expect("write");
    let graph = ModuleGraph::read(&root.join("lib.rs")).expect("read");
    let circles = graph.circles();
    assert_eq!(circles.len(), 1, "{circles:?}");
    assert_eq!(
        rel(dir.path(), &circles[0].files),
        ["src/jobs.rs", "src/store/rows.rs", "src/store.rs"]
    );
}

#[test]
fn test_code_is_left_out() {
    let dir = tree(&[
        ("src/lib.rs", "mod a;\nmod b;\n"),
        ("src/a.rs", "use crate::b::Bee;\npub struct Ay(Bee);\n"),
        (
            "src/b.rs",
            "pub struct Bee;\n#[cfg(test)]\nmod tests { use crate::a::Ay; }\n#[cfg(test)]\nfn helper() -> crate::a::Ay { todo!() }\n",
        ),
    ]);
    let graph = ModuleGraph::read(&dir.path().join("src/lib.rs")).expect("read");
    assert!(graph.circles().is_empty(), "{:?}", graph.circles());
}

#[test]
fn a_module_declared_without_a_file_is_an_error_naming_it() {
    let dir = tree(&[("src/lib.rs", "mod gone;\n")]);
    let err = ModuleGraph::read(&dir.path().join("src/lib.rs")).expect_err("no file");
    assert!(err.to_string().contains("mod gone;"), "{err}");
}
