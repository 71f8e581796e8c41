//! Credentials (L3, L4, L11, L13): the token file, one credential a line,
//! each with the grants it carries; read at start, or made (one random token
//! with every grant, mode 0600) when the file is missing. Tokens are kept
//! only as digests and compared in constant time.
//!
//! # The token file
//!
//! ```text
//! # every grant: what a created file holds, and a single-token setup
//! 9f2c...64 hex digits...
//! # Prometheus: reads /metrics, nothing else
//! 4b7e...  metrics
//! # a public intake: submits jobs, never `trusted` ones, and reads them
//! 77a1...  submit-untrusted,read
//! ```
//!
//! A line is `TOKEN` (every grant) or `TOKEN GRANTS`, GRANTS a
//! comma-separated list of [`Grant`] names. Blank lines and lines starting
//! with `#` are skipped. A token is at least [`MIN_TOKEN_LEN`] characters
//! with no whitespace. The file must not be readable or writable by group or
//! others. Anything else stops `serve` at start, naming the file and line.

use std::io::Write;
use std::path::{Path, PathBuf};

use rand::RngCore;
use sha2::{Digest, Sha256};
use subtle::{ConditionallySelectable, ConstantTimeEq};

/// The shortest token accepted (L13): shorter ones are too easy to guess.
pub const MIN_TOKEN_LEN: usize = 32;

/// What a credential may do (L11).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Grant {
    /// `POST /v1/jobs`, a job of any trust class.
    Submit,
    /// `POST /v1/jobs`, a job not claiming `trusted`.
    SubmitUntrusted,
    /// The `GET` paths but `/metrics`.
    Read,
    /// `DELETE /v1/jobs/{id}`.
    Cancel,
    /// `GET /metrics`.
    Metrics,
}

impl Grant {
    /// Every grant, in the order the file's documentation lists them.
    pub const ALL: [Grant; 5] = [
        Grant::Submit,
        Grant::SubmitUntrusted,
        Grant::Read,
        Grant::Cancel,
        Grant::Metrics,
    ];

    /// Its name in the token file and in a `403`'s error.
    pub const fn as_str(self) -> &'static str {
        match self {
            Grant::Submit => "submit",
            Grant::SubmitUntrusted => "submit-untrusted",
            Grant::Read => "read",
            Grant::Cancel => "cancel",
            Grant::Metrics => "metrics",
        }
    }

    /// The grant named `name` (exactly as listed), if any.
    pub fn parse(name: &str) -> Option<Grant> {
        Grant::ALL.into_iter().find(|grant| grant.as_str() == name)
    }

    const fn bit(self) -> u8 {
        1 << self as u8
    }
}

impl std::fmt::Display for Grant {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A set of grants.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Grants(u8);

impl Grants {
    /// Every grant: what a token alone on its line holds.
    pub const fn all() -> Grants {
        // One bit a grant, numbered in declaration order.
        Grants((1 << Grant::ALL.len()) - 1)
    }

    /// No grant.
    pub const fn none() -> Grants {
        Grants(0)
    }

    /// The same set with `grant` in it.
    #[must_use]
    pub const fn with(self, grant: Grant) -> Grants {
        Grants(self.0 | grant.bit())
    }

    /// Whether `grant` is in the set.
    pub const fn has(self, grant: Grant) -> bool {
        self.0 & grant.bit() != 0
    }

    /// Whether the set may submit a job claiming `trusted`
    /// (`submit`), or only others (`submit-untrusted`), or none.
    pub const fn may_submit(self, trusted: bool) -> bool {
        self.has(Grant::Submit) || (!trusted && self.has(Grant::SubmitUntrusted))
    }
}

/// Why the credentials could not be had.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TokenError {
    /// The file could not be read or made.
    #[error("the token file {path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// The file holds no credential.
    #[error(
        "the token file {path} holds no token: write one into it, or remove it to have one made"
    )]
    Empty {
        /// The file.
        path: PathBuf,
    },
    /// Group or others may read or write the file (L13).
    #[error(
        "the token file {path} has mode {mode:04o}: group and others must not read or write it (chmod 600 {path})"
    )]
    Exposed {
        /// The file.
        path: PathBuf,
        /// Its permission bits.
        mode: u32,
    },
    /// A line is not a credential (L11, L13).
    #[error("the token file {path}, line {line}: {reason}")]
    Line {
        /// The file.
        path: PathBuf,
        /// The line's number, from 1.
        line: usize,
        /// What is wrong with it.
        reason: String,
    },
}

