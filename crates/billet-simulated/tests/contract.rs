//! The simulated backend against its contract, clause by clause (S1-S13).

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use billet_clock::ManualClock;
use billet_provider::{
    ErrorKind, InstanceId, Provider, ProviderKind, Spec, State, Teardown, TrustClass,
};
use billet_simulated::{Host, SimulatedProvider, run_for};

fn start() -> SystemTime {
    SystemTime::UNIX_EPOCH + Duration::from_secs(1_750_000_000)
}

fn job(name: &str, secs: u64) -> Spec {
    Spec::new(name, run_for(Duration::from_secs(secs))).with_trust(TrustClass::Trusted)
}

/// Two deployments over one host, timed by one manual clock.
fn pair() -> (SimulatedProvider, SimulatedProvider, ManualClock, Host) {
    let clock = ManualClock::new(start());
    let host = Host::new();
    let build = |owner: &str| {
        SimulatedProvider::builder(owner)
            .host(host.clone())
            .clock(Arc::new(clock.clone()))
            .build()
            .unwrap()
    };
    (build("blue"), build("green"), clock, host)
}

fn names(mut instances: Vec<billet_provider::Instance>) -> Vec<String> {
    instances.sort_by(|a, b| a.name.cmp(&b.name));
    instances.into_iter().map(|i| i.name.to_string()).collect()
}

// S1: two providers over one host share its store; providers built without a
// host each get one of their own.
#[tokio::test]
async fn s1_host_is_shared_on_purpose_and_private_by_default() {
    let (blue, green, _clock, host) = pair();
    blue.launch(job("a", 60)).await.unwrap();
    green.launch(job("b", 60)).await.unwrap();
    assert_eq!(host.len(), 2);
    assert_eq!(blue.host().len(), 2);
    assert_eq!(host.instances_of("blue"), 1);
    assert_eq!(host.instances_of("green"), 1);
    assert_eq!(host.instances_of("red"), 0);

    let alone = SimulatedProvider::new("blue").unwrap();
    let other = SimulatedProvider::new("blue").unwrap();
    alone.launch(job("a", 60)).await.unwrap();
    assert_eq!(alone.host().len(), 1);
    assert!(other.host().is_empty());
    assert!(other.list().await.unwrap().is_empty());
}

// S1: a host is empty exactly while it holds no instance, whichever
// deployment launched them; destroying the last one empties it again.
#[tokio::test]
async fn s1_host_is_empty_exactly_while_it_holds_nothing() {
    let (blue, green, _clock, host) = pair();
    assert!(host.is_empty());
    let a = blue.launch(job("a", 60)).await.unwrap();
    assert!(!host.is_empty(), "one instance: {host:?}");
    let g = green.launch(job("g", 60)).await.unwrap();
    blue.destroy(&a.id).await.unwrap();
    assert!(!host.is_empty(), "green's instance is still on it");
    assert!(!blue.host().is_empty(), "every handle sees the same store");
    green.destroy(&g.id).await.unwrap();
    assert!(host.is_empty());
    assert_eq!(host.len(), 0);
}

// S1, S2, S3, S10: what `Debug` shows. A host: how many instances and how
// many deployments. A provider: its owner, its host, its clock and any
// inventory fault.
#[tokio::test]
async fn s1_debug_shows_host_and_provider_state() {
    let (blue, green, clock, host) = pair();
    assert_eq!(format!("{host:?}"), "Host { instances: 0, deployments: 0 }");
    blue.launch(job("a", 60)).await.unwrap();
    blue.launch(job("b", 60)).await.unwrap();
    green.launch(job("g", 60)).await.unwrap();
    assert_eq!(format!("{host:?}"), "Host { instances: 3, deployments: 2 }");

    blue.fail_inventory(Some(billet_provider::Error::inventory_unavailable(
        "daemon gone",
    )));
    let shown = format!("{blue:?}");
    assert!(shown.starts_with("SimulatedProvider { "), "{shown}");
    for part in [
        "owner: \"blue\"".to_owned(),
        "host: Host { instances: 3, deployments: 2 }".to_owned(),
        format!("clock: {clock:?}"),
        "inventory_fault: Some(".to_owned(),
        "daemon gone".to_owned(),
    ] {
        assert!(shown.contains(&part), "{part:?} is not in {shown}");
    }
    let shown = format!("{green:?}");
    assert!(shown.contains("owner: \"green\""), "{shown}");
    assert!(shown.contains("inventory_fault: None"), "{shown}");
    assert!(format!("{clock:?}").starts_with("ManualClock { now: "));
}

