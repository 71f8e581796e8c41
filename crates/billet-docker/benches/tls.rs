//! `tls` (D17): what mutual TLS and many daemons cost, measured in one
//! run against three docker daemons the bench starts on loopback (each with
//! `--tlsverify` on a TCP port and a unix socket of its own, certificates
//! made offline).
//!
//! 1. Launch, list and destroy latency (p50, p99) over mutual TLS against
//!    the same daemon's unix socket: N leases launched one after another,
//!    lists with the N held, N destroys; the socket first, then TLS.
//! 2. `list` with N held on each of three daemons (three pools read at once,
//!    as a reconcile does) against `list` with N held on one.
//! 3. The physical limit: containers launched per second through
//!    `DockerProvider` with 32 launches in flight, against the same number of
//!    bare create-and-start calls made straight to the daemon's API, the same
//!    run, the same daemon (goal: billet within 1.25x of the bare daemon).
//!
//! ```sh
//! cargo bench -p billet-docker --bench tls                  # N = 50, 128 launches
//! ```
//!
//! `cargo test --benches` runs it once with N = 3 and 8 launches. Where no
//! daemon can be started it prints one line (with `BILLET_DOCKER_REQUIRED=1`
//! that is a failure).

#[path = "../tests/support/mod.rs"]
mod support;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use billet_docker::{ClientTls, DockerProvider, LAUNCH_LABEL, NAME_LABEL, OWNER_LABEL};
use billet_provider::{Provider, Spec, TrustClass};
use bollard::models::{ContainerCreateBody, HostConfig};
use bollard::query_parameters::{CreateContainerOptionsBuilder, RemoveContainerOptionsBuilder};
use support::tls::{Ca, TlsDaemon, can_start_daemons, client_tls};
use support::{Scope, TEST_IMAGE};

/// Launches in flight at once in part 3.
const IN_FLIGHT: usize = 32;

/// The deadline of every provider call.
const TIMEOUT: Duration = Duration::from_secs(60);

