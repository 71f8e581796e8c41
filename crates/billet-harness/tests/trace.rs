//! T1: reading traces in the Standard Workload Format, plain or gzipped:
//! records, header, what is not replayed, and bad input as errors naming the
//! file and line.

use std::io::Write;
use std::time::{Duration, SystemTime};

use billet_harness::trace::{
    NotReplayed, SwfReader, SwfRecord, Trace, TraceErrorKind, TraceJobs, read_all,
};
use billet_provider::TrustClass;
use flate2::Compression;
use flate2::write::GzEncoder;
use proptest::prelude::*;

const HEADER: &str = "; Version: 2.2\n\
; Computer: test rig\n\
; Installation: Example grid\n\
; Acknowledge: Someone\n\
;              a continuation line without a key\n\
; MaxJobs: 4\n\
; StartTime: Sun Nov 20 00:00:05 GMT 2005\n";

fn line(f: [i64; 18]) -> String {
    SwfRecord::from_fields(f).to_string() + "\n"
}

fn write_plain(dir: &tempfile::TempDir, name: &str, text: &str) -> Trace {
    let path = dir.path().join(name);
    std::fs::write(&path, text).unwrap();
    Trace::new(path)
}

fn gzip(text: &[u8]) -> Vec<u8> {
    let mut encoder = GzEncoder::new(Vec::new(), Compression::default());
    encoder.write_all(text).unwrap();
    encoder.finish().unwrap()
}

fn sample_trace() -> String {
    let mut text = HEADER.to_owned();
    // job, submit, wait, run, alloc, cpu, mem, req procs, req time, req mem, status, ...
    text += &line([
        1, 0, -1, 83, 1, -1, -1, 1, 1200, -1, 1, 1, 1, -1, -1, 1, -1, -1,
    ]);
    text += "\n   \n"; // blank lines carry nothing
    text += &line([
        2, 3, -1, -1, 1, -1, -1, 1, -1, -1, 1, 2, 2, -1, -1, 2, -1, -1,
    ]);
    text += &line([
        3, 12, -1, 0, 0, -1, -1, 1, -1, -1, 5, 1, 1, -1, -1, 3, -1, -1,
    ]);
    text += &line([
        4, 12, -1, 30, 3, -1, -1, 3, -1, -1, 1, 1, 1, -1, -1, 3, -1, -1,
    ]);
    text += &line([
        5, 20, -1, 0, -1, -1, -1, -1, -1, -1, 1, 1, 1, -1, -1, 3, -1, -1,
    ]);
    text
}

// T1: records become jobs: one lease each at start + submit time, running for
// the run time; the header is read; unreplayable records are counted by reason;
// a multi-processor record gives one job per processor; plain and gzipped
// files read the same.
#[test]
fn t1_records_become_jobs_plain_and_gzipped() {
    let dir = tempfile::tempdir().unwrap();
    let text = sample_trace();
    let plain = write_plain(&dir, "plain.swf", &text);
    let gz_path = dir.path().join("named-without-gz");
    std::fs::write(&gz_path, gzip(text.as_bytes())).unwrap();
    let gzipped = Trace::new(&gz_path);
    let start = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000);
    let mut seen = Vec::new();
    for trace in [plain, gzipped] {
        let mut jobs = TraceJobs::open(&trace, start).unwrap();
        let mut all = Vec::new();
        while let Some(job) = jobs.next_job().unwrap() {
            all.push(job);
        }
        let shape: Vec<(u64, u64, u64)> = all
            .iter()
            .map(|j| {
                let at = j.submitted_at.duration_since(start).unwrap().as_secs();
                (j.id, at, j.run_time.as_secs())
            })
            .collect();
        // Record 1; record 4 three times (3 processors); record 5 (processors
        // unknown: one lease, run time 0).
        assert_eq!(
            shape,
            [
                (0, 0, 83),
                (1, 12, 30),
                (2, 12, 30),
                (3, 12, 30),
                (4, 20, 0)
            ]
        );
        assert!(all.iter().all(|j| j.trust == TrustClass::Trusted));
        assert_eq!(all[1].name, "job-0000001");
        assert_eq!(
            billet_simulated::parse_run_for(&all[0].command).unwrap(),
            Duration::from_secs(83)
        );
        let c = jobs.counts();
        assert_eq!((c.records, c.jobs), (5, 5));
        assert_eq!((c.unknown_run_time, c.cancelled_before_start), (1, 1));
        assert_eq!(c.not_replayed(), 2);
        assert_eq!((c.multi_processor_records, c.unknown_processors), (1, 1));
        assert_eq!(c.submit_span(), Duration::from_secs(20));
        let h = jobs.header();
        assert_eq!(h.installation.as_deref(), Some("Example grid"));
        assert_eq!(h.computer.as_deref(), Some("test rig"));
        assert_eq!(h.version.as_deref(), Some("2.2"));
        assert_eq!(h.max_jobs, Some(4));
        assert_eq!(
            h.start_time.as_deref(),
            Some("Sun Nov 20 00:00:05 GMT 2005")
        );
        seen.push(all);
    }
    assert_eq!(seen[0], seen[1], "gzipped and plain give the same jobs");
}

