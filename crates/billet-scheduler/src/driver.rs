//! [`Driver`]: the one loop that drives a [`Core`] on tokio, its provider
//! calls made concurrently, its timing from a [`Clock`]. Its owner plugs in
//! through [`Hooks`]: its own inputs, a tap on every decision, and a gate in
//! front of every call. The task driver ([`Scheduler`](crate::Scheduler))
//! and the service's engine both run this loop.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::SystemTime;

use billet_clock::Clock;
use billet_provider::{Hint, Provider};
use futures::stream::FuturesUnordered;
use futures::{FutureExt, StreamExt};

use crate::core::Core;
use crate::inline::perform;
use crate::pools::Pools;
use crate::protocol::{Action, Answer, Call, CallId, Decision};
use crate::routing::PoolId;

/// What a gate says of a call the core asks for ([`Hooks::gate`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Gate {
    /// Make the call now.
    Go,
    /// Hold the call until [`Flow::Release`] (or [`Driver::release`]) names
    /// a ticket at least this one. Held calls go out in the order they were
    /// asked for.
    Hold(u64),
}

/// What the loop does after one of its owner's inputs ([`Hooks::on_input`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flow {
    /// Go on.
    Continue,
    /// Make every held call whose ticket is at most this one, in order.
    Release(u64),
    /// Stop: from now on no call goes out and no timer reaches the core;
    /// the answers of calls in flight still do, until none is left or the
    /// time given is reached (calls still running then are dropped). The
    /// loop then steps once more and returns.
    Drain(SystemTime),
}

/// A call that ended: answered, or dropped at its deadline.
#[derive(Debug)]
pub struct CallEnded {
    /// The call, as the core numbered it.
    pub id: CallId,
    /// The pool it was made on.
    pub pool: PoolId,
    /// Whether it was an inventory read ([`Call::List`]).
    pub list: bool,
    /// What the provider answered; `None` when the call was still running
    /// at its deadline and was dropped.
    pub answer: Option<Answer>,
}

/// What an owner's input is handed along with: the core, to feed it.
#[derive(Debug)]
pub struct Turn<'a> {
    /// The core the loop drives.
    pub core: &'a mut Core,
    /// The clock's time as the input is handled.
    pub now: SystemTime,
    /// Calls made and not yet ended.
    pub in_flight: usize,
}

/// How the owner of a [`Driver`] plugs into its loop.
///
/// # What the loop guarantees
///
/// * **Order.** Each turn of the loop handles one event: first an owner's
///   input ([`next_input`](Hooks::next_input)) if one is ready, then a call
///   that ended, then a hint (once [`Driver::subscribe_hints`]), then the
///   core's timer.
/// * **Fairness.** After an input, every call that has ended meanwhile and
///   the core's timer, if due, are handled before the next input is taken:
///   an answer or a due reconcile waits behind at most one input, however
///   many are ready (an owner that hands its requests over in batches bounds
///   what waits by the batch).
/// * **Steps.** After every event the loop *steps*:
///   [`observe`](Hooks::observe), then every decision to
///   [`decided`](Hooks::decided) in the order made, then
///   [`decided_all`](Hooks::decided_all), then every call the core asks for
///   through [`gate`](Hooks::gate).
/// * **The tap.** Every decision reaches [`decided`](Hooks::decided)
///   exactly once, in order, none dropped.
/// * **The gate.** No call is made before its gate says [`Gate::Go`] or a
///   release names its ticket; [`calling`](Hooks::calling) is told of each
///   call just before it is made.
/// * **Deadlines.** A call still running at its action's deadline is dropped
///   ([`CallEnded::answer`] is `None`); the core's timer, which includes
///   every call's deadline, then treats it as lost, and the next inventory
///   settles what it did.
pub trait Hooks: Send {
    /// The owner's own inputs.
    type Input: Send;
    /// Why the owner stops the loop.
    type Error;

    /// The owner's next input; `None` when there will be none (the loop then
    /// drains until now: see [`Flow::Drain`]). Must be cancel-safe: the loop
    /// drops it when a call ends or the timer fires first.
    fn next_input(&mut self) -> impl Future<Output = Option<Self::Input>> + Send;

