//! The `billet` client (`billet jobs ...`, `billet pools`): the operator's
//! terminal tool, speaking only the public HTTP API of `billet serve`.
//!
//! # Where it connects, and with what
//!
//! * The server: `--server URL`, else `BILLET_SERVER`, else
//!   [`DEFAULT_SERVER`].
//! * The token: `BILLET_TOKEN`, else the file `--token-file` or
//!   `BILLET_TOKEN_FILE` names, else [`DEFAULT_TOKEN_FILE`] when it can be
//!   read. A token given on the command line (`--token`) is refused: it would
//!   sit in the shell's history and in `ps` for every user to read.
//!
//! # Exit statuses
//!
//! | status | when |
//! | --- | --- |
//! | 0 | done; with `--wait`, the job finished with exit code 0 |
//! | the job's exit code | `--wait`, the job finished with a non-zero exit code (1 to 255; another code is 1) |
//! | 1 | `--wait`, the job failed or was cancelled (the reason on stderr) |
//! | 2 | usage: a flag or argument is wrong, or a token was given on the command line |
//! | 3 | the server refused the request (its status and `error` on stderr) |
//! | 4 | the server could not be reached, or its answer could not be read |
//! | 130 | `--wait` interrupted (`^C`): the job is left running, unless `--cancel-on-interrupt` |

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, SystemTime};

use futures::StreamExt;
use serde_json::{Value, json};

mod show;

/// The server a client talks to when neither `--server` nor `BILLET_SERVER`
/// names one: `billet serve`'s default address.
pub const DEFAULT_SERVER: &str = "http://127.0.0.1:7878";

/// The token file read when neither `BILLET_TOKEN`, `--token-file` nor
/// `BILLET_TOKEN_FILE` gives a token: `billet serve`'s default, in the
/// current directory.
pub const DEFAULT_TOKEN_FILE: &str = "billet-state/token";

/// How long one request may take before the server counts as unreachable
/// (a `follow` is bounded only while it waits for the server's first byte).
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

/// Where and how the client connects (`--server`, `--token-file`, `--json`).
#[derive(Debug, Clone, clap::Args)]
pub struct Connection {
    /// The server's URL [env: BILLET_SERVER] [default: http://127.0.0.1:7878].
    #[arg(long, value_name = "URL", global = true)]
    pub server: Option<String>,
    /// A file holding the token (its first token is used) [env:
    /// BILLET_TOKEN_FILE]; BILLET_TOKEN, when set, comes first.
    #[arg(long, value_name = "PATH", global = true)]
    pub token_file: Option<PathBuf>,
    /// Refused: a token on the command line sits in the shell's history and
    /// in `ps`. Set BILLET_TOKEN, or give --token-file.
    #[arg(long, value_name = "TOKEN", global = true, hide = true)]
    pub token: Option<String>,
    /// Prints the API's JSON (one object a line for lists) instead of tables.
    #[arg(long, global = true)]
    pub json: bool,
}

/// `billet jobs ...`.
#[derive(Debug, clap::Subcommand)]
pub enum JobsCommand {
    /// Submits a job; with --wait, streams its output and exits with its
    /// exit code.
    Submit(Box<SubmitArgs>),
    /// Lists jobs, newest last: one page, or every page with --all.
    Ls {
        /// Only jobs in this state (queued, running, finished, failed,
        /// cancelled).
        #[arg(long, value_name = "STATE")]
        state: Option<String>,
        /// The most jobs a page holds (1 to 1000).
        #[arg(long, value_name = "N", default_value_t = 100)]
        limit: u32,
        /// Follows the pages to the last.
        #[arg(long)]
        all: bool,
    },
    /// Shows one job.
    Show {
        /// The job's id.
        id: u64,
    },
    /// Prints what a job's output holds; with --follow, then what it
    /// writes until it ends.
    Logs {
        /// The job's id.
        id: u64,
        /// Goes on printing until the job has ended.
        #[arg(long, short)]
        follow: bool,
    },
    /// Cancels a job.
    Cancel {
        /// The job's id.
        id: u64,
    },
}

/// The flags of `billet jobs submit`.
#[derive(Debug, clap::Args)]
pub struct SubmitArgs {
    /// A label the job needs of its pool (repeat for several).
    #[arg(long = "label", value_name = "L")]
    pub labels: Vec<String>,
    /// trusted, untrusted or unknown (the server's default: unknown).
    #[arg(long, value_name = "T")]
    pub trust: Option<String>,
    /// The job's timeout (`90s`, `2h`); the server's default when absent.
    #[arg(long, value_name = "D", value_parser = humantime::parse_duration)]
    pub timeout: Option<Duration>,
    /// An idempotency key: the same request with it again answers the same
    /// job.
    #[arg(long, value_name = "K")]
    pub key: Option<String>,
    /// Streams the job's output as it comes and exits with its exit code.
    #[arg(long)]
    pub wait: bool,
    /// With --wait, cancels the job at ^C (without it, ^C leaves it
    /// running).
    #[arg(long, requires = "wait")]
    pub cancel_on_interrupt: bool,
    /// The command and its arguments, after `--`.
    #[arg(required = true, last = true, value_name = "COMMAND")]
    pub command: Vec<String>,
}

