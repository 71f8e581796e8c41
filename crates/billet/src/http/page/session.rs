//! The status page's sign-in sessions (K6): a random id in an `HttpOnly`,
//! `SameSite=Strict` cookie names a session the service keeps in memory, so
//! the token itself is sent once, in the sign-in form's body, and never sits
//! in a URL, a cookie or the browser's history.
//!
//! At most [`MAX_SESSIONS`] are kept; each lasts [`LIFETIME`] from sign-in.
//! A restart forgets them all (every viewer signs in again): nothing of a
//! session is written anywhere.

use std::collections::HashMap;
use std::time::{Duration, SystemTime};

use parking_lot::Mutex;
use rand::RngCore;

use crate::token::Caller;

/// The cookie's name.
pub const COOKIE: &str = "billet_session";

/// The most sessions kept at once: one more signs the oldest out.
pub const MAX_SESSIONS: usize = 1024;

/// How long a session lasts from sign-in.
pub const LIFETIME: Duration = Duration::from_secs(12 * 60 * 60);

/// The bytes of a session id (hex in the cookie): 256 random bits from
/// rand's thread generator, a cryptographically secure one seeded from the
/// operating system.
const ID_BYTES: usize = 32;

#[derive(Debug, Clone)]
struct Session {
    caller: Caller,
    started: SystemTime,
}

/// The sessions signed in; shared by every connection.
#[derive(Debug, Default)]
pub struct Sessions {
    table: Mutex<HashMap<String, Session>>,
}

impl Sessions {
    /// A new session for `caller` at `now`, and its id (the cookie's value).
    /// Expired sessions go first; when [`MAX_SESSIONS`] remain, the oldest.
    pub fn start(&self, caller: Caller, now: SystemTime) -> String {
        let mut bytes = [0u8; ID_BYTES];
        rand::rng().fill_bytes(&mut bytes);
        let id: String = bytes.iter().map(|byte| format!("{byte:02x}")).collect();
        let mut table = self.table.lock();
        table.retain(|_, session| live(session, now));
        if table.len() >= MAX_SESSIONS {
            let oldest = table
                .iter()
                .min_by_key(|(_, session)| session.started)
                .map(|(id, _)| id.clone());
            if let Some(oldest) = oldest {
                table.remove(&oldest);
            }
        }
        table.insert(
            id.clone(),
            Session {
                caller,
                started: now,
            },
        );
        id
    }

    /// The caller session `id` was started for, while it lasts.
    pub fn caller(&self, id: &str, now: SystemTime) -> Option<Caller> {
        let mut table = self.table.lock();
        match table.get(id) {
            Some(session) if live(session, now) => Some(session.caller),
            Some(_) => {
                table.remove(id);
                None
            }
            None => None,
        }
    }

    /// Ends session `id`, if there is one.
    pub fn end(&self, id: &str) {
        self.table.lock().remove(id);
    }

    /// How many sessions are kept.
    pub fn len(&self) -> usize {
        self.table.lock().len()
    }

