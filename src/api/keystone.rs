//! Keystone authentication of API requests, `auth_strategy = keystone`, as keystonemiddleware's
//! `auth_token` does it for Ironic: every request but Ironic's public routes
//! ([`super::auth::is_public`]) carries a Keystone token in `X-Auth-Token`, which Ferrum
//! validates with Keystone's v3 API (`GET /v3/auth/tokens`, the token in `X-Subject-Token`,
//! Ferrum's own service token in `X-Auth-Token`), and remembers for `token_cache_time` (so that a
//! revoked token stops working within it, and one validated before works on while Keystone is
//! away). A service token (`X-Service-Token`, as Nova sends one beside its user's) with a service
//! role lets an expired user token through, as keystonemiddleware's `allow_expired`.
//!
//! Refusals are keystonemiddleware's: 401 with `WWW-Authenticate: Keystone uri="..."` for no
//! token or an invalid one, 503 when Keystone cannot be asked.
//!
//! What a token may do ([`authorize`]) is, for now, the system-scoped part of Ironic's default
//! policy at its coarsest: a system reader reads, a system admin does everything; project-scoped
//! tokens and the member role are refused (403) until the rule table with owner and lessee lands.

use std::{
    collections::{HashMap, VecDeque},
    sync::{Arc, Mutex, PoisonError},
    time::{Duration, Instant},
};

use axum::{
    extract::{Request, State},
    http::{HeaderMap, HeaderValue, Method, StatusCode, header},
    middleware::Next,
    response::{IntoResponse as _, Response},
};
use serde::Deserialize;
use sha2::{Digest as _, Sha256};
use tracing::{info, warn};

use crate::{config::KeystoneConfig, error::Error};

/// keystonemiddleware's words for a request without a valid token.
const AUTHENTICATION_REQUIRED: &str = "The request you have made requires authentication.";
/// And for a Keystone that cannot be asked.
const KEYSTONE_UNAVAILABLE: &str = "The Keystone service is temporarily unavailable.";
/// Ferrum's own token is renewed this long before it expires.
const RENEW_BEFORE: Duration = Duration::from_secs(60);

/// Who sent a request, as its validated token says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Credentials {
    pub user_id: String,
    /// The project the token is scoped to, if it is.
    pub project_id: Option<String>,
    /// Whether the token is scoped to the whole system (`system_scope:all`).
    pub system_all: bool,
    /// Role names, lower-cased; Keystone lists the implied ones too (admin → member → reader).
    pub roles: Vec<String>,
}

impl Credentials {
    pub fn has_role(&self, role: &str) -> bool {
        self.roles.iter().any(|r| r == role)
    }
}

/// Why a request was not let through.
#[derive(Debug, PartialEq, Eq)]
enum Refusal {
    /// No token, or one Keystone does not know (401).
    Unauthorized,
    /// Keystone could not be asked (503).
    Unavailable,
}

/// A validated token, remembered.
struct Cached {
    credentials: Arc<Credentials>,
    until: Instant,
}

/// Validated tokens by the SHA-256 of the token (a token itself is never kept), oldest first.
#[derive(Default)]
struct Cache {
    tokens: HashMap<[u8; 32], Cached>,
    order: VecDeque<[u8; 32]>,
}

/// Ferrum's own token, for its calls to Keystone.
struct ServiceToken {
    token: String,
    renew_at: Instant,
}

/// The Keystone a process validates tokens with.
pub struct Keystone {
    config: KeystoneConfig,
    /// Keystone's v3 API: `auth_url` ending in `/v3`.
    identity: String,
    /// A 401's `WWW-Authenticate`.
    challenge: HeaderValue,
    http: reqwest::Client,
    own: tokio::sync::Mutex<Option<ServiceToken>>,
    cache: Mutex<Cache>,
}

/// What Keystone answers about a token (the parts used).
#[derive(Deserialize)]
struct TokenBody {
    token: Token,
}

#[derive(Deserialize)]
struct Token {
    user: Named,
    #[serde(default)]
    roles: Vec<Named>,
    #[serde(default)]
    project: Option<Named>,
    #[serde(default)]
    system: Option<System>,
    expires_at: String,
}

#[derive(Deserialize)]
struct Named {
    #[serde(default)]
    id: String,
    #[serde(default)]
    name: String,
}

#[derive(Deserialize)]
struct System {
    #[serde(default)]
    all: bool,
}

