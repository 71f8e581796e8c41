//! The bearer token (L3, L4): read from its file, or made (random, mode
//! 0600) when the file is missing; compared in constant time.

use std::io::Write;
use std::path::{Path, PathBuf};

use rand::RngCore;
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

/// Why the token could not be had.
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
    /// The file holds no token.
    #[error("the token file {path} is empty: write a token into it, or remove it to have one made")]
    Empty {
        /// The file.
        path: PathBuf,
    },
}

/// A token a request must present, kept only as its digest.
#[derive(Clone)]
pub struct Token {
    digest: [u8; 32],
}

impl std::fmt::Debug for Token {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Token(..)")
    }
}

impl Token {
    /// The token `text`.
    pub fn new(text: &str) -> Token {
        Token {
            digest: Sha256::digest(text.as_bytes()).into(),
        }
    }

    /// Whether `presented` is the token. The time taken depends on neither
    /// value: both are hashed, and the digests compared in constant time.
    pub fn matches(&self, presented: &str) -> bool {
        let digest: [u8; 32] = Sha256::digest(presented.as_bytes()).into();
        digest.ct_eq(&self.digest).into()
    }
}

/// Reads the token at `path` (surrounding whitespace dropped), or, when the
/// file does not exist, makes one: 32 random bytes in hex, written to a new
/// file of mode 0600 (its directory made if missing). Answers the token and
/// whether it was made.
pub fn load_or_create(path: &Path) -> Result<(String, bool), TokenError> {
    let io = |source| TokenError::Io {
        path: path.to_owned(),
        source,
    };
    match std::fs::read_to_string(path) {
        Ok(text) => {
            let token = text.trim();
            if token.is_empty() {
                return Err(TokenError::Empty {
                    path: path.to_owned(),
                });
            }
            return Ok((token.to_owned(), false));
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
    Ok((token, true))
}

#[cfg(test)]
mod tests {
    use super::*;

    // L3: a missing token file is made, mode 0600, with a random token; the
    // next start reads the same token back.
    #[test]
    fn l3_the_token_file_is_made_once_and_private() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state").join("token");
        let (made, created) = load_or_create(&path).unwrap();
        assert!(created);
        assert_eq!(made.len(), 64);
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(&path).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o600);
        }
        let (read, created) = load_or_create(&path).unwrap();
        assert!(!created);
        assert_eq!(read, made);
        let other = dir.path().join("other");
        let (second, _) = load_or_create(&other).unwrap();
        assert_ne!(second, made, "tokens are random");
        let folder = dir.path().join("a-folder");
        std::fs::create_dir(&folder).unwrap();
        match load_or_create(&folder) {
            Err(TokenError::Io { source, .. }) => {
                assert_eq!(source.kind(), std::io::ErrorKind::IsADirectory);
            }
            other => panic!("a folder is not a token file: {other:?}"),
        }
        std::fs::write(&other, "  \n").unwrap();
        assert!(matches!(
            load_or_create(&other),
            Err(TokenError::Empty { .. })
        ));
    }

    // L4: only the token itself matches.
    #[test]
    fn l4_only_the_token_matches() {
        let token = Token::new("secret");
        assert!(token.matches("secret"));
        for other in ["", "secre", "secret ", "Secret", "secretsecret"] {
            assert!(!token.matches(other), "{other:?}");
        }
        assert_eq!(format!("{token:?}"), "Token(..)");
    }
}
