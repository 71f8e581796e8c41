//! H8, H9: what the simulated backend's fixtures for the contract suite do,
//! call by call: a [`Severable`] cut and restored, method by method, and the
//! choices a [`SimulatedFactory`] makes (clock, start time, outage kind,
//! commands, the deployments it builds).

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use billet_clock::{Clock, ManualClock};
use billet_conformance::{Outage, Policies, ProviderFactory, Timing};
use billet_provider::{ErrorKind, Provider, ProviderKind, Spec, Teardown, TrustClass};
use billet_simulated::conformance::{SimulatedClock, WALL_WINDOWS};
use billet_simulated::{Host, Severable, SimulatedFactory, SimulatedProvider, run_for};

fn block_on<F: std::future::Future>(future: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap()
        .block_on(future)
}

fn spec(name: &str) -> Spec {
    Spec::new(name, run_for(Duration::from_secs(60))).with_trust(TrustClass::Trusted)
}

/// A severable provider for `owner` on `host`, timed by `clock`.
fn severable(owner: &str, host: &Host, clock: &ManualClock) -> Severable {
    Severable::new(
        SimulatedProvider::builder(owner)
            .host(host.clone())
            .clock(Arc::new(clock.clone()))
            .build()
            .unwrap(),
    )
}

// H8: a cut connection refuses launch and destroy as Unavailable, list and
// find as InventoryUnavailable, changes nothing on the host, still answers
// kind and accepts; once restored every call reaches the same instances.
#[test]
fn h8_severable_cuts_each_call_and_restores_every_instance() {
    block_on(async {
        let host = Host::new();
        let clock = ManualClock::new(SystemTime::UNIX_EPOCH + Duration::from_secs(1_000));
        let blue = severable("blue", &host, &clock);
        assert!(!blue.is_severed(), "a new Severable is connected");
        let kept = blue.launch(spec("kept")).await.unwrap();
        assert_eq!(blue.provider().owner(), "blue");

        blue.sever(true);
        assert!(blue.is_severed());
        let err = blue.launch(spec("leaked")).await.unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Unavailable, "{err}");
        let err = blue.destroy(&kept.id).await.unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Unavailable, "{err}");
        let err = blue.list().await.unwrap_err();
        assert_eq!(err.kind(), ErrorKind::InventoryUnavailable, "{err}");
        let err = blue.find("kept").await.unwrap_err();
        assert_eq!(err.kind(), ErrorKind::InventoryUnavailable, "{err}");
        // kind and accepts need no host: they answer as ever, refusals included.
        assert_eq!(blue.kind(), ProviderKind::Simulated);
        assert!(blue.accepts(TrustClass::Trusted).is_ok());
        let err = blue.accepts(TrustClass::Untrusted).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Refused);
        // Nothing changed behind the cut: the provider itself still holds
        // exactly the one instance, and no launch got through.
        assert_eq!(host.len(), 1);
        assert_eq!(blue.provider().list().await.unwrap(), vec![kept.clone()]);

        blue.sever(false);
        assert!(!blue.is_severed());
        assert_eq!(blue.list().await.unwrap(), vec![kept.clone()]);
        assert_eq!(blue.find("kept").await.unwrap(), Some(kept.clone()));
        assert_eq!(blue.find("leaked").await.unwrap(), None);
        let other = blue.launch(spec("other")).await.unwrap();
        assert_eq!(&*other.owner, "blue");
        assert_eq!(&*other.name, "other");
        assert_eq!(blue.destroy(&kept.id).await.unwrap(), Teardown::Stopped);
        assert_eq!(blue.list().await.unwrap(), vec![other]);
    });
}

// H8: the factory's outage switch breaks what its `outage` says: the
// inventory only (launch still works, the connection stays up), or the whole
// connection (the Severable is cut); ending the outage restores both.
#[test]
fn h8_apply_outage_breaks_the_inventory_or_the_whole_connection() {
    block_on(async {
        let host = Host::new();
        let clock = ManualClock::new(SystemTime::UNIX_EPOCH);
        let blue = severable("blue", &host, &clock);

        let inventory = SimulatedFactory::modelled();
        assert_eq!(inventory.outage, Outage::InventoryOnly);
        inventory.apply_outage(&blue, true);
        assert!(!blue.is_severed());
        let err = blue.list().await.unwrap_err();
        assert_eq!(err.kind(), ErrorKind::InventoryUnavailable, "{err}");
        let launched = blue.launch(spec("during")).await.unwrap();
        inventory.apply_outage(&blue, false);
        assert_eq!(blue.list().await.unwrap(), vec![launched]);

        let whole = SimulatedFactory::modelled().with_outage(Outage::WholeConnection);
        assert_eq!(whole.outage, Outage::WholeConnection);
        assert_eq!(
            whole.clock,
            SimulatedFactory::modelled().clock,
            "with_outage changes only the outage"
        );
        whole.apply_outage(&blue, true);
        assert!(blue.is_severed());
        let err = blue.launch(spec("cut")).await.unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Unavailable, "{err}");
        whole.apply_outage(&blue, false);
        assert!(!blue.is_severed());
        assert_eq!(blue.list().await.unwrap().len(), 1);
    });
}

