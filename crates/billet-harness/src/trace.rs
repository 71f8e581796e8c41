//! Recorded workloads: traces in the Standard Workload Format (SWF) of the
//! Parallel Workloads Archive, read lazily from a plain or gzipped file (T1).
//!
//! * [`SwfReader`] reads the header comments and the records of any
//!   [`BufRead`], one line at a time, holding nothing but the current line.
//! * [`Trace`] names a trace file; [`Trace::open`] detects gzip by its magic
//!   bytes, so the file's name does not matter.
//! * [`TraceJobs`] turns records into the [`Job`]s a scenario replays: one job
//!   with one lease per processor of a record, submitted at the record's submit
//!   time after the scenario's start, running for its run time. Records that
//!   cannot be replayed are counted by reason in [`TraceCounts`], never dropped
//!   silently.
//!
//! Every error is a [`TraceError`] naming the file and the line; nothing here
//! panics on any input.

use std::fmt;
use std::fs::File;
use std::io::{self, BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use billet_provider::TrustClass;

use crate::workload::{Job, JobId};

/// The number of whitespace-separated fields of an SWF record.
pub const SWF_FIELDS: usize = 18;

/// SWF status (field 11): the job was cancelled.
pub const STATUS_CANCELLED: i64 = 5;

/// A trace could not be read: which file, which line, and what was wrong.
///
/// The line is 1-based; it is 0 when the file could not be opened at all.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{file}, line {line}: {kind}")]
pub struct TraceError {
    /// The file, as it was named to [`Trace::new`] or [`SwfReader::new`].
    pub file: String,
    /// The line at fault (1-based), or 0 when the file could not be opened.
    pub line: u64,
    /// What was wrong.
    pub kind: TraceErrorKind,
}

/// What was wrong with a trace. Match on the variant, not on the message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum TraceErrorKind {
    /// The file could not be opened or read (missing, unreadable, a directory).
    #[error("cannot read the trace: {reason}")]
    Io {
        /// The operating system's reason.
        reason: String,
    },
    /// The gzip stream is corrupt or ends before its end (a truncated download).
    #[error("the gzip stream is corrupt or truncated: {reason}")]
    Gzip {
        /// The decoder's reason.
        reason: String,
    },
    /// A record line is not 18 whitespace-separated integers, or a field holds
    /// a value the format does not allow (a negative submit time, a run time
    /// below -1).
    #[error("malformed record: {reason}")]
    Malformed {
        /// Which field, and what it held.
        reason: String,
    },
    /// A record was submitted before the record above it: an SWF trace is in
    /// submit order, and a replay cannot go back in time.
    #[error("submit time {submit} s is before the previous record's {previous} s")]
    SubmitWentBackwards {
        /// This record's submit time, in seconds from the trace's start.
        submit: i64,
        /// The previous record's submit time.
        previous: i64,
    },
}

/// One SWF record: the 18 fields of a line, in the format's order. `-1` means
/// unknown, as in the format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct SwfRecord {
    /// 1: the job number.
    pub job: i64,
    /// 2: submit time, seconds from the trace's start.
    pub submit: i64,
    /// 3: wait time in the recorded system, seconds.
    pub wait: i64,
    /// 4: run time, seconds.
    pub run_time: i64,
    /// 5: allocated processors.
    pub allocated_processors: i64,
    /// 6: average CPU time used, seconds.
    pub average_cpu_time: i64,
    /// 7: used memory, KB per processor.
    pub used_memory: i64,
    /// 8: requested processors.
    pub requested_processors: i64,
    /// 9: requested time, seconds.
    pub requested_time: i64,
    /// 10: requested memory, KB per processor.
    pub requested_memory: i64,
    /// 11: status: 1 completed, 0 failed, 5 cancelled; 2-4 partial executions.
    pub status: i64,
    /// 12: user id.
    pub user: i64,
    /// 13: group id.
    pub group: i64,
    /// 14: executable (application) number.
    pub executable: i64,
    /// 15: queue number.
    pub queue: i64,
    /// 16: partition number.
    pub partition: i64,
    /// 17: preceding job number.
    pub preceding_job: i64,
    /// 18: think time from the preceding job, seconds.
    pub think_time: i64,
}

