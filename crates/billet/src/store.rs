//! The durable store (L6): every accepted job and each step of its life, in
//! one SQLite database (`DIR/billet.db`), written in transactions.
//!
//! Opening checks the file before writing anything: a file that is not a
//! billet database, or one SQLite finds damaged, is refused with an error
//! naming it, and left as it was.
//!
//! A store has an identity (L10), made when it is created and kept in it:
//! every instance its service launches carries it, so that no other store
//! (a fresh one, one moved aside) ever adopts them. A store of the previous
//! layout (version 1, without one) gets one when it is opened, and keeps
//! adopting its earlier jobs' instances by their old names.
//!
//! Files (L13): the state directory is made (or set) `0700` and the
//! database, with SQLite's `-wal` and `-shm` files, `0600`, whatever the
//! umask. [`StateLock`] keeps a second service off a directory in use.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime};

use billet_scheduler::{Identity, JobId};
use rusqlite::{Connection, OptionalExtension, params};

use crate::record::trust_name;
use crate::record::{Change, JobRecord};

mod archive;
mod rows;

pub use archive::Archive;

/// The database file's name inside the state directory.
pub const DATABASE_FILE: &str = "billet.db";

/// The lock file's name inside the state directory.
pub const LOCK_FILE: &str = "lock";

/// The layout this release writes, kept in SQLite's `user_version`.
const SCHEMA_VERSION: i64 = 3;

/// The layout that added the store's identity (L10).
const IDENTITY_VERSION: i64 = 2;

/// What version 3 adds to version 2: the pool a job is pinned to (B3).
const PINNED: &str = "ALTER TABLE jobs ADD COLUMN pinned TEXT;";

/// What version 2 adds to version 1: the store's identity (L10).
const META: &str = "
CREATE TABLE meta (
    key TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
";

const SCHEMA: &str = "
CREATE TABLE jobs (
    id INTEGER PRIMARY KEY,
    key TEXT UNIQUE,
    command TEXT NOT NULL,
    labels TEXT NOT NULL,
    trust TEXT NOT NULL,
    timeout_secs INTEGER,
    state TEXT NOT NULL,
    pool TEXT,
    instance TEXT,
    exit_code INTEGER,
    reason TEXT,
    submitted_at INTEGER NOT NULL,
    started_at INTEGER,
    ended_at INTEGER,
    cancel_requested INTEGER NOT NULL DEFAULT 0,
    ending_state TEXT,
    ending_exit_code INTEGER,
    ending_reason TEXT,
    pinned TEXT
);
";

/// The indexes every read of ended jobs goes through (L12): by state and id
/// for a page of one state, by end for retention. Partial: a job enters each
/// once, when it ends. Made at every open when missing, so a store made
/// before them gets them.
const INDEXES: &str = "
CREATE INDEX IF NOT EXISTS jobs_ended_by_state ON jobs (state, id) WHERE ended_at IS NOT NULL;
CREATE INDEX IF NOT EXISTS jobs_ended_at ON jobs (ended_at) WHERE ended_at IS NOT NULL;
";

/// Why the store could not be opened or written.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// The file exists but is not a billet database SQLite can read intact;
    /// it was left untouched.
    #[error(
        "the store {path} is unreadable or corrupt ({detail}); it was left untouched: move it aside to start afresh"
    )]
    Corrupt {
        /// The database file.
        path: PathBuf,
        /// What was found wrong.
        detail: String,
    },
    /// The state directory or the file could not be made or read.
    #[error("the store {path}: {source}")]
    Io {
        /// The path.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// An existing state directory is not the service's alone (L16); it was
    /// left as it was.
    #[error("the state directory {path} is refused: {why}")]
    Exposed {
        /// The state directory.
        path: PathBuf,
        /// What is wrong with it.
        why: String,
    },
    /// Another `billet serve` holds the state directory (L10).
    #[error(
        "the state directory {path} is in use by another billet serve (it holds {path}/{LOCK_FILE}); stop it, or give this one its own --state"
    )]
    InUse {
        /// The state directory.
        path: PathBuf,
    },
    /// The store was made for another deployment than the configuration
    /// names (L21): its jobs' instances carry the id it recorded, and a
    /// service under another id would never see them again.
    #[error(
        "the store {path} belongs to deployment `{stored}`, and the configuration names `{configured}`: the containers of its jobs carry `{stored}`, so this service would never see them again. Put `deployment: {{id: {stored}}}` back, or start `{configured}` on a new --state"
    )]
    Deployment {
        /// The database file.
        path: PathBuf,
        /// The deployment id the store recorded.
        stored: String,
        /// The one the configuration names.
        configured: String,
    },
    /// The store could not be opened for lack of space on its file system
    /// (L25): SQLite cannot make the files it reads through. It was left
    /// untouched, and is not damaged.
    #[error(
        "the store {path} cannot be opened: its file system has no space left ({source}); it was left untouched and is not damaged: free some space and start again"
    )]
    NoSpace {
        /// The database file.
        path: PathBuf,
        /// What SQLite said.
        #[source]
        source: rusqlite::Error,
    },
    /// SQLite failed while reading or writing.
    #[error("the store {path}: {source}")]
    Sqlite {
        /// The database file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: rusqlite::Error,
    },
}

impl StoreError {
    /// Whether the store failed for lack of space (SQLite's `SQLITE_FULL`:
    /// the disk, or the file system's quota, is full): a commit that may go
    /// through once space is freed (L25).
    pub fn is_full(&self) -> bool {
        matches!(
            self,
            StoreError::Sqlite {
                source: rusqlite::Error::SqliteFailure(failure, _),
                ..
            } if failure.code == rusqlite::ErrorCode::DiskFull
        )
    }
}

/// Where committed changes go: a SQLite database, or nowhere (a store in
/// memory, for measuring what durability costs).
#[derive(Debug)]
pub struct Store {
    db: Option<(Connection, PathBuf)>,
    /// How long a commit to a store in memory takes.
    delay: Duration,
    identity: Option<Identity>,
    unnamed_through: Option<JobId>,
    archive: Arc<Archive>,
    /// The highest id ever accepted: kept across pruning, never reused.
    last_id: u64,
    /// The highest id pruning has removed, as the database's meta keeps it.
    pruned_through: u64,
    /// Transactions committed (see [`Store::commits`]).
    commits: Arc<AtomicU64>,
}

