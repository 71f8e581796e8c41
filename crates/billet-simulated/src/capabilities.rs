//! The simulated backend's optional capabilities (P9): an instance's output,
//! modelled from its command ([`run_for_writing`](crate::run_for_writing))
//! and made as it is read, never held; and hints, told at the modelled
//! instant an instance stops, and as instances appear and vanish.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use async_trait::async_trait;
use billet_clock::Clock;
use billet_provider::{
    Error, Hint, HintKind, HintStream, Hints, InstanceId, OUTPUT_CHUNK, Output, OutputStream,
};
use std::pin::Pin;
use std::task::{Context, Poll, Waker};

use billet_clock::Sleep;
use futures::Stream;
use parking_lot::Mutex;

use crate::host::{Host, Inbox, Record, parse_id};
use crate::provider::SimulatedProvider;

/// What every simulated instance writes, over and over: byte `n` of its
/// output is `PATTERN[n % PATTERN.len()]`, so any part of it is made at once
/// from its offset.
pub(crate) const PATTERN: &[u8] = b"billet-simulated output: one line, written again and again.\n";

/// How many bytes `record` has written by `now`: at an even pace over its run
/// time, all of them from its stop on.
fn written(record: &Record, now: SystemTime) -> u64 {
    let Some(stop) = record.stops_at else {
        // It never stops: its run time is longer than time can say.
        return 0;
    };
    if now >= stop {
        return record.writes;
    }
    let run = stop.duration_since(record.started_at).unwrap_or_default();
    let elapsed = now.duration_since(record.started_at).unwrap_or_default();
    // elapsed < run here, so this is below `writes`.
    (u128::from(record.writes) * elapsed.as_nanos() / run.as_nanos().max(1)) as u64
}

/// When `record` will have written more than `from` bytes (its stop time
/// when it writes no more), or `None` if never.
fn more_at(record: &Record, from: u64) -> Option<SystemTime> {
    let stop = record.stops_at?;
    if from >= record.writes {
        return Some(stop);
    }
    let run = stop.duration_since(record.started_at).unwrap_or_default();
    // The first elapsed time at which writes * elapsed / run > from.
    let nanos = (u128::from(from) + 1) * run.as_nanos();
    let nanos = nanos.div_ceil(u128::from(record.writes));
    let secs = u64::try_from(nanos / 1_000_000_000).unwrap_or(u64::MAX);
    let elapsed = Duration::new(secs, (nanos % 1_000_000_000) as u32);
    Some(
        record
            .started_at
            .checked_add(elapsed)
            .unwrap_or(stop)
            .min(stop),
    )
}

/// Bytes `from..to` of an instance's output.
pub(crate) fn output_bytes(from: u64, to: u64) -> Vec<u8> {
    let len = PATTERN.len() as u64;
    (from..to).map(|n| PATTERN[(n % len) as usize]).collect()
}

/// One read of an instance's output, as it goes.
struct Reading {
    host: Host,
    owner: Arc<str>,
    clock: Arc<dyn Clock>,
    key: u64,
    id: InstanceId,
    from: u64,
    done: bool,
}

/// What a reading does next.
enum Next {
    Bytes(Vec<u8>),
    Gone,
    End,
    Wait(Option<SystemTime>),
}

impl Reading {
    fn next(&self) -> Next {
        let now = self.clock.now();
        let store = self.host.lock();
        let Some(record) = store
            .shelf(&self.owner)
            .and_then(|shelf| shelf.get(self.key))
        else {
            return Next::Gone;
        };
        let written = written(record, now);
        if self.from < written {
            let to = written.min(self.from.saturating_add(OUTPUT_CHUNK as u64));
            return Next::Bytes(output_bytes(self.from, to));
        }
        if record.stops_at.is_some_and(|stop| now >= stop) {
            return Next::End;
        }
        Next::Wait(more_at(record, self.from))
    }
}

#[async_trait]
impl Output for SimulatedProvider {
    async fn read(&self, id: &InstanceId, from: u64) -> Result<OutputStream, Error> {
        let Some(key) = parse_id(id) else {
            return Err(Error::not_found(id.clone()));
        };
        match self.host().lock().owner_of(key) {
            None => return Err(Error::not_found(id.clone())),
            Some(owner) if **owner != *self.owner() => {
                return Err(Error::not_owned(id.clone(), owner.to_string()));
            }
            Some(_) => {}
        }
        let reading = Reading {
            host: self.host().clone(),
            owner: Arc::from(self.owner()),
            clock: self.clock(),
            key,
            id: id.clone(),
            from,
            done: false,
        };
        Ok(Box::pin(futures::stream::unfold(
            reading,
            |mut reading| async move {
                loop {
                    if reading.done {
                        return None;
                    }
                    match reading.next() {
                        Next::Bytes(bytes) => {
                            reading.from += bytes.len() as u64;
                            return Some((Ok(bytes), reading));
                        }
                        Next::Gone => {
                            reading.done = true;
                            let gone = Error::not_found(reading.id.clone());
                            return Some((Err(gone), reading));
                        }
                        Next::End => return None,
                        Next::Wait(Some(at)) => reading.clock.sleep_until(at).await,
                        Next::Wait(None) => std::future::pending::<()>().await,
                    }
                }
            },
        )))
    }
}

