//! [`ManualClock`]: modelled time that moves only when told.

use std::collections::BTreeMap;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};
use std::time::{Duration, SystemTime};

#[cfg(not(feature = "shuttle"))]
use parking_lot::{Mutex, MutexGuard};

use crate::{Clock, Sleep};

#[cfg(feature = "shuttle")]
pub mod checked;
#[cfg(feature = "shuttle")]
use checked::{Mutex, MutexGuard};

/// Why a [`ManualClock`] refused to move. Its time is unchanged.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ClockError {
    /// The requested time is earlier than the clock's time: modelled time
    /// never moves backwards.
    #[error("refusing to move the manual clock backwards from {now:?} to {requested:?}")]
    Backwards {
        /// The clock's time when the move was asked for.
        now: SystemTime,
        /// The earlier time that was asked for.
        requested: SystemTime,
    },
    /// Moving by this duration would pass the end of representable time.
    #[error("moving the manual clock by {by:?} from {now:?} overflows SystemTime")]
    Overflow {
        /// The clock's time when the move was asked for.
        now: SystemTime,
        /// The duration that was asked for.
        by: Duration,
    },
}

/// Orders sleepers by deadline, then by registration: ties wake in the order
/// the sleeps were created, so a simulation replays the same way every time.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct Key {
    deadline: SystemTime,
    seq: u64,
}

struct Inner {
    now: SystemTime,
    next_seq: u64,
    /// Every pending sleeper, with the waker of its latest poll (none before
    /// its first poll).
    sleepers: BTreeMap<Key, Option<Waker>>,
    /// The fault injected into this clock, in a checked build only (C5).
    #[cfg(feature = "shuttle")]
    fault: Option<checked::Fault>,
}

/// A cloneable handle to one shared modelled time.
///
/// Time starts where [`ManualClock::new`] puts it and moves only through
/// [`advance`](ManualClock::advance), [`advance_to`](ManualClock::advance_to)
/// and [`advance_to_next_deadline`](ManualClock::advance_to_next_deadline).
///
/// # Guarantees
///
/// * Time never moves backwards: such a move is refused with
///   [`ClockError::Backwards`] and the time is unchanged.
/// * Every move wakes each sleeper whose deadline has been reached, earliest
///   deadline first, ties in the order the sleeps were created.
/// * Wakers are called after the clock's lock is released, so a woken task
///   (or a waker that runs code inline) may use the clock at once.
/// * A sleep is registered when it is created, so [`next_deadline`](ManualClock::next_deadline)
///   sees it before its first poll. Polling it again from another task
///   replaces its waker; dropping it unregisters it.
/// * It needs no runtime of its own and works on tokio's multi-thread runtime,
///   where tokio's paused time is not available.
#[derive(Clone)]
pub struct ManualClock {
    inner: Arc<Mutex<Inner>>,
}

impl ManualClock {
    /// A clock whose modelled time starts at `start`.
    pub fn new(start: SystemTime) -> Self {
        ManualClock {
            inner: Arc::new(Mutex::new(Inner {
                now: start,
                next_seq: 0,
                sleepers: BTreeMap::new(),
                #[cfg(feature = "shuttle")]
                fault: None,
            })),
        }
    }

    /// Moves time forward by `d` and wakes every sleeper it reaches.
    ///
    /// Refused with [`ClockError::Overflow`] (time unchanged) if the new time
    /// cannot be represented.
    pub fn advance(&self, d: Duration) -> Result<(), ClockError> {
        let mut inner = self.inner.lock();
        let now = inner.now;
        let to = now
            .checked_add(d)
            .ok_or(ClockError::Overflow { now, by: d })?;
        let woken = Self::move_to(&mut inner, to);
        release_and_wake(inner, woken);
        Ok(())
    }

