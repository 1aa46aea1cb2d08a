//! HTTP Basic authentication of API requests, `auth_strategy = http_basic`, as Ironic's
//! (`ironic/common/auth_basic.py`, `ironic/api/middleware/auth_public_routes.py`): every request
//! but those of Ironic's public routes (the version documents and the deploy ramdisk's agent,
//! which has no credentials) must carry `Authorization: Basic` with a user and password of an
//! Apache htpasswd file whose entries are bcrypt hashes. A refusal is Ironic's: 401 with
//! `WWW-Authenticate: Basic realm="Baremetal API"`, or 400 for a header that cannot be read,
//! in the middleware's own envelope (`error_body::auth_envelope`).
//!
//! The file is read once, at start (Ironic reads it at every request; here a change needs a
//! restart). With `noauth` this module is not in the request path at all.

use std::{
    collections::HashMap,
    path::Path,
    sync::{Arc, RwLock},
};

use axum::{
    extract::{Request, State},
    http::{HeaderValue, header},
    middleware::Next,
    response::{IntoResponse as _, Response},
};
use base64::Engine as _;
use sha2::{Digest as _, Sha256};
use tokio::sync::Semaphore;
use tracing::info;

use crate::error::Error;

/// The users of an htpasswd file and what has been verified of them.
pub struct BasicAuth {
    /// User name → bcrypt hash, the first entry of each name (as Ironic reads the file).
    users: HashMap<String, String>,
    /// User name → the salted digest of the password last verified against the user's hash.
    ///
    /// bcrypt is slow on purpose (tens to hundreds of milliseconds of CPU at the usual costs),
    /// and a client sends its credentials with every request: checking each one would cut the
    /// API's throughput to a few requests per second per core. So a success is remembered, as
    /// Ironic's `lru_cache` over `bcrypt.checkpw` does, and the same password again costs one
    /// SHA-256. The password itself is not kept: only SHA-256 over a random per-process salt
    /// and it. One entry per user of the file, so the map cannot grow beyond it; a failure is
    /// never remembered (so a wrong password always costs a bcrypt check, bounded by
    /// `bcrypt_slots`).
    verified: RwLock<HashMap<String, [u8; 32]>>,
    salt: [u8; 16],
    /// bcrypt checks running at once: a stream of wrong passwords takes at most these cores.
    bcrypt_slots: Semaphore,
}

/// What Ironic's middleware answers to a request without credentials, and to wrong ones.
const AUTHORIZATION_REQUIRED: &str = "Authorization required";
const INCORRECT: &str = "Incorrect username or password";

impl BasicAuth {
    /// Reads and checks an htpasswd file; its error names the file and the fault.
    pub fn from_file(path: &Path) -> anyhow::Result<BasicAuth> {
        let text = std::fs::read_to_string(path).map_err(|e| {
            anyhow::anyhow!(
                "cannot read the http_basic user file {} (api.http_basic_auth_user_file): {e}",
                path.display()
            )
        })?;
        BasicAuth::parse(&text).map_err(|e| {
            anyhow::anyhow!(
                "bad http_basic user file {} (api.http_basic_auth_user_file): {e}",
                path.display()
            )
        })
    }

    /// Parses htpasswd text: one `user:hash` a line, blank lines ignored. Every hash must be
    /// bcrypt (`$2y$`, `$2a$`, `$2b$`, as Ironic accepts), and well formed.
    pub fn parse(text: &str) -> Result<BasicAuth, String> {
        let mut users = HashMap::new();
        for (i, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() {
                continue;
            }
            let n = i + 1;
            let Some((user, hash)) = line.split_once(':') else {
                return Err(format!("line {n} is not user:hash"));
            };
            if user.is_empty() {
                return Err(format!("line {n} has no user name"));
            }
            if !["$2y$", "$2a$", "$2b$"].iter().any(|p| hash.starts_with(p)) {
                // Ironic's words (ConfigInvalid), with the line.
                return Err(format!(
                    "Only bcrypt digested passwords are supported for {user} (line {n})"
                ));
            }
            if hash.parse::<bcrypt::HashParts>().is_err() {
                return Err(format!("the bcrypt hash of {user} is malformed (line {n})"));
            }
            users
                .entry(user.to_owned())
                .or_insert_with(|| hash.to_owned());
        }
        Ok(BasicAuth {
            users,
            verified: RwLock::new(HashMap::new()),
            salt: rand::random(),
            bcrypt_slots: Semaphore::new(
                std::thread::available_parallelism().map_or(1, |n| n.get().div_ceil(2)),
            ),
        })
    }

