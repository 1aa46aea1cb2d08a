//! The client of the deploy ramdisk's agent (the Ironic Python Agent's REST API, as Ironic's
//! `drivers/modules/agent_client.py` drives it): commands posted to
//! `{agent_url}/v1/commands/?wait=..&agent_token=..` and their results read back from
//! `GET {agent_url}/v1/commands/`.
//!
//! TLS (API 1.68, "auto TLS"): the agent makes a self-signed certificate for its address and
//! sends it in its heartbeats (`agent_verify_ca`, recorded on the node). The conductor trusts
//! exactly that certificate: a server presenting it is accepted (the agent proved who it is with
//! its token when it sent it), and anything else must chain to it as a CA. Without a recorded
//! certificate, `driver_info.agent_verify_ca` decides as in Ironic: `false` verifies nothing, a
//! path names a CA bundle; no system roots are read.

use std::{
    collections::HashMap,
    sync::{Arc, LazyLock, Mutex},
    time::Duration,
};

use rustls::{
    DigitallySignedStruct, SignatureScheme,
    client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier},
    crypto::CryptoProvider,
    pki_types::{CertificateDer, ServerName, UnixTime, pem::PemObject},
};
use serde::Deserialize;
use serde_json::{Value, json};

use super::DriverError;
use crate::node::{AGENT_TOKEN_KEY as TOKEN_KEY, Node};

/// How long one request to the agent may take (Ironic's `[agent]command_timeout`).
const COMMAND_TIMEOUT: Duration = Duration::from_secs(60);
/// How long connecting to the agent may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// The state of a command the agent ran or runs (IPA's `AgentCommandStatus`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CommandStatus {
    Running,
    Succeeded,
    Failed,
    /// The agent's hardware managers changed since the steps were read
    /// (`VERSION_MISMATCH`, formerly `CLEAN_VERSION_MISMATCH`).
    VersionMismatch,
    Other(String),
}

/// One command's result as the agent reports it.
#[derive(Debug, Clone, Deserialize)]
pub struct CommandResult {
    #[serde(default)]
    pub id: Option<String>,
    pub command_name: String,
    command_status: String,
    #[serde(default)]
    pub command_error: Option<Value>,
    #[serde(default)]
    pub command_result: Option<Value>,
}

impl CommandResult {
    pub fn status(&self) -> CommandStatus {
        match self.command_status.as_str() {
            "RUNNING" => CommandStatus::Running,
            "SUCCEEDED" => CommandStatus::Succeeded,
            "FAILED" => CommandStatus::Failed,
            "VERSION_MISMATCH" | "CLEAN_VERSION_MISMATCH" => CommandStatus::VersionMismatch,
            other => CommandStatus::Other(other.to_owned()),
        }
    }

    /// The agent's own words for a failure (Ironic's `get_command_error`: `details`, else
    /// `message`, else the whole error).
    pub fn error_text(&self) -> String {
        match &self.command_error {
            None | Some(Value::Null) => "Invalid agent response".to_owned(),
            Some(Value::Object(e)) => e
                .get("details")
                .or_else(|| e.get("message"))
                .and_then(Value::as_str)
                .filter(|s| !s.is_empty())
                .map_or_else(|| Value::Object(e.clone()).to_string(), str::to_owned),
            Some(Value::String(s)) => s.clone(),
            Some(other) => other.to_string(),
        }
    }
}

#[derive(Deserialize)]
struct CommandList {
    commands: Vec<CommandResult>,
}

/// A client for one node's agent, as the node records it (`agent_url`, token, certificate).
pub struct AgentClient {
    http: reqwest::Client,
    base: String,
    token: Option<String>,
    node: String,
}

impl AgentClient {
    /// The client of the agent that last heartbeated for `node`.
    pub fn for_node(node: &Node) -> Result<AgentClient, DriverError> {
        let info = &node.driver_internal_info;
        let base = info
            .get("agent_url")
            .and_then(Value::as_str)
            .filter(|u| !u.is_empty())
            .ok_or_else(|| {
                DriverError::Failed(format!(
                    "Node {} has no agent_url: its agent has not heartbeated yet.",
                    node.uuid
                ))
            })?
            .trim_end_matches('/')
            .to_owned();
        let http = shared_client(node, &base)?;
        Ok(AgentClient {
            http,
            base,
            token: info
                .get(TOKEN_KEY)
                .and_then(Value::as_str)
                .map(str::to_owned),
            node: node.uuid.clone(),
        })
    }

