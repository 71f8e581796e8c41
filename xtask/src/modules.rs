//! The module graph inside one crate: which source file takes names from
//! which, read from the code itself, and the circles in it.
//!
//! The crate-level graph ([`crate::deps`]) says which crate may use which;
//! this is the same question one floor down. A file *takes a name* from
//! another when a `use` declaration or a path in its code resolves to an item
//! of a module that lives in the other file: `use crate::jobs::JobRecord`,
//! `super::Archive::open()`, `archive::prune(..)` (a child module named
//! relatively). A name reached through a `use` that re-exports it
//! (`pub use jobs::JobRecord;` in `lib.rs`, then `crate::JobRecord`) is taken
//! from the file that defines it, not from the one that re-exports it.
//!
//! A file's own child modules are rooms inside it: a child may take what its
//! ancestors hold (`super::DockerProvider`, to add an `impl` block) without
//! that arrow counting, while the parent taking from the child does. So
//! `store.rs -> store/rows.rs -> jobs.rs -> store.rs` is a circle, and
//! `provider.rs <-> provider/removal.rs` is not.
//!
//! What is left out, on purpose: code under `#[cfg(test)]` (tests are not
//! the architecture), paths written inside macro invocations (their tokens
//! are not parsed), and names reached through a glob re-export
//! (`pub use x::*`), which count as taken from the module that re-exports.
//!
//! A *circle* is a strongly connected set of two or more files: each reaches
//! every other by the arrows. [`ModuleGraph::circles`] lists them, each with
//! the names that tie it, so a failure says what to move.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt;
use std::path::{Path, PathBuf};

use syn::visit::Visit;
use syn::{Attribute, Item, UseTree};

/// How many re-exports are followed from one path before giving up (a cycle of
/// `use` declarations, which rustc would refuse anyway).
const MAX_REEXPORT_HOPS: usize = 16;

/// Why a crate's module graph could not be read.
#[derive(Debug)]
pub enum ModulesError {
    /// A source file could not be read.
    Read {
        /// The file.
        path: PathBuf,
        /// What the filesystem said.
        source: std::io::Error,
    },
    /// A source file is not Rust `syn` can parse.
    Parse {
        /// The file.
        path: PathBuf,
        /// What the parser said.
        message: String,
    },
    /// A `mod name;` declaration names no file.
    MissingModule {
        /// The file that declares the module.
        declared_in: PathBuf,
        /// The module's name.
        name: String,
    },
}

impl fmt::Display for ModulesError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Read { path, source } => write!(f, "{}: cannot read: {source}", path.display()),
            Self::Parse { path, message } => write!(f, "{}: not Rust: {message}", path.display()),
            Self::MissingModule { declared_in, name } => write!(
                f,
                "{}: `mod {name};` names no file ({name}.rs or {name}/mod.rs)",
                declared_in.display()
            ),
        }
    }
}

impl std::error::Error for ModulesError {}

/// One crate target's files and the names each takes from the others.
#[derive(Debug)]
pub struct ModuleGraph {
    /// The files, as given (the root first).
    files: Vec<PathBuf>,
    /// `from -> to -> names`: the names file `from` takes from file `to`.
    edges: BTreeMap<usize, BTreeMap<usize, BTreeSet<String>>>,
}

/// A circle of files: each reaches every other through the arrows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Circle {
    /// The files in the circle, in path order.
    pub files: Vec<PathBuf>,
    /// Every arrow between two files of the circle, with the names it carries.
    pub ties: Vec<(PathBuf, PathBuf, Vec<String>)>,
}

impl fmt::Display for Circle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let names: Vec<String> = self.files.iter().map(|p| p.display().to_string()).collect();
        writeln!(
            f,
            "a circle of {} files: {}",
            self.files.len(),
            names.join(", ")
        )?;
        for (from, to, carried) in &self.ties {
            writeln!(
                f,
                "  {} -> {}: {}",
                from.display(),
                to.display(),
                carried.join(", ")
            )?;
        }
        Ok(())
    }
}

