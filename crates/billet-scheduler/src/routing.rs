//! Routing (B3): which pools may take a job, in what order, and why a job
//! that no pool could ever take is refused.
//!
//! Decided once, at submission, from the configuration and what each pool's
//! provider accepts; the answer is a [`Target`], the set of pools the job
//! waits for. Jobs with the same target wait in one queue, first come first
//! served; jobs with different targets never wait behind each other (B4).

use std::fmt;

use billet_config::Config;
use billet_provider::{ProviderKind, Resources, TrustClass};

use crate::job::Job;

/// A pool's place in the configuration's `providers` list (0 for the first).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct PoolId(pub usize);

impl fmt::Display for PoolId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "#{}", self.0)
    }
}

/// What the core knows of one pool: its configuration, and what its
/// provider accepts (asked once, when the scheduler is built).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PoolInfo {
    /// The configured name.
    pub name: String,
    /// The configured kind: what routing (`default_kind`, `fallback_kind`,
    /// `untrusted_kinds`) matches against.
    pub kind: ProviderKind,
    /// The most leases it holds at once.
    pub capacity: u32,
    /// Whether its provider accepts each trust class, indexed as
    /// [`TrustClass::ALL`] (unknown, untrusted, trusted).
    pub accepts: [bool; 3],
    /// The image its instances start from (the kind's settings block).
    pub image: String,
    /// The resources each instance asks for.
    pub resources: Resources,
}

impl PoolInfo {
    /// Whether this pool's provider accepts `trust`.
    pub fn accepts(&self, trust: TrustClass) -> bool {
        self.accepts[trust_index(trust)]
    }
}

/// A trust class's place in [`TrustClass::ALL`] order.
pub(crate) fn trust_index(trust: TrustClass) -> usize {
    match trust {
        TrustClass::Unknown => 0,
        TrustClass::Untrusted => 1,
        TrustClass::Trusted => 2,
    }
}

/// The pools a job may run on, and how one is chosen among them.
///
/// **The rule** (documented, deterministic): when the job matched a route,
/// the route's provider is taken whenever it has room; otherwise (its
/// `fallback_kind` pools, or the pools of `default_kind` for a job no route
/// matched) the pool with the most free leases is taken, ties going to the
/// pool that comes first in the configuration.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Target {
    /// The route's own provider, tried first, when the job matched a route and
    /// may run there.
    pub primary: Option<PoolId>,
    /// The other pools, in configuration order.
    pub others: Vec<PoolId>,
}

impl Target {
    /// Every pool of the target: the primary first, then the others.
    pub fn pools(&self) -> impl Iterator<Item = PoolId> + '_ {
        self.primary
            .iter()
            .copied()
            .chain(self.others.iter().copied())
    }

    /// The pool the rule picks, given each pool's free leases (`free(pool)`;
    /// zero means full), or `None` when every pool of the target is full.
    pub fn choose(&self, free: impl Fn(PoolId) -> u32) -> Option<PoolId> {
        if let Some(primary) = self.primary
            && free(primary) > 0
        {
            return Some(primary);
        }
        let mut best: Option<(PoolId, u32)> = None;
        for &pool in &self.others {
            let room = free(pool);
            if room > 0 && best.is_none_or(|(_, most)| room > most) {
                best = Some((pool, room));
            }
        }
        best.map(|(pool, _)| pool)
    }
}

/// Why a job was refused at submission: no pool could ever take it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Refusal {
    /// No route matches the job's labels and the configuration has no
    /// `default_kind`.
    #[error("no route matches labels [{}] and routing has no default_kind", .labels.join(", "))]
    NoRoute {
        /// The job's labels.
        labels: Vec<String>,
    },
    /// Some pools would take the job's labels, but none of them may run its
    /// trust class (not in `untrusted_kinds`, or its provider refuses it).
    #[error("no pool may run {trust} work among those routing allows for it ({})", .pools.join(", "))]
    Trust {
        /// The job's trust class.
        trust: TrustClass,
        /// The pools routing allowed, by name.
        pools: Vec<String>,
    },
    /// The job is pinned to a pool ([`Job::pool`](crate::Job::pool)) that
    /// no configured provider is.
    #[error("no pool is named {pool:?}")]
    NoPool {
        /// The name the job gave.
        pool: String,
    },
    /// A job with this id is already known and has not ended.
    #[error("job {id} is already accepted and has not ended")]
    Duplicate {
        /// The job's id.
        id: u64,
    },
}

