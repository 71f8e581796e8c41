//! The harness's HTTP client to the services it runs (H13).
//!
//! This is hyper's pooled client over plain TCP to the loopback listeners a
//! run starts, with keep-alive and `TCP_NODELAY`. It has no redirects, no
//! proxies and no retries: a service that answers anything unexpected
//! breaks the run, saying what it answered. An earlier client (reqwest)
//! parsed every request's URL again for its redirect policy, and that alone
//! was 3.5% of an in-memory run's CPU. This client takes a parsed [`Uri`],
//! made once per service start.
//!
//! Bounds: each request, from send to the last byte of its answer, takes
//! at most the client's `bound` of wall time (the run's `QUIESCENT_BOUND`).
//! At most `idle` connections per service are kept open between requests.
//! An answer's body is read whole: the services answer a job (a few hundred
//! bytes) or a page of at most 1,000 jobs.

use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::header::{AUTHORIZATION, CONTENT_TYPE, HeaderValue};
use hyper::{Method, Request, StatusCode, Uri};
use hyper_util::client::legacy::Client as Pooled;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;

/// A pooled keep-alive client. Every request it sends carries the one
/// bearer token it was made with.
#[derive(Clone)]
pub(super) struct Client {
    pooled: Pooled<HttpConnector, Full<Bytes>>,
    bearer: HeaderValue,
    bound: Duration,
}

impl std::fmt::Debug for Client {
    /// The bound only: the token is not shown.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client")
            .field("bound", &self.bound)
            .finish_non_exhaustive()
    }
}

/// What a service answered: its status and its whole body.
pub(super) struct Answer {
    pub(super) status: StatusCode,
    pub(super) body: Bytes,
}

impl Client {
    /// A client that sends `bearer` as each request's `Authorization`,
    /// keeps at most `idle` connections open per service, and gives each
    /// request at most `bound` of wall time.
    pub(super) fn new(bearer: &'static str, idle: usize, bound: Duration) -> Self {
        let mut connector = HttpConnector::new();
        connector.set_nodelay(true);
        let pooled = Pooled::builder(TokioExecutor::new())
            .pool_max_idle_per_host(idle)
            .build(connector);
        Self {
            pooled,
            bearer: HeaderValue::from_static(bearer),
            bound,
        }
    }

    /// `POST uri` with a JSON `body`.
    pub(super) async fn post_json(&self, uri: &Uri, body: String) -> Result<Answer, String> {
        self.send(Method::POST, uri, Some(body)).await
    }

    /// `GET uri`.
    pub(super) async fn get(&self, uri: &Uri) -> Result<Answer, String> {
        self.send(Method::GET, uri, None).await
    }

