//! PasswordAuthenticator: SASL PLAIN (`\0user\0password`) against the users in the config.

use crate::config::Auth;

/// Checks a SASL PLAIN token; returns the user name or Cassandra's error message.
pub fn check_plain(auth: &Auth, token: Option<&[u8]>) -> Result<String, String> {
    let token = token.unwrap_or_default();
    let mut parts = token.split(|&b| b == 0);
    // authzid (ignored), authcid, password
    let (Some(_), Some(user), Some(pass), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err("Authentication failed: the SASL PLAIN token is malformed".into());
    };
    let user = String::from_utf8_lossy(user).into_owned();
    match auth.users.get(&user) {
        Some(expected) if constant_time_eq(expected.as_bytes(), pass) => Ok(user),
        _ => Err(format!(
            "Provided username {user} and/or password are incorrect"
        )),
    }
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_tokens() {
        let mut auth = Auth::default();
        auth.users.insert("cassandra".into(), "secret".into());
        assert_eq!(
            check_plain(&auth, Some(b"\0cassandra\0secret")).unwrap(),
            "cassandra"
        );
        assert!(check_plain(&auth, Some(b"\0cassandra\0wrong"))
            .unwrap_err()
            .contains("incorrect"));
        assert!(check_plain(&auth, Some(b"\0nobody\0secret")).is_err());
        assert!(check_plain(&auth, Some(b"garbage")).is_err());
        assert!(check_plain(&auth, None).is_err());
    }
}
