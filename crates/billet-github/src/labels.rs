//! Which pool a job's labels fit (G3).

/// Whether a job whose `runs-on` labels are `job` may be taken by a pool that
/// offers `pool`: every job label is among the pool's, compared without
/// regard to ASCII case (as GitHub compares them). A job with no label fits
/// nothing: GitHub never queues one for a self-hosted runner, and taking it
/// would give a runner to whatever asked for none.
pub fn fits<J, P>(job: &[J], pool: &[P]) -> bool
where
    J: AsRef<str>,
    P: AsRef<str>,
{
    !job.is_empty()
        && job.iter().all(|wanted| {
            pool.iter()
                .any(|offered| offered.as_ref().eq_ignore_ascii_case(wanted.as_ref()))
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    // G3: a case-insensitive subset; an empty job fits nothing.
    #[test]
    fn g3_labels_fit_as_a_case_insensitive_subset() {
        let pool = ["self-hosted", "Linux", "x64"];
        assert!(fits(&["self-hosted", "linux"], &pool));
        assert!(fits(&["SELF-HOSTED"], &pool));
        assert!(fits(&["x64", "linux", "self-hosted"], &pool));
        assert!(!fits(&["self-hosted", "gpu"], &pool));
        assert!(!fits(&["ubuntu-latest"], &pool));
        assert!(!fits(&["linux "], &pool));
        assert!(!fits::<&str, &str>(&[], &pool));
        assert!(!fits(&["linux"], &[] as &[&str]));
    }

    proptest! {
        // G3: adding a label to the pool never unfits a job; adding one the
        // pool lacks to the job always does.
        #[test]
        fn g3_fit_is_monotone(
            job in proptest::collection::vec("[a-zA-Z]{1,4}", 1..4),
            extra in "[a-z]{1,4}",
        ) {
            let pool: Vec<String> = job.iter().map(|l| l.to_uppercase()).collect();
            prop_assert!(fits(&job, &pool));
            let mut wider = pool.clone();
            wider.push(extra.clone());
            prop_assert!(fits(&job, &wider));
            let mut more = job;
            more.push(format!("{extra}-missing"));
            prop_assert!(!fits(&more, &pool));
        }
    }
}
