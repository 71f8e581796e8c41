//! Capturing a job's output while its instance runs (L15): one task per live
//! instance appends what the backend's output stream gives to the job's
//! file, opens the stream again from the file's end when it breaks, and is
//! finished (read to its end, synced) before the instance is destroyed.

use std::io;
use std::sync::Arc;
use std::time::Duration;

use billet_provider::{Instance, InstanceId, OUTPUT_CHUNK, OutputStream, Provider};
use futures::{FutureExt, StreamExt};
use tokio::sync::watch;

use super::{
    CUT_NOTICE, FINISH_SLACK, FINISH_WAIT, FINISH_WAIT_STOPPED, LATE_CUT_NOTICE, OutputStore,
    REOPEN_FIRST, REOPEN_MAX, SETTLE, TOTAL_CUT_NOTICE, UNWRITTEN_CUT_NOTICE,
};

/// One capture under way.
#[derive(Debug)]
pub(super) struct Live {
    pub(super) job: u64,
    /// Told `Some(wait)` when a destroy wants the capture to finish within
    /// `wait`.
    pub(super) finish: watch::Sender<Option<Duration>>,
    /// Whether an inventory or a find has seen the instance stopped: its
    /// output is then all written, and a finish reads it to its end
    /// ([`FINISH_WAIT_STOPPED`]).
    pub(super) stopped: bool,
    /// Turns `true` when the capture has ended and its file is synced.
    pub(super) done: watch::Receiver<bool>,
}

impl OutputStore {
    /// Starts capturing `instance`'s output from `provider`, unless a
    /// capture of it is under way or it is no job of this store's.
    pub(super) fn ensure(self: &Arc<Self>, provider: &Arc<dyn Provider>, instance: &Instance) {
        if provider.output().is_none() {
            return;
        }
        let Some(job) = self.job_of(&instance.name) else {
            return;
        };
        let stopped = instance.state.is_stopped();
        let mut live = self.live.lock();
        if let Some(capture) = live.get_mut(&instance.id) {
            capture.stopped |= stopped;
            return;
        }
        let (finish, finishing) = watch::channel(None);
        let (ended, done) = watch::channel(false);
        live.insert(
            instance.id.clone(),
            Live {
                job,
                finish,
                stopped,
                done,
            },
        );
        drop(live);
        let store = Arc::clone(self);
        let provider = Arc::clone(provider);
        let id = instance.id.clone();
        tokio::spawn(async move {
            let result = store.capture(&*provider, &id, job, finishing).await;
            if let Err(err) = &result {
                tracing::warn!(job, instance = id.as_str(), error = %err, "output capture stopped");
            }
            if matches!(result, Ok(Ended::Gone)) {
                store.live.lock().remove(&id);
            }
            let _ = ended.send(true);
        });
    }

    /// Lets `id`'s capture read to its end (bounded: [`FINISH_WAIT`], or
    /// [`FINISH_WAIT_STOPPED`] for an instance seen stopped), then forgets
    /// it.
    pub(super) async fn finish(&self, id: &InstanceId) {
        let (done, wait) = {
            let live = self.live.lock();
            let Some(capture) = live.get(id) else {
                return;
            };
            let wait = if capture.stopped {
                FINISH_WAIT_STOPPED
            } else {
                FINISH_WAIT
            };
            let _ = capture.finish.send(Some(wait));
            (capture.done.clone(), wait)
        };
        let mut done = done;
        let bound = wait + FINISH_SLACK;
        let _ = tokio::time::timeout(bound, done.wait_for(|ended| *ended)).await;
        self.live.lock().remove(id);
    }