/// One credential: a token's digest and what it may do.
#[derive(Clone)]
struct Credential {
    digest: [u8; 32],
    grants: Grants,
    scope: KeyScope,
}

/// Where a credential's idempotency keys live (L18): a key names a job only
/// among the jobs the same credential submitted, so two credentials using
/// the same key scheme never answer each other's jobs. Derived from the
/// token's digest under a label of its own, so it is the same at every start
/// with the same token file, and says nothing of the token: it is what the
/// store keeps beside a key. A rotated token starts a new scope.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct KeyScope([u8; 8]);

impl KeyScope {
    fn of(digest: &[u8; 32]) -> KeyScope {
        let mut hasher = Sha256::new();
        hasher.update(b"billet idempotency-key scope\n");
        hasher.update(digest);
        let full: [u8; 32] = hasher.finalize().into();
        let mut scope = [0; 8];
        scope.copy_from_slice(&full[..8]);
        KeyScope(scope)
    }

    /// `key` as the store keeps it: this scope's 16 hex digits, `:`, the key.
    pub fn qualify(&self, key: &str) -> String {
        let mut out = String::with_capacity(17 + key.len());
        for byte in self.0 {
            out.push_str(&format!("{byte:02x}"));
        }
        out.push(':');
        out.push_str(key);
        out
    }
}

impl std::fmt::Debug for KeyScope {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("KeyScope(..)")
    }
}

/// Who made a request: its credential's grants and key scope.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Caller {
    /// What it may do (L11).
    pub grants: Grants,
    /// Where its idempotency keys live (L18).
    pub scope: KeyScope,
}

/// The credentials a request's bearer token is checked against.
#[derive(Clone)]
pub struct Credentials {
    entries: Vec<Credential>,
}

impl std::fmt::Debug for Credentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Credentials({} tokens)", self.entries.len())
    }
}

impl From<&str> for Credentials {
    /// One token with every grant.
    fn from(token: &str) -> Credentials {
        Credentials::single(token)
    }
}

impl Credential {
    fn new(digest: [u8; 32], grants: Grants) -> Credential {
        Credential {
            digest,
            grants,
            scope: KeyScope::of(&digest),
        }
    }
}

fn digest(text: &str) -> [u8; 32] {
    Sha256::digest(text.as_bytes()).into()
}

impl Credentials {
    /// One token with every grant: a single-token setup.
    pub fn single(token: &str) -> Credentials {
        Credentials {
            entries: vec![Credential::new(digest(token), Grants::all())],
        }
    }

    /// Reads the token file's text (the module's documentation says its
    /// form); `path` only names it in errors.
    pub fn parse(text: &str, path: &Path) -> Result<Credentials, TokenError> {
        let mut entries = Vec::new();
        for (index, raw) in text.lines().enumerate() {
            let line = raw.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let fail = |reason: String| TokenError::Line {
                path: path.to_owned(),
                line: index + 1,
                reason,
            };
            let mut words = line.split_whitespace();
            let token = words.next().unwrap_or_default();
            let grants = match (words.next(), words.next()) {
                (None, _) => Grants::all(),
                (Some(list), None) => parse_grants(list).map_err(fail)?,
                (Some(_), Some(_)) => {
                    return Err(fail(
                        "more than a token and its grants (grants are comma-separated, without spaces)"
                            .to_owned(),
                    ));
                }
            };
            let length = token.chars().count();
            if length < MIN_TOKEN_LEN {
                return Err(fail(format!(
                    "the token is {length} characters long; a token is at least {MIN_TOKEN_LEN}"
                )));
            }
            let digest = digest(token);
            if entries.iter().any(|e: &Credential| e.digest == digest) {
                return Err(fail("the token is listed twice".to_owned()));
            }
            entries.push(Credential::new(digest, grants));
        }
        if entries.is_empty() {
            return Err(TokenError::Empty {
                path: path.to_owned(),
            });
        }
        Ok(Credentials { entries })
    }

