//! An instance's output (P9's [`Output`], D16): what its container wrote to
//! stdout and stderr, read from the daemon's logs API as a stream.
//!
//! The daemon keeps a container's log with the container, in the log driver
//! it is configured with: billet asks for `json-file` bounded by the
//! [`Confinement`](crate::Confinement)'s log size and file count, which keeps
//! the two streams in the order the daemon received them (podman's
//! `k8s-file` likewise). What the bound rotates away is gone: past it, a
//! read from byte 0 starts where the oldest kept file starts. A read asks
//! for the log from its start and follows it while the container runs, then
//! reads it once more without following, so that an engine that ends a
//! follow early loses nothing; it skips the first `from` bytes as they come.
//! The logs API seeks by time, not by byte, so a read from byte `n` costs
//! reading `n` bytes from the daemon, never holding them. A daemon whose
//! log driver keeps nothing (`none`) or cannot be read back answers an
//! error, which the read passes on.

use std::collections::VecDeque;
use std::time::Duration;

use async_trait::async_trait;
use billet_provider::{Error, InstanceId, OUTPUT_CHUNK, Output, OutputStream};
use bollard::Docker;
use bollard::container::LogOutput;
use bollard::models::ContainerStateStatusEnum;
use bollard::query_parameters::LogsOptionsBuilder;
use bytes::Bytes;
use futures::stream::BoxStream;
use futures::{StreamExt, stream};

use super::{Claim, DockerProvider};
use crate::daemon::{DaemonError, failure_of};
use crate::naming::is_full_id;

#[async_trait]
impl Output for DockerProvider {
    /// The container's log from byte `from`, following it until the
    /// container stops. The container is checked first, within the
    /// provider's timeout: a container this deployment does not hold is
    /// [`Error::NotFound`], another deployment's (or one billet did not
    /// start) [`Error::NotOwned`]. Then the stream waits on the container as
    /// long as it runs: its reader bounds it, by dropping it. A daemon that
    /// cannot be asked is [`Error::Unavailable`]; one that breaks the stream
    /// mid-read ends it with that error, and a read may start again from the
    /// byte it reached.
    async fn read(&self, id: &InstanceId, from: u64) -> Result<OutputStream, Error> {
        let deadline = self.deadline();
        let client = self
            .client("inspect container")
            .map_err(Error::unavailable)?;
        if !is_full_id(id.as_str()) {
            // Never handed to the daemon, which would resolve it as a name
            // or an id prefix; absent only while the daemon answers.
            self.call(deadline, "ping", client.ping())
                .await
                .map_err(Error::unavailable)?;
            return Err(Error::not_found(id.clone()));
        }
        let inspected = self
            .inspect(&client, deadline, id.as_str())
            .await
            .map_err(Error::unavailable)?;
        let Some(inspected) = inspected.filter(|c| c.id.as_deref() == Some(id.as_str())) else {
            return Err(Error::not_found(id.clone()));
        };
        match self.claim_inspected(&inspected) {
            Claim::Ours { .. } => {}
            Claim::Theirs { owner } => return Err(Error::not_owned(id.clone(), owner)),
            Claim::Foreign => return Err(Error::not_owned(id.clone(), "")),
        }
        // Followed unless it has stopped for good: a container made and not
        // yet started, paused or restarting will still write.
        let stopped = matches!(
            inspected.state.as_ref().and_then(|state| state.status),
            Some(ContainerStateStatusEnum::EXITED | ContainerStateStatusEnum::DEAD)
        );
        Ok(log_stream(Reader::new(
            client,
            self.endpoint_text.clone(),
            self.timeout,
            id.clone(),
            from,
            !stopped,
        )))
    }
}

/// One read of a container's log: the stream it reads, the bytes still to
/// skip, and the pieces of the last message not yet yielded.
struct Reader {
    client: Docker,
    endpoint: String,
    budget: Duration,
    id: InstanceId,
    /// The next byte to yield.
    at: u64,
    skip: Skip,
    pieces: VecDeque<Vec<u8>>,
    logs: BoxStream<'static, Result<LogOutput, bollard::errors::Error>>,
    /// Whether a read without `follow` is still to come after this one:
    /// the whole log once more past the byte reached, because an engine
    /// may end a follow early (podman 4 ends the follow of a container
    /// that stopped with part of its log unread).
    rest_due: bool,
    done: bool,
}