impl SwfRecord {
    /// A record with every field unknown (`-1`) but these three.
    pub fn new(job: i64, submit: i64, run_time: i64) -> Self {
        SwfRecord::from_fields([
            job, submit, -1, run_time, 1, -1, -1, 1, -1, -1, 1, -1, -1, -1, -1, -1, -1, -1,
        ])
    }

    /// The record of 18 fields, in the format's order.
    pub fn from_fields(f: [i64; SWF_FIELDS]) -> Self {
        SwfRecord {
            job: f[0],
            submit: f[1],
            wait: f[2],
            run_time: f[3],
            allocated_processors: f[4],
            average_cpu_time: f[5],
            used_memory: f[6],
            requested_processors: f[7],
            requested_time: f[8],
            requested_memory: f[9],
            status: f[10],
            user: f[11],
            group: f[12],
            executable: f[13],
            queue: f[14],
            partition: f[15],
            preceding_job: f[16],
            think_time: f[17],
        }
    }

    /// The 18 fields, in the format's order.
    pub fn fields(&self) -> [i64; SWF_FIELDS] {
        [
            self.job,
            self.submit,
            self.wait,
            self.run_time,
            self.allocated_processors,
            self.average_cpu_time,
            self.used_memory,
            self.requested_processors,
            self.requested_time,
            self.requested_memory,
            self.status,
            self.user,
            self.group,
            self.executable,
            self.queue,
            self.partition,
            self.preceding_job,
            self.think_time,
        ]
    }

    /// How many leases the record takes: its allocated processors, else its
    /// requested processors, else (both unknown or zero) one.
    pub fn processors(&self) -> u64 {
        [self.allocated_processors, self.requested_processors]
            .into_iter()
            .find(|p| *p > 0)
            .map_or(1, |p| p as u64)
    }

    /// Why the record cannot be replayed, if it cannot.
    pub fn not_replayable(&self) -> Option<NotReplayed> {
        if self.status == STATUS_CANCELLED && self.run_time <= 0 {
            Some(NotReplayed::CancelledBeforeStart)
        } else if self.run_time < 0 {
            Some(NotReplayed::UnknownRunTime)
        } else {
            None
        }
    }
}

/// Writes the record as one SWF line (no line end), fields separated by one space.
impl fmt::Display for SwfRecord {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, v) in self.fields().iter().enumerate() {
            if i > 0 {
                f.write_str(" ")?;
            }
            write!(f, "{v}")?;
        }
        Ok(())
    }
}

/// Why a record was not replayed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum NotReplayed {
    /// Its run time is unknown (-1): there is nothing to run for.
    UnknownRunTime,
    /// It was cancelled (status 5) before it started (run time 0 or unknown).
    CancelledBeforeStart,
}

/// What the header comments of a trace say (`; Key: value` lines before the
/// first record). Only the first value of each key is kept; values that do not
/// parse as numbers where numbers are expected are left `None` (the header is
/// information, not replayed data).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SwfHeader {
    /// `Version`: the SWF version.
    pub version: Option<String>,
    /// `Computer`: the machine the log was taken on.
    pub computer: Option<String>,
    /// `Installation`: the site.
    pub installation: Option<String>,
    /// `Acknowledge`: whom to credit for the log.
    pub acknowledge: Option<String>,
    /// `Conversion`: who converted it to SWF, and when.
    pub conversion: Option<String>,
    /// `StartTime`: the wall-clock start of the log, as written.
    pub start_time: Option<String>,
    /// `EndTime`: the wall-clock end of the log, as written.
    pub end_time: Option<String>,
    /// `UnixStartTime`: the start of the log in seconds since 1970.
    pub unix_start_time: Option<i64>,
    /// `MaxJobs`: how many jobs the log holds.
    pub max_jobs: Option<u64>,
    /// `MaxRecords`: how many records the log holds.
    pub max_records: Option<u64>,
}

