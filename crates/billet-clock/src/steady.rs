//! [`SteadyClock`]: the wall clock's time, kept monotonic within a run (C6).
//!
//! A service measures deadlines (a job's timeout, the next reconcile, how long
//! to keep an ended job) against its clock's `now()`. Against the operating
//! system's wall clock a step forward (an NTP correction, an operator's
//! `date -s`) fails every running job as timed out at once, and a step back
//! stalls every deadline for as long as the step. This clock follows the
//! monotonic clock instead, so a step moves no deadline; it meets the wall
//! clock again by running at most 1% fast or slow ([`SLEW`]), so the times it
//! tells (what a service shows and stores) converge on the wall clock's
//! without a jump. Each step of at least [`STEP_AT`] is counted and logged.

use std::fmt;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use parking_lot::Mutex;

use crate::{Clock, Sleep};

/// How much faster or slower than the monotonic clock a [`SteadyClock`] runs
/// while it closes a gap to the wall clock: one part in `SLEW` (1%), so a
/// deadline of an hour moves by at most 36 s, and a step of an hour is closed
/// in 100 hours.
pub const SLEW: u32 = 100;

/// How often, at most, a [`SteadyClock`] reads the wall clock again: its gap
/// to the wall clock (what it closes) is measured anew once this much
/// monotonic time has passed since the last reading, at the next `now()`.
pub const ANCHOR_EVERY: Duration = Duration::from_secs(1);

/// The smallest jump of the wall clock, against the monotonic clock between
/// two readings, that a [`SteadyClock`] counts and logs as a step.
pub const STEP_AT: Duration = Duration::from_secs(1);

/// Where the wall clock stands against a clock's time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WallOffset {
    /// The wall clock is ahead (later) by this much (zero when they agree).
    Ahead(Duration),
    /// The wall clock is behind (earlier) by this much.
    Behind(Duration),
}

impl WallOffset {
    /// The offset of `wall` from `time`.
    pub fn between(wall: SystemTime, time: SystemTime) -> WallOffset {
        match wall.duration_since(time) {
            Ok(ahead) => WallOffset::Ahead(ahead),
            Err(behind) => WallOffset::Behind(behind.duration()),
        }
    }

    /// How far apart, whichever way.
    pub fn magnitude(self) -> Duration {
        match self {
            WallOffset::Ahead(by) | WallOffset::Behind(by) => by,
        }
    }

    /// The offset in seconds, positive when the wall clock is ahead.
    pub fn seconds(self) -> f64 {
        match self {
            WallOffset::Ahead(by) => by.as_secs_f64(),
            WallOffset::Behind(by) => -by.as_secs_f64(),
        }
    }
}

impl fmt::Display for WallOffset {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            WallOffset::Ahead(by) => write!(f, "ahead by {by:?}"),
            WallOffset::Behind(by) => write!(f, "behind by {by:?}"),
        }
    }
}

/// The pure part of a [`SteadyClock`]: its time as a function of monotonic
/// time since its origin, piecewise linear between readings of the wall clock.
#[derive(Debug, Clone)]
struct Track {
    /// Monotonic time since the origin at the last reading.
    anchor_mono: Duration,
    /// This clock's time at the last reading.
    anchor_time: SystemTime,
    /// The wall clock at the last reading.
    anchor_wall: SystemTime,
    /// The wall clock against this clock's time at the last reading: the gap
    /// the slew closes until the next reading.
    gap: WallOffset,
    /// Steps of the wall clock seen so far.
    steps: u64,
}

impl Track {
    /// A track that starts at the wall clock's reading `wall`, at monotonic
    /// time `mono`.
    fn new(mono: Duration, wall: SystemTime) -> Track {
        Track {
            anchor_mono: mono,
            anchor_time: wall,
            anchor_wall: wall,
            gap: WallOffset::Ahead(Duration::ZERO),
            steps: 0,
        }
    }

    /// This clock's time at monotonic time `mono` (never earlier than the
    /// last reading's), closing the gap at most one part in [`SLEW`].
    fn at(&self, mono: Duration) -> SystemTime {
        let elapsed = mono.saturating_sub(self.anchor_mono);
        let slew = (elapsed / SLEW).min(self.gap.magnitude());
        let natural = self.anchor_time + elapsed;
        match self.gap {
            WallOffset::Ahead(_) => natural + slew,
            WallOffset::Behind(_) => natural - slew,
        }
    }

