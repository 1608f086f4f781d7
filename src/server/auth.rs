//! PasswordAuthenticator: SASL PLAIN (`\0user\0password`) against the users in the config.
//!
//! The check takes the same time whoever the user is and however long the passwords are: the
//! configured passwords are kept as SHA-256 digests, the offered password is digested the same
//! way, and the two 32-byte digests are compared in constant time. An unknown user is compared
//! against a decoy digest, so it takes the same path as a wrong password.

use crate::config::Auth;
use ring::digest::{digest, SHA256};
use std::collections::HashMap;

type Digest = [u8; 32];

/// The configured users, ready for constant-time checks.
pub struct Authenticator {
    digests: HashMap<String, Digest>,
    decoy: Digest,
}

fn sha256(bytes: &[u8]) -> Digest {
    let mut out = [0u8; 32];
    out.copy_from_slice(digest(&SHA256, bytes).as_ref());
    out
}

impl Authenticator {
    pub fn new(auth: &Auth) -> Self {
        Authenticator {
            digests: auth
                .users
                .iter()
                .map(|(u, p)| (u.clone(), sha256(p.as_bytes())))
                .collect(),
            decoy: sha256(&rand::random::<[u8; 32]>()),
        }
    }

    /// Checks a SASL PLAIN token; returns the user name or Cassandra's error message.
    pub fn check_plain(&self, token: Option<&[u8]>) -> Result<String, String> {
        let token = token.unwrap_or_default();
        let mut parts = token.split(|&b| b == 0);
        // authzid (ignored), authcid, password
        let (Some(_), Some(user), Some(pass), None) =
            (parts.next(), parts.next(), parts.next(), parts.next())
        else {
            return Err("Authentication failed: the SASL PLAIN token is malformed".into());
        };
        let user = String::from_utf8_lossy(user).into_owned();
        let (expected, known) = match self.digests.get(&user) {
            Some(d) => (d, true),
            None => (&self.decoy, false),
        };
        if digests_equal(expected, &sha256(pass)) && known {
            Ok(user)
        } else {
            Err(format!(
                "Provided username {} and/or password are incorrect",
                crate::protocol::response::quote_capped(&user)
            ))
        }
    }
}

/// Compares every byte whatever the first difference (no early exit).
fn digests_equal(a: &Digest, b: &Digest) -> bool {
    let diff = a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y));
    std::hint::black_box(diff) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_tokens() {
        let mut auth = Auth::default();
        auth.users.insert("cassandra".into(), "secret".into());
        let a = Authenticator::new(&auth);
        assert_eq!(
            a.check_plain(Some(b"\0cassandra\0secret")).unwrap(),
            "cassandra"
        );
        assert!(a
            .check_plain(Some(b"\0cassandra\0wrong"))
            .unwrap_err()
            .contains("incorrect"));
        assert!(a.check_plain(Some(b"\0cassandra\0secret2")).is_err());
        assert!(a.check_plain(Some(b"\0cassandra\0")).is_err());
        assert!(a.check_plain(Some(b"\0nobody\0secret")).is_err());
        assert!(a.check_plain(Some(b"garbage")).is_err());
        assert!(a.check_plain(None).is_err());
    }

    #[test]
    fn a_huge_user_name_is_not_echoed_whole() {
        let a = Authenticator::new(&Auth::default());
        let mut token = b"\0".to_vec();
        token.extend(std::iter::repeat_n(b'x', 1 << 20));
        token.extend(b"\0pw");
        let err = a.check_plain(Some(&token)).unwrap_err();
        assert!(err.len() < 400, "{}", err.len());
    }
}
