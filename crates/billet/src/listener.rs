//! The listener (L12): accepts connections and serves HTTP/1 on each, with
//! every wait bounded.
//!
//! # Bounds
//!
//! * **Heads.** A request's head must arrive within [`HEAD_TIMEOUT`] of the
//!   moment the connection is ready for it: after it is accepted, and after
//!   each answer on a kept-alive connection. So a connection that sends half
//!   a head, or sits idle between requests, is closed after that long.
//! * **Bodies.** Once its head is in, a body must arrive within
//!   [`BODY_TIMEOUT`](crate::http::BODY_TIMEOUT) (`408` otherwise).
//! * **Connections.** At most `max_connections` are served at once. Past
//!   that, up to [`OVERFLOW`] more are accepted and answered `503` with
//!   `Retry-After` (but `/healthz`, answered as always) and closed, their
//!   heads due within [`OVERFLOW_HEAD_TIMEOUT`]; past those, new
//!   connections wait in the kernel's backlog until one closes.
//! * **Peers.** One peer (an IP address) is served at most `per_peer`
//!   connections at once (L23): its next ones are answered as those past the
//!   cap are, or closed at once when those slots are taken too, so one peer
//!   holding idle or slow connections never takes every slot from the
//!   others. A TLS proxy in front of billet is one peer for all it carries:
//!   raise `--max-connections-per-peer` to `--max-connections` there.
//! * **Readers.** An answer whose bytes the peer does not take for
//!   [`STALL_TIMEOUT`] (a write that makes no progress that long) closes the
//!   connection (L23). Over a connection's life, the time its answers wait
//!   for the peer is bounded too: at most [`STALL_TIMEOUT`] plus one second
//!   for each [`MIN_READ_RATE`] bytes the peer has taken, so a peer reading
//!   a big output a trickle at a time (a few bytes whenever the stall is
//!   nearly up) is closed as well: an answer's whole life is bounded by its
//!   size. A `follow` that waits for a running job's output waits on the
//!   job, not on the peer, and is not counted.

use std::collections::HashMap;
use std::future::Future;
use std::io;
use std::net::IpAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::Router;
use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use parking_lot::Mutex;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpListener;
use tokio::sync::{Semaphore, oneshot, watch};
use tokio::task::JoinSet;

/// How long a request's head may take to arrive, counted from when the
/// connection is ready for it (so also how long a kept-alive connection may
/// stay idle).
pub const HEAD_TIMEOUT: Duration = Duration::from_secs(10);

/// How many connections past the cap are accepted to be told `503`.
pub const OVERFLOW: usize = 64;

/// How long the head of a request on a connection past the cap may take.
pub const OVERFLOW_HEAD_TIMEOUT: Duration = Duration::from_secs(2);

/// The default of `--max-connections`.
pub const DEFAULT_MAX_CONNECTIONS: usize = 512;

/// The default of `--max-connections-per-peer`: an eighth of the default
/// cap, far more than a client (the `billet` client, Prometheus, a CI
/// script) opens at once.
pub const DEFAULT_MAX_CONNECTIONS_PER_PEER: usize = 64;

/// How long an answer may wait for the peer to take any of its bytes before
/// the connection is closed (L23).
pub const STALL_TIMEOUT: Duration = Duration::from_secs(30);

/// The slowest a peer may take an answer's bytes, on average over the time
/// the answers wait for it (16 KiB/s: a 64 MiB output in about 70 minutes),
/// after a first [`STALL_TIMEOUT`] of grace (L23).
pub const MIN_READ_RATE: u32 = 16 * 1024;

/// The connections each peer holds, an entry only while it holds one: at
/// most as many entries as connections are open.
#[derive(Debug, Default)]
struct Peers(Mutex<HashMap<IpAddr, usize>>);

/// One connection counted against its peer until dropped.
struct PeerSlot {
    peers: Arc<Peers>,
    ip: IpAddr,
}

impl Peers {
    /// Counts a connection of `ip` when it holds fewer than `most`.
    fn take(self: &Arc<Self>, ip: IpAddr, most: usize) -> Option<PeerSlot> {
        let mut held = self.0.lock();
        let count = held.entry(ip).or_insert(0);
        if *count >= most {
            return None;
        }
        *count += 1;
        Some(PeerSlot {
            peers: Arc::clone(self),
            ip,
        })
    }
}