    /// Whether the wall clock is due to be read again at monotonic `mono`.
    fn due(&self, mono: Duration) -> bool {
        mono.saturating_sub(self.anchor_mono) >= ANCHOR_EVERY
    }

    /// Takes a reading of the wall clock, `wall` at monotonic `mono`: the gap
    /// is measured anew from this clock's time then. Answers the step the
    /// wall clock made since the last reading, when at least [`STEP_AT`].
    fn read(&mut self, mono: Duration, wall: SystemTime) -> Option<WallOffset> {
        let time = self.at(mono);
        let expected = self.anchor_wall + mono.saturating_sub(self.anchor_mono);
        let step = WallOffset::between(wall, expected);
        self.anchor_mono = mono;
        self.anchor_time = time;
        self.anchor_wall = wall;
        self.gap = WallOffset::between(wall, time);
        if step.magnitude() >= STEP_AT {
            self.steps += 1;
            Some(step)
        } else {
            None
        }
    }
}

/// Where the wall clock's time is read from.
type Wall = dyn Fn() -> SystemTime + Send + Sync;

struct Inner {
    wall: Box<Wall>,
    origin: Instant,
    track: Mutex<Track>,
}

impl Inner {
    fn now(&self) -> SystemTime {
        let mut track = self.track.lock();
        let mono = self.origin.elapsed();
        if track.due(mono)
            && let Some(step) = track.read(mono, (self.wall)())
        {
            tracing::warn!(
                    step = %step,
                    steps = track.steps,
                    "the wall clock stepped {step}; deadlines keep to the monotonic clock, and the times \
                     shown close the gap at 1 part in {SLEW}"
            );
        }
        track.at(mono)
    }
}

/// The wall clock's time, monotonic within a run: the clock `billet serve`
/// runs on (C6).
///
/// # Guarantees
///
/// * `now()` starts at the wall clock's time and never decreases, whatever
///   the wall clock does: it runs with the monotonic clock, at most one part
///   in [`SLEW`] faster or slower while it closes a gap to the wall clock, and
///   never past the wall clock's time as last read.
/// * A step of the wall clock moves no deadline by more than one part in
///   [`SLEW`] of the time that passes; each step of at least [`STEP_AT`] is
///   logged (a warning) and counted ([`steps`](SteadyClock::steps)), and
///   [`Clock::wall_offset`] says how far apart they are.
/// * A sleep completes once this clock's time has reached its deadline, and
///   not before (on tokio's timer, which must be running).
/// * Cloning gives another handle to the same clock.
#[derive(Clone)]
pub struct SteadyClock {
    inner: Arc<Inner>,
}

impl SteadyClock {
    /// A clock over the operating system's wall clock.
    pub fn new() -> SteadyClock {
        SteadyClock::over(SystemTime::now)
    }

    /// A clock over the wall clock `wall` (for tests: a wall clock that
    /// steps when told).
    pub fn over(wall: impl Fn() -> SystemTime + Send + Sync + 'static) -> SteadyClock {
        let origin = Instant::now();
        let start = wall();
        SteadyClock {
            inner: Arc::new(Inner {
                wall: Box::new(wall),
                origin,
                track: Mutex::new(Track::new(Duration::ZERO, start)),
            }),
        }
    }

    /// How many steps of the wall clock this clock has seen.
    pub fn steps(&self) -> u64 {
        self.inner.track.lock().steps
    }
}

impl Default for SteadyClock {
    fn default() -> Self {
        SteadyClock::new()
    }
}

impl fmt::Debug for SteadyClock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let track = self.inner.track.lock();
        f.debug_struct("SteadyClock")
            .field("gap", &track.gap)
            .field("steps", &track.steps)
            .finish()
    }
}

impl Clock for SteadyClock {
    fn now(&self) -> SystemTime {
        self.inner.now()
    }

    fn sleep_until(&self, deadline: SystemTime) -> Sleep {
        let inner = Arc::clone(&self.inner);
        Box::pin(async move {
            // The clock may run up to 1% slow while it closes a gap, so a
            // monotonic wait of the distance may fall short: wait again.
            while let Ok(wait) = deadline.duration_since(inner.now()) {
                if wait.is_zero() {
                    break;
                }
                tokio::time::sleep(wait).await;
            }
        })
    }

