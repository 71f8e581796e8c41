//! [`Report`]: what a scenario run measured, and its chart.

use std::fmt;
use std::path::Path;
use std::time::Duration;

use hdrhistogram::Histogram;

use crate::trace::TraceSummary;

/// What one scenario run measured.
///
/// Its [`Display`](fmt::Display) is the report the fleet example prints. Two
/// lines have a fixed form that tools read: `peak concurrent leases: N` and
/// `digest: HEX`. A replay of a trace adds two lines after the deployments
/// line (T3): `trace: FILE (INSTALLATION, computer C, starting T): R records,
/// J jobs submitted over SPAN (+FIRSTs to +LASTs)` and `not replayed: N of R
/// records (...)`, which says why, by reason.
#[derive(Debug, Clone, PartialEq)]
pub struct Report {
    /// The scenario's seed.
    pub seed: u64,
    /// The scheduler that ran: `production`, `reference`, or `custom`.
    pub scheduler: String,
    /// Each deployment's pools: their names, kinds and capacities.
    pub layout: String,
    /// Deployment count.
    pub deployments: usize,
    /// Leases across all deployments.
    pub capacity: usize,
    /// Jobs that arrived.
    pub submitted: u64,
    /// Jobs that ended, whatever the outcome (see [`Report::outcomes`]): every
    /// job submitted and not refused at submission ends once.
    pub finished: u64,
    /// Of those, leases freed because the instance was absent rather than stopped.
    pub vanished: u64,
    /// Jobs refused at submission (no deployment accepts their trust class).
    pub refused: u64,
    /// The most leases held at once, across all deployments.
    pub peak_leases: usize,
    /// The longest the queue grew.
    pub peak_queue: usize,
    /// Queue wait (arrival to launch) percentiles in modelled time: p50, p90,
    /// p99 and max.
    pub queue_wait: Percentiles,
    /// Whether the scheduler read its providers' hints (B12).
    pub hints: bool,
    /// How soon ends were seen: modelled time from a launched job's instance
    /// stopping to its lease's release, over the jobs whose lease was freed
    /// because their instance stopped (adopted jobs, whose launch the run did
    /// not see, are left out).
    pub end_seen: Percentiles,
    /// The sum of those: lease time held after the jobs' instances stopped.
    pub idle_after_end: Duration,
    /// Modelled time from the scenario's start to the end of the run.
    pub modelled: Duration,
    /// Wall time the run took.
    pub wall: Duration,
    /// Inventory outages whose end the run reached.
    pub outages_survived: usize,
    /// Inventory reads the scheduler saw fail (and freed nothing for).
    pub inventory_errors: u64,
    /// How the jobs ended, by outcome.
    pub outcomes: Outcomes,
    /// Restarts of a deployment's scheduler done.
    pub restarts: usize,
    /// Restarts the scenario asked for that the scheduler could not do (the
    /// reference scheduler cannot restart): recorded, and the run went on.
    pub restarts_unsupported: usize,
    /// Jobs handed to a restarted deployment's new scheduler by the durable
    /// store: accepted by the old one and not yet placed.
    pub handed_over: u64,
    /// Jobs whose lease an existing instance came to back: found in an
    /// inventory after a restart (B8), or an orphan named after a queued job (B7).
    pub adopted: u64,
    /// Stray instances the harness left on the host.
    pub strays: usize,
    /// Orphans (instances no lease holds) the scheduler reported seeing, each once.
    pub orphans_seen: u64,
    /// Orphans it destroyed after their grace period, each once.
    pub orphans_collected: u64,
    /// Lines the scheduler added ([`Scheduler::finish`](crate::scheduler::Scheduler::finish)),
    /// printed before `steps:`: the service's own (H13).
    pub extra: Vec<String>,
    /// Steps (event times) the harness drove.
    pub steps: u64,
    /// The hash of the run's event trace, in hex: equal for equal runs.
    pub digest: String,
    /// Running leases and queue length over modelled time, for the chart.
    pub series: Vec<Sample>,
    /// The trace the jobs were replayed from, when they were (T3): its file,
    /// header, and what was and was not replayed.
    pub trace: Option<TraceSummary>,
}