impl SwfHeader {
    fn read_comment(&mut self, text: &str) {
        let Some((key, value)) = text.split_once(':') else {
            return;
        };
        let value = value.trim();
        let set = |slot: &mut Option<String>| {
            if slot.is_none() && !value.is_empty() {
                *slot = Some(value.to_owned());
            }
        };
        match key.trim() {
            "Version" => set(&mut self.version),
            "Computer" => set(&mut self.computer),
            "Installation" => set(&mut self.installation),
            "Acknowledge" => set(&mut self.acknowledge),
            "Conversion" => set(&mut self.conversion),
            "StartTime" => set(&mut self.start_time),
            "EndTime" => set(&mut self.end_time),
            "UnixStartTime" => {
                self.unix_start_time = self.unix_start_time.or(value.parse().ok());
            }
            "MaxJobs" => self.max_jobs = self.max_jobs.or(value.parse().ok()),
            "MaxRecords" => self.max_records = self.max_records.or(value.parse().ok()),
            _ => {}
        }
    }
}

/// Reads SWF header comments and records from any [`BufRead`], lazily: it
/// holds the current line and the header, never the records read before.
///
/// # Guarantees
/// * Lines starting with `;` are comments; those before the first record make
///   the [`SwfHeader`]. Blank lines carry nothing and are passed over. Every
///   other line is a record of exactly 18 integers, or a [`TraceError`] naming
///   the line.
/// * Submit times never go backwards; a record submitted before the one above
///   it is an error, not reordered.
/// * A read error (a truncated gzip stream, say) is an error naming the line
///   being read, never an early end.
/// * After the first error it answers `None`: nothing after a bad line is
///   replayed as if it were good.
/// * It never panics, whatever the bytes.
pub struct SwfReader<R> {
    source: R,
    file: String,
    gzip: bool,
    line: u64,
    buf: Vec<u8>,
    header: SwfHeader,
    peeked: Option<SwfRecord>,
    header_done: bool,
    last_submit: Option<i64>,
    finished: bool,
}

impl<R> fmt::Debug for SwfReader<R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SwfReader")
            .field("file", &self.file)
            .field("gzip", &self.gzip)
            .field("line", &self.line)
            .field("header", &self.header)
            .finish_non_exhaustive()
    }
}

impl<R: BufRead> SwfReader<R> {
    /// A reader of `source`, naming it `file` in errors. The source is plain
    /// SWF text; use [`Trace::open`] for files that may be gzipped.
    pub fn new(file: impl Into<String>, source: R) -> Self {
        SwfReader {
            source,
            file: file.into(),
            gzip: false,
            line: 0,
            buf: Vec::with_capacity(256),
            header: SwfHeader::default(),
            peeked: None,
            header_done: false,
            last_submit: None,
            finished: false,
        }
    }

    /// The file name errors carry.
    pub fn file(&self) -> &str {
        &self.file
    }

    /// The header, complete once [`read_header`](Self::read_header) or the
    /// first [`next_record`](Self::next_record) has returned.
    pub fn header(&self) -> &SwfHeader {
        &self.header
    }

    /// Reads up to the first record (kept for the next
    /// [`next_record`](Self::next_record)) and answers the header.
    pub fn read_header(&mut self) -> Result<&SwfHeader, TraceError> {
        if !self.header_done && self.peeked.is_none() {
            self.peeked = self.read_record()?;
        }
        Ok(&self.header)
    }

    /// The next record, `None` at the end of the trace (or after an error).
    pub fn next_record(&mut self) -> Result<Option<SwfRecord>, TraceError> {
        if let Some(record) = self.peeked.take() {
            return Ok(Some(record));
        }
        self.read_record()
    }

