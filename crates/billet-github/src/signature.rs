//! The webhook signature (G2): `X-Hub-Signature-256`, the HMAC-SHA256 of a
//! delivery's raw body under the webhook's secret, as `sha256=` and 64 hex
//! digits.

use hmac::{Hmac, Mac};
use sha2::Sha256;

/// The header GitHub signs a delivery in.
pub const SIGNATURE_HEADER: &str = "X-Hub-Signature-256";

/// Why a delivery's signature was not accepted. Each answers `401` and
/// records nothing (G2); the variants say which, for the log and the
/// `billet_github_deliveries_total{result}` count.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SignatureError {
    /// The delivery carries no `X-Hub-Signature-256` header.
    #[error("the delivery carries no {SIGNATURE_HEADER} header")]
    Missing,
    /// The header is not `sha256=` followed by 64 hex digits.
    #[error("the {SIGNATURE_HEADER} header is not sha256= and 64 hex digits")]
    Malformed,
    /// The header is well formed but is not the body's HMAC under this
    /// secret: another secret signed it, or the body was changed.
    #[error("the {SIGNATURE_HEADER} header does not match the body under the webhook secret")]
    Mismatch,
}

impl SignatureError {
    /// A short lower-case name: `missing`, `malformed`, `mismatch`.
    pub const fn as_str(self) -> &'static str {
        match self {
            SignatureError::Missing => "missing",
            SignatureError::Malformed => "malformed",
            SignatureError::Mismatch => "mismatch",
        }
    }
}

/// The HMAC-SHA256 of `body` under `secret`.
fn mac(secret: &[u8], body: &[u8]) -> Hmac<Sha256> {
    // HMAC takes a key of any length; `new_from_slice` cannot fail for it.
    let mut mac = <Hmac<Sha256> as Mac>::new_from_slice(secret)
        .unwrap_or_else(|_| unreachable!("HMAC accepts keys of every length"));
    mac.update(body);
    mac
}

/// The `X-Hub-Signature-256` value GitHub sends with `body` when the webhook's
/// secret is `secret`: `sha256=` and the HMAC's 64 lower-case hex digits.
pub fn sign(secret: &[u8], body: &[u8]) -> String {
    format!(
        "sha256={}",
        hex::encode(mac(secret, body).finalize().into_bytes())
    )
}

/// Whether `header` (the `X-Hub-Signature-256` value, if the delivery has one)
/// is `body`'s signature under `secret`.
///
/// The comparison takes the same time wherever the digests differ (the
/// `hmac` crate's `verify_slice`). Hex digits of either case are read; the
/// `sha256=` prefix must be exact.
pub fn verify_signature(
    secret: &[u8],
    body: &[u8],
    header: Option<&str>,
) -> Result<(), SignatureError> {
    let header = header.ok_or(SignatureError::Missing)?;
    let digits = header
        .strip_prefix("sha256=")
        .ok_or(SignatureError::Malformed)?;
    let mut tag = [0_u8; 32];
    hex::decode_to_slice(digits, &mut tag).map_err(|_| SignatureError::Malformed)?;
    mac(secret, body)
        .verify_slice(&tag)
        .map_err(|_| SignatureError::Mismatch)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// GitHub's documented test vector ("Validating webhook deliveries").
    const SECRET: &[u8] = b"It's a Secret to Everybody";
    const PAYLOAD: &[u8] = b"Hello, World!";
    const SIGNATURE: &str =
        "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17";

    // G2, G9: GitHub's documented HMAC test vector, both ways.
    #[test]
    fn g9_githubs_test_vector_is_signed_and_verified() {
        assert_eq!(sign(SECRET, PAYLOAD), SIGNATURE);
        assert_eq!(verify_signature(SECRET, PAYLOAD, Some(SIGNATURE)), Ok(()));
        let upper = format!("sha256={}", SIGNATURE["sha256=".len()..].to_uppercase());
        assert_eq!(verify_signature(SECRET, PAYLOAD, Some(&upper)), Ok(()));
    }

    // G2: missing, malformed and wrong signatures are each told apart.
    #[test]
    fn g2_missing_malformed_and_wrong_signatures_are_refused() {
        assert_eq!(
            verify_signature(SECRET, PAYLOAD, None),
            Err(SignatureError::Missing)
        );
        let short = &SIGNATURE[..SIGNATURE.len() - 2];
        let long = format!("{SIGNATURE}00");
        let sha1 = SIGNATURE.replace("sha256=", "sha1=");
        let not_hex = SIGNATURE.replace('7', "g");
        for malformed in ["", "sha256=", short, &long, &sha1, &not_hex, " sha256=00"] {
            assert_eq!(
                verify_signature(SECRET, PAYLOAD, Some(malformed)),
                Err(SignatureError::Malformed),
                "{malformed:?}"
            );
        }
        assert_eq!(
            verify_signature(b"another secret", PAYLOAD, Some(SIGNATURE)),
            Err(SignatureError::Mismatch)
        );
        assert_eq!(
            verify_signature(SECRET, b"Hello, World?", Some(SIGNATURE)),
            Err(SignatureError::Mismatch)
        );
        let last_digit_changed = format!("{}f", &SIGNATURE[..SIGNATURE.len() - 1]);
        assert_eq!(
            verify_signature(SECRET, PAYLOAD, Some(&last_digit_changed)),
            Err(SignatureError::Mismatch)
        );
        let names: Vec<_> = [
            SignatureError::Missing,
            SignatureError::Malformed,
            SignatureError::Mismatch,
        ]
        .iter()
        .map(|e| e.as_str())
        .collect();
        assert_eq!(names, ["missing", "malformed", "mismatch"]);
    }
}
