//! [`Endpoint`]: where the docker daemon listens.

use std::fmt;
use std::path::PathBuf;

/// The socket every docker daemon on Linux listens on unless told otherwise.
pub const DEFAULT_SOCKET: &str = "/var/run/docker.sock";

/// Where a docker daemon listens: a unix socket, or TCP.
///
/// Parsed from the forms docker itself uses: `unix:///var/run/docker.sock`,
/// an absolute socket path, or `tcp://host:port` (also `http://`). A TCP
/// endpoint is plain HTTP unless the provider is given mutual TLS
/// ([`Builder::tls`](crate::Builder::tls), D17), as docker's own client
/// takes `tcp://` with `--tlsverify`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Endpoint {
    /// A unix socket at this path.
    Unix(PathBuf),
    /// TCP at `host:port`: plain HTTP, or mutual TLS when the provider has it.
    Tcp(String),
}

impl Endpoint {
    /// Parses an endpoint; answers why not, and the forms expected, when the
    /// text is none of them.
    pub fn parse(text: &str) -> Result<Endpoint, String> {
        let expected =
            "expected unix:///path/to/docker.sock, an absolute socket path, or tcp://host:port";
        if let Some(path) = text.strip_prefix("unix://") {
            if path.starts_with('/') {
                return Ok(Endpoint::Unix(PathBuf::from(path)));
            }
            return Err(format!(
                "docker endpoint {text:?} has no absolute socket path: {expected}"
            ));
        }
        if text.starts_with('/') {
            return Ok(Endpoint::Unix(PathBuf::from(text)));
        }
        for scheme in ["tcp://", "http://"] {
            if let Some(address) = text.strip_prefix(scheme) {
                let address = address.trim_end_matches('/');
                if address.is_empty() || address.contains('/') {
                    return Err(format!(
                        "docker endpoint {text:?} has no host:port: {expected}"
                    ));
                }
                return Ok(Endpoint::Tcp(address.to_owned()));
            }
        }
        Err(format!(
            "docker endpoint {text:?} is not understood: {expected}"
        ))
    }
}

impl Default for Endpoint {
    /// The local socket, [`DEFAULT_SOCKET`].
    fn default() -> Self {
        Endpoint::Unix(PathBuf::from(DEFAULT_SOCKET))
    }
}

impl fmt::Display for Endpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Endpoint::Unix(path) => write!(f, "unix://{}", path.display()),
            Endpoint::Tcp(address) => write!(f, "tcp://{address}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // D1: the endpoint forms docker uses parse; anything else is refused with the expected forms.
    #[test]
    fn d1_endpoint_forms() {
        assert_eq!(
            Endpoint::parse("unix:///var/run/docker.sock"),
            Ok(Endpoint::Unix("/var/run/docker.sock".into()))
        );
        assert_eq!(
            Endpoint::parse("/run/user/1000/docker.sock"),
            Ok(Endpoint::Unix("/run/user/1000/docker.sock".into()))
        );
        assert_eq!(
            Endpoint::parse("tcp://10.0.0.5:2375"),
            Ok(Endpoint::Tcp("10.0.0.5:2375".into()))
        );
        assert_eq!(
            Endpoint::parse("http://dockerd:2375/"),
            Ok(Endpoint::Tcp("dockerd:2375".into()))
        );
        for bad in [
            "",
            "docker.sock",
            "unix://relative.sock",
            "https://h:2376",
            "tcp://",
            "tcp://h:1/x",
        ] {
            let err = Endpoint::parse(bad).unwrap_err();
            assert!(err.contains("expected unix://"), "{err}");
        }
        assert_eq!(
            Endpoint::default().to_string(),
            "unix:///var/run/docker.sock"
        );
        assert_eq!(Endpoint::Tcp("h:1".into()).to_string(), "tcp://h:1");
    }
}