    /// Appends `id`'s output to job `job`'s file until the output ends, the
    /// limit cuts it, or a finish is asked and nothing more comes within
    /// [`SETTLE`], twice: the second time on a stream opened again from the
    /// file's end. Output still coming when the finish's wait is over is
    /// cut there, and the cut said ([`LATE_CUT_NOTICE`]). The file is synced
    /// before it answers.
    async fn capture(
        &self,
        provider: &dyn Provider,
        id: &InstanceId,
        job: u64,
        mut finishing: watch::Receiver<Option<Duration>>,
    ) -> io::Result<Ended> {
        if tokio::fs::try_exists(self.cut_path(job))
            .await
            .unwrap_or(false)
        {
            return Ok(Ended::Whole);
        }
        // Written, synced and cut on tokio's blocking threads, never on the
        // runtime's workers (L22): a slow disk holds up no other task.
        let mut file = tokio::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .mode(0o600)
            .open(self.path(job))
            .await?;
        let mut written = file.metadata().await?.len();
        let Some(output) = provider.output() else {
            return Ok(Ended::Whole);
        };
        let mut pause = REOPEN_FIRST;
        let mut finish_by: Option<tokio::time::Instant> = None;
        // Taken when the stream first settles after a finish was asked: it
        // is then opened once more from where the file ends, since a backend's
        // follow can stall past its instance's end with bytes not yet yielded
        // (seen on podman 4.3); a fresh read of a stopped instance yields
        // the rest and ends.
        let mut look_again = Some(());
        let ended = 'reads: loop {
            let mut stream = match output.read(id, written).await {
                Ok(stream) => stream,
                Err(err) if err.kind() == billet_provider::ErrorKind::NotFound => {
                    break Ended::Gone;
                }
                Err(err) => {
                    if !wait_to_reopen(&mut pause, &mut finish_by, &mut finishing).await {
                        break Ended::Broken(err.to_string());
                    }
                    continue;
                }
            };
            // An item taken from the stream while gathering (an error, the
            // end, or bytes that would not fit), handled next.
            let mut held = None;
            loop {
                let item = if let Some(item) = held.take() {
                    item
                } else if let Some(by) = finish_by {
                    let until = by.min(tokio::time::Instant::now() + SETTLE);
                    match tokio::time::timeout_at(until, stream.next()).await {
                        Ok(item) => item,
                        // The wait is over with the output still coming.
                        Err(_) if until == by => break 'reads Ended::Late,
                        // Once only (a read that settles twice is taken as
                        // it is); the destroy waits at most FINISH_BOUND.
                        Err(_) => match look_again.take() {
                            Some(()) => continue 'reads,
                            None => break 'reads Ended::Settled,
                        },
                    }
                } else {
                    tokio::select! {
                        item = stream.next() => item,
                        wait = finishing.wait_for(Option::is_some) => {
                            let wait = wait.ok().and_then(|wait| *wait).unwrap_or(FINISH_WAIT);
                            finish_by = Some(tokio::time::Instant::now() + wait);
                            continue;
                        }
                    }
                };
                match item {
                    None => break 'reads Ended::Whole,
                    Some(Ok(mut bytes)) => {
                        pause = REOPEN_FIRST;
                        held = gather(&mut stream, &mut bytes);
                        let own = self.limit.saturating_sub(written);
                        let shared = self.total_limit.saturating_sub(self.total());
                        let room = own.min(shared);
                        let take = usize::try_from(room).unwrap_or(usize::MAX).min(bytes.len());
                        if let Err(err) = write_through(&mut file, &bytes[..take]).await {
                            // L26: what part of it went in is dropped, and
                            // the output read again from there once a pause
                            // is over: a full disk loses nothing the backend
                            // still holds once space is freed.
                            let _ = file.set_len(written).await;
                            tracing::warn!(
                                job, instance = id.as_str(), error = %err,
                                "writing the job's output failed; it is read again from byte {written} after a pause"
                            );
                            if !wait_to_reopen(&mut pause, &mut finish_by, &mut finishing).await {
                                break 'reads Ended::Unwritten;
                            }
                            continue 'reads;
                        }
                        written += take as u64;
                        self.count(take as u64);
                        if take < bytes.len() {
                            let notice = if own <= shared {
                                CUT_NOTICE
                            } else {
                                TOTAL_CUT_NOTICE
                            };
                            self.end_cut(&mut file, id, job, written, notice).await;
                            break 'reads Ended::Cut;
                        }
                    }
                    // Opened again after the pause: an instance gone is
                    // then told (`NotFound`, the capture ends).
                    Some(Err(err)) => {
                        if !wait_to_reopen(&mut pause, &mut finish_by, &mut finishing).await {
                            break 'reads Ended::Broken(err.to_string());
                        }
                        continue 'reads;
                    }
                }
            }
        };
        match ended {
            // The instance goes while the disk is still full.
            Ended::Unwritten => {
                self.end_cut(&mut file, id, job, written, UNWRITTEN_CUT_NOTICE)
                    .await;
            }
            Ended::Late => {
                tracing::warn!(
                    job,
                    instance = id.as_str(),
                    written,
                    "the job's output was still coming when its instance was to be removed: it is cut there"
                );
                self.end_cut(&mut file, id, job, written, LATE_CUT_NOTICE)
                    .await;
            }
            _ => {}
        }
        file.sync_all().await?;
        if let Ended::Broken(why) = &ended {
            tracing::warn!(job, instance = id.as_str(), error = %why, "output capture gave up: the backend's output stream kept breaking");
        }
        Ok(ended)
    }
}