/// How the jobs that ended ended, by outcome (B9).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Outcomes {
    /// Their instance ran to the end.
    pub finished: u64,
    /// Their instance was absent from an inventory that answered.
    pub vanished: u64,
    /// They held their lease longer than their timeout.
    pub timed_out: u64,
    /// They were cancelled.
    pub cancelled: u64,
    /// The provider refused their launch.
    pub refused_at_launch: u64,
    /// The provider found their spec invalid.
    pub invalid: u64,
    /// Their launch or destroy kept an unknown effect past the scheduler's
    /// bound (L14). Said in the report only when some did.
    pub gave_up: u64,
}

impl Outcomes {
    /// Every job counted, whatever the outcome.
    pub fn total(&self) -> u64 {
        self.finished
            + self.vanished
            + self.timed_out
            + self.cancelled
            + self.refused_at_launch
            + self.invalid
            + self.gave_up
    }
}

/// One point of the report's time series.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Sample {
    /// Modelled time since the start.
    pub at: Duration,
    /// Leases held at that moment.
    pub leases: usize,
    /// Jobs waiting at that moment.
    pub queued: usize,
}

/// Percentiles of a set of durations.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Percentiles {
    /// The median.
    pub p50: Duration,
    /// The 90th percentile.
    pub p90: Duration,
    /// The 99th percentile.
    pub p99: Duration,
    /// The largest.
    pub max: Duration,
}

impl Percentiles {
    /// The nearest-rank percentiles of `values` (all zero when empty).
    pub fn of(mut values: Vec<Duration>) -> Self {
        if values.is_empty() {
            return Percentiles::default();
        }
        values.sort_unstable();
        let rank = |p: f64| {
            let k = ((p * values.len() as f64).ceil() as usize).clamp(1, values.len());
            values[k - 1]
        };
        Percentiles {
            p50: rank(0.50),
            p90: rank(0.90),
            p99: rank(0.99),
            max: values[values.len() - 1],
        }
    }
}

/// Queue waits in memory that does not grow with the number of jobs (T2):
/// a histogram of microseconds with three significant digits, so every
/// percentile is the top of a bucket at most 0.1% wide (never below the exact
/// value, never above the largest wait); the largest wait is kept exactly.
#[derive(Debug, Clone)]
pub(crate) struct WaitHistogram {
    micros: Histogram<u64>,
    max: Duration,
}

impl WaitHistogram {
    /// Waits up to 2^42 µs (about 51 days) are recorded as they are; longer
    /// ones count in the top bucket (the exact maximum is still kept).
    const HIGHEST_MICROS: u64 = 1 << 42;

    pub(crate) fn new() -> Self {
        WaitHistogram {
            // Constant bounds, valid for hdrhistogram (low >= 1, high >= 2 low,
            // 3 significant digits): this cannot fail.
            micros: Histogram::new_with_bounds(1, Self::HIGHEST_MICROS, 3)
                .expect("constant histogram bounds are valid"),
            max: Duration::ZERO,
        }
    }

    pub(crate) fn record(&mut self, wait: Duration) {
        self.max = self.max.max(wait);
        let micros = u64::try_from(wait.as_micros()).unwrap_or(u64::MAX);
        self.micros
            .saturating_record(micros.min(Self::HIGHEST_MICROS));
    }

    /// The nearest-rank percentiles, each within 0.1%; the max exact.
    pub(crate) fn percentiles(&self) -> Percentiles {
        if self.micros.is_empty() {
            return Percentiles::default();
        }
        let at = |q: f64| {
            // The top of the value's bucket, capped by the exact maximum.
            Duration::from_micros(self.micros.value_at_quantile(q)).min(self.max)
        };
        Percentiles {
            p50: at(0.50),
            p90: at(0.90),
            p99: at(0.99),
            max: self.max,
        }
    }
}

