//! Ferrum's Redfish client, on reqwest: one connection pool per BMC (scheme, authority and TLS
//! trust), kept by [`Connections`] for as long as the hardware type lives, with connect and
//! read timeouts, HTTP basic authentication, and retries only where a request is safe to
//! repeat: a GET that could not connect or was answered 503 (Ironic retries a failed
//! connection `[redfish]connection_attempts` times, `connection_retry_interval` apart).
//! A POST or PATCH is sent once: a reset or an insert repeated could act twice.
//!
//! What Ironic's sushy does and this does not: Redfish sessions (`redfish_auth_type` `session`
//! is refused when used; `auto` uses basic authentication, which is what sushy's
//! `SessionOrBasicAuth` falls back to on a BMC without a SessionService), TLS minimum version
//! and cipher settings, and OData `$expand`.

use std::{collections::HashMap, sync::Mutex, time::Duration};

use reqwest::{Method, StatusCode};
use rustls::pki_types::{CertificateDer, pem::PemObject};
use serde_json::Value;

use super::{AuthType, RedfishInfo, VerifyCa};
use crate::drivers::DriverError;

/// How the client behaves: Ironic's `[redfish]` connection settings.
#[derive(Debug, Clone, Copy)]
pub struct ClientSettings {
    /// Attempts of a GET that cannot connect or is answered 503 (at least 1).
    pub connection_attempts: u32,
    /// The pause between two of those attempts.
    pub connection_retry_interval: Duration,
    pub connect_timeout: Duration,
    /// How long one request may take, connecting included.
    pub read_timeout: Duration,
}

impl Default for ClientSettings {
    fn default() -> Self {
        ClientSettings {
            connection_attempts: 5,
            connection_retry_interval: Duration::from_secs(4),
            connect_timeout: Duration::from_secs(10),
            read_timeout: Duration::from_secs(60),
        }
    }
}

/// The kept clients, one per BMC endpoint and trust (Ironic's `SessionCache`, whose size is
/// `[redfish]connection_cache_size`, 1000).
pub struct Connections {
    settings: ClientSettings,
    clients: Mutex<HashMap<(String, VerifyCa), reqwest::Client>>,
}

const CACHE_SIZE: usize = 1000;

impl Connections {
    pub fn new(settings: ClientSettings) -> Connections {
        Connections {
            settings,
            clients: Mutex::new(HashMap::new()),
        }
    }

    /// A client of the BMC `info` names, for node `node`.
    pub fn bmc(&self, info: &RedfishInfo, node: &str) -> Result<Bmc, DriverError> {
        if info.auth_type == AuthType::Session {
            return Err(DriverError::InvalidParameterValue(format!(
                "Redfish session authentication (driver_info/redfish_auth_type \"session\") is not supported by Ferrum yet for node {node}; use \"basic\" or \"auto\"."
            )));
        }
        let key = (info.address.clone(), info.verify_ca.clone());
        let http = {
            let mut clients = self
                .clients
                .lock()
                .map_err(|_| DriverError::Failed("The Redfish client cache is poisoned".into()))?;
            match clients.get(&key) {
                Some(c) => c.clone(),
                None => {
                    let client = self.build(info)?;
                    if clients.len() >= CACHE_SIZE {
                        // Not the oldest, as Ironic's: any one goes, and is rebuilt on demand.
                        if let Some(k) = clients.keys().next().cloned() {
                            clients.remove(&k);
                        }
                    }
                    clients.insert(key, client.clone());
                    client
                }
            }
        };
        Ok(Bmc {
            http,
            info: info.clone(),
            node: node.to_owned(),
            settings: self.settings,
        })
    }

    fn build(&self, info: &RedfishInfo) -> Result<reqwest::Client, DriverError> {
        let mut builder = reqwest::Client::builder()
            .connect_timeout(self.settings.connect_timeout)
            .timeout(self.settings.read_timeout)
            .pool_idle_timeout(Duration::from_secs(30))
            // A BMC serves few connections; two kept per BMC are plenty for one node's calls.
            .pool_max_idle_per_host(2)
            // The emulator answers a system's name with a redirect to its UUID, as BMCs may.
            .redirect(reqwest::redirect::Policy::limited(3));
        if info.address.starts_with("https://") {
            builder = builder.use_preconfigured_tls(tls_config(&info.verify_ca)?);
        }
        builder
            .build()
            .map_err(|e| DriverError::Failed(format!("Cannot make a Redfish client: {e}")))
    }
}

