//! Wall timing's windows (H7): what the suite saw of a launch ([`Seen`]),
//! the states and start times the declared windows allow, and where a move
//! to a stop time lands.

use std::cell::Cell;
use std::time::{Duration, SystemTime};

use billet_provider::State;

use crate::factory::WallWindows;
use crate::model::Nudge;

/// What the suite saw of one successful launch under wall timing.
pub(super) struct Seen {
    /// The backend's own start time: the model's origin for this instance.
    /// For a launch whose answer was lost (H11), the instant the call began
    /// until an inventory shows the instance.
    pub(super) started_at: SystemTime,
    /// When the launch call began.
    pub(super) called: SystemTime,
    /// When the launch call returned; for an instance a launch that lost its
    /// answer left (H11), when the outage that followed ended: `Pending` may
    /// last the declared window from then.
    pub(super) returned: SystemTime,
    /// Whether a launch that lost its answer left it (H11): `returned` is
    /// then when the outage after it ended.
    pub(super) left: bool,
    /// The latest state seen so far, as a rank ([`rank`]): states only move on.
    pub(super) rank: Cell<u8>,
}

/// The order of an instance's life: pending, running, stopped.
pub(super) fn rank(state: State) -> u8 {
    match state {
        State::Pending => 0,
        State::Running => 1,
        State::Stopped { .. } => 2,
    }
}

/// Whether `state`, answered at some instant between `from` and `to`, is one
/// `windows` allow for the instance `seen` describes, which runs for
/// `run_time` (H7, [`WallWindows`]): `Pending` before `returned + pending`,
/// `Running` before `started_at + run_time + around_end`,
/// `Stopped { exit_code: 0 }` from `started_at + run_time - around_end` on, and
/// no other state. An instance whose stop time is past representable time
/// never stops.
pub(super) fn wall_state_allowed(
    state: State,
    from: SystemTime,
    to: SystemTime,
    seen: &Seen,
    run_time: Duration,
    windows: WallWindows,
) -> bool {
    let stop = seen.started_at.checked_add(run_time);
    match state {
        State::Pending => seen
            .returned
            .checked_add(windows.pending)
            .is_none_or(|latest| from < latest),
        State::Running => stop
            .and_then(|stop| stop.checked_add(windows.around_end))
            .is_none_or(|late| from < late),
        State::Stopped { exit_code: 0 } => stop.is_some_and(|stop| {
            stop.checked_sub(windows.around_end)
                .is_none_or(|early| to >= early)
        }),
        State::Stopped { .. } => false,
    }
}

/// Whether a start time a backend answered for a launch called at `called`
/// that returned at `returned` lies around the call (H7): from
/// `called - around_end` to `returned + pending`, both included.
pub(super) fn wall_start_allowed(
    started_at: SystemTime,
    called: SystemTime,
    returned: SystemTime,
    windows: WallWindows,
) -> bool {
    let early = called
        .checked_sub(windows.around_end)
        .is_some_and(|earliest| started_at < earliest);
    let late = returned
        .checked_add(windows.pending)
        .is_some_and(|latest| started_at > latest);
    !(early || late)
}

/// Where a wall-time move to the stop time `stop` lands: at it, or just
/// outside the window around it (`around_end` and a quarter of the windows'
/// unit before or after it); `None` when that is not representable.
pub(super) fn wall_move_target(
    stop: SystemTime,
    nudge: Nudge,
    windows: WallWindows,
) -> Option<SystemTime> {
    let margin = windows.around_end.saturating_add(windows.unit() / 4);
    match nudge {
        Nudge::At => Some(stop),
        Nudge::Before => stop.checked_sub(margin),
        Nudge::After => stop.checked_add(margin),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `ms` milliseconds after an arbitrary instant.
    fn at(ms: u64) -> SystemTime {
        SystemTime::UNIX_EPOCH + Duration::from_secs(1_750_000_000) + Duration::from_millis(ms)
    }

    // H7: in wall time a state is right exactly inside its window: Pending
    // until launch returned + pending, Running until the end + around_end
    // (neither at that instant), Stopped { exit_code: 0 } from the end -
    // around_end on; an answer counts at any instant of its call.
    #[test]
    fn h7_wall_states_are_right_exactly_inside_their_windows() {
        let seen = Seen {
            started_at: at(0),
            called: at(0),
            returned: at(2),
            left: false,
            rank: Cell::new(0),
        };
        let run_time = Duration::from_millis(100);
        let allowed =
            |state, from, to| wall_state_allowed(state, from, to, &seen, run_time, WINDOWS);
        let stopped = State::Stopped { exit_code: 0 };

        assert!(allowed(State::Pending, at(22) - NS, at(40)));
        assert!(!allowed(State::Pending, at(22), at(40)));
        assert!(allowed(State::Running, at(105) - NS, at(200)));
        assert!(!allowed(State::Running, at(105), at(200)));
        assert!(allowed(stopped, at(0), at(95)));
        assert!(!allowed(stopped, at(0), at(95) - NS));
        assert!(!allowed(State::Stopped { exit_code: 1 }, at(0), at(500)));

        // A command that never stops: Running for ever, never Stopped.
        let never =
            |state| wall_state_allowed(state, at(9_999), at(9_999), &seen, Duration::MAX, WINDOWS);
        assert!(never(State::Running));
        assert!(!never(stopped));
    }

    const NS: Duration = Duration::from_nanos(1);
    const WINDOWS: WallWindows = WallWindows {
        pending: Duration::from_millis(20),
        around_end: Duration::from_millis(5),
    };

    // H7: a start time answered by launch must lie between the call's start
    // less around_end and its return plus pending, both ends included.
    #[test]
    fn h7_a_wall_start_time_lies_around_the_launch_call() {
        let allowed = |started_at| wall_start_allowed(started_at, at(10), at(12), WINDOWS);
        assert!(allowed(at(5)));
        assert!(!allowed(at(5) - NS));
        assert!(allowed(at(11)));
        assert!(allowed(at(32)));
        assert!(!allowed(at(32) + NS));
    }

    // H7: a wall-time move to a stop time lands on it, or just outside the
    // window around it: around_end and a quarter of the unit away.
    #[test]
    fn h7_wall_moves_land_on_the_end_or_just_outside_its_window() {
        // The unit is the larger window, 20 ms: the margin is 5 + 5 ms.
        let stop = at(1_000);
        assert_eq!(wall_move_target(stop, Nudge::At, WINDOWS), Some(stop));
        assert_eq!(
            wall_move_target(stop, Nudge::Before, WINDOWS),
            Some(at(990))
        );
        assert_eq!(
            wall_move_target(stop, Nudge::After, WINDOWS),
            Some(at(1_010))
        );
    }
}
