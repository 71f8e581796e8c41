//! The HTTP client of the in-process service tests.

/// A client whose every request fails after 15 s: a request the service never
/// answers (a broken engine, a mutant of it) fails its test instead of
/// hanging it.
pub(crate) fn support_client() -> reqwest::Client {
    reqwest::Client::builder()
        .timeout(std::time::Duration::from_secs(15))
        .build()
        .expect("an HTTP client")
}
