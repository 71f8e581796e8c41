//! [`Confinement`]: what a job's container may do (D15), and how it becomes
//! the container's `HostConfig`.

use std::collections::HashMap;

use billet_provider::Resources;
use bollard::models::{HostConfig, HostConfigLogConfig};

/// The capabilities a container keeps by default, after every other one is
/// dropped: what a typical CI shell job needs to install packages and run as
/// several users (`CHOWN`, `DAC_OVERRIDE`, `FOWNER`, `FSETID`, `SETGID`,
/// `SETUID`), to stop its own processes (`KILL`) and to serve on a low port
/// in a test (`NET_BIND_SERVICE`).
///
/// Left out of docker's own default set: `NET_RAW` (raw sockets: spoofing,
/// `ping`), `MKNOD` (device nodes), `AUDIT_WRITE`, `SETPCAP`, `SETFCAP`
/// (granting capabilities to files and processes) and `SYS_CHROOT`. Never in
/// it: `SYS_ADMIN`, `SYS_PTRACE` and the rest. A pool grants more with
/// [`Confinement::with_cap_add`] (`cap_add` in `billet.yaml`).
pub const DEFAULT_CAPABILITIES: [&str; 8] = [
    "CHOWN",
    "DAC_OVERRIDE",
    "FOWNER",
    "FSETID",
    "KILL",
    "NET_BIND_SERVICE",
    "SETGID",
    "SETUID",
];

/// The most processes and threads one container holds at once by default:
/// room for a parallel build's compilers and test threads, none for a fork
/// bomb to take the host's process table.
pub const DEFAULT_PIDS_LIMIT: u32 = 1024;

/// The size at which a container's log file is rotated by default: 10 MiB.
pub const DEFAULT_LOG_MAX_SIZE: u64 = 10 << 20;

/// How many log files a container keeps by default (the current one
/// included): with [`DEFAULT_LOG_MAX_SIZE`], at most 30 MiB of a job's output
/// on the host's disk.
pub const DEFAULT_LOG_MAX_FILES: u32 = 3;

/// The security option every container runs with, on docker and podman
/// alike: no process in it gains privileges through a setuid or setgid
/// binary or file capabilities.
pub const NO_NEW_PRIVILEGES: &str = "no-new-privileges";

/// What every container of a provider may do (D15); set with
/// [`Builder::confinement`](crate::Builder::confinement).
///
/// Whatever it holds, every container runs with [`NO_NEW_PRIVILEGES`], every
/// capability dropped but [`cap_add`](Confinement::cap_add), a pids limit, a
/// log of json-file kind bounded in size, and never privileged. The
/// [`Default`] is the safe one: CPUs and memory from each spec's
/// [`Resources`], [`DEFAULT_PIDS_LIMIT`], the image's user, a writable root,
/// [`DEFAULT_CAPABILITIES`], [`DEFAULT_LOG_MAX_SIZE`] ×
/// [`DEFAULT_LOG_MAX_FILES`].
///
/// Build one from the default with the `with_*` methods;
/// [`Builder::build`](crate::Builder::build) refuses one that makes no sense.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct Confinement {
    /// The CPUs a container may use (fractions allowed: `1.5`); `None` means
    /// the spec's `resources.cpus`.
    pub cpus: Option<f64>,
    /// The memory a container may use, in bytes; `None` means the spec's
    /// `resources.memory_mib`.
    pub memory: Option<u64>,
    /// The most processes and threads a container holds at once; a fork past
    /// it fails inside the container.
    pub pids_limit: u32,
    /// The user (`1000`, `1000:1000`, `nobody`) the command runs as; `None`
    /// means the image's user.
    pub user: Option<String>,
    /// Whether the root filesystem is read-only; when it is, `/tmp` is a
    /// fresh `tmpfs` (its contents count against the container's memory).
    pub read_only: bool,
    /// The capabilities a container keeps once every one is dropped, named
    /// as docker names them (`NET_BIND_SERVICE`; a `CAP_` prefix and any case
    /// are accepted and sent canonical).
    pub cap_add: Vec<String>,
    /// The size in bytes at which the container's log file is rotated (on
    /// podman, the most its one log file holds).
    pub log_max_size: u64,
    /// How many log files docker keeps per container (podman keeps one file,
    /// bounded by [`log_max_size`](Confinement::log_max_size)).
    pub log_max_files: u32,
    /// The most bytes a container's writable layer may hold (docker's
    /// `--storage-opt size=`, L27); `None`, no bound. Only some storage
    /// drivers keep it: [`DockerProvider::check_storage`] finds out before
    /// any job is placed.
    ///
    /// [`DockerProvider::check_storage`]: crate::DockerProvider::check_storage
    pub storage: Option<u64>,
}

