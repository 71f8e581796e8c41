//! A scripted world for the core's tests: an in-memory fleet of pools that
//! answers the core's calls as a real backend would, and lets a test drop,
//! delay, duplicate or fail any answer. No provider, no runtime (B1).
#![allow(dead_code, unreachable_pub)]

use std::collections::BTreeMap;
use std::time::{Duration, SystemTime};

use billet_config::Config;
use billet_provider::{Error, Instance, InstanceId, ProviderKind, State, Teardown};
use billet_scheduler::{Action, Answer, Call, CallId, Core, Decision, JobId, Outcome, Settings};

/// The start of every scripted world.
pub fn t0() -> SystemTime {
    SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000)
}

pub fn secs(s: u64) -> Duration {
    Duration::from_secs(s)
}

/// A command the fake runs for `secs` seconds, then exits with `exit`.
pub fn run(secs: u64, exit: i32) -> Vec<String> {
    vec!["run".into(), secs.to_string(), exit.to_string()]
}

pub fn config(yaml: &str) -> Config {
    Config::from_yaml_str(yaml).expect("a valid test configuration")
}

/// One docker pool `a` of `capacity`, every job routed to it.
pub fn one_pool(capacity: u32) -> Config {
    config(&format!(
        "deployment: {{id: blue}}
providers: [{{name: a, kind: docker, capacity: {capacity}, docker: {{image: img}}}}]
routing: {{default_kind: docker}}"
    ))
}

/// Settings with round numbers: reconcile every 10 s, calls time out after
/// 5 s, backoff 1 s doubling to 8 s, orphans collected after 30 s, an
/// unknown effect given up on after 10 min.
pub fn settings() -> Settings {
    Settings {
        reconcile_every: secs(10),
        call_timeout: secs(5),
        backoff_base: secs(1),
        backoff_cap: secs(8),
        orphan_grace: secs(30),
        give_up_after: secs(600),
    }
}

/// A core whose providers accept trusted work only.
pub fn core(config: Config) -> Core {
    Core::new(config, |_| [false, false, true], settings(), t0())
}

/// An instance in the fake.
#[derive(Debug, Clone)]
pub struct FakeInstance {
    pub id: InstanceId,
    pub name: String,
    pub started: SystemTime,
    pub runs: Duration,
    pub exit: i32,
}

impl FakeInstance {
    pub fn state(&self, now: SystemTime) -> State {
        if now >= self.started + self.runs {
            State::Stopped {
                exit_code: self.exit,
            }
        } else {
            State::Running
        }
    }

    pub fn instance(&self, now: SystemTime) -> Instance {
        Instance {
            id: self.id.clone(),
            name: self.name.as_str().into(),
            owner: "blue".into(),
            kind: ProviderKind::Docker,
            state: self.state(now),
            started_at: self.started,
        }
    }
}

/// The pools' contents, as a backend keeps them: authoritative, exact.
#[derive(Debug, Default)]
pub struct Fake {
    /// Instances by pool index, then by id.
    pub pools: BTreeMap<usize, BTreeMap<InstanceId, FakeInstance>>,
    next: u64,
    /// Pools whose every call fails (`Unavailable`, inventory unavailable).
    pub down: BTreeMap<usize, bool>,
}

impl Fake {
    pub fn instances(&self, pool: usize) -> Vec<&FakeInstance> {
        self.pools
            .get(&pool)
            .map(|p| p.values().collect())
            .unwrap_or_default()
    }

    pub fn count(&self) -> usize {
        self.pools.values().map(BTreeMap::len).sum()
    }

    pub fn by_name(&self, pool: usize, name: &str) -> Option<&FakeInstance> {
        self.pools.get(&pool)?.values().find(|i| i.name == name)
    }

    /// Puts an instance there as if some earlier scheduler had launched it.
    pub fn plant(
        &mut self,
        pool: usize,
        name: &str,
        started: SystemTime,
        runs: Duration,
    ) -> InstanceId {
        self.next += 1;
        let id = InstanceId::from(format!("i-{}", self.next));
        self.pools.entry(pool).or_default().insert(
            id.clone(),
            FakeInstance {
                id: id.clone(),
                name: name.to_owned(),
                started,
                runs,
                exit: 0,
            },
        );
        id
    }

    /// What the backend answers to `action` at `now` (and does).
    pub fn answer(&mut self, action: &Action, now: SystemTime) -> Answer {
        let pool = action.pool.0;
        let down = self.down.get(&pool).copied().unwrap_or(false);
        match &action.call {
            Call::Launch(spec) => {
                if down {
                    return Answer::Launched(Err(Error::unavailable("pool down")));
                }
                let held = self.pools.entry(pool).or_default();
                if held.values().any(|i| i.name == spec.name) {
                    return Answer::Launched(Err(Error::Conflict {
                        name: spec.name.clone(),
                    }));
                }
                let (runs, exit) = match spec.command.as_slice() {
                    [run, secs, exit] if run == "run" => (
                        Duration::from_secs(secs.parse().unwrap_or(0)),
                        exit.parse().unwrap_or(0),
                    ),
                    _ => {
                        return Answer::Launched(Err(Error::invalid_spec(
                            "the fake runs `run SECS EXIT` only",
                        )));
                    }
                };
                self.next += 1;
                let id = InstanceId::from(format!("i-{}", self.next));
                let instance = FakeInstance {
                    id: id.clone(),
                    name: spec.name.clone(),
                    started: now,
                    runs,
                    exit,
                };
                let answer = instance.instance(now);
                self.pools.entry(pool).or_default().insert(id, instance);
                Answer::Launched(Ok(answer))
            }
            Call::Find(name) => {
                if down {
                    return Answer::Found(Err(Error::inventory_unavailable("pool down")));
                }
                Answer::Found(Ok(self.by_name(pool, name).map(|i| i.instance(now))))
            }
            Call::List => {
                if down {
                    return Answer::Listed(Err(Error::inventory_unavailable("pool down")));
                }
                Answer::Listed(Ok(self
                    .instances(pool)
                    .into_iter()
                    .map(|i| i.instance(now))
                    .collect()))
            }
            Call::Destroy(id) => {
                if down {
                    return Answer::Destroyed(Err(Error::unavailable("pool down")));
                }
                let removed = self.pools.entry(pool).or_default().remove(id);
                Answer::Destroyed(Ok(if removed.is_some() {
                    Teardown::Stopped
                } else {
                    Teardown::Absent
                }))
            }
        }
    }
}