impl Keystone {
    /// The Keystone of `[keystone_authtoken]`; an error names the setting that is missing.
    pub fn new(config: &KeystoneConfig) -> anyhow::Result<Keystone> {
        let auth_url = config.auth_url.as_deref().ok_or_else(|| {
            anyhow::anyhow!("auth_strategy = keystone needs keystone_authtoken.auth_url")
        })?;
        if config.password.is_none() {
            anyhow::bail!("auth_strategy = keystone needs keystone_authtoken.password");
        }
        let base = auth_url.trim_end_matches('/');
        let identity = if base.ends_with("/v3") {
            base.to_owned()
        } else {
            format!("{base}/v3")
        };
        let uri = config.www_authenticate_uri.as_deref().unwrap_or(auth_url);
        let challenge =
            HeaderValue::from_str(&format!("Keystone uri=\"{uri}\"")).map_err(|_| {
                anyhow::anyhow!(
                    "keystone_authtoken.www_authenticate_uri: {uri:?} cannot be a header"
                )
            })?;
        let mut http = reqwest::Client::builder().timeout(config.http_request_timeout);
        // An https Keystone is trusted by the system's CA bundle (the crate has no roots of its
        // own), or by the bundle `SSL_CERT_FILE` names.
        let bundle = std::env::var("SSL_CERT_FILE")
            .unwrap_or_else(|_| "/etc/ssl/certs/ca-certificates.crt".to_owned());
        if let Ok(pem) = std::fs::read(&bundle) {
            for cert in reqwest::Certificate::from_pem_bundle(&pem).unwrap_or_default() {
                http = http.add_root_certificate(cert);
            }
        }
        let http = http.build()?;
        Ok(Keystone {
            config: config.clone(),
            identity,
            challenge,
            http,
            own: tokio::sync::Mutex::new(None),
            cache: Mutex::new(Cache::default()),
        })
    }

    /// Who sent a request with `headers`: its `X-Auth-Token` validated (and its
    /// `X-Service-Token`, if any).
    async fn authenticate(&self, headers: &HeaderMap) -> Result<Arc<Credentials>, Refusal> {
        let token = |name: &str| {
            headers
                .get(name)
                .and_then(|v| v.to_str().ok())
                .map(str::trim)
                .filter(|t| !t.is_empty())
        };
        let Some(user_token) = token("x-auth-token") else {
            info!("No X-Auth-Token in the request");
            return Err(Refusal::Unauthorized);
        };
        let mut allow_expired = false;
        if let Some(service_token) = token("x-service-token") {
            let service = self.validate(service_token, false).await?;
            let has_role = self
                .config
                .service_token_roles
                .iter()
                .any(|role| service.has_role(&role.to_lowercase()));
            if has_role {
                allow_expired = true;
            } else if self.config.service_token_roles_required {
                info!(user = %service.user_id, "A service token without a service role");
                return Err(Refusal::Unauthorized);
            }
        }
        self.validate(user_token, allow_expired).await
    }

    /// `token`'s credentials: remembered, or asked of Keystone and remembered.
    async fn validate(
        &self,
        token: &str,
        allow_expired: bool,
    ) -> Result<Arc<Credentials>, Refusal> {
        let key: [u8; 32] = Sha256::digest(token.as_bytes()).into();
        let now = Instant::now();
        if let Some(known) = self.lock_cache().tokens.get(&key)
            && known.until > now
        {
            return Ok(known.credentials.clone());
        }
        let (credentials, expires_in) = self.ask(token, allow_expired).await?;
        let credentials = Arc::new(credentials);
        // An expired token let through by a service token is not remembered.
        let keep = expires_in.min(self.config.token_cache_time);
        if !keep.is_zero() {
            self.remember(key, credentials.clone(), Instant::now() + keep);
        }
        Ok(credentials)
    }

    fn remember(&self, key: [u8; 32], credentials: Arc<Credentials>, until: Instant) {
        let mut cache = self.lock_cache();
        if cache
            .tokens
            .insert(key, Cached { credentials, until })
            .is_none()
        {
            cache.order.push_back(key);
        }
        while cache.tokens.len() > self.config.token_cache_size {
            let Some(oldest) = cache.order.pop_front() else {
                break;
            };
            cache.tokens.remove(&oldest);
        }
    }

