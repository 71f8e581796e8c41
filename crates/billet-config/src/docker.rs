//! The checks of a docker pool's confinement settings (D15): `cpus`,
//! `memory`, `storage`, `pids_limit`, `user`, `read_only` and `cap_add`, each refused
//! with its location when it holds nonsense.

use std::num::{NonZeroU32, NonZeroU64};

use billet_provider::Isolation;
use serde_saphyr::Spanned;

use crate::config::{DockerSettings, DockerTls};
use crate::error::ConfigError;
use crate::error::at;
use crate::raw::{RawDocker, RawSize};

/// Every Linux capability, by its name without the `CAP_` prefix, in the
/// kernel's order (`CAP_CHOWN` is 0, `CAP_CHECKPOINT_RESTORE` 40).
pub(crate) const CAPABILITIES: [&str; 41] = [
    "CHOWN",
    "DAC_OVERRIDE",
    "DAC_READ_SEARCH",
    "FOWNER",
    "FSETID",
    "KILL",
    "SETGID",
    "SETUID",
    "SETPCAP",
    "LINUX_IMMUTABLE",
    "NET_BIND_SERVICE",
    "NET_BROADCAST",
    "NET_ADMIN",
    "NET_RAW",
    "IPC_LOCK",
    "IPC_OWNER",
    "SYS_MODULE",
    "SYS_RAWIO",
    "SYS_CHROOT",
    "SYS_PTRACE",
    "SYS_PACCT",
    "SYS_ADMIN",
    "SYS_BOOT",
    "SYS_NICE",
    "SYS_RESOURCE",
    "SYS_TIME",
    "SYS_TTY_CONFIG",
    "MKNOD",
    "LEASE",
    "AUDIT_WRITE",
    "AUDIT_CONTROL",
    "SETFCAP",
    "MAC_OVERRIDE",
    "MAC_ADMIN",
    "SYSLOG",
    "WAKE_ALARM",
    "BLOCK_SUSPEND",
    "AUDIT_READ",
    "PERFMON",
    "BPF",
    "CHECKPOINT_RESTORE",
];

/// The most CPUs a pool may give one container.
const MAX_CPUS: f64 = 65_536.0;

/// The fewest CPUs a pool may give one container: 0.01, a quota of 1 ms in
/// the kernel's 100 ms period, the least docker's daemon accepts.
const MIN_CPUS: f64 = 0.01;

/// The bytes a size names: a whole number, optionally followed (with or
/// without one space) by a unit in any case: `B`, binary `KiB` `MiB` `GiB`
/// `TiB`, or decimal `KB` `MB` `GB` `TB`. `Err` says why not.
pub(crate) fn parse_size(text: &str) -> Result<u64, String> {
    parse_size_of("memory", text)
}

/// [`parse_size`] of the setting `field`, which its errors name.
fn parse_size_of(field: &str, text: &str) -> Result<u64, String> {
    let text = text.trim();
    let digits = text.len() - text.trim_start_matches(|c: char| c.is_ascii_digit()).len();
    let (number, unit) = text.split_at(digits);
    let malformed = || {
        format!("`{field}` must be a size such as 2GiB, 512MiB or a number of bytes, not {text:?}")
    };
    let number: u64 = number.parse().map_err(|_| malformed())?;
    let unit = unit.strip_prefix(' ').unwrap_or(unit);
    let scale: u64 = match unit.to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "kib" => 1 << 10,
        "mib" => 1 << 20,
        "gib" => 1 << 30,
        "tib" => 1 << 40,
        "kb" => 1_000,
        "mb" => 1_000_000,
        "gb" => 1_000_000_000,
        "tb" => 1_000_000_000_000,
        _ => return Err(malformed()),
    };
    number
        .checked_mul(scale)
        .filter(|bytes| i64::try_from(*bytes).is_ok())
        .ok_or_else(|| format!("`{field}` is too large: {text:?}"))
}

/// The bytes of a `storage:` value (L27): at least
/// [`DockerSettings::MIN_STORAGE`], at most what docker's API counts.
pub(crate) fn storage_bytes(size: &RawSize) -> Result<NonZeroU64, String> {
    let bytes = match size {
        RawSize::Bytes(bytes) if i64::try_from(*bytes).is_err() => {
            return Err(format!("`storage` is too large: {bytes} bytes"));
        }
        RawSize::Bytes(bytes) => *bytes,
        RawSize::Text(text) => parse_size_of("storage", text)?,
    };
    if bytes < DockerSettings::MIN_STORAGE {
        return Err(format!(
            "`storage` must be at least 1MiB (a container's writable layer), not {bytes} bytes"
        ));
    }
    NonZeroU64::new(bytes).ok_or_else(|| "`storage` must be more than 0".to_owned())
}

