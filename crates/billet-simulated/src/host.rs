//! [`Host`]: the store simulated instances live in, shared by every provider over it.

use std::fmt;
use std::sync::Arc;
use std::time::SystemTime;

use billet_provider::{Instance, InstanceId, ProviderKind, State};
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
        self.store
            .lock()
            .shelf(owner)
            .map_or(0, |shelf| shelf.records.len())
    }

    /// Whether the host holds no instance at all.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
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
            .field("deployments", &store.shelves.len())
            .finish()
    }
}

/// One simulated instance as the host holds it. Its state is not stored: it
/// is derived from the clock whenever the instance is reported.
#[derive(Debug)]
pub(crate) struct Record {
    pub(crate) name: Arc<str>,
    pub(crate) started_at: SystemTime,
    /// When it stops; `None` when its run time passes the end of representable time.
    pub(crate) stops_at: Option<SystemTime>,
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
    pub(crate) fn snapshot(&self, id: u64, owner: &str, now: SystemTime) -> Instance {
        Instance {
            id: format_id(id),
            name: String::from(&*self.name),
            owner: String::from(owner),
            kind: ProviderKind::Simulated,
            state: self.state(now),
            started_at: self.started_at,
        }
    }
}

/// One deployment's instances on a host, by id and by name.
#[derive(Debug, Default)]
pub(crate) struct Shelf {
    records: FxHashMap<u64, Record>,
    names: FxHashMap<Arc<str>, u64>,
}

impl Shelf {
    /// Every instance on the shelf with its id, in no particular order.
    pub(crate) fn iter(&self) -> impl ExactSizeIterator<Item = (u64, &Record)> {
        self.records.iter().map(|(id, record)| (*id, record))
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
    NotOwned {
        owner: Arc<str>,
        name: Option<Arc<str>>,
    },
}

/// The store behind a [`Host`]: each deployment's instances on a shelf of its
/// own, and a host-wide index from id to owner. Find and destroy cost O(1);
/// list walks one shelf, O(instances of that owner), whatever other
/// deployments hold.
#[derive(Debug, Default)]
pub(crate) struct Store {
    next_id: u64,
    owner_of: FxHashMap<u64, Arc<str>>,
    shelves: FxHashMap<Arc<str>, Shelf>,
}

impl Store {
    /// Instances on the host, across every deployment.
    pub(crate) fn len(&self) -> usize {
        self.owner_of.len()
    }

    /// The deployment's shelf, if it holds anything.
    pub(crate) fn shelf(&self, owner: &str) -> Option<&Shelf> {
        self.shelves.get(owner)
    }

    /// The deployment's instance named exactly `name`, with its id.
    pub(crate) fn find(&self, owner: &str, name: &str) -> Option<(u64, &Record)> {
        let shelf = self.shelves.get(owner)?;
        let id = *shelf.names.get(name)?;
        shelf.records.get(&id).map(|record| (id, record))
    }

    /// The deployment's instance with this id.
    pub(crate) fn find_by_id(&self, owner: &str, id: u64) -> Option<&Record> {
        self.shelves.get(owner)?.records.get(&id)
    }

    /// Records a new instance for `owner` under a fresh id, never issued
    /// before on this host. The caller has checked that the owner does not
    /// hold the name.
    pub(crate) fn insert(&mut self, owner: &Arc<str>, record: Record) -> u64 {
        self.next_id += 1;
        let id = self.next_id;
        let shelf = self.shelves.entry(Arc::clone(owner)).or_default();
        shelf.names.insert(Arc::clone(&record.name), id);
        shelf.records.insert(id, record);
        self.owner_of.insert(id, Arc::clone(owner));
        id
    }

    /// Removes instance `id` if `owner` holds it; says who holds it if
    /// another deployment does.
    pub(crate) fn take(&mut self, owner: &str, id: u64) -> Removal {
        match self.owner_of.get(&id) {
            None => Removal::Absent,
            Some(holder) if **holder != *owner => Removal::NotOwned {
                owner: Arc::clone(holder),
                name: self.find_by_id(holder, id).map(|r| Arc::clone(&r.name)),
            },
            Some(_) => self
                .remove(owner, id)
                .map_or(Removal::Absent, Removal::Removed),
        }
    }

    /// Removes `owner`'s instance `id` from every index.
    pub(crate) fn remove(&mut self, owner: &str, id: u64) -> Option<Record> {
        let shelf = self.shelves.get_mut(owner)?;
        let record = shelf.records.remove(&id)?;
        shelf.names.remove(&*record.name);
        if shelf.records.is_empty() {
            self.shelves.remove(owner);
        }
        self.owner_of.remove(&id);
        Some(record)
    }
}

const ID_PREFIX: &str = "sim-";

/// The public form of an id. Callers must treat it as opaque.
pub(crate) fn format_id(id: u64) -> InstanceId {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let digits = (64 - id.leading_zeros()).div_ceil(4).max(1) as usize;
    let mut text = String::with_capacity(ID_PREFIX.len() + digits);
    text.push_str(ID_PREFIX);
    for k in (0..digits).rev() {
        text.push(char::from(HEX[((id >> (4 * k)) & 0xf) as usize]));
    }
    InstanceId::from(text)
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

    // S12: ids are issued fresh and never reused after removal.
    #[test]
    fn s12_ids_are_never_reused() {
        let mut store = Store::default();
        let blue: Arc<str> = Arc::from("blue");
        let record = |name: &str| Record {
            name: Arc::from(name),
            started_at: SystemTime::UNIX_EPOCH,
            stops_at: None,
        };
        let a = store.insert(&blue, record("a"));
        assert!(store.remove("blue", a).is_some());
        let b = store.insert(&blue, record("a"));
        assert_ne!(a, b);
        assert_eq!(store.find("blue", "a").map(|(id, _)| id), Some(b));
        assert!(
            matches!(store.take("green", b), Removal::NotOwned { ref owner, .. } if &**owner == "blue"),
            "removal is scoped by owner"
        );
        assert!(matches!(store.take("blue", b), Removal::Removed(_)));
        assert!(matches!(store.take("blue", b), Removal::Absent));
        assert!(
            store.shelves.is_empty(),
            "an owner with nothing left is dropped"
        );
        assert_eq!(store.len(), 0);
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
