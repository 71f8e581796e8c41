//! How a case's time passes ([`Pace`]): modelled on a manual clock, or real
//! time scaled to the backend's windows, and the run times, clock moves and
//! horizon each allows.

use std::time::Duration;

use crate::factory::WallWindows;

/// How the case's time passes, which sets the run times and moves drawn.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Pace {
    /// A manual clock: exact stop times, moves from a nanosecond to an hour.
    Modelled,
    /// Real time: run times and moves are multiples of the windows' unit.
    Wall(WallWindows),
}

impl Pace {
    /// The run times a launch may name.
    pub(super) fn run_times(self) -> Vec<Duration> {
        match self {
            Pace::Modelled => RUN_TIMES.to_vec(),
            Pace::Wall(windows) => {
                let unit = windows.unit();
                vec![
                    Duration::ZERO,
                    unit,
                    unit.saturating_mul(3),
                    unit.saturating_mul(6),
                    Duration::MAX,
                ]
            }
        }
    }

    /// The clock moves an advance may make.
    pub(super) fn advances(self) -> Vec<Duration> {
        match self {
            Pace::Modelled => ADVANCES.to_vec(),
            Pace::Wall(windows) => {
                let unit = windows.unit();
                vec![
                    unit / 2,
                    unit,
                    unit.saturating_mul(2),
                    unit.saturating_mul(4),
                ]
            }
        }
    }

    /// How far ahead a clock move may jump to a stop time.
    pub(super) fn horizon(self) -> Duration {
        match self {
            Pace::Modelled => HORIZON,
            Pace::Wall(windows) => windows.unit().saturating_mul(8),
        }
    }
}

/// How far ahead a clock move may jump to a stop time. Together with the
/// bounded number and size of moves, it keeps modelled time far from the end
/// of representable time, where a backend rightly treats a stop time as never.
const HORIZON: Duration = Duration::from_secs(7 * 24 * 3600);

/// Modelled run times: the common, the boundary-prone and the never-ending.
const RUN_TIMES: &[Duration] = &[
    Duration::from_secs(60),
    Duration::ZERO,
    Duration::from_nanos(1),
    Duration::from_millis(1),
    Duration::from_secs(1),
    Duration::new(59, 999_999_999),
    Duration::from_millis(90_500),
    Duration::from_secs(3600),
    Duration::MAX,
];
/// Clock moves, small and large; exact stop times come from `AdvanceToStop`.
const ADVANCES: &[Duration] = &[
    Duration::from_secs(1),
    Duration::from_nanos(1),
    Duration::from_millis(1),
    Duration::from_secs(30),
    Duration::from_secs(59),
    Duration::from_secs(60),
    Duration::from_secs(3600),
];
