//! The clock abstraction of the billet fleet.
//!
//! Code that needs time takes an `Arc<dyn` [`Clock`]`>` instead of calling the
//! system directly. [`SystemClock`] is the operating system's wall clock;
//! [`SteadyClock`] is its time kept monotonic within a run, the clock
//! `billet serve` runs on (a step of the wall clock moves no deadline).
//! Harnesses use [`ManualClock`], whose modelled time moves only when told, so
//! a modelled hour of a simulated fleet takes no wall time.
//!
//! The `shuttle` feature is for this crate's C5 test only (the manual clock
//! under the shuttle concurrency checker); it changes nothing a caller sees.
#![deny(missing_docs)]
#![warn(unreachable_pub)]

use std::fmt::Debug;
use std::future::Future;
use std::pin::Pin;
use std::time::{Duration, SystemTime};

mod manual;
mod steady;
mod system;

/// The checked build of [`ManualClock`], for the C5 shuttle run only (feature
/// `shuttle`): not part of the API.
#[cfg(feature = "shuttle")]
#[doc(hidden)]
pub use manual::checked;
pub use manual::{ClockError, ManualClock};
pub use steady::{ANCHOR_EVERY, SLEW, STEP_AT, SteadyClock, WallOffset};
pub use system::SystemClock;

/// The future a [`Clock`] answers for a sleep: boxed, `Send` and `'static`, so
/// it can be held across awaits and moved into spawned tasks.
pub type Sleep = Pin<Box<dyn Future<Output = ()> + Send + 'static>>;

/// A source of time, and of sleeps measured against it.
///
/// Object-safe and `Send + Sync`: hold it as `Arc<dyn Clock>`.
///
/// # Guarantees
///
/// * `now()` never decreases for a [`ManualClock`]; a [`SystemClock`] answers
///   the operating system's wall clock and inherits its behaviour.
/// * A sleep completes once the clock's time has reached its deadline, and not
///   before. A deadline already reached completes at its first poll.
pub trait Clock: Send + Sync + Debug {
    /// The current time by this clock.
    fn now(&self) -> SystemTime;

    /// A future that completes once this clock's time reaches `deadline`.
    fn sleep_until(&self, deadline: SystemTime) -> Sleep;

    /// A future that completes once `d` has passed on this clock, measured from
    /// `now()` at the call. A deadline past the end of representable time never
    /// completes.
    fn sleep(&self, d: Duration) -> Sleep {
        match self.now().checked_add(d) {
            Some(deadline) => self.sleep_until(deadline),
            None => Box::pin(std::future::pending()),
        }
    }

    /// Where the operating system's wall clock stands against this clock's
    /// time, for a clock that keeps its own ([`SteadyClock`]); `None` for a
    /// clock that is the wall clock or models time.
    fn wall_offset(&self) -> Option<WallOffset> {
        None
    }
}
