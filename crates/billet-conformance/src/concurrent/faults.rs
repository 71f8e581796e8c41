//! Faults made while the tasks call (H8, H11): the faults a history is to
//! have ([`Fault`], planned by [`faults`]) and making them as the history
//! runs ([`control`]), each noted as a [`Window`] of the history.

use std::sync::atomic::Ordering;

use proptest::prelude::RngExt;

use crate::{ConcurrentConfig, FixtureError, ProviderFactory};

use super::history::{Dep, Window};
use super::recording::{Recording, rng_of};

/// A fault a history is to have.
#[derive(Debug, Clone, Copy)]
pub(super) struct Fault {
    dep: Dep,
    /// The global order at which it begins, and for how many more it lasts.
    begin: u64,
    length: u64,
    /// `Some(after)`: it begins with an answer lost after `after` exchanges.
    lose: Option<u32>,
}

/// Plans `config.faults` faults from `seed` (a stream of its own, so the
/// calls planned are the same with and without faults), in order of their
/// beginning.
pub(super) fn faults(config: &ConcurrentConfig, seed: u64, mid_call: bool) -> Vec<Fault> {
    let mut rng = rng_of(seed ^ 0x5eed_fa17);
    let span = 2 * (config.tasks * config.calls_per_task) as u64;
    let mut faults: Vec<Fault> = (0..config.faults)
        .map(|_| Fault {
            dep: if rng.random_bool(0.5) {
                Dep::Blue
            } else {
                Dep::Green
            },
            begin: rng.random_range(0..span),
            length: 2 * rng.random_range(2..=6u64),
            lose: (mid_call && rng.random_bool(0.5)).then(|| rng.random_range(0..=2u32)),
        })
        .collect();
    faults.sort_by_key(|f| f.begin);
    faults
}

/// Waits until the history's global order reaches `at`: `false` if the
/// tasks were done first.
async fn reach<P>(shared: &Recording<P>, at: u64) -> bool {
    loop {
        let moved = shared.moved.notified();
        let mut moved = std::pin::pin!(moved);
        moved.as_mut().enable();
        if shared.clock.load(Ordering::SeqCst) >= at {
            return true;
        }
        if shared.done.load(Ordering::SeqCst) {
            return false;
        }
        moved.await;
    }
}