// T1: why a record is not replayed, by the SWF definition (status, field 11:
// 5 is cancelled; a cancelled job with run time 0 or -1 never started).
#[test]
fn t1_not_replayed_by_reason() {
    let r = |run: i64, status: i64| {
        let mut f = SwfRecord::new(1, 0, run).fields();
        f[10] = status;
        SwfRecord::from_fields(f).not_replayable()
    };
    assert_eq!(r(-1, 1), Some(NotReplayed::UnknownRunTime));
    assert_eq!(r(-1, -1), Some(NotReplayed::UnknownRunTime));
    assert_eq!(r(0, 5), Some(NotReplayed::CancelledBeforeStart));
    assert_eq!(r(-1, 5), Some(NotReplayed::CancelledBeforeStart));
    assert_eq!(r(40, 5), None, "cancelled after running 40 s: replayed");
    assert_eq!(r(0, 1), None, "a zero run time is a job that ran");
    assert_eq!(r(10, 0), None, "failed jobs ran too");
}

fn error_of(text: &str) -> (u64, TraceErrorKind) {
    let err = read_all("bad.swf", text.as_bytes()).unwrap_err();
    assert_eq!(err.file, "bad.swf");
    assert!(
        err.to_string()
            .starts_with(&format!("bad.swf, line {}: ", err.line)),
        "{err}"
    );
    (err.line, err.kind)
}

// T1: a malformed line is an error naming the file and the line, whatever is
// wrong with it.
#[test]
fn t1_malformed_lines_name_file_and_line() {
    let good = line(SwfRecord::new(1, 5, 10).fields());
    let cases = [
        "1 2 3\n".to_owned(),                     // too few fields
        good.trim_end().to_owned() + " 7\n",      // too many
        good.replacen("10", "ten", 1),            // not a number
        good.replacen(" 10 ", " 1.5 ", 1),        // not an integer
        line(SwfRecord::new(1, -4, 10).fields()), // negative submit
        line(SwfRecord::new(1, 4, -2).fields()),  // run time below -1
        good.replacen("1", "\u{fffd}", 1),        // not ASCII
        format!("1 {} 3\n", "9".repeat(40)),      // overflows
    ];
    for bad in cases {
        let text = format!("{HEADER}{good}{bad}");
        let (line_no, kind) = error_of(&text);
        assert_eq!(line_no, 9, "the bad line is line 9 of {text:?}");
        assert!(
            matches!(kind, TraceErrorKind::Malformed { .. }),
            "{kind:?} for {bad:?}"
        );
    }
}

// T1: submit times never go backwards; equal submit times are fine.
#[test]
fn t1_submit_going_backwards_is_an_error() {
    let text = [
        line(SwfRecord::new(1, 50, 10).fields()),
        line(SwfRecord::new(2, 50, 10).fields()),
        line(SwfRecord::new(3, 49, 10).fields()),
    ]
    .concat();
    let (line_no, kind) = error_of(&text);
    assert_eq!(line_no, 3);
    assert_eq!(
        kind,
        TraceErrorKind::SubmitWentBackwards {
            submit: 49,
            previous: 50
        }
    );
}

// T1: nothing after a bad line is read as if it were good.
#[test]
fn t1_reader_stops_at_the_first_error() {
    let text = format!(
        "{}garbage\n{}",
        line(SwfRecord::new(1, 1, 1).fields()),
        line(SwfRecord::new(2, 2, 2).fields())
    );
    let mut reader = SwfReader::new("x.swf", text.as_bytes());
    assert!(reader.next().unwrap().is_ok());
    assert_eq!(reader.next().unwrap().unwrap_err().line, 2);
    assert!(reader.next().is_none());
}