    /// Handles one input, feeding the core as it needs.
    fn on_input(&mut self, input: Self::Input, turn: Turn<'_>) -> Result<Flow, Self::Error>;

    /// The core's counts are about to be read with the step's decisions:
    /// counts read here include every decision [`decided`](Hooks::decided)
    /// is told next.
    fn observe(&mut self, _core: &Core) {}

    /// The tap: one decision, at the time of the step that delivers it.
    fn decided(&mut self, decision: Decision, now: SystemTime);

    /// Every decision of this step was told; its calls come next.
    fn decided_all(&mut self, _now: SystemTime) {}

    /// The gate in front of one call; by default every call goes at once.
    fn gate(&mut self, _action: &Action) -> Gate {
        Gate::Go
    }

    /// `action` is about to be made, at `now`.
    fn calling(&mut self, _action: &Action, _now: SystemTime) {}

    /// A call ended, before its answer reaches the core.
    fn ended(&mut self, _call: &CallEnded) {}

    /// The loop has stepped and is about to wait for its next event: what it
    /// waits on. Told once per turn; an owner that has nothing of its own
    /// pending can say from this that it is quiescent until `wake`.
    fn waiting(&mut self, _waiting: &Waiting) {}
}

/// What the loop waits on as it goes to sleep ([`Hooks::waiting`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Waiting {
    /// The clock's time.
    pub now: SystemTime,
    /// Calls made and not yet ended.
    pub in_flight: usize,
    /// Calls the gate holds.
    pub held: usize,
    /// When the loop wakes by itself (the core's timer, or the end of a
    /// drain); `None` when nothing but an input or a call can wake it.
    pub wake: Option<SystemTime>,
    /// Whether it is draining.
    pub draining: bool,
}

type CallFuture = Pin<Box<dyn Future<Output = CallEnded> + Send>>;

/// A [`Core`], the pools' providers and a clock: the loop ([`Driver::run`])
/// and the pieces it is made of, for an owner that must step before the loop
/// starts (the service commits what a restart decided first).
pub struct Driver {
    core: Core,
    providers: Vec<Arc<dyn Provider>>,
    clock: Arc<dyn Clock>,
    calls: FuturesUnordered<CallFuture>,
    held: std::collections::VecDeque<(u64, Action)>,
    draining: bool,
    /// The hints of every pool subscribed to ([`Driver::subscribe_hints`]).
    hints: futures::stream::SelectAll<HintsOf>,
}

/// One provider's hints, each with the pools that provider serves.
type HintsOf = Pin<Box<dyn futures::Stream<Item = (Arc<[PoolId]>, Hint)> + Send>>;

impl std::fmt::Debug for Driver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Driver")
            .field("core", &self.core)
            .field("in_flight", &self.calls.len())
            .field("held", &self.held.len())
            .field("draining", &self.draining)
            .finish_non_exhaustive()
    }
}

impl Driver {
    /// A driver over `pools`, its core made at the clock's time.
    pub fn new(pools: &Pools, clock: Arc<dyn Clock>) -> Driver {
        Driver::with_core(pools.core(clock.now()), pools, clock)
    }

    /// A driver of `core` (made from `pools`, then configured) over `pools`'
    /// providers.
    pub fn with_core(core: Core, pools: &Pools, clock: Arc<dyn Clock>) -> Driver {
        Driver {
            core,
            providers: pools.providers().to_vec(),
            clock,
            calls: FuturesUnordered::new(),
            held: std::collections::VecDeque::new(),
            draining: false,
            hints: futures::stream::SelectAll::new(),
        }
    }

    /// Subscribes to the hints (P9) of every pool whose provider gives them:
    /// from then on each hint reaches the core ([`Core::handle_hint`], B12)
    /// as an event of its own, after the calls that ended and before the
    /// timer, and what it asks for goes out in that step. A provider without
    /// hints changes nothing; while draining, hints are not read.
    /// One subscription per provider object, however many pools it serves
    /// ([`Core::handle_shared_hint`]).
    pub fn subscribe_hints(&mut self) {
        for (pools, stream) in crate::inline::subscribe(&self.providers) {
            let pools: Arc<[PoolId]> = Arc::from(pools);
            self.hints
                .push(Box::pin(stream.map(move |hint| (Arc::clone(&pools), hint))));
        }
    }

    /// How many hint streams the loop reads: one per provider object with
    /// hints.
    pub fn hinted_pools(&self) -> usize {
        self.hints.len()
    }

    /// The core, to feed it before the loop starts.
    pub fn core_mut(&mut self) -> &mut Core {
        &mut self.core
    }

    /// Calls made and not yet ended.
    pub fn in_flight(&self) -> usize {
        self.calls.len()
    }

    /// Calls held by the gate.
    pub fn held(&self) -> usize {
        self.held.len()
    }

