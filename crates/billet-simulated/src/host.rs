//! [`Host`]: the store simulated instances live in, shared by every provider over it.

use std::collections::{BTreeSet, VecDeque};
use std::fmt;
use std::ops::Bound;
use std::sync::{Arc, Weak};
use std::task::Waker;
use std::time::SystemTime;

use billet_provider::{Environment, Hint, Instance, InstanceId, ProviderKind, State};
use parking_lot::Mutex;
use rustc_hash::FxHashMap;

/// The machine, as far as the simulated backend is concerned: the store every
/// instance lives in.
///
/// Cloning a `Host` gives another handle to the **same** store. That is the
/// point: two deployments on one machine share a docker daemon or a jailer
/// root, and two providers over one `Host` model that, each seeing and
/// destroying only its own instances. A provider built without a host gets one
/// of its own.
///
/// # Guarantees
///
/// * Ids are unique on the host and never reused, even after destruction.
/// * Every operation on the store is atomic: from many threads at once, no
///   instance is lost, duplicated or seen half-made.
#[derive(Clone, Default)]
pub struct Host {
    store: Arc<Mutex<Store>>,
}

impl Host {
    /// An empty host.
    pub fn new() -> Self {
        Host::default()
    }

    /// How many instances the host holds, across every deployment.
    pub fn len(&self) -> usize {
        self.store.lock().len()
    }

    /// How many instances the deployment `owner` holds on the host, running
    /// or stopped. Costs O(1), whatever the host holds.
    pub fn instances_of(&self, owner: &str) -> usize {
        self.store.lock().shelf(owner).map_or(0, Shelf::len)
    }

    /// Whether the host holds no instance at all.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The environment the deployment `owner`'s instance named exactly `name`
    /// was launched with (P2), while the host holds it: what a real backend
    /// would have handed the instance's process (a runner reads its
    /// just-in-time configuration there). `None` once it is destroyed,
    /// which forgets it.
    pub fn environment_of(&self, owner: &str, name: &str) -> Option<Environment> {
        let store = self.store.lock();
        store
            .find(owner, name)
            .map(|(_, record)| record.env.clone())
    }

    /// Makes the deployment `owner`'s instance named exactly `name` stop at
    /// `at`, as its process would by exiting then (a runner that has run its
    /// one job, H14), unless its run time stops it sooner. Answers whether
    /// the host holds such an instance (and so whether anything changed).
    /// Hint streams of `owner` are woken, to look at the new stop.
    pub fn stop_at(&self, owner: &str, name: &str, at: SystemTime) -> bool {
        let wakers = {
            let mut store = self.store.lock();
            let Some(index) = store.shelf_index(owner) else {
                return false;
            };
            let shelf = &mut store.shelves[index];
            let Some(&id) = shelf.names.get(name) else {
                return false;
            };
            let Some(record) = shelf.records.get_mut(&id) else {
                return false;
            };
            if record.stops_at.is_some_and(|stop| stop <= at) {
                return true;
            }
            if let Some(old) = record.stops_at.replace(at) {
                shelf.stops.remove(&(old, id));
            }
            shelf.stops.insert((at, id));
            // A count of changes: only that it moves matters to a stream.
            shelf.stops_changed = shelf.stops_changed.wrapping_add(1);
            store.wake_subscribers(owner)
        };
        wakers.wake();
        true
    }

    pub(crate) fn lock(&self) -> parking_lot::MutexGuard<'_, Store> {
        self.store.lock()
    }
}

impl fmt::Debug for Host {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let store = self.store.lock();
        f.debug_struct("Host")
            .field("instances", &store.len())
            .field("deployments", &store.deployments())
            .finish()
    }
}

/// One simulated instance as the host holds it. Its state is not stored: it
/// is derived from the clock whenever the instance is reported.
#[derive(Debug)]
pub(crate) struct Record {
    /// Its public id, formatted once at launch so that every answer that
    /// reports it (and `list` reports every instance) copies a reference
    /// rather than formatting the id again.
    pub(crate) id: InstanceId,
    pub(crate) name: Arc<str>,
    pub(crate) started_at: SystemTime,
    /// When it stops; `None` when its run time passes the end of representable time.
    pub(crate) stops_at: Option<SystemTime>,
    /// How many bytes of output it writes over its run (see
    /// [`run_for_writing`](crate::run_for_writing)).
    pub(crate) writes: u64,
    /// The environment it was launched with (P2); never printed, and kept
    /// only while the record is.
    pub(crate) env: Environment,
}