/// One subscriber's hints, as they go: what launches and destroys told its
/// inbox, and the stops it finds on the host after `seen`. A stream of its
/// own (no future made per wait): a poll that finds nothing leaves its waker
/// in the inbox and one sleep until the owner's next stop on the clock, kept
/// across polls while that stop stays the next.
struct Watching {
    host: Host,
    owner: Arc<str>,
    clock: Arc<dyn Clock>,
    inbox: Arc<Mutex<Inbox>>,
    /// Where the owner's shelf is on the host, once it has one.
    shelf: Option<usize>,
    /// Every stop at or before this has been told.
    seen: SystemTime,
    pending: std::collections::VecDeque<Hint>,
    /// The next stop after `seen`, as read when `seen` and the shelf's
    /// count of changes to its stops were the two kept beside it.
    next: Option<(SystemTime, u64, Option<SystemTime>)>,
    /// The sleep until the next stop, with its deadline and the waker it
    /// was last polled with: polled again only for another deadline or
    /// another waker (before its deadline a poll would change nothing).
    sleep: Option<(SystemTime, Sleep, Option<Waker>)>,
}

impl Watching {
    /// Queues the stops after `seen` up to `now`, moves `seen` to `now`, and
    /// answers the first stop after it (read again only when `seen` moved or
    /// the shelf's stops changed since it was last read).
    fn look(&mut self, now: SystemTime) -> Option<SystemTime> {
        let store = self.host.lock();
        let after = self.seen;
        self.seen = after.max(now);
        let shelf = match self.shelf {
            Some(index) => store.shelf_at(index),
            None => {
                let index = store.shelf_index(&self.owner)?;
                self.shelf = Some(index);
                store.shelf_at(index)
            }
        };
        let changed = shelf.stops_changed();
        if let Some((seen, count, next)) = self.next
            && seen == self.seen
            && count == changed
        {
            return next;
        }
        // One walk: the stops up to `now` are queued, the first after it is
        // the next.
        let mut next = None;
        for (at, record) in shelf.stopping_after(after) {
            if at > now {
                next = Some(at);
                break;
            }
            self.pending.push_back(Hint {
                kind: HintKind::Stopped,
                id: record.id.clone(),
                name: Arc::clone(&record.name),
            });
        }
        self.next = Some((self.seen, changed, next));
        next
    }
}

impl Stream for Watching {
    type Item = Hint;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Hint>> {
        let this = self.get_mut();
        loop {
            // The stops found first, then what was told, then the stops
            // since: the order the hints came in.
            if let Some(hint) = this.pending.pop_front() {
                return Poll::Ready(Some(hint));
            }
            {
                // One lock: a hint told, or the waker left for the next one
                // (kept before the look, so one told after it wakes).
                let mut inbox = this.inbox.lock();
                if let Some(hint) = inbox.told.pop_front() {
                    return Poll::Ready(Some(hint));
                }
                keep_waker(&mut inbox.waker, cx.waker());
            }
            let next = this.look(this.clock.now());
            if let Some(hint) = this.pending.pop_front() {
                return Poll::Ready(Some(hint));
            }
            let Some(next) = next else {
                this.sleep = None;
                return Poll::Pending;
            };
            let (sleep, polled_with) = match &mut this.sleep {
                Some((at, sleep, polled_with)) if *at == next => (sleep, polled_with),
                slot => {
                    let (_, sleep, polled_with) =
                        slot.insert((next, this.clock.sleep_until(next), None));
                    (sleep, polled_with)
                }
            };
            // `next` is after now (`look` queued every stop up to now), so
            // the sleep is not due: polled once per waker, it stays
            // registered with that waker until its deadline.
            if polled_with
                .as_ref()
                .is_some_and(|w| w.will_wake(cx.waker()))
            {
                return Poll::Pending;
            }
            if sleep.as_mut().poll(cx).is_pending() {
                *polled_with = Some(cx.waker().clone());
                return Poll::Pending;
            }
            this.sleep = None;
        }
    }
}

/// Keeps `waker` in `slot` for the next wake, cloning it only when the one
/// kept would not wake the same task.
fn keep_waker(slot: &mut Option<Waker>, waker: &Waker) {
    match slot {
        Some(kept) if kept.will_wake(waker) => {}
        _ => *slot = Some(waker.clone()),
    }
}

impl Hints for SimulatedProvider {
    fn subscribe(&self) -> HintStream {
        let owner: Arc<str> = Arc::from(self.owner());
        let inbox = self.host().lock().subscribe(&owner);
        let clock = self.clock();
        Box::pin(Watching {
            host: self.host().clone(),
            owner,
            seen: clock.now(),
            clock,
            inbox,
            shelf: None,
            pending: std::collections::VecDeque::new(),
            next: None,
            sleep: None,
        })
    }
}
