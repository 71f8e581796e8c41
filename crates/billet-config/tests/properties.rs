//! Property tests: F3 over generated configurations, F4 over arbitrary input.

use billet_config::{Config, ConfigError};
use proptest::prelude::*;
use proptest::sample::select;

/// The kinds a file may name.
const KINDS: [&str; 3] = ["docker", "tart", "firecracker"];

/// A generated valid configuration, before rendering.
#[derive(Debug, Clone)]
struct Generated {
    id: String,
    /// Each provider's kind (index into [`KINDS`]) and capacity.
    providers: Vec<(usize, u32)>,
    /// Each route's labels, provider (index) and fallback (a provider's index,
    /// whose kind is the fallback kind).
    routes: Vec<(Vec<String>, usize, Option<usize>)>,
    /// The default kind, as a provider's index.
    default: Option<usize>,
    /// The untrusted kinds (indices into [`KINDS`]).
    untrusted: Vec<usize>,
    /// Whether to write lists in flow style (`[a, b]`).
    flow: bool,
    /// How each kind is spelled, cycled over the kind positions.
    styles: Vec<u8>,
}

/// One place the rendered text names a kind.
#[derive(Debug, Clone)]
struct Slot {
    /// The path inside the document, as errors report it.
    path: String,
    /// The kind named there.
    kind: &'static str,
}

/// The placeholder for slot `index` in rendered text.
fn placeholder(index: usize) -> String {
    format!("@@KIND{index}@@")
}

fn generated() -> impl Strategy<Value = Generated> {
    let providers = prop::collection::vec((0..KINDS.len(), 1..=5_000u32), 1..=5);
    (
        "[a-z][a-z0-9-]{0,15}",
        providers,
        prop::collection::vec(
            (
                prop::collection::vec("[a-z][a-z0-9]{0,7}", 1..=3),
                any::<prop::sample::Index>(),
                prop::option::of(any::<prop::sample::Index>()),
            ),
            0..=4,
        ),
        prop::option::of(any::<prop::sample::Index>()),
        prop::collection::vec(0..KINDS.len(), 0..=3),
        any::<bool>(),
        prop::collection::vec(0..5u8, 16),
    )
        .prop_map(
            |(id, providers, routes, default, untrusted, flow, styles)| {
                let count = providers.len();
                let routes: Vec<_> = routes
                    .into_iter()
                    .map(|(labels, to, fallback)| {
                        (labels, to.index(count), fallback.map(|at| at.index(count)))
                    })
                    .collect();
                // Routing must send jobs somewhere.
                let default = match default {
                    None if routes.is_empty() => Some(0),
                    other => other.map(|at| at.index(count)),
                };
                Generated {
                    id,
                    providers,
                    routes,
                    default,
                    untrusted,
                    flow,
                    styles,
                }
            },
        )
}

impl Generated {
    /// The YAML text with a placeholder at each kind, and the kind slots.
    fn render(&self) -> (String, Vec<Slot>) {
        let mut slots = Vec::new();
        let mut slot = |path: String, kind: &'static str| {
            slots.push(Slot { path, kind });
            placeholder(slots.len() - 1)
        };
        let mut text = format!(
            "# generated\ndeployment:\n  id: {}\n  description: @@DESCRIPTION@@\nproviders:\n",
            self.id
        );
        for (index, &(kind, capacity)) in self.providers.iter().enumerate() {
            let name = KINDS[kind];
            let at = slot(format!("providers[{index}].kind"), name);
            let settings = match name {
                "docker" => "docker:\n      image: runner:latest",
                "tart" => "tart:\n      image: macos:15\n      cpus: 4",
                _ => "firecracker:\n      kernel: /srv/vmlinux\n      rootfs: /srv/rootfs.ext4",
            };
            text.push_str(&format!(
                "  - name: pool-{index}\n    kind: {at}\n    capacity: {capacity}\n    {settings}\n"
            ));
        }
        text.push_str("routing:\n");
        if !self.routes.is_empty() {
            text.push_str("  routes:\n");
        }
        for (index, (labels, to, fallback)) in self.routes.iter().enumerate() {
            let labels = if self.flow {
                format!("[{}]", labels.join(", "))
            } else {
                labels
                    .iter()
                    .map(|label| format!("\n        - {label}"))
                    .collect::<String>()
            };
            text.push_str(&format!(
                "    - labels: {labels}\n      provider: pool-{to}\n"
            ));
            if let Some(fallback) = fallback {
                let kind = KINDS[self.providers[*fallback].0];
                let at = slot(format!("routing.routes[{index}].fallback_kind"), kind);
                text.push_str(&format!("      fallback_kind: {at}\n"));
            }
        }
        if let Some(default) = self.default {
            let kind = KINDS[self.providers[default].0];
            let at = slot("routing.default_kind".to_owned(), kind);
            text.push_str(&format!("  default_kind: {at}\n"));
        }
        if !self.untrusted.is_empty() {
            let names: Vec<_> = self
                .untrusted
                .iter()
                .enumerate()
                .map(|(index, &kind)| {
                    slot(format!("routing.untrusted_kinds[{index}]"), KINDS[kind])
                })
                .collect();
            if self.flow {
                text.push_str(&format!("  untrusted_kinds: [{}]\n", names.join(", ")));
            } else {
                text.push_str("  untrusted_kinds:\n");
                for name in names {
                    text.push_str(&format!("    - {name}\n"));
                }
            }
        }
        (text, slots)
    }

    /// A real kind, spelled in the style chosen for slot `index`.
    fn spell(&self, index: usize, kind: &str) -> String {
        match self.styles[index % self.styles.len()] {
            0 => kind.to_owned(),
            1 => format!("'{kind}'"),
            2 => format!("\"{kind}\""),
            3 => format!("!!str {kind}"),
            _ => format!("' {}\t'", kind.to_uppercase()),
        }
    }

    /// The valid text, and the text with slot `target` naming `simulated`.
    fn texts(&self, target: usize, simulated: &Spelling) -> (String, String, Vec<Slot>) {
        let (template, slots) = self.render();
        let mut valid = template.replace("@@DESCRIPTION@@", "generated fleet");
        let mut refused = template.replace("@@DESCRIPTION@@", &simulated.description());
        for (index, slot) in slots.iter().enumerate() {
            let real = self.spell(index, slot.kind);
            valid = valid.replace(&placeholder(index), &real);
            let spelled = if index == target {
                simulated.value()
            } else {
                real
            };
            refused = refused.replace(&placeholder(index), &spelled);
        }
        (valid, refused, slots)
    }
}