    /// How many users the file has.
    pub fn user_count(&self) -> usize {
        self.users.len()
    }

    /// Checks a request's `Authorization` header; Ok is the user's name.
    pub async fn check(&self, header: Option<&HeaderValue>) -> Result<String, Error> {
        let Some(header) = header else {
            info!("No authorization token received");
            return Err(Error::Unauthorized(AUTHORIZATION_REQUIRED.to_owned()));
        };
        let (user, password) = parse_header(header)?;
        let Some(hash) = self.users.get(&user) else {
            info!(user = %user, "User {user} not found");
            return Err(Error::Unauthorized(INCORRECT.to_owned()));
        };
        let digest = self.digest(&password);
        if self.remembered(&user, &digest) {
            return Ok(user);
        }
        let ok = {
            let _slot = self
                .bcrypt_slots
                .acquire()
                .await
                .map_err(|_| Error::internal("the bcrypt semaphore is closed"))?;
            let hash = hash.clone();
            tokio::task::spawn_blocking(move || bcrypt::verify(password, &hash).unwrap_or(false))
                .await
                .map_err(Error::internal)?
        };
        if !ok {
            info!(user = %user, "Password for {user} does not match");
            return Err(Error::Unauthorized(INCORRECT.to_owned()));
        }
        if let Ok(mut verified) = self.verified.write() {
            verified.insert(user.clone(), digest);
        }
        Ok(user)
    }

    fn digest(&self, password: &[u8]) -> [u8; 32] {
        let mut sha = Sha256::new();
        sha.update(self.salt);
        sha.update(password);
        sha.finalize().into()
    }

    fn remembered(&self, user: &str, digest: &[u8; 32]) -> bool {
        let Ok(verified) = self.verified.read() else {
            return false;
        };
        // Compared without an early exit, so the time taken tells nothing of the digest.
        verified
            .get(user)
            .is_some_and(|known| known.iter().zip(digest).fold(0, |d, (a, b)| d | (a ^ b)) == 0)
    }
}

/// `Basic <base64 of user:password>` → (user, password), with Ironic's 401 and 400 answers.
fn parse_header(header: &HeaderValue) -> Result<(String, Vec<u8>), Error> {
    let unreadable = |what: &str| {
        info!("{what}");
        Error::BadAuthorization(what.to_owned())
    };
    let text = header
        .to_str()
        .map_err(|_| unreadable("Could not parse Authorization header"))?;
    let Some((kind, token)) = text.trim().split_once(char::is_whitespace) else {
        return Err(unreadable("Could not parse Authorization header"));
    };
    if !kind.eq_ignore_ascii_case("basic") {
        return Err(unreadable(&format!(
            "Unsupported authorization type \"{kind}\""
        )));
    }
    let decoded = base64::engine::general_purpose::STANDARD
        .decode(token.trim())
        .map_err(|_| unreadable("Could not decode authorization token"))?;
    let colon = decoded
        .iter()
        .position(|b| *b == b':')
        .ok_or_else(|| unreadable("Could not decode authorization token"))?;
    let user = String::from_utf8(decoded[..colon].to_vec())
        .map_err(|_| unreadable("Could not decode authorization token"))?;
    Ok((user, decoded[colon + 1..].to_vec()))
}

/// Ironic's public routes (`acl_public_routes` of `ironic/api/config.py`), open whatever the
/// strategy: the version documents, and what the deploy ramdisk's agent calls (lookup,
/// heartbeat, continue_inspection; the agent authenticates with its node's agent token
/// instead). As Ironic matches them: the whole path, without trailing slashes, optionally
/// ending in `.json` or `.xml`; a heartbeat's node in lower-case letters, digits and `-`.
/// Beside them, the operations endpoints outside Ironic's API: `/healthcheck` (Ironic's
/// healthcheck middleware answers before its authentication) and `/metrics` (so that a
/// Prometheus scraper needs no credentials; it shows counts by route template and pool
/// figures, no node data).
pub fn is_public(path: &str) -> bool {
    let trimmed = path.trim_end_matches('/');
    let path = if trimmed.is_empty() { "/" } else { trimmed };
    let path = path
        .strip_suffix(".json")
        .or_else(|| path.strip_suffix(".xml"))
        .unwrap_or(path);
    match path {
        "/" | "/v1" | "/v1/lookup" | "/v1/continue_inspection" | "/healthcheck" | "/metrics" => {
            true
        }
        _ => path.strip_prefix("/v1/heartbeat/").is_some_and(|node| {
            !node.is_empty()
                && node
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        }),
    }
}