    /// `POST uri` with a JSON `body` and these `headers` besides (a GitHub
    /// delivery's).
    pub(super) async fn post_with(
        &self,
        uri: &Uri,
        headers: &[(&'static str, &str)],
        body: Bytes,
    ) -> Result<Answer, String> {
        let failed = |why: String| format!("POST {uri}: {why}");
        let mut request = Request::builder()
            .method(Method::POST)
            .uri(uri.clone())
            .header(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        let request = request
            .body(Full::new(body))
            .map_err(|e| failed(chain(&e)))?;
        self.exchange(request).await.map_err(failed)
    }

    /// One request, and its answer read whole, within the bound. An error
    /// names the method, the address and the cause, with its sources.
    async fn send(
        &self,
        method: Method,
        uri: &Uri,
        json: Option<String>,
    ) -> Result<Answer, String> {
        let failed = |why: String| format!("{method} {uri}: {why}");
        let mut request = Request::builder()
            .method(method.clone())
            .uri(uri.clone())
            .header(AUTHORIZATION, self.bearer.clone());
        let body = match json {
            Some(json) => {
                request =
                    request.header(CONTENT_TYPE, HeaderValue::from_static("application/json"));
                Full::new(Bytes::from(json))
            }
            None => Full::new(Bytes::new()),
        };
        let request = request.body(body).map_err(|e| failed(chain(&e)))?;
        self.exchange(request).await.map_err(failed)
    }

    /// Sends `request` and reads its answer whole, within the bound.
    async fn exchange(&self, request: Request<Full<Bytes>>) -> Result<Answer, String> {
        let exchange = async {
            let response = self.pooled.request(request).await.map_err(|e| chain(&e))?;
            let status = response.status();
            let body = response
                .into_body()
                .collect()
                .await
                .map_err(|e| format!("{status}, unreadable: {}", chain(&e)))?
                .to_bytes();
            Ok::<_, String>(Answer { status, body })
        };
        match tokio::time::timeout(self.bound, exchange).await {
            Ok(answered) => answered,
            Err(_) => Err(format!("no whole answer within {:?}", self.bound)),
        }
    }
}

/// An error and each of its sources, as `outer: inner: innermost`.
fn chain(error: &dyn std::error::Error) -> String {
    let mut said = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        said.push_str(": ");
        said.push_str(&cause.to_string());
        source = cause.source();
    }
    said
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug)]
    struct Outer(std::io::Error);
    impl std::fmt::Display for Outer {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("outer")
        }
    }
    impl std::error::Error for Outer {
        fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
            Some(&self.0)
        }
    }

    #[test]
    fn an_error_is_said_with_every_source() {
        let error = Outer(std::io::Error::other("inner"));
        assert_eq!(chain(&error), "outer: inner");
    }

    /// Runs `test` to its end on a runtime of its own.
    fn block_on<F: std::future::Future>(test: F) -> F::Output {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("a runtime")
            .block_on(test)
    }

    /// A listener on a free loopback port, and `/v1/jobs` at it.
    fn listener() -> (std::net::TcpListener, Uri) {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("a free port");
        let uri = format!(
            "http://{}/v1/jobs",
            listener.local_addr().expect("its address")
        )
        .parse()
        .expect("a valid address");
        (listener, uri)
    }

    #[test]
    fn a_listener_that_never_answers_fails_the_request_within_the_bound() {
        // Accepts and holds the connection, answering nothing, until the
        // client has given up and closed it.
        let (listener, uri) = listener();
        let held = std::thread::spawn(move || {
            use std::io::Read;
            let (mut socket, _) = listener.accept().unwrap();
            let mut sink = Vec::new();
            socket.read_to_end(&mut sink).unwrap_or_default()
        });
        let client = Client::new("Bearer t", 0, Duration::from_millis(50));
        let error = block_on(client.get(&uri))
            .err()
            .expect("no answer is an error");
        assert!(
            error.starts_with(&format!("GET {uri}: no whole answer within 50ms")),
            "{error}"
        );
        drop(client);
        assert!(held.join().unwrap() > 0, "the request was never sent");
    }

    #[test]
    fn a_request_carries_the_bearer_and_its_answer_is_read_whole() {
        let (listener, uri) = listener();
        let server = std::thread::spawn(move || {
            use std::io::{Read, Write};
            let (mut socket, _) = listener.accept().unwrap();
            let mut seen = Vec::new();
            let mut buf = [0u8; 1024];
            // The head and the 2-byte body.
            while !String::from_utf8_lossy(&seen).ends_with("\r\n\r\n{}") {
                let n = socket.read(&mut buf).unwrap();
                assert!(n > 0, "the client closed early");
                seen.extend_from_slice(&buf[..n]);
            }
            socket
                .write_all(b"HTTP/1.1 201 Created\r\ncontent-length: 8\r\n\r\n{\"id\":7}")
                .unwrap();
            String::from_utf8(seen).unwrap()
        });
        let client = Client::new("Bearer t", 1, Duration::from_secs(10));
        let answer = block_on(client.post_json(&uri, "{}".to_owned())).unwrap();
        assert_eq!(answer.status, StatusCode::CREATED);
        assert_eq!(&answer.body[..], b"{\"id\":7}");
        let head = server.join().unwrap().to_ascii_lowercase();
        assert!(head.starts_with("post /v1/jobs http/1.1\r\n"), "{head}");
        assert!(head.contains("authorization: bearer t\r\n"), "{head}");
        assert!(
            head.contains("content-type: application/json\r\n"),
            "{head}"
        );
    }
}