    fn error(&mut self, kind: TraceErrorKind) -> TraceError {
        self.finished = true;
        TraceError {
            file: self.file.clone(),
            line: self.line,
            kind,
        }
    }

    fn read_record(&mut self) -> Result<Option<SwfRecord>, TraceError> {
        loop {
            if self.finished {
                return Ok(None);
            }
            self.buf.clear();
            self.line += 1;
            let read = self.source.read_until(b'\n', &mut self.buf);
            match read {
                Ok(0) => {
                    self.line -= 1;
                    self.finished = true;
                    self.header_done = true;
                    return Ok(None);
                }
                Ok(_) => {}
                Err(err) => {
                    let reason = err.to_string();
                    let kind = if self.gzip {
                        TraceErrorKind::Gzip { reason }
                    } else {
                        TraceErrorKind::Io { reason }
                    };
                    return Err(self.error(kind));
                }
            }
            let text = self.buf.trim_ascii();
            if text.is_empty() {
                continue;
            }
            if let Some(comment) = text.strip_prefix(b";") {
                if !self.header_done {
                    let comment = String::from_utf8_lossy(comment);
                    self.header.read_comment(&comment);
                }
                continue;
            }
            self.header_done = true;
            let record = match parse_record(text) {
                Ok(record) => record,
                Err(reason) => return Err(self.error(TraceErrorKind::Malformed { reason })),
            };
            if let Some(previous) = self.last_submit
                && record.submit < previous
            {
                return Err(self.error(TraceErrorKind::SubmitWentBackwards {
                    submit: record.submit,
                    previous,
                }));
            }
            self.last_submit = Some(record.submit);
            return Ok(Some(record));
        }
    }
}

impl<R: BufRead> Iterator for SwfReader<R> {
    type Item = Result<SwfRecord, TraceError>;

    fn next(&mut self) -> Option<Self::Item> {
        self.next_record().transpose()
    }
}

const FIELD_NAMES: [&str; SWF_FIELDS] = [
    "job number",
    "submit time",
    "wait time",
    "run time",
    "allocated processors",
    "average CPU time",
    "used memory",
    "requested processors",
    "requested time",
    "requested memory",
    "status",
    "user",
    "group",
    "executable",
    "queue",
    "partition",
    "preceding job",
    "think time",
];

fn parse_record(text: &[u8]) -> Result<SwfRecord, String> {
    let mut fields = [0i64; SWF_FIELDS];
    let mut count = 0;
    for token in text
        .split(|b| b.is_ascii_whitespace())
        .filter(|t| !t.is_empty())
    {
        if count == SWF_FIELDS {
            count += 1;
            break;
        }
        fields[count] = parse_int(token).ok_or_else(|| {
            format!(
                "field {} ({}) is {:?}, not an integer",
                count + 1,
                FIELD_NAMES[count],
                String::from_utf8_lossy(token)
            )
        })?;
        count += 1;
    }
    if count != SWF_FIELDS {
        let found = if count > SWF_FIELDS {
            "more".to_owned()
        } else {
            count.to_string()
        };
        return Err(format!(
            "expected {SWF_FIELDS} whitespace-separated fields, found {found}"
        ));
    }
    let record = SwfRecord::from_fields(fields);
    if record.submit < 0 {
        return Err(format!(
            "field 2 (submit time) is {}, a submit time cannot be negative",
            record.submit
        ));
    }
    if record.run_time < -1 {
        return Err(format!(
            "field 4 (run time) is {}, below -1 (unknown)",
            record.run_time
        ));
    }
    Ok(record)
}

fn parse_int(token: &[u8]) -> Option<i64> {
    std::str::from_utf8(token).ok()?.parse().ok()
}

/// A trace file: plain SWF text, or gzipped (detected by its magic bytes).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Trace {
    path: PathBuf,
    limit: Option<u64>,
}

/// The reader [`Trace::open`] answers: buffered over the file, gunzipping when
/// the file is gzipped.
pub type TraceReader = SwfReader<Box<dyn BufRead + Send>>;