/// A core and the fake it talks to, with the time of the world.
#[derive(Debug)]
pub struct World {
    pub core: Core,
    pub fake: Fake,
    pub now: SystemTime,
    /// Every decision, in order.
    pub log: Vec<Decision>,
    /// Calls asked for and not yet answered.
    pub pending: BTreeMap<CallId, Action>,
}

impl World {
    pub fn new(config: Config) -> World {
        World::over(core(config), Fake::default())
    }

    pub fn over(core: Core, fake: Fake) -> World {
        World {
            core,
            fake,
            now: t0(),
            log: Vec::new(),
            pending: BTreeMap::new(),
        }
    }

    /// Collects what the core asked for and decided, answering nothing.
    pub fn collect(&mut self) {
        while let Some(action) = self.core.poll_action() {
            self.pending.insert(action.id, action);
        }
        while let Some(decision) = self.core.poll_decision() {
            self.log.push(decision);
        }
    }

    /// Answers every pending call (and those they lead to) in call order.
    pub fn settle(&mut self) {
        self.collect();
        let mut answered = 0u32;
        while let Some((id, action)) = self.pending.pop_first() {
            answered += 1;
            assert!(answered < 1_000_000, "the core never stops asking");
            let answer = self.fake.answer(&action, self.now);
            self.core.handle_answer(id, answer, self.now);
            self.collect();
        }
    }

    /// Answers every pending call but the lists (and those they lead to).
    pub fn settle_except_lists(&mut self) {
        self.collect();
        loop {
            let next = self
                .pending
                .iter()
                .find(|(_, action)| !matches!(action.call, billet_scheduler::Call::List))
                .map(|(id, _)| *id);
            let Some(id) = next else {
                return;
            };
            let Some(action) = self.pending.remove(&id) else {
                return;
            };
            let answer = self.fake.answer(&action, self.now);
            self.core.handle_answer(id, answer, self.now);
            self.collect();
        }
    }

    /// Answers the pending call `id` with `answer` instead of the fake.
    pub fn answer_with(&mut self, id: CallId, answer: Answer) {
        self.pending.remove(&id);
        self.core.handle_answer(id, answer, self.now);
        self.collect();
    }

    /// The pending calls, in order.
    /// Answers the pending calls `which` picks, as the fake would, leaving
    /// the others pending.
    pub fn answer_only(&mut self, which: impl Fn(&Call) -> bool) {
        for action in self.calls() {
            if which(&action.call) {
                let answer = self.fake.answer(&action, self.now);
                self.pending.remove(&action.id);
                self.core.handle_answer(action.id, answer, self.now);
            }
        }
        self.collect();
    }

    pub fn calls(&self) -> Vec<Action> {
        self.pending.values().cloned().collect()
    }

    /// Moves time by `d` and hands the core the timeout, answering nothing.
    pub fn wait(&mut self, d: Duration) {
        self.now += d;
        self.core.handle_timeout(self.now);
        self.collect();
    }

    /// Moves time by `d`, hands in the timeout, answers everything.
    pub fn advance(&mut self, d: Duration) {
        self.wait(d);
        self.settle();
    }

    /// Steps time from timeout to timeout, answering everything, until the
    /// core is idle or `limit` has passed.
    pub fn run_until_idle(&mut self, limit: Duration) {
        let end = self.now + limit;
        self.settle();
        let mut steps = 0u32;
        while !self.core.is_idle() {
            let Some(at) = self.core.poll_timeout() else {
                break;
            };
            if at > end {
                break;
            }
            steps += 1;
            assert!(
                steps < 100_000,
                "the core never settles: it asks for {at:?} again and again"
            );
            self.now = self.now.max(at);
            self.core.handle_timeout(self.now);
            self.settle();
        }
    }

    pub fn submit(&mut self, job: billet_scheduler::Job) -> Result<(), billet_scheduler::Refusal> {
        let result = self.core.submit(job, self.now);
        self.collect();
        result
    }

    /// The outcome `job` ended with, if it ended; panics if it ended twice.
    pub fn outcome(&self, job: u64) -> Option<Outcome> {
        let ends: Vec<&Outcome> = self
            .log
            .iter()
            .filter_map(|d| match d {
                Decision::Ended {
                    job: j, outcome, ..
                } if *j == JobId(job) => Some(outcome),
                _ => None,
            })
            .collect();
        assert!(ends.len() <= 1, "job {job} ended {} times", ends.len());
        ends.first().map(|o| (*o).clone())
    }

    /// How many decisions match `f`.
    pub fn count(&self, f: impl Fn(&Decision) -> bool) -> usize {
        self.log.iter().filter(|d| f(d)).count()
    }
}

/// A trusted job `n` running `secs` then exiting with `exit`.
pub fn job(n: u64, secs: u64, exit: i32) -> billet_scheduler::Job {
    billet_scheduler::Job::new(JobId(n), run(secs, exit))
        .with_trust(billet_provider::TrustClass::Trusted)
}
