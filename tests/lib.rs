//! Workspace-level integration tests of the billet crates. The tests are the
//! `[[test]]` targets beside this file; the library itself is empty.
