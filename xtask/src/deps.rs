//! `cargo xtask deps`: no production crate depends on `billet-simulated` (X1, X2).
//!
//! The simulated backend fabricates completions; reachable from production it would be
//! a fleet that reports every job finished and runs none. This check reads the
//! workspace's dependency graph (`cargo metadata --all-features`, through the
//! `cargo_metadata` crate) and fails when a production crate can reach it.
//!
//! # The rule
//!
//! * A workspace member is **test-only** when its manifest says so:
//!
//!   ```toml
//!   [package]
//!   publish = false
//!
//!   [package.metadata.billet]
//!   test-only = true
//!   ```
//!
//!   Every other member is a **production** crate.
//! * A test-only crate must be `publish = false`; a publishable one is a violation.
//!   `billet-simulated` itself, when it is a member, must be marked test-only.
//! * No production crate may reach `billet-simulated` through edges that are not
//!   dev-only: `[dependencies]` or `[build-dependencies]`, directly or through any
//!   chain of crates (test-only crates included), for every target platform
//!   (`cargo metadata` is not filtered by platform), optional or not (all features
//!   are on), renamed or not (packages are matched by package name, not by the
//!   name the manifest gives the dependency). An edge declared both in
//!   `[dev-dependencies]` and in a non-dev table counts as non-dev.
//!
//! # Output (stable)
//!
//! On standard output, one line per problem, then one summary line:
//!
//! ```text
//! billet-scheduler -> billet-harness -> billet-simulated (normal, normal)
//! billet-agent -> billet-simulated (build)
//! billet-worker -> billet-simulated (normal on cfg(windows))
//! billet-harness: marked test-only but publishable: a test-only crate must set `publish = false`
//! deps: FAILED: 4 problems in 6 workspace crates; ...
//! ```
//!
//! A chain line names every crate from the offending production member to
//! `billet-simulated`, joined by ` -> `, then in parentheses one label per arrow, in
//! order, joined by `, `. A label is the edge's non-dev kinds, `normal` and/or
//! `build` (joined by ` + ` when one manifest declares both), each followed by
//! ` on <platform>` when it is declared under `[target.<platform>]`. Each offending
//! member gets every chain (at most [`MAX_CHAINS_PER_CRATE`], then a line saying
//! more were left out). Members come in name order.
//!
//! When all is well the only line is
//! `deps: ok: no production crate depends on billet-simulated (N workspace crates checked)`.
//!
//! # Exit codes of `cargo xtask deps`
//!
//! `0` the rule holds; `1` the rule is broken (the lines above say where); `2` the
//! check could not run (bad arguments, no such manifest, `cargo metadata` failed),
//! with the reason on standard error.

use std::collections::{HashMap, HashSet, VecDeque};
use std::fmt;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use cargo_metadata::{
    CargoOpt, DepKindInfo, DependencyKind, Metadata, MetadataCommand, Package, PackageId,
};

/// The package no production crate may depend on.
pub const SIMULATED: &str = "billet-simulated";

/// How many chains are listed for one offending member before the rest are left out.
pub const MAX_CHAINS_PER_CRATE: usize = 100;

/// Exit code of `cargo xtask deps` when the rule is broken.
pub const EXIT_VIOLATION: u8 = 1;

/// Exit code of `cargo xtask deps` when the check could not run.
pub const EXIT_ERROR: u8 = 2;

/// Checks the workspace of `manifest_path` (a `Cargo.toml`, or a directory holding
/// one), or, with `None`, the workspace that holds the current directory.
///
/// Runs `cargo metadata --all-features` (through `$CARGO`, else `cargo`) and answers
/// the [`Report`]; the rule holds when [`Report::is_ok`]. An error means the check
/// could not run at all, never that the rule is broken.
///
/// A test over the real workspace, from any of its crates:
///
/// ```no_run
/// let manifest = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../Cargo.toml");
/// let report = xtask::deps::check(Some(&manifest)).expect("the check runs");
/// assert!(report.is_ok(), "{report}");
/// ```
pub fn check(manifest_path: Option<&Path>) -> Result<Report, DepsError> {
    let mut command = MetadataCommand::new();
    command.features(CargoOpt::AllFeatures);
    if let Some(path) = manifest_path {
        command.manifest_path(manifest_file(path)?);
    }
    let metadata = command.exec().map_err(DepsError::Metadata)?;
    check_metadata(&metadata)
}