impl Store {
    /// A store that keeps nothing: every commit succeeds at once. Jobs live
    /// only in the service's table and die with it.
    pub fn memory() -> Store {
        Store::slow_memory(Duration::ZERO)
    }

    /// A store in memory whose every commit takes `delay`: for tests of
    /// what must wait for a commit (a request's answer, a provider call),
    /// which a commit that slow makes plain to see.
    pub fn slow_memory(delay: Duration) -> Store {
        Store {
            db: None,
            delay,
            identity: None,
            unnamed_through: None,
            archive: Arc::new(Archive::memory()),
            last_id: 0,
            pruned_through: 0,
            commits: Arc::default(),
        }
    }

    /// The store's identity (L10): made when the store was created, kept in
    /// it. `None` for a store in memory, whose instances carry none.
    pub fn identity(&self) -> Option<&Identity> {
        self.identity.as_ref()
    }

    /// For a store made by a release without identities: its last job then.
    /// Instances named without an identity are those jobs' (L10).
    pub fn unnamed_through(&self) -> Option<JobId> {
        self.unnamed_through
    }

    /// Binds the store to deployment `id` (L21): the first start records
    /// it, a later one under the same id goes on, and one under another id
    /// is refused ([`StoreError::Deployment`]), changing nothing. A store in
    /// memory keeps nothing, so takes any id.
    pub fn claim_deployment(&mut self, id: &str) -> Result<(), StoreError> {
        let Some((conn, path)) = &self.db else {
            return Ok(());
        };
        let sqlite = |source| StoreError::Sqlite {
            path: path.clone(),
            source,
        };
        let stored: Option<String> = conn
            .query_row(
                "SELECT value FROM meta WHERE key = 'deployment'",
                [],
                |row| row.get(0),
            )
            .optional()
            .map_err(sqlite)?;
        match stored {
            Some(stored) if stored == id => Ok(()),
            Some(stored) => Err(StoreError::Deployment {
                path: path.clone(),
                stored,
                configured: id.to_owned(),
            }),
            None => conn
                .execute(
                    "INSERT INTO meta (key, value) VALUES ('deployment', ?1)",
                    params![id],
                )
                .map(drop)
                .map_err(sqlite),
        }
    }

    /// Where this store's ended jobs are read from (L12).
    pub fn archive(&self) -> Arc<Archive> {
        Arc::clone(&self.archive)
    }

    /// The highest job id ever accepted into this store (0 when none), pruned
    /// ones included: the next job's id is past it.
    pub fn last_id(&self) -> u64 {
        self.last_id
    }

    /// Opens (or creates) the database in `dir`, creating `dir` if missing,
    /// and reads back every job that has not ended, in id order. Ended jobs
    /// stay in the file, read through [`archive`](Store::archive).
    pub fn open(dir: &Path) -> Result<(Store, Vec<JobRecord>), StoreError> {
        private_dir(dir)?;
        let path = dir.join(DATABASE_FILE);
        let exists = match std::fs::metadata(&path) {
            Ok(meta) => meta.len() > 0,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => false,
            Err(source) => return Err(StoreError::Io { path, source }),
        };
        // L25: an error while opening on a file system with no space left is
        // said as such, never taken for damage.
        let full = no_space(dir);
        let sqlite = |source| {
            if full {
                StoreError::NoSpace {
                    path: path.clone(),
                    source,
                }
            } else {
                StoreError::Sqlite {
                    path: path.clone(),
                    source,
                }
            }
        };
        let corrupt = |detail: String| StoreError::Corrupt {
            path: path.clone(),
            detail,
        };
        let conn = Connection::open(&path).map_err(sqlite)?;
        let version = if exists {
            // Read before writing anything: a damaged or foreign file fails
            // here, and nothing has been written to it. A read that fails
            // (I/O, no space for SQLite's shared-memory file) says nothing of
            // the file's content.
            match check(&conn) {
                Ok(version) => version,
                Err(Checked::Unread(source)) => return Err(sqlite(source)),
                Err(Checked::Damaged(detail)) => return Err(corrupt(detail)),
            }
        } else {
            conn.execute_batch(SCHEMA).map_err(sqlite)?;
            0
        };
        conn.execute_batch("PRAGMA journal_mode = WAL; PRAGMA synchronous = FULL;")
            .map_err(sqlite)?;
        let (identity, unnamed_through) = identify(&conn, version).map_err(sqlite)?;
        let identity = Identity::new(&identity).ok_or_else(|| {
            corrupt(format!(
                "its identity {identity:?} is not 8 to 32 hex digits"
            ))
        })?;
        // Owner-only before any job is written (what SQLite wrote so far is
        // the layout): SQLite gives files it makes later the database's mode.
        for file in [
            path.clone(),
            dir.join(format!("{DATABASE_FILE}-wal")),
            dir.join(format!("{DATABASE_FILE}-shm")),
        ] {
            private_file(&file)?;
        }
        conn.execute_batch(INDEXES).map_err(sqlite)?;
        let records = rows::unended(&conn).map_err(|e| corrupt(e.to_string()))?;
        let (highest, pruned_through) = last_ids(&conn).map_err(sqlite)?;
        let archive = Archive::sqlite(&path)?;
        Ok((
            Store {
                db: Some((conn, path)),
                delay: Duration::ZERO,
                identity: Some(identity),
                unnamed_through,
                archive: Arc::new(archive),
                last_id: highest.max(pruned_through),
                pruned_through,
                commits: Arc::default(),
            },
            records,
        ))
    }

    /// The database file, or `None` for a store in memory.
    pub fn path(&self) -> Option<&Path> {
        self.db.as_ref().map(|(_, path)| path.as_path())
    }

    /// Whether a commit costs nothing and waits for nothing: a store in
    /// memory with no delay ([`Store::memory`]).
    pub fn is_instant(&self) -> bool {
        self.db.is_none() && self.delay.is_zero()
    }

