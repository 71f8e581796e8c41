//! The requests the HTTP side hands the engine ([`EngineHandle`]), and how
//! each is answered: [`Submitted`], [`Cancelled`], or [`Unanswered`] when
//! the engine did not take it (shutting down, stopped, or its intake full).

use std::sync::Arc;
use std::sync::atomic::Ordering;

use tokio::sync::{mpsc, oneshot};

use super::Shared;
use crate::api::JobView;
use crate::record::NewJob;

/// How a submission was answered.
#[derive(Debug)]
pub enum Submitted {
    /// Accepted and committed.
    Created(JobView),
    /// Its key was seen before, with the same request: that job.
    Existing(JobView),
    /// Its key was seen before with another request (L18): that job's id;
    /// nothing recorded.
    Conflicting(u64),
    /// No pool could ever take it; nothing recorded.
    Refused(String),
    /// As many jobs as the bound allows (L19) have not ended: nothing
    /// recorded. Carries the bound.
    Full(usize),
    /// Its key's job could not be read from the store; nothing recorded.
    Unreadable(String),
    /// The store cannot commit for lack of space (L25): nothing recorded.
    /// Carries the store's error.
    NoSpace(String),
}

/// How a cancel was answered.
#[derive(Debug)]
pub enum Cancelled {
    /// The cancel was taken: the job is cancelled (it was queued) or being
    /// cancelled (it was running; its instance is destroyed next).
    Requested(JobView),
    /// It had already ended.
    Ended(JobView),
    /// No such job.
    Unknown,
    /// The job could not be read from the store (the cancel, if taken, is
    /// committed).
    Unreadable(String),
    /// The store cannot commit for lack of space (L25): not taken. Carries
    /// the store's error.
    NoSpace(String),
}

pub(super) enum Command {
    Submit(NewJob, oneshot::Sender<Submitted>),
    Cancel(u64, oneshot::Sender<Cancelled>),
}

/// Why the engine did not answer a request: its reply was dropped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Unanswered {
    /// An orderly shutdown began: requests are no longer taken.
    #[error("billet is shutting down")]
    ShuttingDown,
    /// The engine stopped without being asked to (its store failed, or it
    /// panicked): `billet serve` exits with the cause in its log.
    #[error("billet's engine stopped: see the service's log")]
    EngineStopped,
    /// The engine's intake is full (L12): the request was refused at once,
    /// nothing recorded; it may be sent again shortly.
    #[error("billet's intake is full: try again shortly")]
    Saturated,
}

/// How the HTTP side talks to the engine.
#[derive(Debug, Clone)]
pub struct EngineHandle {
    pub(super) commands: mpsc::Sender<Command>,
    pub(super) shared: Arc<Shared>,
}

impl EngineHandle {
    /// Submits a job; answered once committed, or at once
    /// [`Unanswered::Saturated`] when the intake is full.
    pub async fn submit(&self, job: NewJob) -> Result<Submitted, Unanswered> {
        let (reply, answer) = oneshot::channel();
        self.send(Command::Submit(job, reply))?;
        answer.await.map_err(|_| self.unanswered())
    }

    /// Cancels job `id`; answered once committed, or at once
    /// [`Unanswered::Saturated`] when the intake is full.
    pub async fn cancel(&self, id: u64) -> Result<Cancelled, Unanswered> {
        let (reply, answer) = oneshot::channel();
        self.send(Command::Cancel(id, reply))?;
        answer.await.map_err(|_| self.unanswered())
    }

    /// Hands `command` to the engine without waiting for room.
    fn send(&self, command: Command) -> Result<(), Unanswered> {
        self.commands
            .try_send(command)
            .map_err(|error| match error {
                mpsc::error::TrySendError::Full(_) => Unanswered::Saturated,
                mpsc::error::TrySendError::Closed(_) => self.unanswered(),
            })
    }

    /// Why a reply was dropped: the shutdown clears `accepting` before it
    /// tells the engine, so a reply dropped while it is still set was
    /// dropped by an engine that stopped unasked.
    fn unanswered(&self) -> Unanswered {
        if self.shared.accepting.load(Ordering::SeqCst) {
            Unanswered::EngineStopped
        } else {
            Unanswered::ShuttingDown
        }
    }
}
