//! [`Host`]: the store simulated instances live in, shared by every provider over it.

use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;
use std::time::SystemTime;

use billet_provider::{Instance, InstanceId, ProviderKind, State};
use parking_lot::Mutex;

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
        self.store.lock().by_id.len()
    }

    /// How many instances the deployment `owner` holds on the host, running
    /// or stopped. Costs O(1), whatever the host holds.
    pub fn instances_of(&self, owner: &str) -> usize {
        self.store
            .lock()
            .by_owner
            .get(owner)
            .map_or(0, HashMap::len)
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
            .field("instances", &store.by_id.len())
            .field("deployments", &store.by_owner.len())
            .finish()
    }
}

/// One simulated instance as the host holds it. Its state is not stored: it
/// is derived from the clock whenever the instance is reported.
#[derive(Debug)]
pub(crate) struct Record {
    pub(crate) owner: Arc<str>,
    pub(crate) name: Arc<str>,
    pub(crate) started_at: SystemTime,
    /// When it stops; `None` when its run time passes the end of representable time.
    pub(crate) stops_at: Option<SystemTime>,
}

impl Record {
    /// The instance as of `now`.
    pub(crate) fn snapshot(&self, id: u64, now: SystemTime) -> Instance {
        let running = self.stops_at.is_none_or(|stop| now < stop);
        Instance {
            id: format_id(id),
            name: self.name.to_string(),
            owner: self.owner.to_string(),
            kind: ProviderKind::Simulated,
            state: if running {
                State::Running
            } else {
                State::Stopped { exit_code: 0 }
            },
            started_at: self.started_at,
        }
    }
}

/// The store behind a [`Host`]: instances by id, and an index by
/// (owner, name), so that find and destroy cost O(1) and list costs
/// O(instances of that owner) whatever other deployments hold.
#[derive(Debug, Default)]
pub(crate) struct Store {
    next_id: u64,
    pub(crate) by_id: HashMap<u64, Record>,
    pub(crate) by_owner: HashMap<Arc<str>, HashMap<Arc<str>, u64>>,
}

impl Store {
    /// The id of `owner`'s instance named `name`, if it holds one.
    pub(crate) fn id_of(&self, owner: &str, name: &str) -> Option<u64> {
        self.by_owner.get(owner)?.get(name).copied()
    }

    /// Records a new instance under a fresh id. The caller has checked that
    /// the owner does not hold the name.
    pub(crate) fn insert(&mut self, record: Record) -> u64 {
        self.next_id += 1;
        let id = self.next_id;
        self.by_owner
            .entry(Arc::clone(&record.owner))
            .or_default()
            .insert(Arc::clone(&record.name), id);
        self.by_id.insert(id, record);
        id
    }

    /// Removes an instance by id, from both indexes.
    pub(crate) fn remove(&mut self, id: u64) -> Option<Record> {
        let record = self.by_id.remove(&id)?;
        if let Some(names) = self.by_owner.get_mut(&*record.owner) {
            names.remove(&*record.name);
            if names.is_empty() {
                self.by_owner.remove(&*record.owner);
            }
        }
        Some(record)
    }
}

const ID_PREFIX: &str = "sim-";

/// The public form of an id. Callers must treat it as opaque.
pub(crate) fn format_id(id: u64) -> InstanceId {
    InstanceId::from(format!("{ID_PREFIX}{id:x}"))
}

/// The store's id for a public id, or `None` for text this backend never
/// issued (which the host therefore does not hold).
pub(crate) fn parse_id(id: &InstanceId) -> Option<u64> {
    let hex = id.as_str().strip_prefix(ID_PREFIX)?;
    if hex.is_empty() || !hex.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')) {
        return None;
    }
    let n = u64::from_str_radix(hex, 16).ok()?;
    // Only the canonical spelling names an instance: "sim-01" is not "sim-1".
    (format_id(n) == *id).then_some(n)
}

#[cfg(test)]
mod tests {
    use super::*;

    // S12: ids are issued fresh and never reused after removal.
    #[test]
    fn s12_ids_are_never_reused() {
        let mut store = Store::default();
        let record = |name: &str| Record {
            owner: Arc::from("blue"),
            name: Arc::from(name),
            started_at: SystemTime::UNIX_EPOCH,
            stops_at: None,
        };
        let a = store.insert(record("a"));
        assert!(store.remove(a).is_some());
        let b = store.insert(record("a"));
        assert_ne!(a, b);
        assert!(store.by_owner["blue"].contains_key("a"));
        store.remove(b);
        assert!(
            store.by_owner.is_empty(),
            "an owner with nothing left is dropped"
        );
    }

    // S8: only ids this backend issued, in their canonical form, name an instance.
    #[test]
    fn s8_id_text_round_trip() {
        for n in [1u64, 15, 16, u64::MAX] {
            assert_eq!(parse_id(&format_id(n)), Some(n));
        }
        for bad in [
            "", "sim-", "sim-01", "sim-G", "SIM-1", "sim-+1", "i-1", "sim-1 ",
        ] {
            assert_eq!(parse_id(&InstanceId::from(bad)), None, "{bad:?}");
        }
    }
}