// T1: a truncated gzip stream is an error naming the file and the line being
// read, never a quiet early end; so is a missing file (line 0).
#[test]
fn t1_truncated_gzip_and_missing_file_are_errors() {
    let dir = tempfile::tempdir().unwrap();
    let mut text = HEADER.to_owned();
    for i in 0..2_000 {
        text += &line(SwfRecord::new(i + 1, i, 60).fields());
    }
    let whole = gzip(text.as_bytes());
    // Cut inside the compressed data, and just before the trailer's checksum.
    for cut in [whole.len() / 2, whole.len() - 4] {
        let path = dir.path().join(format!("cut-{cut}.swf.gz"));
        std::fs::write(&path, &whole[..cut]).unwrap();
        let trace = Trace::new(&path);
        let mut jobs = TraceJobs::open(&trace, SystemTime::UNIX_EPOCH).unwrap();
        let err = loop {
            match jobs.next_job() {
                Ok(Some(_)) => {}
                Ok(None) => panic!("a truncated gzip stream read as a whole trace"),
                Err(err) => break err,
            }
        };
        assert!(
            matches!(err.kind, TraceErrorKind::Gzip { .. }),
            "{err:?} at cut {cut}"
        );
        assert_eq!(err.file, path.display().to_string());
        assert!(err.line > 0, "{err}");
        assert!(err.to_string().contains(&format!("line {}", err.line)));
    }
    let missing = Trace::new(dir.path().join("no-such.swf"));
    let err = missing.open().unwrap_err();
    assert_eq!(err.line, 0);
    assert!(matches!(err.kind, TraceErrorKind::Io { .. }), "{err:?}");
}

fn record() -> impl Strategy<Value = [i64; 18]> {
    (
        1i64..1_000_000,
        0i64..1_000_000,
        -1i64..1_000_000,
        prop::array::uniform15(-1i64..100_000),
    )
        .prop_map(|(job, gap, run, rest)| {
            let mut f = [0i64; 18];
            f[0] = job;
            f[1] = gap; // turned into a running submit time below
            f[2] = rest[0];
            f[3] = run;
            f[4..].copy_from_slice(&rest[1..]);
            f
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    // T1: the reader never panics on arbitrary bytes: it answers records or
    // one error naming a line, then stops.
    #[test]
    fn t1_reader_never_panics_on_arbitrary_bytes(bytes in prop::collection::vec(any::<u8>(), 0..2_000)) {
        let mut reader = SwfReader::new("fuzz.swf", bytes.as_slice());
        let mut lines = 0;
        for item in reader.by_ref().take(10_000) {
            if let Err(err) = item {
                prop_assert!(err.line >= 1);
                prop_assert_eq!(err.file.as_str(), "fuzz.swf");
            }
            lines += 1;
        }
        prop_assert!(lines <= bytes.len() + 1);
        // Gzipped junk, and a gzip prefix followed by junk, through a file.
        let dir = tempfile::tempdir().unwrap();
        for (i, data) in [gzip(&bytes), [&[0x1f, 0x8b][..], &bytes].concat()].iter().enumerate() {
            let path = dir.path().join(format!("fuzz-{i}"));
            std::fs::write(&path, data).unwrap();
            if let Ok(mut jobs) = TraceJobs::open(&Trace::new(&path).first(1_000), SystemTime::UNIX_EPOCH) {
                for _ in 0..10_000 {
                    match jobs.next_job() {
                        Ok(Some(_)) => {}
                        Ok(None) | Err(_) => break,
                    }
                }
            }
        }
    }

    // T1: records generated and written as SWF (with a header, in submit
    // order) read back exactly, plain and gzipped.
    #[test]
    fn t1_written_records_read_back_exactly(mut fields in prop::collection::vec(record(), 0..60)) {
        let mut submit = 0;
        for f in &mut fields {
            submit += f[1] % 1_000;
            f[1] = submit;
        }
        let records: Vec<SwfRecord> = fields.iter().map(|f| SwfRecord::from_fields(*f)).collect();
        let mut text = HEADER.to_owned();
        for r in &records {
            text += &format!("{r}\n");
        }
        let (header, back) = read_all("gen.swf", text.as_bytes()).unwrap();
        prop_assert_eq!(&back, &records);
        prop_assert_eq!(header.installation.as_deref(), Some("Example grid"));
        let gz = gzip(text.as_bytes());
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("gen.swf.gz");
        std::fs::write(&path, gz).unwrap();
        let mut reader = Trace::new(&path).open().unwrap();
        let mut from_gz = Vec::new();
        while let Some(r) = reader.next_record().unwrap() {
            from_gz.push(r);
        }
        prop_assert_eq!(from_gz, records);
    }
}