    /// The grants of `presented`, or `None` when it is no credential's
    /// token: [`Credentials::caller`]'s grants.
    pub fn grants(&self, presented: &str) -> Option<Grants> {
        self.caller(presented).map(|caller| caller.grants)
    }

    /// The credential `presented` is the token of, or `None` when it is
    /// none's. Every credential is compared, each in constant time, so the
    /// time taken says neither which one matched nor how much of it.
    pub fn caller(&self, presented: &str) -> Option<Caller> {
        let presented = digest(presented);
        let mut grants = Grants::none();
        let mut scope = [0u8; 8];
        let mut matched = subtle::Choice::from(0);
        for entry in &self.entries {
            let hit = presented.ct_eq(&entry.digest);
            matched |= hit;
            grants = Grants(u8::conditional_select(&grants.0, &entry.grants.0, hit));
            for (byte, theirs) in scope.iter_mut().zip(entry.scope.0) {
                *byte = u8::conditional_select(byte, &theirs, hit);
            }
        }
        bool::from(matched).then_some(Caller {
            grants,
            scope: KeyScope(scope),
        })
    }

    /// How many credentials there are (at least one, once parsed).
    pub(crate) fn len(&self) -> usize {
        self.entries.len()
    }
}

fn parse_grants(list: &str) -> Result<Grants, String> {
    let mut grants = Grants::none();
    for name in list.split(',') {
        match Grant::parse(name) {
            Some(grant) => grants = grants.with(grant),
            None => {
                let known: Vec<&str> = Grant::ALL.iter().map(|g| g.as_str()).collect();
                return Err(format!(
                    "unknown grant {name:?}: the grants are {}",
                    known.join(", ")
                ));
            }
        }
    }
    Ok(grants)
}

