//! [`Inline`]: a driver that makes the core's calls one at a time, in the
//! order asked for, for callers that step modelled time themselves.

use std::sync::Arc;
use std::time::SystemTime;

use billet_clock::Clock;
use billet_provider::Provider;

use crate::build::Pools;
use crate::core::Core;
use crate::job::{Job, JobId};
use crate::protocol::{Answer, Call, Decision};
use crate::routing::Refusal;

/// Makes one call on `provider` and answers what it said.
pub async fn perform(provider: &dyn Provider, call: Call) -> Answer {
    match call {
        Call::Launch(spec) => Answer::Launched(provider.launch(spec).await),
        Call::Find(name) => Answer::Found(provider.find(&name).await),
        Call::List => Answer::Listed(provider.list().await),
        Call::Destroy(id) => Answer::Destroyed(provider.destroy(&id).await),
    }
}

/// A driver with no task of its own: every input is handed to the core with
/// the clock's time, then each call the core asks for is made and answered in
/// turn, in call order, until none is left. Deterministic when the providers
/// and the clock are (B10): the harness steps a `ManualClock` and calls
/// [`tick`](Inline::tick) at each [`next_wakeup`](Inline::next_wakeup).
///
/// A call that never returns blocks it: meant for providers that answer
/// (the simulated backend), not for a service (use [`Scheduler`](crate::Scheduler)).
#[derive(Debug)]
pub struct Inline {
    core: Core,
    providers: Vec<Arc<dyn Provider>>,
    clock: Arc<dyn Clock>,
}

impl Inline {
    /// A scheduler over `pools` at the clock's time. Its first inventories
    /// (B8) are read by the first input or [`Inline::start`].
    pub fn new(pools: &Pools, clock: Arc<dyn Clock>) -> Inline {
        Inline {
            core: pools.core(clock.now()),
            providers: pools.providers().to_vec(),
            clock,
        }
    }

    /// Reads every pool's inventory, as a new scheduler must before it places
    /// anything (B8).
    pub async fn start(&mut self) {
        self.drain().await;
    }

    /// Submits `job`; placed at once when it can be.
    pub async fn submit(&mut self, job: Job) -> Result<(), Refusal> {
        let result = self.core.submit(job, self.clock.now());
        self.drain().await;
        result
    }

    /// Cancels `job` (B9); see [`Core::cancel`].
    pub async fn cancel(&mut self, job: JobId) -> bool {
        let cancelled = self.core.cancel(job, self.clock.now());
        self.drain().await;
        cancelled
    }

    /// Does what is due at the clock's time.
    pub async fn tick(&mut self) {
        self.core.handle_timeout(self.clock.now());
        self.drain().await;
    }

    /// When [`tick`](Inline::tick) is next needed; `None` once the core is
    /// idle ([`Core::is_idle`]): nothing queued, held, unsettled or orphaned.
    /// The next input finds a reconciliation due if one is, so a stray that
    /// appears meanwhile is found at the first tick after it.
    pub fn next_wakeup(&mut self) -> Option<SystemTime> {
        if self.core.is_idle() {
            return None;
        }
        self.core.poll_timeout()
    }

    /// The next decision made, in the order made.
    pub fn poll_decision(&mut self) -> Option<Decision> {
        self.core.poll_decision()
    }

    /// The core, to read its counts.
    pub fn core(&self) -> &Core {
        &self.core
    }

    async fn drain(&mut self) {
        while let Some(action) = self.core.poll_action() {
            let provider = Arc::clone(&self.providers[action.pool.0]);
            let answer = perform(&*provider, action.call).await;
            self.core.handle_answer(action.id, answer, self.clock.now());
        }
    }
}