impl Reader {
    /// A read of `id`'s log from byte `from`: followed while `running`,
    /// then read once more to its end.
    fn new(
        client: Docker,
        endpoint: String,
        budget: Duration,
        id: InstanceId,
        from: u64,
        running: bool,
    ) -> Reader {
        let logs = logs(&client, &id, running);
        Reader {
            client,
            endpoint,
            budget,
            id,
            at: from,
            skip: Skip::new(from),
            pieces: VecDeque::new(),
            logs,
            rest_due: running,
            done: false,
        }
    }

    /// The next piece, or the error that ends the read, or `None` at its end.
    async fn next(&mut self) -> Option<Result<Vec<u8>, Error>> {
        loop {
            if let Some(piece) = self.pieces.pop_front() {
                self.at += piece.len() as u64;
                return Some(Ok(piece));
            }
            if self.done {
                return None;
            }
            match self.logs.next().await {
                Some(Ok(output)) => match message(output) {
                    Ok(message) => self.pieces.extend(self.skip.past(&message)),
                    Err(text) => {
                        self.done = true;
                        return Some(Err(not_a_frame(&self.endpoint, &self.id, &text)));
                    }
                },
                Some(Err(err)) => {
                    self.done = true;
                    return Some(Err(read_failed(&self.endpoint, self.budget, &self.id, err)));
                }
                None if self.rest_due => {
                    self.rest_due = false;
                    self.skip = Skip::new(self.at);
                    self.logs = logs(&self.client, &self.id, false);
                }
                None => self.done = true,
            }
        }
    }
}

/// The daemon's log of `id` from its start, followed or not.
fn logs(
    client: &Docker,
    id: &InstanceId,
    follow: bool,
) -> BoxStream<'static, Result<LogOutput, bollard::errors::Error>> {
    let options = LogsOptionsBuilder::new()
        .follow(follow)
        .stdout(true)
        .stderr(true)
        .build();
    client.logs(id.as_str(), Some(options)).boxed()
}

/// The log of container `id` from byte `from`, in pieces of at most
/// [`OUTPUT_CHUNK`]: followed while it runs.
fn log_stream(reader: Reader) -> OutputStream {
    Box::pin(stream::unfold(reader, |mut reader| async move {
        let piece = reader.next().await?;
        Some((piece, reader))
    }))
}

/// The bytes of one log message the container wrote (stdout or stderr),
/// or, as `Err`, bytes that are no frame of its log. billet's containers
/// have no TTY, so their log is always multiplexed: what bollard reads as a
/// console (or stdin) message is text the engine wrote into the stream in
/// place of frames. Podman 4 does so when the container is removed during a
/// follow (`{"cause":"no such container",...}`); taken as output, that text
/// would end up in the job's output.
fn message(output: LogOutput) -> Result<Bytes, Bytes> {
    match output {
        LogOutput::StdOut { message } | LogOutput::StdErr { message } => Ok(message),
        LogOutput::StdIn { message } | LogOutput::Console { message } => Err(message),
    }
}

/// The error a log stream ends with when the engine wrote `text` into it
/// in place of frames: unavailable, the text shown (at most 200 bytes), so
/// that a reader opens the log again (and finds the container gone, if it
/// is).
fn not_a_frame(endpoint: &str, id: &InstanceId, text: &[u8]) -> Error {
    let shown = String::from_utf8_lossy(&text[..text.len().min(200)]);
    Error::unavailable(format!(
        "the daemon at {endpoint} wrote into the log stream of {} what is no log frame: {shown}",
        id.as_str()
    ))
}

/// The error a broken log read ends with: the container gone is
/// [`Error::NotFound`]; anything else is the daemon's, [`Error::Unavailable`].
fn read_failed(
    endpoint: &str,
    budget: Duration,
    id: &InstanceId,
    err: bollard::errors::Error,
) -> Error {
    let failure = failure_of(err, budget);
    let err = DaemonError::new(endpoint, "container logs", failure);
    if err.status() == Some(404) {
        Error::not_found(id.clone())
    } else {
        Error::unavailable(err)
    }
}

/// How many bytes of a log are still to be skipped before a read's first.
#[derive(Debug)]
struct Skip {
    left: u64,
}

impl Skip {
    fn new(from: u64) -> Skip {
        Skip { left: from }
    }