/// The bytes of a `memory:` value, at least [`DockerSettings::MIN_MEMORY`].
pub(crate) fn memory_bytes(size: &RawSize) -> Result<NonZeroU64, String> {
    let bytes = match size {
        RawSize::Bytes(bytes) if i64::try_from(*bytes).is_err() => {
            return Err(format!("`memory` is too large: {bytes} bytes"));
        }
        RawSize::Bytes(bytes) => *bytes,
        RawSize::Text(text) => parse_size(text)?,
    };
    if bytes < DockerSettings::MIN_MEMORY {
        return Err(format!(
            "`memory` must be at least 6MiB (the least docker accepts), not {bytes} bytes"
        ));
    }
    NonZeroU64::new(bytes).ok_or_else(|| "`memory` must be more than 0".to_owned())
}

/// The billionths of a CPU a `cpus:` value names: from 0.01 to 65536.
pub(crate) fn nano_cpus(cpus: f64) -> Result<NonZeroU64, String> {
    if !(MIN_CPUS..=MAX_CPUS).contains(&cpus) {
        return Err(format!(
            "`cpus` must be a number from 0.01 to 65536 (fractions allowed), not {cpus}"
        ));
    }
    // In range, so the product is from 10^7 to 6.6 * 10^13: exact enough, and
    // never zero.
    NonZeroU64::new((cpus * 1e9).round() as u64)
        .ok_or_else(|| format!("`cpus` must be more than 0, not {cpus}"))
}

/// Whether `user` is a user the engine can run a job as: `USER` or
/// `USER:GROUP`, each a non-blank name or number without whitespace.
pub(crate) fn check_user(user: &str) -> Result<(), String> {
    let well_formed = !user.is_empty()
        && user.split(':').count() <= 2
        && user.split(':').all(|part| {
            !part.is_empty() && !part.chars().any(|c| c.is_whitespace() || c.is_control())
        });
    if well_formed {
        Ok(())
    } else {
        Err(format!(
            "`user` must be USER or USER:GROUP (names or numbers, such as 1000:1000), not {user:?}"
        ))
    }
}

/// A capability's canonical name (upper case, no `CAP_` prefix), if `name`
/// spells one: any case, with or without the prefix, surrounding whitespace
/// trimmed.
pub(crate) fn capability(name: &str) -> Option<&'static str> {
    let upper = name.trim().to_ascii_uppercase();
    let bare = upper.strip_prefix("CAP_").unwrap_or(&upper);
    CAPABILITIES.iter().copied().find(|known| *known == bare)
}

/// The docker block of the provider `provider`, at `base` (such as
/// `providers[0].docker`), checked.
pub(crate) fn check(
    base: &str,
    provider: &str,
    raw: &RawDocker,
) -> Result<DockerSettings, ConfigError> {
    let bad = |value_at: Box<crate::Location>, reason: String| ConfigError::BadSetting {
        location: value_at,
        provider: provider.to_owned(),
        reason,
    };
    let nano_cpus = match &raw.cpus {
        Some(cpus) => Some(
            nano_cpus(cpus.value)
                .map_err(|reason| bad(at(cpus, format!("{base}.cpus")), reason))?,
        ),
        None => None,
    };
    let memory = match &raw.memory {
        Some(memory) => Some(
            memory_bytes(&memory.value)
                .map_err(|reason| bad(at(memory, format!("{base}.memory")), reason))?,
        ),
        None => None,
    };
    let storage = match &raw.storage {
        Some(storage) => Some(
            storage_bytes(&storage.value)
                .map_err(|reason| bad(at(storage, format!("{base}.storage")), reason))?,
        ),
        None => None,
    };
    let pids_limit = match &raw.pids_limit {
        Some(limit) => Some(NonZeroU32::new(limit.value).ok_or_else(|| {
            bad(
                at(limit, format!("{base}.pids_limit")),
                "`pids_limit` must be at least 1".to_owned(),
            )
        })?),
        None => None,
    };
    let user = match &raw.user {
        Some(user) => {
            check_user(&user.value)
                .map_err(|reason| bad(at(user, format!("{base}.user")), reason))?;
            Some(user.value.clone())
        }
        None => None,
    };
    let mut cap_add: Vec<String> = Vec::new();
    let entries: &[Spanned<String>] = raw.cap_add.as_ref().map_or(&[], |list| &list.value);
    for (index, entry) in entries.iter().enumerate() {
        let Some(name) = capability(&entry.value) else {
            return Err(ConfigError::UnknownCapability {
                location: at(entry, format!("{base}.cap_add[{index}]")),
                provider: provider.to_owned(),
                given: entry.value.clone(),
            });
        };
        if !cap_add.iter().any(|known| known == name) {
            cap_add.push(name.to_owned());
        }
    }
    let (tls, insecure) = transport(base, provider, raw)?;
    let (runtime, isolation) = runtime(base, provider, raw)?;
    let network = network(base, provider, raw)?;
    Ok(DockerSettings {
        image: raw.image.clone(),
        endpoint: raw.endpoint.as_ref().map(|endpoint| endpoint.value.clone()),
        tls,
        insecure,
        network,
        nano_cpus,
        memory,
        storage,
        pids_limit,
        user,
        read_only: raw.read_only.unwrap_or(false),
        cap_add,
        runtime,
        isolation,
    })
}

