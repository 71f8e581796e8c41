//! The checked build of [`ManualClock`] (feature `shuttle`, the C5 run only).
//!
//! A clock made by [`ManualClock::checked`] runs the same code as any other
//! `ManualClock`, but its lock is shuttle's mutex, so the shuttle checker
//! schedules every acquisition and explores the interleavings of moves, sleeps,
//! drops and wakes across shuttle threads. It may carry one injected [`Fault`]
//! so a test can show that the checker finds a broken clock. A clock made by
//! [`ManualClock::new`] is unchanged by the feature: it keeps parking_lot's
//! mutex and has no fault, so enabling the feature (`--all-features`) breaks
//! no other test.
//!
//! Not part of the crate's API: the feature exists for the
//! `crates/billet-clock/tests/c5_shuttle.rs` run and nothing else enables it.

use std::collections::BTreeMap;
use std::ops::{Deref, DerefMut};
use std::sync::PoisonError;
use std::task::Waker;
use std::time::SystemTime;

use super::{Inner, ManualClock, Shared};

/// A deliberately broken clock: the one fault a checked clock runs with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Fault {
    /// A lost wake-up between registering and parking: a sleep's poll checks
    /// its deadline, releases the clock's lock and takes it again before it
    /// stores its waker. A move in between takes the sleeper out while it has
    /// no waker to call; the waker stored afterwards is never called, and the
    /// sleeper waits forever.
    LostWakeup,
    /// A wake under the lock: a move calls the wakers of the sleepers it
    /// reached while it still holds the clock's lock, so a waker that uses the
    /// clock inline tries to take a lock its own thread holds.
    WakeUnderLock,
}

impl ManualClock {
    /// A clock for a shuttle test: modelled time starting at `start`, behind
    /// shuttle's mutex, running with `fault` injected (`None`: the real clock).
    /// Use it only inside a shuttle execution (`shuttle::check_random` and
    /// friends): shuttle's primitives panic anywhere else.
    #[doc(hidden)]
    pub fn checked(start: SystemTime, fault: Option<Fault>) -> Self {
        let inner = Mutex::Checked(shuttle::sync::Mutex::new(Inner {
            now: start,
            next_seq: 0,
            sleepers: BTreeMap::new(),
            fault,
        }));
        ManualClock {
            shared: Shared::new(inner, start),
        }
    }
}

/// The clock's lock in a build with the feature: parking_lot's mutex for a
/// clock made by [`ManualClock::new`], shuttle's for [`ManualClock::checked`].
pub(crate) enum Mutex<T> {
    Plain(parking_lot::Mutex<T>),
    Checked(shuttle::sync::Mutex<T>),
}

/// A held [`Mutex`].
pub(crate) enum MutexGuard<'a, T> {
    Plain(parking_lot::MutexGuard<'a, T>),
    Checked(shuttle::sync::MutexGuard<'a, T>),
}

impl<T> Mutex<T> {
    pub(crate) fn new(value: T) -> Self {
        Mutex::Plain(parking_lot::Mutex::new(value))
    }

    pub(crate) fn lock(&self) -> MutexGuard<'_, T> {
        match self {
            Mutex::Plain(mutex) => MutexGuard::Plain(mutex.lock()),
            // A poisoned lock means a shuttle thread panicked while holding it:
            // that execution has already failed, and the panic is what it reports.
            Mutex::Checked(mutex) => {
                MutexGuard::Checked(mutex.lock().unwrap_or_else(PoisonError::into_inner))
            }
        }
    }
}

impl<T> Deref for MutexGuard<'_, T> {
    type Target = T;

    fn deref(&self) -> &T {
        match self {
            MutexGuard::Plain(guard) => guard,
            MutexGuard::Checked(guard) => guard,
        }
    }
}

impl<T> DerefMut for MutexGuard<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        match self {
            MutexGuard::Plain(guard) => guard,
            MutexGuard::Checked(guard) => guard,
        }
    }
}

/// [`Fault::LostWakeup`]: called by a sleep's poll after it found its deadline
/// not reached and before it stores its waker; releases the lock and takes it
/// again when that fault is injected.
pub(super) fn between_check_and_register<'a>(
    clock: &'a Mutex<Inner>,
    inner: MutexGuard<'a, Inner>,
) -> MutexGuard<'a, Inner> {
    if inner.fault == Some(Fault::LostWakeup) {
        drop(inner);
        clock.lock()
    } else {
        inner
    }
}

/// [`Fault::WakeUnderLock`]: called by a move with the lock still held and the
/// wakers it is about to call; calls them now, under the lock, when that fault
/// is injected (and answers none left to call).
pub(super) fn before_release(inner: &Inner, woken: Vec<Waker>) -> Vec<Waker> {
    if inner.fault == Some(Fault::WakeUnderLock) {
        for waker in woken {
            waker.wake();
        }
        Vec::new()
    } else {
        woken
    }
}