impl ModuleGraph {
    /// Reads the module tree that starts at `root` (a `lib.rs` or `main.rs`,
    /// or any file a crate target starts from), following `mod name;`
    /// declarations that are not `#[cfg(test)]`.
    pub fn read(root: &Path) -> Result<Self, ModulesError> {
        let mut tree = Tree::default();
        let children_dir = root.parent().map(Path::to_path_buf).unwrap_or_default();
        tree.load_file(root, &[], &children_dir)?;
        let mut module_of: HashMap<usize, &ModPath> = HashMap::new();
        for (module, file) in &tree.modules {
            let known = module_of.entry(*file).or_insert(module);
            if module.len() < known.len() {
                *known = module;
            }
        }
        let mut edges: BTreeMap<usize, BTreeMap<usize, BTreeSet<String>>> = BTreeMap::new();
        for (from, module, path) in &tree.references {
            if let Some((to, name)) = tree.resolve(module, path) {
                let into_ancestor = module_of[&to].len() < module_of[from].len()
                    && module_of[from].starts_with(module_of[&to]);
                if to != *from && !into_ancestor {
                    edges
                        .entry(*from)
                        .or_default()
                        .entry(to)
                        .or_default()
                        .insert(name);
                }
            }
        }
        Ok(Self {
            files: tree.files,
            edges,
        })
    }

    /// The files of the graph, the root first.
    pub fn files(&self) -> &[PathBuf] {
        &self.files
    }

    /// The names `from` takes from `to`, when it takes any.
    pub fn names_taken(&self, from: &Path, to: &Path) -> Vec<String> {
        let index = |p: &Path| self.files.iter().position(|f| f == p);
        match (index(from), index(to)) {
            (Some(from), Some(to)) => self
                .edges
                .get(&from)
                .and_then(|tos| tos.get(&to))
                .map(|names| names.iter().cloned().collect())
                .unwrap_or_default(),
            _ => Vec::new(),
        }
    }

    /// Every circle, largest first (then by their first file). Empty when the
    /// files form a hierarchy.
    pub fn circles(&self) -> Vec<Circle> {
        let mut circles: Vec<Circle> = strongly_connected(self.files.len(), &self.edges)
            .into_iter()
            .filter(|component| component.len() > 1)
            .map(|component| {
                let members: BTreeSet<usize> = component.iter().copied().collect();
                let mut files: Vec<PathBuf> =
                    members.iter().map(|&i| self.files[i].clone()).collect();
                files.sort();
                let mut ties = Vec::new();
                for &from in &members {
                    for (&to, names) in self.edges.get(&from).into_iter().flatten() {
                        if members.contains(&to) {
                            ties.push((
                                self.files[from].clone(),
                                self.files[to].clone(),
                                names.iter().cloned().collect(),
                            ));
                        }
                    }
                }
                ties.sort();
                Circle { files, ties }
            })
            .collect();
        circles.sort_by(|a, b| {
            b.files
                .len()
                .cmp(&a.files.len())
                .then(a.files.cmp(&b.files))
        });
        circles
    }
}

/// Tarjan's strongly connected components over `0..nodes`.
fn strongly_connected(
    nodes: usize,
    edges: &BTreeMap<usize, BTreeMap<usize, BTreeSet<String>>>,
) -> Vec<Vec<usize>> {
    struct State<'a> {
        edges: &'a BTreeMap<usize, BTreeMap<usize, BTreeSet<String>>>,
        index: Vec<Option<usize>>,
        low: Vec<usize>,
        on_stack: Vec<bool>,
        stack: Vec<usize>,
        next: usize,
        components: Vec<Vec<usize>>,
    }
    fn visit(s: &mut State<'_>, v: usize) {
        s.index[v] = Some(s.next);
        s.low[v] = s.next;
        s.next += 1;
        s.stack.push(v);
        s.on_stack[v] = true;
        let successors: Vec<usize> = s
            .edges
            .get(&v)
            .map(|tos| tos.keys().copied().collect())
            .unwrap_or_default();
        for w in successors {
            match s.index[w] {
                None => {
                    visit(s, w);
                    s.low[v] = s.low[v].min(s.low[w]);
                }
                Some(w_index) if s.on_stack[w] => s.low[v] = s.low[v].min(w_index),
                Some(_) => {}
            }
        }
        if Some(s.low[v]) == s.index[v] {
            let mut component = Vec::new();
            while let Some(w) = s.stack.pop() {
                s.on_stack[w] = false;
                component.push(w);
                if w == v {
                    break;
                }
            }
            s.components.push(component);
        }
    }
    let mut state = State {
        edges,
        index: vec![None; nodes],
        low: vec![0; nodes],
        on_stack: vec![false; nodes],
        stack: Vec::new(),
        next: 0,
        components: Vec::new(),
    };
    for v in 0..nodes {
        if state.index[v].is_none() {
            visit(&mut state, v);
        }
    }
    state.components
}