/// Checks metadata already read (it must include the resolve graph, so not
/// `--no-deps`, and should be read with `--all-features`, or optional dependencies
/// stay unseen).
pub fn check_metadata(metadata: &Metadata) -> Result<Report, DepsError> {
    let resolve = metadata.resolve.as_ref().ok_or(DepsError::NoResolve)?;
    let packages = packages_by_id(metadata);
    let name_of = |id: &PackageId| name_in(&packages, id);

    let forward = forward_edges(resolve, &name_of);

    let targets: HashSet<&PackageId> = metadata
        .packages
        .iter()
        .filter(|p| p.name.as_str() == SIMULATED)
        .map(|p| &p.id)
        .collect();
    let reaches = reaching(&forward, &targets);

    let mut members: Vec<&Package> = metadata
        .workspace_members
        .iter()
        .filter_map(|id| packages.get(id).copied())
        .collect();
    members.sort_by(|a, b| (a.name.as_str(), &a.id).cmp(&(b.name.as_str(), &b.id)));

    let mut violations = Vec::new();
    for member in &members {
        let marker = Marker::of(member);
        match &marker {
            Marker::Invalid(found) => violations.push(Violation::InvalidMarker {
                package: member.name.to_string(),
                found: found.clone(),
            }),
            Marker::TestOnly if is_publishable(member) => {
                violations.push(Violation::PublishableTestOnly {
                    package: member.name.to_string(),
                });
            }
            Marker::TestOnly | Marker::Production => {}
        }
        if targets.contains(&member.id) {
            if marker == Marker::Production {
                violations.push(Violation::SimulatedNotTestOnly);
            }
            continue;
        }
        if marker == Marker::TestOnly || !reaches.contains(&member.id) {
            continue;
        }
        let mut walk = Walk {
            forward: &forward,
            reaches: &reaches,
            targets: &targets,
            name_of: &name_of,
            path: vec![member.name.to_string()],
            on_path: HashSet::from([&member.id]),
            hops: Vec::new(),
            chains: Vec::new(),
            truncated: false,
        };
        walk.visit(&member.id);
        let truncated = walk.truncated;
        violations.extend(walk.chains.into_iter().map(Violation::Chain));
        if truncated {
            violations.push(Violation::MoreChains {
                package: member.name.to_string(),
                shown: MAX_CHAINS_PER_CRATE,
            });
        }
    }

    Ok(Report {
        workspace_root: metadata.workspace_root.clone().into_std_path_buf(),
        members_checked: members.len(),
        violations,
    })
}

/// The packages of `metadata`, by id.
fn packages_by_id(metadata: &Metadata) -> HashMap<&PackageId, &Package> {
    metadata.packages.iter().map(|p| (&p.id, p)).collect()
}

/// The name of package `id` (the id itself when `packages` lacks it).
fn name_in(packages: &HashMap<&PackageId, &Package>, id: &PackageId) -> String {
    packages
        .get(id)
        .map_or_else(|| id.repr.clone(), |p| p.name.to_string())
}

/// The non-dev edges of `resolve` (normal or build, on any platform, or of no
/// kind at all), each list in a fixed order so that output is stable.
fn forward_edges<'a>(
    resolve: &'a cargo_metadata::Resolve,
    name_of: &impl Fn(&PackageId) -> String,
) -> HashMap<&'a PackageId, Vec<Edge<'a>>> {
    let mut forward: HashMap<&PackageId, Vec<Edge<'_>>> = HashMap::new();
    for node in &resolve.nodes {
        let edges = forward.entry(&node.id).or_default();
        for dep in &node.deps {
            if let Some(label) = hop_label(&dep.dep_kinds) {
                edges.push(Edge {
                    to: &dep.pkg,
                    label,
                });
            }
        }
        edges.sort_by_cached_key(|e| (name_of(e.to), e.to.repr.clone()));
    }
    forward
}