    /// What of `message` is past the skipped bytes, in pieces of at most
    /// [`OUTPUT_CHUNK`]; none while bytes are still to be skipped.
    fn past(&mut self, message: &[u8]) -> impl Iterator<Item = Vec<u8>> + use<> {
        let len = message.len() as u64;
        let skipped = self.left.min(len);
        self.left -= skipped;
        // `skipped` is at most `message.len()`, a usize.
        let rest = &message[usize::try_from(skipped).unwrap_or(message.len())..];
        let chunks: Vec<Vec<u8>> = rest.chunks(OUTPUT_CHUNK).map(<[u8]>::to_vec).collect();
        chunks.into_iter()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // D16, P9: what an engine writes into a log stream in place of frames
    // (podman's error when the container is removed during a follow) is no
    // output: the read ends unavailable, the text shown, and the bytes
    // before it are yielded as they came.
    #[tokio::test]
    async fn d16_text_in_place_of_frames_ends_the_read_and_is_no_output() {
        let client =
            Docker::connect_with_http("http://127.0.0.1:9", 1, bollard::API_DEFAULT_VERSION)
                .expect("a client is made without connecting");
        let mut reader = Reader::new(
            client,
            "unix:///d.sock".to_owned(),
            Duration::from_secs(1),
            InstanceId::from("c0ffee"),
            0,
            false,
        );
        let error = format!("{{\"cause\":\"no such container\",{}}}", "x".repeat(300));
        reader.logs = stream::iter([
            Ok(LogOutput::StdOut {
                message: Bytes::from_static(b"out "),
            }),
            Ok(LogOutput::StdErr {
                message: Bytes::from_static(b"err "),
            }),
            Ok(LogOutput::Console {
                message: Bytes::from(error),
            }),
            Ok(LogOutput::StdOut {
                message: Bytes::from_static(b"never"),
            }),
        ])
        .boxed();
        assert_eq!(reader.next().await.unwrap().unwrap(), b"out ");
        assert_eq!(reader.next().await.unwrap().unwrap(), b"err ");
        let ended = reader.next().await.unwrap().unwrap_err();
        assert_eq!(ended.kind(), billet_provider::ErrorKind::Unavailable);
        let said = ended.to_string();
        assert!(said.contains("no such container"), "{said}");
        assert!(
            said.contains("c0ffee") && said.contains("unix:///d.sock"),
            "{said}"
        );
        assert!(
            !said.contains(&"x".repeat(200)),
            "at most 200 bytes shown: {said}"
        );
        assert!(reader.next().await.is_none(), "the read has ended");
        let stdin = message(LogOutput::StdIn {
            message: Bytes::from_static(b"in"),
        });
        assert_eq!(stdin, Err(Bytes::from_static(b"in")));
    }

    fn pieces(skip: &mut Skip, message: &[u8]) -> Vec<Vec<u8>> {
        skip.past(message).collect()
    }

    #[test]
    fn d16_a_read_from_byte_n_skips_exactly_n_bytes_across_messages() {
        let mut skip = Skip::new(5);
        assert!(pieces(&mut skip, b"abc").is_empty());
        assert_eq!(pieces(&mut skip, b"defgh"), [b"fgh".to_vec()]);
        assert_eq!(pieces(&mut skip, b"ij"), [b"ij".to_vec()]);
        let mut none = Skip::new(0);
        assert_eq!(pieces(&mut none, b"xy"), [b"xy".to_vec()]);
        let mut exact = Skip::new(3);
        assert!(pieces(&mut exact, b"abc").is_empty());
        assert_eq!(pieces(&mut exact, b"d"), [b"d".to_vec()]);
    }

    // D16, P9: a read that breaks because the container is gone (`404`)
    // is `NotFound`; any other break is the daemon's, `Unavailable`.
    #[test]
    fn d16_a_broken_read_is_not_found_only_when_the_container_is_gone() {
        let id = InstanceId::from("c0ffee");
        let answer = |status_code| bollard::errors::Error::DockerResponseServerError {
            status_code,
            message: "no".to_owned(),
        };
        let budget = Duration::from_secs(1);
        let gone = read_failed("unix:///d.sock", budget, &id, answer(404));
        assert_eq!(gone.kind(), billet_provider::ErrorKind::NotFound);
        let broken = read_failed("unix:///d.sock", budget, &id, answer(500));
        assert_eq!(broken.kind(), billet_provider::ErrorKind::Unavailable);
    }

    #[test]
    fn d16_no_piece_is_larger_than_output_chunk() {
        let mut skip = Skip::new(1);
        let big = vec![7u8; 2 * OUTPUT_CHUNK + 2];
        let got = pieces(&mut skip, &big);
        let sizes: Vec<usize> = got.iter().map(Vec::len).collect();
        assert_eq!(sizes, [OUTPUT_CHUNK, OUTPUT_CHUNK, 1]);
        let mut at = Skip::new(0);
        let sizes: Vec<usize> = pieces(&mut at, &vec![1u8; OUTPUT_CHUNK])
            .iter()
            .map(Vec::len)
            .collect();
        assert_eq!(sizes, [OUTPUT_CHUNK]);
    }
}