/// The TLS trust `redfish_verify_ca` asks for: the system's CA bundle, a bundle file or a
/// directory of PEM certificates, or nothing verified.
fn tls_config(verify: &VerifyCa) -> Result<rustls::ClientConfig, DriverError> {
    let provider = crate::drivers::agent_client::crypto_provider();
    let paths: Vec<std::path::PathBuf> = match verify {
        VerifyCa::Bool(false) => return crate::drivers::agent_client::unverified(provider),
        VerifyCa::Bool(true) => {
            let bundle = std::env::var("SSL_CERT_FILE")
                .unwrap_or_else(|_| "/etc/ssl/certs/ca-certificates.crt".to_owned());
            vec![bundle.into()]
        }
        VerifyCa::Path(p) => {
            let path = std::path::PathBuf::from(p);
            if path.is_dir() {
                std::fs::read_dir(&path)
                    .map_err(|e| bad_ca(p, &e.to_string()))?
                    .filter_map(|e| e.ok().map(|e| e.path()))
                    .filter(|p| p.is_file())
                    .collect()
            } else {
                vec![path]
            }
        }
    };
    let mut roots = rustls::RootCertStore::empty();
    for path in &paths {
        let Ok(pem) = std::fs::read(path) else {
            continue;
        };
        let certs = CertificateDer::pem_slice_iter(&pem).filter_map(Result::ok);
        let _ = roots.add_parsable_certificates(certs);
    }
    if roots.is_empty() {
        return Err(bad_ca(
            &paths
                .iter()
                .map(|p| p.display().to_string())
                .collect::<Vec<_>>()
                .join(", "),
            "no PEM certificate found",
        ));
    }
    rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map(|b| b.with_root_certificates(roots).with_no_client_auth())
        .map_err(|e| DriverError::Failed(format!("Cannot set up TLS for Redfish: {e}")))
}

fn bad_ca(what: &str, why: &str) -> DriverError {
    DriverError::InvalidParameterValue(format!(
        "Cannot read the CA certificates of driver_info/redfish_verify_ca ({what}): {why}"
    ))
}

/// What a request to a BMC can end in.
#[derive(Debug)]
pub enum RedfishError {
    /// No answer: refused, unreachable, timed out (Ironic's RedfishConnectionError).
    Connection(String),
    /// An HTTP error answer: status and the BMC's own words.
    Http { status: StatusCode, message: String },
    /// An answer that is not what Redfish promises.
    Invalid(String),
}

impl RedfishError {
    pub fn status(&self) -> Option<StatusCode> {
        match self {
            RedfishError::Http { status, .. } => Some(*status),
            RedfishError::Connection(_) | RedfishError::Invalid(_) => None,
        }
    }

    /// As a driver error for node `node`, with Ironic's texts: "Redfish connection failed for
    /// node ..." when the BMC did not answer, "Redfish exception occurred. Error: ..." else.
    pub fn into_driver(self, node: &str, context: &str) -> DriverError {
        match self {
            RedfishError::Connection(e) => DriverError::Failed(format!(
                "Redfish connection failed for node {node}: {context}{e}"
            )),
            other => DriverError::Failed(format!(
                "Redfish exception occurred. Error: {context}{}",
                other.message()
            )),
        }
    }

    fn message(&self) -> String {
        match self {
            RedfishError::Connection(e) | RedfishError::Invalid(e) => e.clone(),
            RedfishError::Http { message, .. } => message.clone(),
        }
    }
}

impl std::fmt::Display for RedfishError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message())
    }
}

/// One node's BMC: the kept client and where and as whom to talk to it.
pub struct Bmc {
    http: reqwest::Client,
    info: RedfishInfo,
    node: String,
    settings: ClientSettings,
}

impl Bmc {
    /// The node this client is for.
    pub fn node(&self) -> &str {
        &self.node
    }

    /// The URL of `path`: an `@odata.id` (absolute path) or a path under the root prefix.
    fn url(&self, path: &str) -> String {
        if path.starts_with('/') {
            format!("{}{path}", self.info.address)
        } else {
            format!(
                "{}{}/{path}",
                self.info.address,
                self.info.root_prefix.trim_end_matches('/')
            )
        }
    }

    /// The service root's path (`/redfish/v1/` unless the address names another).
    pub fn root(&self) -> &str {
        &self.info.root_prefix
    }

