//! [`Scheduler`]: the core driven as a tokio task by the [`Driver`]'s loop,
//! its provider calls made concurrently, its timing from a [`Clock`].

use std::sync::Arc;
use std::time::SystemTime;

use billet_clock::Clock;
use tokio::sync::{Mutex, mpsc, oneshot};
use tokio::task::JoinHandle;

use crate::build::Pools;
use crate::core::Core;
use crate::driver::{Driver, Flow, Hooks, Turn};
use crate::job::{Job, JobId};
use crate::protocol::Decision;
use crate::routing::Refusal;
use crate::stats::Stats;

/// The scheduler's task has stopped: it was shut down, or its runtime ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the scheduler has stopped")]
pub struct Stopped;

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
/// * Every decision is delivered by [`next_decision`](Scheduler::next_decision),
///   in order, none dropped.
/// * [`stats`](Scheduler::stats) is the core's counts after its last input.
/// * [`shutdown`](Scheduler::shutdown) stops the task; instances keep
///   running, and a scheduler built again over the same pools counts and
///   adopts them (B8).
#[derive(Debug)]
pub struct Scheduler {
    commands: mpsc::UnboundedSender<Command>,
    decisions: Mutex<mpsc::UnboundedReceiver<Decision>>,
    stats: Arc<parking_stats::Shared>,
    task: JoinHandle<()>,
}

/// The shared copy of the counts, behind a plain mutex held only to copy.
mod parking_stats {
    use std::sync::Mutex;

    use crate::stats::Stats;

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
struct Task {
    inbox: mpsc::UnboundedReceiver<Command>,
    decided: mpsc::UnboundedSender<Decision>,
    stats: Arc<parking_stats::Shared>,
}

impl Hooks for Task {
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

impl Pools {
    /// Starts the scheduler as a task on the current tokio runtime, timed by
    /// `clock`. Must be called from inside a runtime.
    pub fn spawn(&self, clock: Arc<dyn Clock>) -> Scheduler {
        let mut driver = Driver::new(self, clock);
        let (commands, inbox) = mpsc::unbounded_channel();
        let (decided, decisions) = mpsc::unbounded_channel();
        let stats = Arc::new(parking_stats::Shared::default());
        stats.set(driver.core_mut().stats());
        let mut task = Task {
            inbox,
            decided,
            stats: Arc::clone(&stats),
        };
        let task = tokio::spawn(async move {
            let Ok(()) = driver.run(&mut task).await;
        });
        Scheduler {
            commands,
            decisions: Mutex::new(decisions),
            stats,
            task,
        }
    }
}

impl Scheduler {
    /// Submits `job`: `Ok` once accepted (queued or placed), or the reason
    /// it is refused (B3).
    pub async fn submit(&self, job: Job) -> Result<Result<(), Refusal>, Stopped> {
        let (reply, answer) = oneshot::channel();
        self.commands
            .send(Command::Submit(job, reply))
            .map_err(|_| Stopped)?;
        answer.await.map_err(|_| Stopped)
    }

    /// Cancels `job` (B9); `false` when it is unknown, ended or ending.
    pub async fn cancel(&self, job: JobId) -> Result<bool, Stopped> {
        let (reply, answer) = oneshot::channel();
        self.commands
            .send(Command::Cancel(job, reply))
            .map_err(|_| Stopped)?;
        answer.await.map_err(|_| Stopped)
    }

    /// The next decision, in the order made; `None` once the task stopped and
    /// every decision was read.
    pub async fn next_decision(&self) -> Option<Decision> {
        self.decisions.lock().await.recv().await
    }

    /// The counts after the core's last input (B11).
    pub fn stats(&self) -> Stats {
        self.stats.get()
    }

    /// Stops the task and waits for it; calls in flight are dropped.
    pub async fn shutdown(self) {
        drop(self.commands);
        let _ = self.task.await;
    }
}
