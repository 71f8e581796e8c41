//! The runner: plans each task's calls from a seed ([`plan`]), runs one
//! history on a fresh fixture, every call recorded in one global order
//! ([`record`], [`Recording`]), and shrinks a failure by running smaller
//! histories ([`shrink`]).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use billet_provider::{Error, Instance, InstanceId, Provider, Spec, State, Teardown, TrustClass};
use proptest::prelude::RngExt;

use crate::{ConcurrentConfig, Outage, ProviderFactory, Timing};

use super::faults::{control, faults};
use super::history::{Answer, Call, Dep, Record, Recorded, Via, excuse};
use super::linearizability::{Failing, check};
use super::recording::{Recording, rng_of};
use super::specification::Excuse;

/// A call a task is to make.
#[derive(Debug, Clone, Copy)]
pub(super) enum Planned {
    Launch(usize),
    Destroy(usize),
    Find(usize),
    List,
}

/// Plans each task's calls from `seed`.
fn plan(config: &ConcurrentConfig, seed: u64, second: bool) -> Vec<Vec<(Via, Planned)>> {
    let mut rng = rng_of(seed);
    (0..config.tasks)
        .map(|_| {
            (0..config.calls_per_task)
                .map(|_| {
                    let via = match rng.random_range(0..4) {
                        0 => Via::Green,
                        1 if second => Via::Blue2,
                        _ => Via::Blue,
                    };
                    let name = rng.random_range(0..config.names);
                    let call = match rng.random_range(0..10) {
                        0..=2 => Planned::Launch(name),
                        3..=5 => Planned::Destroy(name),
                        6..=7 => Planned::Find(name),
                        _ => Planned::List,
                    };
                    (via, call)
                })
                .collect()
        })
        .collect()
}

impl<P: Provider> Recording<P> {
    fn provider(&self, via: Via) -> &P {
        match via {
            Via::Blue => &self.fixture.blue.provider,
            Via::Blue2 => self.second.as_ref().unwrap_or(&self.fixture.blue.provider),
            Via::Green => &self.fixture.green.provider,
        }
    }

    fn owner(&self, dep: Dep) -> &str {
        match dep {
            Dep::Blue => &self.fixture.blue.owner,
            Dep::Green => &self.fixture.green.owner,
        }
    }

    fn slot(&self, dep: Dep, name: usize) -> usize {
        match dep {
            Dep::Blue => name,
            Dep::Green => self.names.len() + name,
        }
    }

    fn learn(&self, dep: Dep, name: usize, id: &InstanceId) {
        self.known.lock().expect("not poisoned")[self.slot(dep, name)] = Some(id.clone());
    }

    /// Whether a launch of `name` of `dep` was under way at some moment of a
    /// call that began when `ended_before` launches of each name had ended
    /// (wall time only): then its instance may still be `Pending`.
    fn launch_overlapped(&self, dep: Dep, name: usize, ended_before: &[(u64, u64)]) -> bool {
        let slot = self.slot(dep, name);
        self.wall && self.launches.lock().expect("not poisoned")[slot].0 > ended_before[slot].1
    }

    /// Why `instance`, answered for `name` of `dep` through `via`, is wrong.
    /// An instance `Pending` is noted in `pending`, with whether that was
    /// right when seen (`pending_ok`: a launch of that name overlapped the
    /// call; or the backend declares a pending window), for [`check`] to
    /// judge once the history is known.
    fn judge(
        &self,
        via: Via,
        name: usize,
        instance: &Instance,
        pending_ok: bool,
        pending: &mut Vec<(InstanceId, bool)>,
    ) -> Option<String> {
        let dep = via.dep();
        let kind = self.provider(via).kind();
        if *instance.name != *self.names[name] {
            return Some(format!(
                "instance {} is named {:?}, answered for {:?}",
                instance.id, instance.name, self.names[name]
            ));
        }
        if *instance.owner != *self.owner(dep) {
            return Some(format!(
                "instance {} has owner {:?}, answered to {:?}",
                instance.id,
                instance.owner,
                self.owner(dep)
            ));
        }
        if instance.kind != kind {
            return Some(format!(
                "instance {} has kind {:?}, answered by a {kind:?} provider",
                instance.id, instance.kind
            ));
        }
        if instance.state == State::Pending {
            pending.push((instance.id.clone(), self.pending_allowed || pending_ok));
        } else if instance.state != State::Running {
            return Some(format!(
                "instance {} of {:?} is {:?}, though its command never stops and time does not move",
                instance.id, instance.name, instance.state
            ));
        }
        None
    }

