//! The contract inside the repository (issue 47): `docs/contract.md` lists
//! every clause id the tree cites, every clause it lists is named by a test,
//! and every test it names exists. Each rule is also shown to catch a tree
//! that breaks it.

mod support;

use std::path::Path;

use support::tree;
use xtask::contract::{DOCUMENT, check, cited, clauses};

const HEADER: &str = "# The contract\n\n| id | promise | proved by |\n|---|---|---|\n";

/// A tree whose document lists L6, proved by a test that names it.
fn sound() -> Vec<(&'static str, String)> {
    vec![
        (
            DOCUMENT,
            format!("{HEADER}| L6 | a crash loses nothing | `crates/a/tests/t.rs` `l6_crash` |\n"),
        ),
        (
            "crates/a/src/lib.rs",
            "//! Commits first (L6).\n".to_owned(),
        ),
        (
            "crates/a/tests/t.rs",
            "#[test]\nfn l6_crash() {}\n".to_owned(),
        ),
    ]
}

fn problems_of(files: &[(&str, String)]) -> Vec<String> {
    let borrowed: Vec<(&str, &str)> = files.iter().map(|(p, t)| (*p, t.as_str())).collect();
    let dir = tree(&borrowed);
    check(dir.path())
}

#[test]
fn the_contract_document_agrees_with_the_tree() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let text = std::fs::read_to_string(root.join(DOCUMENT)).expect("the document exists");
    assert!(clauses(&text).len() > 90, "the document lists the clauses");
    let problems = check(&root);
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn a_sound_tree_has_no_problem() {
    assert_eq!(problems_of(&sound()), Vec::<String>::new());
}

#[test]
fn an_id_cited_but_not_listed_is_named_with_where_it_is_cited() {
    let mut files = sound();
    files.push(("README.md", "Restarts adopt instances (B8).\n".to_owned()));
    let problems = problems_of(&files);
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert!(
        problems[0].starts_with("README.md: cites B8"),
        "{problems:?}"
    );
}

#[test]
fn a_clause_no_test_names_is_caught() {
    let mut files = sound();
    // The test no longer names L6: neither its name nor a comment does.
    files[2].1 = "#[test]\nfn crash() {}\n".to_owned();
    files[0].1 =
        format!("{HEADER}| L6 | a crash loses nothing | `crates/a/tests/t.rs` `crash` |\n");
    let problems = problems_of(&files);
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert!(
        problems[0].contains("L6 is listed but no test names it"),
        "{problems:?}"
    );
}

#[test]
fn production_docs_do_not_count_as_a_test_but_a_cfg_test_module_does() {
    let mut files = sound();
    files[2].1 = "#[test]\nfn crash() {}\n".to_owned();
    files[0].1 =
        format!("{HEADER}| L6 | a crash loses nothing | `crates/a/src/lib.rs` `crash` |\n");
    files[1].1 = "//! Commits first (L6).\n".to_owned();
    assert_eq!(
        problems_of(&files).len(),
        2,
        "no test names L6, and no fn crash in lib.rs"
    );
    files[1].1 = "//! Commits first.\n#[cfg(test)]\nmod tests {\n    // L6: a crash\n    #[test]\n    fn crash() {}\n}\n".to_owned();
    assert_eq!(problems_of(&files), Vec::<String>::new());
}

#[test]
fn a_proof_that_does_not_exist_is_caught() {
    let mut files = sound();
    files[0].1 = format!(
        "{HEADER}| L6 | a crash loses nothing | `crates/a/tests/t.rs` `l6_gone`; `crates/a/tests/none.rs` `l6_crash` |\n"
    );
    let problems = problems_of(&files);
    assert_eq!(problems.len(), 2, "{problems:?}");
    assert!(
        problems.iter().any(|p| p.contains("no `fn l6_gone`")),
        "{problems:?}"
    );
    assert!(
        problems
            .iter()
            .any(|p| p.contains("none.rs, which does not exist")),
        "{problems:?}"
    );
}

#[test]
fn a_clause_listed_twice_or_proved_by_nothing_is_caught() {
    let mut files = sound();
    files[0].1 = format!(
        "{HEADER}| L6 | a crash loses nothing | `crates/a/tests/t.rs` `l6_crash` |\n| L6 | again | none |\n"
    );
    let problems = problems_of(&files);
    assert!(
        problems.iter().any(|p| p.contains("L6 is listed twice")),
        "{problems:?}"
    );
    assert!(
        problems.iter().any(|p| p.contains("L6 names no test")),
        "{problems:?}"
    );
}

#[test]
fn ids_are_whole_words_and_test_name_prefixes() {
    let ids = cited("D19 and (L6), H2O, D190, X0, p9 fn b12_wakes() fn helper_d3() b7_x");
    assert_eq!(
        ids.into_iter().collect::<Vec<_>>(),
        ["B12", "D19", "L6"],
        "H2O, D190, X0, lower-case words and a prefix not after `fn` are not ids"
    );
}
