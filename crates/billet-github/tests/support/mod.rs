//! Test support: a GitHub API stand-in on loopback (G9).

#![allow(dead_code, unreachable_pub)]

pub mod standin;