/// Whether a docker network mode shares a namespace outside the container's
/// own (F5): `host` (the host's, its loopback and billet's API on it
/// included), `container:ID` (another container's) or podman's `ns:PATH`.
pub(crate) fn shares_a_namespace(network: &str) -> bool {
    let network = network.trim();
    network.eq_ignore_ascii_case("host")
        || network
            .get(..10)
            .is_some_and(|head| head.eq_ignore_ascii_case("container:"))
        || network
            .get(..3)
            .is_some_and(|head| head.eq_ignore_ascii_case("ns:"))
}

/// The pool's network (F5): one that shares a namespace outside the
/// container's own is refused unless the block says `allow_host_network:
/// true`, which is refused in turn on a pool whose network shares nothing.
fn network(base: &str, provider: &str, raw: &RawDocker) -> Result<Option<String>, ConfigError> {
    let bad = |value_at: Box<crate::Location>, reason: String| ConfigError::BadSetting {
        location: value_at,
        provider: provider.to_owned(),
        reason,
    };
    let allowed = raw.allow_host_network.as_ref();
    let shares = raw
        .network
        .as_ref()
        .is_some_and(|network| shares_a_namespace(&network.value));
    match (&raw.network, allowed) {
        (Some(network), allowed) if shares && !allowed.is_some_and(|flag| flag.value) => Err(bad(
            at(network, format!("{base}.network")),
            format!(
                "network {:?} puts every job in a namespace outside its container: a job then reaches what listens there (on `host`, the host's loopback, billet's own API included). Give `allow_host_network: true` to accept that",
                network.value
            ),
        )),
        (_, Some(flag)) if flag.value && !shares => Err(bad(
            at(flag, format!("{base}.allow_host_network")),
            "`allow_host_network: true` is for `network: host`, `container:ID` or `ns:PATH`; this pool's network is its own".to_owned(),
        )),
        (network, _) => Ok(network.as_ref().map(|network| network.value.clone())),
    }
}

/// The pool's runtime and whether it is a boundary (D19): a runtime is a
/// name, not blank; `isolation` is `boundary` or `none`, and `boundary`
/// needs a runtime (the daemon's default shares the host's kernel).
fn runtime(
    base: &str,
    provider: &str,
    raw: &RawDocker,
) -> Result<(Option<String>, Isolation), ConfigError> {
    let bad = |value_at: Box<crate::Location>, reason: String| ConfigError::BadSetting {
        location: value_at,
        provider: provider.to_owned(),
        reason,
    };
    let runtime = match &raw.runtime {
        Some(name) if name.value.trim().is_empty() || name.value.trim() != name.value => {
            return Err(bad(
                at(name, format!("{base}.runtime")),
                format!(
                    "`runtime` must be the name a docker daemon lists a runtime by (such as runsc), not {:?}",
                    name.value
                ),
            ));
        }
        Some(name) => Some(name.value.clone()),
        None => None,
    };
    let isolation = match &raw.isolation {
        None => Isolation::NoBoundary,
        Some(word) => match word.value.as_str() {
            "none" => Isolation::NoBoundary,
            "boundary" if runtime.is_none() => {
                return Err(bad(
                    at(word, format!("{base}.isolation")),
                    "`isolation: boundary` needs `runtime:` naming a runtime that is one (such as runsc, gVisor): under the daemon's default runtime a container shares the host's kernel".to_owned(),
                ));
            }
            "boundary" => Isolation::Boundary,
            other => {
                return Err(bad(
                    at(word, format!("{base}.isolation")),
                    format!("`isolation` must be `boundary` or `none`, not {other:?}"),
                ));
            }
        },
    };
    Ok((runtime, isolation))
}

