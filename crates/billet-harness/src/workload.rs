//! The seeded workload: job arrivals, run times, trust mix and names.

use std::time::{Duration, SystemTime};

use billet_provider::TrustClass;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rand_distr::{Distribution, Exp, LogNormal};

/// A job's number within one run: 0, 1, 2, ... in arrival order.
pub type JobId = u64;

/// One job as the workload submits it to the scheduler under test.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Job {
    /// Its number, unique within the run, in arrival order.
    pub id: JobId,
    /// The name its instance must carry; unique within the run.
    pub name: String,
    /// The command its instance runs (for the simulated backend, a `run-for` command).
    pub command: Vec<String>,
    /// How long it runs once started, in modelled time.
    pub run_time: Duration,
    /// Its trust class.
    pub trust: TrustClass,
    /// The labels routing matches against (none for a trace's jobs: the
    /// default route).
    pub labels: Vec<String>,
    /// When it arrived, by the scenario's clock.
    pub submitted_at: SystemTime,
}

/// How long jobs run, in modelled time.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum RunTime {
    /// Every job runs exactly this long.
    Fixed(Duration),
    /// Uniform between the two bounds, inclusive.
    Uniform(Duration, Duration),
    /// Log-normal around a median (CI jobs have a long tail), clamped to
    /// `[min, max]`. `sigma` is the standard deviation of the logarithm.
    LogNormal {
        /// The median run time.
        median: Duration,
        /// The spread of the logarithm; 0.5 to 1.0 is typical of CI jobs.
        sigma: f64,
        /// The shortest run time drawn.
        min: Duration,
        /// The longest run time drawn.
        max: Duration,
    },
}

impl RunTime {
    /// The mean run time of the distribution (before clamping, for log-normal).
    pub fn mean(&self) -> Duration {
        match *self {
            RunTime::Fixed(d) => d,
            RunTime::Uniform(a, b) => (a + b) / 2,
            RunTime::LogNormal { median, sigma, .. } => median.mul_f64((sigma * sigma / 2.0).exp()),
        }
    }

    fn validate(&self) -> Result<(), String> {
        match *self {
            RunTime::Fixed(_) => Ok(()),
            RunTime::Uniform(a, b) if a <= b => Ok(()),
            RunTime::Uniform(a, b) => Err(format!("uniform run time bounds {a:?} > {b:?}")),
            RunTime::LogNormal {
                median,
                sigma,
                min,
                max,
            } => {
                if median.is_zero() {
                    Err("log-normal median run time must be positive".to_owned())
                } else if !(sigma.is_finite() && sigma >= 0.0) {
                    Err(format!("log-normal sigma {sigma} must be finite and >= 0"))
                } else if min > max {
                    Err(format!("log-normal bounds {min:?} > {max:?}"))
                } else {
                    Ok(())
                }
            }
        }
    }
}

/// The share of jobs in each trust class. Shares need not sum to one: they are
/// weights.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TrustMix {
    /// Weight of `TrustClass::Trusted` jobs.
    pub trusted: f64,
    /// Weight of `TrustClass::Untrusted` jobs.
    pub untrusted: f64,
    /// Weight of `TrustClass::Unknown` (unclassified) jobs.
    pub unknown: f64,
}

impl TrustMix {
    /// Every job trusted.
    pub const ALL_TRUSTED: TrustMix = TrustMix {
        trusted: 1.0,
        untrusted: 0.0,
        unknown: 0.0,
    };

    fn validate(&self) -> Result<(), String> {
        let weights = [self.trusted, self.untrusted, self.unknown];
        if weights.iter().any(|w| !w.is_finite() || *w < 0.0) || weights.iter().sum::<f64>() <= 0.0
        {
            return Err(format!(
                "trust mix {self:?}: weights must be finite, non-negative and not all zero"
            ));
        }
        Ok(())
    }
}

/// The labels jobs carry: label sets with weights (they need not sum to one).
/// Empty: every job carries no label.
///
/// Labels are drawn from a random stream of their own (seeded from the
/// workload's seed), so a workload with labels has the same arrivals, run
/// times and trust classes as the same workload without.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LabelMix {
    /// Each label set and its weight.
    pub sets: Vec<(Vec<String>, f64)>,
}

impl LabelMix {
    /// No labels on any job.
    pub const NONE: LabelMix = LabelMix { sets: Vec::new() };

    /// A mix of these label sets with these weights.
    pub fn of<'a>(sets: impl IntoIterator<Item = (&'a [&'a str], f64)>) -> Self {
        LabelMix {
            sets: sets
                .into_iter()
                .map(|(labels, weight)| (labels.iter().map(|l| (*l).to_owned()).collect(), weight))
                .collect(),
        }
    }