    fn wall_offset(&self) -> Option<WallOffset> {
        let time = self.inner.now();
        Some(WallOffset::between((self.inner.wall)(), time))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU64, Ordering};

    const EPOCH: SystemTime = SystemTime::UNIX_EPOCH;

    fn secs(s: u64) -> Duration {
        Duration::from_secs(s)
    }

    fn ms(m: u64) -> Duration {
        Duration::from_millis(m)
    }

    fn t(s: u64) -> SystemTime {
        EPOCH + secs(1_000_000) + secs(s)
    }

    // C6: with no step, the clock's time is the wall clock's, to the nanosecond.
    #[test]
    fn c6_without_a_step_the_time_is_the_wall_clocks() {
        let mut track = Track::new(secs(5), t(0));
        assert_eq!(track.at(secs(5)), t(0));
        assert_eq!(track.at(secs(5) + ms(300)), t(0) + ms(300));
        assert_eq!(track.read(secs(6), t(1)), None);
        assert_eq!(track.gap, WallOffset::Ahead(Duration::ZERO));
        assert_eq!(track.at(secs(8)), t(3));
        assert_eq!(track.steps, 0);
        // A monotonic time before the reading is held at the reading.
        assert_eq!(track.at(secs(1)), t(1));
    }

    // C6: a step forward is counted and closed at 1%, never jumped.
    #[test]
    fn c6_a_step_forward_is_closed_at_one_percent() {
        let mut track = Track::new(Duration::ZERO, t(0));
        // At 1 s the wall clock reads an hour and a second on.
        let step = track.read(secs(1), t(3601));
        assert_eq!(step, Some(WallOffset::Ahead(secs(3600))));
        assert_eq!(track.steps, 1);
        assert_eq!(track.gap, WallOffset::Ahead(secs(3600)));
        assert_eq!(track.at(secs(1)), t(1));
        // 100 s later the clock has gained 1 s, not an hour.
        assert_eq!(track.at(secs(101)), t(102));
        assert_eq!(
            track.at(secs(1) + ms(50)),
            t(1) + ms(50) + Duration::from_micros(500)
        );
        // The next reading, with the wall clock running on, is no new step.
        assert_eq!(track.read(secs(101), t(3701)), None);
        assert_eq!(track.steps, 1);
        assert_eq!(track.gap, WallOffset::Ahead(secs(3599)));
    }

    // C6: a step back is counted and closed by running 1% slow; the time
    // never decreases.
    #[test]
    fn c6_a_step_back_is_closed_by_running_slow() {
        let mut track = Track::new(Duration::ZERO, t(7200));
        let step = track.read(secs(2), t(3602));
        assert_eq!(step, Some(WallOffset::Behind(secs(3600))));
        assert_eq!(track.gap, WallOffset::Behind(secs(3600)));
        assert_eq!(track.at(secs(2)), t(7202));
        assert_eq!(track.at(secs(102)), t(7301));
        assert!(track.at(secs(102) + Duration::from_nanos(1)) >= track.at(secs(102)));
    }

    // C6: a gap smaller than 1% of the time that passes is closed exactly, never
    // overshot; a jump just under STEP_AT is not a step.
    #[test]
    fn c6_a_small_gap_is_closed_exactly() {
        let mut track = Track::new(Duration::ZERO, t(0));
        assert_eq!(track.read(secs(1), t(1) + ms(999)), None);
        assert_eq!(track.steps, 0);
        assert_eq!(track.gap, WallOffset::Ahead(ms(999)));
        assert_eq!(track.at(secs(51)), t(51) + ms(500));
        assert_eq!(track.at(secs(201)), t(201) + ms(999));
        assert_eq!(track.at(secs(301)), t(301) + ms(999));
        let mut back = Track::new(Duration::ZERO, t(10));
        assert_eq!(
            back.read(secs(1), t(11) - secs(1)),
            Some(WallOffset::Behind(secs(1)))
        );
        assert_eq!(back.at(secs(501)), t(10) + secs(500));
    }

    // C6: the wall clock is read again only once ANCHOR_EVERY has passed.
    #[test]
    fn c6_the_wall_clock_is_read_once_a_second() {
        let track = Track::new(secs(3), t(0));
        assert!(!track.due(secs(3)));
        assert!(!track.due(secs(4) - Duration::from_nanos(1)));
        assert!(track.due(secs(4)));
        assert!(!track.due(secs(1)));
    }