/// Whether `pool` may run work of `trust` under `config`'s routing: trusted
/// work wherever the provider accepts it; untrusted and unclassified work only
/// on a kind of `untrusted_kinds`, and only where the provider accepts it.
pub(crate) fn may_run(config: &Config, pool: &PoolInfo, trust: TrustClass) -> bool {
    let kind_allows = trust == TrustClass::Trusted
        || config
            .routing()
            .untrusted_kinds()
            .iter()
            .any(|kind| *kind == pool.kind);
    kind_allows && pool.accepts(trust)
}

/// The target of `job` under `config`, or why it is refused.
pub(crate) fn target(config: &Config, pools: &[PoolInfo], job: &Job) -> Result<Target, Refusal> {
    let index_of = |name: &str| pools.iter().position(|pool| pool.name == name);
    let of_kind = |kind: ProviderKind, except: Option<usize>| {
        (0..pools.len())
            .filter(move |&i| pools[i].kind == kind && Some(i) != except)
            .collect::<Vec<_>>()
    };
    let (primary, others) = match (&job.pool, config.routing().route_for(&job.labels)) {
        (Some(pinned), _) => match index_of(pinned) {
            Some(index) => (Some(index), Vec::new()),
            None => {
                return Err(Refusal::NoPool {
                    pool: pinned.clone(),
                });
            }
        },
        (None, Some(route)) => {
            let primary = index_of(route.provider());
            let others = match route.fallback_kind() {
                Some(kind) => of_kind(kind.get(), primary),
                None => Vec::new(),
            };
            (primary, others)
        }
        (None, None) => match config.routing().default_kind() {
            Some(kind) => (None, of_kind(kind.get(), None)),
            None => {
                return Err(Refusal::NoRoute {
                    labels: job.labels.clone(),
                });
            }
        },
    };
    let allowed = |&i: &usize| may_run(config, &pools[i], job.trust);
    let target = Target {
        primary: primary.filter(allowed).map(PoolId),
        others: others.iter().copied().filter(allowed).map(PoolId).collect(),
    };
    if target.primary.is_none() && target.others.is_empty() {
        let names = primary
            .into_iter()
            .chain(others)
            .map(|i| pools[i].name.clone())
            .collect();
        return Err(Refusal::Trust {
            trust: job.trust,
            pools: names,
        });
    }
    Ok(target)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::job::JobId;

    const YAML: &str = "
deployment: {id: blue}
providers:
  - {name: linux-a, kind: docker, capacity: 2, docker: {image: img-a}}
  - {name: mac, kind: tart, capacity: 1, tart: {image: mac-img}}
  - {name: vm-1, kind: firecracker, capacity: 3, firecracker: {kernel: /k, rootfs: /r}}
  - {name: linux-b, kind: docker, capacity: 2, docker: {image: img-b}}
  - {name: vm-2, kind: firecracker, capacity: 3, firecracker: {kernel: /k, rootfs: /r}}
routing:
  routes:
    - {labels: [untrusted], provider: vm-1}
    - {labels: [macos], provider: mac}
    - {labels: [linux], provider: linux-a, fallback_kind: firecracker}
  default_kind: docker
  untrusted_kinds: [firecracker]
";

    fn infos(config: &Config, isolating: bool) -> Vec<PoolInfo> {
        config
            .providers()
            .iter()
            .map(|p| {
                let vm = p.kind().get() == ProviderKind::Firecracker;
                PoolInfo {
                    name: p.name().to_owned(),
                    kind: p.kind().get(),
                    capacity: p.capacity().get(),
                    accepts: [vm && isolating, vm && isolating, true],
                    image: String::new(),
                    resources: Resources::default(),
                }
            })
            .collect()
    }

    fn job(labels: &[&str], trust: TrustClass) -> Job {
        Job::new(JobId(1), ["true"])
            .with_labels(labels.iter().copied())
            .with_trust(trust)
    }

    fn ids(v: &[usize]) -> Vec<PoolId> {
        v.iter().copied().map(PoolId).collect()
    }

    // B3: routes in order, the first whose labels all appear on the job; its
    // provider first, then the fallback kind's pools; otherwise default_kind.
    #[test]
    fn b3_routes_fallbacks_and_default_kind() {
        let config = Config::from_yaml_str(YAML).unwrap();
        let pools = infos(&config, true);
        let t = |labels: &[&str]| target(&config, &pools, &job(labels, TrustClass::Trusted));
        let linux = t(&["linux", "x86"]).unwrap();
        assert_eq!(linux.primary, Some(PoolId(0)));
        assert_eq!(linux.others, ids(&[2, 4]));
        let mac = t(&["macos"]).unwrap();
        assert_eq!((mac.primary, mac.others), (Some(PoolId(1)), vec![]));
        // The first matching route wins, even when a later one matches too.
        let both = t(&["macos", "linux"]).unwrap();
        assert_eq!(both.primary, Some(PoolId(1)));
        // No route: every pool of default_kind, in configuration order.
        let other = t(&["windows"]).unwrap();
        assert_eq!((other.primary, other.others.clone()), (None, ids(&[0, 3])));
        assert_eq!(other.pools().collect::<Vec<_>>(), ids(&[0, 3]));
        assert_eq!(linux.pools().collect::<Vec<_>>(), ids(&[0, 2, 4]));
    }

    // B3: untrusted and unknown jobs go only to pools of untrusted_kinds whose
    // provider accepts them; a job no pool could ever take is refused with why.
    #[test]
    fn b3_trust_narrows_and_refuses_with_the_reason() {
        let config = Config::from_yaml_str(YAML).unwrap();
        let pools = infos(&config, true);
        for trust in [TrustClass::Untrusted, TrustClass::Unknown] {
            let linux = target(&config, &pools, &job(&["linux"], trust)).unwrap();
            assert_eq!((linux.primary, linux.others.clone()), (None, ids(&[2, 4])));
            let vm = target(&config, &pools, &job(&["untrusted"], trust)).unwrap();
            assert_eq!(vm.primary, Some(PoolId(2)));
            let refused = target(&config, &pools, &job(&["macos"], trust)).unwrap_err();
            assert_eq!(
                refused,
                Refusal::Trust {
                    trust,
                    pools: vec!["mac".into()]
                }
            );
            assert_eq!(
                refused.to_string(),
                format!("no pool may run {trust} work among those routing allows for it (mac)")
            );
        }
        // The kind is allowed but the provider refuses: refused too.
        let strict = infos(&config, false);
        let refused = target(&config, &strict, &job(&["linux"], TrustClass::Untrusted));
        assert_eq!(
            refused.unwrap_err(),
            Refusal::Trust {
                trust: TrustClass::Untrusted,
                pools: vec!["linux-a".into(), "vm-1".into(), "vm-2".into()]
            }
        );
        // A provider that refuses trusted work narrows trusted jobs too.
        let mut no_trusted = pools;
        no_trusted[1].accepts = [false, false, false];
        let refused = target(&config, &no_trusted, &job(&["macos"], TrustClass::Trusted));
        assert!(matches!(refused, Err(Refusal::Trust { .. })));
    }

    // B3: a job pinned to a pool goes there and nowhere else, whatever its
    // labels say; trust still narrows it; a pool no provider is, is refused.
    #[test]
    fn b3_a_job_pinned_to_a_pool_goes_there_alone() {
        let config = Config::from_yaml_str(YAML).unwrap();
        let pools = infos(&config, true);
        let pinned = |labels: &[&str], trust, pool: &str| {
            target(&config, &pools, &job(labels, trust).in_pool(pool))
        };
        let mac = pinned(&["linux"], TrustClass::Trusted, "mac").unwrap();
        assert_eq!((mac.primary, mac.others), (Some(PoolId(1)), vec![]));
        let vm = pinned(&[], TrustClass::Untrusted, "vm-2").unwrap();
        assert_eq!((vm.primary, vm.others), (Some(PoolId(4)), vec![]));
        let refused = pinned(&["linux"], TrustClass::Untrusted, "mac").unwrap_err();
        assert_eq!(
            refused,
            Refusal::Trust {
                trust: TrustClass::Untrusted,
                pools: vec!["mac".into()]
            }
        );
        let unknown = pinned(&["linux"], TrustClass::Trusted, "nowhere").unwrap_err();
        assert_eq!(
            unknown,
            Refusal::NoPool {
                pool: "nowhere".into()
            }
        );
        assert_eq!(unknown.to_string(), "no pool is named \"nowhere\"");
    }

    #[test]
    fn b3_no_route_and_no_default_kind_is_refused() {
        let yaml = "
deployment: {id: blue}
providers: [{name: a, kind: docker, capacity: 1, docker: {image: i}}]
routing: {routes: [{labels: [linux], provider: a}]}
";
        let config = Config::from_yaml_str(yaml).unwrap();
        let pools = infos(&config, true);
        let refused = target(&config, &pools, &job(&["mac", "arm"], TrustClass::Trusted));
        let refused = refused.unwrap_err();
        assert_eq!(
            refused,
            Refusal::NoRoute {
                labels: vec!["mac".into(), "arm".into()]
            }
        );
        assert_eq!(
            refused.to_string(),
            "no route matches labels [mac, arm] and routing has no default_kind"
        );
        assert_eq!(
            Refusal::Duplicate { id: 4 }.to_string(),
            "job 4 is already accepted and has not ended"
        );
    }

    // B3: the documented rule: the primary when it has room; otherwise the
    // most free leases, ties by configuration order; None when all are full.
    #[test]
    fn b3_choice_rule() {
        let t = Target {
            primary: Some(PoolId(0)),
            others: ids(&[2, 4, 5]),
        };
        let free = |table: [u32; 6]| move |p: PoolId| table[p.0];
        assert_eq!(t.choose(free([1, 9, 9, 9, 9, 9])), Some(PoolId(0)));
        assert_eq!(t.choose(free([0, 9, 2, 0, 3, 3])), Some(PoolId(4)));
        assert_eq!(t.choose(free([0, 9, 3, 0, 3, 1])), Some(PoolId(2)));
        assert_eq!(t.choose(free([0, 9, 0, 9, 0, 1])), Some(PoolId(5)));
        assert_eq!(t.choose(free([0, 9, 0, 9, 0, 0])), None);
        let no_primary = Target {
            primary: None,
            others: ids(&[1]),
        };
        assert_eq!(no_primary.choose(free([5, 0, 0, 0, 0, 0])), None);
        assert_eq!(no_primary.choose(free([5, 1, 0, 0, 0, 0])), Some(PoolId(1)));
        assert_eq!(PoolId(3).to_string(), "#3");
    }

    #[test]
    fn b3_accepts_reads_each_trust_class() {
        let config = Config::from_yaml_str(YAML).unwrap();
        let mut pool = infos(&config, true).remove(0);
        pool.accepts = [true, false, false];
        assert!(pool.accepts(TrustClass::Unknown));
        assert!(!pool.accepts(TrustClass::Untrusted));
        assert!(!pool.accepts(TrustClass::Trusted));
        pool.accepts = [false, true, false];
        assert!(pool.accepts(TrustClass::Untrusted));
        assert!(!pool.accepts(TrustClass::Unknown));
    }
}