    /// The mix made for [`Layout::routed`](crate::scenario::Layout::routed):
    /// half the jobs `[linux]`, 15% `[kvm]`, 10% `[macos]`, 5% `[linux,
    /// gpu]` (the linux route: every label of a route must be on the job, not
    /// the other way round) and 20% no label (the default route).
    pub fn routed() -> Self {
        LabelMix::of([
            (&["linux"][..], 0.50),
            (&["kvm"][..], 0.15),
            (&["macos"][..], 0.10),
            (&["linux", "gpu"][..], 0.05),
            (&[][..], 0.20),
        ])
    }

    fn validate(&self) -> Result<(), String> {
        let weights = self.sets.iter().map(|(_, w)| *w);
        if self.sets.is_empty() {
            return Ok(());
        }
        if weights.clone().any(|w| !w.is_finite() || w < 0.0) || weights.sum::<f64>() <= 0.0 {
            return Err(format!(
                "label mix {self:?}: weights must be finite, non-negative and not all zero"
            ));
        }
        Ok(())
    }

    fn total(&self) -> f64 {
        self.sets.iter().map(|(_, w)| *w).sum()
    }

    /// The label set a uniform draw `pick` in `[0, total)` falls on.
    fn pick(&self, pick: f64) -> Vec<String> {
        let mut acc = 0.0;
        for (labels, weight) in &self.sets {
            acc += weight;
            if pick < acc {
                return labels.clone();
            }
        }
        self.sets
            .iter()
            .rev()
            .find(|(_, w)| *w > 0.0)
            .map(|(labels, _)| labels.clone())
            .unwrap_or_default()
    }
}

/// A seeded workload: how many jobs arrive, how often, how long they run,
/// how they are classified and named.
///
/// The same workload and seed always produce the same jobs at the same times.
#[derive(Debug, Clone, PartialEq)]
pub struct Workload {
    /// How many jobs arrive in all.
    pub jobs: u64,
    /// Mean arrivals per modelled minute (a Poisson process).
    pub arrivals_per_minute: f64,
    /// How long jobs run.
    pub run_time: RunTime,
    /// The trust classes of the jobs.
    pub trust: TrustMix,
    /// The prefix of every job's name; the job number follows it.
    pub name_prefix: String,
    /// The labels the jobs carry.
    pub labels: LabelMix,
}

impl Default for Workload {
    fn default() -> Self {
        Workload {
            jobs: 1_000,
            arrivals_per_minute: 60.0,
            run_time: RunTime::LogNormal {
                median: Duration::from_secs(600),
                sigma: 0.6,
                min: Duration::from_secs(10),
                max: Duration::from_secs(7_200),
            },
            trust: TrustMix::ALL_TRUSTED,
            name_prefix: "job-".to_owned(),
            labels: LabelMix::NONE,
        }
    }
}

impl Workload {
    /// How long its arrivals last, modelled: its jobs over their rate
    /// (zero when the rate is not positive).
    pub fn span(&self) -> Duration {
        let minutes = self.jobs as f64 / self.arrivals_per_minute;
        Duration::try_from_secs_f64(minutes * 60.0).unwrap_or_default()
    }

    /// Checks that the workload can be generated; says what is wrong if not.
    pub fn validate(&self) -> Result<(), String> {
        if !(self.arrivals_per_minute.is_finite() && self.arrivals_per_minute > 0.0) {
            return Err(format!(
                "arrivals per minute must be positive, not {}",
                self.arrivals_per_minute
            ));
        }
        self.run_time.validate()?;
        self.trust.validate()?;
        self.labels.validate()
    }

    /// The jobs of this workload for `seed`, in arrival order, starting at `start`.
    pub(crate) fn arrivals(&self, seed: u64, start: SystemTime) -> Arrivals {
        Arrivals {
            rng: ChaCha8Rng::seed_from_u64(seed),
            labels: ChaCha8Rng::seed_from_u64(seed ^ LABEL_STREAM),
            next_id: 0,
            at: start,
            gap: Exp::new(self.arrivals_per_minute / 60.0).ok(),
            log_normal: match self.run_time {
                RunTime::LogNormal { median, sigma, .. } => {
                    LogNormal::new(median.as_secs_f64().ln(), sigma).ok()
                }
                _ => None,
            },
            workload: self.clone(),
        }
    }
}

/// Mixed into the seed of the labels' own random stream.
const LABEL_STREAM: u64 = 0x6c61_6265_6c73_2121;

/// The stream of a workload's jobs, generated lazily so a million jobs cost
/// no memory up front.
pub(crate) struct Arrivals {
    rng: ChaCha8Rng,
    labels: ChaCha8Rng,
    next_id: JobId,
    at: SystemTime,
    gap: Option<Exp<f64>>,
    log_normal: Option<LogNormal<f64>>,
    workload: Workload,
}

impl Iterator for Arrivals {
    type Item = Job;