/// Whether `endpoint` is docker's TCP form, which is plain HTTP unless
/// TLS is given: `tcp://` or `http://`, in any case.
fn is_tcp(endpoint: &str) -> bool {
    let lower = endpoint.trim().to_ascii_lowercase();
    lower.starts_with("tcp://") || lower.starts_with("http://")
}

/// The pool's transport (D17): its `tls` files, and whether it chose plain
/// TCP with `insecure: true`. Plain TCP without `insecure` is refused (a
/// daemon on plain TCP is root on its machine for whoever reaches the
/// port); `tls` needs a `tcp://` endpoint, `insecure` a plain one.
fn transport(
    base: &str,
    provider: &str,
    raw: &RawDocker,
) -> Result<(Option<DockerTls>, bool), ConfigError> {
    let bad = |value_at: Box<crate::Location>, reason: String| ConfigError::BadSetting {
        location: value_at,
        provider: provider.to_owned(),
        reason,
    };
    let endpoint = raw.endpoint.as_ref();
    let tcp = endpoint.is_some_and(|endpoint| is_tcp(&endpoint.value));
    let insecure = raw.insecure.as_ref().is_some_and(|insecure| insecure.value);
    let tls = match &raw.tls {
        None => None,
        Some(block) => {
            let tls_tcp = endpoint.is_some_and(|endpoint| {
                endpoint
                    .value
                    .trim()
                    .to_ascii_lowercase()
                    .starts_with("tcp://")
            });
            if !tls_tcp {
                return Err(bad(
                    at(block, format!("{base}.tls")),
                    "`tls` is mutual TLS to a daemon on TCP: it needs `endpoint: tcp://HOST:PORT`"
                        .to_owned(),
                ));
            }
            let path = |field: &Spanned<String>, name: &str| {
                if field.value.trim().is_empty() {
                    Err(bad(
                        at(field, format!("{base}.tls.{name}")),
                        format!("`tls.{name}` must be the path of a PEM file, not blank"),
                    ))
                } else {
                    Ok(std::path::PathBuf::from(&field.value))
                }
            };
            Some(DockerTls {
                ca: path(&block.value.ca, "ca")?,
                cert: path(&block.value.cert, "cert")?,
                key: path(&block.value.key, "key")?,
            })
        }
    };
    match (&raw.insecure, endpoint) {
        (Some(flag), _) if flag.value && tls.is_some() => Err(bad(
            at(flag, format!("{base}.insecure")),
            "`insecure: true` and `tls` contradict each other: give `tls` for mutual TLS, or `insecure: true` for plain TCP, not both"
                .to_owned(),
        )),
        (Some(flag), _) if flag.value && !tcp => Err(bad(
            at(flag, format!("{base}.insecure")),
            "`insecure: true` is for a plain `tcp://HOST:PORT` endpoint; this pool has none"
                .to_owned(),
        )),
        (_, Some(endpoint)) if tcp && tls.is_none() && !insecure => Err(bad(
            at(endpoint, format!("{base}.endpoint")),
            format!(
                "{:?} is plain TCP: whoever can reach that port is root on the daemon's machine (a job on a bridge network included). Give `tls: {{ca: PATH, cert: PATH, key: PATH}}` for mutual TLS, or `insecure: true` to accept that",
                endpoint.value
            ),
        )),
        _ => Ok((tls, insecure)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // D15: sizes are whole numbers with a unit in any case, binary or
    // decimal; anything else is refused, and so is a size past i64.
    #[test]
    fn d15_sizes_parse_by_unit() {
        assert_eq!(parse_size("2GiB"), Ok(2 << 30));
        assert_eq!(parse_size("512MiB"), Ok(512 << 20));
        assert_eq!(parse_size("512 mib"), Ok(512 << 20));
        assert_eq!(parse_size(" 3KiB "), Ok(3 << 10));
        assert_eq!(parse_size("1TiB"), Ok(1 << 40));
        assert_eq!(parse_size("7"), Ok(7));
        assert_eq!(parse_size("7B"), Ok(7));
        assert_eq!(parse_size("2kB"), Ok(2_000));
        assert_eq!(parse_size("2MB"), Ok(2_000_000));
        assert_eq!(parse_size("2GB"), Ok(2_000_000_000));
        assert_eq!(parse_size("2TB"), Ok(2_000_000_000_000));
        for bad in [
            "", "GiB", "2 GiB2", "2  GiB", "2g", "1.5GiB", "-1", "two", "2XiB",
        ] {
            let error = parse_size(bad).unwrap_err();
            assert!(error.contains("must be a size"), "{bad:?}: {error}");
        }
        assert_eq!(parse_size("8388607TiB"), Ok(8_388_607 << 40));
        assert!(parse_size("8388608TiB").unwrap_err().contains("too large"));
        assert!(parse_size("99999999999999999999").is_err());
        assert!(
            parse_size("20000000000TB")
                .unwrap_err()
                .contains("too large")
        );
    }

    // D15: memory is at least 6 MiB and fits docker's i64.
    #[test]
    fn d15_memory_has_a_floor_and_a_ceiling() {
        let min = DockerSettings::MIN_MEMORY;
        assert_eq!(
            memory_bytes(&RawSize::Bytes(min)).map(NonZeroU64::get),
            Ok(min)
        );
        assert!(
            memory_bytes(&RawSize::Bytes(min - 1))
                .unwrap_err()
                .contains("at least 6MiB")
        );
        assert!(
            memory_bytes(&RawSize::Bytes(0))
                .unwrap_err()
                .contains("at least 6MiB")
        );
        assert!(memory_bytes(&RawSize::Text("0GiB".into())).is_err());
        let max = i64::MAX as u64;
        assert_eq!(
            memory_bytes(&RawSize::Bytes(max)).map(NonZeroU64::get),
            Ok(max)
        );
        assert!(
            memory_bytes(&RawSize::Bytes(max + 1))
                .unwrap_err()
                .contains("too large")
        );
        assert_eq!(
            memory_bytes(&RawSize::Text("2GiB".into())).map(NonZeroU64::get),
            Ok(2 << 30)
        );
        assert!(memory_bytes(&RawSize::Text("2 lots".into())).is_err());
    }

    // D15: cpus from 0.01 to 65536, in billionths.
    #[test]
    fn d15_cpus_are_bounded() {
        assert_eq!(nano_cpus(1.5).map(NonZeroU64::get), Ok(1_500_000_000));
        assert_eq!(nano_cpus(0.01).map(NonZeroU64::get), Ok(10_000_000));
        assert_eq!(
            nano_cpus(65_536.0).map(NonZeroU64::get),
            Ok(65_536_000_000_000)
        );
        for bad in [0.0, -1.0, 0.009, 65_536.5, f64::NAN, f64::INFINITY] {
            assert!(nano_cpus(bad).unwrap_err().contains("from 0.01"), "{bad}");
        }
    }

    // D15: a user is USER or USER:GROUP, no part blank, no whitespace.
    #[test]
    fn d15_users_are_well_formed() {
        for good in ["1000", "1000:1000", "nobody", "runner:ci", "0:0"] {
            assert_eq!(check_user(good), Ok(()), "{good}");
        }
        for bad in [
            "", ":", "1000:", ":1000", "a:b:c", "run ner", "a\tb", "a\u{7}",
        ] {
            assert!(check_user(bad).is_err(), "{bad:?}");
        }
    }

    // D15: capability names in any case, with or without the prefix.
    #[test]
    fn d15_capabilities_are_linux_names() {
        assert_eq!(capability("NET_RAW"), Some("NET_RAW"));
        assert_eq!(capability("cap_net_raw"), Some("NET_RAW"));
        assert_eq!(capability(" Cap_Sys_Ptrace "), Some("SYS_PTRACE"));
        assert_eq!(capability("chown"), Some("CHOWN"));
        assert_eq!(capability("checkpoint_restore"), Some("CHECKPOINT_RESTORE"));
        for bad in ["", "CAP_", "ALL", "NET_RAWX", "CAP_CAP_NET_RAW", "FLY"] {
            assert_eq!(capability(bad), None, "{bad:?}");
        }
    }
}