// H8: set_outage, the suite's hook, does what apply_outage does.
#[test]
fn h8_set_outage_cuts_and_restores_the_deployment() {
    block_on(async {
        let factory = SimulatedFactory::wall();
        let fixture = factory.build().await.unwrap();
        factory.set_outage(&fixture.green, true).await.unwrap();
        assert!(fixture.green.provider.is_severed());
        assert!(!fixture.blue.provider.is_severed());
        factory.set_outage(&fixture.green, false).await.unwrap();
        assert!(!fixture.green.provider.is_severed());
    });
}

// H9: the modelled factory (also the Default) starts its ManualClock at
// 1,750,000,000 s after the epoch, and builds blue and green over one host,
// both timed by that clock; the wall factory has no ManualClock.
#[test]
fn h9_modelled_factory_builds_two_deployments_on_one_host_and_clock() {
    let start = SystemTime::UNIX_EPOCH + Duration::from_secs(1_750_000_000);
    assert_eq!(
        SimulatedFactory::modelled().clock,
        SimulatedClock::Modelled { start }
    );
    assert_eq!(SimulatedFactory::default(), SimulatedFactory::modelled());
    assert_eq!(
        SimulatedFactory::wall(),
        SimulatedFactory {
            clock: SimulatedClock::Wall(WALL_WINDOWS),
            outage: Outage::WholeConnection,
        }
    );
    block_on(async {
        let fixture = SimulatedFactory::modelled().build().await.unwrap();
        let Timing::Modelled(clock) = &fixture.timing else {
            panic!("the modelled factory declared {:?}", fixture.timing);
        };
        assert_eq!(clock.now(), start);
        assert_eq!(fixture.blue.owner, "blue");
        assert_eq!(fixture.green.owner, "green");
        assert_eq!(fixture.blue.provider.provider().owner(), "blue");
        assert_eq!(fixture.green.provider.provider().owner(), "green");
        assert!(!fixture.blue.provider.is_severed());
        assert!(!fixture.green.provider.is_severed());

        let blue = fixture.blue.provider.launch(spec("a")).await.unwrap();
        assert_eq!(blue.started_at, start, "blue reads the fixture's clock");
        clock.advance(Duration::from_secs(7)).unwrap();
        let green = fixture.green.provider.launch(spec("b")).await.unwrap();
        assert_eq!(green.started_at, start + Duration::from_secs(7));
        // One host: both deployments' instances are on it, each sees its own.
        let host = fixture.blue.provider.provider().host();
        assert_eq!(host.len(), 2);
        assert_eq!(host.instances_of("blue"), 1);
        assert_eq!(host.instances_of("green"), 1);
        assert_eq!(fixture.green.provider.list().await.unwrap(), vec![green]);

        let wall = SimulatedFactory::wall().build().await.unwrap();
        assert!(matches!(wall.timing, Timing::Wall(w) if w == WALL_WINDOWS));
        let before = SystemTime::now();
        let instance = wall.blue.provider.launch(spec("w")).await.unwrap();
        assert!(
            instance.started_at >= before,
            "the wall factory reads the system clock"
        );
    });
}

// H9: the policies the simulated factory declares: strict, with this
// factory's outage kind, and invalid commands that the provider really
// refuses as InvalidSpec; the suite's commands are run_for's, which it
// accepts and runs for exactly that long.
#[test]
fn h9_policies_and_commands_match_what_the_provider_does() {
    for factory in [SimulatedFactory::modelled(), SimulatedFactory::wall()] {
        let policies = factory.policies();
        let strict = Policies::STRICT;
        assert_eq!(policies.outage, factory.outage);
        assert_eq!(policies.isolation, strict.isolation);
        assert_eq!(policies.unknown_destroy, strict.unknown_destroy);
        assert_eq!(policies.invalid_commands.len(), 7);
        assert!(policies.invalid_commands.iter().any(|c| c.is_empty()));
        block_on(async {
            let fixture = factory.build().await.unwrap();
            for (i, command) in policies.invalid_commands.iter().enumerate() {
                let spec = Spec::new(format!("bad-{i}"), command.iter().copied())
                    .with_trust(TrustClass::Trusted);
                let err = fixture.blue.provider.launch(spec).await.unwrap_err();
                assert_eq!(err.kind(), ErrorKind::InvalidSpec, "{command:?}: {err}");
            }
            for run_time in [Duration::from_secs(90), Duration::from_millis(1_500)] {
                let command = factory.command(run_time);
                assert_eq!(command, run_for(run_time));
                let spec = Spec::new("good", command).with_trust(TrustClass::Trusted);
                let launched = fixture.blue.provider.launch(spec).await.unwrap();
                fixture.blue.provider.destroy(&launched.id).await.unwrap();
            }
        });
    }
}

