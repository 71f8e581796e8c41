//! The provider contract and the clock used together, as a scheduler would:
//! a backend times its instances by an injected clock, and a waiting task
//! sleeps on the same clock until the work is done.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use async_trait::async_trait;
use billet_clock::{Clock, ManualClock};
use billet_provider::{
    Error, ErrorKind, Instance, InstanceId, Provider, ProviderKind, Spec, State, Teardown,
    TrustClass,
};

/// A minimal in-test backend: every instance runs for one minute by the clock.
#[derive(Debug)]
struct MinuteBackend {
    clock: Arc<dyn Clock>,
    held: Mutex<HashMap<InstanceId, (String, SystemTime)>>,
}

const RUN: Duration = Duration::from_secs(60);

impl MinuteBackend {
    fn snapshot(&self, id: &InstanceId, name: &str, started_at: SystemTime) -> Instance {
        let state = if self.clock.now() < started_at + RUN {
            State::Running
        } else {
            State::Stopped { exit_code: 0 }
        };
        Instance {
            id: id.clone(),
            name: name.into(),
            owner: "blue".into(),
            kind: self.kind(),
            state,
            started_at,
        }
    }
}

#[async_trait]
impl Provider for MinuteBackend {
    fn kind(&self) -> ProviderKind {
        ProviderKind::Firecracker
    }
    fn accepts(&self, _trust: TrustClass) -> Result<(), Error> {
        Ok(()) // a microVM is an isolation boundary
    }
    async fn launch(&self, spec: Spec) -> Result<Instance, Error> {
        self.accepts(spec.trust)?;
        let mut held = self.held.lock().unwrap();
        if held.values().any(|(name, _)| *name == spec.name) {
            return Err(Error::Conflict { name: spec.name });
        }
        let id = InstanceId::from(format!("vm-{}", held.len()));
        let now = self.clock.now();
        held.insert(id.clone(), (spec.name.clone(), now));
        Ok(self.snapshot(&id, &spec.name, now))
    }
    async fn find(&self, name: &str) -> Result<Option<Instance>, Error> {
        Ok(self.list().await?.into_iter().find(|i| *i.name == *name))
    }
    async fn list(&self) -> Result<Vec<Instance>, Error> {
        let held = self.held.lock().unwrap();
        Ok(held
            .iter()
            .map(|(id, (name, at))| self.snapshot(id, name, *at))
            .collect())
    }
    async fn destroy(&self, id: &InstanceId) -> Result<Teardown, Error> {
        Ok(match self.held.lock().unwrap().remove(id) {
            Some(_) => Teardown::Stopped,
            None => Teardown::Absent,
        })
    }
}

// P1, C1, C3: a provider behind Arc<dyn Provider> timed by a ManualClock behind
// Arc<dyn Clock>; a task sleeping on the clock sees the instance stopped once
// the clock has been moved past its run time, and not before.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn p1_c1_provider_timed_by_a_manual_clock() {
    let start = SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000);
    let manual = ManualClock::new(start);
    let clock: Arc<dyn Clock> = Arc::new(manual.clone());
    let provider: Arc<dyn Provider> = Arc::new(MinuteBackend {
        clock: Arc::clone(&clock),
        held: Mutex::new(HashMap::new()),
    });

    let spec = Spec::new("job-1", ["make", "test"]).with_trust(TrustClass::Untrusted);
    let launched = provider.launch(spec.clone()).await.unwrap();
    assert_eq!(launched.state, State::Running);
    assert_eq!(launched.started_at, start);
    let again = provider.launch(spec).await.unwrap_err();
    assert_eq!(again.kind(), ErrorKind::Conflict);

    let waiter = {
        let provider = Arc::clone(&provider);
        let sleep = clock.sleep(RUN);
        tokio::spawn(async move {
            sleep.await;
            provider.find("job-1").await.unwrap().unwrap().state
        })
    };
    manual.advance(RUN - Duration::from_nanos(1)).unwrap();
    assert_eq!(
        provider.find("job-1").await.unwrap().unwrap().state,
        State::Running
    );
    manual.advance(Duration::from_nanos(1)).unwrap();
    assert_eq!(waiter.await.unwrap(), State::Stopped { exit_code: 0 });

    assert_eq!(
        provider.destroy(&launched.id).await.unwrap(),
        Teardown::Stopped
    );
    assert_eq!(
        provider.destroy(&launched.id).await.unwrap(),
        Teardown::Absent
    );
    assert!(provider.list().await.unwrap().is_empty());
}