/// A spelling of `simulated`: letters in any case, whitespace around it, and
/// a way to write it into YAML.
#[derive(Debug, Clone)]
struct Spelling {
    upper: Vec<bool>,
    before: String,
    after: String,
    /// 0 plain, 1 single-quoted, 2 double-quoted, 3 `!!str` and quoted,
    /// 4 an alias of an anchor on the description, 5 `!!str` plain.
    style: u8,
}

fn spelling() -> impl Strategy<Value = Spelling> {
    let space = "[ \t\u{a0}\u{3000}]{0,3}";
    (
        prop::collection::vec(any::<bool>(), 9),
        space,
        space,
        0..6u8,
    )
        .prop_map(|(upper, before, after, style)| Spelling {
            upper,
            before,
            after,
            style,
        })
}

impl Spelling {
    /// `simulated` in this spelling's letter case.
    fn word(&self) -> String {
        "simulated"
            .chars()
            .zip(&self.upper)
            .map(|(c, &up)| if up { c.to_ascii_uppercase() } else { c })
            .collect()
    }

    /// The text the file holds, as the parser will read it.
    fn given(&self) -> String {
        match self.style {
            0 | 5 => self.word(),
            _ => format!("{}{}{}", self.before, self.word(), self.after),
        }
    }

    /// A quoted scalar holding the spelling with its whitespace.
    fn quoted(&self) -> String {
        format!("'{}'", self.given())
    }

    /// What goes where the kind is named.
    fn value(&self) -> String {
        match self.style {
            0 => self.word(),
            1 => self.quoted(),
            2 => format!(
                "\"{}{}{}\"",
                self.before.replace('\t', "\\t"),
                self.word(),
                self.after.replace('\t', "\\t").replace('\u{a0}', "\\_")
            ),
            3 => format!("!!str {}", self.quoted()),
            4 => "*backend".to_owned(),
            _ => format!("!!str {}", self.word()),
        }
    }

    /// The deployment description: the anchor, for the alias style.
    fn description(&self) -> String {
        match self.style {
            4 => format!("&backend {}", self.quoted()),
            _ => "generated fleet".to_owned(),
        }
    }
}