/// A package one member reaches, and how.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reached<'m> {
    /// The package reached.
    pub package: &'m PackageId,
    /// A shortest path of package names from the member to it, both ends
    /// included.
    pub path: Vec<String>,
}

/// Every package the workspace member named `member` reaches through the
/// edges this check counts (normal or build, any platform, optional or
/// renamed), each with a shortest path of package names from `member` to it,
/// both ends included; in package-id order. `None` when no member has that
/// name. The one walk of the dependency graph that other tidy tests use (the
/// scheduler's B1 check), so that what counts as an edge is said once.
pub fn reached_from<'m>(
    metadata: &'m Metadata,
    member: &str,
) -> Result<Option<Vec<Reached<'m>>>, DepsError> {
    let resolve = metadata.resolve.as_ref().ok_or(DepsError::NoResolve)?;
    let packages = packages_by_id(metadata);
    let name_of = |id: &PackageId| name_in(&packages, id);
    let Some(start) = metadata
        .workspace_members
        .iter()
        .find(|id| name_of(id) == member)
    else {
        return Ok(None);
    };
    let forward = forward_edges(resolve, &name_of);
    // Breadth first: the first path found to each package is a shortest one.
    let mut came_from: std::collections::BTreeMap<&PackageId, &PackageId> = Default::default();
    let mut queue = VecDeque::from([start]);
    while let Some(id) = queue.pop_front() {
        for edge in forward.get(id).into_iter().flatten() {
            if edge.to != start && !came_from.contains_key(edge.to) {
                came_from.insert(edge.to, id);
                queue.push_back(edge.to);
            }
        }
    }
    let reached = came_from
        .keys()
        .map(|&id| {
            let mut path = vec![name_of(id)];
            let mut at = id;
            while let Some(&from) = came_from.get(at) {
                path.push(name_of(from));
                at = from;
            }
            path.reverse();
            Reached { package: id, path }
        })
        .collect();
    Ok(Some(reached))
}

/// Runs the check as `cargo xtask deps` does: prints the report on standard output
/// (or the error on standard error) and answers the exit code: `0` the rule holds,
/// [`EXIT_VIOLATION`] it is broken, [`EXIT_ERROR`] the check could not run.
pub fn run(manifest_path: Option<&Path>) -> ExitCode {
    match check(manifest_path) {
        Ok(report) => {
            println!("{report}");
            if report.is_ok() {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(EXIT_VIOLATION)
            }
        }
        Err(err) => {
            eprintln!("xtask deps: error: {err}");
            ExitCode::from(EXIT_ERROR)
        }
    }
}

/// What the check found over one workspace.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Report {
    /// The root directory of the workspace checked.
    pub workspace_root: PathBuf,
    /// How many workspace members were checked.
    pub members_checked: usize,
    /// Every problem found, member by member in name order; empty when the rule holds.
    pub violations: Vec<Violation>,
}

impl Report {
    /// True when the rule holds: no violation at all.
    pub fn is_ok(&self) -> bool {
        self.violations.is_empty()
    }

    /// The offending chains alone, in report order.
    pub fn chains(&self) -> impl Iterator<Item = &Chain> {
        self.violations.iter().filter_map(|v| match v {
            Violation::Chain(chain) => Some(chain),
            _ => None,
        })
    }
}

impl fmt::Display for Report {
    /// One line per violation, then the summary line (no trailing newline).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for violation in &self.violations {
            writeln!(f, "{violation}")?;
        }
        if self.is_ok() {
            write!(
                f,
                "deps: ok: no production crate depends on {SIMULATED} ({} workspace crates checked)",
                self.members_checked
            )
        } else {
            write!(
                f,
                "deps: FAILED: {} problem{} in {} workspace crates; only crates marked \
                 `[package.metadata.billet] test-only = true` (and `publish = false`) may \
                 depend on {SIMULATED} outside [dev-dependencies]",
                self.violations.len(),
                if self.violations.len() == 1 { "" } else { "s" },
                self.members_checked
            )
        }
    }
}

