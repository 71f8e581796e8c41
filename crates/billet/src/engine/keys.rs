//! [`Keys`]: the idempotency keys the engine answers from memory (L12).
//!
//! A key is held while its job has not ended, and until the batch that ends
//! the job is committed and applied: from then on the job, key and all, is
//! in the archive, which answers for it. So a key is never in neither place,
//! and memory holds only the keys of jobs not yet ended.

use std::collections::HashMap;

/// Keys of jobs not ended (or whose end is not yet applied), by key.
#[derive(Debug, Default)]
pub(super) struct Keys {
    by_key: HashMap<String, u64>,
    of_job: HashMap<u64, String>,
    /// Keys of ended jobs, each with the batch whose commit moves its job to
    /// the archive.
    retiring: Vec<(u64, String)>,
}

impl Keys {
    /// The job holding `key`, if memory holds it.
    pub(super) fn get(&self, key: &str) -> Option<u64> {
        self.by_key.get(key).copied()
    }

    /// Job `id` holds `key`.
    pub(super) fn insert(&mut self, key: &str, id: u64) {
        self.by_key.insert(key.to_owned(), id);
        self.of_job.insert(id, key.to_owned());
    }

    /// Job `id` ends in the batch being gathered, the one after `sent`: its
    /// key goes once that batch is applied.
    pub(super) fn retire(&mut self, id: u64, sent: u64) {
        if let Some(key) = self.of_job.remove(&id) {
            self.retiring.push((sent + 1, key));
        }
    }

    /// Every batch through `committed` is committed and applied: the keys
    /// they retired are the archive's now.
    pub(super) fn applied(&mut self, committed: u64) {
        let by_key = &mut self.by_key;
        self.retiring.retain(|(batch, key)| {
            let gone = *batch <= committed;
            if gone {
                by_key.remove(key);
            }
            !gone
        });
    }

    /// How many keys memory holds.
    #[cfg(test)]
    pub(super) fn len(&self) -> usize {
        self.by_key.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // L12: a key stays until the batch that ends its job is applied, not one
    // batch less; then it is gone from memory, and only then.
    #[test]
    fn l12_a_key_goes_once_its_jobs_end_is_applied() {
        let mut keys = Keys::default();
        keys.insert("a", 1);
        keys.insert("b", 2);
        assert_eq!(
            (keys.get("a"), keys.get("b"), keys.len()),
            (Some(1), Some(2), 2)
        );
        // Batch 4 is being gathered (3 sent): job 1 ends in it.
        keys.retire(1, 3);
        keys.retire(9, 3); // a job with no key: nothing
        keys.applied(3);
        assert_eq!(keys.get("a"), Some(1), "its end is not applied yet");
        keys.applied(4);
        assert_eq!(keys.get("a"), None);
        assert_eq!(keys.get("b"), Some(2), "another job's key stays");
        assert_eq!(keys.len(), 1);
        keys.retire(2, 7);
        keys.applied(9);
        assert_eq!(keys.len(), 0);
        assert_eq!(keys.get("b"), None);
        keys.retire(2, 9);
        keys.applied(100);
        assert_eq!(keys.len(), 0, "retired once");
    }
}
