//! [`SchedulerTask`]: the core driven as a tokio task by the scheduler's
//! [`Driver`] loop, its provider calls made concurrently, its timing from a
//! [`Clock`]: the smallest owner of a driver, kept for the drivers' tests
//! (the service's engine is the production one).

use std::sync::Arc;
use std::time::SystemTime;

use billet_clock::Clock;
use tokio::sync::{Mutex, mpsc, oneshot};
use tokio::task::JoinHandle;

use billet_scheduler::{
    Core, Decision, Driver, Flow, Hooks, Job, JobId, Pools, Refusal, Stats, Turn,
};

/// The scheduler's task has stopped: it was shut down, or its runtime ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the scheduler has stopped")]
pub(crate) struct Stopped;

enum Command {
    Submit(Job, oneshot::Sender<Result<(), Refusal>>),
    Cancel(JobId, oneshot::Sender<bool>),
}

/// A running scheduler: a task on the current tokio runtime that owns a
/// [`Core`] and performs its calls on the pools' providers, concurrently.
///
/// # Guarantees
///
/// * Inputs reach the core in the order the task receives them, each with
///   the clock's time; the task drains every output after every input and
///   re-reads [`Core::poll_timeout`] before it waits again (the [`Driver`]'s
///   loop, whose guarantees are listed at [`Hooks`]).
/// * Provider calls run concurrently, each bounded by its action's deadline:
///   a call still running then is dropped, and the core, which has treated it
///   as lost, lets the next inventory settle what it did.
/// * Every decision is delivered by [`next_decision`](SchedulerTask::next_decision),
///   in order, none dropped.
/// * [`stats`](SchedulerTask::stats) is the core's counts after its last input.
/// * [`shutdown`](SchedulerTask::shutdown) stops the task; instances keep
///   running, and a scheduler built again over the same pools counts and
///   adopts them (B8).
#[derive(Debug)]
pub(crate) struct SchedulerTask {
    commands: mpsc::UnboundedSender<Command>,
    decisions: Mutex<mpsc::UnboundedReceiver<Decision>>,
    stats: Arc<parking_stats::Shared>,
    task: JoinHandle<()>,
}

/// The shared copy of the counts, behind a plain mutex held only to copy.
mod parking_stats {
    use std::sync::Mutex;

    use billet_scheduler::Stats;

    #[derive(Debug, Default)]
    pub(super) struct Shared(Mutex<Stats>);

    impl Shared {
        pub(super) fn set(&self, stats: Stats) {
            match self.0.lock() {
                Ok(mut held) => *held = stats,
                Err(poisoned) => *poisoned.into_inner() = stats,
            }
        }

        pub(super) fn get(&self) -> Stats {
            match self.0.lock() {
                Ok(held) => held.clone(),
                Err(poisoned) => poisoned.into_inner().clone(),
            }
        }
    }
}

/// The task's side of the loop: commands in, decisions and counts out, every
/// call made at once.
struct TaskHooks {
    inbox: mpsc::UnboundedReceiver<Command>,
    decided: mpsc::UnboundedSender<Decision>,
    stats: Arc<parking_stats::Shared>,
}

impl Hooks for TaskHooks {
    type Input = Command;
    type Error = std::convert::Infallible;

    async fn next_input(&mut self) -> Option<Command> {
        self.inbox.recv().await
    }

    fn on_input(&mut self, command: Command, turn: Turn<'_>) -> Result<Flow, Self::Error> {
        match command {
            Command::Submit(job, reply) => {
                let _ = reply.send(turn.core.submit(job, turn.now));
            }
            Command::Cancel(job, reply) => {
                let _ = reply.send(turn.core.cancel(job, turn.now));
            }
        }
        Ok(Flow::Continue)
    }

    // The counts first: whoever reads a decision reads counts that include it.
    fn observe(&mut self, core: &Core) {
        self.stats.set(core.stats());
    }

    fn decided(&mut self, decision: Decision, _: SystemTime) {
        let _ = self.decided.send(decision);
    }
}

impl SchedulerTask {
    /// Starts the scheduler over `pools` as a task on the current tokio
    /// runtime, timed by `clock`. Must be called from inside a runtime.
    pub(crate) fn spawn(pools: &Pools, clock: Arc<dyn Clock>) -> SchedulerTask {
        let mut driver = Driver::new(pools, clock);
        let (commands, inbox) = mpsc::unbounded_channel();
        let (decided, decisions) = mpsc::unbounded_channel();
        let stats = Arc::new(parking_stats::Shared::default());
        stats.set(driver.core_mut().stats());
        let mut task = TaskHooks {
            inbox,
            decided,
            stats: Arc::clone(&stats),
        };
        let task = tokio::spawn(async move {
            let Ok(()) = driver.run(&mut task).await;
        });
        SchedulerTask {
            commands,
            decisions: Mutex::new(decisions),
            stats,
            task,
        }
    }

    /// Submits `job`: `Ok` once accepted (queued or placed), or the reason
    /// it is refused (B3).
    pub(crate) async fn submit(&self, job: Job) -> Result<Result<(), Refusal>, Stopped> {
        let (reply, answer) = oneshot::channel();
        self.commands
            .send(Command::Submit(job, reply))
            .map_err(|_| Stopped)?;
        answer.await.map_err(|_| Stopped)
    }

    /// Cancels `job` (B9); `false` when it is unknown, ended or ending.
    pub(crate) async fn cancel(&self, job: JobId) -> Result<bool, Stopped> {
        let (reply, answer) = oneshot::channel();
        self.commands
            .send(Command::Cancel(job, reply))
            .map_err(|_| Stopped)?;
        answer.await.map_err(|_| Stopped)
    }

    /// The next decision, in the order made; `None` once the task stopped and
    /// every decision was read.
    pub(crate) async fn next_decision(&self) -> Option<Decision> {
        self.decisions.lock().await.recv().await
    }

    /// The counts after the core's last input (B11).
    pub(crate) fn stats(&self) -> Stats {
        self.stats.get()
    }

    /// Stops the task and waits for it; calls in flight are dropped.
    pub(crate) async fn shutdown(self) {
        drop(self.commands);
        let _ = self.task.await;
    }
}