    /// How many commits this store has made, shared: a counter the caller
    /// may read while another thread commits. In a database each is one
    /// transaction, and so one `fsync` of its write-ahead log
    /// (`synchronous = FULL`); in memory it costs nothing.
    pub fn commits(&self) -> Arc<AtomicU64> {
        Arc::clone(&self.commits)
    }

    /// Writes `changes` in one transaction: all of them, or (on error) none.
    pub fn commit(&mut self, changes: &[Change]) -> Result<(), StoreError> {
        let last = changes
            .iter()
            .fold(self.last_id, |last, change| match change {
                Change::Accepted(record) => last.max(record.id),
                _ => last,
            });
        let Some((conn, path)) = &mut self.db else {
            std::thread::sleep(self.delay);
            self.last_id = last;
            self.commits.fetch_add(1, Ordering::Relaxed);
            return Ok(());
        };
        let sqlite = |source| StoreError::Sqlite {
            path: path.clone(),
            source,
        };
        let tx = conn.transaction().map_err(sqlite)?;
        for change in changes {
            write(&tx, change).map_err(sqlite)?;
        }
        tx.commit().map_err(sqlite)?;
        self.last_id = last;
        self.commits.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }

    /// Removes at most `max` of the jobs that ended before `before`, earliest
    /// end first, with their keys, in one transaction (L12); answers their
    /// ids, once the removal is committed (what else a job leaves, its output,
    /// is its owner's to remove: the writer does, L15). Their ids are never
    /// given again. SQLite reuses the pages they held.
    pub fn prune(&mut self, before: SystemTime, max: usize) -> Result<Vec<u64>, StoreError> {
        let Some((conn, path)) = &mut self.db else {
            return Ok(self.archive.prune_memory(before, max));
        };
        let sqlite = |source| StoreError::Sqlite {
            path: path.clone(),
            source,
        };
        let tx = conn.transaction().map_err(sqlite)?;
        let ids: Vec<i64> = tx
            .prepare_cached(
                "SELECT id FROM jobs INDEXED BY jobs_ended_at
                 WHERE ended_at IS NOT NULL AND ended_at < ?1 ORDER BY ended_at LIMIT ?2",
            )
            .and_then(|mut statement| {
                statement
                    .query_map(
                        params![millis(before), i64::try_from(max).unwrap_or(i64::MAX)],
                        |row| row.get(0),
                    )?
                    .collect()
            })
            .map_err(sqlite)?;
        for &job in &ids {
            tx.prepare_cached("DELETE FROM jobs WHERE id = ?1")
                .and_then(|mut statement| statement.execute(params![job]))
                .map_err(sqlite)?;
        }
        let highest = ids
            .iter()
            .filter_map(|&job| u64::try_from(job).ok())
            .fold(self.pruned_through, u64::max);
        if highest > self.pruned_through {
            tx.execute(
                "INSERT INTO meta (key, value) VALUES ('pruned_through', ?1)
                 ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                params![highest.to_string()],
            )
            .map_err(sqlite)?;
        }
        tx.commit().map_err(sqlite)?;
        self.pruned_through = highest;
        Ok(ids
            .into_iter()
            .filter_map(|job| u64::try_from(job).ok())
            .collect())
    }
}

/// The highest id in the jobs table, and the highest pruning removed.
fn last_ids(conn: &Connection) -> rusqlite::Result<(u64, u64)> {
    let highest: Option<i64> = conn.query_row("SELECT MAX(id) FROM jobs", [], |row| row.get(0))?;
    let pruned: Option<String> = conn
        .query_row(
            "SELECT value FROM meta WHERE key = 'pruned_through'",
            [],
            |row| row.get(0),
        )
        .optional()?;
    Ok((
        highest.and_then(|id| u64::try_from(id).ok()).unwrap_or(0),
        pruned.and_then(|text| text.parse().ok()).unwrap_or(0),
    ))
}

/// Holds a state directory for one service (L10): an OS lock on
/// `DIR/lock`, released when this is dropped or the process dies (a crash
/// included), so a second `billet serve` on the directory is refused and
/// the first is never touched.
#[derive(Debug)]
pub struct StateLock {
    _file: std::fs::File,
}

impl StateLock {
    /// Takes the lock of `dir` (made `0700` if missing, refused with
    /// [`StoreError::Exposed`] if it exists and is not the owner's alone), without waiting:
    /// [`StoreError::InUse`] when another holds it.
    pub fn acquire(dir: &Path) -> Result<StateLock, StoreError> {
        private_dir(dir)?;
        let path = dir.join(LOCK_FILE);
        let io = |source| StoreError::Io {
            path: path.clone(),
            source,
        };
        let mut options = std::fs::OpenOptions::new();
        options.read(true).write(true).create(true).truncate(false);
        #[cfg(unix)]
        {
            use std::os::unix::fs::OpenOptionsExt;
            options.mode(0o600);
        }
        let file = options.open(&path).map_err(io)?;
        match file.try_lock() {
            Ok(()) => Ok(StateLock { _file: file }),
            Err(std::fs::TryLockError::WouldBlock) => Err(StoreError::InUse {
                path: dir.to_owned(),
            }),
            Err(std::fs::TryLockError::Error(source)) => Err(io(source)),
        }
    }
}

/// Makes `dir` (and its missing parents) owner-only when it is missing; an
/// existing one must already be the owner's alone (L16): billet changes the
/// modes only of what it made, never an operator's directory (`/tmp` would
/// lose its sticky bit). A symlink is followed and its target checked.
fn private_dir(dir: &Path) -> Result<(), StoreError> {
    let io = |source| StoreError::Io {
        path: dir.to_owned(),
        source,
    };
    #[cfg(unix)]
    {
        use std::os::unix::fs::DirBuilderExt;
        match std::fs::metadata(dir) {
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                if let Some(parent) = dir.parent().filter(|p| !p.as_os_str().is_empty()) {
                    std::fs::DirBuilder::new()
                        .recursive(true)
                        .mode(0o700)
                        .create(parent)
                        .map_err(io)?;
                }
                // Not recursive: made here, or made by another in between
                // and checked below like any existing directory.
                match std::fs::DirBuilder::new().mode(0o700).create(dir) {
                    Ok(()) => return Ok(()),
                    Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
                    Err(e) => return Err(io(e)),
                }
            }
            Err(e) => return Err(io(e)),
        }
        let meta = std::fs::metadata(dir).map_err(io)?;
        exposure(
            dir,
            meta.is_dir(),
            std::os::unix::fs::MetadataExt::mode(&meta),
            std::os::unix::fs::MetadataExt::uid(&meta),
            rustix::process::geteuid().as_raw(),
        )
    }
    #[cfg(not(unix))]
    {
        std::fs::create_dir_all(dir).map_err(io)?;
        Ok(())
    }
}

