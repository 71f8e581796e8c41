//! A pool's chart on the status page (K7): inline SVG of leases held
//! against capacity and of the queue over the last hour, drawn from
//! [`History`]'s buckets. Styled by class from the
//! page's stylesheet alone (no `style` attribute, which the page's
//! `Content-Security-Policy` forbids).

use std::fmt::Write as _;
use std::sync::Arc;
use std::time::SystemTime;

use maud::{Markup, html};
use parking_lot::Mutex;

use crate::history::{BUCKETS, History, Series, Stamp};

/// Every pool's chart as last drawn, kept while its [`Stamp`] holds: a
/// chart is drawn again only when what it shows has changed, so a page of
/// many quiet pools costs little more than one of a single pool. Holds one
/// chart a pool.
#[derive(Debug, Default)]
pub struct Charts {
    kept: Mutex<Vec<Option<Kept>>>,
}

/// A chart as drawn, and the stamp it was drawn at.
type Kept = (Stamp, Arc<str>);

impl Charts {
    /// Every pool's chart at `now` as SVG, in configuration order.
    pub fn drawn(&self, history: &History, now: SystemTime) -> Vec<Arc<str>> {
        let stamps = history.stamps(now);
        let mut kept = self.kept.lock();
        kept.resize(stamps.len(), None);
        stamps
            .iter()
            .zip(kept.iter_mut())
            .enumerate()
            .map(|(n, (stamp, kept))| match kept {
                Some((was, svg)) if was == stamp => Arc::clone(svg),
                _ => {
                    let Some((series, stamp)) = history.series_of(n, now) else {
                        return Arc::from("");
                    };
                    let svg: Arc<str> = chart(&series).into_string().into();
                    *kept = Some((stamp, Arc::clone(&svg)));
                    svg
                }
            })
            .collect()
    }
}

/// The width of one bucket's step, in SVG units.
const STEP_WIDTH: u32 = 8;
/// Room at the left for the axis' figures, and at the top and bottom.
const LEFT: u32 = 36;
const PAD: u32 = 8;
/// The chart's width and height in SVG units: an hour of steps between
/// the margins.
const WIDTH: u32 = LEFT + BUCKETS as u32 * STEP_WIDTH + PAD;
const HEIGHT: u32 = 96;
/// Room below the chart for the times under its axis.
const LABELS: u32 = 6;

/// Where a chart of `series` puts its lines: the top of the scale (at least
/// the capacity and the longest queue), and each line as an SVG path.
#[derive(Debug, PartialEq, Eq)]
pub struct Drawn {
    /// The value at the chart's top.
    pub top: u64,
    /// Leases held, as an SVG path's `d`.
    pub held: String,
    /// Jobs queued, as an SVG path's `d`.
    pub queued: String,
    /// The capacity's height.
    pub capacity_y: u32,
}

/// `heights` (one a bucket, oldest first, the last at the right edge) as a
/// step line: a move to the first, then a horizontal run for every stretch
/// of equal heights and a vertical step between them. A quiet hour is a
/// few characters; a busy one about eight a bucket.
fn steps(heights: impl ExactSizeIterator<Item = u32>) -> String {
    let mut d = String::new();
    let left = LEFT + (BUCKETS - heights.len().min(BUCKETS)) as u32 * STEP_WIDTH;
    let mut run = 0;
    let mut at = None;
    for y in heights {
        match at {
            None => {
                let _ = write!(d, "M{left},{y}");
            }
            Some(was) if was != y => {
                let _ = write!(d, "h{run}V{y}");
                run = 0;
            }
            Some(_) => {}
        }
        at = Some(y);
        run += STEP_WIDTH;
    }
    if run > 0 {
        let _ = write!(d, "h{run}");
    }
    d
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
    let buckets = &series.buckets;
    Drawn {
        top,
        held: steps(buckets.iter().map(|bucket| y(u64::from(bucket.held)))),
        queued: steps(buckets.iter().map(|bucket| y(bucket.queued))),
        capacity_y: y(u64::from(series.capacity)),
    }
}

