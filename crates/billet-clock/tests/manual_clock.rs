//! Tests of the manual clock: moves, refusals, waking order, and scale.

use std::sync::Arc;
use std::sync::mpsc;
use std::task::{Context, Poll, Wake, Waker};
use std::time::{Duration, SystemTime};

use billet_clock::{Clock, ClockError, ManualClock};
use parking_lot::Mutex;
use proptest::prelude::*;

/// How long, in real time, a test waits for something a correct clock does
/// at once (a wake-up, a spawned task finishing) before failing. Generous so a
/// loaded machine never trips it; short so a broken clock fails in seconds
/// rather than hanging until an outer timeout.
const WATCHDOG: Duration = Duration::from_secs(5);

fn epoch() -> SystemTime {
    SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000)
}

/// A waker that records, in a shared log, the order in which it was woken.
struct Recorder {
    id: usize,
    log: Arc<Mutex<Vec<usize>>>,
}

impl Wake for Recorder {
    fn wake(self: Arc<Self>) {
        self.log.lock().push(self.id);
    }
}

fn recorder(id: usize, log: &Arc<Mutex<Vec<usize>>>) -> Waker {
    Waker::from(Arc::new(Recorder {
        id,
        log: Arc::clone(log),
    }))
}

// C3: the clock starts where it is told and moves only when told.
#[test]
fn c3_starts_where_told_and_moves_only_when_told() {
    let clock = ManualClock::new(epoch());
    assert_eq!(clock.now(), epoch());
    std::thread::sleep(Duration::from_millis(5));
    assert_eq!(clock.now(), epoch());
    clock.advance(Duration::from_secs(90)).unwrap();
    assert_eq!(clock.now(), epoch() + Duration::from_secs(90));
    let other_handle = clock.clone();
    other_handle
        .advance_to(epoch() + Duration::from_secs(100))
        .unwrap();
    assert_eq!(clock.now(), epoch() + Duration::from_secs(100));
}

// C3: moving backwards is refused and the time is unchanged.
#[test]
fn c3_moving_backwards_is_refused_and_time_unchanged() {
    let clock = ManualClock::new(epoch());
    clock.advance(Duration::from_secs(10)).unwrap();
    let before = clock.now();
    let err = clock.advance_to(epoch()).unwrap_err();
    assert!(matches!(err, ClockError::Backwards { .. }));
    assert!(err.to_string().contains("backwards"));
    assert_eq!(clock.now(), before);
    // Moving to the current time is not backwards.
    clock.advance_to(before).unwrap();
    // Overflow is refused too, time unchanged.
    let err = clock.advance(Duration::MAX).unwrap_err();
    assert!(matches!(err, ClockError::Overflow { .. }));
    assert_eq!(clock.now(), before);
}

// C3: a sleeper wakes when its deadline is reached and not before; a deadline
// already reached is ready at once.
#[test]
fn c3_sleeper_wakes_exactly_at_its_deadline() {
    let clock = ManualClock::new(epoch());
    let mut sleep = tokio_test::task::spawn(clock.sleep(Duration::from_secs(60)));
    assert!(sleep.poll().is_pending());
    clock.advance(Duration::from_secs(59)).unwrap();
    assert!(!sleep.is_woken());
    assert!(sleep.poll().is_pending());
    clock.advance(Duration::from_secs(1)).unwrap();
    assert!(sleep.is_woken());
    assert!(sleep.poll().is_ready());
    assert_eq!(clock.pending_sleepers(), 0);

    let mut past = tokio_test::task::spawn(clock.sleep_until(epoch()));
    assert!(past.poll().is_ready());
}

// C3: a deadline already reached is never pending: a sleep until exactly now
// (or earlier) registers nothing and is ready at its first poll, while one a
// nanosecond later is pending from its creation until the clock reaches it.
#[test]
fn c3_sleep_until_exactly_now_is_reached_not_pending() {
    let clock = ManualClock::new(epoch());
    clock.advance(Duration::from_secs(5)).unwrap();
    let now = clock.now();

    let at_now = clock.sleep_until(now);
    let earlier = clock.sleep_until(epoch());
    assert_eq!(
        clock.pending_sleepers(),
        0,
        "a reached deadline is not pending"
    );
    assert_eq!(clock.next_deadline(), None);
    let mut at_now = tokio_test::task::spawn(at_now);
    assert!(at_now.poll().is_ready());
    let mut earlier = tokio_test::task::spawn(earlier);
    assert!(earlier.poll().is_ready());

    let later = now + Duration::from_nanos(1);
    let mut next = tokio_test::task::spawn(clock.sleep_until(later));
    assert_eq!(
        clock.pending_sleepers(),
        1,
        "registered before its first poll"
    );
    assert_eq!(clock.next_deadline(), Some(later));
    assert!(next.poll().is_pending());
    clock.advance(Duration::from_nanos(1)).unwrap();
    assert!(next.is_woken());
    assert_eq!(clock.pending_sleepers(), 0);
    assert!(next.poll().is_ready());
}

