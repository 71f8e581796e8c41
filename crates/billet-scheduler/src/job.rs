//! What a scheduler is asked to run ([`Job`], [`JobId`]) and how each job
//! ends ([`Outcome`], [`FailReason`]).

use std::fmt;
use std::time::Duration;

use billet_provider::TrustClass;

/// A job's identity, unique within one deployment for the deployment's life.
///
/// The job's instance is named from it and from the pool it runs in
/// ([`JobId::instance_name`]), and a scheduler that finds an instance so named
/// in an inventory knows which job, and which pool, it is for
/// ([`JobId::from_instance_name`]), even when several pools share one
/// backend's inventory, and after a restart.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct JobId(pub u64);

/// What every instance name this scheduler gives starts with.
const NAME_PREFIX: &str = "job-";

impl JobId {
    /// The name of this job's instance in the pool named `pool`: `job-`, the
    /// id in decimal, `.` and the pool's name (`job-42.linux`). Two jobs never
    /// share it; one job's every launch in one pool uses it.
    pub fn instance_name(self, pool: &str) -> String {
        self.instance_name_in(None, pool)
    }

    /// The job and the pool name an instance named `name` is for, or `None`
    /// when the name is not one [`JobId::instance_name`] gives (another
    /// prefix, a sign or leading zeros in the id, no pool name): such an
    /// instance is no job's.
    pub fn from_instance_name(name: &str) -> Option<(JobId, &str)> {
        // One pass over the digits: every inventory entry is read this way.
        let rest = name.strip_prefix(NAME_PREFIX)?.as_bytes();
        let mut id: u64 = 0;
        let mut digits = 0;
        for &b in rest {
            if !b.is_ascii_digit() {
                break;
            }
            id = id.checked_mul(10)?.checked_add(u64::from(b - b'0'))?;
            digits += 1;
        }
        let leading_zero = digits > 1 && rest[0] == b'0';
        if digits == 0 || leading_zero || rest.get(digits) != Some(&b'.') {
            return None;
        }
        let pool = &name[NAME_PREFIX.len() + digits + 1..];
        (!pool.is_empty()).then_some((JobId(id), pool))
    }
}

/// A store's identity (L10): what tells one store's instances from
/// another's when several stores, one after another or at once, run jobs of
/// one deployment.
///
/// A scheduler given one ([`Core::with_identity`](crate::Core::with_identity))
/// puts it at the front of every instance name it gives
/// (`IDENTITY.job-42.linux`), adopts only instances so named, and treats a
/// job's name under any other identity, or under none, as another store's.
/// It is 8 to 32 lower-case hexadecimal digits: it can never be read as the
/// `job-` prefix, nor hold the `.` that ends it.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Identity(std::sync::Arc<str>);

impl Identity {
    /// The fewest and the most digits an identity has.
    pub const DIGITS: std::ops::RangeInclusive<usize> = 8..=32;

    /// `text` as an identity, or `None` when it is not 8 to 32 lower-case
    /// hexadecimal digits.
    pub fn new(text: &str) -> Option<Identity> {
        let valid = Identity::DIGITS.contains(&text.len())
            && text.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'));
        valid.then(|| Identity(std::sync::Arc::from(text)))
    }

    /// The identity's text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for Identity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// An instance name read as a job's ([`InstanceName::parse`]): under which
/// store's identity (none for a name without one), for which job, in which
/// pool.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InstanceName<'a> {
    /// The identity the name carries, if any.
    pub store: Option<&'a str>,
    /// The job.
    pub job: JobId,
    /// The pool's name.
    pub pool: &'a str,
}

impl<'a> InstanceName<'a> {
    /// Reads `name`: a name [`JobId::instance_name`] gives, or one
    /// [`JobId::instance_name_in`] gives under an identity. `None` for any
    /// other name (no job's instance).
    pub fn parse(name: &'a str) -> Option<InstanceName<'a>> {
        if let Some((job, pool)) = JobId::from_instance_name(name) {
            return Some(InstanceName {
                store: None,
                job,
                pool,
            });
        }
        let (store, rest) = name.split_once('.')?;
        Identity::new(store)?;
        let (job, pool) = JobId::from_instance_name(rest)?;
        Some(InstanceName {
            store: Some(store),
            job,
            pool,
        })
    }
}

impl JobId {
    /// The name of this job's instance in the pool named `pool` under the
    /// store `store`: [`instance_name`](JobId::instance_name) with the
    /// identity and a `.` in front (`0a1b2c3d.job-42.linux`), or without
    /// when `store` is `None`.
    pub fn instance_name_in(self, store: Option<&Identity>, pool: &str) -> String {
        // Written piece by piece, not with `format!`: a name is made for
        // every launch and every look, and the formatter's machinery cost
        // more than all the rest of naming (issue 49).
        let store = store.map(Identity::as_str);
        let mut digits = itoa::Buffer::new();
        let id = digits.format(self.0);
        let mut name = String::with_capacity(
            store.map_or(0, |s| s.len() + 1) + NAME_PREFIX.len() + id.len() + 1 + pool.len(),
        );
        if let Some(store) = store {
            name.push_str(store);
            name.push('.');
        }
        name.push_str(NAME_PREFIX);
        name.push_str(id);
        name.push('.');
        name.push_str(pool);
        name
    }
}

impl fmt::Display for JobId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// One unit of CI work: what to run, where it may run, and for how long.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Job {
    /// The job's identity.
    pub id: JobId,
    /// Labels routing matches against (`routing.routes[].labels`).
    pub labels: Vec<String>,
    /// How far the work is trusted; `Untrusted` and `Unknown` run only on
    /// pools of `routing.untrusted_kinds` whose provider accepts them.
    pub trust: TrustClass,
    /// The command the instance runs (argv).
    pub command: Vec<String>,
    /// When set, a job holding its lease longer than this is stopped and ends
    /// failed ([`FailReason::TimedOut`]). Measured from placement.
    pub timeout: Option<Duration>,
    /// When set, the job runs in the pool of this name and no other (a
    /// GitHub runner must run where its labels are offered): routing's
    /// routes and fallbacks are not asked, and trust still narrows it
    /// (B3). A name no pool has is refused.
    pub pool: Option<String>,
}

