//! Property tests of the core: random orders of events, with answers lost,
//! applied but lost, duplicated, delayed and failed, outages, cancels,
//! timeouts and restarts. Every invariant holds after every event, and once
//! the faults stop every job ends exactly once and nothing is left behind
//! (B4-B10).

mod support;

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use billet_provider::{Error, State, TrustClass};
use billet_scheduler::{Answer, Call, Core, Decision, Job, JobId, Outcome, PoolId};
use proptest::prelude::*;
use support::*;

const YAML: &str = "
deployment: {id: blue}
providers:
  - {name: a, kind: docker, capacity: 2, docker: {image: i}}
  - {name: b, kind: docker, capacity: 1, docker: {image: i}}
  - {name: v, kind: firecracker, capacity: 2, firecracker: {kernel: /k, rootfs: /r}}
routing:
  routes:
    - {labels: [a], provider: a, fallback_kind: firecracker}
    - {labels: [b], provider: b}
  default_kind: docker
  untrusted_kinds: [firecracker]
";

/// What becomes of one call's answer.
#[derive(Debug, Clone, Copy)]
enum Fate {
    /// Done and answered.
    Answer,
    /// Done and answered twice.
    Twice,
    /// Done, but the answer is an error (`Unavailable`).
    DoneButErrored,
    /// Not done, answered with an error.
    Errored,
    /// Done, the answer never comes.
    DoneButLost,
    /// Not answered now: the call stays in the network, to be answered
    /// later or settled at its deadline.
    Held,
}

#[derive(Debug, Clone)]
enum Op {
    Submit {
        label: u8,
        trust: u8,
        secs: u16,
        exit: i8,
        timeout: Option<u16>,
    },
    Cancel(u8),
    /// Time passes; calls past their deadline are settled: done (coin says
    /// so) or not, their answers never come.
    Advance(u16, bool),
    Deliver(u8, Fate),
    DeliverAll,
    Outage(u8, bool),
    Restart,
}

fn op() -> impl Strategy<Value = Op> {
    let fate = prop_oneof![
        4 => Just(Fate::Answer),
        1 => Just(Fate::Twice),
        1 => Just(Fate::DoneButErrored),
        1 => Just(Fate::Errored),
        1 => Just(Fate::DoneButLost),
        1 => Just(Fate::Held),
    ];
    prop_oneof![
        6 => (0u8..4, 0u8..8, 1u16..120, -2i8..3, proptest::option::weighted(0.2, 1u16..90))
            .prop_map(|(label, trust, secs, exit, timeout)| Op::Submit { label, trust, secs, exit, timeout }),
        1 => any::<u8>().prop_map(Op::Cancel),
        4 => (1u16..40, any::<bool>()).prop_map(|(s, coin)| Op::Advance(s, coin)),
        6 => (any::<u8>(), fate).prop_map(|(k, f)| Op::Deliver(k, f)),
        2 => Just(Op::DeliverAll),
        1 => (0u8..3, any::<bool>()).prop_map(|(p, on)| Op::Outage(p, on)),
        1 => Just(Op::Restart),
    ]
}

/// The test's books: what it submitted and how each job ended.
struct Books {
    world: World,
    /// Jobs accepted, with what they are (for resubmission after a restart).
    accepted: BTreeMap<u64, Job>,
    ended: BTreeMap<u64, Outcome>,
    next: u64,
    capacity: Vec<u32>,
    /// The instance backing each job's lease, as decided.
    backing: BTreeMap<u64, billet_provider::InstanceId>,
}

impl Books {
    fn new() -> Books {
        let config = config(YAML);
        let capacity = config
            .providers()
            .iter()
            .map(|p| p.capacity().get())
            .collect();
        Books {
            world: World::over(isolating_core(), Fake::default()),
            accepted: BTreeMap::new(),
            ended: BTreeMap::new(),
            next: 1,
            capacity,
            backing: BTreeMap::new(),
        }
    }