/// Why an existing state directory `dir` (a directory when `is_dir`, of
/// `mode`, owned by `owner`) is refused to a service running as `user`:
/// anything but a directory, one group or others may enter or list, or one
/// another user owns.
fn exposure(dir: &Path, is_dir: bool, mode: u32, owner: u32, user: u32) -> Result<(), StoreError> {
    let path = dir.to_owned();
    if !is_dir {
        return Err(StoreError::Exposed {
            path,
            why: "it is not a directory".to_owned(),
        });
    }
    if mode & 0o077 != 0 {
        return Err(StoreError::Exposed {
            path,
            why: format!(
                "its mode {:04o} lets group or others in (job output and the store hold secrets); billet changes the modes only of what it makes: `chmod 700` it, or give --state a path that does not exist yet",
                mode & 0o7777
            ),
        });
    }
    if owner != user {
        return Err(StoreError::Exposed {
            path,
            why: format!("it is owned by user {owner}, not by the user billet runs as ({user})"),
        });
    }
    Ok(())
}

/// Leaves `path` readable and writable by its owner only; nothing when it
/// does not exist (SQLite's `-shm` may not, yet).
pub(crate) fn private_file(path: &Path) -> Result<(), StoreError> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        match std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600)) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(source) => Err(StoreError::Io {
                path: path.to_owned(),
                source,
            }),
        }
    }
    #[cfg(not(unix))]
    {
        let _ = path;
        Ok(())
    }
}

/// The store's identity, made when it has none: for a new store (`version`
/// 0), or one of layout 1, which also learns its last job then (its
/// instances carry no identity). Answers the identity and that job.
fn identify(conn: &Connection, version: i64) -> rusqlite::Result<(String, Option<JobId>)> {
    if (1..SCHEMA_VERSION).contains(&version) {
        // Layouts 1 and 2 lack the pinned pool: none of their jobs has one.
        let tx = conn.unchecked_transaction()?;
        tx.execute_batch(PINNED)?;
        if version >= IDENTITY_VERSION {
            tx.execute_batch(&format!("PRAGMA user_version = {SCHEMA_VERSION};"))?;
        }
        tx.commit()?;
    }
    if version < IDENTITY_VERSION {
        let mut bytes = [0u8; 8];
        rand::RngCore::fill_bytes(&mut rand::rng(), &mut bytes);
        let identity: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
        let tx = conn.unchecked_transaction()?;
        tx.execute_batch(META)?;
        tx.execute(
            "INSERT INTO meta (key, value) VALUES ('identity', ?1)",
            params![identity],
        )?;
        if version == 1 {
            let last: Option<i64> =
                tx.query_row("SELECT MAX(id) FROM jobs", [], |row| row.get(0))?;
            if let Some(last) = last {
                tx.execute(
                    "INSERT INTO meta (key, value) VALUES ('unnamed_through', ?1)",
                    params![last.to_string()],
                )?;
            }
        }
        tx.execute_batch(&format!("PRAGMA user_version = {SCHEMA_VERSION};"))?;
        tx.commit()?;
    }
    let value = |key: &str| -> rusqlite::Result<Option<String>> {
        conn.query_row(
            "SELECT value FROM meta WHERE key = ?1",
            params![key],
            |row| row.get(0),
        )
        .optional()
    };
    let identity = value("identity")?.unwrap_or_default();
    let through = value("unnamed_through")?
        .and_then(|text| text.parse::<u64>().ok())
        .map(JobId);
    Ok((identity, through))
}

/// Checks an existing file: SQLite reads it, finds it intact, and it holds
/// this release's layout or the one before (which opening brings up to
/// date). Answers the layout's version.
fn check(conn: &Connection) -> Result<i64, Checked> {
    let version: i64 = conn
        .query_row("PRAGMA user_version", [], |row| row.get(0))
        .map_err(Checked::of)?;
    let verdict: String = conn
        .query_row("PRAGMA quick_check", [], |row| row.get(0))
        .map_err(Checked::of)?;
    if verdict != "ok" {
        return Err(Checked::Damaged(format!(
            "SQLite's quick_check says: {verdict}"
        )));
    }
    if !(1..=SCHEMA_VERSION).contains(&version) {
        return Err(Checked::Damaged(format!(
            "layout version {version}, where this release reads 1 to {SCHEMA_VERSION}"
        )));
    }
    let table: Option<String> = conn
        .query_row(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name = 'jobs'",
            [],
            |row| row.get(0),
        )
        .optional()
        .map_err(Checked::of)?;
    if table.is_none() {
        return Err(Checked::Damaged("it has no jobs table".to_owned()));
    }
    Ok(version)
}

/// Why [`check`] refused a file.
enum Checked {
    /// It could not be read (I/O, no space for SQLite's files): nothing is
    /// known of its content.
    Unread(rusqlite::Error),
    /// It was read, and is not a billet store SQLite can read intact.
    Damaged(String),
}

impl Checked {
    /// A failed read: [`Checked::Unread`] when SQLite could not do the I/O
    /// (or had no space), else what it read makes the file
    /// [`Checked::Damaged`].
    fn of(error: rusqlite::Error) -> Checked {
        match error.sqlite_error_code() {
            Some(
                rusqlite::ErrorCode::SystemIoFailure
                | rusqlite::ErrorCode::DiskFull
                | rusqlite::ErrorCode::CannotOpen
                | rusqlite::ErrorCode::DatabaseBusy
                | rusqlite::ErrorCode::DatabaseLocked,
            ) => Checked::Unread(error),
            _ => Checked::Damaged(error.to_string()),
        }
    }
}

