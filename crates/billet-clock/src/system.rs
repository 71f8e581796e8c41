//! [`SystemClock`]: real time and real sleeps on tokio.

use std::time::SystemTime;

use crate::{Clock, Sleep};

/// The operating system's clock, with sleeps on tokio's timer.
///
/// The default clock everywhere. Sleeps must be polled inside a tokio runtime
/// with its time driver enabled. A sleep's length is measured when it is
/// created: a wall clock stepped afterwards does not move it.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> SystemTime {
        SystemTime::now()
    }

    fn sleep_until(&self, deadline: SystemTime) -> Sleep {
        let wait = deadline
            .duration_since(SystemTime::now())
            .unwrap_or_default();
        Box::pin(tokio::time::sleep(wait))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    // C2: the system clock tells real time and sleeps for real on tokio.
    #[tokio::test]
    async fn c2_system_clock_tells_real_time_and_sleeps() {
        let clock: std::sync::Arc<dyn Clock> = std::sync::Arc::new(SystemClock);
        let before = SystemTime::now();
        let now = clock.now();
        assert!(now >= before);
        let started = std::time::Instant::now();
        clock.sleep(Duration::from_millis(20)).await;
        assert!(started.elapsed() >= Duration::from_millis(20));
        // A deadline in the past completes at once.
        clock.sleep_until(SystemTime::UNIX_EPOCH).await;
    }
}