/// One problem the check found. Each prints as one line (see the module docs).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Violation {
    /// A production member reaches `billet-simulated` along this chain.
    Chain(Chain),
    /// A member marked test-only that can be published.
    PublishableTestOnly {
        /// The member's package name.
        package: String,
    },
    /// `[package.metadata.billet] test-only` holds something other than a boolean.
    /// The member is treated as a production crate.
    InvalidMarker {
        /// The member's package name.
        package: String,
        /// The value found, as JSON.
        found: String,
    },
    /// `billet-simulated` is a workspace member but is not marked test-only.
    SimulatedNotTestOnly,
    /// A member has more chains than [`MAX_CHAINS_PER_CRATE`]; the rest are left out.
    MoreChains {
        /// The member's package name.
        package: String,
        /// How many chains were listed.
        shown: usize,
    },
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Chain(chain) => chain.fmt(f),
            Self::PublishableTestOnly { package } => write!(
                f,
                "{package}: marked test-only but publishable: a test-only crate must set \
                 `publish = false`"
            ),
            Self::InvalidMarker { package, found } => write!(
                f,
                "{package}: `[package.metadata.billet] test-only` must be true or false, \
                 found {found}"
            ),
            Self::SimulatedNotTestOnly => write!(
                f,
                "{SIMULATED}: must itself be marked `[package.metadata.billet] test-only = true`"
            ),
            Self::MoreChains { package, shown } => write!(
                f,
                "{package}: more chains to {SIMULATED} left out (first {shown} listed)"
            ),
        }
    }
}

/// A path of non-dev dependency edges from a production member to `billet-simulated`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Chain {
    /// Package names from the offending member (first) to `billet-simulated` (last).
    pub crates: Vec<String>,
    /// One label per edge (`crates.len() - 1` of them): `normal`, `build`, or both
    /// joined by ` + `, each with ` on <platform>` when target-specific.
    pub hops: Vec<String>,
}

impl Chain {
    /// The production member the chain starts from.
    pub fn member(&self) -> &str {
        self.crates.first().map_or("", String::as_str)
    }
}

impl fmt::Display for Chain {
    /// `a -> b -> billet-simulated (normal, build)`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({})", self.crates.join(" -> "), self.hops.join(", "))
    }
}

/// Why the check could not run. None of these says anything about the rule.
#[derive(Debug)]
#[non_exhaustive]
pub enum DepsError {
    /// `--manifest-path` names nothing (or a directory without a `Cargo.toml`).
    ManifestNotFound {
        /// The path looked for.
        path: PathBuf,
    },
    /// `cargo metadata` could not be run, failed, or answered something unreadable.
    Metadata(cargo_metadata::Error),
    /// The metadata carries no resolve graph (it was read with `--no-deps`).
    NoResolve,
}

impl fmt::Display for DepsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::ManifestNotFound { path } => {
                write!(f, "no Cargo.toml at {}", path.display())
            }
            Self::Metadata(err) => write!(f, "could not read the dependency graph: {err}"),
            Self::NoResolve => write!(
                f,
                "the metadata has no resolve graph (was it read with --no-deps?)"
            ),
        }
    }
}

impl std::error::Error for DepsError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Self::Metadata(err) => Some(err),
            Self::ManifestNotFound { .. } | Self::NoResolve => None,
        }
    }
}

/// The manifest file a `--manifest-path` names: the file itself, or a directory's
/// `Cargo.toml`.
fn manifest_file(path: &Path) -> Result<PathBuf, DepsError> {
    let file = if path.is_dir() {
        path.join("Cargo.toml")
    } else {
        path.to_path_buf()
    };
    if file.is_file() {
        Ok(file)
    } else {
        Err(DepsError::ManifestNotFound { path: file })
    }
}

/// How a member's manifest classifies it.
#[derive(Debug, PartialEq, Eq)]
enum Marker {
    TestOnly,
    Production,
    Invalid(String),
}

