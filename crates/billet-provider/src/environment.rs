//! [`Environment`]: the names and values a backend passes to an instance,
//! whose values are secrets (a GitHub runner's just-in-time configuration,
//! say) and are never printed.

use std::fmt;

/// The environment a [`Spec`](crate::Spec) asks a backend to give its
/// instance (P2): names and values, in the order they were set, each name at
/// most once.
///
/// Every value is treated as a secret. [`Debug`](fmt::Debug) prints the names
/// only (`{JITCONFIG: <redacted>}`), so a spec logged with `?spec` says which
/// variables it sets and never what they hold. A backend passes the values to
/// the instance and never logs them, never reports them in an
/// [`Instance`](crate::Instance) or an [`Error`](crate::Error), and forgets them when the
/// instance is destroyed.
///
/// An environment may hold anything; [`Environment::problem`] says whether a
/// backend can pass it, and every backend asks it at launch.
#[derive(Clone, Default, PartialEq, Eq, Hash)]
pub struct Environment {
    vars: Vec<(String, String)>,
}

impl Environment {
    /// An empty environment: the instance gets its image's own and nothing more.
    pub fn new() -> Self {
        Environment::default()
    }

    /// Sets `name` to `value`, replacing the value `name` had, if any (its
    /// place in the order is kept).
    pub fn set(&mut self, name: impl Into<String>, value: impl Into<String>) {
        let name = name.into();
        let value = value.into();
        match self.vars.iter_mut().find(|(held, _)| *held == name) {
            Some((_, held)) => *held = value,
            None => self.vars.push((name, value)),
        }
    }

    /// The value of `name` (compared exactly), if set.
    pub fn get(&self, name: &str) -> Option<&str> {
        self.vars
            .iter()
            .find(|(held, _)| held == name)
            .map(|(_, value)| value.as_str())
    }

    /// Every name and value, in the order they were first set.
    pub fn iter(&self) -> impl ExactSizeIterator<Item = (&str, &str)> {
        self.vars
            .iter()
            .map(|(name, value)| (name.as_str(), value.as_str()))
    }

    /// How many variables are set.
    pub fn len(&self) -> usize {
        self.vars.len()
    }

    /// Whether no variable is set.
    pub fn is_empty(&self) -> bool {
        self.vars.is_empty()
    }

    /// `None` when every backend can pass this environment as written: each
    /// name non-empty, without `=` or NUL, and each value without NUL.
    /// Otherwise what is wrong, naming the variable and never its value: the
    /// reason of the [`Error::InvalidSpec`](crate::Error::InvalidSpec) a
    /// backend's `launch` answers.
    pub fn problem(&self) -> Option<String> {
        self.vars.iter().find_map(|(name, value)| {
            if name.is_empty() {
                Some("an environment variable's name is empty".to_owned())
            } else if name.contains(['=', '\0']) {
                Some(format!(
                    "the environment variable name {name:?} holds '=' or NUL, which no process environment can"
                ))
            } else if value.contains('\0') {
                Some(format!(
                    "the value of the environment variable {name} holds NUL, which no process environment can"
                ))
            } else {
                None
            }
        })
    }
}

impl fmt::Debug for Environment {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        /// What a value prints as.
        struct Redacted;
        impl fmt::Debug for Redacted {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("<redacted>")
            }
        }
        f.debug_map()
            .entries(self.vars.iter().map(|(name, _)| (name, Redacted)))
            .finish()
    }
}

impl<N: Into<String>, V: Into<String>> FromIterator<(N, V)> for Environment {
    fn from_iter<I: IntoIterator<Item = (N, V)>>(iter: I) -> Self {
        let mut env = Environment::new();
        for (name, value) in iter {
            env.set(name, value);
        }
        env
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // P2: a value is never printed, the names are; set replaces in place.
    #[test]
    fn p2_debug_prints_names_and_never_values() {
        let mut env = Environment::new();
        env.set("ACTIONS_RUNNER_INPUT_JITCONFIG", "s3cr3t-value");
        env.set("LANG", "C");
        env.set("ACTIONS_RUNNER_INPUT_JITCONFIG", "other-secret");
        let printed = format!("{env:?}");
        assert_eq!(
            printed,
            r#"{"ACTIONS_RUNNER_INPUT_JITCONFIG": <redacted>, "LANG": <redacted>}"#
        );
        assert_eq!(
            env.get("ACTIONS_RUNNER_INPUT_JITCONFIG"),
            Some("other-secret")
        );
        assert_eq!(env.get("actions_runner_input_jitconfig"), None);
        assert_eq!(env.len(), 2);
        assert!(!env.is_empty());
        assert!(Environment::new().is_empty());
        let pairs: Vec<_> = env.iter().collect();
        assert_eq!(
            pairs,
            [
                ("ACTIONS_RUNNER_INPUT_JITCONFIG", "other-secret"),
                ("LANG", "C")
            ]
        );
    }

    // P2: what no process environment can hold is said, naming the variable
    // and never printing its value.
    #[test]
    fn p2_check_refuses_what_no_environment_can_hold() {
        assert_eq!(Environment::new().problem(), None);
        let ok: Environment = [("A", "x=y"), ("B", "")].into_iter().collect();
        assert_eq!(ok.problem(), None);
        for (name, value, says) in [
            ("", "v", "name is empty"),
            ("A=B", "v", "\"A=B\" holds '='"),
            ("A\0", "v", "holds '=' or NUL"),
            ("SECRET", "s3cr3t\0", "variable SECRET holds NUL"),
        ] {
            let env: Environment = [("FINE", "x"), (name, value)].into_iter().collect();
            let problem = env.problem().unwrap();
            assert!(problem.contains(says), "{problem}");
            assert!(!problem.contains("s3cr3t"), "{problem}");
        }
    }
}