impl Report {
    /// Modelled time over wall time.
    pub fn speed_up(&self) -> f64 {
        self.modelled.as_secs_f64() / self.wall.as_secs_f64().max(1e-9)
    }

    /// Draws running leases and queue length over modelled time as an SVG file.
    pub fn write_chart(&self, path: &Path) -> Result<(), ChartError> {
        use plotters::prelude::*;

        let hours = |d: Duration| d.as_secs_f64() / 3600.0;
        let end = hours(self.modelled).max(1e-6);
        let top = self
            .series
            .iter()
            .map(|s| s.leases.max(s.queued))
            .max()
            .unwrap_or(0)
            .max(1) as f64
            * 1.1;
        let draw = || -> Result<(), Box<dyn std::error::Error>> {
            let root = SVGBackend::new(path, (1200, 600)).into_drawing_area();
            root.fill(&WHITE)?;
            let mut chart = ChartBuilder::on(&root)
                .caption(
                    format!("billet fleet scenario, seed {}", self.seed),
                    ("sans-serif", 22),
                )
                .margin(16)
                .x_label_area_size(40)
                .y_label_area_size(70)
                .build_cartesian_2d(0f64..end, 0f64..top)?;
            chart
                .configure_mesh()
                .x_desc("modelled time (hours)")
                .y_desc("count")
                .y_label_formatter(&|y| format!("{y:.0}"))
                .draw()?;
            let leases = self.series.iter().map(|s| (hours(s.at), s.leases as f64));
            chart
                .draw_series(LineSeries::new(leases, &BLUE))?
                .label("running leases")
                .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], BLUE));
            let queued = self.series.iter().map(|s| (hours(s.at), s.queued as f64));
            chart
                .draw_series(LineSeries::new(queued, &RED))?
                .label("queued jobs")
                .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], RED));
            chart
                .configure_series_labels()
                .background_style(WHITE.mix(0.8))
                .border_style(BLACK)
                .draw()?;
            root.present()?;
            Ok(())
        };
        draw().map_err(|err| ChartError {
            path: path.display().to_string(),
            reason: err.to_string(),
        })
    }
}

/// The chart could not be written.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("cannot write the chart to {path}: {reason}")]
pub struct ChartError {
    /// Where it was to be written.
    pub path: String,
    /// What went wrong.
    pub reason: String,
}

/// A duration for people: `1h 2m 3.5s`, `42ms`.
pub(crate) struct Human(pub(crate) Duration);