    /// Moves time to `to` and wakes every sleeper it reaches.
    ///
    /// Refused with [`ClockError::Backwards`] (time unchanged) if `to` is
    /// earlier than now. Moving to the current time is allowed and changes
    /// nothing.
    pub fn advance_to(&self, to: SystemTime) -> Result<(), ClockError> {
        let mut inner = self.inner.lock();
        if to < inner.now {
            return Err(ClockError::Backwards {
                now: inner.now,
                requested: to,
            });
        }
        let woken = Self::move_to(&mut inner, to);
        release_and_wake(inner, woken);
        Ok(())
    }

    /// Moves time to the earliest pending deadline, wakes the sleepers due
    /// then, and answers that deadline; answers `None` and stays put when
    /// nothing sleeps.
    pub fn advance_to_next_deadline(&self) -> Option<SystemTime> {
        let mut inner = self.inner.lock();
        let next = inner.sleepers.keys().next()?.deadline;
        let to = next.max(inner.now);
        let woken = Self::move_to(&mut inner, to);
        release_and_wake(inner, woken);
        Some(next)
    }

    /// The earliest deadline of any pending sleeper.
    pub fn next_deadline(&self) -> Option<SystemTime> {
        self.inner.lock().sleepers.keys().next().map(|k| k.deadline)
    }

    /// How many sleeps are pending: created, not yet reached, not dropped.
    pub fn pending_sleepers(&self) -> usize {
        self.inner.lock().sleepers.len()
    }

    /// Sets the time and takes out every sleeper now due, in wake order.
    /// The caller wakes them after releasing the lock.
    fn move_to(inner: &mut Inner, to: SystemTime) -> Vec<Waker> {
        inner.now = to;
        // Taken one by one from the front: a move reaches few sleepers, and
        // one that reaches none allocates nothing.
        let mut woken = Vec::new();
        while let Some(entry) = inner.sleepers.first_entry() {
            if entry.key().deadline > to {
                break;
            }
            woken.extend(entry.remove());
        }
        woken
    }
}

/// Releases the clock's lock, then calls the wakers of the sleepers a move
/// reached, in wake order.
fn release_and_wake(inner: MutexGuard<'_, Inner>, woken: Vec<Waker>) {
    #[cfg(feature = "shuttle")]
    let woken = checked::before_release(&inner, woken);
    drop(inner);
    for waker in woken {
        waker.wake();
    }
}

impl fmt::Debug for ManualClock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let inner = self.inner.lock();
        f.debug_struct("ManualClock")
            .field("now", &inner.now)
            .field("pending_sleepers", &inner.sleepers.len())
            .finish()
    }
}

impl Clock for ManualClock {
    fn now(&self) -> SystemTime {
        self.inner.lock().now
    }

    fn sleep_until(&self, deadline: SystemTime) -> Sleep {
        let mut inner = self.inner.lock();
        let key = Key {
            deadline,
            seq: inner.next_seq,
        };
        inner.next_seq += 1;
        let registered = deadline > inner.now;
        if registered {
            inner.sleepers.insert(key, None);
        }
        drop(inner);
        Box::pin(ManualSleep {
            clock: Arc::clone(&self.inner),
            key,
            registered,
        })
    }
}

/// One sleep on a [`ManualClock`].
struct ManualSleep {
    clock: Arc<Mutex<Inner>>,
    key: Key,
    /// Whether an entry may still be in the clock's map (removed by a move
    /// that reached it, or by this sleep on completion or drop).
    registered: bool,
}

impl Future for ManualSleep {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let this = self.get_mut();
        let key = this.key;
        let mut inner = this.clock.lock();
        if inner.now >= key.deadline {
            if this.registered {
                inner.sleepers.remove(&key);
                this.registered = false;
            }
            return Poll::Ready(());
        }
        #[cfg(feature = "shuttle")]
        let mut inner = checked::between_check_and_register(&this.clock, inner);
        let slot = inner.sleepers.entry(key).or_insert(None);
        match slot {
            Some(waker) if waker.will_wake(cx.waker()) => {}
            _ => *slot = Some(cx.waker().clone()),
        }
        this.registered = true;
        Poll::Pending
    }
}

impl Drop for ManualSleep {
    fn drop(&mut self) {
        if self.registered {
            self.clock.lock().sleepers.remove(&self.key);
        }
    }
}