    fn query(&self, wait: Option<bool>) -> Vec<(&'static str, String)> {
        let mut query = Vec::new();
        if let Some(wait) = wait {
            query.push(("wait", wait.to_string()));
        }
        if let Some(token) = &self.token {
            query.push(("agent_token", token.clone()));
        }
        query
    }

    /// Posts the command `name` (`<extension>.<command>`) with `params`; with `wait` the agent
    /// answers when it has finished. A 409 (the agent is busy with another command) and any
    /// other refusal are errors with the agent's `faultstring`.
    pub async fn command(
        &self,
        name: &str,
        params: Value,
        wait: bool,
    ) -> Result<CommandResult, DriverError> {
        let url = format!("{}/v1/commands/", self.base);
        tracing::debug!(node.uuid = %self.node, command = name, wait, "Agent command {name}");
        crate::metrics::get().agent_request();
        let response = self
            .http
            .post(&url)
            .query(&self.query(Some(wait)))
            .json(&json!({"name": name, "params": params}))
            .send()
            .await
            .map_err(|e| self.unreachable(name, &e))?;
        let status = response.status();
        let body: Value = response.json().await.map_err(|e| {
            DriverError::Failed(format!(
                "The agent of node {} answered {name} with something other than JSON (HTTP {status}): {e}",
                self.node
            ))
        })?;
        if !status.is_success() {
            let fault = body
                .get("faultstring")
                .and_then(Value::as_str)
                .unwrap_or("no faultstring")
                .to_owned();
            let what = if status == reqwest::StatusCode::CONFLICT
                || fault.to_lowercase().contains("agent is busy")
            {
                "is busy with another command"
            } else {
                "refused the command"
            };
            return Err(DriverError::Failed(format!(
                "The agent of node {} {what} {name} (HTTP {status}): {fault}",
                self.node
            )));
        }
        serde_json::from_value(body).map_err(|e| {
            DriverError::Failed(format!(
                "The agent of node {} answered {name} with an unexpected result: {e}",
                self.node
            ))
        })
    }

    /// Every command the agent ran since it started, oldest first (`get_commands_status`).
    pub async fn commands(&self) -> Result<Vec<CommandResult>, DriverError> {
        let url = format!("{}/v1/commands/", self.base);
        crate::metrics::get().agent_request();
        let response = self
            .http
            .get(&url)
            .query(&self.query(None))
            .send()
            .await
            .map_err(|e| self.unreachable("get_commands_status", &e))?;
        let status = response.status();
        if !status.is_success() {
            let text = response.text().await.unwrap_or_default();
            return Err(DriverError::Failed(format!(
                "The agent of node {} refused to list its commands (HTTP {status}): {text}",
                self.node
            )));
        }
        let list: CommandList = response.json().await.map_err(|e| {
            DriverError::Failed(format!(
                "The agent of node {} listed its commands unreadably: {e}",
                self.node
            ))
        })?;
        Ok(list.commands)
    }

    /// A synchronous command's result, or its failure as an error naming the agent's reason.
    pub async fn run(&self, name: &str, params: Value) -> Result<Option<Value>, DriverError> {
        let result = self.command(name, params, true).await?;
        match result.status() {
            CommandStatus::Succeeded => Ok(result.command_result),
            CommandStatus::Running => Err(DriverError::Failed(format!(
                "The agent of node {} did not finish {name} while Ferrum waited for it.",
                self.node
            ))),
            CommandStatus::Failed | CommandStatus::VersionMismatch | CommandStatus::Other(_) => {
                Err(DriverError::Failed(format!(
                    "The agent of node {} failed {name}: {}",
                    self.node,
                    result.error_text()
                )))
            }
        }
    }

    fn unreachable(&self, what: &str, e: &reqwest::Error) -> DriverError {
        // reqwest's Display is terse ("error sending request"); the source says why.
        let mut reason = e.to_string();
        let mut source = std::error::Error::source(e);
        while let Some(s) = source {
            reason = format!("{reason}: {s}");
            source = s.source();
        }
        DriverError::Failed(format!(
            "Could not reach the agent of node {} at {} for {what}: {reason}",
            self.node, self.base
        ))
    }
}