    fn next(&mut self) -> Option<Job> {
        if self.next_id >= self.workload.jobs {
            return None;
        }
        let gap_secs = self.gap.map_or(0.0, |gap| gap.sample(&mut self.rng));
        // Whole nanoseconds keep every later computation exact.
        self.at += Duration::from_nanos((gap_secs * 1e9) as u64);
        let run_time = match self.workload.run_time {
            RunTime::Fixed(d) => d,
            RunTime::Uniform(a, b) => {
                Duration::from_nanos(self.rng.random_range(nanos(a)..=nanos(b)))
            }
            RunTime::LogNormal { min, max, .. } => {
                let secs = self.log_normal.map_or(0.0, |d| d.sample(&mut self.rng));
                Duration::from_nanos((secs * 1e9) as u64).clamp(min, max)
            }
        };
        let mix = self.workload.trust;
        let pick = self.rng.random::<f64>() * (mix.trusted + mix.untrusted + mix.unknown);
        let trust = if pick < mix.trusted {
            TrustClass::Trusted
        } else if pick < mix.trusted + mix.untrusted {
            TrustClass::Untrusted
        } else {
            TrustClass::Unknown
        };
        let labels = &self.workload.labels;
        let labels = if labels.sets.is_empty() {
            Vec::new()
        } else {
            labels.pick(self.labels.random::<f64>() * labels.total())
        };
        let id = self.next_id;
        self.next_id += 1;
        Some(Job {
            id,
            name: format!("{}{id:07}", self.workload.name_prefix),
            command: billet_simulated::run_for(run_time),
            run_time,
            trust,
            labels,
            submitted_at: self.at,
        })
    }
}

fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    // H2: the same seed gives the same jobs; another seed gives others.
    #[test]
    fn h2_workload_is_seeded() {
        let w = Workload {
            jobs: 200,
            trust: TrustMix {
                trusted: 0.8,
                untrusted: 0.1,
                unknown: 0.1,
            },
            ..Workload::default()
        };
        let start = SystemTime::UNIX_EPOCH;
        let a: Vec<Job> = w.arrivals(7, start).collect();
        let b: Vec<Job> = w.arrivals(7, start).collect();
        let c: Vec<Job> = w.arrivals(8, start).collect();
        assert_eq!(a.len(), 200);
        assert_eq!(a, b);
        assert_ne!(a, c);
        assert!(a.windows(2).all(|p| p[0].submitted_at <= p[1].submitted_at));
        assert!(a.iter().any(|j| j.trust == TrustClass::Untrusted));
        assert!(a.iter().all(|j| {
            j.run_time >= Duration::from_secs(10) && j.run_time <= Duration::from_secs(7_200)
        }));
        assert_eq!(a[5].name, "job-0000005");
        assert_eq!(
            billet_simulated::parse_run_for(&a[5].command).unwrap(),
            a[5].run_time
        );
    }

    // H10: jobs carry labels drawn from the mix, from a stream of their own:
    // the same workload with and without labels has the same arrivals, run
    // times and trust classes.
    #[test]
    fn h10_labels_are_drawn_from_their_own_stream() {
        let plain = Workload {
            jobs: 2_000,
            trust: TrustMix {
                trusted: 0.9,
                untrusted: 0.05,
                unknown: 0.05,
            },
            ..Workload::default()
        };
        let labelled = Workload {
            labels: LabelMix::routed(),
            ..plain.clone()
        };
        let start = SystemTime::UNIX_EPOCH;
        let a: Vec<Job> = plain.arrivals(3, start).collect();
        let b: Vec<Job> = labelled.arrivals(3, start).collect();
        assert!(a.iter().all(|j| j.labels.is_empty()));
        for (x, y) in a.iter().zip(&b) {
            assert_eq!(
                (x.submitted_at, x.run_time, x.trust),
                (y.submitted_at, y.run_time, y.trust)
            );
        }
        let share = |labels: &[&str]| {
            b.iter().filter(|j| j.labels == labels).count() as f64 / b.len() as f64
        };
        assert!((share(&["linux"]) - 0.5).abs() < 0.05);
        assert!((share(&["macos"]) - 0.1).abs() < 0.03);
        assert!((share(&[]) - 0.2).abs() < 0.04);
        assert!(share(&["linux", "gpu"]) > 0.0 && share(&["kvm"]) > 0.0);
        let again: Vec<Job> = labelled.arrivals(3, start).collect();
        assert_eq!(b, again);
        let bad = Workload {
            labels: LabelMix::of([(&["x"][..], -1.0)]),
            ..Workload::default()
        };
        assert!(bad.validate().is_err());
    }

    // H2: a workload that cannot be generated is refused with a reason.
    #[test]
    fn h2_bad_workloads_are_refused() {
        let bad = [
            Workload {
                arrivals_per_minute: 0.0,
                ..Workload::default()
            },
            Workload {
                run_time: RunTime::Uniform(Duration::from_secs(2), Duration::from_secs(1)),
                ..Workload::default()
            },
            Workload {
                trust: TrustMix {
                    trusted: 0.0,
                    untrusted: 0.0,
                    unknown: 0.0,
                },
                ..Workload::default()
            },
        ];
        for w in bad {
            assert!(w.validate().is_err(), "{w:?}");
        }
        assert!(Workload::default().validate().is_ok());
    }
}