/// A module path from the crate root (`[]` is the root).
type ModPath = Vec<String>;

/// The crate's modules as read, and every path its code names.
#[derive(Default)]
struct Tree {
    files: Vec<PathBuf>,
    /// Where each module lives.
    modules: HashMap<ModPath, usize>,
    /// Per module, the names its `use` declarations bring in, each with the
    /// path it brings (relative as written, resolved in that module).
    imports: HashMap<ModPath, HashMap<String, Vec<String>>>,
    /// `(file, module, path as written)` for every path the code names.
    references: Vec<(usize, ModPath, Vec<String>)>,
}

impl Tree {
    fn load_file(
        &mut self,
        path: &Path,
        module: &[String],
        children_dir: &Path,
    ) -> Result<(), ModulesError> {
        let text = std::fs::read_to_string(path).map_err(|source| ModulesError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        let file = syn::parse_file(&text).map_err(|err| ModulesError::Parse {
            path: path.to_path_buf(),
            message: err.to_string(),
        })?;
        let index = self.files.len();
        self.files.push(path.to_path_buf());
        self.load_items(index, path, &file.items, module, children_dir)
    }

    fn load_items(
        &mut self,
        file: usize,
        path: &Path,
        items: &[Item],
        module: &[String],
        children_dir: &Path,
    ) -> Result<(), ModulesError> {
        self.modules.insert(module.to_vec(), file);
        let mut collector = Collector {
            references: Vec::new(),
            imports: HashMap::new(),
            blocks: 0,
        };
        for item in items {
            if let Item::Mod(_) = item {
                continue;
            }
            collector.visit_item(item);
        }
        for (name, target) in collector.imports {
            self.imports
                .entry(module.to_vec())
                .or_default()
                .insert(name, target);
        }
        for reference in collector.references {
            self.references.push((file, module.to_vec(), reference));
        }
        for item in items {
            let Item::Mod(declared) = item else { continue };
            if under_test(&declared.attrs) {
                continue;
            }
            let name = declared.ident.to_string();
            let mut child = module.to_vec();
            child.push(name.clone());
            let grandchildren_dir = children_dir.join(&name);
            match &declared.content {
                Some((_, inner)) => {
                    self.load_items(file, path, inner, &child, &grandchildren_dir)?;
                }
                None => {
                    let flat = children_dir.join(format!("{name}.rs"));
                    let nested = grandchildren_dir.join("mod.rs");
                    let child_file = if flat.is_file() {
                        flat
                    } else if nested.is_file() {
                        nested
                    } else {
                        return Err(ModulesError::MissingModule {
                            declared_in: path.to_path_buf(),
                            name,
                        });
                    };
                    self.load_file(&child_file, &child, &grandchildren_dir)?;
                }
            }
        }
        Ok(())
    }

    /// Turns a path as written in `module` into one from the crate root, when
    /// it names something of this crate.
    fn absolute(&self, module: &[String], written: &[String]) -> Option<Vec<String>> {
        let (first, rest) = written.split_first()?;
        match first.as_str() {
            "crate" => Some(rest.to_vec()),
            "self" => Some(module.iter().chain(rest).cloned().collect()),
            "super" => {
                let mut base = module.to_vec();
                base.pop()?;
                let mut rest = rest;
                while let Some(("super", more)) = rest.split_first().map(|(s, m)| (s.as_str(), m)) {
                    base.pop()?;
                    rest = more;
                }
                Some(base.into_iter().chain(rest.iter().cloned()).collect())
            }
            _ => {
                let mut child = module.to_vec();
                child.push(first.clone());
                if self.modules.contains_key(&child) {
                    Some(module.iter().chain(written).cloned().collect())
                } else {
                    None
                }
            }
        }
    }

    /// The file that defines what `written` (in `module`) names, and the name
    /// it takes from there.
    fn resolve(&self, module: &[String], written: &[String]) -> Option<(usize, String)> {
        let mut path = self.absolute(module, written)?;
        for _ in 0..MAX_REEXPORT_HOPS {
            let depth = (0..=path.len())
                .rev()
                .find(|&n| self.modules.contains_key(&path[..n]))?;
            let owner = &path[..depth];
            let file = self.modules[owner];
            let Some(name) = path.get(depth) else {
                let name = owner.last().cloned().unwrap_or_else(|| "crate".to_owned());
                return Some((file, name));
            };
            let reexport = self
                .imports
                .get(owner)
                .and_then(|names| names.get(name))
                .and_then(|target| self.absolute(owner, target));
            match reexport {
                Some(target) if target != path[..=depth] => {
                    path = target
                        .into_iter()
                        .chain(path[depth + 1..].to_vec())
                        .collect();
                }
                _ => return Some((file, name.clone())),
            }
        }
        None
    }
}

/// Whether an item is compiled only for tests.
fn under_test(attrs: &[Attribute]) -> bool {
    attrs.iter().any(|attr| {
        attr.path().is_ident("cfg")
            && attr.meta.require_list().is_ok_and(|list| {
                let tokens = list.tokens.to_string();
                tokens
                    .split(|c: char| !c.is_alphanumeric() && c != '_')
                    .any(|w| w == "test")
                    && !tokens.contains("not")
            })
    })
}

/// The attributes of any item.
fn item_attrs(item: &Item) -> &[Attribute] {
    match item {
        Item::Const(i) => &i.attrs,
        Item::Enum(i) => &i.attrs,
        Item::ExternCrate(i) => &i.attrs,
        Item::Fn(i) => &i.attrs,
        Item::ForeignMod(i) => &i.attrs,
        Item::Impl(i) => &i.attrs,
        Item::Macro(i) => &i.attrs,
        Item::Mod(i) => &i.attrs,
        Item::Static(i) => &i.attrs,
        Item::Struct(i) => &i.attrs,
        Item::Trait(i) => &i.attrs,
        Item::TraitAlias(i) => &i.attrs,
        Item::Type(i) => &i.attrs,
        Item::Union(i) => &i.attrs,
        Item::Use(i) => &i.attrs,
        _ => &[],
    }
}

/// Gathers the paths one module's items name and the names its `use`
/// declarations bring in (module declarations are walked by [`Tree`]).
struct Collector {
    references: Vec<Vec<String>>,
    imports: HashMap<String, Vec<String>>,
    /// How many blocks (function bodies, ...) the visitor is inside.
    blocks: usize,
}

impl Collector {
    fn use_tree(&mut self, prefix: &mut Vec<String>, tree: &UseTree, top_level: bool) {
        match tree {
            UseTree::Path(p) => {
                prefix.push(p.ident.to_string());
                self.use_tree(prefix, &p.tree, top_level);
                prefix.pop();
            }
            UseTree::Name(n) => {
                let name = n.ident.to_string();
                let (path, bound) = if name == "self" {
                    (prefix.clone(), prefix.last().cloned())
                } else {
                    let mut path = prefix.clone();
                    path.push(name.clone());
                    (path, Some(name))
                };
                self.imported(path, bound, top_level);
            }
            UseTree::Rename(r) => {
                let name = r.ident.to_string();
                let path = if name == "self" {
                    prefix.clone()
                } else {
                    let mut path = prefix.clone();
                    path.push(name);
                    path
                };
                self.imported(path, Some(r.rename.to_string()), top_level);
            }
            UseTree::Glob(_) => self.references.push(prefix.clone()),
            UseTree::Group(g) => {
                for inner in &g.items {
                    self.use_tree(prefix, inner, top_level);
                }
            }
        }
    }