    async fn send(
        &self,
        method: Method,
        path: &str,
        body: Option<&Value>,
    ) -> Result<reqwest::Response, RedfishError> {
        let url = self.url(path);
        let mut request = self
            .http
            .request(method.clone(), &url)
            .header("Accept", "application/json")
            .header("OData-Version", "4.0");
        if let Some(user) = &self.info.username {
            request = request.basic_auth(user, self.info.password.as_deref());
        }
        if let Some(body) = body {
            request = request.json(body);
        }
        let response = request.send().await.map_err(|e| {
            RedfishError::Connection(format!("HTTP {method} {url} failed: {}", describe(&e)))
        })?;
        let status = response.status();
        if status.is_success() {
            return Ok(response);
        }
        let text = response.text().await.unwrap_or_default();
        let detail = extended_message(&text);
        let hint = if status == StatusCode::UNAUTHORIZED {
            " (the BMC refused the credentials of driver_info/redfish_username and redfish_password)"
        } else if status == StatusCode::FORBIDDEN {
            " (the BMC user lacks the privilege)"
        } else {
            ""
        };
        Err(RedfishError::Http {
            status,
            message: format!(
                "HTTP {method} {url} returned code {}{hint}. {detail}",
                status.as_u16()
            )
            .trim_end()
            .to_owned(),
        })
    }

    /// GETs `path` as JSON; retried on a connection failure or 503 (a GET changes nothing).
    pub async fn get(&self, path: &str) -> Result<Value, RedfishError> {
        let attempts = self.settings.connection_attempts.max(1);
        let mut attempt = 1;
        loop {
            let outcome = match self.send(Method::GET, path, None).await {
                Ok(r) => r
                    .json::<Value>()
                    .await
                    .map_err(|e| RedfishError::Invalid(format!("GET {path}: not JSON: {e}"))),
                Err(e) => Err(e),
            };
            let retry = match &outcome {
                Err(RedfishError::Connection(_)) => true,
                Err(e) => e.status() == Some(StatusCode::SERVICE_UNAVAILABLE),
                Ok(_) => false,
            };
            if !retry || attempt >= attempts {
                return outcome;
            }
            if let Err(e) = &outcome {
                tracing::warn!(node.uuid = %self.node,
                    "Redfish GET {path} for node {} failed (attempt {attempt} of {attempts}), retrying: {e}",
                    self.node);
            }
            attempt += 1;
            tokio::time::sleep(self.settings.connection_retry_interval).await;
        }
    }

    /// POSTs `body` to `path` once (an action).
    pub async fn post(&self, path: &str, body: &Value) -> Result<(), RedfishError> {
        self.send(Method::POST, path, Some(body)).await.map(|_| ())
    }

    /// PATCHes `path` with `body` once.
    pub async fn patch(&self, path: &str, body: &Value) -> Result<(), RedfishError> {
        self.send(Method::PATCH, path, Some(body)).await.map(|_| ())
    }
}

/// The innermost cause of a reqwest error, which names what happened ("Connection refused").
fn describe(e: &reqwest::Error) -> String {
    let mut text = e.to_string();
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        text = format!("{text}: {s}");
        source = s.source();
    }
    if e.is_timeout() {
        text.push_str(" (timed out)");
    }
    text
}

/// A Redfish error body's message (`error.@Message.ExtendedInfo[].Message`, else
/// `error.message`), else the body itself, shortened.
fn extended_message(text: &str) -> String {
    let Ok(body) = serde_json::from_str::<Value>(text) else {
        return text.chars().take(300).collect();
    };
    let error = body.get("error").unwrap_or(&body);
    let extended: Vec<&str> = error
        .get("@Message.ExtendedInfo")
        .and_then(Value::as_array)
        .map(|items| {
            items
                .iter()
                .filter_map(|i| i.get("Message").and_then(Value::as_str))
                .collect()
        })
        .unwrap_or_default();
    if !extended.is_empty() {
        return extended.join("; ");
    }
    error
        .get("message")
        .and_then(Value::as_str)
        .map_or_else(|| text.chars().take(300).collect(), str::to_owned)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_bodies_are_read_as_redfish_writes_them() {
        let body = r#"{"error": {"code": "Base.1.0.GeneralError", "message": "Power state Nmi is not supported",
            "@Message.ExtendedInfo": [{"Message": "Power state Nmi is not supported"}]}}"#;
        assert_eq!(extended_message(body), "Power state Nmi is not supported");
        let body = r#"{"error": {"code": "X", "message": "plain"}}"#;
        assert_eq!(extended_message(body), "plain");
        assert_eq!(extended_message("<html>no</html>"), "<html>no</html>");
    }
}