// S2: the owner is written onto every instance; an empty owner is refused.
#[tokio::test]
async fn s2_owner_on_every_instance_and_empty_owner_refused() {
    let (blue, _green, _clock, _host) = pair();
    let launched = blue.launch(job("a", 60)).await.unwrap();
    assert_eq!(&*launched.owner, "blue");
    assert_eq!(blue.owner(), "blue");
    assert!(
        blue.list()
            .await
            .unwrap()
            .iter()
            .all(|i| &*i.owner == "blue")
    );
    for empty in ["", "   ", "\t\n"] {
        let err = SimulatedProvider::new(empty).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::InvalidOwner, "{empty:?}");
        let err = SimulatedProvider::builder(empty).build().unwrap_err();
        assert_eq!(err.kind(), ErrorKind::InvalidOwner);
    }
}

// S3: the clock option times instances; the default clock is real time.
#[tokio::test]
async fn s3_clock_option_and_system_clock_default() {
    let (blue, _green, clock, _host) = pair();
    clock.advance(Duration::from_secs(5)).unwrap();
    let launched = blue.launch(job("a", 60)).await.unwrap();
    assert_eq!(launched.started_at, start() + Duration::from_secs(5));

    let before = SystemTime::now();
    let real = SimulatedProvider::new("blue").unwrap();
    let launched = real.launch(job("a", 60)).await.unwrap();
    assert!(launched.started_at >= before && launched.started_at <= SystemTime::now());
}

// S4: launch reads the duration from the command; malformed or absent
// durations are refused with the expected form and nothing is recorded.
#[tokio::test]
async fn s4_bad_commands_refused_and_nothing_recorded() {
    let (blue, _green, _clock, host) = pair();
    for command in [
        vec![],
        vec!["sleep".to_owned(), "90".to_owned()],
        vec!["billet-simulated".into(), "run-for".into(), "ninety".into()],
        vec![
            "billet-simulated".into(),
            "run-for".into(),
            "99999999999999999999999s".into(),
        ],
    ] {
        let spec = Spec::new("a", command.clone()).with_trust(TrustClass::Trusted);
        let err = blue.launch(spec).await.unwrap_err();
        assert_eq!(err.kind(), ErrorKind::InvalidSpec, "{command:?}");
        assert!(err.to_string().contains("run-for"), "{err}");
    }
    assert!(host.is_empty());
    assert!(blue.list().await.unwrap().is_empty());
}

// S5: running until the duration has elapsed, stopped (exit 0) exactly at the
// boundary and from then on; a zero duration is stopped at once.
#[tokio::test]
async fn s5_running_flips_to_stopped_exactly_at_the_boundary() {
    let (blue, _green, clock, _host) = pair();
    let run = Duration::new(90, 123_456_789);
    let launched = blue
        .launch(Spec::new("a", run_for(run)).with_trust(TrustClass::Trusted))
        .await
        .unwrap();
    assert_eq!(launched.state, State::Running);
    assert_eq!(launched.started_at, start());
    assert_eq!(launched.kind, ProviderKind::Simulated);
    clock.advance(run - Duration::from_nanos(1)).unwrap();
    assert_eq!(blue.find("a").await.unwrap().unwrap().state, State::Running);
    clock.advance(Duration::from_nanos(1)).unwrap();
    assert_eq!(
        blue.find("a").await.unwrap().unwrap().state,
        State::Stopped { exit_code: 0 }
    );
    clock.advance(Duration::from_secs(3600)).unwrap();
    let listed = blue.list().await.unwrap();
    assert_eq!(listed.len(), 1, "a stopped instance stays until destroyed");
    assert_eq!(listed[0].state, State::Stopped { exit_code: 0 });

    let zero = blue.launch(job("zero", 0)).await.unwrap();
    assert_eq!(zero.state, State::Stopped { exit_code: 0 });
    let forever = blue
        .launch(Spec::new("forever", run_for(Duration::MAX)).with_trust(TrustClass::Trusted))
        .await
        .unwrap();
    assert_eq!(forever.state, State::Running);
}