/// The 1-based line on which `needle` first occurs.
fn line_of(text: &str, needle: &str) -> Option<u64> {
    let offset = text.find(needle)?;
    Some(text[..offset].matches('\n').count() as u64 + 1)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 1_000, ..ProptestConfig::default() })]

    // F3: for any valid generated configuration, replacing any one kind with
    // any spelling of simulated (any case, surrounding whitespace, plain,
    // quoted, tagged or through an alias) is refused with the simulated
    // error, at that kind's path and line.
    #[test]
    fn f3_any_kind_spelled_simulated_is_refused(
        config in generated(),
        target in any::<prop::sample::Index>(),
        simulated in spelling(),
    ) {
        let (template, slots) = config.render();
        let target = target.index(slots.len());
        let (valid, refused, _) = config.texts(target, &simulated);

        let loaded = Config::from_yaml_str(&valid);
        prop_assert!(loaded.is_ok(), "the generated file is valid: {:?}\n{}", loaded.err(), valid);

        let error = Config::from_yaml_str(&refused).expect_err("naming simulated is refused");
        match &error {
            ConfigError::SimulatedKind { given, .. } => prop_assert_eq!(given, &simulated.given()),
            other => prop_assert!(false, "expected the simulated refusal, got {}\n{}", other, refused),
        }
        prop_assert!(error.to_string().contains("simulated backend is test-only and cannot be configured"));
        let location = error.location();
        prop_assert_eq!(location.path.as_deref(), Some(slots[target].path.as_str()));
        prop_assert_eq!(location.line, line_of(&template, &placeholder(target)), "{}", error);
        if simulated.style == 4 {
            prop_assert_eq!(location.defined_at.map(|at| at.0), line_of(&refused, "&backend"));
        }
    }
}

/// Pieces of YAML syntax, keys of the schema and kinds, for YAML-shaped text.
const TOKENS: &[&str] = &[
    "deployment",
    "providers",
    "routing",
    "routes",
    "id",
    "name",
    "kind",
    "capacity",
    "docker",
    "tart",
    "firecracker",
    "simulated",
    "Simulated",
    "labels",
    "provider",
    "fallback_kind",
    "default_kind",
    "untrusted_kinds",
    "image",
    "kernel",
    "rootfs",
    "description",
    ":",
    ": ",
    "- ",
    "-",
    "\n",
    "\n  ",
    "\n    ",
    "  ",
    "\t",
    "[",
    "]",
    "{",
    "}",
    ", ",
    ",",
    "'",
    "\"",
    "#",
    "&a ",
    "*a",
    "&b ",
    "*b",
    "<<: ",
    "<<",
    "!!str ",
    "!!int ",
    "!!binary ",
    "!!map",
    "!x ",
    "!<tag:yaml.org,2002:str> ",
    "? ",
    "|",
    ">-",
    "---",
    "...",
    "%YAML 1.2\n",
    "%TAG ! tag:x,2000:\n",
    "~",
    "null",
    "0",
    "1",
    "-1",
    "4294967296",
    "1e999",
    ".nan",
    "true",
    "\\",
    "\\u0000",
    "\u{feff}",
    "\u{a0}",
    "\r",
    "\r\n",
    "é",
    "😀",
    "\u{0}",
    "\u{1b}",
];

/// The shipped example, for mutation.
const EXAMPLE: &str = include_str!("../examples/billet.yaml");

/// Loads `bytes` every way the loader offers, checking only that an answer
/// comes back (no panic) and can be shown.
fn load_all_ways(bytes: &[u8]) {
    match Config::from_yaml_bytes(bytes) {
        Ok(config) => {
            let _ = config.summary();
        }
        Err(error) => {
            let _ = error.to_string();
            let _ = format!("{:?}", error.location());
        }
    }
    if let Ok(text) = std::str::from_utf8(bytes) {
        let _ = Config::from_yaml_str(text).map_err(|error| error.to_string());
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 3_000, ..ProptestConfig::default() })]

    // F4: the loader never panics on arbitrary bytes.
    #[test]
    fn f4_never_panics_on_arbitrary_bytes(bytes in prop::collection::vec(any::<u8>(), 0..600)) {
        load_all_ways(&bytes);
    }

    // F4: the loader never panics on arbitrary YAML-shaped text.
    #[test]
    fn f4_never_panics_on_yaml_shaped_text(tokens in prop::collection::vec(select(TOKENS), 0..80)) {
        load_all_ways(tokens.concat().as_bytes());
    }

    // F4: the loader never panics on a valid file with random edits: bytes
    // deleted, replaced and inserted, YAML tokens spliced in.
    #[test]
    fn f4_never_panics_on_mutated_valid_files(
        edits in prop::collection::vec(
            (any::<prop::sample::Index>(), 0..4u8, any::<u8>(), select(TOKENS)),
            1..8,
        ),
    ) {
        let mut bytes = EXAMPLE.as_bytes().to_vec();
        for (at, how, byte, token) in edits {
            let at = at.index(bytes.len() + 1);
            match how {
                0 => {
                    let end = (at + usize::from(byte % 16)).min(bytes.len());
                    bytes.drain(at..end);
                }
                1 if at < bytes.len() => bytes[at] = byte,
                2 => bytes.insert(at, byte),
                _ => {
                    bytes.splice(at..at, token.bytes());
                }
            }
        }
        load_all_ways(&bytes);
    }
}