// C3: what `Debug` shows of a manual clock: its time and how many sleep.
#[test]
fn c3_debug_shows_the_time_and_the_pending_sleepers() {
    let clock = ManualClock::new(epoch());
    let _a = clock.sleep(Duration::from_secs(1));
    let _b = clock.sleep(Duration::from_secs(2));
    let shown = format!("{clock:?}");
    assert_eq!(
        shown,
        format!("ManualClock {{ now: {:?}, pending_sleepers: 2 }}", epoch())
    );
}

// C3: a sleeper polled again from another task wakes the latest task only.
#[test]
fn c3_repoll_from_another_task_replaces_the_waker() {
    let clock = ManualClock::new(epoch());
    let log = Arc::new(Mutex::new(Vec::new()));
    let mut sleep = clock.sleep(Duration::from_secs(5));
    let first = recorder(1, &log);
    let second = recorder(2, &log);
    assert!(
        sleep
            .as_mut()
            .poll(&mut Context::from_waker(&first))
            .is_pending()
    );
    assert!(
        sleep
            .as_mut()
            .poll(&mut Context::from_waker(&second))
            .is_pending()
    );
    clock.advance(Duration::from_secs(5)).unwrap();
    assert_eq!(*log.lock(), vec![2]);
}

// C3: a dropped sleeper leaves nothing behind.
#[test]
fn c3_dropped_sleeper_leaves_nothing_behind() {
    let clock = ManualClock::new(epoch());
    let a = clock.sleep(Duration::from_secs(5));
    let b = clock.sleep(Duration::from_secs(7));
    assert_eq!(clock.pending_sleepers(), 2);
    assert_eq!(
        clock.next_deadline(),
        Some(epoch() + Duration::from_secs(5))
    );
    drop(a);
    assert_eq!(clock.pending_sleepers(), 1);
    assert_eq!(
        clock.next_deadline(),
        Some(epoch() + Duration::from_secs(7))
    );
    drop(b);
    assert_eq!(clock.pending_sleepers(), 0);
    assert_eq!(clock.next_deadline(), None);
    assert_eq!(clock.advance_to_next_deadline(), None);
    assert_eq!(clock.now(), epoch());
}

// C3: ties wake in registration order; advance_to_next_deadline stops at the
// earliest deadline.
#[test]
fn c3_ties_wake_in_registration_order() {
    let clock = ManualClock::new(epoch());
    let log = Arc::new(Mutex::new(Vec::new()));
    let deadlines = [30, 10, 30, 10, 20];
    let mut sleeps: Vec<_> = deadlines
        .iter()
        .map(|s| clock.sleep(Duration::from_secs(*s)))
        .collect();
    for (id, sleep) in sleeps.iter_mut().enumerate() {
        let waker = recorder(id, &log);
        assert!(
            sleep
                .as_mut()
                .poll(&mut Context::from_waker(&waker))
                .is_pending()
        );
    }
    assert_eq!(
        clock.advance_to_next_deadline(),
        Some(epoch() + Duration::from_secs(10))
    );
    assert_eq!(*log.lock(), vec![1, 3]);
    clock.advance(Duration::from_secs(60)).unwrap();
    assert_eq!(*log.lock(), vec![1, 3, 4, 0, 2]);
}

// C3: wakers run after the clock's lock is released: a waker that uses the
// clock inline must not deadlock.
#[test]
fn c3_never_wakes_while_holding_its_lock() {
    struct UsesClock(ManualClock, mpsc::Sender<SystemTime>);
    impl Wake for UsesClock {
        fn wake(self: Arc<Self>) {
            let _ = self.1.send(self.0.now());
            let _ = self.0.pending_sleepers();
        }
    }
    let clock = ManualClock::new(epoch());
    let (tx, rx) = mpsc::channel();
    let mut sleep = clock.sleep(Duration::from_secs(1));
    let waker = Waker::from(Arc::new(UsesClock(clock.clone(), tx)));
    assert!(
        sleep
            .as_mut()
            .poll(&mut Context::from_waker(&waker))
            .is_pending()
    );
    let mover = clock.clone();
    std::thread::spawn(move || mover.advance(Duration::from_secs(1)));
    // The watchdog is real time: a clock that deadlocks, or that never wakes
    // the sleeper, fails here in seconds rather than hanging the run.
    let seen = rx
        .recv_timeout(WATCHDOG)
        .expect("the waker ran, without deadlocking on the clock, within the watchdog");
    assert_eq!(seen, epoch() + Duration::from_secs(1));
}

