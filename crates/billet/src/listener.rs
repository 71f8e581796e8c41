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

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
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

/// Serves `routes` on `listener` until `close` fires (or is dropped), then
/// asks every open connection to finish what it is answering and close,
/// and returns once they all have. Connections past `max_connections` are
/// served `overflow` (the same routes in their refusing form).
pub async fn serve(
    listener: TcpListener,
    routes: Router,
    overflow: Router,
    max_connections: usize,
    close: oneshot::Receiver<()>,
) {
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
        let (stream, _) = match accepted {
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
            let mut builder = http1::Builder::new();
            builder
                .timer(TokioTimer::new())
                .header_read_timeout(head_timeout)
                .keep_alive(keep_alive);
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