    /// One step: the decisions to the tap, then the calls through the gate
    /// (see [`Hooks`]). While draining, the calls asked for are dropped.
    pub fn step<H: Hooks>(&mut self, hooks: &mut H) {
        let now = self.clock.now();
        hooks.observe(&self.core);
        while let Some(decision) = self.core.poll_decision() {
            hooks.decided(decision, now);
        }
        hooks.decided_all(now);
        while let Some(action) = self.core.poll_action() {
            if self.draining {
                // Not made while stopping: its effect is decided again at
                // the next start.
                continue;
            }
            match hooks.gate(&action) {
                Gate::Go => self.perform(action, hooks),
                Gate::Hold(ticket) => self.held.push_back((ticket, action)),
            }
        }
    }

    /// Makes every held call whose ticket is at most `through`, in the order
    /// held; while draining they are dropped instead.
    pub fn release<H: Hooks>(&mut self, through: u64, hooks: &mut H) {
        while self
            .held
            .front()
            .is_some_and(|(ticket, _)| *ticket <= through)
        {
            if let Some((_, action)) = self.held.pop_front()
                && !self.draining
            {
                self.perform(action, hooks);
            }
        }
    }

    /// Runs the loop until the owner's inputs end or it asks to drain, and
    /// the drain is over; or until [`Hooks::on_input`] fails.
    pub async fn run<H: Hooks>(&mut self, hooks: &mut H) -> Result<(), H::Error> {
        let mut drain_until: Option<SystemTime> = None;
        loop {
            self.step(hooks);
            if let Some(until) = drain_until
                && (self.calls.is_empty() || self.clock.now() >= until)
            {
                // Calls still running are dropped: their effect is settled
                // by the next start's inventories.
                return Ok(());
            }
            let wake = match drain_until {
                Some(until) => Some(until),
                None => self.core.poll_timeout(),
            };
            hooks.waiting(&Waiting {
                now: self.clock.now(),
                in_flight: self.calls.len(),
                held: self.held.len(),
                wake,
                draining: drain_until.is_some(),
            });
            let clock = Arc::clone(&self.clock);
            let sleep = async move {
                match wake {
                    Some(at) => clock.sleep_until(at).await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                biased;
                input = hooks.next_input() => {
                    let now = self.clock.now();
                    let flow = match input {
                        Some(input) => {
                            let turn = Turn {
                                core: &mut self.core,
                                now,
                                in_flight: self.calls.len(),
                            };
                            hooks.on_input(input, turn)?
                        }
                        None => Flow::Drain(now),
                    };
                    match flow {
                        Flow::Continue => {}
                        Flow::Release(through) => self.release(through, hooks),
                        Flow::Drain(until) => {
                            self.draining = true;
                            drain_until = Some(until);
                        }
                    }
                    if drain_until.is_none() {
                        self.catch_up(hooks);
                    }
                }
                Some(ended) = self.calls.next(), if !self.calls.is_empty() => {
                    self.on_ended(ended, hooks);
                }
                Some((pools, hint)) = self.hints.next(),
                    if !self.hints.is_empty() && drain_until.is_none() =>
                {
                    self.core.handle_shared_hint(&pools, &hint, self.clock.now());
                }
                () = sleep => {
                    if drain_until.is_none() {
                        self.core.handle_timeout(self.clock.now());
                    }
                }
            }
        }
    }

    /// After an input: every call that has ended and the timer, if due, each
    /// its own event with its own step, before the loop takes another input.
    fn catch_up<H: Hooks>(&mut self, hooks: &mut H) {
        while let Some(Some(ended)) = self.calls.next().now_or_never() {
            self.step(hooks);
            self.on_ended(ended, hooks);
        }
        let now = self.clock.now();
        if self.core.poll_timeout().is_some_and(|at| at <= now) {
            self.step(hooks);
            self.core.handle_timeout(now);
        }
    }

    fn on_ended<H: Hooks>(&mut self, ended: CallEnded, hooks: &mut H) {
        hooks.ended(&ended);
        // A call dropped at its deadline needs nothing more: the core's timer
        // includes every call's deadline, so the loop hands it that time.
        if let Some(answer) = ended.answer {
            self.core.handle_answer(ended.id, answer, self.clock.now());
        }
    }

    fn perform<H: Hooks>(&mut self, action: Action, hooks: &mut H) {
        hooks.calling(&action, self.clock.now());
        let provider = Arc::clone(&self.providers[action.pool.0]);
        let deadline = self.clock.sleep_until(action.deadline);
        let list = matches!(action.call, Call::List);
        let (id, pool) = (action.id, action.pool);
        self.calls.push(Box::pin(async move {
            // A call still running at its deadline is dropped: the core has
            // treated it as lost, and its effect, if any, happened by then.
            let answer = tokio::select! {
                answer = perform(&*provider, action.call) => Some(answer),
                () = deadline => None,
            };
            CallEnded {
                id,
                pool,
                list,
                answer,
            }
        }));
    }
}
