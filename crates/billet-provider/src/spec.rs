//! [`Spec`], [`Resources`] and [`TrustClass`]: what a caller asks a backend to start.

use std::fmt;

use crate::Environment;

/// How far the work in a [`Spec`] has been established as safe to run.
///
/// The default is [`TrustClass::Unknown`]: a job nobody classified has not been
/// shown to be safe anywhere, so backends treat it like untrusted work unless
/// they have an isolation boundary.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum TrustClass {
    /// Not classified. The default; refused wherever `Untrusted` is.
    #[default]
    Unknown,
    /// Known to come from outside the organisation (a fork's pull request, say).
    Untrusted,
    /// Established as trusted (a protected branch of an owned repository, say).
    Trusted,
}

impl TrustClass {
    /// Every trust class, from least to most trusted.
    pub const ALL: [TrustClass; 3] = [
        TrustClass::Unknown,
        TrustClass::Untrusted,
        TrustClass::Trusted,
    ];

    /// The lower-case name, as [`Display`](fmt::Display) prints it.
    pub const fn as_str(self) -> &'static str {
        match self {
            TrustClass::Unknown => "unknown",
            TrustClass::Untrusted => "untrusted",
            TrustClass::Trusted => "trusted",
        }
    }
}

impl fmt::Display for TrustClass {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The compute a [`Spec`] asks for.
///
/// The default is one CPU and 1024 MiB of memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Resources {
    /// Virtual CPUs.
    pub cpus: u32,
    /// Memory in mebibytes.
    pub memory_mib: u64,
}

impl Default for Resources {
    fn default() -> Self {
        Resources {
            cpus: 1,
            memory_mib: 1024,
        }
    }
}

/// What a caller asks a backend to start for one lease.
///
/// Fields are public; [`Spec::new`] and the `with_*` setters build one in a
/// single expression. A backend validates a spec when it is launched, not when
/// it is built: a `Spec` may hold anything.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Spec {
    /// The instance's name, unique within one deployment on one backend.
    pub name: String,
    /// The image (container image, VM image, kernel and rootfs) to start.
    pub image: String,
    /// The command to run, as argv.
    pub command: Vec<String>,
    /// How far the work has been established as safe. Defaults to `Unknown`.
    pub trust: TrustClass,
    /// The compute to give the instance.
    pub resources: Resources,
    /// The environment to give the instance, on top of its image's (P2).
    /// Its values are secrets: [`Environment`]'s `Debug` never prints them
    /// and backends never log them.
    pub env: Environment,
}

impl Spec {
    /// A spec with a name and a command, an empty image, `TrustClass::Unknown`
    /// default resources and an empty environment.
    pub fn new<N, C, S>(name: N, command: C) -> Self
    where
        N: Into<String>,
        C: IntoIterator<Item = S>,
        S: Into<String>,
    {
        Spec {
            name: name.into(),
            image: String::new(),
            command: command.into_iter().map(Into::into).collect(),
            trust: TrustClass::default(),
            resources: Resources::default(),
            env: Environment::new(),
        }
    }

    /// The same spec with this image.
    #[must_use]
    pub fn with_image(mut self, image: impl Into<String>) -> Self {
        self.image = image.into();
        self
    }

    /// The same spec with this trust class.
    #[must_use]
    pub fn with_trust(mut self, trust: TrustClass) -> Self {
        self.trust = trust;
        self
    }

    /// The same spec with this environment.
    #[must_use]
    pub fn with_env(mut self, env: Environment) -> Self {
        self.env = env;
        self
    }

    /// The same spec with these resources.
    #[must_use]
    pub fn with_resources(mut self, resources: Resources) -> Self {
        self.resources = resources;
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // P4: Unknown is the default trust class.
    #[test]
    fn p4_unknown_is_the_default_trust_class() {
        assert_eq!(TrustClass::default(), TrustClass::Unknown);
        assert_eq!(Spec::new("a", ["true"]).trust, TrustClass::Unknown);
        let names: Vec<String> = TrustClass::ALL.iter().map(ToString::to_string).collect();
        assert_eq!(names, ["unknown", "untrusted", "trusted"]);
    }

    // P2: a spec carries name, image, argv, trust, resources and environment, set by its builder.
    #[test]
    fn p2_spec_builder_sets_every_field() {
        let spec = Spec::new("job-1", ["sh", "-c", "make test"])
            .with_image("ubuntu:24.04")
            .with_trust(TrustClass::Trusted)
            .with_resources(Resources {
                cpus: 4,
                memory_mib: 8192,
            })
            .with_env([("K", "v")].into_iter().collect());
        assert_eq!(spec.name, "job-1");
        assert_eq!(spec.image, "ubuntu:24.04");
        assert_eq!(spec.command, ["sh", "-c", "make test"]);
        assert_eq!(spec.trust, TrustClass::Trusted);
        assert_eq!(spec.resources.cpus, 4);
        assert_eq!(spec.resources.memory_mib, 8192);
        assert_eq!(spec.env.get("K"), Some("v"));
        assert!(!format!("{spec:?}").contains("\"v\""));
        assert_eq!(Resources::default().cpus, 1);
        assert!(Spec::new("a", ["true"]).env.is_empty());
    }
}