    fn lock_cache(&self) -> std::sync::MutexGuard<'_, Cache> {
        self.cache.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Keystone's answer for `token`: its credentials and how long until it expires. Ferrum's
    /// own token, refused, is renewed once.
    async fn ask(
        &self,
        token: &str,
        allow_expired: bool,
    ) -> Result<(Credentials, Duration), Refusal> {
        let url = if allow_expired {
            format!("{}/auth/tokens?nocatalog&allow_expired=1", self.identity)
        } else {
            format!("{}/auth/tokens?nocatalog", self.identity)
        };
        for renewed in [false, true] {
            let own = self.own_token(renewed).await?;
            let answer = self
                .http
                .get(&url)
                .header("X-Auth-Token", own)
                .header("X-Subject-Token", token)
                .send()
                .await
                .map_err(|e| unavailable(&e))?;
            match answer.status() {
                StatusCode::OK => {
                    let body: TokenBody = answer.json().await.map_err(|e| unavailable(&e))?;
                    return Ok(credentials_of(body.token));
                }
                StatusCode::NOT_FOUND => {
                    info!("Keystone does not know the token (invalid, expired or revoked)");
                    return Err(Refusal::Unauthorized);
                }
                // Ferrum's own token expired or was revoked: a new one, once.
                StatusCode::UNAUTHORIZED if !renewed => {}
                status => {
                    warn!(%status, "Keystone refused to validate a token");
                    return Err(Refusal::Unavailable);
                }
            }
        }
        Err(Refusal::Unavailable)
    }

    /// Ferrum's own token, a new one when `renew` or when it is about to expire.
    async fn own_token(&self, renew: bool) -> Result<String, Refusal> {
        let mut own = self.own.lock().await;
        if let Some(held) = own.as_ref()
            && !renew
            && held.renew_at > Instant::now()
        {
            return Ok(held.token.clone());
        }
        let c = &self.config;
        let body = serde_json::json!({"auth": {
            "identity": {"methods": ["password"], "password": {"user": {
                "name": c.username,
                "domain": {"name": c.user_domain_name},
                "password": c.password,
            }}},
            "scope": {"project": {"name": c.project_name, "domain": {"name": c.project_domain_name}}},
        }});
        let answer = self
            .http
            .post(format!("{}/auth/tokens?nocatalog", self.identity))
            .json(&body)
            .send()
            .await
            .map_err(|e| unavailable(&e))?;
        if answer.status() != StatusCode::CREATED {
            warn!(status = %answer.status(), user = %c.username,
                "Keystone refused Ferrum's service user (keystone_authtoken.username, password, project_name)");
            return Err(Refusal::Unavailable);
        }
        let token = answer
            .headers()
            .get("x-subject-token")
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned)
            .ok_or(Refusal::Unavailable)?;
        let body: TokenBody = answer.json().await.map_err(|e| unavailable(&e))?;
        let (_, expires_in) = credentials_of(body.token);
        *own = Some(ServiceToken {
            token: token.clone(),
            renew_at: Instant::now() + expires_in.saturating_sub(RENEW_BEFORE),
        });
        Ok(token)
    }
}

fn unavailable(e: &dyn std::fmt::Display) -> Refusal {
    warn!(error = %e, "Keystone cannot be asked");
    Refusal::Unavailable
}

/// The credentials a token's body gives, and how long until the token expires (zero if it
/// has, or if its expiry cannot be read).
fn credentials_of(token: Token) -> (Credentials, Duration) {
    let expires_in = chrono::DateTime::parse_from_rfc3339(&token.expires_at)
        .ok()
        .and_then(|at| {
            (at.with_timezone(&chrono::Utc) - chrono::Utc::now())
                .to_std()
                .ok()
        })
        .unwrap_or(Duration::ZERO);
    let credentials = Credentials {
        user_id: token.user.id,
        project_id: token.project.map(|p| p.id),
        system_all: token.system.is_some_and(|s| s.all),
        roles: token
            .roles
            .into_iter()
            .map(|r| r.name.to_lowercase())
            .collect(),
    };
    (credentials, expires_in)
}

