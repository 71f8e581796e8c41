//! [`ManualClock`]: modelled time that moves only when told.

use std::collections::BTreeMap;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
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

/// What every handle to one clock shares: the lock over its sleepers, and
/// its time mirrored outside the lock, so that reading the time (the most
/// frequent use of a clock, many times a step) takes no lock.
struct Shared {
    inner: Mutex<Inner>,
    /// `inner.now`, as nanoseconds since `start`, stored by every move while
    /// it holds the lock; [`UNMIRRORED`] once the time is too far from
    /// `start` for a `u64` of nanoseconds (584 years), when a read takes
    /// the lock instead.
    now: AtomicU64,
    start: SystemTime,
}

/// The mirror's value for a time it cannot hold.
const UNMIRRORED: u64 = u64::MAX;

impl Shared {
    fn new(inner: Mutex<Inner>, start: SystemTime) -> Arc<Shared> {
        Arc::new(Shared {
            inner,
            now: AtomicU64::new(0),
            start,
        })
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock()
    }

    /// The clock's time, without the lock when the mirror holds it.
    fn now(&self) -> SystemTime {
        match self.now.load(Ordering::Acquire) {
            UNMIRRORED => self.lock().now,
            nanos => self.start + Duration::from_nanos(nanos),
        }
    }

    /// Mirrors `to`, the time a move just set under the lock.
    fn mirror(&self, to: SystemTime) {
        let nanos = to
            .duration_since(self.start)
            .ok()
            .and_then(|since| u64::try_from(since.as_nanos()).ok())
            .filter(|&nanos| nanos != UNMIRRORED)
            .unwrap_or(UNMIRRORED);
        self.now.store(nanos, Ordering::Release);
    }
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
    shared: Arc<Shared>,
}

impl ManualClock {
    /// A clock whose modelled time starts at `start`.
    pub fn new(start: SystemTime) -> Self {
        let inner = Mutex::new(Inner {
            now: start,
            next_seq: 0,
            sleepers: BTreeMap::new(),
            #[cfg(feature = "shuttle")]
            fault: None,
        });
        ManualClock {
            shared: Shared::new(inner, start),
        }
    }

    /// Moves time forward by `d` and wakes every sleeper it reaches.
    ///
    /// Refused with [`ClockError::Overflow`] (time unchanged) if the new time
    /// cannot be represented.
    pub fn advance(&self, d: Duration) -> Result<(), ClockError> {
        let mut inner = self.shared.lock();
        let now = inner.now;
        let to = now
            .checked_add(d)
            .ok_or(ClockError::Overflow { now, by: d })?;
        let woken = self.move_to(&mut inner, to);
        release_and_wake(inner, woken);
        Ok(())
    }

    /// Moves time to `to` and wakes every sleeper it reaches.
    ///
    /// Refused with [`ClockError::Backwards`] (time unchanged) if `to` is
    /// earlier than now. Moving to the current time is allowed and changes
    /// nothing.
    pub fn advance_to(&self, to: SystemTime) -> Result<(), ClockError> {
        let mut inner = self.shared.lock();
        if to < inner.now {
            return Err(ClockError::Backwards {
                now: inner.now,
                requested: to,
            });
        }
        let woken = self.move_to(&mut inner, to);
        release_and_wake(inner, woken);
        Ok(())
    }

    /// Moves time to the earliest pending deadline, wakes the sleepers due
    /// then, and answers that deadline; answers `None` and stays put when
    /// nothing sleeps.
    pub fn advance_to_next_deadline(&self) -> Option<SystemTime> {
        let mut inner = self.shared.lock();
        let next = inner.sleepers.keys().next()?.deadline;
        let to = next.max(inner.now);
        let woken = self.move_to(&mut inner, to);
        release_and_wake(inner, woken);
        Some(next)
    }

    /// The earliest deadline of any pending sleeper.
    pub fn next_deadline(&self) -> Option<SystemTime> {
        self.shared
            .lock()
            .sleepers
            .keys()
            .next()
            .map(|k| k.deadline)
    }

    /// How many sleeps are pending: created, not yet reached, not dropped.
    pub fn pending_sleepers(&self) -> usize {
        self.shared.lock().sleepers.len()
    }

    /// Sets the time and takes out every sleeper now due, in wake order.
    /// The caller wakes them after releasing the lock.
    fn move_to(&self, inner: &mut Inner, to: SystemTime) -> Vec<Waker> {
        inner.now = to;
        self.shared.mirror(to);
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
        let inner = self.shared.lock();
        f.debug_struct("ManualClock")
            .field("now", &inner.now)
            .field("pending_sleepers", &inner.sleepers.len())
            .finish()
    }
}

impl Clock for ManualClock {
    fn now(&self) -> SystemTime {
        self.shared.now()
    }

    fn sleep_until(&self, deadline: SystemTime) -> Sleep {
        let mut inner = self.shared.lock();
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
            clock: Arc::clone(&self.shared),
            key,
            registered,
        })
    }
}

/// One sleep on a [`ManualClock`].
struct ManualSleep {
    clock: Arc<Shared>,
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
        let mut inner = checked::between_check_and_register(&this.clock.inner, inner);
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

#[cfg(test)]
mod tests {
    use super::*;

    fn mirrored(clock: &ManualClock) -> u64 {
        clock.shared.now.load(Ordering::Acquire)
    }

    // C3: the time read without the lock is the time every move set: the
    // mirror holds nanoseconds since the start, and a time too far from the
    // start for it (584 years) is read under the lock, the same time.
    #[test]
    fn c3_the_time_read_without_the_lock_is_the_time_moved_to() {
        let start = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000);
        let clock = ManualClock::new(start);
        assert_eq!(mirrored(&clock), 0);
        clock.advance(Duration::from_nanos(1_500)).unwrap();
        assert_eq!(mirrored(&clock), 1_500);
        assert_eq!(clock.now(), start + Duration::from_nanos(1_500));
        let far = start + Duration::from_nanos(u64::MAX - 1);
        clock.advance_to(far).unwrap();
        assert_eq!(mirrored(&clock), u64::MAX - 1, "the last time it holds");
        assert_eq!(clock.now(), far);
        let farther = far + Duration::from_nanos(1);
        clock.advance_to(farther).unwrap();
        assert_eq!(mirrored(&clock), UNMIRRORED);
        assert_eq!(clock.now(), farther);
        let beyond = farther + Duration::from_secs(3_600);
        clock.advance(Duration::from_secs(3_600)).unwrap();
        assert_eq!(clock.now(), beyond);
    }
}