impl Record {
    /// Its state as of `now`: running until its run time has elapsed,
    /// stopped with exit code 0 from then on.
    pub(crate) fn state(&self, now: SystemTime) -> State {
        if self.stops_at.is_none_or(|stop| now < stop) {
            State::Running
        } else {
            State::Stopped { exit_code: 0 }
        }
    }

    /// The instance as of `now`, owned by `owner`.
    pub(crate) fn snapshot(&self, owner: &Arc<str>, now: SystemTime) -> Instance {
        Instance {
            id: self.id.clone(),
            name: Arc::clone(&self.name),
            owner: Arc::clone(owner),
            kind: ProviderKind::Simulated,
            state: self.state(now),
            started_at: self.started_at,
        }
    }
}

/// One deployment's instances on a host, by id and by name.
#[derive(Debug)]
pub(crate) struct Shelf {
    owner: Arc<str>,
    records: FxHashMap<u64, Record>,
    names: FxHashMap<Arc<str>, u64>,
    /// Every instance held with a stop time, by (stop time, id): where a
    /// hint stream finds what stopped since it last looked (P9).
    stops: BTreeSet<(SystemTime, u64)>,
    /// Changes to `stops` so far: a hint stream that read the next stop at
    /// one count need not read it again until the count moves.
    stops_changed: u64,
}

impl Shelf {
    /// The instance `id`, if the shelf holds it.
    pub(crate) fn get(&self, id: u64) -> Option<&Record> {
        self.records.get(&id)
    }

    /// How many times the stops held have changed (an instance with a stop
    /// time added or removed): equal counts mean the same stops.
    pub(crate) fn stops_changed(&self) -> u64 {
        self.stops_changed
    }

    /// The instances held that stop after `after`, with their stop times,
    /// in stop order (ties by id).
    pub(crate) fn stopping_after(
        &self,
        after: SystemTime,
    ) -> impl Iterator<Item = (SystemTime, &Record)> {
        // Past every (after, id): an id is at most u64::MAX.
        let past = (Bound::Excluded((after, u64::MAX)), Bound::Unbounded);
        self.stops
            .range(past)
            .filter_map(|(at, id)| Some((*at, self.records.get(id)?)))
    }

    /// Every instance on the shelf with its id, in no particular order.
    pub(crate) fn iter(&self) -> impl ExactSizeIterator<Item = (u64, &Record)> {
        self.records.iter().map(|(id, record)| (*id, record))
    }

    /// How many instances are on the shelf.
    pub(crate) fn len(&self) -> usize {
        self.records.len()
    }
}

/// What [`Store::take`] did.
#[derive(Debug)]
pub(crate) enum Removal {
    /// The owner held it; it is gone now.
    Removed(Record),
    /// The host does not hold that id.
    Absent,
    /// Another deployment holds it; it was left untouched.
    NotOwned { owner: Arc<str>, name: Arc<str> },
}

/// The most hints one subscriber may fall behind by before it misses the
/// oldest (hints may be lost: P9).
pub const HINT_BUFFER: usize = 4096;

/// Bits of an id that count launches; the bits above them number the shelf.
const SEQ_BITS: u32 = 40;
/// The largest launch count an id can carry: `SEQ_BITS` ones.
const SEQ_MASK: u64 = (1 << SEQ_BITS) - 1;
/// The largest shelf number an id can carry: the `64 - SEQ_BITS` bits above
/// the launch count, all ones.
const LAST_SHELF: u64 = u64::MAX >> SEQ_BITS;

/// The id of the `seq`th launch on the host, made on shelf `shelf`: the shelf
/// number in the high bits, the launch count in the low `SEQ_BITS`. `None`
/// when either does not fit its bits, so two shelves' ids never collide.
fn compose_id(shelf: usize, seq: u64) -> Option<u64> {
    let shelf = u64::try_from(shelf).ok()?;
    if shelf > LAST_SHELF || seq > SEQ_MASK {
        return None;
    }
    Some(shelf << SEQ_BITS | seq)
}

