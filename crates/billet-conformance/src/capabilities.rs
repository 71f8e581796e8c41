//! [`check_capabilities`]: the contract's checks of the optional capabilities
//! (P9), for a backend that offers them: an instance's output is readable,
//! the same at every offset, while it runs and after it stopped, until it is
//! destroyed and not after; hints never name another owner's instance, and
//! the inventory stays exact whatever they do.

use std::fmt;
use std::time::Duration;

use billet_provider::{
    Error, ErrorKind, Hint, HintStream, InstanceId, OUTPUT_CHUNK, Provider, Spec, State, TrustClass,
};
use futures::StreamExt;

use crate::factory::{Fixture, ProviderFactory, Timing};

/// The longest, in wall time, the checks wait for one answer, one read or
/// a stop under [`Timing::Wall`]: past it, a backend that never answers
/// fails rather than hangs the suite.
pub const CAPABILITY_WAIT: Duration = Duration::from_secs(30);

/// What [`check_capabilities`] checked: which capabilities the backend
/// offers, and what the checks saw of them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CapabilityReport {
    /// Whether the backend offers output, and it was checked.
    pub output: bool,
    /// Whether the backend offers hints, and they were checked.
    pub hints: bool,
    /// How many hints of its own the checked deployment was told.
    pub hints_seen: usize,
}

/// A capability that breaks the contract: the clause, and what was seen.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CapabilityFailure {
    /// The clause broken (`P9`), or `fixture` when the factory could not
    /// give what the checks need.
    pub clause: &'static str,
    /// What was asked, what was answered, and what the contract says.
    pub what: String,
}

impl fmt::Display for CapabilityFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.clause, self.what)
    }
}

impl std::error::Error for CapabilityFailure {}

fn broke(what: impl Into<String>) -> CapabilityFailure {
    CapabilityFailure {
        clause: "P9",
        what: what.into(),
    }
}

fn fixture_failed(what: impl fmt::Display) -> CapabilityFailure {
    CapabilityFailure {
        clause: "fixture",
        what: what.to_string(),
    }
}

/// Runs the checks of the optional capabilities on one fresh fixture of
/// `factory`, each capability only if the backend offers it (a backend
/// with neither passes, saying so in the report). Output needs
/// [`ProviderFactory::command_writing`].
///
/// * **Output** (`blue`): an instance that writes a known count of bytes is
///   read while it runs, and after it stopped from byte 0 (every byte, in
///   items of at most [`OUTPUT_CHUNK`]), from a third of the way (exactly
///   the rest), and from past the end (nothing); a reader that began while
///   it ran gets every byte and its stream ends; `green` reading blue's
///   instance is [`Error::NotOwned`]; once destroyed, and for an id never
///   issued, a read is [`Error::NotFound`].
/// * **Hints** (`blue` subscribed): `blue` and `green` both launch an
///   instance of the same name, both stop, and blue destroys its own; no
///   hint blue is told names green's instance, and blue's inventory is
///   exactly what it holds.
pub fn check_capabilities<F: ProviderFactory>(
    factory: &F,
) -> Result<CapabilityReport, CapabilityFailure> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|err| fixture_failed(format!("could not start a tokio runtime: {err}")))?;
    runtime.block_on(async {
        let fixture = factory.build().await.map_err(fixture_failed)?;
        let checked = check(factory, &fixture).await;
        let torn = factory.teardown(&fixture).await;
        let report = checked?;
        torn.map_err(fixture_failed)?;
        Ok(report)
    })
}

async fn check<F: ProviderFactory>(
    factory: &F,
    fixture: &Fixture<F::Provider>,
) -> Result<CapabilityReport, CapabilityFailure> {
    let mut report = CapabilityReport {
        output: false,
        hints: false,
        hints_seen: 0,
    };
    if fixture.blue.provider.output().is_some() {
        check_output(factory, fixture).await?;
        report.output = true;
    }
    if fixture.blue.provider.hints().is_some() {
        report.hints_seen = check_hints(factory, fixture).await?;
        report.hints = true;
    }
    Ok(report)
}

/// The run time of the instances the checks launch, and how far the clock
/// moves: in modelled time exact, in wall time long past the windows.
fn run_time(fixture: &Fixture<impl Provider>) -> Duration {
    match &fixture.timing {
        Timing::Modelled(_) => Duration::from_secs(10),
        Timing::Wall(windows) => windows.unit() * 4,
    }
}

/// Lets time pass until `d` after now: the clock moves in modelled time, a
/// real sleep in wall time (with the windows on top).
async fn pass(fixture: &Fixture<impl Provider>, d: Duration) {
    match &fixture.timing {
        Timing::Modelled(clock) => {
            // The clock only moves forward: a move that fails is a bug here.
            let _ = clock.advance(d);
            tokio::task::yield_now().await;
        }
        Timing::Wall(windows) => {
            tokio::time::sleep(d + windows.pending + windows.around_end).await;
        }
    }
}