    #[test]
    fn c6_an_offset_says_which_way_and_how_far() {
        assert_eq!(WallOffset::between(t(5), t(2)), WallOffset::Ahead(secs(3)));
        assert_eq!(WallOffset::between(t(2), t(5)), WallOffset::Behind(secs(3)));
        assert_eq!(WallOffset::Behind(secs(3)).magnitude(), secs(3));
        assert_eq!(WallOffset::Ahead(secs(4)).magnitude(), secs(4));
        assert_eq!(WallOffset::Ahead(ms(1500)).seconds(), 1.5);
        assert_eq!(WallOffset::Behind(ms(2500)).seconds(), -2.5);
        assert_eq!(WallOffset::Ahead(secs(1)).to_string(), "ahead by 1s");
        assert_eq!(WallOffset::Behind(secs(2)).to_string(), "behind by 2s");
    }

    /// Awaits `sleep`, failing (not hanging) past 8 s of real time: a
    /// sleep of 1.1 s with room for a loaded machine, and a broken clock's
    /// test (a mutant's) fails in seconds.
    async fn within(sleep: Sleep) {
        tokio::time::timeout(secs(8), sleep)
            .await
            .expect("a sleep of a second or so never ended");
    }

    /// A wall clock that reads the real one plus a step the test sets.
    fn stepping() -> (SteadyClock, Arc<AtomicU64>, Arc<AtomicU64>) {
        let ahead = Arc::new(AtomicU64::new(0));
        let behind = Arc::new(AtomicU64::new(0));
        let (a, b) = (Arc::clone(&ahead), Arc::clone(&behind));
        let clock = SteadyClock::over(move || {
            SystemTime::now() + secs(a.load(Ordering::SeqCst)) - secs(b.load(Ordering::SeqCst))
        });
        (clock, ahead, behind)
    }

    // C6: over a wall clock that steps an hour forward, then two back, the
    // clock keeps to real time, counts both steps, says the offset, and its
    // sleeps end on time.
    #[tokio::test]
    async fn c6_steps_of_the_wall_clock_move_no_sleep() {
        let (clock, ahead, behind) = stepping();
        let started = Instant::now();
        let first = clock.now();
        let offset = clock.wall_offset().unwrap();
        assert!(offset.magnitude() < ms(500), "{offset}");
        ahead.store(3600, Ordering::SeqCst);
        within(clock.sleep(ms(1100))).await;
        let at = clock.now();
        assert!(at >= first + ms(1100), "{at:?}");
        assert!(at < first + secs(60), "the clock followed the step: {at:?}");
        assert_eq!(clock.steps(), 1);
        let offset = clock.wall_offset().unwrap();
        assert!(
            matches!(offset, WallOffset::Ahead(by) if by > secs(3500)),
            "{offset}"
        );
        behind.store(7200, Ordering::SeqCst);
        within(clock.sleep(ms(1100))).await;
        assert!(clock.now() >= at + ms(1100));
        assert_eq!(clock.steps(), 2);
        let offset = clock.wall_offset().unwrap();
        assert!(
            matches!(offset, WallOffset::Behind(by) if by > secs(3500)),
            "{offset}"
        );
        // Sleeps measured on real time: about 2.2 s, not an hour either way.
        let slept = started.elapsed();
        assert!(slept >= ms(2200) && slept < secs(60), "{slept:?}");
        // A deadline passed completes at once.
        within(clock.sleep_until(EPOCH)).await;
        assert!(format!("{clock:?}").contains("steps: 2"), "{clock:?}");
    }

    // C6: a sleep while the clock runs slow (closing a gap behind) still ends
    // only once the clock's time has reached the deadline.
    #[tokio::test]
    async fn c6_a_sleep_never_ends_early_while_the_clock_runs_slow() {
        let (clock, _, behind) = stepping();
        behind.store(100, Ordering::SeqCst);
        within(clock.sleep(ms(1001))).await;
        assert_eq!(clock.steps(), 1);
        let deadline = clock.now() + ms(300);
        within(clock.sleep_until(deadline)).await;
        assert!(clock.now() >= deadline);
    }
}
