//! Checks a `billet.yaml`: prints `ok: ` and a one-line summary and exits 0,
//! or prints the error and exits 1.
//!
//! ```sh
//! cargo run -p billet-config --example validate -- path/to/billet.yaml
//! ```

use std::process::ExitCode;

fn main() -> ExitCode {
    let mut args = std::env::args_os().skip(1);
    let (Some(path), None) = (args.next(), args.next()) else {
        eprintln!("usage: validate path/to/billet.yaml");
        return ExitCode::from(2);
    };
    match billet_config::validate(&path) {
        Ok(line) => {
            println!("{line}");
            ExitCode::SUCCESS
        }
        Err(error) => {
            eprintln!("error: {error}");
            ExitCode::FAILURE
        }
    }
}
