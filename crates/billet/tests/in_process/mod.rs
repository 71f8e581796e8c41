//! The service in process over the simulated backend, with one pool of
//! two, five credentials and a real listener on loopback: what the tests of
//! limits (`limits.rs`) and of a full disk (`disk.rs`) start.

#![allow(dead_code)]

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use billet::output::Capturing;
use billet::record::JobRecord;
use billet::token::Credentials;
use billet::{Limits, Service, Store};
use billet_clock::{Clock, SystemClock};
use billet_config::Config;
use billet_provider::Provider;
use billet_scheduler::{Pools, Settings};
use billet_simulated::{Host, SimulatedProvider};
use reqwest::StatusCode;
use serde_json::Value;
use tokio::net::TcpListener;

use crate::client::support_client;

pub(crate) const ALL: &str = "all-grants-token-0123456789abcdef";
pub(crate) const METRICS: &str = "metrics-only-token-0123456789abc";
pub(crate) const INTAKE: &str = "untrusted-intake-token-012345678";
pub(crate) const READER: &str = "read-only-token-0123456789abcdef";
pub(crate) const SUBMITTER: &str = "submit-only-token-0123456789abcd";

pub(crate) fn config() -> Config {
    Config::from_yaml_str(
        "deployment: {id: limits}
providers:
  - {name: linux, kind: docker, capacity: 2, docker: {image: img}}
routing: {default_kind: docker, untrusted_kinds: [docker]}
",
    )
    .unwrap()
}

pub(crate) struct Running {
    pub(crate) service: Service,
    pub(crate) base: String,
    pub(crate) client: reqwest::Client,
}

pub(crate) async fn start(host: &Host, store: Option<&Path>, limits: Limits) -> Running {
    start_on(host, store, limits, Arc::new(SystemClock)).await
}

pub(crate) async fn start_on(
    host: &Host,
    store: Option<&Path>,
    limits: Limits,
    clock: Arc<dyn Clock>,
) -> Running {
    let mut provider: Arc<dyn Provider> = Arc::new(
        SimulatedProvider::builder("limits")
            .host(host.clone())
            .clock(Arc::clone(&clock))
            .build()
            .unwrap(),
    );
    // Output is captured where the service keeps it, as `billet serve` does.
    if let Some(output) = &limits.output {
        provider = Arc::new(Capturing::new(provider, Arc::clone(output)));
    }
    let pools = Pools::builder(config())
        .provider("linux", provider)
        .settings(Settings {
            reconcile_every: Duration::from_millis(50),
            call_timeout: Duration::from_secs(5),
            orphan_grace: Duration::from_millis(200),
            ..Settings::default()
        })
        .build()
        .unwrap();
    let (store, records): (Store, Vec<JobRecord>) = match store {
        Some(dir) => Store::open(dir).unwrap(),
        None => (Store::memory(), Vec::new()),
    };
    let credentials = Credentials::parse(
        &format!(
            "# the table of L11\n{ALL}\n{METRICS} metrics\n{INTAKE} submit-untrusted,read\n{READER} read\n{SUBMITTER} submit\n"
        ),
        Path::new("token"),
    )
    .unwrap();
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let service = Service::start_with(&pools, store, records, clock, credentials, listener, limits)
        .await
        .unwrap();
    let base = format!("http://{}", service.addr());
    Running {
        service,
        base,
        client: support_client(),
    }
}

impl Running {
    pub(crate) async fn call(
        &self,
        auth: &str,
        method: &str,
        path: &str,
        body: Option<Value>,
    ) -> (StatusCode, Value) {
        let method = reqwest::Method::from_bytes(method.as_bytes()).unwrap();
        let mut request = self
            .client
            .request(method, format!("{}{path}", self.base))
            .header("Authorization", auth);
        if let Some(body) = body {
            request = request.body(body.to_string());
        }
        let response = request.send().await.unwrap();
        let status = response.status();
        let text = response.text().await.unwrap();
        (
            status,
            serde_json::from_str(&text).unwrap_or(Value::String(text)),
        )
    }

    pub(crate) async fn jobs(&self) -> usize {
        let (_, list) = self
            .call(&format!("Bearer {ALL}"), "GET", "/v1/jobs", None)
            .await;
        list["jobs"].as_array().unwrap().len()
    }

    pub(crate) async fn until_ended(&self, id: u64) -> Value {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let (_, job) = self
                .call(
                    &format!("Bearer {ALL}"),
                    "GET",
                    &format!("/v1/jobs/{id}"),
                    None,
                )
                .await;
            if ["finished", "failed", "cancelled"].contains(&job["state"].as_str().unwrap_or("")) {
                return job;
            }
            assert!(Instant::now() < deadline, "job {id} never ended: {job}");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

/// Limits that keep jobs' output (1 MiB a job) in the state directory
/// `state`, under the identity of the store there, as `billet serve` keeps
/// it; and that output store.
pub(crate) fn keeping_output(state: &Path) -> (Limits, Arc<billet::output::OutputStore>) {
    let identity = Store::open(state).unwrap().0.identity().cloned();
    let output =
        Arc::new(billet::output::OutputStore::open(state, identity.as_ref(), 1 << 20).unwrap());
    let limits = Limits {
        output: Some(Arc::clone(&output)),
        ..Limits::default()
    };
    (limits, output)
}

/// A directory only its owner may enter (a state directory billet accepts).
pub(crate) fn private_dir() -> tempfile::TempDir {
    tempfile::Builder::new()
        .permissions(std::os::unix::fs::PermissionsExt::from_mode(0o700))
        .tempdir()
        .unwrap()
}
