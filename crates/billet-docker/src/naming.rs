//! Identity on the daemon: the labels every billet container carries, and the
//! container name derived from (owner, instance name).

use sha2::{Digest, Sha256};

/// The label that carries the deployment (owner) that started a container.
///
/// Every container a [`DockerProvider`](crate::DockerProvider) starts carries
/// it; a container without it was not started by billet and is never touched.
pub const OWNER_LABEL: &str = "billet.owner";

/// The label that carries the instance name exactly as the spec gave it.
pub const NAME_LABEL: &str = "billet.name";

/// The label that carries the mark of the launch that created a container: 32
/// hex digits drawn at random for each launch.
///
/// It lets a provider recognise a container of its own launch that failed or
/// was dropped after the daemon may have created it (the answer was lost), so
/// that it removes that container rather than report it. A container without
/// a well-formed mark was not started by billet (D12).
pub const LAUNCH_LABEL: &str = "billet.launch";

/// A fresh launch mark: 128 random bits as 32 lower-case hex digits.
pub(crate) fn new_launch_mark() -> String {
    format!("{:032x}", rand::random::<u128>())
}

/// Whether `mark` is a launch mark as [`new_launch_mark`] makes them.
pub(crate) fn is_launch_mark(mark: &str) -> bool {
    mark.len() == 32 && mark.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

/// The prefix of every container name billet gives on the daemon.
pub const NAME_PREFIX: &str = "billet-";

/// The daemon-side container name of the instance `name` of deployment `owner`.
///
/// Docker's container names allow only `[a-zA-Z0-9][a-zA-Z0-9_.-]*`, while an
/// instance name may hold anything the contract allows (case, spaces,
/// non-ASCII). The container name is therefore derived: `billet-`, up to 24
/// characters of the name with every other character replaced by `_` (for the
/// people reading `docker ps`), a `-`, and 32 hex digits of a SHA-256 digest of
/// the owner and the name, each length-prefixed so that no two (owner, name)
/// pairs share an input. The same pair always gives the same container name, so
/// the daemon itself refuses a second container for it (a 409 conflict), even
/// when two processes launch the name at once. Different pairs give different
/// names (unless SHA-256 collides in 128 bits). Its `billet-` prefix holds
/// letters that are not hex digits, so the daemon never resolves it as a
/// container id prefix.
pub fn container_name(owner: &str, name: &str) -> String {
    let mut hasher = Sha256::new();
    for part in [owner, name] {
        hasher.update((part.len() as u64).to_le_bytes());
        hasher.update(part.as_bytes());
    }
    let digest = hasher.finalize();
    let mut out = String::with_capacity(NAME_PREFIX.len() + 24 + 1 + 32);
    out.push_str(NAME_PREFIX);
    for c in name.chars().take(24) {
        out.push(
            if c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-') {
                c
            } else {
                '_'
            },
        );
    }
    out.push('-');
    for byte in &digest[..16] {
        out.push(char::from_digit(u32::from(byte >> 4), 16).unwrap_or('0'));
        out.push(char::from_digit(u32::from(byte & 0xf), 16).unwrap_or('0'));
    }
    out
}

/// Whether `id` is a full docker container id: 64 lower-case hex digits.
///
/// Docker's API also resolves id prefixes and container names; the provider
/// answers only to a full id, compared by itself.
pub(crate) fn is_full_id(id: &str) -> bool {
    id.len() == 64 && id.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Docker's rule for container names (`[a-zA-Z0-9][a-zA-Z0-9_.-]+`).
    fn docker_accepts(name: &str) -> bool {
        let mut chars = name.chars();
        chars.next().is_some_and(|c| c.is_ascii_alphanumeric())
            && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-'))
            && name.len() > 1
    }

    // D2: any name the contract allows becomes a container name docker accepts,
    // and distinct (owner, name) pairs never share one.
    #[test]
    fn d2_derived_names_are_docker_names_and_distinct() {
        let names = [
            "job-1",
            "Job-1",
            "job 1",
            " job-1",
            "job-1 ",
            "ジョブ",
            "a/b:c",
            "",
            "x",
            &"long".repeat(100),
        ];
        let owners = ["blue", "Blue", "blue ", "a\u{0}b", "é"];
        let mut seen = std::collections::HashSet::new();
        for owner in owners {
            for name in names {
                let derived = container_name(owner, name);
                assert!(docker_accepts(&derived), "{derived:?}");
                assert!(derived.len() <= 64, "{derived:?}");
                assert!(seen.insert(derived), "{owner:?} {name:?}");
            }
        }
        // The length prefix keeps ("ab", "c") and ("a", "bc") apart.
        assert_ne!(container_name("ab", "c"), container_name("a", "bc"));
        // Deterministic: the same pair gives the same name, run after run.
        assert_eq!(
            container_name("blue", "job-1"),
            container_name("blue", "job-1")
        );
    }

    // D12: launch marks are fresh and well-formed; anything else is no mark.
    #[test]
    fn d12_launch_marks_are_fresh_and_checked() {
        let (a, b) = (new_launch_mark(), new_launch_mark());
        assert!(is_launch_mark(&a) && is_launch_mark(&b));
        assert_ne!(a, b);
        assert!(!is_launch_mark(&a[..31]));
        assert!(!is_launch_mark(
            &a.to_uppercase().replace(|c: char| c.is_ascii_digit(), "A")
        ));
        assert!(!is_launch_mark(""));
        assert!(!is_launch_mark(&format!("{}g", &a[..31])));
    }

    // D6: only 64 lower-case hex digits are a full id.
    #[test]
    fn d6_full_ids_only() {
        let full = "a".repeat(64);
        assert!(is_full_id(&full));
        assert!(!is_full_id(&full[..12]));
        assert!(!is_full_id(&"A".repeat(64)));
        assert!(!is_full_id(&format!("{}g", "a".repeat(63))));
        assert!(!is_full_id("billet-job"));
        assert!(!is_full_id(""));
    }
}
