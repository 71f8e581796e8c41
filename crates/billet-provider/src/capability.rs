//! The optional capabilities (P9): [`Output`], what an instance's command
//! wrote, and [`Hints`], a stream of changes worth a look. A provider offers
//! each through [`Provider::output`](crate::Provider::output) and
//! [`Provider::hints`](crate::Provider::hints); one that answers `None` lacks
//! it, and a caller does without.

use std::pin::Pin;

use async_trait::async_trait;
use futures_core::Stream;

use crate::{Error, InstanceId};

/// The most bytes one item of an [`OutputStream`] holds (64 KiB): output is read in
/// pieces, never held whole.
pub const OUTPUT_CHUNK: usize = 65_536;

/// What an instance wrote, from some byte on, in pieces of at most
/// [`OUTPUT_CHUNK`] bytes (see [`Output::read`]).
pub type OutputStream = Pin<Box<dyn Stream<Item = Result<Vec<u8>, Error>> + Send>>;

/// Hints, as they come (see [`Hints::subscribe`]).
pub type HintStream = Pin<Box<dyn Stream<Item = Hint> + Send>>;

/// An instance's output: what its command wrote to stdout and stderr, as the
/// backend keeps it (one sequence of bytes, the two streams interleaved as
/// the backend records them).
///
/// # `read`
///
/// Streams the output of this deployment's instance `id` from byte `from`
/// (0: the first) on.
///
/// * **Follows.** The stream yields the bytes that are there, then each
///   byte as it is written, and ends once the instance has stopped and every
///   byte it wrote has been yielded. A reader that wants only what is there
///   now reads what is ready and drops the stream.
/// * **Stable.** Byte `n` is the same on every read: reading from `from`
///   yields exactly what a read from 0 yields past its first `from` bytes.
///   `from` at or past the end of a stopped instance's output yields an
///   empty stream.
/// * **Until destroyed.** The output is readable while the instance runs
///   and after it stopped, until it is destroyed. An id this deployment does
///   not hold (destroyed, or never launched) is [`Error::NotFound`], when
///   asked and in the stream; an id another deployment holds is
///   [`Error::NotOwned`], its output never shown.
/// * **Bounded.** No item holds more than [`OUTPUT_CHUNK`] bytes; a backend
///   that keeps only part of what was written (a capped log) says in its
///   docs what it keeps.
/// * A stream broken by the backend (a daemon gone mid-read) ends with the
///   error ([`Error::Unavailable`]); a reader may read again from the byte
///   it reached.
#[async_trait]
pub trait Output: Send + Sync {
    /// The output of instance `id` from byte `from`. See the trait docs.
    async fn read(&self, id: &InstanceId, from: u64) -> Result<OutputStream, Error>;
}

/// A change a backend noticed to one of this deployment's instances: only
/// where to look. The inventory ([`Provider::list`](crate::Provider::list))
/// and [`find`](crate::Provider::find) stay the authority.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Hint {
    /// What changed.
    pub kind: HintKind,
    /// The instance it concerns, by the backend's id.
    pub id: InstanceId,
    /// The instance's name, as its spec gave it; shared, as an
    /// [`Instance`](crate::Instance)'s is, so that telling a hint to every
    /// subscriber copies no text.
    pub name: std::sync::Arc<str>,
}

/// What a [`Hint`] says changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum HintKind {
    /// It stopped (its command exited, or it was stopped).
    Stopped,
    /// It appeared (was started).
    Appeared,
    /// It vanished (removed, by this deployment or by anyone else).
    Vanished,
}

/// A stream of change hints for this deployment's instances.
///
/// # `subscribe`
///
/// A new stream of the hints from now on, each about an instance of this
/// provider's owner.
///
/// * **Only this owner's.** A hint never names another deployment's
///   instance.
/// * **Only where to look.** A hint may come late, twice, or not at all (a
///   subscriber that falls behind the backend's buffer misses hints rather
///   than holding memory without bound; a stream that broke is reopened,
///   and what happened meanwhile is not told again), and may name an
///   instance that is gone by the time it is read. A caller acts on what
///   it then reads from the inventory or `find`, never on the hint alone:
///   whatever hints do, the answers of `list` and `find` are exact.
/// * The stream may never end: a caller drops it when done.
pub trait Hints: Send + Sync {
    /// A new stream of hints from now on. See the trait docs.
    fn subscribe(&self) -> HintStream;
}