    /// Whether no session is kept.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Whether `session` still lasts at `now` (a clock stepped back keeps it).
fn live(session: &Session, now: SystemTime) -> bool {
    now.duration_since(session.started)
        .map_or(true, |age| age < LIFETIME)
}

/// The session id a `Cookie` header's value carries, if any.
pub fn from_cookie(header: &str) -> Option<&str> {
    header.split(';').find_map(|pair| {
        let (name, value) = pair.trim().split_once('=')?;
        (name == COOKIE && value.len() == ID_BYTES * 2).then_some(value)
    })
}

/// The `Set-Cookie` value that keeps session `id`: `HttpOnly` (no script
/// reads it), `SameSite=Strict` (no other site's page sends it), on every
/// path, for [`LIFETIME`]; `Secure` when the page was reached over HTTPS.
pub fn set_cookie(id: &str, secure: bool) -> String {
    format!(
        "{COOKIE}={id}; Path=/; HttpOnly; SameSite=Strict; Max-Age={}{}",
        LIFETIME.as_secs(),
        if secure { "; Secure" } else { "" }
    )
}

/// The `Set-Cookie` value that removes the session cookie.
pub fn clear_cookie() -> String {
    format!("{COOKIE}=; Path=/; HttpOnly; SameSite=Strict; Max-Age=0")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::token::{Credentials, Grant};
    use std::path::Path;
    use std::time::UNIX_EPOCH;

    fn reader() -> Caller {
        Credentials::parse(
            "read-only-token-0123456789abcdef read\n",
            Path::new("token"),
        )
        .unwrap()
        .caller("read-only-token-0123456789abcdef")
        .unwrap()
    }

    fn at(secs: u64) -> SystemTime {
        UNIX_EPOCH + Duration::from_secs(secs)
    }

    // K6: a session names its caller until LIFETIME has passed or it is
    // ended; ids are long, random and distinct.
    #[test]
    fn k6_a_session_lasts_its_lifetime_or_until_ended() {
        let sessions = Sessions::default();
        let one = sessions.start(reader(), at(1_000));
        let two = sessions.start(reader(), at(1_000));
        assert_ne!(one, two);
        assert_eq!(sessions.len(), 2);
        assert!(!sessions.is_empty());
        assert_eq!(one.len(), ID_BYTES * 2);
        assert!(one.bytes().all(|b| b.is_ascii_hexdigit()));
        let caller = sessions.caller(&one, at(1_001)).unwrap();
        assert!(caller.grants.has(Grant::Read));
        assert!(!caller.grants.has(Grant::Submit));
        let last = 1_000 + LIFETIME.as_secs() - 1;
        assert!(sessions.caller(&one, at(last)).is_some());
        assert!(sessions.caller(&one, at(last + 1)).is_none());
        assert_eq!(
            sessions.len(),
            1,
            "an expired session is forgotten when asked"
        );
        sessions.end(&two);
        assert!(sessions.caller(&two, at(1_001)).is_none());
        assert!(sessions.is_empty());
        assert!(sessions.caller("not-a-session", at(1_001)).is_none());
    }

    // K6: the table is bounded: past MAX_SESSIONS the oldest goes, and
    // expired ones go before any live one.
    #[test]
    fn k6_at_most_max_sessions_are_kept() {
        let sessions = Sessions::default();
        let first = sessions.start(reader(), at(10));
        let ids: Vec<String> = (0..MAX_SESSIONS as u64)
            .map(|n| sessions.start(reader(), at(20 + n)))
            .collect();
        assert_eq!(sessions.len(), MAX_SESSIONS);
        assert!(
            sessions.caller(&first, at(5_000)).is_none(),
            "the oldest went"
        );
        assert!(sessions.caller(&ids[0], at(5_000)).is_some());
        assert!(sessions.caller(&ids[MAX_SESSIONS - 1], at(5_000)).is_some());
        // Long after, one sign-in clears every expired session.
        let late = at(20 + MAX_SESSIONS as u64 + LIFETIME.as_secs());
        let fresh = sessions.start(reader(), late);
        assert_eq!(sessions.len(), 1);
        assert!(sessions.caller(&fresh, late).is_some());
    }

    // K6: the cookie is read by its name and an id's length alone, and set
    // HttpOnly and SameSite=Strict, Secure over HTTPS.
    #[test]
    fn k6_the_cookie_is_strict_and_read_by_name() {
        let id = "ab".repeat(ID_BYTES);
        assert_eq!(from_cookie(&format!("{COOKIE}={id}")), Some(id.as_str()));
        assert_eq!(
            from_cookie(&format!("theme=dark; {COOKIE}={id}; x=y")),
            Some(id.as_str())
        );
        assert_eq!(from_cookie(&format!("{COOKIE}=short")), None);
        assert_eq!(from_cookie(&format!("other_{COOKIE}={id}")), None);
        assert_eq!(from_cookie(""), None);
        let set = set_cookie(&id, false);
        assert_eq!(
            set,
            format!("{COOKIE}={id}; Path=/; HttpOnly; SameSite=Strict; Max-Age=43200")
        );
        assert!(set_cookie(&id, true).ends_with("; Secure"));
        assert!(clear_cookie().contains("Max-Age=0"));
    }
}