/// Reads the credentials at `path`, or, when the file does not exist,
/// makes it: one token of 32 random bytes in hex, with every grant, in a new
/// file of mode 0600 (its directory made if missing). Answers them and
/// whether the file was made. A file group or others may read or write is
/// refused (L13).
pub fn load_or_create(path: &Path) -> Result<(Credentials, bool), TokenError> {
    let io = |source| TokenError::Io {
        path: path.to_owned(),
        source,
    };
    match std::fs::read_to_string(path) {
        Ok(text) => {
            #[cfg(unix)]
            {
                use std::os::unix::fs::PermissionsExt;
                let mode = std::fs::metadata(path).map_err(io)?.permissions().mode() & 0o7777;
                if mode & 0o066 != 0 {
                    return Err(TokenError::Exposed {
                        path: path.to_owned(),
                        mode,
                    });
                }
            }
            return Ok((Credentials::parse(&text, path)?, false));
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(io(e)),
    }
    if let Some(dir) = path.parent().filter(|dir| !dir.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(io)?;
    }
    let mut bytes = [0u8; 32];
    rand::rng().fill_bytes(&mut bytes);
    let token: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600);
    }
    let mut file = options.open(path).map_err(io)?;
    file.write_all(token.as_bytes())
        .and_then(|()| file.write_all(b"\n"))
        .and_then(|()| file.sync_all())
        .map_err(io)?;
    Ok((Credentials::single(&token), true))
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: &str = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
    const B: &str = "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb";
    const C: &str = "cccccccccccccccccccccccccccccccc";

    fn path() -> PathBuf {
        PathBuf::from("/etc/billet/token")
    }

    // L3, L13: a missing token file is made, mode 0600, with a random
    // token of every grant; the next start reads the same back.
    #[test]
    fn l3_the_token_file_is_made_once_and_private() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state").join("token");
        let (made, created) = load_or_create(&path).unwrap();
        assert!(created);
        let text = std::fs::read_to_string(&path).unwrap();
        let token = text.trim();
        assert_eq!(token.len(), 64);
        assert_eq!(made.grants(token), Some(Grants::all()));
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(&path).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o600);
        }
        let (read, created) = load_or_create(&path).unwrap();
        assert!(!created);
        assert_eq!(read.grants(token), Some(Grants::all()));
        let other = dir.path().join("other");
        let (second, _) = load_or_create(&other).unwrap();
        assert_eq!(second.grants(token), None, "tokens are random");
        let folder = dir.path().join("a-folder");
        std::fs::create_dir(&folder).unwrap();
        match load_or_create(&folder) {
            Err(TokenError::Io { source, .. }) => {
                assert_eq!(source.kind(), std::io::ErrorKind::IsADirectory);
            }
            other => panic!("a folder is not a token file: {other:?}"),
        }
        std::fs::write(&other, "  \n# only a comment\n").unwrap();
        assert!(matches!(
            load_or_create(&other),
            Err(TokenError::Empty { .. })
        ));
    }

    // L13: a token file group or others may read (or write) is refused,
    // saying its mode; 0600 and 0400 are fine.
    #[cfg(unix)]
    #[test]
    fn l13_an_exposed_token_file_is_refused() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("token");
        std::fs::write(&path, format!("{A}\n")).unwrap();
        for (mode, refused) in [
            (0o644, true),
            (0o640, true),
            (0o604, true),
            (0o620, true),
            (0o602, true),
            (0o600, false),
            (0o400, false),
            (0o700, false),
        ] {
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).unwrap();
            match load_or_create(&path) {
                Err(TokenError::Exposed { mode: seen, .. }) => {
                    assert!(refused, "{mode:o}");
                    assert_eq!(seen, mode);
                }
                Ok(_) => assert!(!refused, "{mode:o} should be refused"),
                Err(other) => panic!("{mode:o}: {other}"),
            }
        }
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        let text = load_or_create(&path).unwrap_err().to_string();
        assert!(
            text.contains("0644") && text.contains("chmod 600"),
            "{text}"
        );
    }

    // L11: one credential a line, with its grants; comments and blank lines
    // skipped; a token alone has every grant.
    #[test]
    fn l11_each_line_is_a_credential_with_its_grants() {
        let text = format!(
            "# the operator\n{A}\n\n  # Prometheus\n{B} metrics\n{C}\tsubmit-untrusted,read,cancel\n"
        );
        let credentials = Credentials::parse(&text, &path()).unwrap();
        assert_eq!(credentials.len(), 3);
        assert_eq!(credentials.grants(A), Some(Grants::all()));
        let metrics = credentials.grants(B).unwrap();
        assert_eq!(metrics, Grants::none().with(Grant::Metrics));
        let intake = credentials.grants(C).unwrap();
        for (grant, has) in [
            (Grant::Submit, false),
            (Grant::SubmitUntrusted, true),
            (Grant::Read, true),
            (Grant::Cancel, true),
            (Grant::Metrics, false),
        ] {
            assert_eq!(intake.has(grant), has, "{grant}");
        }
        assert!(intake.may_submit(false));
        assert!(!intake.may_submit(true));
        assert!(Grants::all().may_submit(true));
        assert!(!metrics.may_submit(false));
        assert_eq!(
            credentials.grants("nobody's token, long enough to be one"),
            None
        );
        assert_eq!(credentials.grants(""), None);
        assert_eq!(credentials.grants(&A[1..]), None);
        assert_eq!(format!("{credentials:?}"), "Credentials(3 tokens)");
        let single = Credentials::from(A);
        assert_eq!(single.grants(A), Some(Grants::all()));
        assert_eq!(single.grants(B), None);
    }

    // L18: each credential has a key scope of its own, the same at every
    // start with the same token, and a key is kept qualified by it.
    #[test]
    fn l18_each_credential_keeps_its_keys_in_a_scope_of_its_own() {
        let text = format!("{A}\n{B} metrics\n{C} submit\n");
        let credentials = Credentials::parse(&text, &path()).unwrap();
        let again = Credentials::parse(&format!("{C} read\n{A}\n"), &path()).unwrap();
        let [a, b, c] = [A, B, C].map(|token| credentials.caller(token).unwrap());
        assert_eq!(c.grants, Grants::none().with(Grant::Submit));
        assert_eq!(b.grants, Grants::none().with(Grant::Metrics));
        assert_ne!(a.scope, b.scope);
        assert_ne!(a.scope, c.scope);
        assert_ne!(b.scope, c.scope);
        assert_eq!(
            again.caller(A).unwrap().scope,
            a.scope,
            "the same token, the same scope"
        );
        assert_eq!(
            again.caller(C).unwrap().scope,
            c.scope,
            "whatever its line or grants"
        );
        assert_eq!(Credentials::from(A).caller(A).unwrap().scope, a.scope);
        assert_eq!(
            credentials.caller("nobody's token, long enough to be one"),
            None
        );
        let qualified = a.scope.qualify("build-7");
        assert_eq!(qualified.len(), 16 + 1 + "build-7".len(), "{qualified}");
        assert!(qualified.ends_with(":build-7"), "{qualified}");
        assert!(
            qualified[..16].bytes().all(|b| b.is_ascii_hexdigit()),
            "{qualified}"
        );
        assert_ne!(qualified, c.scope.qualify("build-7"));
        assert!(!qualified.contains(&A[..8]), "the token is not in it");
        assert_eq!(format!("{:?}", a.scope), "KeyScope(..)");
    }

    // L11, L13: a line that is not a credential stops the start, naming the
    // line and what is wrong.
    #[test]
    fn l11_a_bad_line_is_refused_with_its_number() {
        for (text, line, says) in [
            (format!("{A} submit,write\n"), 1, "unknown grant \"write\""),
            (format!("{A}\n{B} submit, read\n"), 2, "more than a token"),
            ("# x\n\nshort\n".to_owned(), 3, "5 characters long"),
            (format!("{A} Submit\n"), 1, "unknown grant \"Submit\""),
            (format!("{A} \n{A} read\n"), 2, "listed twice"),
            (format!("{A} submit,\n"), 1, "unknown grant \"\""),
        ] {
            match Credentials::parse(&text, &path()) {
                Err(TokenError::Line {
                    line: seen, reason, ..
                }) => {
                    assert_eq!(seen, line, "{text:?}");
                    assert!(reason.contains(says), "{text:?}: {reason}");
                }
                other => panic!("{text:?}: {other:?}"),
            }
        }
        let error = Credentials::parse("tiny\n", &path())
            .unwrap_err()
            .to_string();
        assert!(error.contains("/etc/billet/token, line 1"), "{error}");
        let exactly = "x".repeat(MIN_TOKEN_LEN);
        assert!(Credentials::parse(&exactly, &path()).is_ok());
        assert!(Credentials::parse(&exactly[1..], &path()).is_err());
    }

    #[test]
    fn l11_grants_have_names() {
        for grant in Grant::ALL {
            assert_eq!(Grant::parse(grant.as_str()), Some(grant));
            assert_eq!(grant.to_string(), grant.as_str());
        }
        assert_eq!(Grant::parse("all"), None);
        let names: Vec<&str> = Grant::ALL.iter().map(|g| g.as_str()).collect();
        assert_eq!(
            names,
            ["submit", "submit-untrusted", "read", "cancel", "metrics"]
        );
        assert!(!Grants::none().has(Grant::Read));
        let every = Grant::ALL
            .into_iter()
            .fold(Grants::none(), |grants, grant| grants.with(grant));
        assert_eq!(Grants::all(), every);
        // Adding a grant held already changes nothing.
        assert_eq!(Grants::all().with(Grant::Read), Grants::all());
        let read = Grants::none().with(Grant::Read);
        assert_eq!(read.with(Grant::Read), read);
        for grant in Grant::ALL {
            assert!(Grants::all().has(grant));
            let one = Grants::none().with(grant);
            for other in Grant::ALL {
                assert_eq!(one.has(other), other == grant);
            }
        }
    }
}