// S5: a name the deployment holds is a conflict and the held instance is
// untouched, running or stopped; the same name in another deployment is
// allowed and invisible; an empty name is refused.
#[tokio::test]
async fn s5_conflicts_and_names_across_deployments() {
    let (blue, green, clock, host) = pair();
    let held = blue.launch(job("a", 60)).await.unwrap();
    let err = blue.launch(job("a", 5)).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Conflict);
    assert!(err.to_string().contains("\"a\""));
    assert_eq!(blue.find("a").await.unwrap().unwrap(), held);

    clock.advance(Duration::from_secs(61)).unwrap();
    let err = blue.launch(job("a", 5)).await.unwrap_err();
    assert_eq!(
        err.kind(),
        ErrorKind::Conflict,
        "a stopped instance still holds its name"
    );
    let still = blue.find("a").await.unwrap().unwrap();
    assert_eq!(
        (still.id, still.started_at),
        (held.id.clone(), held.started_at)
    );

    let theirs = green.launch(job("a", 60)).await.unwrap();
    assert_ne!(theirs.id, held.id);
    assert_eq!(blue.list().await.unwrap().len(), 1);
    assert_eq!(green.list().await.unwrap().len(), 1);
    assert_eq!(host.len(), 2);

    let err = blue.launch(job("", 60)).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidSpec);
    assert_eq!(host.len(), 2);
}

// S5, S9: trust is checked first: an untrusted spec with a bad command is
// refused for its trust, and nothing is recorded.
#[tokio::test]
async fn s5_trust_is_checked_before_anything_else() {
    let (blue, _green, _clock, host) = pair();
    let spec = Spec::new("", ["nonsense"]).with_trust(TrustClass::Untrusted);
    assert_eq!(
        blue.launch(spec).await.unwrap_err().kind(),
        ErrorKind::Refused
    );
    blue.launch(job("a", 60)).await.unwrap();
    let dup = Spec::new("a", run_for(Duration::from_secs(1)));
    assert_eq!(
        blue.launch(dup).await.unwrap_err().kind(),
        ErrorKind::Refused
    );
    assert_eq!(host.len(), 1);
}

// S6: list answers all of this deployment's instances, each as of now, and no
// other deployment's.
#[tokio::test]
async fn s6_list_answers_every_own_instance_as_of_now() {
    let (blue, green, clock, _host) = pair();
    for i in 0..500u64 {
        blue.launch(job(&format!("b{i:03}"), i)).await.unwrap();
        green.launch(job(&format!("g{i:03}"), i)).await.unwrap();
    }
    clock.advance(Duration::from_secs(250)).unwrap();
    let listed = blue.list().await.unwrap();
    assert_eq!(listed.len(), 500);
    assert!(
        listed
            .iter()
            .all(|i| &*i.owner == "blue" && i.name.starts_with('b'))
    );
    let running = listed.iter().filter(|i| i.state.is_running()).count();
    assert_eq!(
        running, 249,
        "durations 251..=499 s are still running at 250 s"
    );
    let mut ids: Vec<InstanceId> = listed.iter().map(|i| i.id.clone()).collect();
    ids.sort();
    ids.dedup();
    assert_eq!(ids.len(), 500);
}

// S7: find compares names exactly: no case folding, trimming or prefix match.
#[tokio::test]
async fn s7_find_is_exact() {
    let (blue, green, _clock, _host) = pair();
    blue.launch(job("job-1", 60)).await.unwrap();
    green.launch(job("job-2", 60)).await.unwrap();
    assert_eq!(
        blue.find("job-1").await.unwrap().unwrap().name.as_ref(),
        "job-1"
    );
    for miss in [
        "Job-1", "JOB-1", " job-1", "job-1 ", "job-", "job", "job-10", "", "job-2",
    ] {
        assert!(blue.find(miss).await.unwrap().is_none(), "{miss:?}");
    }
}

// S8: destroy removes this deployment's instance (running or stopped); an id
// the host does not hold is Absent every time; another deployment's id is
// refused and left untouched.
#[tokio::test]
async fn s8_destroy_is_scoped_and_idempotent() {
    let (blue, green, clock, host) = pair();
    let running = blue.launch(job("running", 600)).await.unwrap();
    let stopped = blue.launch(job("stopped", 1)).await.unwrap();
    let foreign = green.launch(job("theirs", 600)).await.unwrap();
    clock.advance(Duration::from_secs(2)).unwrap();

    assert_eq!(blue.destroy(&running.id).await.unwrap(), Teardown::Stopped);
    assert_eq!(blue.destroy(&stopped.id).await.unwrap(), Teardown::Stopped);
    for _ in 0..3 {
        let again = blue.destroy(&running.id).await.unwrap();
        assert_eq!(again, Teardown::Absent);
        assert!(again.is_confirmed());
    }
    assert_eq!(
        blue.destroy(&InstanceId::from("no-such-id")).await.unwrap(),
        Teardown::Absent
    );

    let err = blue.destroy(&foreign.id).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::NotOwned);
    assert!(err.to_string().contains("green"), "{err}");
    assert_eq!(green.find("theirs").await.unwrap().unwrap(), foreign);
    assert_eq!(host.len(), 1);

    // Destroy works while the inventory fails.
    let during = blue.launch(job("during", 60)).await.unwrap();
    blue.fail_inventory(Some(billet_provider::Error::inventory_unavailable(
        "daemon gone",
    )));
    assert_eq!(blue.destroy(&during.id).await.unwrap(), Teardown::Stopped);
}