/// The `q`-quantile (0..=1) of `samples`, nearest rank.
fn quantile(samples: &[Duration], q: f64) -> Duration {
    let mut sorted = samples.to_vec();
    sorted.sort();
    let rank = ((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    sorted[rank - 1]
}

fn ms(d: Duration) -> String {
    format!("{:.2} ms", d.as_secs_f64() * 1e3)
}

fn spec(name: String) -> Spec {
    Spec::new(name, ["sleep", "3600"])
        .with_image(TEST_IMAGE)
        .with_trust(TrustClass::Trusted)
}

/// Launch, list and destroy timings of one provider.
struct Cycle {
    launch: Vec<Duration>,
    list: Vec<Duration>,
    destroy: Vec<Duration>,
}

/// N launches one after another, `lists` lists with the N held, N destroys.
async fn cycle(provider: &DockerProvider, n: usize, lists: usize) -> Cycle {
    let mut launch = Vec::with_capacity(n);
    let mut ids = Vec::with_capacity(n);
    for i in 0..n {
        let started = Instant::now();
        let instance = provider
            .launch(spec(format!("job-{i}")))
            .await
            .expect("launch");
        launch.push(started.elapsed());
        ids.push(instance.id);
    }
    let mut list = Vec::with_capacity(lists);
    for _ in 0..lists {
        let started = Instant::now();
        let listed = provider.list().await.expect("list");
        list.push(started.elapsed());
        assert_eq!(listed.len(), n);
    }
    let mut destroy = Vec::with_capacity(n);
    for id in &ids {
        let started = Instant::now();
        provider.destroy(id).await.expect("destroy");
        destroy.push(started.elapsed());
    }
    Cycle {
        launch,
        list,
        destroy,
    }
}

fn row(what: &str, tls: &[Duration], socket: &[Duration], q: f64) {
    let (t, s) = (quantile(tls, q), quantile(socket, q));
    println!(
        "| {what} | {} | {} | {:.2}x |",
        ms(t),
        ms(s),
        t.as_secs_f64() / s.as_secs_f64().max(1e-9)
    );
}

/// `m` containers launched with `IN_FLIGHT` at a time by `launch`; the
/// launches per second.
async fn rate<F, Fut>(m: usize, launch: F) -> f64
where
    F: Fn(usize) -> Fut,
    Fut: Future<Output = ()> + Send + 'static,
{
    let started = Instant::now();
    let mut next = 0;
    let mut running = tokio::task::JoinSet::new();
    while next < m || !running.is_empty() {
        while next < m && running.len() < IN_FLIGHT {
            running.spawn(launch(next));
            next += 1;
        }
        running
            .join_next()
            .await
            .expect("a launch")
            .expect("a launch task");
    }
    m as f64 / started.elapsed().as_secs_f64()
}

fn main() {
    let full = std::env::args().any(|a| a == "--bench");
    let (n, lists, m) = if full { (50, 20, 128) } else { (3, 2, 8) };
    if support::daemon("d17-tls-bench").is_none() || !can_start_daemons("d17-tls-bench") {
        println!("tls: no docker daemon can be started here; nothing measured");
        return;
    }
    let ca = Ca::new("billet bench CA");
    let daemons = [
        TlsDaemon::start("bench-a", &ca),
        TlsDaemon::start("bench-b", &ca),
        TlsDaemon::start("bench-c", &ca),
    ];
    let files = tempfile::tempdir().expect("a directory for the client's files");
    let tls: ClientTls = client_tls(&ca, files.path());
    let scopes: Vec<Scope> = daemons.iter().map(|d| d.scope("d17-bench")).collect();
    let over_tls = |i: usize, tag: &str| {
        scopes[i]
            .builder(tag)
            .endpoint(daemons[i].endpoint.clone())
            .tls(tls.clone())
            .timeout(TIMEOUT)
            .build()
            .expect("a provider")
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a runtime");

    // 1. The same daemon over its socket, then over mutual TLS.
    let socket = scopes[0]
        .builder("socket")
        .timeout(TIMEOUT)
        .build()
        .expect("a provider");
    let tls_a = over_tls(0, "tls");
    let (by_socket, by_tls) = runtime.block_on(async {
        let by_socket = cycle(&socket, n, lists).await;
        let by_tls = cycle(&tls_a, n, lists).await;
        (by_socket, by_tls)
    });
    println!(
        "tls (D17): one daemon, N = {n} leases one after another, {lists} lists with N held; over mutual TLS vs its unix socket, one run"
    );
    println!("| measure | mutual TLS | unix socket | TLS / socket |");
    println!("| --- | --- | --- | --- |");
    for (label, q) in [("p50", 0.5), ("p99", 0.99)] {
        row(
            &format!("launch {label}"),
            &by_tls.launch,
            &by_socket.launch,
            q,
        );
        row(&format!("list {label}"), &by_tls.list, &by_socket.list, q);
        row(
            &format!("destroy {label}"),
            &by_tls.destroy,
            &by_socket.destroy,
            q,
        );
    }

    // 2. N held on each of three daemons, read at once, against one.
    let providers: Vec<DockerProvider> = (0..3).map(|i| over_tls(i, "three")).collect();
    let (one, three) = runtime.block_on(async {
        for provider in &providers {
            for i in 0..n {
                provider
                    .launch(spec(format!("held-{i}")))
                    .await
                    .expect("launch");
            }
        }
        let mut one = Vec::with_capacity(lists);
        let mut three = Vec::with_capacity(lists);
        for _ in 0..lists {
            let started = Instant::now();
            assert_eq!(providers[0].list().await.expect("list").len(), n);
            one.push(started.elapsed());
            let started = Instant::now();
            let (a, b, c) = tokio::join!(
                providers[0].list(),
                providers[1].list(),
                providers[2].list()
            );
            three.push(started.elapsed());
            for listed in [a, b, c] {
                assert_eq!(listed.expect("list").len(), n);
            }
        }
        for provider in &providers {
            for instance in provider.list().await.expect("list") {
                provider.destroy(&instance.id).await.expect("destroy");
            }
        }
        (one, three)
    });
    println!();
    println!(
        "tls (D17): list with N = {n} held on each of three daemons (read at once) vs on one, over mutual TLS"
    );
    println!("| measure | three daemons | one daemon | three / one |");
    println!("| --- | --- | --- | --- |");
    row("list p50", &three, &one, 0.5);
    row("list p99", &three, &one, 0.99);

    // 3. The physical limit, on daemon A: DockerProvider against bare
    // create-and-start calls, IN_FLIGHT at a time.
    let provider = Arc::new(
        scopes[0]
            .builder("rate")
            .timeout(TIMEOUT)
            .build()
            .expect("a provider"),
    );
    let client = scopes[0].client();
    let bare_owner = scopes[0].owner("bare");
    let (billet_rate, bare_rate) = runtime.block_on(async {
        let launching = Arc::clone(&provider);
        let billet_rate = rate(m, move |i| {
            let provider = Arc::clone(&launching);
            async move {
                provider
                    .launch(spec(format!("rate-{i}")))
                    .await
                    .expect("launch");
            }
        })
        .await;
        let bare_client = client.clone();
        let owner = bare_owner.clone();
        let bare_rate = rate(m, move |i| {
            let client = bare_client.clone();
            let owner = owner.clone();
            async move {
                let labels = HashMap::from([
                    (OWNER_LABEL.to_owned(), owner),
                    (NAME_LABEL.to_owned(), format!("bare-{i}")),
                    (LAUNCH_LABEL.to_owned(), format!("{i}")),
                ]);
                let body = ContainerCreateBody {
                    image: Some(TEST_IMAGE.to_owned()),
                    cmd: Some(vec!["sleep".to_owned(), "3600".to_owned()]),
                    labels: Some(labels),
                    host_config: Some(HostConfig {
                        network_mode: Some("none".to_owned()),
                        ..Default::default()
                    }),
                    ..Default::default()
                };
                let options = CreateContainerOptionsBuilder::default()
                    .name(&format!("bare-{}-{i}", std::process::id()))
                    .build();
                let created = client
                    .create_container(Some(options), body)
                    .await
                    .expect("create");
                client
                    .start_container(&created.id, None)
                    .await
                    .expect("start");
            }
        })
        .await;
        for instance in provider.list().await.expect("list") {
            provider.destroy(&instance.id).await.expect("destroy");
        }
        (billet_rate, bare_rate)
    });
    // The bare containers carry the scope's owner label: the scope removes
    // them; remove them now so the daemon is empty when the bench ends.
    let leftovers = scopes[0].leftovers();
    runtime.block_on(async {
        for id in leftovers {
            let force = RemoveContainerOptionsBuilder::default().force(true).build();
            let _ = client.remove_container(&id, Some(force)).await;
        }
    });
    println!();
    println!(
        "tls (D17): {m} containers launched, {IN_FLIGHT} in flight, on one daemon's socket: DockerProvider vs bare create-and-start, one run"
    );
    println!("| measure | DockerProvider | bare daemon | bare / billet (goal <= 1.25x) |");
    println!("| --- | --- | --- | --- |");
    println!(
        "| launches per second | {billet_rate:.1} | {bare_rate:.1} | {:.2}x |",
        bare_rate / billet_rate.max(1e-9)
    );
    for scope in &scopes {
        assert!(scope.leftovers().is_empty(), "the bench left containers");
    }
}
