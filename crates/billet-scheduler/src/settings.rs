//! [`Settings`]: the scheduler's timing, with defaults fit for real backends.

use std::time::Duration;

/// How often the scheduler reconciles, how it retries, how long it waits.
///
/// Every duration is read on the scheduler's clock, so in modelled time a
/// setting of an hour takes no wall time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Settings {
    /// Between two reconciliations (B6). A reconciliation is due once this
    /// much has passed since the last; when the scheduler is idle it waits for
    /// nothing, and the next input finds the reconciliation due. Default: 60 s.
    pub reconcile_every: Duration,
    /// How long a provider call may take before the core treats it as lost.
    /// Default: 60 s.
    pub call_timeout: Duration,
    /// The first retry's delay; each later retry doubles it (B5). Default: 1 s.
    pub backoff_base: Duration,
    /// The longest delay between retries (B5). Default: 60 s.
    pub backoff_cap: Duration,
    /// How long an orphan stays before it is destroyed (B7). Default: 5 min.
    pub orphan_grace: Duration,
    /// How long a launch or destroy whose effect stays unknown is retried
    /// before its job ends failed (L14), counted from its first failure.
    /// Default: 10 min.
    pub give_up_after: Duration,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            reconcile_every: Duration::from_secs(60),
            call_timeout: Duration::from_secs(60),
            backoff_base: Duration::from_secs(1),
            backoff_cap: Duration::from_secs(60),
            orphan_grace: Duration::from_secs(300),
            give_up_after: Duration::from_secs(600),
        }
    }
}

impl Settings {
    /// The delay before retry number `attempt` (1 for the first): the base
    /// doubled `attempt - 1` times, never more than the cap, never zero.
    pub fn backoff(&self, attempt: u32) -> Duration {
        let doublings = attempt.saturating_sub(1).min(32);
        let delay = self
            .backoff_base
            .checked_mul(1u32 << doublings.min(31))
            .unwrap_or(self.backoff_cap);
        delay.min(self.backoff_cap).max(Duration::from_nanos(1))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // B5: retries back off, doubling from the base, capped.
    #[test]
    fn b5_backoff_doubles_and_is_capped() {
        let s = Settings {
            backoff_base: Duration::from_secs(1),
            backoff_cap: Duration::from_secs(10),
            ..Settings::default()
        };
        let secs: Vec<u64> = (1..=6).map(|a| s.backoff(a).as_secs()).collect();
        assert_eq!(secs, [1, 2, 4, 8, 10, 10]);
        assert_eq!(s.backoff(0), Duration::from_secs(1));
        assert_eq!(s.backoff(u32::MAX), Duration::from_secs(10));
        let huge = Settings {
            backoff_base: Duration::from_secs(u64::MAX / 2),
            backoff_cap: Duration::MAX,
            ..Settings::default()
        };
        assert_eq!(huge.backoff(3), Duration::MAX);
        let zero = Settings {
            backoff_base: Duration::ZERO,
            ..Settings::default()
        };
        assert_eq!(zero.backoff(1), Duration::from_nanos(1));
        let d = Settings::default();
        assert_eq!(d.reconcile_every, Duration::from_secs(60));
        assert_eq!(d.call_timeout, Duration::from_secs(60));
        assert_eq!(d.backoff(1), Duration::from_secs(1));
        assert_eq!(d.backoff_cap, Duration::from_secs(60));
        assert_eq!(d.orphan_grace, Duration::from_secs(300));
        assert_eq!(d.give_up_after, Duration::from_secs(600));
    }
}