    async fn run(&self, task: usize, via: Via, planned: Planned) {
        let dep = via.dep();
        let provider = self.provider(via);
        let call = match planned {
            Planned::Launch(name) => Call::Launch(name),
            Planned::Find(name) => Call::Find(name),
            Planned::List => Call::List,
            Planned::Destroy(name) => {
                let known = self.known.lock().expect("not poisoned")[self.slot(dep, name)].clone();
                match known {
                    Some(id) => Call::Destroy(name, id),
                    None => Call::Find(name),
                }
            }
        };
        let mut wrong = None;
        let mut pending = Vec::new();
        let ended_before = self.launches.lock().expect("not poisoned").clone();
        let invoked = self.clock.fetch_add(1, Ordering::SeqCst);
        self.moved.notify_waiters();
        let answer = match &call {
            Call::Launch(name) => {
                let spec = Spec::new(self.names[*name].clone(), self.command.clone())
                    .with_image(self.image.clone())
                    .with_trust(TrustClass::Trusted);
                let slot = self.slot(dep, *name);
                self.launches.lock().expect("not poisoned")[slot].0 += 1;
                let answer = provider.launch(spec).await;
                self.launches.lock().expect("not poisoned")[slot].1 += 1;
                if let Ok(instance) = &answer {
                    wrong = self.judge(via, *name, instance, false, &mut pending);
                    self.learn(dep, *name, &instance.id);
                }
                answer.map(|i| Answer::Launched(i.id))
            }
            Call::Destroy(_, id) => provider.destroy(id).await.map(Answer::Torn),
            Call::Find(name) => {
                let answer = provider.find(&self.names[*name]).await;
                if let Ok(Some(instance)) = &answer {
                    let pending_ok = self.launch_overlapped(dep, *name, &ended_before);
                    wrong = self.judge(via, *name, instance, pending_ok, &mut pending);
                    self.learn(dep, *name, &instance.id);
                }
                answer.map(|found| Answer::Found(found.map(|i| i.id)))
            }
            Call::List => provider.list().await.map(|all| {
                let wrong = &mut wrong;
                let pending = &mut pending;
                let mut seen = Vec::new();
                for instance in &all {
                    let Some(name) = self.names.iter().position(|n| **n == *instance.name) else {
                        *wrong = Some(format!(
                            "list shows instance {} named {:?}, which no call launched",
                            instance.id, instance.name
                        ));
                        continue;
                    };
                    if seen.iter().any(|(n, _)| *n == name) {
                        *wrong = Some(format!("list shows name {:?} twice", instance.name));
                    }
                    let pending_ok = self.launch_overlapped(dep, name, &ended_before);
                    *wrong = wrong
                        .take()
                        .or_else(|| self.judge(via, name, instance, pending_ok, pending));
                    self.learn(dep, name, &instance.id);
                    seen.push((name, instance.id.clone()));
                }
                seen.sort_by_key(|(n, _)| *n);
                Answer::Listed(seen)
            }),
        }
        .unwrap_or_else(|err: Error| Answer::Failed(err.kind()));
        let answered = self.clock.fetch_add(1, Ordering::SeqCst);
        self.moved.notify_waiters();
        let record = Record {
            task,
            via,
            call,
            invoked,
            answered,
            answer,
            pending,
            excuse: Excuse::None,
            settled: answered,
        };
        if let Some(reason) = wrong {
            self.wrong
                .lock()
                .expect("not poisoned")
                .get_or_insert((reason, record.clone()));
        }
        self.records.lock().expect("not poisoned").push(record);
    }
}