/// Makes `faults` while the tasks call, one after another, and answers
/// where each fell in the history's global order. Ends every outage it
/// began, even when a factory call fails.
pub(super) async fn control<F>(
    factory: &F,
    shared: &Recording<F::Provider>,
    faults: &[Fault],
) -> Result<Vec<Window>, String>
where
    F: ProviderFactory,
{
    let tick = || shared.clock.fetch_add(1, Ordering::SeqCst);
    let failed = |what: &str, err: FixtureError| format!("the factory could not {what}: {err}");
    let mut windows = Vec::new();
    for fault in faults {
        if !reach(shared, fault.begin).await {
            break;
        }
        let deployment = match fault.dep {
            Dep::Blue => &shared.fixture.blue,
            Dep::Green => &shared.fixture.green,
        };
        let start = tick();
        let begun = match fault.lose {
            Some(after) => factory
                .lose_answer(deployment, after)
                .await
                .map_err(|err| failed("arm a lost answer", err)),
            None => factory
                .set_outage(deployment, true)
                .await
                .map_err(|err| failed("start an outage", err)),
        };
        let cut = match begun {
            Ok(()) if fault.lose.is_some() => {
                reach(shared, start + fault.length / 2).await;
                tick();
                let cut = factory
                    .set_outage(deployment, true)
                    .await
                    .map_err(|err| failed("start an outage", err));
                cut.map(|()| tick())
            }
            Ok(()) => Ok(tick()),
            Err(err) => Err(err),
        };
        if cut.is_ok() {
            reach(shared, start + fault.length).await;
        }
        let restore = tick();
        let ended = factory
            .set_outage(deployment, false)
            .await
            .map_err(|err| failed("end an outage", err));
        let end = tick();
        let cut = cut?;
        ended?;
        windows.push(Window {
            dep: fault.dep,
            lose: fault.lose,
            start,
            cut,
            restore,
            end,
        });
    }
    Ok(windows)
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;
    use std::sync::Mutex;
    use std::sync::atomic::{AtomicBool, AtomicU64};
    use std::time::Duration;

    use billet_provider::{Error, Instance, InstanceId, Provider, Spec, Teardown, TrustClass};

    use super::*;
    use crate::{Fixture, Outage, Timing};

    // H12/H8: the faults of a history begin anywhere in its global order
    // (which runs to twice its calls), last 4 to 12 steps, come in the
    // order they begin, lose an answer only for a factory that can (about
    // half of them then, after 0 to 2 exchanges), and are the same for the
    // same seed and different for different seeds.
    #[test]
    fn h12_h8_faults_spread_over_the_history_and_follow_the_seed() {
        let config = ConcurrentConfig {
            faults: 3,
            ..ConcurrentConfig::default()
        };
        let span = 2 * 3 * 10;
        let mut schedules = BTreeSet::new();
        let (mut latest, mut longest, mut losing, mut blue) = (0, 0, 0, 0);
        for seed in 0..200 {
            let planned = faults(&config, seed, true);
            assert_eq!(planned.len(), 3);
            assert!(planned.windows(2).all(|f| f[0].begin <= f[1].begin));
            for fault in &planned {
                assert!(fault.begin < span, "{fault:?}");
                assert!(fault.length % 2 == 0 && (4..=12).contains(&fault.length));
                assert!(fault.lose.is_none_or(|after| after <= 2), "{fault:?}");
                latest = latest.max(fault.begin);
                longest = longest.max(fault.length);
                losing += usize::from(fault.lose.is_some());
                blue += usize::from(fault.dep == Dep::Blue);
            }
            let shown = format!("{planned:?}");
            assert_eq!(format!("{:?}", faults(&config, seed, true)), shown);
            schedules.insert(shown);
            assert!(
                faults(&config, seed, false)
                    .iter()
                    .all(|f| f.lose.is_none())
            );
        }
        assert_eq!(schedules.len(), 200);
        assert!(latest >= span - 5, "{latest}");
        assert_eq!(longest, 12);
        assert!((200..400).contains(&losing), "{losing}");
        assert!((200..400).contains(&blue), "{blue}");
        let none = ConcurrentConfig {
            faults: 0,
            ..config
        };
        assert!(faults(&none, 1, true).is_empty());
    }

    /// A provider that holds nothing: the fault tests call none of it.
    #[derive(Debug)]
    struct Idle;

    #[async_trait::async_trait]
    impl Provider for Idle {
        fn kind(&self) -> billet_provider::ProviderKind {
            billet_provider::ProviderKind::Simulated
        }

        fn accepts(&self, _: TrustClass) -> Result<(), Error> {
            Ok(())
        }

        async fn launch(&self, _: Spec) -> Result<Instance, Error> {
            Err(Error::unavailable("idle"))
        }

        async fn find(&self, _: &str) -> Result<Option<Instance>, Error> {
            Ok(None)
        }

        async fn list(&self) -> Result<Vec<Instance>, Error> {
            Ok(Vec::new())
        }

        async fn destroy(&self, _: &InstanceId) -> Result<Teardown, Error> {
            Ok(Teardown::Absent)
        }
    }

    /// A factory whose fault calls say, in order, what they were asked.
    #[derive(Default)]
    struct Faulty {
        asked: Mutex<Vec<String>>,
    }

    #[async_trait::async_trait]
    impl ProviderFactory for Faulty {
        type Provider = Idle;

        fn policies(&self) -> crate::Policies {
            crate::Policies {
                outage: Outage::WholeConnection,
                mid_call: true,
                ..crate::Policies::STRICT
            }
        }

        async fn build(&self) -> Result<Fixture<Idle>, FixtureError> {
            Err("not built here".into())
        }

        async fn set_outage(
            &self,
            deployment: &crate::Deployment<Idle>,
            down: bool,
        ) -> Result<(), FixtureError> {
            let state = if down { "down" } else { "up" };
            self.asked
                .lock()
                .expect("not poisoned")
                .push(format!("{} {state}", deployment.owner));
            Ok(())
        }

        async fn lose_answer(
            &self,
            deployment: &crate::Deployment<Idle>,
            after: u32,
        ) -> Result<(), FixtureError> {
            self.asked
                .lock()
                .expect("not poisoned")
                .push(format!("{} loses after {after}", deployment.owner));
            Ok(())
        }

        fn command(&self, _: Duration) -> Vec<String> {
            Vec::new()
        }
    }

    /// The windows `control` makes of `faults` while the history's global
    /// order moves one step at a time, `steps` steps, after which the tasks
    /// are done.
    fn windows_of(factory: &Faulty, faults: &[Fault], steps: u64) -> Result<Vec<Window>, String> {
        let deployment = |owner: &str| crate::Deployment {
            owner: owner.to_owned(),
            provider: Idle,
        };
        let shared = Recording {
            fixture: Fixture {
                blue: deployment("blue"),
                green: deployment("green"),
                timing: Timing::Modelled(billet_clock::ManualClock::new(
                    std::time::SystemTime::UNIX_EPOCH,
                )),
            },
            second: None,
            names: vec!["h12-0".to_owned()],
            command: Vec::new(),
            image: String::new(),
            pending_allowed: false,
            wall: false,
            launches: Mutex::new(vec![(0, 0); 2]),
            clock: AtomicU64::new(0),
            moved: tokio::sync::Notify::new(),
            done: AtomicBool::new(false),
            known: Mutex::new(vec![None; 2]),
            records: Mutex::new(Vec::new()),
            wrong: Mutex::new(None),
        };
        let runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .expect("a runtime");
        runtime.block_on(async {
            let settle = || async {
                for _ in 0..4 {
                    tokio::task::yield_now().await;
                }
            };
            let tasks = async {
                for _ in 0..steps {
                    settle().await;
                    shared.clock.fetch_add(1, Ordering::SeqCst);
                    shared.moved.notify_waiters();
                }
                settle().await;
                shared.done.store(true, Ordering::SeqCst);
                shared.moved.notify_waiters();
            };
            let (windows, ()) = tokio::join!(control(factory, &shared, faults), tasks);
            windows
        })
    }

    // H12 with H8/H11: each fault begins once the history's global order
    // reaches its beginning: an outage is cut at once and restored once it
    // has lasted its length; a lost answer is armed, the connection cut
    // halfway through, and restored at its end. Each edge takes its own
    // place in the global order. A fault that would begin after the tasks
    // are done is not made.
    #[test]
    fn h12_h8_h11_faults_fall_where_they_were_planned() {
        let factory = Faulty::default();
        let faults = [
            Fault {
                dep: Dep::Blue,
                begin: 3,
                length: 6,
                lose: None,
            },
            Fault {
                dep: Dep::Green,
                begin: 12,
                length: 8,
                lose: Some(1),
            },
            Fault {
                dep: Dep::Blue,
                begin: 100,
                length: 4,
                lose: None,
            },
        ];
        let windows = windows_of(&factory, &faults, 20).expect("faults made");
        let made: Vec<(Dep, Option<u32>, [u64; 4])> = windows
            .iter()
            .map(|w| (w.dep, w.lose, [w.start, w.cut, w.restore, w.end]))
            .collect();
        assert_eq!(
            made,
            [
                (Dep::Blue, None, [3, 4, 9, 10]),
                (Dep::Green, Some(1), [12, 17, 20, 21]),
            ]
        );
        assert_eq!(
            *factory.asked.lock().expect("not poisoned"),
            [
                "blue down",
                "blue up",
                "green loses after 1",
                "green down",
                "green up"
            ]
        );
        // No fault at all when the tasks are done before the first begins.
        let quiet = Faulty::default();
        assert!(
            windows_of(&quiet, &faults[2..], 20)
                .expect("none")
                .is_empty()
        );
        assert!(quiet.asked.lock().expect("not poisoned").is_empty());
    }
}