impl Default for Confinement {
    fn default() -> Self {
        Confinement {
            cpus: None,
            memory: None,
            pids_limit: DEFAULT_PIDS_LIMIT,
            user: None,
            read_only: false,
            cap_add: DEFAULT_CAPABILITIES.map(str::to_owned).to_vec(),
            log_max_size: DEFAULT_LOG_MAX_SIZE,
            log_max_files: DEFAULT_LOG_MAX_FILES,
            storage: None,
        }
    }
}

impl Confinement {
    /// Caps every container at `cpus` CPUs, whatever its spec asks.
    #[must_use]
    pub fn with_cpus(mut self, cpus: f64) -> Self {
        self.cpus = Some(cpus);
        self
    }

    /// Caps every container at `bytes` of memory, whatever its spec asks.
    #[must_use]
    pub fn with_memory(mut self, bytes: u64) -> Self {
        self.memory = Some(bytes);
        self
    }

    /// Bounds every container's writable layer at `bytes` (L27): see
    /// [`storage`](Confinement::storage).
    #[must_use]
    pub fn with_storage(mut self, bytes: u64) -> Self {
        self.storage = Some(bytes);
        self
    }

    /// Sets the pids limit.
    #[must_use]
    pub fn with_pids_limit(mut self, limit: u32) -> Self {
        self.pids_limit = limit;
        self
    }

    /// Runs every command as `user` (`USER` or `USER:GROUP`).
    #[must_use]
    pub fn with_user(mut self, user: impl Into<String>) -> Self {
        self.user = Some(user.into());
        self
    }

    /// Mounts the root filesystem read-only (or not).
    #[must_use]
    pub fn with_read_only(mut self, read_only: bool) -> Self {
        self.read_only = read_only;
        self
    }

    /// Grants these capabilities on top of those already kept (each once).
    #[must_use]
    pub fn with_cap_add<I, S>(mut self, capabilities: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.cap_add
            .extend(capabilities.into_iter().map(Into::into));
        self
    }

    /// Bounds the log: rotated at `max_size` bytes, `max_files` files kept.
    #[must_use]
    pub fn with_log(mut self, max_size: u64, max_files: u32) -> Self {
        self.log_max_size = max_size;
        self.log_max_files = max_files;
        self
    }

    /// Why this confinement makes no sense, if it does not: a zero pids
    /// limit, log size or log file count, CPUs or memory of zero (or CPUs not
    /// a finite number), a blank user, a blank capability or `ALL`.
    pub(crate) fn check(&self) -> Result<(), String> {
        if self.pids_limit == 0 {
            return Err("the pids limit must be at least 1".to_owned());
        }
        if self.log_max_size == 0 || self.log_max_files == 0 {
            return Err("the log's size and file count must be at least 1".to_owned());
        }
        if let Some(cpus) = self.cpus
            && !(cpus.is_finite() && cpus > 0.0)
        {
            return Err(format!("the CPUs must be a number above 0, not {cpus}"));
        }
        if self.memory == Some(0) {
            return Err("the memory must be more than 0 bytes".to_owned());
        }
        if self
            .user
            .as_deref()
            .is_some_and(|user| user.trim().is_empty())
        {
            return Err("the user must not be blank".to_owned());
        }
        for name in &self.cap_add {
            let canonical = canonical(name);
            if canonical.is_empty() || canonical == "ALL" {
                return Err(format!(
                    "{name:?} is not one capability: name each one granted"
                ));
            }
        }
        Ok(())
    }