impl Drop for PeerSlot {
    fn drop(&mut self) {
        let mut held = self.peers.0.lock();
        if let Some(count) = held.get_mut(&self.ip) {
            *count -= 1;
            if *count == 0 {
                held.remove(&self.ip);
            }
        }
    }
}

/// A connection whose writes fail once one has made no progress for
/// `stall`, or once its writes have waited for the peer, in all, longer
/// than `stall` and a second per [`MIN_READ_RATE`] bytes taken (L23): hyper
/// then closes it.
struct Stalling<S> {
    inner: S,
    stall: Duration,
    /// Set while a write (or flush) waits for the peer: when the wait
    /// began, and when it fails.
    waiting: Option<(tokio::time::Instant, Pin<Box<tokio::time::Sleep>>)>,
    /// How long writes have waited for the peer, in all, before this one.
    waited: Duration,
    /// The bytes the peer has taken.
    written: u64,
}

impl<S> Stalling<S> {
    fn new(inner: S, stall: Duration) -> Stalling<S> {
        Stalling {
            inner,
            stall,
            waiting: None,
            waited: Duration::ZERO,
            written: 0,
        }
    }

    /// How long a write may wait now: `stall`, but no more than what is left
    /// of the connection's whole allowance.
    fn allowed(&self) -> Duration {
        let allowance = self.stall + Duration::from_secs(self.written) / MIN_READ_RATE;
        allowance.saturating_sub(self.waited).min(self.stall)
    }