    fn imported(&mut self, path: Vec<String>, bound: Option<String>, top_level: bool) {
        if let Some(bound) = bound.filter(|b| top_level && b != "_") {
            self.imports.insert(bound, path.clone());
        }
        self.references.push(path);
    }
}

impl<'ast> Visit<'ast> for Collector {
    fn visit_item(&mut self, item: &'ast Item) {
        if under_test(item_attrs(item)) {
            return;
        }
        syn::visit::visit_item(self, item);
    }

    fn visit_item_mod(&mut self, _: &'ast syn::ItemMod) {
        // Modules inside function bodies or blocks are not followed: the
        // module tree itself is walked by `Tree`.
    }

    fn visit_item_use(&mut self, item: &'ast syn::ItemUse) {
        // Only a module's own `use` items re-export; one inside a function
        // body brings its names into that body alone. Both are references.
        let top_level = self.blocks == 0;
        self.use_tree(&mut Vec::new(), &item.tree, top_level);
    }

    fn visit_block(&mut self, block: &'ast syn::Block) {
        self.blocks += 1;
        syn::visit::visit_block(self, block);
        self.blocks -= 1;
    }

    fn visit_impl_item_fn(&mut self, item: &'ast syn::ImplItemFn) {
        if !under_test(&item.attrs) {
            syn::visit::visit_impl_item_fn(self, item);
        }
    }