    /// The capabilities kept, canonical, each once, in order.
    pub(crate) fn capabilities(&self) -> Vec<String> {
        let mut kept: Vec<String> = Vec::with_capacity(self.cap_add.len());
        for name in &self.cap_add {
            let name = canonical(name);
            if !kept.contains(&name) {
                kept.push(name);
            }
        }
        kept
    }

    /// The CPUs a container of `resources` gets, in billionths; `None` for
    /// no cap.
    pub(crate) fn nano_cpus(&self, resources: &Resources) -> Option<i64> {
        match self.cpus {
            Some(cpus) => Some((cpus * 1e9).round() as i64),
            None => (resources.cpus > 0).then(|| i64::from(resources.cpus) * 1_000_000_000),
        }
    }

    /// The memory a container of `resources` gets, in bytes; `None` for no cap.
    pub(crate) fn memory_bytes(&self, resources: &Resources) -> Option<i64> {
        match self.memory {
            Some(bytes) => Some(i64::try_from(bytes).unwrap_or(i64::MAX)),
            None => (resources.memory_mib > 0).then(|| {
                i64::try_from(resources.memory_mib.saturating_mul(1 << 20)).unwrap_or(i64::MAX)
            }),
        }
    }

    /// The `HostConfig` of a container of `resources` on `network`.
    pub(crate) fn host_config(&self, resources: &Resources, network: Option<String>) -> HostConfig {
        let log = HashMap::from([
            // Plain bytes: docker reads `10m` as MiB, podman as MB.
            ("max-size".to_owned(), self.log_max_size.to_string()),
            ("max-file".to_owned(), self.log_max_files.to_string()),
        ]);
        HostConfig {
            nano_cpus: self.nano_cpus(resources),
            memory: self.memory_bytes(resources),
            network_mode: network,
            privileged: Some(false),
            security_opt: Some(vec![NO_NEW_PRIVILEGES.to_owned()]),
            cap_drop: Some(vec!["ALL".to_owned()]),
            cap_add: Some(self.capabilities()),
            pids_limit: Some(i64::from(self.pids_limit)),
            readonly_rootfs: Some(self.read_only),
            tmpfs: self
                .read_only
                .then(|| HashMap::from([("/tmp".to_owned(), "rw,nosuid,nodev".to_owned())])),
            storage_opt: self.storage.map(crate::provider::storage_opt),
            log_config: Some(HostConfigLogConfig {
                typ: Some("json-file".to_owned()),
                config: Some(log),
            }),
            ..HostConfig::default()
        }
    }
}