async fn bounded<T>(what: &str, f: impl Future<Output = T>) -> Result<T, CapabilityFailure> {
    tokio::time::timeout(CAPABILITY_WAIT, f)
        .await
        .map_err(|_| broke(format!("{what} did not answer within {CAPABILITY_WAIT:?}")))
}

fn spec<F: ProviderFactory>(factory: &F, name: &str, command: Vec<String>) -> Spec {
    let mut spec = Spec::new(name, command).with_trust(TrustClass::Trusted);
    spec.image = factory.image();
    spec
}

/// Reads everything `provider` yields for `id` from `from` until the stream
/// ends, checking every item's size.
async fn read_all(
    provider: &dyn Provider,
    id: &InstanceId,
    from: u64,
) -> Result<Result<Vec<u8>, Error>, CapabilityFailure> {
    let Some(output) = provider.output() else {
        return Err(broke("output() answered Some once and None later"));
    };
    bounded(&format!("reading the output of {id} from byte {from}"), async {
        let mut stream = match output.read(id, from).await {
            Ok(stream) => stream,
            Err(err) => return Ok(Err(err)),
        };
        let mut all = Vec::new();
        while let Some(item) = stream.next().await {
            match item {
                Ok(bytes) if bytes.len() > OUTPUT_CHUNK => {
                    return Err(broke(format!(
                        "an item of {id}'s output holds {} bytes, more than OUTPUT_CHUNK ({OUTPUT_CHUNK})",
                        bytes.len()
                    )));
                }
                Ok(bytes) => all.extend_from_slice(&bytes),
                Err(err) => return Ok(Err(err)),
            }
        }
        Ok(Ok(all))
    })
    .await?
}