impl Marker {
    fn of(package: &Package) -> Self {
        let value = package
            .metadata
            .get("billet")
            .and_then(|billet| billet.get("test-only"));
        match value {
            None => Self::Production,
            Some(value) => match value.as_bool() {
                Some(true) => Self::TestOnly,
                Some(false) => Self::Production,
                None => Self::Invalid(value.to_string()),
            },
        }
    }
}

/// `publish = false` reads as an empty registry list; anything else can be published.
fn is_publishable(package: &Package) -> bool {
    !matches!(&package.publish, Some(registries) if registries.is_empty())
}

/// One non-dev edge of the resolve graph.
struct Edge<'a> {
    to: &'a PackageId,
    label: String,
}

/// The label of an edge from its kinds, or `None` when every kind is dev-only.
/// Kinds this code does not know (and the empty list of a very old cargo) count
/// as non-dev, so that nothing slips through unseen.
fn hop_label(kinds: &[DepKindInfo]) -> Option<String> {
    if kinds.is_empty() {
        return Some("unknown".to_owned());
    }
    let mut labels: Vec<(u8, String)> = kinds
        .iter()
        .filter_map(|info| {
            let (rank, kind) = match info.kind {
                DependencyKind::Development => return None,
                DependencyKind::Normal => (0, "normal"),
                DependencyKind::Build => (1, "build"),
                _ => (2, "unknown"),
            };
            let label = match &info.target {
                Some(platform) => format!("{kind} on {platform}"),
                None => kind.to_owned(),
            };
            Some((rank, label))
        })
        .collect();
    if labels.is_empty() {
        return None;
    }
    labels.sort();
    labels.dedup();
    let labels: Vec<String> = labels.into_iter().map(|(_, label)| label).collect();
    Some(labels.join(" + "))
}

/// Every package from which a target can be reached along non-dev edges (targets included).
fn reaching<'a>(
    forward: &HashMap<&'a PackageId, Vec<Edge<'a>>>,
    targets: &HashSet<&'a PackageId>,
) -> HashSet<&'a PackageId> {
    let mut backward: HashMap<&PackageId, Vec<&PackageId>> = HashMap::new();
    for (from, edges) in forward {
        for edge in edges {
            backward.entry(edge.to).or_default().push(from);
        }
    }
    let mut seen: HashSet<&PackageId> = targets.clone();
    let mut queue: VecDeque<&PackageId> = targets.iter().copied().collect();
    while let Some(id) = queue.pop_front() {
        for &from in backward.get(id).into_iter().flatten() {
            if seen.insert(from) {
                queue.push_back(from);
            }
        }
    }
    seen
}

/// A depth-first enumeration of the simple paths from one member to a target,
/// kept inside the packages that can reach a target.
struct Walk<'g, 'a, F> {
    forward: &'g HashMap<&'a PackageId, Vec<Edge<'a>>>,
    reaches: &'g HashSet<&'a PackageId>,
    targets: &'g HashSet<&'a PackageId>,
    name_of: &'g F,
    path: Vec<String>,
    on_path: HashSet<&'a PackageId>,
    hops: Vec<String>,
    chains: Vec<Chain>,
    truncated: bool,
}

impl<'a, F: Fn(&PackageId) -> String> Walk<'_, 'a, F> {
    fn visit(&mut self, id: &'a PackageId) {
        let Some(edges) = self.forward.get(id) else {
            return;
        };
        for edge in edges {
            if self.truncated {
                return;
            }
            if !self.reaches.contains(edge.to) || self.on_path.contains(edge.to) {
                continue;
            }
            self.hops.push(edge.label.clone());
            self.path.push((self.name_of)(edge.to));
            if self.targets.contains(edge.to) {
                if self.chains.len() == MAX_CHAINS_PER_CRATE {
                    self.truncated = true;
                } else {
                    self.chains.push(Chain {
                        crates: self.path.clone(),
                        hops: self.hops.clone(),
                    });
                }
            } else {
                self.on_path.insert(edge.to);
                self.visit(edge.to);
                self.on_path.remove(edge.to);
            }
            self.path.pop();
            self.hops.pop();
        }
    }
}