/// A capability's name as docker's API takes it: trimmed, upper case,
/// without the `CAP_` prefix.
fn canonical(name: &str) -> String {
    let upper = name.trim().to_ascii_uppercase();
    upper.strip_prefix("CAP_").unwrap_or(&upper).to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn resources(cpus: u32, memory_mib: u64) -> Resources {
        Resources { cpus, memory_mib }
    }

    // D15: the default confines: no new privileges, every capability dropped
    // but the minimal set, a pids limit, a bounded json-file log, never
    // privileged, a writable root, the spec's CPUs and memory.
    #[test]
    fn d15_default_host_config_confines() {
        let config = Confinement::default().host_config(&resources(2, 512), Some("none".into()));
        assert_eq!(
            config.security_opt,
            Some(vec!["no-new-privileges".to_owned()])
        );
        assert_eq!(config.cap_drop, Some(vec!["ALL".to_owned()]));
        assert_eq!(
            config.cap_add,
            Some(DEFAULT_CAPABILITIES.map(str::to_owned).to_vec())
        );
        assert_eq!(config.privileged, Some(false));
        assert_eq!(config.pids_limit, Some(1024));
        assert_eq!(config.readonly_rootfs, Some(false));
        assert_eq!(config.tmpfs, None);
        assert_eq!(config.nano_cpus, Some(2_000_000_000));
        assert_eq!(config.memory, Some(512 << 20));
        assert_eq!(config.network_mode.as_deref(), Some("none"));
        let log = config.log_config.expect("a log config");
        assert_eq!(log.typ.as_deref(), Some("json-file"));
        let options = log.config.expect("log options");
        assert_eq!(
            options.get("max-size").map(String::as_str),
            Some("10485760")
        );
        assert_eq!(options.get("max-file").map(String::as_str), Some("3"));
        assert_eq!(options.len(), 2);
        assert_eq!(Confinement::default().user, None);
        assert_eq!(Confinement::default().check(), Ok(()));
    }

    // D15: a pool's settings win over the spec's resources; a zero resource
    // with no setting means no cap.
    #[test]
    fn d15_pool_settings_win_over_the_spec() {
        let confinement = Confinement::default()
            .with_cpus(1.5)
            .with_memory(3 << 30)
            .with_pids_limit(64)
            .with_read_only(true)
            .with_user("1000:1000")
            .with_log(4096, 2);
        let config = confinement.host_config(&resources(4, 100), None);
        assert_eq!(config.nano_cpus, Some(1_500_000_000));
        assert_eq!(config.memory, Some(3 << 30));
        assert_eq!(config.pids_limit, Some(64));
        assert_eq!(config.readonly_rootfs, Some(true));
        assert_eq!(
            config.tmpfs,
            Some(HashMap::from([(
                "/tmp".to_owned(),
                "rw,nosuid,nodev".to_owned()
            )]))
        );
        assert_eq!(config.network_mode, None);
        let options = config
            .log_config
            .and_then(|log| log.config)
            .expect("log options");
        assert_eq!(options.get("max-size").map(String::as_str), Some("4096"));
        assert_eq!(options.get("max-file").map(String::as_str), Some("2"));
        assert_eq!(confinement.user.as_deref(), Some("1000:1000"));

        let none = Confinement::default().host_config(&resources(0, 0), None);
        assert_eq!((none.nano_cpus, none.memory), (None, None));
        let huge = Confinement::default().with_memory(u64::MAX);
        assert_eq!(huge.memory_bytes(&resources(1, 1)), Some(i64::MAX));
        assert_eq!(
            Confinement::default().memory_bytes(&resources(1, u64::MAX)),
            Some(i64::MAX)
        );
        assert_eq!(
            Confinement::default().nano_cpus(&resources(1, 1)),
            Some(1_000_000_000)
        );
        assert_eq!(
            Confinement::default()
                .with_cpus(0.25)
                .nano_cpus(&resources(8, 1)),
            Some(250_000_000)
        );
    }

    // D15: capabilities are added on top, canonical and each once.
    #[test]
    fn d15_capabilities_are_canonical_and_added_once() {
        let confinement = Confinement::default().with_cap_add([
            "cap_net_raw",
            " SYS_PTRACE ",
            "chown",
            "NET_RAW",
        ]);
        let mut expected = DEFAULT_CAPABILITIES.map(str::to_owned).to_vec();
        expected.extend(["NET_RAW".to_owned(), "SYS_PTRACE".to_owned()]);
        assert_eq!(confinement.capabilities(), expected);
        assert_eq!(confinement.check(), Ok(()));
    }

    // D15: nonsense is refused when the provider is built.
    #[test]
    fn d15_nonsense_is_refused() {
        let bad = [
            Confinement::default().with_pids_limit(0),
            Confinement::default().with_log(0, 3),
            Confinement::default().with_log(1024, 0),
            Confinement::default().with_cpus(0.0),
            Confinement::default().with_cpus(-1.0),
            Confinement::default().with_cpus(f64::NAN),
            Confinement::default().with_cpus(f64::INFINITY),
            Confinement::default().with_memory(0),
            Confinement::default().with_user(" "),
            Confinement::default().with_cap_add(["all"]),
            Confinement::default().with_cap_add(["CAP_ALL"]),
            Confinement::default().with_cap_add([""]),
        ];
        for confinement in bad {
            assert!(confinement.check().is_err(), "{confinement:?}");
        }
        let fine = Confinement::default()
            .with_pids_limit(1)
            .with_log(1, 1)
            .with_cpus(0.01)
            .with_memory(1)
            .with_user("1000");
        assert_eq!(fine.check(), Ok(()));
    }
}