/// The HTTP clients of the agents talked to lately, each for what makes one: the agent's URL and
/// how its certificate is trusted. A client keeps its connections open between requests (for
/// [`IDLE_KEEP`]), so that a deploy's polls and commands reuse one TLS session instead of each
/// building a client and paying a handshake. An agent that boots again sends a new certificate,
/// and so gets a new client.
static CLIENTS: LazyLock<Mutex<HashMap<(String, String), reqwest::Client>>> =
    LazyLock::new(Mutex::default);
/// More clients than this and the cache starts over (their open connections close as they idle).
const MAX_CLIENTS: usize = 4096;
/// How long a client keeps an idle connection to its agent.
const IDLE_KEEP: Duration = Duration::from_secs(30);

/// The client for the agent at `base` as `node` records it, from [`CLIENTS`] or made.
fn shared_client(node: &Node, base: &str) -> Result<reqwest::Client, DriverError> {
    let https = base.starts_with("https://");
    let trust = if https {
        match node.driver_internal_info.get("agent_verify_ca") {
            Some(Value::String(pem)) if !pem.trim().is_empty() => pem.clone(),
            _ => node
                .driver_info
                .get("agent_verify_ca")
                .map_or_else(String::new, Value::to_string),
        }
    } else {
        String::new()
    };
    let key = (base.to_owned(), trust);
    let mut clients = CLIENTS
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    if let Some(client) = clients.get(&key) {
        return Ok(client.clone());
    }
    let mut builder = reqwest::Client::builder()
        .connect_timeout(CONNECT_TIMEOUT)
        .timeout(COMMAND_TIMEOUT)
        .pool_idle_timeout(IDLE_KEEP);
    if https {
        builder = builder.use_preconfigured_tls(tls_config(node)?);
    }
    let client = builder
        .build()
        .map_err(|e| DriverError::Failed(format!("Cannot make the agent's client: {e}")))?;
    if clients.len() >= MAX_CLIENTS {
        clients.clear();
    }
    clients.insert(key, client.clone());
    Ok(client)
}

/// The TLS configuration for the node's agent: see the module's comment.
fn tls_config(node: &Node) -> Result<rustls::ClientConfig, DriverError> {
    let provider = crypto_provider();
    let recorded = node
        .driver_internal_info
        .get("agent_verify_ca")
        .and_then(Value::as_str)
        .filter(|pem| !pem.trim().is_empty());
    let pem: Vec<u8> = match (recorded, node.driver_info.get("agent_verify_ca")) {
        (Some(pem), _) => pem.as_bytes().to_vec(),
        (None, Some(Value::Bool(false))) => return unverified(provider),
        (None, Some(Value::String(s))) if is_false(s) => return unverified(provider),
        (None, Some(Value::String(path))) if !is_true(path) => std::fs::read(path)
            .map_err(|e| {
                DriverError::InvalidParameterValue(format!(
                    "Cannot read the CA bundle {path} named by driver_info agent_verify_ca of node {}: {e}",
                    node.uuid
                ))
            })?,
        (None, _) => {
            return Err(DriverError::Failed(format!(
                "Node {}'s agent serves TLS but sent no certificate, and driver_info agent_verify_ca names no CA bundle to verify it against.",
                node.uuid
            )));
        }
    };
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(&pem)
        .collect::<Result<_, _>>()
        .map_err(|e| {
            DriverError::Failed(format!(
                "The agent certificate of node {} is not PEM: {e}",
                node.uuid
            ))
        })?;
    if certs.is_empty() {
        return Err(DriverError::Failed(format!(
            "The agent certificate of node {} holds no certificate.",
            node.uuid
        )));
    }
    let mut roots = rustls::RootCertStore::empty();
    // A certificate that cannot be a trust anchor can still be pinned.
    let _ = roots.add_parsable_certificates(certs.iter().cloned());
    let chained = if roots.is_empty() {
        None
    } else {
        rustls::client::WebPkiServerVerifier::builder_with_provider(
            Arc::new(roots),
            provider.clone(),
        )
        .build()
        .ok()
    };
    let verifier = AgentVerifier {
        trust: Trust::Sent {
            pinned: certs,
            chained,
        },
        provider: provider.clone(),
    };
    config_with(provider, Arc::new(verifier))
}

fn is_false(s: &str) -> bool {
    matches!(
        s.trim().to_ascii_lowercase().as_str(),
        "false" | "0" | "no" | "off" | "f" | "n"
    )
}