/// Whether `dir`'s file system has (next to) no space left for SQLite's
/// files: less than 1 MiB free to this user.
fn no_space(dir: &Path) -> bool {
    rustix::fs::statvfs(dir).is_ok_and(|fs| fs.f_bavail.saturating_mul(fs.f_frsize) < 1 << 20)
}

fn millis(at: SystemTime) -> i64 {
    let since = at
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap_or_default()
        .as_millis();
    i64::try_from(since).unwrap_or(i64::MAX)
}

fn time(millis: i64) -> SystemTime {
    SystemTime::UNIX_EPOCH + Duration::from_millis(u64::try_from(millis).unwrap_or(0))
}

fn json(values: &[String]) -> String {
    serde_json::to_string(values).unwrap_or_else(|_| "[]".to_owned())
}

fn id(id: u64) -> i64 {
    i64::try_from(id).unwrap_or(i64::MAX)
}

fn write(tx: &rusqlite::Transaction<'_>, change: &Change) -> rusqlite::Result<()> {
    match change {
        Change::Accepted(record) => {
            tx.prepare_cached(
                "INSERT INTO jobs (id, key, command, labels, trust, timeout_secs, state, submitted_at, pinned)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
            )?
            .execute(params![
                id(record.id),
                record.key,
                json(&record.command),
                json(&record.labels),
                trust_name(record.trust),
                record.timeout.map(|t| id(t.as_secs())),
                record.state.as_str(),
                millis(record.submitted_at),
                record.pinned,
            ])?;
        }
        Change::Requeued { id: job } => {
            tx.prepare_cached("UPDATE jobs SET state = 'queued' WHERE id = ?1")?
                .execute(params![id(*job)])?;
        }
        Change::Placed { id: job, pool, at } => {
            tx.prepare_cached(
                "UPDATE jobs SET state = 'running', pool = ?2, instance = NULL,
                 started_at = COALESCE(started_at, ?3) WHERE id = ?1",
            )?
            .execute(params![id(*job), pool, millis(*at)])?;
        }
        Change::Backed {
            id: job,
            pool,
            instance,
            at,
        } => {
            tx.prepare_cached(
                "UPDATE jobs SET state = 'running', pool = ?2, instance = ?3,
                 started_at = COALESCE(started_at, ?4) WHERE id = ?1",
            )?
            .execute(params![id(*job), pool, instance, millis(*at)])?;
        }
        Change::CancelRequested { id: job } => {
            tx.prepare_cached("UPDATE jobs SET cancel_requested = 1 WHERE id = ?1")?
                .execute(params![id(*job)])?;
        }
        Change::Decided { id: job, verdict } => {
            tx.prepare_cached(
                "UPDATE jobs SET ending_state = ?2, ending_exit_code = ?3, ending_reason = ?4 WHERE id = ?1",
            )?
            .execute(params![
                id(*job),
                verdict.state.as_str(),
                verdict.exit_code,
                verdict.reason
            ])?;
        }
        Change::Ended {
            id: job,
            verdict,
            at,
        } => {
            tx.prepare_cached(
                "UPDATE jobs SET state = ?2, exit_code = ?3, reason = ?4, ended_at = ?5,
                 ending_state = NULL, ending_exit_code = NULL, ending_reason = NULL WHERE id = ?1",
            )?
            .execute(params![
                id(*job),
                verdict.state.as_str(),
                verdict.exit_code,
                verdict.reason,
                millis(*at)
            ])?;
        }
    }
    Ok(())
}

/// A column that does not read as what this release wrote.
fn bad(column: &str, value: &str) -> rusqlite::Error {
    rusqlite::Error::InvalidColumnName(format!("{column} = {value:?}"))
}