// S9: only Trusted passes; Unknown and Untrusted are refused naming the trust
// class and the kind, and launching them records nothing.
#[tokio::test]
async fn s9_only_trusted_is_accepted() {
    let (blue, _green, _clock, host) = pair();
    assert!(blue.accepts(TrustClass::Trusted).is_ok());
    for trust in [TrustClass::Unknown, TrustClass::Untrusted] {
        let err = blue.accepts(trust).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Refused);
        match &err {
            billet_provider::Error::Refused { trust: t, kind } => {
                assert_eq!((*t, *kind), (trust, ProviderKind::Simulated));
            }
            other => panic!("expected Refused, got {other:?}"),
        }
        let msg = err.to_string();
        assert!(
            msg.contains(trust.as_str()) && msg.contains("simulated"),
            "{msg}"
        );
        let spec = Spec::new("a", run_for(Duration::from_secs(1))).with_trust(trust);
        assert_eq!(
            blue.launch(spec).await.unwrap_err().kind(),
            ErrorKind::Refused
        );
    }
    assert!(host.is_empty());
}

// S10: fail_inventory makes list and find answer the error until cleared;
// then the exact inventory is back. Launch, destroy and other providers are
// unaffected.
#[tokio::test]
async fn s10_inventory_failure_and_recovery() {
    let (blue, green, _clock, _host) = pair();
    blue.launch(job("a", 60)).await.unwrap();
    let b = blue.launch(job("b", 60)).await.unwrap();
    green.launch(job("g", 60)).await.unwrap();
    let before = names(blue.list().await.unwrap());

    blue.fail_inventory(Some(billet_provider::Error::inventory_unavailable(
        "daemon gone",
    )));
    let err = blue.list().await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InventoryUnavailable);
    assert!(err.to_string().contains("daemon gone"));
    assert_eq!(
        blue.find("a").await.unwrap_err().kind(),
        ErrorKind::InventoryUnavailable
    );
    assert_eq!(
        blue.find("zzz").await.unwrap_err().kind(),
        ErrorKind::InventoryUnavailable
    );
    assert_eq!(
        green.list().await.unwrap().len(),
        1,
        "only this provider fails"
    );

    blue.launch(job("c", 60)).await.unwrap();
    assert_eq!(blue.destroy(&b.id).await.unwrap(), Teardown::Stopped);

    blue.fail_inventory(None);
    let mut expected = before;
    expected.retain(|n| n != "b");
    expected.push("c".to_owned());
    assert_eq!(names(blue.list().await.unwrap()), expected);
    assert!(blue.find("c").await.unwrap().is_some());
}

// S11: kind() answers the simulated kind, and so does every instance.
#[tokio::test]
async fn s11_kind_is_simulated() {
    let (blue, _green, _clock, _host) = pair();
    let provider: Arc<dyn Provider> = Arc::new(blue);
    assert_eq!(provider.kind(), ProviderKind::Simulated);
    let launched = provider.launch(job("a", 1)).await.unwrap();
    assert_eq!(launched.kind, ProviderKind::Simulated);
}

// S12: eight tasks on a multi-thread runtime, two deployments over one host,
// thousands of interleaved launches and destroys: the final inventory is
// exactly what was kept and no id was ever seen twice.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn s12_concurrent_launches_and_destroys_lose_nothing() {
    let (blue, green, _clock, host) = pair();
    let providers = [Arc::new(blue), Arc::new(green)];
    let mut tasks = Vec::new();
    for t in 0..8usize {
        let provider = Arc::clone(&providers[t % 2]);
        tasks.push(tokio::spawn(async move {
            let mut seen = Vec::new();
            let mut kept = Vec::new();
            for i in 0..1_000usize {
                let name = format!("t{t}-{i}");
                let launched = provider.launch(job(&name, 60)).await.unwrap();
                seen.push(launched.id.clone());
                if i % 3 == 0 {
                    assert_eq!(
                        provider.destroy(&launched.id).await.unwrap(),
                        Teardown::Stopped
                    );
                } else {
                    kept.push((name, launched.id));
                }
                if i % 97 == 0 {
                    // Lists interleave with writes and never see half-made instances.
                    for instance in provider.list().await.unwrap() {
                        assert_eq!(&*instance.owner, provider.owner());
                    }
                }
            }
            (seen, kept)
        }));
    }
    let mut seen = HashSet::new();
    let mut kept: BTreeMap<String, BTreeMap<String, InstanceId>> = BTreeMap::new();
    for (t, task) in tasks.into_iter().enumerate() {
        let (ids, kept_here) = task.await.unwrap();
        for id in ids {
            assert!(seen.insert(id.clone()), "id {id} issued twice");
        }
        let owner = providers[t % 2].owner().to_owned();
        kept.entry(owner).or_default().extend(kept_here);
    }
    assert_eq!(seen.len(), 8_000);
    for provider in &providers {
        let listed: BTreeMap<String, InstanceId> = provider
            .list()
            .await
            .unwrap()
            .into_iter()
            .map(|i| (i.name.to_string(), i.id))
            .collect();
        assert_eq!(&listed, &kept[provider.owner()]);
    }
    assert_eq!(host.len(), kept.values().map(BTreeMap::len).sum::<usize>());
}