/// Waits until `provider`'s inventory shows `id` stopped.
async fn until_stopped(provider: &dyn Provider, id: &InstanceId) -> Result<(), CapabilityFailure> {
    bounded(&format!("{id} stopping"), async {
        loop {
            if let Ok(instances) = provider.list().await
                && instances
                    .iter()
                    .any(|i| &i.id == id && matches!(i.state, State::Stopped { .. }))
            {
                return;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await
}

async fn check_output<F: ProviderFactory>(
    factory: &F,
    fixture: &Fixture<F::Provider>,
) -> Result<(), CapabilityFailure> {
    const BYTES: u64 = 3 * OUTPUT_CHUNK as u64 + 1234;
    let blue: &dyn Provider = &fixture.blue.provider;
    let green: &dyn Provider = &fixture.green.provider;
    let run = run_time(fixture);
    let Some(command) = factory.command_writing(run, BYTES) else {
        return Err(fixture_failed(
            "the backend offers output, and the factory names no command that writes it (ProviderFactory::command_writing)",
        ));
    };
    let instance = blue
        .launch(spec(factory, "p9-output", command))
        .await
        .map_err(|err| fixture_failed(format!("launching the instance that writes: {err}")))?;
    let id = instance.id.clone();
    // A reader from the start, while it runs: it follows to the end.
    let follower = {
        let output = blue.output().ok_or_else(|| broke("output() changed"))?;
        output
            .read(&id, 0)
            .await
            .map_err(|err| broke(format!("reading a running instance's output: {err}")))?
    };
    let following = tokio::spawn(collect(follower));
    pass(fixture, run / 2).await;
    pass(fixture, run).await;
    until_stopped(blue, &id).await?;
    let whole = match read_all(blue, &id, 0).await? {
        Ok(whole) => whole,
        Err(err) => {
            return Err(broke(format!(
                "the output of a stopped instance, not yet destroyed, answered {err}: it must be readable until destroyed"
            )));
        }
    };
    if whole.len() as u64 != BYTES {
        return Err(broke(format!(
            "an instance whose command writes {BYTES} bytes shows {} after it stopped",
            whole.len()
        )));
    }
    let followed = bounded("a reader that began while the instance ran", following)
        .await?
        .map_err(|err| broke(format!("the reader that followed: {err}")))?;
    match followed {
        Ok(followed) if followed == whole => {}
        Ok(followed) => {
            return Err(broke(format!(
                "a reader that began while the instance ran got {} bytes, not the {} a read after its stop shows, or other bytes",
                followed.len(),
                whole.len()
            )));
        }
        Err(err) => {
            return Err(broke(format!(
                "a reader that began while the instance ran ended with {err}"
            )));
        }
    }
    let third = BYTES / 3;
    match read_all(blue, &id, third).await? {
        Ok(rest) if rest[..] == whole[third as usize..] => {}
        Ok(rest) => {
            return Err(broke(format!(
                "a read from byte {third} gave {} bytes that are not the output past its first {third}",
                rest.len()
            )));
        }
        Err(err) => return Err(broke(format!("a read from byte {third}: {err}"))),
    }
    match read_all(blue, &id, BYTES + 5).await? {
        Ok(rest) if rest.is_empty() => {}
        other => {
            return Err(broke(format!(
                "a read from past the end of a stopped instance's output must be empty, answered {other:?}"
            )));
        }
    }
    if green.output().is_some() {
        match read_all(green, &id, 0).await? {
            Err(err) if err.kind() == ErrorKind::NotOwned => {}
            other => {
                return Err(broke(format!(
                    "another deployment read {id}'s output: answered {:?}, must be NotOwned",
                    other.map(|bytes| bytes.len())
                )));
            }
        }
    }
    blue.destroy(&id)
        .await
        .map_err(|err| fixture_failed(format!("destroying {id}: {err}")))?;
    for (what, id) in [
        ("a destroyed instance", id.clone()),
        ("an id never issued", InstanceId::from("p9-never-issued")),
    ] {
        match read_all(blue, &id, 0).await? {
            Err(err) if err.kind() == ErrorKind::NotFound => {}
            other => {
                return Err(broke(format!(
                    "the output of {what} ({id}) answered {:?}, must be NotFound: output is kept until destroyed, not after",
                    other.map(|bytes| bytes.len())
                )));
            }
        }
    }
    Ok(())
}

async fn collect(mut stream: billet_provider::OutputStream) -> Result<Vec<u8>, Error> {
    let mut all = Vec::new();
    while let Some(item) = stream.next().await {
        all.extend_from_slice(&item?);
    }
    Ok(all)
}

async fn check_hints<F: ProviderFactory>(
    factory: &F,
    fixture: &Fixture<F::Provider>,
) -> Result<usize, CapabilityFailure> {
    let blue: &dyn Provider = &fixture.blue.provider;
    let green: &dyn Provider = &fixture.green.provider;
    let hints = blue.hints().ok_or_else(|| broke("hints() changed"))?;
    let mut stream = hints.subscribe();
    let run = run_time(fixture);
    let command = factory.command(run);
    let own = launch(blue, spec(factory, "p9-hinted", command.clone())).await?;
    let kept = launch(blue, spec(factory, "p9-kept", command.clone())).await?;
    let foreign = launch(green, spec(factory, "p9-hinted", command)).await?;
    pass(fixture, run).await;
    until_stopped(blue, &own.id).await?;
    until_stopped(green, &foreign.id).await?;
    blue.destroy(&own.id)
        .await
        .map_err(|err| fixture_failed(format!("destroying {}: {err}", own.id)))?;
    let seen = drain(fixture, &mut stream).await;
    for hint in &seen {
        if hint.id == foreign.id {
            return Err(broke(format!(
                "blue was told {hint:?}: a hint named green's instance {} (a hint never names another owner's instance)",
                foreign.id
            )));
        }
    }
    let inventory = bounded("blue's list", blue.list())
        .await?
        .map_err(|err| broke(format!("blue's list after hints: {err}")))?;
    let ids: Vec<&InstanceId> = inventory.iter().map(|i| &i.id).collect();
    if ids != [&kept.id] {
        return Err(broke(format!(
            "after hints, blue's inventory is {ids:?}, not exactly what it holds ([{}])",
            kept.id
        )));
    }
    blue.destroy(&kept.id)
        .await
        .map_err(|err| fixture_failed(format!("destroying {}: {err}", kept.id)))?;
    green
        .destroy(&foreign.id)
        .await
        .map_err(|err| fixture_failed(format!("destroying {}: {err}", foreign.id)))?;
    Ok(seen.len())
}

async fn launch(
    provider: &dyn Provider,
    spec: Spec,
) -> Result<billet_provider::Instance, CapabilityFailure> {
    let name = spec.name.clone();
    provider
        .launch(spec)
        .await
        .map_err(|err| fixture_failed(format!("launching {name:?}: {err}")))
}

/// The hints ready now, and in wall time those that come within the
/// windows.
async fn drain(fixture: &Fixture<impl Provider>, stream: &mut HintStream) -> Vec<Hint> {
    let wait = match &fixture.timing {
        Timing::Modelled(_) => Duration::from_millis(50),
        Timing::Wall(windows) => windows.unit() * 4 + Duration::from_secs(1),
    };
    let mut seen = Vec::new();
    while let Ok(Some(hint)) = tokio::time::timeout(wait, stream.next()).await {
        seen.push(hint);
    }
    seen
}
