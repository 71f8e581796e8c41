//! Mutual TLS to a daemon on `tcp://` (D17): [`ClientTls`], the files it is
//! read from, and the transport bollard sends its requests through.
//!
//! Only the pool's own CA is trusted to sign the daemon's certificate (never
//! the system's roots: a certificate a public CA issued for that address is
//! not a daemon of this fleet), and billet presents its client certificate
//! with every connection. Every file is read and checked when the
//! [`ClientTls`] is made, so a pool with a missing file, a file that holds no
//! certificate or key, or a key that is not its certificate's stops the start
//! instead of failing at the first call.

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use bollard::{BollardRequest, Docker};
use bytes::Bytes;
use http_body_util::{Either, Full};
use hyper::body::Body;
use hyper::{Method, Request};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::{TokioExecutor, TokioTimer};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::{ClientConfig, RootCertStore};

/// The most bytes read from one certificate or key file: PEM files of a CA,
/// a certificate chain or a key are a few kilobytes; anything past this is
/// not one, and is refused rather than read into memory.
pub const MAX_PEM_BYTES: u64 = 1 << 20;

/// Idle connections to one daemon kept open for the next call, at most. A
/// connection is kept after its answer (so a call does not pay a handshake),
/// and closed after [`IDLE_TIMEOUT`] unused.
pub const MAX_IDLE_CONNECTIONS: usize = 32;

/// How long an idle connection to a daemon is kept.
pub const IDLE_TIMEOUT: Duration = Duration::from_secs(30);

/// How many times a read (`GET` or `HEAD`, without a body) that failed on a
/// connection already open is sent again, each time as a new request: a kept
/// connection the daemon closed just as it was reused (the keep-alive race,
/// or a daemon restarted before the pool noticed) then costs no answer.
/// Nothing else is sent again: a write whose connection broke may have been
/// done, and the caller's own rules settle that. Each attempt is within the
/// call's one deadline.
pub const STALE_RETRIES: usize = 2;

/// Which of a pool's TLS files a [`TlsError`] is about, by the name
/// `billet.yaml` gives it (`tls: {ca, cert, key}`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TlsFile {
    /// The CA certificate(s) the daemon's certificate must be signed by.
    Ca,
    /// billet's client certificate (chain), presented to the daemon.
    Cert,
    /// The private key of the client certificate.
    Key,
}

impl fmt::Display for TlsFile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            TlsFile::Ca => "ca",
            TlsFile::Cert => "cert",
            TlsFile::Key => "key",
        })
    }
}

/// Why a pool's TLS files cannot be used. Each names the file, by its role
/// and its path.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum TlsError {
    /// The file could not be read (missing, unreadable, not a file, or
    /// larger than [`MAX_PEM_BYTES`]).
    #[error("cannot read the `{file}` file {}: {reason}", path.display())]
    Unreadable {
        /// Which file.
        file: TlsFile,
        /// Its path.
        path: PathBuf,
        /// The system's reason.
        reason: String,
    },
    /// The file was read, but holds no certificate (or key) that parses.
    #[error("the `{file}` file {} {reason}", path.display())]
    Malformed {
        /// Which file.
        file: TlsFile,
        /// Its path.
        path: PathBuf,
        /// What is wrong with it, as a predicate ("holds no PEM
        /// certificate").
        reason: String,
    },
    /// The key file may be read or written by group or others: whoever reads
    /// it is root on the daemon's machine.
    #[error(
        "the `key` file {} has mode {mode:04o}: group or others may read or write it, and whoever reads it is root on the daemon's machine; `chmod 600` it",
        path.display()
    )]
    Exposed {
        /// Its path.
        path: PathBuf,
        /// Its permission bits.
        mode: u32,
    },
    /// The key is not the private key of the client certificate.
    #[error(
        "the `key` file {} is not the private key of the `cert` file {}",
        key.display(),
        cert.display()
    )]
    KeyMismatch {
        /// The client certificate's path.
        cert: PathBuf,
        /// The key's path.
        key: PathBuf,
    },
}