fn is_true(s: &str) -> bool {
    matches!(
        s.trim().to_ascii_lowercase().as_str(),
        "true" | "1" | "yes" | "on" | "t" | "y"
    )
}

/// The cryptography of the agent's and the BMC's clients: ring's, but for the signatures of a
/// server's handshake and certificates, which aws-lc checks. The agent signs with P-384 (IPA's
/// default curve since 2026), which ring computes with generic code: 11.2 M instructions
/// (0.7 ms) a handshake, one per agent booted, a third of Ferrum's own work in a deploy;
/// aws-lc's 2.5 M (0.2 ms).
pub(crate) fn crypto_provider() -> Arc<CryptoProvider> {
    static PROVIDER: LazyLock<Arc<CryptoProvider>> = LazyLock::new(|| {
        Arc::new(CryptoProvider {
            signature_verification_algorithms: rustls::crypto::aws_lc_rs::default_provider()
                .signature_verification_algorithms,
            ..rustls::crypto::ring::default_provider()
        })
    });
    PROVIDER.clone()
}

fn config_with(
    provider: Arc<CryptoProvider>,
    verifier: Arc<dyn ServerCertVerifier>,
) -> Result<rustls::ClientConfig, DriverError> {
    let builder = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| DriverError::Failed(format!("Cannot set up TLS: {e}")))?;
    Ok(builder
        .dangerous()
        .with_custom_certificate_verifier(verifier)
        .with_no_client_auth())
}

/// `agent_verify_ca = false`: the agent's certificate is not checked (Ironic's `verify=False`).
pub(crate) fn unverified(
    provider: Arc<CryptoProvider>,
) -> Result<rustls::ClientConfig, DriverError> {
    let verifier = AgentVerifier {
        trust: Trust::Anything,
        provider: provider.clone(),
    };
    config_with(provider, Arc::new(verifier))
}

/// Which server certificates the agent's client accepts.
#[derive(Debug)]
enum Trust {
    /// The certificates the agent sent, as they are (pinned), or one that chains to them.
    Sent {
        pinned: Vec<CertificateDer<'static>>,
        chained: Option<Arc<rustls::client::WebPkiServerVerifier>>,
    },
    /// Any (`agent_verify_ca = false`); the handshake's signatures are still checked.
    Anything,
}

#[derive(Debug)]
struct AgentVerifier {
    trust: Trust,
    provider: Arc<CryptoProvider>,
}

impl ServerCertVerifier for AgentVerifier {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        let Trust::Sent { pinned, chained } = &self.trust else {
            return Ok(ServerCertVerified::assertion());
        };
        // The very certificate the agent sent with its token: the handshake proves the server
        // holds its key, and the certificate's own signature (IPA's ECDSA-SHA512) adds nothing.
        if pinned.iter().any(|c| c.as_ref() == end_entity.as_ref()) {
            return Ok(ServerCertVerified::assertion());
        }
        match chained {
            Some(chained) => chained.verify_server_cert(
                end_entity,
                intermediates,
                server_name,
                ocsp_response,
                now,
            ),
            None => Err(rustls::Error::InvalidCertificate(
                rustls::CertificateError::UnknownIssuer,
            )),
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.provider
            .signature_verification_algorithms
            .supported_schemes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn command_errors_read_as_ironic_reads_them() {
        let result = |error: Value| CommandResult {
            id: None,
            command_name: "execute_deploy_step".into(),
            command_status: "FAILED".into(),
            command_error: Some(error),
            command_result: None,
        };
        let r = result(
            json!({"type": "ImageChecksumError", "message": "short", "details": "Image failed to verify"}),
        );
        assert_eq!(r.error_text(), "Image failed to verify");
        assert_eq!(r.status(), CommandStatus::Failed);
        assert_eq!(result(json!({"message": "m"})).error_text(), "m");
        assert_eq!(result(json!("plain")).error_text(), "plain");
        assert_eq!(result(Value::Null).error_text(), "Invalid agent response");
    }

    #[test]
    fn a_node_without_an_agent_has_no_client() {
        let node = crate::node::tests_support::node();
        let Err(e) = AgentClient::for_node(&node) else {
            panic!("a client without agent_url")
        };
        assert!(e.to_string().contains("has not heartbeated"), "{e}");
    }
}
