//! A node's console as its console interface keeps it on the node: what starting and stopping
//! the console records, and the `console_info` shown while it is on. The conductor writes the
//! record under the node's exclusion; the API renders the information from the node as read.
//!
//! The interfaces, by name, as Ironic's (`ironic/drivers/modules/fake.py`, `noop.py`):
//! - `no-console` refuses (the conductor says so before anything is recorded);
//! - `fake` starts and stops nothing and shows `{}` (`FakeConsole.get_console`);
//! - `fake-graphical` (Ironic 29.0, no microversion of its own) is Ironic's
//!   `FakeGraphicalConsole` with the default `fake` console container provider: starting it
//!   "starts" a container at the TEST-NET-1 address `192.0.2.1:5900`, keeps that in
//!   `driver_internal_info` (`vnc_host`, `vnc_port`) with a new noVNC token and its creation
//!   time (`novnc_secret_token`, `novnc_secret_token_created`), and shows `{"type": "vnc",
//!   "url": ...}`, the URL built from `[vnc] public_url` as `vnc.get_console` builds it.
//!   Stopping it removes the four keys. A session older than [`TOKEN_TIMEOUT`] is stopped by
//!   the conductor (`expired`), as Ironic's periodic `_expire_fake_console_sessions` does;
//! - `ipmitool-socat` runs something (`drivers::ipmi::SocatConsole`): the `console_info` it gives
//!   when started (`{"type": "socat", "url": "tcp://…"}`) is kept in `driver_internal_info`
//!   (`console_info`) until it stops (`record_running`).

use std::time::Duration;

use base64::Engine as _;
use chrono::{NaiveDateTime, Utc};
use rand::RngCore as _;
use serde_json::{Value, json};

use super::{JsonObject, Node};

/// Ironic's `[vnc] token_timeout` default: how long a graphical console session lasts.
pub const TOKEN_TIMEOUT: Duration = Duration::from_secs(600);

/// Ironic's `[vnc] expire_console_session_interval` default: how often expired sessions are
/// looked for.
pub const EXPIRE_INTERVAL: Duration = Duration::from_secs(120);

/// The graphical console interface of the fake hardware.
pub const FAKE_GRAPHICAL: &str = "fake-graphical";

/// The `driver_internal_info` keys a graphical console keeps while it is on.
const VNC_HOST: &str = "vnc_host";
const VNC_PORT: &str = "vnc_port";
const TOKEN: &str = "novnc_secret_token";
const TOKEN_CREATED: &str = "novnc_secret_token_created";

/// How Ironic writes the token's creation time (`timeutils.utcnow().isoformat()`, read back
/// with `%Y-%m-%dT%H:%M:%S.%f`).
const CREATED_FORMAT: &str = "%Y-%m-%dT%H:%M:%S%.6f";

/// The node's `driver_internal_info` once its console is turned on (`enabled`) or off, as its
/// console interface records it; None when the interface records nothing.
pub fn record(node: &Node, enabled: bool) -> Option<JsonObject> {
    if node.interfaces.console != FAKE_GRAPHICAL {
        return None;
    }
    let mut info = node.driver_internal_info.0.clone();
    if enabled {
        // The fake console container provider's address (`ironic/console/container/fake.py`).
        info.insert(VNC_HOST.into(), "192.0.2.1".into());
        info.insert(VNC_PORT.into(), 5900.into());
        info.insert(TOKEN.into(), new_token().into());
        let created = Utc::now().naive_utc().format(CREATED_FORMAT).to_string();
        info.insert(TOKEN_CREATED.into(), created.into());
    } else {
        for key in [VNC_HOST, VNC_PORT, TOKEN, TOKEN_CREATED] {
            info.remove(key);
        }
    }
    Some(info)
}

/// A noVNC token as Python's `secrets.token_urlsafe()` makes one: 32 random bytes, base64url
/// without padding.
fn new_token() -> String {
    let mut bytes = [0u8; 32];
    rand::rng().fill_bytes(&mut bytes);
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
}

/// The `driver_internal_info` key of the `console_info` a console that runs something gave
/// when it started (`ipmitool-socat`: its type and URL).
const RUNNING_INFO: &str = "console_info";