// P2: the simulated backend keeps a spec's environment with its instance, as a
// real one hands it to the process, and forgets it when the instance is
// destroyed; an environment no process could hold is refused like on docker,
// recording nothing.
#[tokio::test]
async fn p2_the_environment_is_kept_while_the_instance_is_and_checked() {
    let (blue, green, _clock, host) = pair();
    let env: billet_provider::Environment = [("ACTIONS_RUNNER_INPUT_JITCONFIG", "jit-secret")]
        .into_iter()
        .collect();
    let launched = blue
        .launch(job("runner", 60).with_env(env.clone()))
        .await
        .unwrap();
    green.launch(job("runner", 60)).await.unwrap();
    assert_eq!(host.environment_of("blue", "runner"), Some(env));
    assert_eq!(
        host.environment_of("green", "runner"),
        Some(billet_provider::Environment::new())
    );
    assert_eq!(host.environment_of("blue", "other"), None);
    assert!(!format!("{launched:?}").contains("jit-secret"));

    blue.destroy(&launched.id).await.unwrap();
    assert_eq!(host.environment_of("blue", "runner"), None);

    let bad: billet_provider::Environment = [("A=B", "v")].into_iter().collect();
    let err = blue.launch(job("bad", 60).with_env(bad)).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidSpec);
    assert_eq!(host.instances_of("blue"), 0);
}

async fn state(provider: &SimulatedProvider) -> State {
    provider.find("runner").await.unwrap().unwrap().state
}

// H14: a runner's process exits once its one job is done. `Host::stop_at`
// stops the owner's instance of that name at the instant given (sooner than
// its run time, never later), touches no other deployment's instance of the
// same name, and answers false for a name the owner does not hold; a hint
// stream already sleeping until the old stop wakes, reads the new one, and
// tells it at its instant.
#[tokio::test]
async fn h14_the_host_stops_an_instance_when_told() {
    use futures::StreamExt;
    let (blue, green, clock, host) = pair();
    let mut hints = blue.hints().unwrap().subscribe();
    blue.launch(job("runner", 3600)).await.unwrap();
    green.launch(job("runner", 3600)).await.unwrap();
    let appeared = hints.next().await.unwrap();
    assert_eq!(appeared.kind, billet_provider::HintKind::Appeared);
    // A task waits on the stream, which sleeps until the hour's stop.
    let waiting = tokio::spawn(async move { hints.next().await });
    tokio::task::yield_now().await;
    assert!(!waiting.is_finished(), "nothing to tell yet");
    assert!(host.stop_at("blue", "runner", start() + Duration::from_secs(10)));
    assert!(
        host.stop_at("blue", "runner", start() + Duration::from_secs(20)),
        "held, though a later stop changes nothing"
    );
    assert!(!host.stop_at("blue", "other", start()));
    assert!(!host.stop_at("nobody", "runner", start()));
    // The woken stream looks again and sleeps until the new stop.
    for _ in 0..10 {
        tokio::task::yield_now().await;
    }
    clock.advance(Duration::from_secs(9)).unwrap();
    assert_eq!(state(&blue).await, State::Running);
    clock.advance(Duration::from_secs(1)).unwrap();
    assert_eq!(state(&blue).await, State::Stopped { exit_code: 0 });
    assert_eq!(state(&green).await, State::Running, "green's is its own");
    let stopped = tokio::time::timeout(Duration::from_secs(10), waiting)
        .await
        .expect("the stream woke at the new stop")
        .unwrap()
        .unwrap();
    assert_eq!(stopped.kind, billet_provider::HintKind::Stopped);
    assert_eq!(&*stopped.name, "runner");
    clock.advance(Duration::from_secs(3600)).unwrap();
    assert_eq!(state(&green).await, State::Stopped { exit_code: 0 });
}