/// The chart of `series` as inline SVG, with a title saying what it shows.
pub fn chart(series: &Series) -> Markup {
    let drawn = draw(series);
    let floor = HEIGHT - PAD;
    html! {
        svg class="chart" xmlns="http://www.w3.org/2000/svg" role="img"
            viewBox=(format!("0 0 {WIDTH} {}", HEIGHT + LABELS)) width=(WIDTH) height=(HEIGHT + LABELS)
            data-pool=(series.name) data-top=(drawn.top) {
            title { (series.name) ": leases held (of " (series.capacity) ") and jobs queued, the last hour" }
            line class="axis" x1=(LEFT) y1=(floor) x2=(WIDTH - PAD) y2=(floor) {}
            line class="capacity" x1=(LEFT) y1=(drawn.capacity_y) x2=(WIDTH - PAD) y2=(drawn.capacity_y) {}
            text class="figure" x=(LEFT - 4) y=(PAD + 4) { (drawn.top) }
            text class="figure" x=(LEFT - 4) y=(floor) { "0" }
            text class="when" x=(LEFT) y=(HEIGHT + LABELS - 2) { "-60m" }
            text class="when end" x=(WIDTH - PAD) y=(HEIGHT + LABELS - 2) { "now" }
            @if !series.buckets.is_empty() {
                path class="queued" d=(drawn.queued) {}
                path class="held" d=(drawn.held) {}
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::history::History;
    use billet_scheduler::PoolStats;
    use std::time::{Duration, SystemTime, UNIX_EPOCH};

    fn stats(leases: u32, queued: u64) -> PoolStats {
        crate::history::stats_of("linux", 4, leases, queued)
    }

    /// Seconds of a 30-s step, scaled to the history's step (as in its
    /// tests).
    fn at(secs: u64) -> SystemTime {
        UNIX_EPOCH + Duration::from_secs(secs * crate::history::STEP.as_secs() / 30)
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
        // Three steps, the last ending at the right edge; 0 sits on the
        // floor (88), 4 of 8 half way (48), 8 at the top (8).
        let (left, h) = (WIDTH - PAD - 3 * STEP_WIDTH, STEP_WIDTH);
        assert_eq!(drawn.held, format!("M{left},88h{h}V48h{h}V68h{h}"));
        assert_eq!(drawn.queued, format!("M{left},88h{h}V8h{h}V88h{h}"));
        assert_eq!(drawn.capacity_y, 48);
        let svg = chart(series).into_string();
        assert!(
            svg.contains(&format!(r#"<path class="held" d="{}""#, drawn.held)),
            "{svg}"
        );
        assert!(svg.contains("linux: leases held (of 4)"), "{svg}");
        assert!(!svg.contains("style="), "{svg}");
    }

    // K7: a chart is drawn again only when its pool's stamp moved on; the
    // one kept is the one shown until then, and it is the chart as drawn.
    #[test]
    fn k7_a_chart_is_kept_while_nothing_it_shows_changed() {
        let history = History::default();
        let charts = Charts::default();
        assert!(charts.drawn(&history, at(0)).is_empty());
        let mut other = stats(1, 0);
        other.name = "other".to_owned();
        history.record(at(0), &[stats(1, 0), other.clone()]);
        let first = charts.drawn(&history, at(1));
        assert_eq!(first.len(), 2);
        assert_eq!(&*first[0], chart(&history.series(at(1))[0]).into_string());
        assert_eq!(&*first[1], chart(&history.series(at(1))[1]).into_string());
        let again = charts.drawn(&history, at(2));
        assert!(Arc::ptr_eq(&first[0], &again[0]) && Arc::ptr_eq(&first[1], &again[1]));
        history.record(at(3), &[stats(3, 0), other]);
        let raised = charts.drawn(&history, at(3));
        assert!(
            !Arc::ptr_eq(&first[0], &raised[0]),
            "a higher peak is drawn again"
        );
        assert!(Arc::ptr_eq(&first[1], &raised[1]), "the other pool is kept");
        assert_eq!(&*raised[0], chart(&history.series(at(3))[0]).into_string());
        let later = charts.drawn(&history, at(40));
        assert!(
            !Arc::ptr_eq(&raised[1], &later[1]),
            "a new bucket at the right edge"
        );
        assert_eq!(&*later[1], chart(&history.series(at(40))[1]).into_string());
    }

    // K7: a quiet pool with nothing queued scales to its capacity and its
    // hour is one run; a pool with no bucket yet draws axes and no line.
    #[test]
    fn k7_an_empty_or_quiet_chart_scales_to_capacity() {
        let history = History::default();
        history.record(at(0), &[stats(0, 0)]);
        let drawn = draw(&history.series(at(BUCKETS as u64 * 30))[0]);
        assert_eq!(drawn.top, 4);
        assert_eq!(
            drawn.held,
            format!("M{LEFT},88h{}", BUCKETS as u32 * STEP_WIDTH)
        );
        assert_eq!(drawn.capacity_y, PAD);
        let empty = Series {
            name: "none".to_owned(),
            capacity: 0,
            buckets: Vec::new(),
        };
        let drawn = draw(&empty);
        assert_eq!(
            (drawn.top, drawn.held.as_str(), drawn.queued.as_str()),
            (1, "", "")
        );
        // Axes, scale and times, exactly; no line to draw.
        assert_eq!(
            chart(&empty).into_string(),
            concat!(
                r#"<svg class="chart" xmlns="http://www.w3.org/2000/svg" role="img" viewBox="0 0 524 102" width="524" height="102" data-pool="none" data-top="1">"#,
                "<title>none: leases held (of 0) and jobs queued, the last hour</title>",
                r#"<line class="axis" x1="36" y1="88" x2="516" y2="88"></line>"#,
                r#"<line class="capacity" x1="36" y1="88" x2="516" y2="88"></line>"#,
                r#"<text class="figure" x="32" y="12">1</text>"#,
                r#"<text class="figure" x="32" y="88">0</text>"#,
                r#"<text class="when" x="36" y="100">-60m</text>"#,
                r#"<text class="when end" x="516" y="100">now</text>"#,
                "</svg>"
            )
        );
    }
}