/// The node's `driver_internal_info` with the `console_info` of a console that runs something:
/// given once it started, removed (None) once it stopped.
pub fn record_running(node: &Node, info: Option<JsonObject>) -> JsonObject {
    let mut all = node.driver_internal_info.0.clone();
    match info {
        Some(info) => {
            all.insert(RUNNING_INFO.into(), Value::Object(info));
        }
        None => {
            all.remove(RUNNING_INFO);
        }
    }
    all
}

/// The `console_info` of a node whose console is on; `public_url` is `[vnc] public_url` (None
/// unset, which Ironic prints as `None`).
pub fn info(node: &Node, public_url: Option<&str>) -> Value {
    if node.interfaces.console != FAKE_GRAPHICAL {
        return node
            .driver_internal_info
            .get(RUNNING_INFO)
            .cloned()
            .unwrap_or_else(|| json!({}));
    }
    let token = match node.driver_internal_info.get(TOKEN) {
        Some(Value::String(token)) => token.clone(),
        _ => "None".to_owned(),
    };
    // Python's `urllib.parse.quote` with its default safe `/`.
    let path: String = format!("websockify?node={}&token={token}", node.uuid)
        .bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'_' | b'.' | b'-' | b'~' | b'/' => {
                char::from(b).to_string()
            }
            other => format!("%{other:02X}"),
        })
        .collect();
    json!({
        "type": "vnc",
        "url": format!("{}?path={path}", public_url.unwrap_or("None")),
    })
}

/// Whether the node's graphical console session has outlived [`TOKEN_TIMEOUT`] at `now` (a
/// token without a readable creation time has: Ironic refuses it as NotAuthorized).
pub fn expired(node: &Node, now: NaiveDateTime) -> bool {
    if !node.console_enabled || node.interfaces.console != FAKE_GRAPHICAL {
        return false;
    }
    if !node.driver_internal_info.contains_key(TOKEN) {
        return false;
    }
    let created = node
        .driver_internal_info
        .get(TOKEN_CREATED)
        .and_then(Value::as_str)
        .and_then(|t| NaiveDateTime::parse_from_str(t, CREATED_FORMAT).ok());
    match (created, chrono::Duration::from_std(TOKEN_TIMEOUT)) {
        (Some(created), Ok(timeout)) => created + timeout < now,
        _ => true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn graphical() -> Node {
        let mut node = crate::node::tests_support::node();
        node.interfaces.console = FAKE_GRAPHICAL.to_owned();
        node
    }

    /// Starting records the fake container's address and a fresh token, which the URL carries
    /// quoted as Python quotes it; stopping removes the four keys and nothing else.
    #[test]
    fn a_graphical_console_records_its_session() {
        let mut node = graphical();
        node.driver_internal_info.0.insert("kept".into(), 1.into());
        let on = record(&node, true).unwrap();
        assert_eq!(on["vnc_host"], "192.0.2.1");
        assert_eq!(on["vnc_port"], 5900);
        let token = on["novnc_secret_token"].as_str().unwrap().to_owned();
        assert_eq!(token.len(), 43);
        assert!(
            NaiveDateTime::parse_from_str(
                on["novnc_secret_token_created"].as_str().unwrap(),
                CREATED_FORMAT
            )
            .is_ok()
        );
        node.driver_internal_info.0 = on;
        node.console_enabled = true;
        let url = format!(
            "http://h:6090/vnc_auto.html?path=websockify%3Fnode%3D{}%26token%3D{token}",
            node.uuid
        );
        assert_eq!(
            info(&node, Some("http://h:6090/vnc_auto.html")),
            json!({"type": "vnc", "url": url})
        );
        assert!(!expired(&node, Utc::now().naive_utc()));
        let later = Utc::now().naive_utc() + chrono::Duration::seconds(601);
        assert!(expired(&node, later));
        let off = record(&node, false).unwrap();
        assert_eq!(off, JsonObject::from_iter([("kept".to_owned(), json!(1))]));
        node.interfaces.console = "fake".to_owned();
        assert_eq!(record(&node, true), None);
        assert_eq!(info(&node, None), json!({}));
        assert!(!expired(&node, later));
    }
}