/// Why a command ends with a status other than 0.
#[derive(Debug)]
pub enum Failure {
    /// Usage (2).
    Usage(String),
    /// The server answered a refusal (3): its status and its `error`.
    Refused(u16, String),
    /// The server could not be reached, or its answer read (4).
    Unreachable(String),
    /// A waited job ended without finishing cleanly: the status to exit
    /// with, and why.
    Job(u8, String),
    /// `^C` while waiting (130): what became of the job.
    Interrupted(String),
}

impl Failure {
    /// The exit status (see the module's table).
    pub fn status(&self) -> u8 {
        match self {
            Failure::Usage(_) => 2,
            Failure::Refused(..) => 3,
            Failure::Unreachable(_) => 4,
            Failure::Job(status, _) => *status,
            Failure::Interrupted(_) => 130,
        }
    }
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Failure::Usage(why) | Failure::Unreachable(why) | Failure::Job(_, why) => {
                f.write_str(why)
            }
            Failure::Refused(status, error) => write!(f, "the server answered {status}: {error}"),
            Failure::Interrupted(what) => write!(f, "interrupted: {what}"),
        }
    }
}

/// Runs `billet jobs COMMAND` (or `billet pools` when `command` is `None`)
/// and answers the exit status, having printed what it found.
pub fn main(connection: Connection, command: Option<JobsCommand>) -> ExitCode {
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("error: cannot start the runtime: {error}");
            return ExitCode::from(1);
        }
    };
    match runtime.block_on(run(connection, command)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(failure) => {
            if !matches!(failure, Failure::Job(_, ref why) if why.is_empty()) {
                eprintln!("error: {failure}");
            }
            ExitCode::from(failure.status())
        }
    }
}

/// The client, connected.
struct Client {
    http: reqwest::Client,
    base: String,
    token: String,
    json: bool,
}

/// The token, as the module says where it comes from.
fn token(connection: &Connection) -> Result<String, Failure> {
    if connection.token.is_some() {
        return Err(Failure::Usage(
            "--token is refused: a token on the command line sits in the shell's history and in \
             `ps` for every user to read; set BILLET_TOKEN, or give --token-file"
                .to_owned(),
        ));
    }
    if let Ok(token) = std::env::var("BILLET_TOKEN")
        && !token.trim().is_empty()
    {
        return Ok(token.trim().to_owned());
    }
    let named = connection
        .token_file
        .clone()
        .or_else(|| std::env::var_os("BILLET_TOKEN_FILE").map(PathBuf::from));
    let (path, named) = match named {
        Some(path) => (path, true),
        None => (PathBuf::from(DEFAULT_TOKEN_FILE), false),
    };
    match std::fs::read_to_string(&path) {
        Ok(text) => first_token(&text)
            .ok_or_else(|| Failure::Usage(format!("{}: holds no token", path.display()))),
        Err(error) if named => Err(Failure::Usage(format!(
            "cannot read the token file {}: {error}",
            path.display()
        ))),
        Err(_) => Err(Failure::Usage(format!(
            "no token: set BILLET_TOKEN, or give --token-file (or BILLET_TOKEN_FILE); {DEFAULT_TOKEN_FILE} cannot be read here"
        ))),
    }
}

/// The first token of a token file: its first line that is neither blank nor
/// a comment, up to its first blank (what follows is the grants).
fn first_token(text: &str) -> Option<String> {
    text.lines()
        .map(str::trim)
        .find(|line| !line.is_empty() && !line.starts_with('#'))
        .and_then(|line| line.split_whitespace().next())
        .map(str::to_owned)
}

async fn run(connection: Connection, command: Option<JobsCommand>) -> Result<(), Failure> {
    let token = token(&connection)?;
    let server = connection
        .server
        .clone()
        .or_else(|| std::env::var("BILLET_SERVER").ok())
        .unwrap_or_else(|| DEFAULT_SERVER.to_owned());
    let http = reqwest::Client::builder()
        .connect_timeout(REQUEST_TIMEOUT)
        .build()
        .map_err(|error| Failure::Unreachable(error.to_string()))?;
    let client = Client {
        http,
        base: server.trim_end_matches('/').to_owned(),
        token,
        json: connection.json,
    };
    match command {
        None => client.pools().await,
        Some(JobsCommand::Submit(args)) => client.submit(*args).await,
        Some(JobsCommand::Ls { state, limit, all }) => client.ls(state, limit, all).await,
        Some(JobsCommand::Show { id }) => {
            let job = client.get(&format!("/v1/jobs/{id}")).await?;
            client.print_one(&job, show::job);
            Ok(())
        }
        Some(JobsCommand::Logs { id, follow }) => client.logs(id, follow).await,
        Some(JobsCommand::Cancel { id }) => {
            let job = client
                .send(reqwest::Method::DELETE, &format!("/v1/jobs/{id}"), None)
                .await?;
            client.print_one(&job, show::job);
            Ok(())
        }
    }
}