/// The store behind a [`Host`]: each deployment's instances on a shelf of its
/// own. An id carries the number of its shelf, so find and destroy go
/// straight to one shelf in O(1), and list walks one shelf, O(instances of
/// that owner), whatever other deployments hold.
#[derive(Debug, Default)]
pub(crate) struct Store {
    /// Launches so far on this host: the low bits of every id.
    launches: u64,
    len: usize,
    shelves: Vec<Shelf>,
    shelf_of: FxHashMap<Arc<str>, usize>,
    /// Each owner's hint subscribers, by their inboxes (P9): a subscriber
    /// whose stream was dropped is forgotten at the next hint told.
    hints: FxHashMap<Arc<str>, Vec<Weak<Mutex<Inbox>>>>,
}

/// One hint subscriber's inbox: the hints launches and destroys told it and
/// it has not read yet, at most [`HINT_BUFFER`] (past
/// that the oldest is missed: hints may be lost, P9), and the waker of its
/// stream's last poll that found nothing to read.
#[derive(Debug, Default)]
pub(crate) struct Inbox {
    pub(crate) told: VecDeque<Hint>,
    pub(crate) waker: Option<Waker>,
}

/// The wakers of the subscribers a hint reached, to be woken once the
/// host's lock is released (so a woken stream may use the host at once).
#[must_use = "wake them once the host's lock is released"]
pub(crate) struct Wakers(Vec<Waker>);

impl Wakers {
    /// Wakes every subscriber the hint reached.
    pub(crate) fn wake(self) {
        for waker in self.0 {
            waker.wake();
        }
    }
}

impl Store {
    /// Instances on the host, across every deployment.
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// How many deployments have launched on this host.
    pub(crate) fn deployments(&self) -> usize {
        self.shelves.len()
    }

    /// The deployment's shelf, if it has launched here.
    pub(crate) fn shelf(&self, owner: &str) -> Option<&Shelf> {
        self.shelf_of.get(owner).map(|k| &self.shelves[*k])
    }

    /// Where the deployment's shelf is, if it has launched here: a place
    /// that stays its own for the host's life (shelves are never removed).
    pub(crate) fn shelf_index(&self, owner: &str) -> Option<usize> {
        self.shelf_of.get(owner).copied()
    }

    /// The shelf at `index`, as [`Store::shelf_index`] answered it.
    pub(crate) fn shelf_at(&self, index: usize) -> &Shelf {
        &self.shelves[index]
    }

    /// A new subscriber to `owner`'s hints: an empty inbox that every hint
    /// told from now on reaches, for as long as the caller holds it.
    pub(crate) fn subscribe(&mut self, owner: &Arc<str>) -> Arc<Mutex<Inbox>> {
        let inbox = Arc::new(Mutex::new(Inbox::default()));
        self.hints
            .entry(Arc::clone(owner))
            .or_default()
            .push(Arc::downgrade(&inbox));
        inbox
    }

    /// How many subscribers to `owner`'s hints the store keeps.
    #[cfg(test)]
    fn subscribers(&self, owner: &str) -> usize {
        self.hints.get(owner).map_or(0, Vec::len)
    }

    /// Tells `owner`'s subscribers, if any, of `hint` (made only if one is
    /// there), and answers the wakers to wake once the lock is released.
    pub(crate) fn hint(&mut self, owner: &str, hint: impl FnOnce() -> Hint) -> Wakers {
        let mut wakers = Vec::new();
        let Some(subscribers) = self.hints.get_mut(owner) else {
            return Wakers(wakers);
        };
        subscribers.retain(|inbox| inbox.strong_count() > 0);
        if subscribers.is_empty() {
            return Wakers(wakers);
        }
        let hint = hint();
        for inbox in subscribers.iter().filter_map(Weak::upgrade) {
            let mut inbox = inbox.lock();
            if inbox.told.len() >= HINT_BUFFER {
                // A subscriber that falls behind misses the oldest: hints may be lost.
                inbox.told.pop_front();
            }
            inbox.told.push_back(hint.clone());
            wakers.extend(inbox.waker.take());
        }
        Wakers(wakers)
    }