    /// Checks every decision made since the last check, and the core's counts.
    fn check(&mut self, from: usize) -> Result<(), TestCaseError> {
        let log: Vec<Decision> = self.world.log[from..].to_vec();
        let mut placed_in = BTreeSet::new();
        for decision in &log {
            match decision {
                Decision::Ended { job, pool, outcome } => {
                    prop_assert!(
                        self.accepted.contains_key(&job.0),
                        "job {} ended but was never accepted",
                        job.0
                    );
                    let earlier = self.ended.insert(job.0, outcome.clone());
                    prop_assert!(
                        earlier.is_none(),
                        "job {} ended twice: {earlier:?} then {outcome:?}",
                        job.0
                    );
                    // B6: no lease freed while its instance runs: the one
                    // that backed it, or (never backed) any of its name.
                    if let Some(pool) = pool {
                        let name = job.instance_name(["a", "b", "v"][pool.0]);
                        let fake = &self.world.fake;
                        let instance = match self.backing.remove(&job.0) {
                            Some(id) => fake.pools.get(&pool.0).and_then(|p| p.get(&id)),
                            None => fake.by_name(pool.0, &name),
                        };
                        let running =
                            instance.is_some_and(|i| i.state(self.world.now) == State::Running);
                        prop_assert!(
                            !running,
                            "job {} freed while {name} runs: {:?}\n{:#?}",
                            job.0,
                            self.world.fake.pools,
                            &self.world.log
                        );
                    }
                }
                Decision::Placed { pool, .. } => {
                    placed_in.insert(*pool);
                }
                Decision::Launched { job, instance, .. }
                | Decision::Adopted { job, instance, .. } => {
                    self.backing.insert(job.0, instance.clone());
                }
                _ => {}
            }
        }
        // B4: a placement never takes a pool over its capacity.
        for pool in placed_in {
            let held = self.world.core.leases(pool);
            prop_assert!(
                held <= self.capacity[pool.0],
                "pool {pool} holds {held} leases after a placement, capacity {}",
                self.capacity[pool.0]
            );
        }
        let stats = self.world.core.stats();
        for (i, pool) in stats.pools.iter().enumerate() {
            prop_assert!(pool.launching <= pool.leases);
            prop_assert_eq!(pool.leases, self.world.core.leases(PoolId(i)));
        }
        Ok(())
    }

    /// A call's effect, if it has one, happens before its deadline: calls
    /// past it by `now` are done (or not, by `coin` and the call's id) and
    /// leave the network unanswered.
    fn settle_expired(&mut self, now: std::time::SystemTime, coin: bool) {
        let expired: Vec<_> = self
            .world
            .pending
            .iter()
            .filter(|(_, action)| action.deadline <= now)
            .map(|(id, _)| *id)
            .collect();
        for id in expired {
            let Some(action) = self.world.pending.remove(&id) else {
                continue;
            };
            if (id.0 % 2 == 0) == coin {
                let at = action.deadline.max(self.world.now);
                let _ = self.world.fake.answer(&action, at);
            }
        }
    }

    fn deliver(&mut self, k: usize, fate: Fate) {
        let Some(&id) = self
            .world
            .pending
            .keys()
            .nth(k % self.world.pending.len().max(1))
        else {
            return;
        };
        let Some(action) = self.world.pending.remove(&id) else {
            return;
        };
        let now = self.world.now;
        let error = |call: &Call| match call {
            Call::Launch(_) => Answer::Launched(Err(Error::unavailable("cut"))),
            Call::Find(_) => Answer::Found(Err(Error::unavailable("cut"))),
            Call::List => Answer::Listed(Err(Error::inventory_unavailable("cut"))),
            Call::Destroy(_) => Answer::Destroyed(Err(Error::unavailable("cut"))),
        };
        match fate {
            Fate::Answer | Fate::Twice => {
                let answer = self.world.fake.answer(&action, now);
                self.world.core.handle_answer(id, answer.clone(), now);
                if matches!(fate, Fate::Twice) {
                    self.world.core.handle_answer(id, answer, now);
                }
            }
            Fate::DoneButErrored => {
                let _ = self.world.fake.answer(&action, now);
                self.world.core.handle_answer(id, error(&action.call), now);
            }
            Fate::Errored => self.world.core.handle_answer(id, error(&action.call), now),
            Fate::DoneButLost => {
                let _ = self.world.fake.answer(&action, now);
            }
            Fate::Held => {
                self.world.pending.insert(id, action);
            }
        }
        self.world.collect();
    }