/// A temporary directory only its owner may enter, as a state directory
/// must be (L16): `tempfile`'s follow the umask.
#[cfg(test)]
pub(crate) fn private_tempdir() -> tempfile::TempDir {
    use std::os::unix::fs::PermissionsExt;
    tempfile::Builder::new()
        .permissions(std::fs::Permissions::from_mode(0o700))
        .tempdir()
        .unwrap()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::Verdict;
    use crate::record::{JobState, NewJob};
    use billet_provider::TrustClass;
    use billet_scheduler::Outcome;

    fn record(id: u64, key: Option<&str>) -> JobRecord {
        JobRecord::accepted(
            id,
            NewJob {
                command: vec!["sh".into(), "-c".into(), "exit 3".into()],
                labels: vec!["linux".into()],
                trust: TrustClass::Trusted,
                timeout: Some(Duration::from_secs(30)),
                key: key.map(str::to_owned),
                pinned: None,
            },
            SystemTime::UNIX_EPOCH + Duration::from_millis(1_234),
        )
    }

    // L6: what is committed is read back, field for field, by the next open.
    #[test]
    fn l6_committed_changes_survive_a_reopen() {
        let dir = crate::store::private_tempdir();
        let (mut store, records) = Store::open(dir.path()).unwrap();
        assert!(records.is_empty());
        assert_eq!(store.path(), Some(dir.path().join(DATABASE_FILE).as_path()));
        let at = SystemTime::UNIX_EPOCH + Duration::from_secs(5);
        let changes = vec![
            Change::Accepted(Box::new(record(1, Some("k")))),
            Change::Accepted(Box::new(record(2, None))),
            Change::Accepted(Box::new(record(3, None))),
            Change::Placed {
                id: 1,
                pool: "linux".into(),
                at,
            },
            Change::Backed {
                id: 1,
                pool: "linux".into(),
                instance: "abc".into(),
                at,
            },
            Change::Decided {
                id: 1,
                verdict: Verdict::from(&Outcome::Finished { exit_code: 3 }),
            },
            Change::CancelRequested { id: 2 },
            Change::Ended {
                id: 2,
                verdict: Verdict::from(&Outcome::Cancelled),
                at,
            },
            Change::Placed {
                id: 3,
                pool: "linux".into(),
                at,
            },
            Change::Requeued { id: 3 },
        ];
        store.commit(&changes).unwrap();
        let mut expected = crate::jobs::Jobs::default();
        for change in &changes {
            expected.apply(change);
        }
        assert_eq!(store.last_id(), 3);
        drop(store);
        // The jobs not ended come back whole; the ended one stays in the
        // file, read field for field through the archive (L12).
        let (reopened, records) = Store::open(dir.path()).unwrap();
        let wanted: Vec<JobRecord> = expected.iter().cloned().collect();
        assert_eq!(records, wanted);
        assert_eq!(records.iter().map(|r| r.id).collect::<Vec<_>>(), [1, 3]);
        assert!(records[0].verdict.is_some());
        assert_eq!(records[1].state, JobState::Queued);
        let ended = reopened.archive().get(2).unwrap().expect("job 2 is kept");
        assert_eq!(Some(&ended), expected.find(2).unwrap().as_ref());
        assert!(ended.cancel_requested);
        assert_eq!(reopened.archive().get(1).unwrap(), None, "not ended");
        assert_eq!(reopened.last_id(), 3);
    }

    // L6: a damaged or foreign file stops the open, names the file, and is
    // left byte for byte as it was.
    #[test]
    fn l6_a_corrupt_store_is_refused_and_left_untouched() {
        let dir = crate::store::private_tempdir();
        let path = dir.path().join(DATABASE_FILE);
        std::fs::write(
            &path,
            b"this is not a database, and it is long enough to look like one".repeat(100),
        )
        .unwrap();
        let before = std::fs::read(&path).unwrap();
        let error = Store::open(dir.path()).unwrap_err();
        assert!(matches!(error, StoreError::Corrupt { .. }), "{error}");
        assert!(error.to_string().contains(&path.display().to_string()));
        assert_eq!(std::fs::read(&path).unwrap(), before);

        // A real database with its pages damaged.
        let dir = crate::store::private_tempdir();
        let (mut store, _) = Store::open(dir.path()).unwrap();
        let many: Vec<Change> = (1..=500)
            .map(|i| Change::Accepted(Box::new(record(i, None))))
            .collect();
        store.commit(&many).unwrap();
        drop(store);
        let path = dir.path().join(DATABASE_FILE);
        let mut bytes = std::fs::read(&path).unwrap();
        let len = bytes.len();
        for byte in &mut bytes[4096..len.min(4096 * 4)] {
            *byte = 0xA5;
        }
        std::fs::write(&path, &bytes).unwrap();
        let error = Store::open(dir.path()).unwrap_err();
        assert!(matches!(error, StoreError::Corrupt { .. }), "{error}");
        assert_eq!(std::fs::read(&path).unwrap(), bytes);
    }

    // L6: an empty file is an empty database: the store starts in it; a
    // file that cannot be looked at is an error, not a new store.
    #[test]
    fn l6_an_empty_file_starts_afresh_and_an_unreadable_one_is_an_error() {
        let dir = crate::store::private_tempdir();
        std::fs::write(dir.path().join(DATABASE_FILE), b"").unwrap();
        let (mut store, records) = Store::open(dir.path()).unwrap();
        assert!(records.is_empty());
        store
            .commit(&[Change::Accepted(Box::new(record(1, None)))])
            .unwrap();
        drop(store);
        assert_eq!(Store::open(dir.path()).unwrap().1.len(), 1);
        #[cfg(unix)]
        {
            let dir = crate::store::private_tempdir();
            let path = dir.path().join(DATABASE_FILE);
            std::os::unix::fs::symlink(&path, &path).unwrap();
            let error = Store::open(dir.path()).unwrap_err();
            assert!(matches!(error, StoreError::Io { .. }), "{error}");
        }
    }

    // L6: a database of another layout is refused too.
    #[test]
    fn l6_a_foreign_database_is_refused() {
        let dir = crate::store::private_tempdir();
        let path = dir.path().join(DATABASE_FILE);
        let conn = Connection::open(&path).unwrap();
        conn.execute_batch("CREATE TABLE other (x INTEGER);")
            .unwrap();
        drop(conn);
        let error = Store::open(dir.path()).unwrap_err();
        assert!(error.to_string().contains("layout version 0"), "{error}");
        let conn = Connection::open(&path).unwrap();
        conn.execute_batch("PRAGMA user_version = 1;").unwrap();
        drop(conn);
        let error = Store::open(dir.path()).unwrap_err();
        assert!(error.to_string().contains("no jobs table"), "{error}");
    }

    // L6: a transaction that fails writes none of its changes.
    #[test]
    fn l6_a_failed_commit_writes_nothing() {
        let dir = crate::store::private_tempdir();
        let (mut store, _) = Store::open(dir.path()).unwrap();
        store
            .commit(&[Change::Accepted(Box::new(record(1, Some("k"))))])
            .unwrap();
        // The second insert repeats a key: the whole batch is refused.
        let error = store.commit(&[
            Change::Accepted(Box::new(record(2, None))),
            Change::Accepted(Box::new(record(3, Some("k")))),
        ]);
        assert!(error.is_err());
        drop(store);
        let (_, records) = Store::open(dir.path()).unwrap();
        assert_eq!(records.len(), 1);
    }

    // L21: the first start records the deployment id; the same id goes on,
    // across opens; another is refused naming both, and changes nothing; a
    // store in memory takes any.
    #[test]
    fn l21_a_store_keeps_the_deployment_it_was_first_started_for() {
        let dir = crate::store::private_tempdir();
        let (mut store, _) = Store::open(dir.path()).unwrap();
        store.claim_deployment("ci-blue").unwrap();
        store.claim_deployment("ci-blue").unwrap();
        drop(store);
        let (mut store, _) = Store::open(dir.path()).unwrap();
        store.claim_deployment("ci-blue").unwrap();
        match store.claim_deployment("ci-green") {
            Err(StoreError::Deployment {
                stored, configured, ..
            }) => assert_eq!(
                (stored.as_str(), configured.as_str()),
                ("ci-blue", "ci-green")
            ),
            other => panic!("another deployment: {other:?}"),
        }
        let text = store.claim_deployment("ci-green").unwrap_err().to_string();
        assert!(
            text.contains("belongs to deployment `ci-blue`") && text.contains("names `ci-green`"),
            "{text}"
        );
        drop(store);
        let (mut store, _) = Store::open(dir.path()).unwrap();
        store.claim_deployment("ci-blue").unwrap();
        let mut memory = Store::memory();
        memory.claim_deployment("ci-blue").unwrap();
        memory.claim_deployment("ci-green").unwrap();
    }

    // L10: a store gets an identity when it is made, keeps it across opens,
    // and two stores never share one; a store in memory has none.
    #[test]
    fn l10_a_store_keeps_the_identity_it_was_made_with() {
        let dir = crate::store::private_tempdir();
        let (store, _) = Store::open(dir.path()).unwrap();
        let made = store.identity().cloned().expect("an identity");
        assert_eq!(made.as_str().len(), 16);
        assert_eq!(store.unnamed_through(), None);
        drop(store);
        let (again, _) = Store::open(dir.path()).unwrap();
        assert_eq!(again.identity(), Some(&made));
        let other = crate::store::private_tempdir();
        let (second, _) = Store::open(other.path()).unwrap();
        assert_ne!(second.identity(), Some(&made));
        assert_eq!(Store::memory().identity(), None);
        assert_eq!(Store::memory().unnamed_through(), None);
    }

    /// A database as the release before identities made it: layout 1.
    fn layout_one(dir: &Path, jobs: u64) {
        let conn = Connection::open(dir.join(DATABASE_FILE)).unwrap();
        conn.execute_batch(SCHEMA).unwrap();
        // Layout 1's jobs table: without the pinned pool of layout 3.
        conn.execute_batch("ALTER TABLE jobs DROP COLUMN pinned; PRAGMA user_version = 1;")
            .unwrap();
        for id in 1..=jobs {
            conn.execute(
                "INSERT INTO jobs (id, command, labels, trust, state, submitted_at)
                 VALUES (?1, '[\"true\"]', '[]', 'trusted', 'queued', 0)",
                params![id as i64],
            )
            .unwrap();
        }
    }

    // L10: a store of layout 1 is brought up to date when opened: it gets
    // an identity, and its jobs so far keep their names without one.
    #[test]
    fn l10_a_store_from_before_identities_gets_one() {
        let dir = crate::store::private_tempdir();
        layout_one(dir.path(), 3);
        let (store, records) = Store::open(dir.path()).unwrap();
        assert_eq!(records.len(), 3);
        let identity = store.identity().cloned().expect("an identity");
        assert_eq!(store.unnamed_through(), Some(JobId(3)));
        drop(store);
        let (again, _) = Store::open(dir.path()).unwrap();
        assert_eq!(again.identity(), Some(&identity));
        assert_eq!(again.unnamed_through(), Some(JobId(3)));
        // One with no jobs has no names to keep.
        let empty = crate::store::private_tempdir();
        layout_one(empty.path(), 0);
        let (store, _) = Store::open(empty.path()).unwrap();
        assert!(store.identity().is_some());
        assert_eq!(store.unnamed_through(), None);
        // A layout newer than this release's is refused, untouched.
        let newer = crate::store::private_tempdir();
        layout_one(newer.path(), 0);
        let conn = Connection::open(newer.path().join(DATABASE_FILE)).unwrap();
        conn.execute_batch("PRAGMA user_version = 4;").unwrap();
        drop(conn);
        let error = Store::open(newer.path()).unwrap_err();
        assert!(error.to_string().contains("layout version 4"), "{error}");
        assert!(error.to_string().contains("reads 1 to 3"), "{error}");
    }

    // B3, L10: a job's pinned pool is kept and read back; a store of layout
    // 2 is brought up to date when opened, keeping its identity and its
    // jobs (none of which is pinned).
    #[test]
    fn b3_a_pinned_pool_is_kept_and_layout_two_is_brought_up_to_date() {
        let dir = crate::store::private_tempdir();
        let (mut store, _) = Store::open(dir.path()).unwrap();
        let identity = store.identity().cloned().unwrap();
        let mut pinned = record(1, None);
        pinned.pinned = Some("gvisor".to_owned());
        store
            .commit(&[
                Change::Accepted(Box::new(pinned.clone())),
                Change::Accepted(Box::new(record(2, None))),
            ])
            .unwrap();
        drop(store);
        let (store, records) = Store::open(dir.path()).unwrap();
        assert_eq!(records, [pinned, record(2, None)]);
        drop(store);

        // Make it layout 2 again: no `pinned` column, version 2.
        let conn = Connection::open(dir.path().join(DATABASE_FILE)).unwrap();
        conn.execute_batch("ALTER TABLE jobs DROP COLUMN pinned; PRAGMA user_version = 2;")
            .unwrap();
        drop(conn);
        let (store, records) = Store::open(dir.path()).unwrap();
        assert_eq!(store.identity(), Some(&identity));
        assert_eq!(records.len(), 2);
        assert!(records.iter().all(|r| r.pinned.is_none()));
        drop(store);
        let conn = Connection::open(dir.path().join(DATABASE_FILE)).unwrap();
        let version: i64 = conn
            .query_row("PRAGMA user_version", [], |row| row.get(0))
            .unwrap();
        assert_eq!(version, SCHEMA_VERSION);
        assert_eq!(SCHEMA_VERSION, 3);
    }

    // L13: the directory 0700 and the store's files 0600, whatever the
    // umask and whatever they were.
    #[cfg(unix)]
    #[test]
    fn l13_the_state_and_the_store_are_private() {
        use std::os::unix::fs::PermissionsExt;
        let mode = |path: &Path| std::fs::metadata(path).unwrap().permissions().mode() & 0o777;
        let dir = crate::store::private_tempdir();
        let state = dir.path().join("state");
        let (mut store, _) = Store::open(&state).unwrap();
        store
            .commit(&[Change::Accepted(Box::new(record(1, None)))])
            .unwrap();
        assert_eq!(mode(&state), 0o700);
        for file in [DATABASE_FILE, "billet.db-wal", "billet.db-shm"] {
            assert_eq!(mode(&state.join(file)), 0o600, "{file}");
        }
        drop(store);
        // The store's files loosened by hand: billet made them, and sets
        // them back at the next open.
        for file in [DATABASE_FILE, "billet.db-wal"] {
            let path = state.join(file);
            if path.exists() {
                std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
            }
        }
        let _ = Store::open(&state).unwrap();
        assert_eq!(mode(&state), 0o700);
        assert_eq!(mode(&state.join(DATABASE_FILE)), 0o600);
    }

    // L16: an existing state directory others may enter is refused, and left
    // as it was (never chmod'ed: `--state /tmp` keeps its sticky bit); the
    // lock refuses it too, before anything is made in it.
    #[cfg(unix)]
    #[test]
    fn l16_an_existing_state_others_may_enter_is_refused_and_left_alone() {
        use std::os::unix::fs::PermissionsExt;
        let mode = |path: &Path| std::fs::metadata(path).unwrap().permissions().mode() & 0o7777;
        let dir = crate::store::private_tempdir();
        for loose in [0o1777, 0o755, 0o710, 0o701] {
            let state = dir.path().join(format!("state-{loose:o}"));
            std::fs::create_dir(&state).unwrap();
            std::fs::set_permissions(&state, std::fs::Permissions::from_mode(loose)).unwrap();
            let error = Store::open(&state).unwrap_err();
            let text = error.to_string();
            assert!(
                matches!(error, StoreError::Exposed { ref path, .. } if *path == state),
                "{text}"
            );
            assert!(text.contains(&format!("mode {loose:04o}")), "{text}");
            assert!(matches!(
                StateLock::acquire(&state),
                Err(StoreError::Exposed { .. })
            ));
            assert_eq!(mode(&state), loose, "left as it was");
            assert_eq!(
                std::fs::read_dir(&state).unwrap().count(),
                0,
                "nothing made in it"
            );
        }
        // An existing private one is taken as it is; a symlink is followed
        // and its target checked.
        let private = dir.path().join("private");
        std::fs::create_dir(&private).unwrap();
        std::fs::set_permissions(&private, std::fs::Permissions::from_mode(0o700)).unwrap();
        let link = dir.path().join("link");
        std::os::unix::fs::symlink(&private, &link).unwrap();
        let _ = Store::open(&link).unwrap();
        assert!(private.join(DATABASE_FILE).exists());
        let open = dir.path().join("open");
        std::fs::create_dir(&open).unwrap();
        std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o777)).unwrap();
        let to_open = dir.path().join("to-open");
        std::os::unix::fs::symlink(&open, &to_open).unwrap();
        assert!(matches!(
            Store::open(&to_open),
            Err(StoreError::Exposed { .. })
        ));
        assert_eq!(mode(&open), 0o777);
        // A missing one is made owner-only, parents included, whatever the
        // umask.
        let deep = dir.path().join("a/b/state");
        let _ = Store::open(&deep).unwrap();
        assert_eq!(mode(&deep), 0o700);
        assert_eq!(mode(&dir.path().join("a/b")), 0o700);
    }

    // L16: what refuses an existing state directory, one reason at a time.
    #[test]
    fn l16_a_state_directory_is_refused_for_each_reason_alone() {
        let dir = Path::new("/srv/state");
        let why = |result: Result<(), StoreError>| match result {
            Ok(()) => "accepted".to_owned(),
            Err(StoreError::Exposed { path, why }) => {
                assert_eq!(path, dir);
                why
            }
            Err(other) => panic!("{other}"),
        };
        assert_eq!(why(exposure(dir, true, 0o40700, 7, 7)), "accepted");
        assert_eq!(
            why(exposure(dir, true, 0o2700, 7, 7)),
            "accepted",
            "setgid lets no one in"
        );
        assert_eq!(
            why(exposure(dir, false, 0o700, 7, 7)),
            "it is not a directory"
        );
        for loose in [0o740, 0o720, 0o710, 0o704, 0o702, 0o701, 0o1777] {
            let text = why(exposure(dir, true, loose, 7, 7));
            assert!(
                text.starts_with(&format!("its mode {loose:04o} lets group or others in")),
                "{text}"
            );
        }
        assert_eq!(
            why(exposure(dir, true, 0o700, 0, 7)),
            "it is owned by user 0, not by the user billet runs as (7)"
        );
    }

    // L13: making a file private: set 0600, nothing for a file that is not
    // there (SQLite's -shm may not be), an error for any other failure.
    #[cfg(unix)]
    #[test]
    fn l13_private_files_are_set_so() {
        use std::os::unix::fs::PermissionsExt;
        let dir = crate::store::private_tempdir();
        let file = dir.path().join("file");
        std::fs::write(&file, "x").unwrap();
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o664)).unwrap();
        private_file(&file).unwrap();
        let mode = std::fs::metadata(&file).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        private_file(&dir.path().join("absent")).unwrap();
        assert!(!dir.path().join("absent").exists());
        assert!(matches!(
            private_file(&file.join("x")),
            Err(StoreError::Io { .. })
        ));
    }

    // L10: one lock per state directory; released when dropped (a crash
    // drops it too: the OS releases the lock with the process).
    #[test]
    fn l10_the_state_directory_is_locked() {
        let dir = crate::store::private_tempdir();
        let state = dir.path().join("state");
        let first = StateLock::acquire(&state).unwrap();
        match StateLock::acquire(&state) {
            Err(StoreError::InUse { path }) => assert_eq!(path, state),
            other => panic!("a second lock: {other:?}"),
        }
        let text = StateLock::acquire(&state).unwrap_err().to_string();
        assert!(text.contains("in use by another billet serve"), "{text}");
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(state.join(LOCK_FILE))
                .unwrap()
                .permissions()
                .mode();
            assert_eq!(mode & 0o777, 0o600);
        }
        drop(first);
        let again = StateLock::acquire(&state).unwrap();
        drop(again);
        let file = dir.path().join("a-file");
        std::fs::write(&file, "x").unwrap();
        assert!(
            matches!(
                StateLock::acquire(&file),
                Err(StoreError::Exposed { ref why, .. }) if why == "it is not a directory"
            ),
            "a file is no state directory"
        );
    }

    // The memory store commits anything and keeps nothing.
    #[test]
    fn a_memory_store_keeps_nothing() {
        let mut store = Store::memory();
        assert_eq!(store.path(), None);
        store
            .commit(&[Change::Accepted(Box::new(record(1, None)))])
            .unwrap();
    }
}