impl Trace {
    /// The trace at `path`; nothing is read until it is opened.
    pub fn new(path: impl Into<PathBuf>) -> Self {
        Trace {
            path: path.into(),
            limit: None,
        }
    }

    /// The same trace, replaying only its first `records` records (for quick
    /// runs of a long trace).
    #[must_use]
    pub fn first(mut self, records: u64) -> Self {
        self.limit = Some(records);
        self
    }

    /// Where it is.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// How many records a replay reads at most, if limited by [`Trace::first`].
    pub fn limit(&self) -> Option<u64> {
        self.limit
    }

    /// The file's name as errors and the report write it.
    pub fn name(&self) -> String {
        self.path.display().to_string()
    }

    /// Opens the file, gunzipping it if it starts with the gzip magic bytes
    /// (multi-member gzip streams included).
    pub fn open(&self) -> Result<TraceReader, TraceError> {
        let io = |err: io::Error| TraceError {
            file: self.name(),
            line: 0,
            kind: TraceErrorKind::Io {
                reason: err.to_string(),
            },
        };
        let mut file = BufReader::with_capacity(64 * 1024, File::open(&self.path).map_err(io)?);
        let head = file.fill_buf().map_err(io)?;
        let gzip = head.starts_with(&[0x1f, 0x8b]);
        let source: Box<dyn BufRead + Send> = if gzip {
            Box::new(BufReader::with_capacity(
                64 * 1024,
                flate2::bufread::MultiGzDecoder::new(file),
            ))
        } else {
            Box::new(file)
        };
        let mut reader = SwfReader::new(self.name(), source);
        reader.gzip = gzip;
        Ok(reader)
    }

    /// Reads the whole trace once, as a replay would, and answers what it
    /// holds: the header, and the counts a replay would report. Memory stays
    /// constant whatever the trace's length.
    pub fn scan(&self) -> Result<TraceSummary, TraceError> {
        let mut jobs = TraceJobs::open(self, SystemTime::UNIX_EPOCH)?;
        while let Some(record) = jobs.next_record()? {
            jobs.count(&record);
        }
        Ok(jobs.summary())
    }
}

/// What a replay read from its trace: the counts a report prints.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TraceCounts {
    /// Records read.
    pub records: u64,
    /// Jobs replayed (one per processor of each replayable record).
    pub jobs: u64,
    /// Records not replayed: run time unknown.
    pub unknown_run_time: u64,
    /// Records not replayed: cancelled before they started.
    pub cancelled_before_start: u64,
    /// Replayed records with more than one processor (each processor one lease).
    pub multi_processor_records: u64,
    /// Replayed records whose processor count was unknown or zero, replayed as one lease.
    pub unknown_processors: u64,
    /// The first record's submit time, seconds from the trace's start.
    pub first_submit: Option<i64>,
    /// The last record's submit time.
    pub last_submit: Option<i64>,
}

impl TraceCounts {
    /// Records not replayed, for any reason.
    pub fn not_replayed(&self) -> u64 {
        self.unknown_run_time + self.cancelled_before_start
    }

    /// The time from the first record's submission to the last's.
    pub fn submit_span(&self) -> Duration {
        match (self.first_submit, self.last_submit) {
            (Some(a), Some(b)) if b >= a => Duration::from_secs((b - a) as u64),
            _ => Duration::ZERO,
        }
    }
}

/// A trace as a report names it: its file, its header, and what was replayed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TraceSummary {
    /// The file.
    pub file: String,
    /// Its header comments.
    pub header: SwfHeader,
    /// What was read and replayed.
    pub counts: TraceCounts,
}

