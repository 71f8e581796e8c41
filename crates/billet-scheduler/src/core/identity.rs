//! Instance names and whose they are (L10): the name of a job's instance
//! under the store's identity, and whether a listed name is this core's (a
//! job's, in a pool), another store's, or no job's.

use crate::job::{Identity, InstanceName, JobId};
use crate::routing::PoolId;

use super::Core;

/// Whose instance a name is (L10).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Whose<'a> {
    /// This core's: the job's, in the pool so named.
    Ours(JobId, &'a str),
    /// A job's of another store, in the pool so named.
    Foreign(&'a str),
    /// No job's at all.
    Nobody,
}

impl Core {
    /// The identity instance names carry, if any.
    pub fn identity(&self) -> Option<&Identity> {
        self.identity.as_ref()
    }

    /// The name of `job`'s instance in `pool`.
    pub fn instance_name(&self, job: JobId, pool: PoolId) -> String {
        job.instance_name_in(self.identity.as_ref(), &self.infos[pool.0].name)
    }

    /// Whose instance a name is: this core's (a job, a pool), another
    /// store's (its pool), or no job's.
    pub(super) fn whose<'a>(&self, name: &'a str) -> Whose<'a> {
        let Some(parsed) = InstanceName::parse(name) else {
            return Whose::Nobody;
        };
        let ours = match (parsed.store, &self.identity) {
            (Some(store), Some(identity)) => store == identity.as_str(),
            (None, None) => true,
            (None, Some(_)) => self.unnamed_through.is_some_and(|last| parsed.job <= last),
            (Some(_), None) => false,
        };
        if ours {
            Whose::Ours(parsed.job, parsed.pool)
        } else {
            Whose::Foreign(parsed.pool)
        }
    }
}