/// What `credentials` may do with a request of `method`, until Ironic's rule table lands: a
/// system-scoped reader reads (Ironic's `SYSTEM_READER` for the GETs of the operator's
/// resources), a system-scoped admin does everything (`SYSTEM_ADMIN`); everything else is
/// refused, which is never more than Ironic's defaults allow.
pub fn authorize(credentials: &Credentials, method: &Method) -> Result<(), Error> {
    let reads = matches!(*method, Method::GET | Method::HEAD | Method::OPTIONS);
    let allowed = credentials.system_all
        && (credentials.has_role("admin") || (reads && credentials.has_role("reader")));
    if allowed {
        return Ok(());
    }
    Err(Error::AccessDenied {
        resource: if reads {
            "baremetal:api:read".to_owned()
        } else {
            "baremetal:api:write".to_owned()
        },
    })
}

/// Middleware: a request to a route that is not public goes on only with a valid token that
/// [`authorize`] lets through; its [`Credentials`] go with it (a request extension).
pub async fn require(
    State(keystone): State<Arc<Keystone>>,
    mut request: Request,
    next: Next,
) -> Response {
    if super::auth::is_public_request(&request) {
        return next.run(request).await;
    }
    match keystone.authenticate(request.headers()).await {
        Ok(credentials) => {
            if let Err(e) = authorize(&credentials, request.method()) {
                info!(user = %credentials.user_id, error = %e, "Refused by the policy");
                return e.into_response();
            }
            request.extensions_mut().insert(credentials);
            next.run(request).await
        }
        Err(Refusal::Unauthorized) => {
            let mut response =
                Error::Unauthorized(AUTHENTICATION_REQUIRED.to_owned()).into_response();
            response
                .headers_mut()
                .insert(header::WWW_AUTHENTICATE, keystone.challenge.clone());
            response
        }
        Err(Refusal::Unavailable) => {
            Error::TemporaryFailure(KEYSTONE_UNAVAILABLE.to_owned()).into_response()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn token(body: serde_json::Value) -> Token {
        serde_json::from_value(body).expect("a token body")
    }

    /// A token body becomes its user, scope and lower-cased roles, with the time left.
    #[test]
    fn a_token_body_gives_its_scope_roles_and_time_left() {
        let in_an_hour = (chrono::Utc::now() + chrono::Duration::hours(1)).to_rfc3339();
        let (system, left) = credentials_of(token(serde_json::json!({
            "user": {"id": "u1", "name": "admin"},
            "roles": [{"id": "r1", "name": "Admin"}, {"id": "r2", "name": "reader"}],
            "system": {"all": true},
            "expires_at": in_an_hour,
        })));
        assert_eq!(
            system,
            Credentials {
                user_id: "u1".into(),
                project_id: None,
                system_all: true,
                roles: vec!["admin".into(), "reader".into()],
            }
        );
        assert!(left > Duration::from_secs(3500) && left <= Duration::from_secs(3600));
        let (project, left) = credentials_of(token(serde_json::json!({
            "user": {"id": "u2"},
            "roles": [{"name": "member"}],
            "project": {"id": "p1", "name": "demo"},
            "expires_at": "2020-01-01T00:00:00.000000Z",
        })));
        assert_eq!(project.project_id.as_deref(), Some("p1"));
        assert!(!project.system_all);
        assert_eq!(left, Duration::ZERO, "expired");
    }

    /// Until the rule table: a system reader reads, a system admin writes; a system member, a
    /// project's admin and a token without roles are refused.
    #[test]
    fn the_coarse_policy_lets_system_readers_read_and_system_admins_write() {
        let who = |system_all: bool, roles: &[&str]| Credentials {
            user_id: "u".into(),
            project_id: (!system_all).then(|| "p".to_owned()),
            system_all,
            roles: roles.iter().map(|r| (*r).to_owned()).collect(),
        };
        let reader = who(true, &["reader"]);
        let member = who(true, &["member", "reader"]);
        let admin = who(true, &["admin", "member", "reader"]);
        let project_admin = who(false, &["admin", "member", "reader"]);
        let nobody = who(true, &[]);
        for (credentials, read, write) in [
            (&reader, true, false),
            (&member, true, false),
            (&admin, true, true),
            (&project_admin, false, false),
            (&nobody, false, false),
        ] {
            assert_eq!(
                authorize(credentials, &Method::GET).is_ok(),
                read,
                "{credentials:?}"
            );
            for method in [Method::POST, Method::PATCH, Method::PUT, Method::DELETE] {
                let verdict = authorize(credentials, &method);
                assert_eq!(verdict.is_ok(), write, "{credentials:?} {method}");
                if let Err(e) = verdict {
                    assert_eq!(e.status(), axum::http::StatusCode::FORBIDDEN);
                }
            }
        }
    }
}
