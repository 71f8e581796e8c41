//! What the docker benches share: quantiles, the host's view of a
//! container's memory (its cgroup, the resident memory of the processes the
//! engine runs beside it), figures as the reports print them, and the
//! `--leases` argument.

#![allow(dead_code, unreachable_pub)]

use std::collections::HashMap;
use std::time::Duration;

/// The `q`-quantile (0..=1) of `samples`, nearest rank.
pub fn quantile(samples: &[Duration], q: f64) -> Duration {
    let mut sorted = samples.to_vec();
    sorted.sort();
    let rank = ((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    sorted[rank - 1]
}

/// The resident memory of process `pid`, in bytes, or why it cannot be read
/// (naming the file).
pub fn rss(pid: u32) -> Result<u64, String> {
    let path = format!("/proc/{pid}/status");
    let status = std::fs::read_to_string(&path).map_err(|e| format!("cannot read {path}: {e}"))?;
    let kib = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next()?.parse::<u64>().ok())
        .ok_or_else(|| format!("{path} has no VmRSS line in kB"))?;
    Ok(kib * 1024)
}

/// Every process's argv, by pid (a process that ends while it is read is
/// left out), or why `/proc` cannot be read.
pub fn processes() -> Result<HashMap<u32, Vec<String>>, String> {
    let mut out = HashMap::new();
    let entries = std::fs::read_dir("/proc").map_err(|e| format!("cannot read /proc: {e}"))?;
    for entry in entries.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|s| s.parse::<u32>().ok())
        else {
            continue;
        };
        if let Ok(cmdline) = std::fs::read(format!("/proc/{pid}/cmdline")) {
            let argv = cmdline
                .split(|b| *b == 0)
                .filter(|a| !a.is_empty())
                .map(|a| String::from_utf8_lossy(a).into_owned())
                .collect();
            out.insert(pid, argv);
        }
    }
    Ok(out)
}

/// The resident memory of every process whose program is named `name`, or
/// why it is unknown: no such process, or a file of one that cannot be read.
pub fn rss_of(name: &str, procs: &HashMap<u32, Vec<String>>) -> Result<u64, String> {
    let pids: Vec<u32> = procs
        .iter()
        .filter(|(_, argv)| {
            argv.first()
                .is_some_and(|p| p.rsplit('/').next() == Some(name))
        })
        .map(|(pid, _)| *pid)
        .collect();
    if pids.is_empty() {
        return Err(format!("no {name} process in /proc"));
    }
    pids.into_iter().map(rss).sum()
}

/// A container's cgroup memory, cgroup v1 (cgroupfs or systemd driver) or v2,
/// or why none can be read (every file tried, and what went wrong with each).
pub fn cgroup_memory(id: &str) -> Result<u64, String> {
    let paths = [
        format!("/sys/fs/cgroup/memory/docker/{id}/memory.usage_in_bytes"),
        format!("/sys/fs/cgroup/memory/system.slice/docker-{id}.scope/memory.usage_in_bytes"),
        format!("/sys/fs/cgroup/system.slice/docker-{id}.scope/memory.current"),
        format!("/sys/fs/cgroup/docker/{id}/memory.current"),
        // podman, cgroupfs (v1, v2) and systemd drivers
        format!("/sys/fs/cgroup/memory/libpod_parent/libpod-{id}/memory.usage_in_bytes"),
        format!("/sys/fs/cgroup/libpod_parent/libpod-{id}/memory.current"),
        format!("/sys/fs/cgroup/machine.slice/libpod-{id}.scope/memory.current"),
        format!("/sys/fs/cgroup/memory/machine.slice/libpod-{id}.scope/memory.usage_in_bytes"),
    ];
    let mut tried = Vec::new();
    for path in &paths {
        match std::fs::read_to_string(path) {
            Ok(text) => {
                return text
                    .trim()
                    .parse()
                    .map_err(|e| format!("{path} holds {:?}, not a byte count: {e}", text.trim()));
            }
            Err(e) => tried.push(format!("{path}: {e}")),
        }
    }
    Err(format!(
        "no cgroup memory file of container {id} can be read: {}",
        tried.join("; ")
    ))
}

/// Whether `argv` is the per-container process the engine runs beside
/// container `id`: docker's `containerd-shim-runc-v2 ... -id ID`, podman's
/// `conmon ... -c ID`.
pub fn is_shim_of(argv: &[String], id: &str) -> bool {
    let program = argv.first().map_or("", String::as_str);
    let flagged = |flag: &str| argv.windows(2).any(|w| w[0] == flag && w[1] == id);
    (program.contains("containerd-shim") && flagged("-id"))
        || (program.ends_with("conmon") && flagged("-c"))
}

/// A duration as the reports print it.
pub fn ms(d: Duration) -> String {
    if d >= Duration::from_millis(1) {
        format!("{:.2} ms", d.as_secs_f64() * 1e3)
    } else {
        format!("{:.2} µs", d.as_secs_f64() * 1e6)
    }
}

pub fn bytes(b: f64) -> String {
    if b >= 1024.0 * 1024.0 {
        format!("{:.2} MiB", b / (1024.0 * 1024.0))
    } else if b >= 1024.0 {
        format!("{:.1} KiB", b / 1024.0)
    } else {
        format!("{b:.0} B")
    }
}

/// The number of leases: the value of `--leases`, else `default`; at least 1.
pub fn leases(args: &[String], default: usize) -> Result<usize, String> {
    let Some(at) = args.iter().position(|a| a == "--leases") else {
        return Ok(default);
    };
    let value = args
        .get(at + 1)
        .ok_or("--leases needs a number of leases (at least 1) after it")?;
    match value.parse::<usize>() {
        Ok(0) => {
            Err("--leases 0: there is nothing to measure with no lease; give at least 1".to_owned())
        }
        Ok(n) => Ok(n),
        Err(e) => Err(format!(
            "--leases {value:?}: not a whole number of leases ({e})"
        )),
    }
}

/// Prints the table row `| what | x | y | x / y |` and answers the ratio.
pub fn ratio_row(what: &str, x: Duration, y: Duration) -> f64 {
    let ratio = x.as_secs_f64() / y.as_secs_f64().max(1e-12);
    let shown = if ratio >= 10.0 {
        format!("{ratio:.0}x")
    } else {
        format!("{ratio:.2}x")
    };
    println!("| {what} | {} | {} | {shown} |", ms(x), ms(y));
    ratio
}