impl Client {
    fn request(&self, method: reqwest::Method, path: &str) -> reqwest::RequestBuilder {
        self.http
            .request(method, format!("{}{path}", self.base))
            .bearer_auth(&self.token)
    }

    /// `GET path`'s JSON.
    async fn get(&self, path: &str) -> Result<Value, Failure> {
        self.send(reqwest::Method::GET, path, None).await
    }

    /// One request; its JSON when the server answers 2xx, else why not.
    async fn send(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Option<Value>,
    ) -> Result<Value, Failure> {
        let mut request = self.request(method, path).timeout(REQUEST_TIMEOUT);
        if let Some(body) = body {
            request = request.json(&body);
        }
        let response = request
            .send()
            .await
            .map_err(|e| unreachable(&self.base, &e))?;
        let response = refused(response).await?;
        response
            .json()
            .await
            .map_err(|error| Failure::Unreachable(format!("the answer could not be read: {error}")))
    }

    /// Prints `value`: its JSON with `--json`, else `human`'s text.
    fn print_one(&self, value: &Value, human: fn(&Value, SystemTime) -> String) {
        if self.json {
            println!("{value}");
        } else {
            print!("{}", human(value, SystemTime::now()));
        }
    }

    async fn pools(&self) -> Result<(), Failure> {
        let answer = self.get("/v1/pools").await?;
        let pools = answer["pools"].as_array().cloned().unwrap_or_default();
        if self.json {
            for pool in &pools {
                println!("{pool}");
            }
        } else {
            print!("{}", show::pools(&pools));
        }
        Ok(())
    }

    async fn ls(&self, state: Option<String>, limit: u32, all: bool) -> Result<(), Failure> {
        let mut after = 0u64;
        let mut jobs = Vec::new();
        loop {
            let mut path = format!("/v1/jobs?limit={limit}&after={after}");
            if let Some(state) = &state {
                path.push_str(&format!("&state={state}"));
            }
            let page = self.get(&path).await?;
            let listed = page["jobs"].as_array().cloned().unwrap_or_default();
            if self.json {
                for job in &listed {
                    println!("{job}");
                }
            } else {
                jobs.extend(listed);
            }
            match page["next"].as_u64() {
                Some(next) if all => after = next,
                _ => break,
            }
        }
        if !self.json {
            print!("{}", show::jobs(&jobs, SystemTime::now()));
        }
        Ok(())
    }

    async fn logs(&self, id: u64, follow: bool) -> Result<(), Failure> {
        self.stream_output(id, follow).await
    }

    /// Copies job `id`'s output to stdout as it comes (`follow`), or what is
    /// kept now.
    async fn stream_output(&self, id: u64, follow: bool) -> Result<(), Failure> {
        let query = if follow { "?follow=true" } else { "" };
        let response = self
            .request(
                reqwest::Method::GET,
                &format!("/v1/jobs/{id}/output{query}"),
            )
            .send()
            .await
            .map_err(|e| unreachable(&self.base, &e))?;
        let response = refused(response).await?;
        let mut body = response.bytes_stream();
        let mut stdout = std::io::stdout();
        while let Some(piece) = body.next().await {
            let piece = piece
                .map_err(|error| Failure::Unreachable(format!("the output broke off: {error}")))?;
            // A closed stdout (`| head`) ends the copy, not the client.
            if stdout
                .write_all(&piece)
                .and_then(|()| stdout.flush())
                .is_err()
            {
                break;
            }
        }
        Ok(())
    }