impl Job {
    /// A job with no labels, trust `Unknown` (the default) and no timeout.
    pub fn new<C, S>(id: JobId, command: C) -> Job
    where
        C: IntoIterator<Item = S>,
        S: Into<String>,
    {
        Job {
            id,
            labels: Vec::new(),
            trust: TrustClass::default(),
            command: command.into_iter().map(Into::into).collect(),
            timeout: None,
            pool: None,
        }
    }

    /// The same job carrying these labels.
    #[must_use]
    pub fn with_labels<L, S>(mut self, labels: L) -> Job
    where
        L: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.labels = labels.into_iter().map(Into::into).collect();
        self
    }

    /// The same job with this trust class.
    #[must_use]
    pub fn with_trust(mut self, trust: TrustClass) -> Job {
        self.trust = trust;
        self
    }

    /// The same job with this timeout.
    #[must_use]
    pub fn with_timeout(mut self, timeout: Duration) -> Job {
        self.timeout = Some(timeout);
        self
    }

    /// The same job, to run in the pool named `pool` only.
    #[must_use]
    pub fn in_pool(mut self, pool: impl Into<String>) -> Job {
        self.pool = Some(pool.into());
        self
    }
}

/// How a job ended. Every job the scheduler accepted ends in exactly one.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Outcome {
    /// Its instance ran to the end and stopped with this exit code.
    Finished {
        /// The instance's exit code.
        exit_code: i32,
    },
    /// It did not run to the end, for this reason.
    Failed {
        /// Why.
        reason: FailReason,
    },
    /// It was cancelled: removed from the queue, or its instance destroyed.
    Cancelled,
}

/// Why a job failed.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum FailReason {
    /// The provider refused the work (its trust class); the message says why.
    Refused(String),
    /// The provider found the spec invalid; the message says why.
    Invalid(String),
    /// Its instance was absent from an inventory that answered.
    Vanished,
    /// It held its lease longer than its timeout.
    TimedOut,
    /// A launch or destroy whose effect stayed unknown was retried for
    /// longer than [`Settings::give_up_after`](crate::Settings::give_up_after)
    /// (L14); the message says which call, how long, and the last error.
    GaveUp(String),
}

impl fmt::Display for FailReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FailReason::Refused(why) => write!(f, "refused: {why}"),
            FailReason::Invalid(why) => write!(f, "invalid: {why}"),
            FailReason::Vanished => f.write_str("vanished: its instance left the inventory"),
            FailReason::TimedOut => f.write_str("timed out"),
            FailReason::GaveUp(why) => write!(f, "gave up: {why}"),
        }
    }
}