    /// `poll`'s answer, or an error once the peer has taken nothing for
    /// what [`allowed`](Self::allowed) said when the wait began.
    fn bound<T>(&mut self, cx: &mut Context<'_>, poll: Poll<io::Result<T>>) -> Poll<io::Result<T>> {
        match poll {
            Poll::Ready(done) => {
                if let Some((since, _)) = self.waiting.take() {
                    self.waited += since.elapsed();
                }
                Poll::Ready(done)
            }
            Poll::Pending => {
                let allowed = self.allowed();
                let (since, timer) = self.waiting.get_or_insert_with(|| {
                    (
                        tokio::time::Instant::now(),
                        Box::pin(tokio::time::sleep(allowed)),
                    )
                });
                if timer.as_mut().poll(cx).is_ready() {
                    self.waited += since.elapsed();
                    self.waiting = None;
                    return Poll::Ready(Err(io::Error::new(
                        io::ErrorKind::TimedOut,
                        format!(
                            "the peer took none of the answer for {}s, or took it slower than {} bytes a second",
                            self.stall.as_secs(),
                            MIN_READ_RATE
                        ),
                    )));
                }
                Poll::Pending
            }
        }
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for Stalling<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Stalling<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let poll = Pin::new(&mut self.inner).poll_write(cx, buf);
        let poll = self.bound(cx, poll);
        if let Poll::Ready(Ok(n)) = poll {
            self.written += n as u64;
        }
        poll
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let poll = Pin::new(&mut self.inner).poll_flush(cx);
        self.bound(cx, poll)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

/// Serves `routes` on `listener` until `close` fires (or is dropped), then
/// asks every open connection to finish what it is answering and close,
/// and returns once they all have. Connections past `max_connections`, or
/// past `per_peer` of one peer, are served `overflow` (the same routes in
/// their refusing form).
pub async fn serve(
    listener: TcpListener,
    routes: Router,
    overflow: Router,
    max_connections: usize,
    per_peer: usize,
    close: oneshot::Receiver<()>,
) {
    let peers = Arc::new(Peers::default());
    let normal = Arc::new(Semaphore::new(max_connections.max(1)));
    let extra = Arc::new(Semaphore::new(OVERFLOW));
    let (closing, closed) = watch::channel(false);
    let mut connections = JoinSet::new();
    let mut close = std::pin::pin!(close);
    loop {
        // Reap finished connections so the set stays as small as the open.
        while connections.try_join_next().is_some() {}
        let accepted = tokio::select! {
            _ = &mut close => break,
            accepted = listener.accept() => accepted,
        };
        let (stream, peer) = match accepted {
            Ok(accepted) => accepted,
            Err(error) => {
                // Out of descriptors, or the peer gave up: wait a moment
                // rather than spin, and go on.
                tracing::warn!(%error, "accepting a connection failed");
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let _ = stream.set_nodelay(true);
        let Some(slot) = peers.take(peer.ip(), per_peer.max(1)) else {
            // This peer holds its share: told so if a refusing slot is free,
            // else closed at once; never waited for.
            let Ok(permit) = Arc::clone(&extra).try_acquire_owned() else {
                continue;
            };
            connections.spawn(refuse(stream, permit, overflow.clone()));
            continue;
        };
        let (permit, routes, head_timeout, keep_alive) =
            if let Ok(permit) = Arc::clone(&normal).try_acquire_owned() {
                (permit, routes.clone(), HEAD_TIMEOUT, true)
            } else if let Ok(permit) = Arc::clone(&extra).try_acquire_owned() {
                (permit, overflow.clone(), OVERFLOW_HEAD_TIMEOUT, false)
            } else {
                // Both full: wait for a normal slot before taking this one
                // on (the kernel queues the rest).
                let permit = tokio::select! {
                    _ = &mut close => break,
                    permit = Arc::clone(&normal).acquire_owned() => permit,
                };
                let Ok(permit) = permit else { break };
                (permit, routes.clone(), HEAD_TIMEOUT, true)
            };
        let mut closed = closed.clone();
        connections.spawn(async move {
            let _permit = permit;
            let _slot = slot;
            let mut builder = http1::Builder::new();
            builder
                .timer(TokioTimer::new())
                .header_read_timeout(head_timeout)
                .keep_alive(keep_alive);
            let stream = Stalling::new(stream, STALL_TIMEOUT);
            let connection =
                builder.serve_connection(TokioIo::new(stream), TowerToHyperService::new(routes));
            let mut connection = std::pin::pin!(connection);
            tokio::select! {
                _ = connection.as_mut() => return,
                _ = closed.wait_for(|closing| *closing) => {}
            }
            connection.as_mut().graceful_shutdown();
            let _ = connection.await;
        });
    }
    drop(listener);
    let _ = closing.send(true);
    while connections.join_next().await.is_some() {}
}

/// Answers one request on `stream` with `overflow`'s refusal, then closes.
async fn refuse(
    stream: tokio::net::TcpStream,
    permit: tokio::sync::OwnedSemaphorePermit,
    overflow: Router,
) {
    let _permit = permit;
    let mut builder = http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(OVERFLOW_HEAD_TIMEOUT)
        .keep_alive(false);
    let stream = Stalling::new(stream, OVERFLOW_HEAD_TIMEOUT);
    let _ = builder
        .serve_connection(TokioIo::new(stream), TowerToHyperService::new(overflow))
        .await;
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncWriteExt;

    // L23: a write the peer takes nothing of fails once it has waited
    // `stall`, not before; a write that goes through starts the count anew.
    #[tokio::test(start_paused = true)]
    async fn l23_a_write_the_peer_never_takes_fails_after_the_stall() {
        let (ours, mut theirs) = tokio::io::duplex(8);
        let mut stalling = Stalling::new(ours, Duration::from_secs(30));
        stalling.write_all(b"12345678").await.unwrap();
        let started = tokio::time::Instant::now();
        let err = stalling.write_all(b"more").await.unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::TimedOut);
        assert!(err.to_string().contains("30s"), "{err}");
        assert_eq!(started.elapsed(), Duration::from_secs(30));
        // The peer reads: writes go through again, at once.
        let mut buf = [0u8; 8];
        tokio::io::AsyncReadExt::read_exact(&mut theirs, &mut buf)
            .await
            .unwrap();
        let started = tokio::time::Instant::now();
        stalling.write_all(b"again").await.unwrap();
        assert_eq!(started.elapsed(), Duration::ZERO);
        stalling.flush().await.unwrap();
        let mut more = [0u8; 5];
        tokio::io::AsyncReadExt::read_exact(&mut theirs, &mut more)
            .await
            .unwrap();
        assert_eq!(&more, b"again");
        // The 30 s waited count against the connection's allowance: with
        // it spent, the next write the peer does not take fails at once.
        stalling.write_all(b"12345678").await.unwrap();
        let started = tokio::time::Instant::now();
        let err = stalling.write_all(b"more").await.unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::TimedOut);
        assert!(
            started.elapsed() < Duration::from_millis(5),
            "{:?}",
            started.elapsed()
        );
    }

    // L23: a peer that takes a trickle whenever the stall is nearly up is
    // closed once the time its answer waited passes STALL_TIMEOUT and a
    // second per MIN_READ_RATE bytes it took, not after each stall anew.
    #[tokio::test(start_paused = true)]
    async fn l23_a_peer_reading_a_trickle_is_closed() {
        let (ours, mut theirs) = tokio::io::duplex(64);
        let peer = tokio::spawn(async move {
            let mut taken = 0usize;
            let mut buf = [0u8; 32];
            loop {
                tokio::time::sleep(Duration::from_secs(20)).await;
                match tokio::io::AsyncReadExt::read(&mut theirs, &mut buf).await {
                    Ok(0) | Err(_) => return taken,
                    Ok(n) => taken += n,
                }
            }
        });
        let mut stalling = Stalling::new(ours, STALL_TIMEOUT);
        let started = tokio::time::Instant::now();
        let err = stalling.write_all(&[b'x'; 64 * 1024]).await.unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::TimedOut, "{err}");
        assert!(err.to_string().contains("16384 bytes a second"), "{err}");
        // 20 s waited for the first read, then the 10 s left (and a few
        // milliseconds for the bytes it took), not another 30 s.
        let elapsed = started.elapsed();
        assert!(
            elapsed >= Duration::from_secs(30) && elapsed < Duration::from_secs(31),
            "{elapsed:?}"
        );
        drop(stalling);
        let taken = peer.await.unwrap();
        assert!(taken < 1024, "{taken}");
    }

    // L23: a peer taking its answer at 64 KiB/s keeps its connection, though
    // its writes wait far longer than STALL_TIMEOUT in all.
    #[tokio::test(start_paused = true)]
    async fn l23_a_peer_reading_steadily_keeps_its_connection() {
        let (ours, mut theirs) = tokio::io::duplex(64 * 1024);
        let total = 4 * 1024 * 1024;
        let peer = tokio::spawn(async move {
            let mut taken = 0usize;
            let mut buf = vec![0u8; 64 * 1024];
            while taken < total {
                tokio::time::sleep(Duration::from_secs(1)).await;
                taken += tokio::io::AsyncReadExt::read(&mut theirs, &mut buf)
                    .await
                    .unwrap();
            }
            taken
        });
        let mut stalling = Stalling::new(ours, STALL_TIMEOUT);
        let started = tokio::time::Instant::now();
        stalling.write_all(&vec![b'x'; total]).await.unwrap();
        assert!(started.elapsed() >= Duration::from_secs(60));
        assert!(stalling.waited >= Duration::from_secs(60));
        assert_eq!(stalling.written, total as u64);
        assert_eq!(peer.await.unwrap(), total);
    }

    // L23: what a wait may take: STALL_TIMEOUT at most, less once the
    // connection's allowance (STALL_TIMEOUT and a second per MIN_READ_RATE
    // bytes taken) is nearly spent.
    #[test]
    fn l23_a_wait_is_allowed_what_is_left_of_the_allowance() {
        let mut stalling = Stalling::new((), Duration::from_secs(30));
        assert_eq!(stalling.allowed(), Duration::from_secs(30));
        stalling.waited = Duration::from_secs(25);
        assert_eq!(stalling.allowed(), Duration::from_secs(5));
        stalling.written = u64::from(MIN_READ_RATE) * 10;
        assert_eq!(stalling.allowed(), Duration::from_secs(15));
        stalling.written = u64::from(MIN_READ_RATE) * 100;
        assert_eq!(stalling.allowed(), Duration::from_secs(30));
        stalling.written = u64::from(MIN_READ_RATE) / 2;
        assert_eq!(stalling.allowed(), Duration::from_millis(5_500));
        stalling.waited = Duration::from_secs(40);
        assert_eq!(stalling.allowed(), Duration::ZERO);
    }

    // L23: a peer is counted while it holds connections, up to its most,
    // and forgotten once it holds none; peers are counted apart.
    #[test]
    fn l23_each_peer_holds_at_most_its_share() {
        let peers = Arc::new(Peers::default());
        let a: IpAddr = [10, 0, 0, 1].into();
        let b: IpAddr = [10, 0, 0, 2].into();
        let first = peers.take(a, 2).unwrap();
        let second = peers.take(a, 2).unwrap();
        assert!(peers.take(a, 2).is_none(), "a third of a's");
        let other = peers.take(b, 2).unwrap();
        drop(first);
        let again = peers.take(a, 2).expect("a slot given back");
        drop((second, again, other));
        assert!(peers.0.lock().is_empty(), "nothing kept of peers gone");
    }
}
