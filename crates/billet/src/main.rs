//! `billet`: see the library's documentation.
fn main() -> std::process::ExitCode {
    billet::cli::main()
}