impl OutputStore {
    /// Ends job `job`'s output, `written` bytes kept, with `notice`, and
    /// says it was cut ([`cut`](Self::cut)); where the disk cannot take
    /// that, the notice is dropped and the cut said from memory
    /// (`output_truncated` until the service stops).
    async fn end_cut(
        &self,
        file: &mut tokio::fs::File,
        id: &InstanceId,
        job: u64,
        written: u64,
        notice: &str,
    ) {
        if let Err(err) = self.cut(file, job, written, notice).await {
            tracing::warn!(
                job, instance = id.as_str(), error = %err,
                "the job's output was cut, and the cut could not be said on disk: \
                 it shows output_truncated until the service stops"
            );
            let _ = file.set_len(written).await;
            self.unsaid.lock().insert(job, written);
        }
    }

    /// Ends job `job`'s output, `written` bytes kept, with `notice`, and
    /// says it was cut: the cut file holds the bytes kept.
    async fn cut(
        &self,
        file: &mut tokio::fs::File,
        job: u64,
        written: u64,
        notice: &str,
    ) -> io::Result<()> {
        write_through(file, notice.as_bytes()).await?;
        self.count(notice.len() as u64);
        let mut cut = tokio::fs::OpenOptions::new()
            .create(true)
            .truncate(true)
            .write(true)
            .mode(0o600)
            .open(self.cut_path(job))
            .await?;
        write_through(&mut cut, written.to_string().as_bytes()).await?;
        cut.sync_all().await
    }
}

/// Appends to `bytes` what `stream` has ready now, without waiting, while
/// it fits in [`OUTPUT_CHUNK`]: a backend that gives a piece per line (a
/// log frame per `echo`) is written in fewer, larger writes, not one write
/// (and one trip to a blocking thread) per line. Answers the item taken
/// that was not appended (an error, the end, or bytes that did not fit),
/// to be handled next; so a capture holds at most two chunks at a time.
pub(super) fn gather(
    stream: &mut OutputStream,
    bytes: &mut Vec<u8>,
) -> Option<Option<Result<Vec<u8>, billet_provider::Error>>> {
    loop {
        let item = stream.next().now_or_never()?;
        match item {
            Some(Ok(more)) if bytes.len() + more.len() <= OUTPUT_CHUNK => {
                bytes.extend_from_slice(&more);
            }
            other => return Some(other),
        }
    }
}

/// Writes `bytes` to `file` and waits for the write to be done: a tokio
/// file tells a write's failure only at its next operation, so it is
/// flushed before the answer.
async fn write_through(file: &mut tokio::fs::File, bytes: &[u8]) -> io::Result<()> {
    use tokio::io::AsyncWriteExt;
    file.write_all(bytes).await?;
    file.flush().await
}

/// Waits `pause` (doubled for next time, up to [`REOPEN_MAX`]) before a
/// capture opens its output again; `false` when it should not: a finish was
/// asked and its wait has passed since. A finish asked during the
/// wait ends the wait, and starts that bound.
pub(super) async fn wait_to_reopen(
    pause: &mut Duration,
    finish_by: &mut Option<tokio::time::Instant>,
    finishing: &mut watch::Receiver<Option<Duration>>,
) -> bool {
    let now = tokio::time::Instant::now();
    if finish_by.is_none()
        && let Some(wait) = *finishing.borrow()
    {
        *finish_by = Some(now + wait);
    }
    let until = match *finish_by {
        Some(by) if now >= by => return false,
        Some(by) => (now + *pause).min(by),
        None => now + *pause,
    };
    *pause = pause.saturating_mul(2).min(REOPEN_MAX);
    if finish_by.is_some() {
        tokio::time::sleep_until(until).await;
    } else {
        tokio::select! {
            () = tokio::time::sleep_until(until) => {}
            wait = finishing.wait_for(Option::is_some) => {
                let wait = wait.ok().and_then(|wait| *wait).unwrap_or(FINISH_WAIT);
                *finish_by = Some(tokio::time::Instant::now() + wait);
            }
        }
    }
    true
}

/// How a capture ended.
#[derive(Debug)]
enum Ended {
    /// Every byte the instance wrote was read.
    Whole,
    /// The limit cut it.
    Cut,
    /// A destroy asked it to finish, and nothing more came within
    /// [`SETTLE`].
    Settled,
    /// A destroy asked it to finish, and its wait passed with the output
    /// still coming.
    Late,
    /// The instance is gone (destroyed by someone else, or never there).
    Gone,
    /// The output stream kept breaking.
    Broken(String),
    /// It could not be written (a full disk) until a finish was asked and
    /// [`FINISH_WAIT`] passed.
    Unwritten,
}
