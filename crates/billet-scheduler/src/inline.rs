//! [`Inline`]: a driver that makes the core's calls one at a time, in the
//! order asked for, for callers that step modelled time themselves.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll, Wake, Waker};
use std::time::SystemTime;

use billet_clock::Clock;
use billet_provider::{Error, Hint, HintStream, Instance, Provider};

use crate::core::Core;
use crate::job::{Job, JobId};
use crate::pools::Pools;
use crate::protocol::{Answer, Call, Decision};
use crate::routing::{PoolId, Refusal};

/// One hint stream for each provider object among `providers` (one per pool,
/// in pool order) that gives hints (P9), with the pools it serves, in the
/// order each provider first serves a pool. Pools given one shared provider
/// read one stream: the same hints read once, not once per pool (issue 49).
pub(crate) fn subscribe(providers: &[Arc<dyn Provider>]) -> Vec<(Box<[PoolId]>, HintStream)> {
    let mut served: Vec<(&Arc<dyn Provider>, Vec<PoolId>)> = Vec::new();
    for (p, provider) in providers.iter().enumerate() {
        match served
            .iter_mut()
            .find(|(seen, _)| Arc::ptr_eq(seen, provider))
        {
            Some((_, pools)) => pools.push(PoolId(p)),
            None => served.push((provider, vec![PoolId(p)])),
        }
    }
    served
        .into_iter()
        .filter_map(|(provider, pools)| {
            let hints = provider.hints()?;
            Some((pools.into_boxed_slice(), hints.subscribe()))
        })
        .collect()
}

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
/// (the simulated backend), not for a service (use [`Driver`](crate::Driver)).
///
/// Lists of several pools that one provider object serves, asked for one
/// after another with no call between them (a reconciliation lists every
/// pool at once, B6), are made as one call to that provider, its answer
/// lent to each ([`Core::handle_listed`]): the pools then read the same
/// inventory, as they would from calls made back to back.
///
/// With [`with_hints`](Inline::with_hints), after each input and each tick
/// it reads every hint ready (B12), each handed to the core with the
/// clock's time and its calls made, until none is ready: a hint whose
/// backend tells it at a modelled instant is read by the first input or
/// tick at or after that instant.
pub struct Inline {
    core: Core,
    providers: Vec<Arc<dyn Provider>>,
    clock: Arc<dyn Clock>,
    hints: Vec<Subscription>,
    /// Where [`Inline::next_hint`] looks first.
    turn: usize,
}

/// A list's answer, with the index in `providers` of the provider object
/// that gave it.
type Listed = (usize, Result<Vec<Instance>, Error>);

/// One pool's hints, and whether they are worth a poll: set by the waker the
/// stream was last polled with, and at the start, so that a stream is polled
/// only once it has said it may have more.
struct Subscription {
    /// The pools its provider serves.
    pools: Box<[PoolId]>,
    stream: HintStream,
    woken: Arc<Woken>,
    waker: Waker,
}

/// A waker that only marks its subscription for the next poll.
struct Woken(AtomicBool);

impl Wake for Woken {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.0.store(true, Ordering::Release);
    }
}

impl std::fmt::Debug for Inline {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Inline")
            .field("core", &self.core)
            .field("hint_streams", &self.hints.len())
            .finish_non_exhaustive()
    }
}

impl Inline {
    /// A scheduler over `pools` at the clock's time. Its first inventories
    /// (B8) are read by the first input or [`Inline::start`].
    pub fn new(pools: &Pools, clock: Arc<dyn Clock>) -> Inline {
        Inline {
            core: pools.core(clock.now()),
            providers: pools.providers().to_vec(),
            clock,
            hints: Vec::new(),
            turn: 0,
        }
    }

    /// The same driver, reading the hints (P9) of every pool whose provider
    /// gives them (B12): one subscription per provider object, however many
    /// pools it serves, each hint handed to the core with those pools
    /// ([`Core::handle_shared_hint`]). A provider without hints changes
    /// nothing.
    #[must_use]
    pub fn with_hints(mut self) -> Inline {
        for (pools, stream) in subscribe(&self.providers) {
            let woken = Arc::new(Woken(AtomicBool::new(true)));
            self.hints.push(Subscription {
                pools,
                stream,
                waker: Waker::from(Arc::clone(&woken)),
                woken,
            });
        }
        self
    }

    /// How many hint streams it reads: one per provider object with hints.
    pub fn hint_streams(&self) -> usize {
        self.hints.len()
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
        loop {
            // The last call made, when it was a list: its answer is lent to
            // the next call too when that is a list of a pool the same
            // provider object serves (nothing was asked of it between).
            let mut listed: Option<Listed> = None;
            while let Some(action) = self.core.poll_action() {
                let provider = &self.providers[action.pool.0];
                if matches!(action.call, Call::List) {
                    let result = match listed.take() {
                        Some((made_on, result))
                            if Arc::ptr_eq(&self.providers[made_on], provider) =>
                        {
                            result
                        }
                        _ => provider.list().await,
                    };
                    let now = self.clock.now();
                    self.core.handle_listed(action.id, result.as_deref(), now);
                    listed = Some((action.pool.0, result));
                    continue;
                }
                listed = None;
                let answer = perform(&**provider, action.call).await;
                self.core.handle_answer(action.id, answer, self.clock.now());
            }
            // Every hint ready now, each with its calls made before the
            // next: one from each pool woken in turn, until none has more.
            match self.next_hint() {
                Some((from, hint)) => {
                    let pools = &self.hints[from].pools;
                    self.core.handle_shared_hint(pools, &hint, self.clock.now());
                }
                None => return,
            }
        }
    }

    /// The next hint ready, with the subscription it came from, from the
    /// first stream after the last one read that was woken (round robin, so a pool with many hints delays
    /// no other's); `None` when no woken stream has one now.
    fn next_hint(&mut self) -> Option<(usize, Hint)> {
        let n = self.hints.len();
        for k in 0..n {
            let i = (self.turn + k) % n;
            let sub = &mut self.hints[i];
            if !sub.woken.0.swap(false, Ordering::AcqRel) {
                continue;
            }
            let mut cx = Context::from_waker(&sub.waker);
            match sub.stream.as_mut().poll_next(&mut cx) {
                Poll::Ready(Some(hint)) => {
                    // It may hold more: read it again in its turn.
                    sub.woken.0.store(true, Ordering::Release);
                    self.turn = i + 1;
                    return Some((i, hint));
                }
                // An ended stream is never woken again.
                Poll::Ready(None) | Poll::Pending => {}
            }
        }
        None
    }
}