/// The jobs of a trace, in submit order, as a scenario replays them.
///
/// # Guarantees
/// * Job ids run 0, 1, 2, ... in submission order; every job is trusted and
///   named `job-` and its id, as generated jobs are.
/// * A record with `p > 1` processors gives `p` jobs with the same submit and
///   run time, one after another, without holding `p` jobs in memory.
/// * A record that cannot be replayed is counted by reason and gives no job.
/// * Submit time `s` maps to `start + s` seconds; run time `r` to a
///   `run-for` command of `r` seconds.
#[derive(Debug)]
pub struct TraceJobs {
    reader: TraceReader,
    start: SystemTime,
    limit: Option<u64>,
    next_id: JobId,
    /// The record being expanded and how many of its jobs are still to come.
    expanding: Option<(SwfRecord, u64)>,
    counts: TraceCounts,
}

impl TraceJobs {
    /// Opens `trace` for a replay starting at `start`.
    pub fn open(trace: &Trace, start: SystemTime) -> Result<Self, TraceError> {
        Ok(TraceJobs {
            reader: trace.open()?,
            start,
            limit: trace.limit,
            next_id: 0,
            expanding: None,
            counts: TraceCounts::default(),
        })
    }

    /// The header (complete once the first job has been read).
    pub fn header(&self) -> &SwfHeader {
        self.reader.header()
    }

    /// What has been read so far.
    pub fn counts(&self) -> TraceCounts {
        self.counts
    }

    /// The summary for a report: file, header, counts so far.
    pub fn summary(&self) -> TraceSummary {
        TraceSummary {
            file: self.reader.file().to_owned(),
            header: self.reader.header().clone(),
            counts: self.counts,
        }
    }

    fn next_record(&mut self) -> Result<Option<SwfRecord>, TraceError> {
        if self.limit.is_some_and(|n| self.counts.records >= n) {
            return Ok(None);
        }
        self.reader.next_record()
    }

    /// Counts a record read; answers how many jobs it gives.
    fn count(&mut self, record: &SwfRecord) -> u64 {
        let c = &mut self.counts;
        c.records += 1;
        c.first_submit.get_or_insert(record.submit);
        c.last_submit = Some(record.submit);
        match record.not_replayable() {
            Some(NotReplayed::UnknownRunTime) => {
                c.unknown_run_time += 1;
                0
            }
            Some(NotReplayed::CancelledBeforeStart) => {
                c.cancelled_before_start += 1;
                0
            }
            None => {
                let p = record.processors();
                if p > 1 {
                    c.multi_processor_records += 1;
                }
                if record.allocated_processors <= 0 && record.requested_processors <= 0 {
                    c.unknown_processors += 1;
                }
                c.jobs += p;
                p
            }
        }
    }

    /// The next job, `None` at the end of the trace.
    pub fn next_job(&mut self) -> Result<Option<Job>, TraceError> {
        loop {
            if let Some((record, left)) = &mut self.expanding
                && *left > 0
            {
                *left -= 1;
                let record = *record;
                let id = self.next_id;
                self.next_id += 1;
                let run_time = Duration::from_secs(record.run_time.max(0) as u64);
                let submitted_at = self
                    .start
                    .checked_add(Duration::from_secs(record.submit.max(0) as u64))
                    .unwrap_or(self.start);
                return Ok(Some(Job {
                    id,
                    name: format!("job-{id:07}"),
                    command: billet_simulated::run_for(run_time),
                    run_time,
                    trust: TrustClass::Trusted,
                    labels: Vec::new(),
                    submitted_at,
                }));
            }
            let Some(record) = self.next_record()? else {
                self.expanding = None;
                return Ok(None);
            };
            let jobs = self.count(&record);
            self.expanding = Some((record, jobs));
        }
    }
}

/// Reads everything from `source` into the reader of a trace named `file`,
/// for tests and tools that hold a trace in memory.
pub fn read_all(file: &str, source: impl Read) -> Result<(SwfHeader, Vec<SwfRecord>), TraceError> {
    let mut reader = SwfReader::new(file, BufReader::new(source));
    let mut records = Vec::new();
    while let Some(record) = reader.next_record()? {
        records.push(record);
    }
    Ok((reader.header().clone(), records))
}