    /// The wakers of `owner`'s hint subscribers waiting for something to
    /// read, told nothing: to look again at what they watch.
    fn wake_subscribers(&mut self, owner: &str) -> Wakers {
        let wakers = self
            .hints
            .get(owner)
            .into_iter()
            .flatten()
            .filter_map(Weak::upgrade)
            .filter_map(|inbox| inbox.lock().waker.take())
            .collect();
        Wakers(wakers)
    }

    /// The id `id` is on a shelf of another deployment than `owner`: its
    /// owner, if so.
    pub(crate) fn owner_of(&self, id: u64) -> Option<&Arc<str>> {
        let shelf = self.shelves.get((id >> SEQ_BITS) as usize)?;
        shelf.records.contains_key(&id).then_some(&shelf.owner)
    }

    /// The deployment's instance named exactly `name`, with its id.
    pub(crate) fn find(&self, owner: &str, name: &str) -> Option<(u64, &Record)> {
        let shelf = self.shelf(owner)?;
        let id = *shelf.names.get(name)?;
        shelf.records.get(&id).map(|record| (id, record))
    }

    /// Records a new instance for `owner` named `name`, started at
    /// `started_at` and stopping at `stops_at`, under a fresh id never issued
    /// before on this host, and answers the id with the record as held;
    /// `None` once the host has issued every id it can. The caller has
    /// checked that the owner does not hold the name. A refused insert
    /// changes nothing.
    pub(crate) fn insert(
        &mut self,
        owner: &Arc<str>,
        name: Arc<str>,
        started_at: SystemTime,
        stops_at: Option<SystemTime>,
        writes: u64,
        env: Environment,
    ) -> Option<(u64, &Record)> {
        let (shelf, is_new) = match self.shelf_of.get(&**owner) {
            Some(k) => (*k, false),
            None => (self.shelves.len(), true),
        };
        // `launches` never exceeds SEQ_MASK, so this cannot overflow.
        let seq = self.launches + 1;
        let id = compose_id(shelf, seq)?;
        if is_new {
            self.shelves.push(Shelf {
                owner: Arc::clone(owner),
                records: FxHashMap::default(),
                names: FxHashMap::default(),
                stops: BTreeSet::new(),
                stops_changed: 0,
            });
            self.shelf_of.insert(Arc::clone(owner), shelf);
        }
        self.launches = seq;
        self.len += 1;
        let shelf = &mut self.shelves[shelf];
        shelf.names.insert(Arc::clone(&name), id);
        if let Some(at) = stops_at {
            shelf.stops.insert((at, id));
            shelf.stops_changed += 1;
        }
        let record = Record {
            id: format_id(id),
            name,
            started_at,
            stops_at,
            writes,
            env,
        };
        Some((id, shelf.records.entry(id).insert_entry(record).into_mut()))
    }

    /// Removes instance `id` if `owner` holds it; says who holds it if
    /// another deployment does.
    pub(crate) fn take(&mut self, owner: &str, id: u64) -> Removal {
        let Some(shelf) = self.shelves.get_mut((id >> SEQ_BITS) as usize) else {
            return Removal::Absent;
        };
        if *shelf.owner != *owner {
            return match shelf.records.get(&id) {
                Some(record) => Removal::NotOwned {
                    owner: Arc::clone(&shelf.owner),
                    name: Arc::clone(&record.name),
                },
                None => Removal::Absent,
            };
        }
        let Some(record) = shelf.records.remove(&id) else {
            return Removal::Absent;
        };
        shelf.names.remove(&*record.name);
        if let Some(at) = record.stops_at {
            shelf.stops.remove(&(at, id));
            shelf.stops_changed += 1;
        }
        self.len -= 1;
        Removal::Removed(record)
    }
}

const ID_PREFIX: &str = "sim-";