impl fmt::Display for Outcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Outcome::Finished { exit_code } => write!(f, "finished (exit code {exit_code})"),
            Outcome::Failed { reason } => write!(f, "failed ({reason})"),
            Outcome::Cancelled => f.write_str("cancelled"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // B5: one instance per lease, named from the job (and its pool), and the
    // name leads back.
    #[test]
    fn b5_instance_names_round_trip() {
        for id in [
            0,
            1,
            42,
            9_999_999_999_999_999_999,
            10_000_000_000_000_000_000,
            u64::MAX,
        ] {
            for pool in ["linux", "a.b", "x"] {
                let name = JobId(id).instance_name(pool);
                assert_eq!(name, format!("job-{id}.{pool}"));
                assert_eq!(name.capacity(), name.len(), "made at its size");
                assert_eq!(JobId::from_instance_name(&name), Some((JobId(id), pool)));
            }
        }
    }

    // B7: names no job of this scheduler has are nobody's job.
    #[test]
    fn b7_foreign_names_are_no_job() {
        for name in [
            "",
            "job-",
            "job-.a",
            "job-1",
            "job-1.",
            "job-01.a",
            "job-+1.a",
            "job--1.a",
            "job-1x.a",
            "Job-1.a",
            "x-job-1.a",
            "job-18446744073709551616.a",
            "job-0x1.a",
        ] {
            assert_eq!(JobId::from_instance_name(name), None, "{name:?}");
        }
        assert_eq!(JobId::from_instance_name("job-0.p"), Some((JobId(0), "p")));
    }

    // L10: a store's identity leads every name it gives, and a name read
    // back says whose it is; nothing else reads as an identity.
    #[test]
    fn l10_names_carry_the_store_identity() {
        let store = Identity::new("0a1b2c3d").unwrap();
        assert_eq!(store.as_str(), "0a1b2c3d");
        assert_eq!(store.to_string(), "0a1b2c3d");
        let name = JobId(42).instance_name_in(Some(&store), "a.b");
        assert_eq!(name, "0a1b2c3d.job-42.a.b");
        assert_eq!(name.capacity(), name.len(), "made at its size");
        assert_eq!(
            InstanceName::parse(&name),
            Some(InstanceName {
                store: Some("0a1b2c3d"),
                job: JobId(42),
                pool: "a.b"
            })
        );
        assert_eq!(JobId(42).instance_name_in(None, "p"), "job-42.p");
        assert_eq!(
            InstanceName::parse("job-7.p"),
            Some(InstanceName {
                store: None,
                job: JobId(7),
                pool: "p"
            })
        );
        let longest = "f".repeat(32);
        assert!(Identity::new(&longest).is_some());
        for bad in [
            "",
            "0a1b2c3",
            "0A1B2C3D",
            "0a1b2c3g",
            "0a1b.c3d",
            &"f".repeat(33),
        ] {
            assert_eq!(Identity::new(bad), None, "{bad:?}");
            assert_eq!(
                InstanceName::parse(&format!("{bad}.job-1.p")),
                None,
                "{bad:?}"
            );
        }
        for bad in ["0a1b2c3d.", "0a1b2c3d.job-1", "0a1b2c3d.x-1.p", "0a1b2c3d"] {
            assert_eq!(InstanceName::parse(bad), None, "{bad:?}");
        }
    }

    /// The rule, said plainly: what `from_instance_name` must answer.
    fn plainly(name: &str) -> Option<(JobId, &str)> {
        let (digits, pool) = name.strip_prefix("job-")?.split_once('.')?;
        let canonical = !digits.is_empty()
            && !pool.is_empty()
            && digits.bytes().all(|b| b.is_ascii_digit())
            && (digits == "0" || !digits.starts_with('0'));
        if !canonical {
            return None;
        }
        digits.parse().ok().map(|id| (JobId(id), pool))
    }

    proptest::proptest! {
        // B7: the one-pass reading of a name agrees with the rule on any
        // name, job-like or not.
        #[test]
        fn b7_names_are_read_by_the_rule(
            name in "(job-)?[0-9]{0,21}[.]?[a-z.]{0,3}|.{0,12}",
        ) {
            proptest::prop_assert_eq!(JobId::from_instance_name(&name), plainly(&name));
        }
    }

    #[test]
    fn b9_outcomes_say_what_happened() {
        assert_eq!(
            Outcome::Finished { exit_code: 3 }.to_string(),
            "finished (exit code 3)"
        );
        assert_eq!(Outcome::Cancelled.to_string(), "cancelled");
        let failed = |reason| Outcome::Failed { reason }.to_string();
        assert_eq!(failed(FailReason::TimedOut), "failed (timed out)");
        assert_eq!(
            failed(FailReason::Vanished),
            "failed (vanished: its instance left the inventory)"
        );
        assert_eq!(
            failed(FailReason::Refused("no".into())),
            "failed (refused: no)"
        );
        assert_eq!(
            failed(FailReason::Invalid("bad".into())),
            "failed (invalid: bad)"
        );
        assert_eq!(
            failed(FailReason::GaveUp("launch".into())),
            "failed (gave up: launch)"
        );
        assert_eq!(JobId(7).to_string(), "7");
    }

    #[test]
    fn b9_job_builder_sets_each_field() {
        let job = Job::new(JobId(3), ["run", "x"])
            .with_labels(["linux"])
            .with_trust(TrustClass::Trusted)
            .with_timeout(Duration::from_secs(5));
        assert_eq!(job.id, JobId(3));
        assert_eq!(job.command, ["run", "x"]);
        assert_eq!(job.labels, ["linux"]);
        assert_eq!(job.trust, TrustClass::Trusted);
        assert_eq!(job.timeout, Some(Duration::from_secs(5)));
        let plain = Job::new(JobId(4), ["true"]);
        assert!(plain.labels.is_empty());
        assert_eq!(plain.trust, TrustClass::Unknown);
        assert_eq!(plain.timeout, None);
    }
}