    fn apply(&mut self, op: &Op) -> Result<(), TestCaseError> {
        let from = self.world.log.len();
        match *op {
            Op::Submit {
                label,
                trust,
                secs,
                exit,
                timeout,
            } => {
                let n = self.next;
                self.next += 1;
                let labels: &[&str] = match label {
                    0 => &["a"],
                    1 => &["b"],
                    2 => &["a", "b"],
                    _ => &[],
                };
                let trust = match trust {
                    0 => TrustClass::Untrusted,
                    1 => TrustClass::Unknown,
                    _ => TrustClass::Trusted,
                };
                let mut job = Job::new(JobId(n), run(u64::from(secs), i32::from(exit)))
                    .with_labels(labels.iter().copied())
                    .with_trust(trust);
                if let Some(t) = timeout {
                    job = job.with_timeout(Duration::from_secs(u64::from(t)));
                }
                if self.world.submit(job.clone()).is_ok() {
                    self.accepted.insert(n, job);
                }
            }
            Op::Cancel(k) => {
                if let Some((&n, _)) = self
                    .accepted
                    .iter()
                    .nth(usize::from(k) % self.accepted.len().max(1))
                {
                    let was_live = self.world.core.knows(JobId(n));
                    let cancelled = self.world.core.cancel(JobId(n), self.world.now);
                    prop_assert!(!cancelled || was_live);
                    self.world.collect();
                }
            }
            Op::Advance(s, coin) => {
                let now = self.world.now + Duration::from_secs(u64::from(s));
                self.settle_expired(now, coin);
                self.world.wait(Duration::from_secs(u64::from(s)));
            }
            Op::Deliver(k, fate) => self.deliver(usize::from(k), fate),
            Op::DeliverAll => self.world.settle(),
            Op::Outage(p, on) => {
                self.world.fake.down.insert(usize::from(p), on);
            }
            Op::Restart => {
                // The old core's calls in flight are done or not as it dies;
                // a new core starts over the same pools, and the store hands
                // it what it knows.
                for (id, action) in std::mem::take(&mut self.world.pending) {
                    if id.0 % 2 == 0 {
                        let _ = self.world.fake.answer(&action, self.world.now);
                    }
                }
                let mut core = isolating_core_at(self.world.now);
                // A store says what ended one job at a time, or (one that
                // keeps only unfinished jobs in memory) as every job up to
                // the last accepted that it does not hand over again.
                let last = self.accepted.keys().max().copied();
                match last {
                    Some(last) if self.ended.len().is_multiple_of(2) => {
                        core.ended_through(JobId(last));
                    }
                    _ => {
                        for &n in self.ended.keys() {
                            core.ended_before(JobId(n));
                        }
                    }
                }
                self.world.core = core;
                self.world.collect();
                for (n, job) in &self.accepted {
                    if !self.ended.contains_key(n) {
                        let _ = self.world.core.submit(job.clone(), self.world.now);
                    }
                }
                self.world.collect();
            }
        }
        self.check(from)
    }

    /// Faults stop; time runs until the core is idle.
    fn drain(&mut self) -> Result<(), TestCaseError> {
        self.world.fake.down.clear();
        self.settle_expired(self.world.now, true);
        let from = self.world.log.len();
        self.world.run_until_idle(Duration::from_secs(100_000));
        self.check(from)?;
        prop_assert!(
            self.world.core.is_idle(),
            "the core is still busy: {:?}",
            self.world.core.stats()
        );
        for n in self.accepted.keys() {
            prop_assert!(self.ended.contains_key(n), "job {n} never ended");
        }
        prop_assert_eq!(
            self.world.fake.count(),
            0,
            "instances left behind: {:?}\nstats: {:?}\nlog: {:#?}",
            self.world.fake.pools,
            self.world.core.stats(),
            &self.world.log[self.world.log.len().saturating_sub(12)..]
        );
        let stats = self.world.core.stats();
        prop_assert_eq!(stats.leases(), 0);
        prop_assert_eq!(stats.queued, 0);
        Ok(())
    }
}

/// Pools whose providers all accept trusted work, and the firecracker pool
/// untrusted and unknown work too.
fn isolating_core() -> Core {
    isolating_core_at(t0())
}

fn isolating_core_at(now: std::time::SystemTime) -> Core {
    Core::new(
        config(YAML),
        |p| {
            let vm = p.kind() == billet_provider::ProviderKind::Firecracker;
            [vm, vm, true]
        },
        settings(),
        now,
    )
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    // B4, B5, B6, B7, B8, B9: every invariant after every event; every job
    // ends exactly once; nothing leaks once the faults stop.
    #[test]
    fn b9_every_job_ends_exactly_once_whatever_the_order(ops in proptest::collection::vec(op(), 1..120)) {
        let mut books = Books::new();
        books.world.collect();
        for op in &ops {
            books.apply(op)?;
        }
        books.drain()?;
    }

    // B10: the same events in the same order give the same decisions.
    #[test]
    fn b10_replaying_the_same_events_gives_the_same_decisions(ops in proptest::collection::vec(op(), 1..60)) {
        let mut first = Books::new();
        let mut second = Books::new();
        first.world.collect();
        second.world.collect();
        for op in &ops {
            first.apply(op)?;
            second.apply(op)?;
        }
        first.drain()?;
        second.drain()?;
        prop_assert_eq!(&first.world.log, &second.world.log);
    }
}