    fn visit_path(&mut self, path: &'ast syn::Path) {
        if path.leading_colon.is_none() && path.segments.len() > 1 {
            self.references
                .push(path.segments.iter().map(|s| s.ident.to_string()).collect());
        }
        syn::visit::visit_path(self, path);
    }
}

/// One workspace member's target (its library or a binary) and the circles
/// in its module graph.
#[derive(Debug)]
pub struct TargetCircles {
    /// The package's name.
    pub package: String,
    /// The target's root file (`src/lib.rs`, `src/main.rs`).
    pub root: PathBuf,
    /// The circles; empty when its files form a hierarchy.
    pub circles: Vec<Circle>,
}

/// The module circles of every library and binary target of every member of
/// the workspace at `manifest_path` (the current one when `None`), read
/// through `cargo metadata`. Paths are relative to the workspace root.
pub fn workspace_circles(manifest_path: Option<&Path>) -> Result<Vec<TargetCircles>, String> {
    let mut command = cargo_metadata::MetadataCommand::new();
    command.no_deps();
    if let Some(path) = manifest_path {
        command.manifest_path(path);
    }
    let metadata = command
        .exec()
        .map_err(|err| format!("cargo metadata: {err}"))?;
    let root = metadata.workspace_root.as_std_path().to_path_buf();
    let mut answer = Vec::new();
    for package in metadata.workspace_packages() {
        for target in &package.targets {
            let is_code = target.kind.iter().any(|kind| {
                matches!(
                    kind,
                    cargo_metadata::TargetKind::Lib
                        | cargo_metadata::TargetKind::Bin
                        | cargo_metadata::TargetKind::ProcMacro
                )
            });
            if !is_code {
                continue;
            }
            let file = target.src_path.as_std_path();
            let graph = ModuleGraph::read(file).map_err(|err| err.to_string())?;
            let relative = |p: &Path| {
                p.strip_prefix(&root)
                    .map(Path::to_path_buf)
                    .unwrap_or_else(|_| p.to_path_buf())
            };
            let circles = graph
                .circles()
                .into_iter()
                .map(|circle| Circle {
                    files: circle.files.iter().map(|f| relative(f)).collect(),
                    ties: circle
                        .ties
                        .into_iter()
                        .map(|(from, to, names)| (relative(&from), relative(&to), names))
                        .collect(),
                })
                .collect();
            answer.push(TargetCircles {
                package: package.name.to_string(),
                root: relative(file),
                circles,
            });
        }
    }
    Ok(answer)
}