/// Builds a fixture, runs one history on it, tears it down.
pub(super) fn record<F>(
    factory: &F,
    config: &ConcurrentConfig,
    seed: u64,
) -> Result<Recorded, String>
where
    F: ProviderFactory,
    F::Provider: 'static,
{
    let runtime = if config.multi_thread {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
    } else {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
    }
    .map_err(|err| format!("could not start a tokio runtime: {err}"))?;
    runtime.block_on(async {
        let fixture = factory
            .build()
            .await
            .map_err(|err| format!("the factory could not build a fixture: {err}"))?;
        let second = factory
            .second(&fixture)
            .await
            .map_err(|err| format!("the factory could not build a second provider: {err}"))?;
        let plans = plan(config, seed, second.is_some());
        let names: Vec<String> = (0..config.names).map(|n| format!("h12-{n}")).collect();
        let shared = Arc::new(Recording {
            pending_allowed: matches!(fixture.timing, Timing::Wall(w) if !w.pending.is_zero()),
            wall: matches!(fixture.timing, Timing::Wall(_)),
            launches: Mutex::new(vec![(0, 0); 2 * names.len()]),
            fixture,
            second,
            known: Mutex::new(vec![None; 2 * names.len()]),
            names,
            command: factory.command(Duration::MAX),
            image: factory.image(),
            clock: AtomicU64::new(0),
            moved: tokio::sync::Notify::new(),
            done: AtomicBool::new(false),
            records: Mutex::new(Vec::new()),
            wrong: Mutex::new(None),
        });
        let handles: Vec<_> = plans
            .into_iter()
            .enumerate()
            .map(|(task, calls)| {
                let shared = Arc::clone(&shared);
                tokio::spawn(async move {
                    for (via, planned) in calls {
                        shared.run(task, via, planned).await;
                        tokio::task::yield_now().await;
                    }
                })
            })
            .collect();
        let faults = faults(config, seed, factory.policies().mid_call);
        let joined = async {
            let mut panicked = None;
            for handle in handles {
                if let Err(err) = handle.await {
                    panicked.get_or_insert(format!("a task calling the provider failed: {err}"));
                }
            }
            shared.done.store(true, Ordering::SeqCst);
            shared.moved.notify_waiters();
            panicked
        };
        let (panicked, windows) = tokio::join!(joined, control(factory, &shared, &faults));
        let Ok(shared) = Arc::try_unwrap(shared) else {
            return Err("a task still holds the fixture".to_owned());
        };
        factory
            .teardown(&shared.fixture)
            .await
            .map_err(|err| format!("the factory could not tear the fixture down: {err}"))?;
        if let Some(panicked) = panicked {
            return Err(panicked);
        }
        let windows = windows?;
        let whole = factory.policies().outage == Outage::WholeConnection;
        let mut records = shared.records.into_inner().expect("not poisoned");
        for record in &mut records {
            record.excuse = excuse(record, &windows, whole);
            if record.excuse == Excuse::Maybe && matches!(record.answer, Answer::Failed(_)) {
                record.settled = windows
                    .iter()
                    .filter(|w| w.overlaps(record))
                    .map(|w| w.end)
                    .fold(record.answered, u64::max);
            }
        }
        records.sort_by_key(|r| r.invoked);
        let (blue, green) = records.into_iter().partition(|r| r.via.dep() == Dep::Blue);
        Ok(Recorded {
            names: shared.names,
            blue,
            green,
            windows,
            wrong: shared.wrong.into_inner().expect("not poisoned"),
        })
    })
}

/// The smallest failing history found with fewer tasks and calls than
/// `config`, already shrunk by [`check`].
pub(super) fn shrink<F>(
    factory: &F,
    config: &ConcurrentConfig,
    seed: u64,
    unknown: Teardown,
) -> Option<(Failing, Vec<String>)>
where
    F: ProviderFactory,
    F::Provider: 'static,
{
    let mut best: Option<(Failing, Vec<String>)> = None;
    for tasks in 2..=config.tasks {
        for calls_per_task in 1..=config.calls_per_task {
            if tasks == config.tasks && calls_per_task == config.calls_per_task {
                continue;
            }
            let smaller = ConcurrentConfig {
                tasks,
                calls_per_task,
                ..*config
            };
            for attempt in 0..u64::from(config.shrink_attempts) {
                let Ok(recorded) = record(factory, &smaller, seed.wrapping_add(attempt)) else {
                    continue;
                };
                if let Err(failing) = check(&recorded, unknown)
                    && best
                        .as_ref()
                        .is_none_or(|((_, b, _), _)| failing.1.len() < b.len())
                {
                    best = Some((failing, recorded.names));
                }
            }
            if best.is_some() {
                return best;
            }
        }
    }
    best
}

#[cfg(test)]
mod tests {
    use super::*;

    // H12: the calls planned use every provider object (the second blue one
    // only when the factory gives one) and every kind of call, over every
    // name, and are the same for the same seed.
    #[test]
    fn h12_plans_use_every_object_call_and_name() {
        let config = ConcurrentConfig {
            tasks: 4,
            calls_per_task: 50,
            names: 3,
            ..ConcurrentConfig::default()
        };
        let planned = plan(&config, 5, true);
        assert_eq!(planned.len(), 4);
        assert!(planned.iter().all(|calls| calls.len() == 50));
        let all: Vec<(Via, Planned)> = planned.iter().flatten().copied().collect();
        let count = |f: &dyn Fn(&(Via, Planned)) -> bool| all.iter().filter(|c| f(c)).count();
        for via in [Via::Blue, Via::Blue2, Via::Green] {
            assert!(count(&|(v, _)| *v == via) > 20, "{via:?}");
        }
        assert!(count(&|(_, p)| matches!(p, Planned::Launch(_))) > 30);
        assert!(count(&|(_, p)| matches!(p, Planned::Destroy(_))) > 30);
        assert!(count(&|(_, p)| matches!(p, Planned::Find(_))) > 20);
        assert!(count(&|(_, p)| matches!(p, Planned::List)) > 20);
        for name in 0..3 {
            assert!(count(&|(_, p)| matches!(p, Planned::Launch(n) if *n == name)) > 5);
        }
        assert_eq!(
            format!("{:?}", plan(&config, 5, true)),
            format!("{planned:?}")
        );
        let single = plan(&config, 5, false);
        assert!(single.iter().flatten().all(|(v, _)| *v != Via::Blue2));
        assert!(single.iter().flatten().any(|(v, _)| *v == Via::Green));
    }
}