impl fmt::Display for Human {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let d = self.0;
        let secs = d.as_secs();
        if secs >= 3600 {
            write!(f, "{}h {}m {}s", secs / 3600, secs % 3600 / 60, secs % 60)
        } else if secs >= 60 {
            write!(f, "{}m {}s", secs / 60, secs % 60)
        } else if secs >= 1 {
            write!(f, "{:.1}s", d.as_secs_f64())
        } else {
            write!(f, "{}ms", d.as_millis())
        }
    }
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let w = &self.queue_wait;
        writeln!(f, "billet fleet scenario (seed {})", self.seed)?;
        writeln!(f, "scheduler: {}", self.scheduler)?;
        writeln!(
            f,
            "deployments: {} over one host, {} leases in all",
            self.deployments, self.capacity
        )?;
        writeln!(f, "pools: {}", self.layout)?;
        if let Some(trace) = &self.trace {
            let h = &trace.header;
            let c = &trace.counts;
            let unknown = "unknown";
            writeln!(
                f,
                "trace: {} ({}, computer {}, starting {}): {} records, {} jobs submitted over {} (+{}s to +{}s)",
                trace.file,
                h.installation.as_deref().unwrap_or(unknown),
                h.computer.as_deref().unwrap_or(unknown),
                h.start_time.as_deref().unwrap_or(unknown),
                c.records,
                c.jobs,
                Human(c.submit_span()),
                c.first_submit.unwrap_or(0),
                c.last_submit.unwrap_or(0),
            )?;
            writeln!(
                f,
                "not replayed: {} of {} records ({} with unknown run time, {} cancelled before starting); \
                 {} records with more than one processor replayed as one lease per processor, \
                 {} with no processor count replayed as one lease",
                c.not_replayed(),
                c.records,
                c.unknown_run_time,
                c.cancelled_before_start,
                c.multi_processor_records,
                c.unknown_processors,
            )?;
        }
        writeln!(
            f,
            "jobs: {} submitted, {} finished ({} vanished), {} refused (no deployment accepts their trust class)",
            self.submitted, self.finished, self.vanished, self.refused
        )?;
        let o = &self.outcomes;
        write!(
            f,
            "outcomes: {} finished, {} vanished, {} timed out, {} cancelled, {} refused at launch, {} invalid",
            o.finished, o.vanished, o.timed_out, o.cancelled, o.refused_at_launch, o.invalid
        )?;
        if o.gave_up > 0 {
            write!(f, ", {} gave up", o.gave_up)?;
        }
        writeln!(f)?;
        writeln!(f, "peak concurrent leases: {}", self.peak_leases)?;
        writeln!(f, "peak queue: {}", self.peak_queue)?;
        writeln!(
            f,
            "queue wait (modelled): p50 {}, p90 {}, p99 {}, max {}",
            Human(w.p50),
            Human(w.p90),
            Human(w.p99),
            Human(w.max)
        )?;
        let e = &self.end_seen;
        writeln!(
            f,
            "ends seen (modelled, instance stop to lease freed; hints {}): p50 {}, p99 {}, max {}; {:.1} lease-hours idle after their jobs ended",
            if self.hints { "on" } else { "off" },
            Human(e.p50),
            Human(e.p99),
            Human(e.max),
            self.idle_after_end.as_secs_f64() / 3600.0
        )?;
        writeln!(f, "modelled time: {}", Human(self.modelled))?;
        writeln!(f, "wall time: {:.3}s", self.wall.as_secs_f64())?;
        writeln!(f, "speed-up: {:.0}x", self.speed_up())?;
        writeln!(
            f,
            "outages survived: {} ({} inventory reads failed, nothing freed on them)",
            self.outages_survived, self.inventory_errors
        )?;
        writeln!(
            f,
            "restarts: {} ({} asked for that this scheduler cannot do); {} queued jobs handed over, {} jobs adopted from an inventory",
            self.restarts, self.restarts_unsupported, self.handed_over, self.adopted
        )?;
        writeln!(
            f,
            "orphans: {} seen, {} collected ({} strays left on the host by the harness)",
            self.orphans_seen, self.orphans_collected, self.strays
        )?;
        for line in &self.extra {
            writeln!(f, "{line}")?;
        }
        writeln!(f, "steps: {}", self.steps)?;
        write!(f, "digest: {}", self.digest)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // H5: nearest-rank percentiles.
    #[test]
    fn h5_percentiles_by_nearest_rank() {
        let values: Vec<Duration> = (1..=100).map(Duration::from_secs).collect();
        let p = Percentiles::of(values);
        assert_eq!(p.p50, Duration::from_secs(50));
        assert_eq!(p.p90, Duration::from_secs(90));
        assert_eq!(p.p99, Duration::from_secs(99));
        assert_eq!(p.max, Duration::from_secs(100));
        assert_eq!(Percentiles::of(Vec::new()), Percentiles::default());
        assert_eq!(Human(Duration::from_secs(3725)).to_string(), "1h 2m 5s");
        assert_eq!(Human(Duration::from_millis(1500)).to_string(), "1.5s");
    }
}