/// The public form of an id. Callers must treat it as opaque.
pub(crate) fn format_id(id: u64) -> InstanceId {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    // The prefix (4 bytes) and at most 16 hex digits, written right to left
    // into a buffer on the stack, so the id's text is allocated once, by the id.
    let mut text = [0u8; 20];
    let mut start = text.len();
    let mut rest = id;
    loop {
        start -= 1;
        text[start] = HEX[(rest & 0xf) as usize];
        rest >>= 4;
        if rest == 0 {
            break;
        }
    }
    start -= ID_PREFIX.len();
    text[start..start + ID_PREFIX.len()].copy_from_slice(ID_PREFIX.as_bytes());
    match std::str::from_utf8(&text[start..]) {
        Ok(text) => InstanceId::from(text),
        // Only ASCII was written; this spelling gives the same text.
        Err(_) => InstanceId::from(format!("{ID_PREFIX}{id:x}")),
    }
}

/// The store's id for a public id, or `None` for text this backend never
/// issued (which the host therefore does not hold).
pub(crate) fn parse_id(id: &InstanceId) -> Option<u64> {
    let hex = id.as_str().strip_prefix(ID_PREFIX)?;
    if hex.is_empty() || !hex.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')) {
        return None;
    }
    // Only the canonical spelling names an instance: "sim-01" is not "sim-1".
    if hex.len() > 1 && hex.starts_with('0') {
        return None;
    }
    u64::from_str_radix(hex, 16).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hint(name: &str) -> Hint {
        Hint {
            kind: billet_provider::HintKind::Appeared,
            id: format_id(1),
            name: name.into(),
        }
    }

    // P9: every subscriber of an owner is told every hint, up to the
    // buffer (past it the oldest is missed); a hint with no subscriber is
    // not even made; a subscriber dropped is forgotten at the next hint.
    #[test]
    fn p9_every_subscriber_is_told_each_hint_and_a_dropped_one_is_forgotten() {
        let mut store = Store::default();
        let blue: Arc<str> = Arc::from("blue");
        let wakers = store.hint("blue", || panic!("made with no subscriber"));
        assert!(wakers.0.is_empty());
        let (one, two) = (store.subscribe(&blue), store.subscribe(&blue));
        let green = store.subscribe(&Arc::from("green"));
        for k in 0..=HINT_BUFFER {
            store.hint("blue", || hint(&format!("job-{k}"))).wake();
        }
        for inbox in [&one, &two] {
            let told = &inbox.lock().told;
            assert_eq!(told.len(), HINT_BUFFER, "the oldest missed");
            assert_eq!(told.front().map(|h| &*h.name), Some("job-1"));
            let last = format!("job-{}", HINT_BUFFER);
            assert_eq!(told.back().map(|h| &*h.name), Some(last.as_str()));
        }
        assert!(green.lock().told.is_empty(), "nothing of blue's");
        assert_eq!(store.subscribers("blue"), 2);
        drop(one);
        store.hint("blue", || hint("job-last")).wake();
        assert_eq!(store.subscribers("blue"), 1);
        assert_eq!(two.lock().told.back().map(|h| &*h.name), Some("job-last"));
    }

    // S12: ids are issued fresh and never reused after removal.
    #[test]
    fn s12_ids_are_never_reused() {
        let mut store = Store::default();
        let blue: Arc<str> = Arc::from("blue");
        let green: Arc<str> = Arc::from("green");
        let a = store
            .insert(
                &blue,
                Arc::from("a"),
                SystemTime::UNIX_EPOCH,
                None,
                0,
                Environment::new(),
            )
            .unwrap()
            .0;
        assert!(matches!(store.take("blue", a), Removal::Removed(_)));
        let b = store
            .insert(
                &blue,
                Arc::from("a"),
                SystemTime::UNIX_EPOCH,
                None,
                0,
                Environment::new(),
            )
            .unwrap()
            .0;
        let g = store
            .insert(
                &green,
                Arc::from("a"),
                SystemTime::UNIX_EPOCH,
                None,
                0,
                Environment::new(),
            )
            .unwrap()
            .0;
        assert!(a != b && b != g && a != g);
        assert_eq!(store.find("blue", "a").map(|(id, _)| id), Some(b));
        assert_eq!(store.find("green", "a").map(|(id, _)| id), Some(g));
        assert!(
            matches!(store.take("green", b), Removal::NotOwned { ref owner, .. } if &**owner == "blue"),
            "removal is scoped by owner"
        );
        assert_eq!(store.len(), 2);
        assert!(matches!(store.take("blue", b), Removal::Removed(_)));
        assert!(matches!(store.take("blue", b), Removal::Absent));
        assert!(matches!(store.take("blue", u64::MAX), Removal::Absent));
        assert_eq!(store.len(), 1);
        assert_eq!(store.shelf("blue").map(Shelf::len), Some(0));
    }

    // S12: a host that has issued every id it can refuses rather than reuse
    // one, and the refusal changes nothing: no launch counted, no shelf made.
    #[test]
    fn s12_exhausted_id_space_is_refused() {
        let mut store = Store {
            launches: (1 << 40) - 2,
            ..Store::default()
        };
        let blue: Arc<str> = Arc::from("blue");
        let green: Arc<str> = Arc::from("green");
        // The last launch count, 2^40 - 1, is still issued: on shelf 0 it is
        // the id itself.
        assert_eq!(
            store
                .insert(
                    &blue,
                    Arc::from("x"),
                    SystemTime::UNIX_EPOCH,
                    None,
                    0,
                    Environment::new()
                )
                .map(|(id, _)| id),
            Some((1 << 40) - 1)
        );
        assert_eq!(
            store
                .insert(
                    &blue,
                    Arc::from("y"),
                    SystemTime::UNIX_EPOCH,
                    None,
                    0,
                    Environment::new()
                )
                .map(|(id, _)| id),
            None
        );
        assert_eq!(
            store
                .insert(
                    &green,
                    Arc::from("z"),
                    SystemTime::UNIX_EPOCH,
                    None,
                    0,
                    Environment::new()
                )
                .map(|(id, _)| id),
            None
        );
        assert_eq!(store.len(), 1);
        assert_eq!(store.deployments(), 1, "a refused launch makes no shelf");
        assert!(store.find("blue", "y").is_none());
        assert_eq!(store.launches, (1 << 40) - 1);
    }

    // S12: the id space's exact bounds. The low 40 bits count launches
    // (1 to 2^40 - 1) and the 24 bits above number the shelf (0 to 2^24 - 1),
    // so the last launch on the last shelf is u64::MAX; one past either bound
    // is refused rather than spilling into another shelf's ids.
    #[test]
    fn s12_id_space_bounds_are_exact() {
        assert_eq!(compose_id(0, 1), Some(1));
        assert_eq!(compose_id(0, (1 << 40) - 1), Some(0xff_ffff_ffff));
        assert_eq!(compose_id(0, 1 << 40), None, "shelf 1's first id");
        assert_eq!(compose_id(1, 1), Some((1 << 40) | 1));
        assert_eq!(compose_id(3, 5), Some(0x300_0000_0005));
        assert_eq!(compose_id((1 << 24) - 1, (1 << 40) - 1), Some(u64::MAX));
        assert_eq!(compose_id(1 << 24, 1), None, "would wrap onto shelf 0");
        assert_eq!(compose_id(usize::MAX, 1), None);
        // The shelf an id names is the one it was made on.
        let id = compose_id(0xabcdef, 0x12_3456_789a).unwrap();
        assert_eq!(id >> 40, 0xabcdef);
        assert_eq!(id & ((1 << 40) - 1), 0x12_3456_789a);
    }

    // S8: only ids this backend issued, in their canonical form, name an instance.
    #[test]
    fn s8_id_text_round_trip() {
        for n in [0u64, 1, 15, 16, 255, 256, u64::MAX] {
            assert_eq!(format_id(n).as_str(), format!("sim-{n:x}"));
            assert_eq!(parse_id(&format_id(n)), Some(n));
        }
        for bad in [
            "", "sim-", "sim-01", "sim-G", "SIM-1", "sim-+1", "i-1", "sim-1 ",
        ] {
            assert_eq!(parse_id(&InstanceId::from(bad)), None, "{bad:?}");
        }
    }
}
