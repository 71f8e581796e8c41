//! H13's footing: a service on a manual clock says when it is quiescent
//! (`Service::quiet`, `Service::quiescent`), so a driver can move the clock
//! only then, from one wake to the next, and the run is deterministic; and
//! when what it decided is all shown (`Service::settled`).

mod client;

use client::support_client;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use billet::engine::Quiet;
use billet::{Service, Store};
use billet_clock::{Clock, ManualClock};
use billet_config::Config;
use billet_scheduler::{Pools, Settings};
use billet_simulated::{Host, SimulatedProvider, run_for};
use serde_json::{Value, json};
use tokio::net::TcpListener;

const TOKEN: &str = "quiescence-token-0123456789abcdef";
const OWNER: &str = "quiet";
/// The most wall time a service may take to become quiescent here.
const BOUND: Duration = Duration::from_secs(20);

/// What the driver sees at one quiescent instant: the modelled seconds since
/// the start, each job's state, and the instances on the host.
type Snapshot = (u64, Vec<String>, usize);

/// Runs four jobs of 30, 30, 45 and 5 modelled seconds on two leases, moving
/// the clock only when the service is quiescent, from wake to wake; answers
/// what it saw at each instant.
async fn run(dir: &std::path::Path) -> Vec<Snapshot> {
    let start = SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000);
    let manual = Arc::new(ManualClock::new(start));
    let clock: Arc<dyn Clock> = Arc::clone(&manual) as Arc<dyn Clock>;
    let host = Host::new();
    let provider = Arc::new(
        SimulatedProvider::builder(OWNER)
            .host(host.clone())
            .clock(Arc::clone(&clock))
            .build()
            .unwrap(),
    );
    let config = Config::from_yaml_str(&format!(
        "deployment: {{id: {OWNER}}}\nproviders: [{{name: linux, kind: docker, capacity: 2, docker: {{image: img}}}}]\nrouting: {{default_kind: docker}}\n"
    ))
    .unwrap();
    let pools = Pools::builder(config)
        .provider("linux", provider as Arc<dyn billet_provider::Provider>)
        .settings(Settings {
            reconcile_every: Duration::from_secs(10),
            ..Settings::default()
        })
        .build()
        .unwrap();
    let (store, records) = Store::open(dir).unwrap();
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let service = Service::start(&pools, store, records, clock, TOKEN, listener)
        .await
        .unwrap();
    let base = format!("http://{}", service.addr());
    let client = support_client();
    let call = |method: reqwest::Method, path: String, body: Option<Value>| {
        let client = client.clone();
        let url = format!("{base}{path}");
        async move {
            let mut request = client
                .request(method, url)
                .header("Authorization", format!("Bearer {TOKEN}"));
            if let Some(body) = body {
                request = request.body(body.to_string());
            }
            let response = request.send().await.unwrap();
            response.json::<Value>().await.unwrap()
        }
    };
    let quiet = service
        .quiescent(start, BOUND)
        .await
        .expect("quiescent once the first inventory is read");
    assert_eq!(quiet.at, start);
    assert_eq!(quiet.wake, Some(start + Duration::from_secs(10)));
    for secs in [30, 30, 45, 5] {
        let job = call(
            reqwest::Method::POST,
            "/v1/jobs".into(),
            Some(json!({"command": run_for(Duration::from_secs(secs)), "trust": "trusted"})),
        )
        .await;
        // Placed in the step that accepted it when a lease is free.
        assert!(
            ["queued", "running"].contains(&job["state"].as_str().unwrap()),
            "{job}"
        );
    }
    let mut seen = Vec::new();
    loop {
        let now = manual.now();
        let quiet: Quiet = service
            .quiescent(now, BOUND)
            .await
            .unwrap_or_else(|last| panic!("not quiescent at {now:?}: last said {last:?}"));
        // What it held back (a job's end) is shown over HTTP once settled,
        // at most LAZY_COMMIT of wall time later; it decides nothing.
        let settled = service
            .settled(BOUND)
            .await
            .unwrap_or_else(|last| panic!("not settled at {now:?}: last said {last:?}"));
        assert_eq!(settled.wake, quiet.wake, "settling woke nothing");
        let mut states = Vec::new();
        for id in 1..=4 {
            let job = call(reqwest::Method::GET, format!("/v1/jobs/{id}"), None).await;
            states.push(job["state"].as_str().unwrap().to_owned());
        }
        let elapsed = now.duration_since(start).unwrap().as_secs();
        let running = states.iter().filter(|s| *s == "running").count();
        assert!(running <= 2, "at {elapsed} s: {states:?}");
        // Quiescent: what runs is exactly what the host holds.
        assert_eq!(
            host.instances_of(OWNER),
            running,
            "at {elapsed} s: {states:?}"
        );
        let done = states.iter().all(|s| s == "finished");
        seen.push((elapsed, states, running));
        if done {
            break;
        }
        let wake = quiet.wake.expect("a reconcile is always ahead");
        assert!(wake > now);
        manual.advance_to(wake).unwrap();
        assert!(elapsed < 1_000, "the jobs never ended: {seen:?}");
    }
    service.stop(Duration::from_secs(1)).await.unwrap();
    seen
}

// H13: quiescence is said exactly: at the start once the first inventory is
// read (next wake: the reconcile), and after every move of the clock to the
// wake it named, with what runs equal to what the host holds; two runs of
// the same workload see the same instants and the same states.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn h13_a_service_says_when_it_is_quiescent_and_the_run_is_deterministic() {
    let first = run(private_dir().path()).await;
    let second = run(private_dir().path()).await;
    assert_eq!(first, second, "two runs differ");
    // Jobs 1 and 2 take both leases at once and end at the first inventory
    // after their 30 s: job 3 and 4 then run, 4 (5 s) ending first.
    let at = |t: u64| {
        first
            .iter()
            .find(|(s, _, _)| *s == t)
            .map(|(_, states, _)| states.clone())
    };
    assert_eq!(
        at(0),
        Some(vec![
            "running".into(),
            "running".into(),
            "queued".into(),
            "queued".into()
        ])
    );
    let last = first.last().unwrap();
    assert!(last.1.iter().all(|s| s == "finished"), "{first:?}");
    assert!(
        first.windows(2).all(|w| w[0].0 < w[1].0),
        "the clock only moves forward: {first:?}"
    );
    assert!(
        first.len() >= 4 && last.0 >= 75,
        "the 45 s job starts after a 30 s one ends: {first:?}"
    );
}

/// A temporary state directory only its owner may enter (L16): `tempfile`'s
/// follow the umask, and `serve` refuses a state directory others may enter.
fn private_dir() -> tempfile::TempDir {
    tempfile::Builder::new()
        .permissions(std::os::unix::fs::PermissionsExt::from_mode(0o700))
        .tempdir()
        .unwrap()
}