    async fn submit(&self, args: SubmitArgs) -> Result<(), Failure> {
        let mut body = json!({ "command": args.command });
        if !args.labels.is_empty() {
            body["labels"] = json!(args.labels);
        }
        if let Some(trust) = &args.trust {
            body["trust"] = json!(trust);
        }
        if let Some(timeout) = args.timeout {
            body["timeout_secs"] = json!(timeout.as_secs().max(1));
        }
        if let Some(key) = &args.key {
            body["key"] = json!(key);
        }
        let job = self
            .send(reqwest::Method::POST, "/v1/jobs", Some(body))
            .await?;
        let Some(id) = job["id"].as_u64() else {
            return Err(Failure::Unreachable(format!(
                "the answer names no job: {job}"
            )));
        };
        if !args.wait {
            if self.json {
                println!("{job}");
            } else {
                println!("{id}");
            }
            return Ok(());
        }
        tokio::select! {
            streamed = self.stream_output(id, true) => streamed?,
            _ = tokio::signal::ctrl_c() => {
                if args.cancel_on_interrupt {
                    self.send(reqwest::Method::DELETE, &format!("/v1/jobs/{id}"), None).await?;
                    return Err(Failure::Interrupted(format!("job {id} was cancelled")));
                }
                return Err(Failure::Interrupted(format!(
                    "job {id} is left running (`billet jobs cancel {id}` cancels it)"
                )));
            }
        }
        let ended = self.get(&format!("/v1/jobs/{id}")).await?;
        if self.json {
            println!("{ended}");
        }
        ended_status(&ended)
    }
}

/// What a waited job's end makes the client exit with.
fn ended_status(job: &Value) -> Result<(), Failure> {
    let id = &job["id"];
    let reason = job["reason"].as_str().unwrap_or("no reason given");
    match job["state"].as_str() {
        Some("finished") => match job["exit_code"].as_i64() {
            Some(0) => Ok(()),
            // Said by the status alone, as `docker run` does.
            Some(code) => Err(Failure::Job(
                u8::try_from(code).ok().filter(|c| *c != 0).unwrap_or(1),
                String::new(),
            )),
            None => Err(Failure::Job(
                1,
                format!("job {id} finished with no exit code"),
            )),
        },
        Some("failed") => Err(Failure::Job(1, format!("job {id} failed: {reason}"))),
        Some("cancelled") => Err(Failure::Job(1, format!("job {id} was cancelled"))),
        other => Err(Failure::Job(
            1,
            format!(
                "job {id}'s output ended while it was {}",
                other.unwrap_or("unknown")
            ),
        )),
    }
}

/// A transport error as the client says it.
fn unreachable(base: &str, error: &reqwest::Error) -> Failure {
    let mut why = error.to_string();
    let mut source = std::error::Error::source(error);
    while let Some(cause) = source {
        why.push_str(&format!(": {cause}"));
        source = cause.source();
    }
    Failure::Unreachable(format!("cannot reach the server at {base}: {why}"))
}

/// The response when it is 2xx; else the refusal, with the server's
/// `error` text.
async fn refused(response: reqwest::Response) -> Result<reqwest::Response, Failure> {
    let status = response.status();
    if status.is_success() {
        return Ok(response);
    }
    let text = response.text().await.unwrap_or_default();
    let error = serde_json::from_str::<Value>(&text)
        .ok()
        .and_then(|body| body["error"].as_str().map(str::to_owned))
        .unwrap_or(text);
    Err(Failure::Refused(status.as_u16(), error))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn k1_a_token_file_gives_its_first_token() {
        assert_eq!(
            first_token("# c\n\n  abc def\nxyz\n").as_deref(),
            Some("abc")
        );
        assert_eq!(first_token("tok submit,read\n").as_deref(), Some("tok"));
        assert_eq!(first_token("# only\n \n"), None);
    }

    #[test]
    fn k2_a_waited_job_ends_with_its_status() {
        let status = |job: Value| ended_status(&job).err().map(|f| f.status());
        assert_eq!(
            status(json!({"id": 1, "state": "finished", "exit_code": 0})),
            None
        );
        assert_eq!(
            status(json!({"id": 1, "state": "finished", "exit_code": 7})),
            Some(7)
        );
        assert_eq!(
            status(json!({"id": 1, "state": "finished", "exit_code": 300})),
            Some(1)
        );
        assert_eq!(
            status(json!({"id": 1, "state": "finished", "exit_code": -1})),
            Some(1)
        );
        assert_eq!(status(json!({"id": 1, "state": "finished"})), Some(1));
        assert_eq!(
            status(json!({"id": 1, "state": "failed", "reason": "timed out"})),
            Some(1)
        );
        assert_eq!(status(json!({"id": 1, "state": "cancelled"})), Some(1));
        assert_eq!(status(json!({"id": 1, "state": "running"})), Some(1));
        let said = ended_status(&json!({"id": 4, "state": "failed", "reason": "timed out"}))
            .unwrap_err()
            .to_string();
        assert_eq!(said, "job 4 failed: timed out");
    }

    #[test]
    fn k2_each_failure_has_its_status() {
        assert_eq!(Failure::Usage(String::new()).status(), 2);
        assert_eq!(Failure::Refused(403, String::new()).status(), 3);
        assert_eq!(Failure::Unreachable(String::new()).status(), 4);
        assert_eq!(Failure::Interrupted(String::new()).status(), 130);
        assert_eq!(
            Failure::Refused(403, "no".to_owned()).to_string(),
            "the server answered 403: no"
        );
    }
}
