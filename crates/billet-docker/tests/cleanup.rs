//! The test support's own guarantees, proven on the daemon: a failing test
//! leaves no container behind, and the proxy's cut really refuses connections.

mod support;

use billet_provider::{Provider, Spec, TrustClass};
use support::{SocketProxy, TEST_IMAGE, daemon, exists};

// D9: a test that fails (panics) mid-way still removes every container it
// started, through its scope's guard.
#[test]
fn d9_a_failing_test_leaves_nothing_behind() {
    let Some(probe) = daemon("cleanup-probe") else { return };
    drop(probe);
    let outcome = std::thread::spawn(|| {
        let scope = daemon("cleanup").expect("the daemon answered a moment ago");
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let id = runtime.block_on(async {
            let blue = scope.provider("blue");
            let spec = Spec::new("job", ["sleep", "300"])
                .with_image(TEST_IMAGE)
                .with_trust(TrustClass::Trusted);
            blue.launch(spec).await.unwrap().id
        });
        assert!(exists(id.as_str()));
        std::panic::panic_any(id.into_string());
    })
    .join();
    let id = *outcome
        .expect_err("the test thread failed on purpose")
        .downcast::<String>()
        .expect("the id");
    assert!(!exists(&id), "container {id} outlived its failing test");
}

// D7: a cut proxy refuses connections, a restored one passes them again.
#[test]
fn d7_the_proxy_cut_is_real() {
    let Some(_scope) = daemon("proxy") else { return };
    let proxy = SocketProxy::start();
    assert!(std::os::unix::net::UnixStream::connect(proxy.path()).is_ok());
    proxy.cut();
    let refused = std::os::unix::net::UnixStream::connect(proxy.path()).unwrap_err();
    assert_eq!(refused.kind(), std::io::ErrorKind::ConnectionRefused);
    proxy.restore();
    assert!(std::os::unix::net::UnixStream::connect(proxy.path()).is_ok());
}