/// The paths of a pool's TLS files.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsFiles {
    /// The CA certificate(s) that sign the daemon's certificate (PEM).
    pub ca: PathBuf,
    /// billet's client certificate, optionally followed by its chain (PEM).
    pub cert: PathBuf,
    /// The client certificate's private key (PEM: PKCS#8, PKCS#1 or SEC1).
    pub key: PathBuf,
}

/// Mutual TLS to a daemon, its files read and checked: the daemon's
/// certificate is verified against the CA of [`TlsFiles::ca`] alone, for the
/// host of the endpoint (a name or an IP address the certificate must name),
/// and the client certificate is presented with its key.
#[derive(Clone)]
pub struct ClientTls {
    files: TlsFiles,
    config: Arc<ClientConfig>,
}

impl fmt::Debug for ClientTls {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ClientTls")
            .field("files", &self.files)
            .finish_non_exhaustive()
    }
}

impl PartialEq for ClientTls {
    /// Two are equal when read from the same files.
    fn eq(&self, other: &Self) -> bool {
        self.files == other.files
    }
}

impl ClientTls {
    /// Reads and checks `files`: the CA must hold at least one certificate
    /// that parses as a trust anchor, `cert` at least one certificate, `key`
    /// one private key, and the key must be the certificate's. The key stays
    /// in memory only, inside the TLS configuration.
    pub fn load(files: TlsFiles) -> Result<ClientTls, TlsError> {
        let ca_pem = read(TlsFile::Ca, &files.ca)?;
        let cert_pem = read(TlsFile::Cert, &files.cert)?;
        let key_pem = read(TlsFile::Key, &files.key)?;
        let malformed = |file: TlsFile, path: &Path, reason: String| TlsError::Malformed {
            file,
            path: path.to_owned(),
            reason,
        };

        let mut roots = RootCertStore::empty();
        for cert in certificates(TlsFile::Ca, &files.ca, &ca_pem)? {
            roots.add(cert).map_err(|err| {
                malformed(
                    TlsFile::Ca,
                    &files.ca,
                    format!("holds a certificate that does not parse: {err}"),
                )
            })?;
        }
        let chain = certificates(TlsFile::Cert, &files.cert, &cert_pem)?;
        let key = PrivateKeyDer::from_pem_slice(&key_pem).map_err(|err| {
            malformed(
                TlsFile::Key,
                &files.key,
                format!("holds no PEM private key (PKCS#8, PKCS#1 or SEC1): {err}"),
            )
        })?;

        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let builder = ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|err| malformed(TlsFile::Cert, &files.cert, err.to_string()))?
            .with_root_certificates(roots);
        let config = builder
            .with_client_auth_cert(chain, key)
            .map_err(|err| match err {
                rustls::Error::InconsistentKeys(rustls::InconsistentKeys::KeyMismatch) => {
                    TlsError::KeyMismatch {
                        cert: files.cert.clone(),
                        key: files.key.clone(),
                    }
                }
                rustls::Error::InvalidCertificate(_) | rustls::Error::NoCertificatesPresented => {
                    malformed(
                        TlsFile::Cert,
                        &files.cert,
                        format!("holds a certificate that does not parse: {err}"),
                    )
                }
                other => malformed(
                    TlsFile::Key,
                    &files.key,
                    format!("holds a key billet cannot use: {other}"),
                ),
            })?;
        Ok(ClientTls {
            files,
            config: Arc::new(config),
        })
    }

    /// The files this was read from.
    pub fn files(&self) -> &TlsFiles {
        &self.files
    }

    /// A bollard client for the daemon at `address` (`host:port`) over this
    /// TLS: one connection pool per client, at most
    /// [`MAX_IDLE_CONNECTIONS`] idle, each closed after [`IDLE_TIMEOUT`].
    /// `backstop` is bollard's own whole-second timeout per request.
    pub(crate) fn client(
        &self,
        address: &str,
        backstop: u64,
    ) -> Result<Docker, bollard::errors::Error> {
        let mut http = HttpConnector::new();
        http.enforce_http(false);
        http.set_nodelay(true);
        let https = hyper_rustls::HttpsConnectorBuilder::new()
            .with_tls_config((*self.config).clone())
            .https_only()
            .enable_http1()
            .wrap_connector(http);
        let client = Client::builder(TokioExecutor::new())
            .pool_timer(TokioTimer::new())
            .pool_idle_timeout(IDLE_TIMEOUT)
            .pool_max_idle_per_host(MAX_IDLE_CONNECTIONS)
            .build(https);
        Docker::connect_with_custom_transport(
            move |request: BollardRequest| {
                let client = client.clone();
                async move {
                    let rereadable = matches!(*request.method(), Method::GET | Method::HEAD)
                        && request.body().size_hint().exact() == Some(0);
                    if !rereadable {
                        return client
                            .request(request)
                            .await
                            .map_err(bollard::errors::Error::from);
                    }
                    let (parts, _) = request.into_parts();
                    let mut retries = 0;
                    loop {
                        let mut again = Request::new(Either::Left(Full::new(Bytes::new())));
                        *again.method_mut() = parts.method.clone();
                        *again.uri_mut() = parts.uri.clone();
                        *again.version_mut() = parts.version;
                        *again.headers_mut() = parts.headers.clone();
                        match client.request(again).await {
                            // Not a new connection that failed: one that was
                            // open, closed under the request.
                            Err(error) if !error.is_connect() && retries < STALE_RETRIES => {
                                retries += 1;
                                tracing::debug!(%error, retries, uri = %parts.uri,
                                    "a kept connection to the daemon was closed; reading again");
                            }
                            answer => return answer.map_err(bollard::errors::Error::from),
                        }
                    }
                }
            },
            Some(format!("https://{address}")),
            backstop,
            bollard::API_DEFAULT_VERSION,
        )
    }
}

