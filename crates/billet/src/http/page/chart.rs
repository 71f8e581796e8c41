//! A pool's chart on the status page (K7): inline SVG of leases held
//! against capacity and of the queue over the last hour, drawn from
//! [`History`](crate::history::History)'s buckets. Styled by class from the
//! page's stylesheet alone (no `style` attribute, which the page's
//! `Content-Security-Policy` forbids).

use std::fmt::Write as _;

use maud::{Markup, html};

use crate::history::{BUCKETS, Series};

/// The chart's width and height in SVG units.
const WIDTH: u32 = 480;
const HEIGHT: u32 = 96;
/// Room at the left for the axis' figures, and at the top and bottom.
const LEFT: u32 = 36;
const PAD: u32 = 8;

/// Where a chart of `series` ending with bucket `end` puts its lines: the
/// top of the scale (at least the capacity and the longest queue), and the
/// `points` of each line.
#[derive(Debug, PartialEq, Eq)]
pub struct Drawn {
    /// The value at the chart's top.
    pub top: u64,
    /// Leases held, as SVG `points`.
    pub held: String,
    /// Jobs queued, as SVG `points`.
    pub queued: String,
    /// The capacity's height.
    pub capacity_y: u32,
}

/// The lines of `series`, whose last bucket is the chart's right edge.
pub fn draw(series: &Series) -> Drawn {
    let top = series
        .buckets
        .iter()
        .map(|bucket| bucket.queued.max(u64::from(bucket.held)))
        .chain([u64::from(series.capacity), 1])
        .max()
        .unwrap_or(1);
    let y = |value: u64| -> u32 {
        let span = u64::from(HEIGHT - 2 * PAD);
        // value <= top, so the product over top is at most span.
        HEIGHT - PAD - u32::try_from(value.min(top) * span / top).unwrap_or(0)
    };
    let last = series.buckets.last().map_or(0, |bucket| bucket.index);
    let width = u64::from(WIDTH - LEFT - PAD);
    let buckets = BUCKETS as u64;
    // Each bucket is a step as wide as its share of the hour; the last one
    // ends at the right edge.
    let x =
        |from_left: u64| -> u32 { LEFT + u32::try_from(width * from_left / buckets).unwrap_or(0) };
    let mut held = String::new();
    let mut queued = String::new();
    for bucket in &series.buckets {
        let from_left = (buckets - 1).saturating_sub(last.saturating_sub(bucket.index));
        let (left, right) = (x(from_left), x(from_left + 1));
        let held_y = y(u64::from(bucket.held));
        let queued_y = y(bucket.queued);
        let _ = write!(held, "{left},{held_y} {right},{held_y} ");
        let _ = write!(queued, "{left},{queued_y} {right},{queued_y} ");
    }
    Drawn {
        top,
        held: held.trim_end().to_owned(),
        queued: queued.trim_end().to_owned(),
        capacity_y: y(u64::from(series.capacity)),
    }
}

/// The chart of `series` as inline SVG, with a title saying what it shows.
pub fn chart(series: &Series) -> Markup {
    let drawn = draw(series);
    let floor = HEIGHT - PAD;
    html! {
        svg class="chart" xmlns="http://www.w3.org/2000/svg" role="img"
            viewBox=(format!("0 0 {WIDTH} {HEIGHT}")) width=(WIDTH) height=(HEIGHT)
            data-pool=(series.name) data-top=(drawn.top) {
            title { (series.name) ": leases held (of " (series.capacity) ") and jobs queued, the last hour" }
            line class="axis" x1=(LEFT) y1=(floor) x2=(WIDTH - PAD) y2=(floor) {}
            line class="capacity" x1=(LEFT) y1=(drawn.capacity_y) x2=(WIDTH - PAD) y2=(drawn.capacity_y) {}
            text class="figure" x=(LEFT - 4) y=(PAD + 4) { (drawn.top) }
            text class="figure" x=(LEFT - 4) y=(floor) { "0" }
            text class="when" x=(LEFT) y=(HEIGHT) { "-60m" }
            text class="when end" x=(WIDTH - PAD) y=(HEIGHT) { "now" }
            @if !series.buckets.is_empty() {
                polyline class="queued" points=(drawn.queued) {}
                polyline class="held" points=(drawn.held) {}
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::history::History;
    use billet_provider::ProviderKind;
    use billet_scheduler::PoolStats;
    use std::time::{Duration, SystemTime, UNIX_EPOCH};

    fn stats(leases: u32, queued: u64) -> PoolStats {
        PoolStats {
            name: "linux".to_owned(),
            kind: ProviderKind::Docker,
            capacity: 4,
            leases,
            launching: 0,
            queued,
            orphans: 0,
            ready: true,
            contested: 0,
            leftovers: 0,
            unsettled: 0,
        }
    }

    fn at(secs: u64) -> SystemTime {
        UNIX_EPOCH + Duration::from_secs(secs)
    }

    // K7: the scale's top is the capacity or the longest queue, and each
    // bucket is one point, left to right, higher for more.
    #[test]
    fn k7_a_chart_draws_held_against_capacity_and_the_queue() {
        let history = History::default();
        history.record(at(0), &[stats(0, 0)]);
        history.record(at(30), &[stats(4, 8)]);
        history.record(at(60), &[stats(2, 0)]);
        let series = &history.series(at(60))[0];
        let drawn = draw(series);
        assert_eq!(drawn.top, 8);
        let points = |line: &str| -> Vec<(u32, u32)> {
            line.split(' ')
                .map(|p| {
                    let (x, y) = p.split_once(',').unwrap();
                    (x.parse().unwrap(), y.parse().unwrap())
                })
                .collect()
        };
        let held = points(&drawn.held);
        let queued = points(&drawn.queued);
        // Three steps, the last ending at the right edge; each bucket is
        // 436 * 1 / 120 units wide (rounded down at each end).
        let xs: Vec<u32> = held.iter().map(|p| p.0).collect();
        assert_eq!(xs, [461, 464, 464, 468, 468, WIDTH - PAD]);
        assert_eq!(queued.iter().map(|p| p.0).collect::<Vec<_>>(), xs);
        // 0 sits on the floor, 4 of 8 half way, 8 at the top.
        let floor = HEIGHT - PAD;
        let ys = |line: &[(u32, u32)]| line.iter().map(|p| p.1).collect::<Vec<_>>();
        assert_eq!(ys(&held), [floor, floor, 48, 48, 68, 68]);
        assert_eq!(ys(&queued), [floor, floor, PAD, PAD, floor, floor]);
        assert_eq!(drawn.capacity_y, 48);
        let svg = chart(series).into_string();
        assert!(
            svg.contains(&format!(r#"points="{}""#, drawn.held)),
            "{svg}"
        );
        assert!(svg.contains("linux: leases held (of 4)"), "{svg}");
        assert!(!svg.contains("style="), "{svg}");
    }

    // K7: a quiet pool with nothing queued scales to its capacity; a pool
    // with no bucket yet draws axes and no line.
    #[test]
    fn k7_an_empty_or_quiet_chart_scales_to_capacity() {
        let history = History::default();
        history.record(at(0), &[stats(0, 0)]);
        let drawn = draw(&history.series(at(0))[0]);
        assert_eq!(drawn.top, 4);
        assert_eq!(drawn.capacity_y, PAD);
        let empty = Series {
            name: "none".to_owned(),
            capacity: 0,
            buckets: Vec::new(),
        };
        assert_eq!(draw(&empty).top, 1);
        assert!(!chart(&empty).into_string().contains("polyline"));
    }
}