// C3, C4: 10,000 sleepers spread across a modelled hour all wake, on tokio's
// multi-thread runtime, each at or after its own deadline.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn c4_ten_thousand_sleepers_across_a_modelled_hour_all_wake() {
    let clock = ManualClock::new(epoch());
    let shared: Arc<dyn Clock> = Arc::new(clock.clone());
    let mut tasks = Vec::new();
    for i in 0..10_000u64 {
        let deadline = epoch() + Duration::from_millis((i + 1) * 360);
        let sleep = shared.sleep_until(deadline);
        let clock = Arc::clone(&shared);
        tasks.push(tokio::spawn(async move {
            sleep.await;
            assert!(clock.now() >= deadline);
        }));
    }
    assert_eq!(clock.pending_sleepers(), 10_000);
    clock.advance(Duration::from_secs(3600)).unwrap();
    // A real-time watchdog: if the move woke nobody, this fails in seconds
    // instead of awaiting forever.
    let all_woke = async {
        for task in tasks {
            task.await.unwrap();
        }
    };
    tokio::time::timeout(WATCHDOG, all_woke)
        .await
        .expect("every sleeper woke within the watchdog after the clock moved past its deadline");
    assert_eq!(clock.pending_sleepers(), 0);
    assert_eq!(clock.now(), epoch() + Duration::from_secs(3600));
}

#[derive(Debug, Clone)]
enum Move {
    Advance(u64),
    AdvanceTo(i64),
    NextDeadline,
}

fn moves() -> impl Strategy<Value = Vec<Move>> {
    prop::collection::vec(
        prop_oneof![
            (0u64..100).prop_map(Move::Advance),
            (-50i64..150).prop_map(Move::AdvanceTo),
            Just(Move::NextDeadline),
        ],
        0..40,
    )
}

proptest! {
    // C3: under any sequence of moves, now() never decreases, and after every
    // move exactly the sleepers whose deadline has been reached have been
    // woken, earliest first, ties in registration order.
    #[test]
    fn c3_time_never_decreases_and_sleepers_wake_exactly_in_order(
        deadlines in prop::collection::vec(0u64..200, 0..30),
        moves in moves(),
    ) {
        let clock = ManualClock::new(epoch());
        let log = Arc::new(Mutex::new(Vec::new()));
        let mut sleeps: Vec<_> = deadlines
            .iter()
            .map(|s| clock.sleep_until(epoch() + Duration::from_secs(*s)))
            .collect();
        let mut ready = vec![false; sleeps.len()];
        for (id, sleep) in sleeps.iter_mut().enumerate() {
            let waker = recorder(id, &log);
            ready[id] = sleep.as_mut().poll(&mut Context::from_waker(&waker)).is_ready();
        }
        let mut last = clock.now();
        for m in moves {
            match m {
                Move::Advance(s) => clock.advance(Duration::from_secs(s)).unwrap(),
                Move::AdvanceTo(s) => {
                    let to = if s < 0 {
                        epoch() - Duration::from_secs(s.unsigned_abs())
                    } else {
                        epoch() + Duration::from_secs(s.unsigned_abs())
                    };
                    let result = clock.advance_to(to);
                    prop_assert_eq!(result.is_err(), to < last);
                }
                Move::NextDeadline => {
                    let next = clock.next_deadline();
                    prop_assert_eq!(clock.advance_to_next_deadline(), next);
                }
            }
            let now = clock.now();
            prop_assert!(now >= last);
            last = now;
            // Exactly the due sleepers have been woken, in (deadline, creation) order.
            let mut expected: Vec<usize> = (0..deadlines.len())
                .filter(|i| !ready[*i] && epoch() + Duration::from_secs(deadlines[*i]) <= now)
                .collect();
            expected.sort_by_key(|i| (deadlines[*i], *i));
            prop_assert_eq!(&*log.lock(), &expected);
            let pending = deadlines.len() - expected.len() - ready.iter().filter(|r| **r).count();
            prop_assert_eq!(clock.pending_sleepers(), pending);
        }
        // Every woken sleeper is ready when polled; every other one is not.
        let woken = log.lock().clone();
        for (id, sleep) in sleeps.iter_mut().enumerate() {
            if ready[id] { continue; }
            let waker = recorder(usize::MAX, &Arc::new(Mutex::new(Vec::new())));
            let poll = sleep.as_mut().poll(&mut Context::from_waker(&waker));
            prop_assert_eq!(poll == Poll::Ready(()), woken.contains(&id));
        }
    }
}