/// The bytes of `path`, at most [`MAX_PEM_BYTES`].
fn read(file: TlsFile, path: &Path) -> Result<Vec<u8>, TlsError> {
    use std::io::Read;
    let unreadable = |reason: String| TlsError::Unreadable {
        file,
        path: path.to_owned(),
        reason,
    };
    let opened = std::fs::File::open(path).map_err(|err| unreadable(err.to_string()))?;
    let metadata = opened
        .metadata()
        .map_err(|err| unreadable(err.to_string()))?;
    if !metadata.is_file() {
        return Err(unreadable("not a regular file".to_owned()));
    }
    #[cfg(unix)]
    if file == TlsFile::Key {
        let mode = std::os::unix::fs::PermissionsExt::mode(&metadata.permissions()) & 0o7777;
        if mode & 0o066 != 0 {
            return Err(TlsError::Exposed {
                path: path.to_owned(),
                mode,
            });
        }
    }
    let mut bytes = Vec::new();
    opened
        .take(MAX_PEM_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|err| unreadable(err.to_string()))?;
    if bytes.len() as u64 > MAX_PEM_BYTES {
        return Err(unreadable(format!(
            "larger than {MAX_PEM_BYTES} bytes, which no certificate or key file is"
        )));
    }
    Ok(bytes)
}

/// Every PEM certificate in `pem`; at least one.
fn certificates(
    file: TlsFile,
    path: &Path,
    pem: &[u8],
) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let malformed = |reason: String| TlsError::Malformed {
        file,
        path: path.to_owned(),
        reason,
    };
    let certs = CertificateDer::pem_slice_iter(pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|err| malformed(format!("holds no readable PEM certificate: {err}")))?;
    if certs.is_empty() {
        return Err(malformed("holds no PEM certificate".to_owned()));
    }
    Ok(certs)
}