// H11: a fault armed with `after == 0` lets the next call reach the host and
// loses its answer (launch and destroy: Unavailable; list and find:
// InventoryUnavailable), then leaves the connection cut; with `after >= 1`
// the call (one exchange) completes and the connection is cut after it.
// Restoring the connection disarms a fault no call has met.
#[test]
fn h11_severable_applies_a_call_then_loses_its_answer() {
    block_on(async {
        let host = Host::new();
        let clock = ManualClock::new(SystemTime::UNIX_EPOCH + Duration::from_secs(1_000));
        let blue = severable("blue", &host, &clock);

        blue.lose_answer(0);
        assert!(!blue.is_severed(), "armed, not yet cut");
        let err = blue.launch(spec("lost")).await.unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Unavailable, "{err}");
        assert!(err.to_string().contains("answer was lost"), "{err}");
        assert!(blue.is_severed(), "the connection is down after the fault");
        let left = blue
            .provider()
            .find("lost")
            .await
            .unwrap()
            .expect("applied");
        let err = blue.launch(spec("after")).await.unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Unavailable, "{err}");
        assert!(blue.provider().find("after").await.unwrap().is_none());

        blue.sever(false);
        blue.lose_answer(0);
        let err = blue.destroy(&left.id).await.unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Unavailable, "{err}");
        assert!(blue.is_severed());
        assert!(blue.provider().list().await.unwrap().is_empty(), "applied");

        for call in ["list", "find"] {
            blue.sever(false);
            blue.lose_answer(0);
            let err = match call {
                "list" => blue.list().await.map(|_| ()).unwrap_err(),
                _ => blue.find("lost").await.map(|_| ()).unwrap_err(),
            };
            assert_eq!(err.kind(), ErrorKind::InventoryUnavailable, "{call}: {err}");
            assert!(blue.is_severed(), "{call}");
        }

        blue.sever(false);
        blue.lose_answer(1);
        let kept = blue.launch(spec("kept")).await.unwrap();
        assert!(blue.is_severed(), "cut after the call that completed");
        let err = blue.list().await.unwrap_err();
        assert_eq!(err.kind(), ErrorKind::InventoryUnavailable, "{err}");

        blue.sever(false);
        blue.lose_answer(3);
        assert_eq!(blue.destroy(&kept.id).await.unwrap(), Teardown::Stopped);
        assert!(blue.is_severed());

        // Restoring disarms: the next call is answered as ever.
        blue.sever(false);
        blue.lose_answer(0);
        blue.sever(false);
        assert!(blue.list().await.unwrap().is_empty());
        assert!(!blue.is_severed());
        // A call made while cut meets the fault and fails as cut.
        blue.sever(true);
        blue.lose_answer(0);
        let err = blue.launch(spec("cut")).await.unwrap_err();
        assert!(err.to_string().contains("is cut"), "{err}");
        blue.sever(false);
        assert!(
            blue.launch(spec("cut")).await.is_ok(),
            "the fault was spent"
        );
    });
}

// H11: the simulated factory loses answers mid-call exactly when its outages
// cut the whole connection, and says so in its policies; an inventory-only
// factory refuses to arm a fault.
#[test]
fn h11_factory_declares_and_arms_mid_call_faults_with_whole_outages() {
    let whole = SimulatedFactory::modelled().with_outage(Outage::WholeConnection);
    assert!(whole.policies().mid_call);
    assert!(SimulatedFactory::wall().policies().mid_call);
    let inventory = SimulatedFactory::modelled();
    assert!(!inventory.policies().mid_call);
    block_on(async {
        let fixture = whole.build().await.unwrap();
        whole.lose_answer(&fixture.green, 0).await.unwrap();
        let err = fixture.green.provider.launch(spec("x")).await.unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Unavailable, "{err}");
        assert!(fixture.green.provider.is_severed());
        assert!(!fixture.blue.provider.is_severed(), "only that deployment");
        whole.set_outage(&fixture.green, false).await.unwrap();
        assert_eq!(fixture.green.provider.list().await.unwrap().len(), 1);

        let fixture = inventory.build().await.unwrap();
        let err = inventory.lose_answer(&fixture.blue, 0).await.unwrap_err();
        assert!(err.to_string().contains("loses no answers"), "{err}");
    });
}