/// Whether `request` is to a public route ([`is_public`]), judged by the path the client sent,
/// before `/v1` was put in front of it (Ironic checks it before routing).
pub fn is_public_request(request: &Request) -> bool {
    let sent = request
        .extensions()
        .get::<axum::extract::OriginalUri>()
        .map_or_else(|| request.uri().path(), |original| original.0.path());
    is_public(sent)
}

/// Middleware: a request to a route that is not public goes on only with valid credentials.
/// The path judged is the one the client sent, before `/v1` was put in front of it (Ironic
/// checks it before routing).
pub async fn require(State(auth): State<Arc<BasicAuth>>, request: Request, next: Next) -> Response {
    if is_public_request(&request) {
        return next.run(request).await;
    }
    match auth
        .check(request.headers().get(header::AUTHORIZATION))
        .await
    {
        Ok(_user) => next.run(request).await,
        Err(e) => e.into_response(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `htpasswd -nbB admin secret` (cost 5, to keep the test fast).
    fn file() -> String {
        let hash = bcrypt::hash("secret", 5).unwrap();
        format!(
            "admin:{hash}\n\nadmin:{}\n",
            bcrypt::hash("other", 5).unwrap()
        )
    }

    fn basic(user_password: &str) -> HeaderValue {
        let token = base64::engine::general_purpose::STANDARD.encode(user_password);
        HeaderValue::from_str(&format!("Basic {token}")).unwrap()
    }

    #[tokio::test]
    async fn checks_credentials_as_ironic() {
        let auth = BasicAuth::parse(&file()).unwrap();
        assert_eq!(auth.user_count(), 1);
        assert_eq!(
            auth.check(Some(&basic("admin:secret"))).await.unwrap(),
            "admin"
        );
        // Remembered: the same password again, and still refused with another.
        assert_eq!(
            auth.check(Some(&basic("admin:secret"))).await.unwrap(),
            "admin"
        );
        // The first entry of a user counts.
        for wrong in ["admin:other", "admin:", "nobody:secret"] {
            assert_eq!(
                auth.check(Some(&basic(wrong))).await,
                Err(Error::Unauthorized(INCORRECT.to_owned())),
                "{wrong}"
            );
        }
        assert_eq!(
            auth.check(None).await,
            Err(Error::Unauthorized(AUTHORIZATION_REQUIRED.to_owned()))
        );
        for (header, message) in [
            ("Basic !!!", "Could not decode authorization token"),
            ("Basic", "Could not parse Authorization header"),
            ("Bearer abc", "Unsupported authorization type \"Bearer\""),
        ] {
            assert_eq!(
                auth.check(Some(&HeaderValue::from_static(header))).await,
                Err(Error::BadAuthorization(message.to_owned())),
                "{header}"
            );
        }
        // A token without a colon.
        assert_eq!(
            auth.check(Some(&basic("admin"))).await,
            Err(Error::BadAuthorization(
                "Could not decode authorization token".to_owned()
            ))
        );
    }

    #[test]
    fn a_bad_file_is_refused() {
        for (text, needle) in [
            ("admin:{SHA}abc\n", "Only bcrypt digested passwords"),
            ("admin:$apr1$abc\n", "Only bcrypt digested passwords"),
            ("admin\n", "line 1 is not user:hash"),
            (":$2y$05$abc\n", "no user name"),
            ("admin:$2y$05$short\n", "malformed"),
        ] {
            let err = BasicAuth::parse(text).err().expect(text);
            assert!(err.contains(needle), "{text}: {err}");
        }
        let err = BasicAuth::from_file(Path::new("/nonexistent/htpasswd"))
            .err()
            .unwrap()
            .to_string();
        assert!(err.contains("cannot read the http_basic user file /nonexistent/htpasswd"));
    }

    #[test]
    fn public_routes_are_ironics() {
        for path in [
            "/",
            "/v1",
            "/v1/",
            "/v1.json",
            "/v1/lookup",
            "/v1/continue_inspection",
            "/v1/heartbeat/1be26c0b-03f2-4d2e-ae87-c02d7f33c123",
            "/v1/heartbeat/node-1",
            "/healthcheck",
            "/metrics",
        ] {
            assert!(is_public(path), "{path}");
        }
        for path in [
            "/v1/nodes",
            "/v1/lookupx",
            "/v1/heartbeat/",
            "/v1/heartbeat/Node-1",
            "/v1/heartbeat/a/b",
            "/v1/drivers",
            "/v2",
            "/v1/metrics",
            "/metrics/x",
        ] {
            assert!(!is_public(path), "{path}");
        }
    }
}
