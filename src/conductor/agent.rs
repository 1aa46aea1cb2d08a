//! The deploy ramdisk's side of a node: its agent token (Ironic's `get_node_with_token` and
//! the token helpers of `conductor/utils.py`) and its heartbeats (`ConductorManager.heartbeat`
//! and what `agent_base.HeartbeatMixin.heartbeat` records).
//!
//! A heartbeat is recorded by [`heartbeat`], one conditional write of the node's
//! `driver_internal_info`; acting on it (continuing a deploy waiting in `wait call-back`) is
//! the deploy engine's (`flows::deploy::continue_deploy`), run after the reply. Nothing here calls
//! a driver.

use rand::RngCore as _;
use serde_json::Value;
use tokio::time::Instant;
use tracing::{info, warn};

use super::{
    Ctx,
    task::{Decision, Hold, change_node_now},
};
use crate::node::AGENT_TOKEN_KEY as TOKEN_KEY;
use crate::{
    db,
    error::{Error, Result},
    node::{Json, JsonObject, Node, NodeChanges},
    rpc::Heartbeat,
    states::ProvisionState,
};

/// What [`get_node_with_token`] shows instead of a token handed out already, as Ironic does.
pub const TOKEN_MASK: &str = "******";

/// A new random token: 32 bytes from the OS-seeded generator, hex (Ironic uses
/// `secrets.token_urlsafe()`, the same entropy; agents treat the token as opaque).
fn new_token() -> String {
    let mut bytes = [0_u8; 32];
    rand::rng().fill_bytes(&mut bytes);
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Whether `given` is the node's token, compared in time independent of where they differ.
/// A node without a token takes heartbeats without one (Ferrum hands tokens out only from API
/// 1.62 on, which the API requires tokens from); a token the node does not have is refused, as
/// Ironic's `is_agent_token_valid` refuses it.
pub fn token_valid(node: &Node, given: Option<&str>) -> bool {
    let known = node
        .driver_internal_info
        .get(TOKEN_KEY)
        .and_then(Value::as_str);
    match (known, given) {
        (None, None) => true,
        (Some(known), Some(given)) => constant_time_eq(known.as_bytes(), given.as_bytes()),
        (None, Some(_)) | (Some(_), None) => false,
    }
}

/// Byte strings compared without an early exit (only their lengths leak, and a token's length
/// is no secret).
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0_u8, |diff, (x, y)| diff | (x ^ y)) == 0
}

/// Ironic's `get_node_with_token`: creates the node's agent token if it has none, with one
/// conditional write (Ironic upgrades to the exclusive lock without retrying, so a locked node
/// is NodeLocked at once), and answers the node with it; a node with a token already is
/// answered with the token masked, so only the first lookup learns it.
pub async fn get_node_with_token(ctx: &Ctx, node: Node, deadline: Option<Instant>) -> Result<Node> {
    let uuid = node.uuid.clone();
    let token = new_token();
    let (mut node, _) = change_node_now(ctx, &uuid, Some(node), deadline, |node| {
        if node.driver_internal_info.contains_key(TOKEN_KEY) {
            return Ok(Decision::Nothing);
        }
        let mut info = node.driver_internal_info.0.clone();
        info.insert(TOKEN_KEY.to_owned(), Value::String(token.clone()));
        // A token made for virtual media is not; this one is handed out by lookup.
        info.remove("agent_secret_token_pregenerated");
        Ok(Decision::Write(with_info(info), Hold::Release))
    })
    .await?;
    let handed_out = node
        .driver_internal_info
        .get(TOKEN_KEY)
        .and_then(Value::as_str);
    if handed_out == Some(token.as_str()) {
        info!(node.uuid = %uuid, "Generated the agent token of node {uuid}");
    } else {
        warn!(node.uuid = %uuid,
            "Node {uuid} has an agent token already; the lookup gets it masked");
        node.driver_internal_info
            .insert(TOKEN_KEY.to_owned(), Value::String(TOKEN_MASK.to_owned()));
    }
    Ok(node)
}

/// Records a heartbeat of the node's agent (Ironic's `ConductorManager.heartbeat` and the
/// recording half of `HeartbeatMixin.heartbeat`): the token checked, then `agent_url`,
/// `agent_version`, `agent_last_heartbeat` and `agent_verify_ca` written in one conditional
/// statement. A heartbeat in a state that takes none is dropped (logged), as Ironic drops it.
///
/// A locked node: Ironic answers NodeLocked (409, the agent retries within seconds) while it
/// does not know the agent's URL yet, and otherwise accepts the heartbeat and drops it when its
/// worker cannot take the lock without waiting. Ferrum does the same without a worker: it does
/// not wait for the lock, answers 409 when the node has no `agent_url` (so that the agent's URL
/// is not lost but sent again shortly), and otherwise accepts and drops this heartbeat, the
/// next one being recorded.
///
/// A node in `wait call-back` then has its deploy continued, after the reply, if the step it
/// waits in has finished; one in `clean wait` its cleaning, likewise.
pub async fn heartbeat(
    ctx: &Ctx,
    node: Node,
    beat: Heartbeat,
    deadline: Option<Instant>,
) -> Result<()> {
    let uuid = node.uuid.clone();
    // A ramdisk that reports its status (1.72, the anaconda one) need not send a version.
    if beat.agent_version.is_none() && beat.agent_status.is_none() {
        warn!(node.uuid = %uuid, "Node {uuid} sent a heartbeat without its agent's version");
        return Err(Error::InvalidParameterValue(
            "Agent did not transmit a version, and a version is required. Please update the agent being used."
                .to_owned(),
        ));
    }
    check_heartbeat(&node, &beat)?;
    if !node.provision_state.heartbeat_allowed() {
        warn!(node.uuid = %uuid, state = %node.provision_state,
            "Heartbeat from node {uuid} in unsupported provision state {}, not taking any action",
            node.provision_state);
        return Ok(());
    }
    let written = change_node_now(ctx, &uuid, Some(node), deadline, |node| {
        check_heartbeat(node, &beat)?;
        if !node.provision_state.heartbeat_allowed() {
            return Ok(Decision::Nothing);
        }
        Ok(Decision::Write(
            record_heartbeat(node, &beat, now_iso()),
            Hold::Release,
        ))
    })
    .await;
    match written {
        Ok((node, _)) => {
            // After the reply: acting on the heartbeat calls the agent, which the agent's
            // own request must not wait for. On the tracker, so that a graceful shutdown lets
            // it finish (it is one call to the agent, bounded by the client's timeout).
            if matches!(
                node.provision_state,
                ProvisionState::DeployWait | ProvisionState::CleanWait
            ) {
                let ctx = ctx.clone();
                ctx.tracker.clone().spawn(async move {
                    let acted = if node.provision_state == ProvisionState::DeployWait {
                        super::flows::deploy::continue_deploy(&ctx, node).await
                    } else {
                        super::flows::clean::continue_cleaning(&ctx, node).await
                    };
                    if let Err(e) = acted {
                        warn!(error = %e, "Could not act on a heartbeat: {e}");
                    }
                });
            }
            Ok(())
        }
        Err(Error::NodeLocked { node, host }) => {
            let fresh = db::nodes::get_by_uuid(&ctx.db, &uuid).await?;
            check_heartbeat(&fresh, &beat)?;
            if fresh.driver_internal_info.contains_key("agent_url") {
                warn!(node.uuid = %uuid, holder = %host,
                    "Node {uuid} is locked by {host}; this heartbeat is skipped, the next one is recorded");
                Ok(())
            } else {
                Err(Error::NodeLocked { node, host })
            }
        }
        Err(e) => Err(e),
    }
}

/// The checks of a heartbeat on the node as read: its token, and the certificate it sent
/// against the one recorded (Ironic stores the certificate in a file and records the path;
/// Ferrum records the certificate itself, so that any conductor that takes the node over has
/// it, and refuses a changed one as Ironic does).
fn check_heartbeat(node: &Node, beat: &Heartbeat) -> Result<()> {
    if !token_valid(node, beat.agent_token.as_deref()) {
        warn!(node.uuid = %node.uuid, "Invalid or missing agent_token received for node {}", node.uuid);
        return Err(Error::InvalidAgentToken);
    }
    let recorded = node
        .driver_internal_info
        .get("agent_verify_ca")
        .and_then(Value::as_str);
    if let (Some(recorded), Some(sent)) = (recorded, beat.agent_verify_ca.as_deref())
        && recorded.trim() != sent.trim()
    {
        return Err(Error::InvalidParameterValue(
            "Detected change in ramdisk provided \"agent_verify_ca\"".to_owned(),
        ));
    }
    Ok(())
}

/// The node's `driver_internal_info` with the heartbeat recorded at `at`.
pub fn record_heartbeat(node: &Node, beat: &Heartbeat, at: String) -> NodeChanges {
    let mut info = node.driver_internal_info.0.clone();
    info.insert("agent_url".into(), Value::String(beat.callback_url.clone()));
    info.insert("agent_version".into(), beat.agent_version.clone().into());
    info.insert("agent_last_heartbeat".into(), Value::String(at));
    if let Some(ca) = beat.agent_verify_ca.as_deref().filter(|ca| !ca.is_empty()) {
        info.insert("agent_verify_ca".into(), Value::String(ca.to_owned()));
    }
    // The agent's status (1.72), kept as Ironic's `AgentBase.heartbeat` keeps it.
    for (key, value) in [
        ("agent_status", &beat.agent_status),
        ("agent_status_message", &beat.agent_status_message),
    ] {
        if let Some(value) = value.as_deref().filter(|v| !v.is_empty()) {
            info.insert(key.into(), Value::String(value.to_owned()));
        }
    }
    with_info(info)
}

fn with_info(info: JsonObject) -> NodeChanges {
    NodeChanges {
        driver_internal_info: Some(Json(info)),
        ..NodeChanges::default()
    }
}

/// Now as Ironic's `timestamp_driver_internal_info` writes it (`utcnow().isoformat()`).
fn now_iso() -> String {
    crate::node::now()
        .format("%Y-%m-%dT%H:%M:%S%.6f")
        .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node_with(info: &[(&str, &str)]) -> Node {
        let mut node = crate::node::tests_support::node();
        node.driver_internal_info.0 = info
            .iter()
            .map(|(k, v)| ((*k).to_owned(), Value::String((*v).to_owned())))
            .collect();
        node
    }

    #[test]
    fn tokens_are_checked_as_ironic_checks_them() {
        let with = node_with(&[(TOKEN_KEY, "s3cr3t")]);
        let without = node_with(&[]);
        for (node, given, valid) in [
            (&with, Some("s3cr3t"), true),
            (&with, Some("s3cr3u"), false),
            (&with, Some("s3cr3"), false),
            (&with, Some(""), false),
            (&with, None, false),
            (&without, None, true),
            (&without, Some("s3cr3t"), false),
        ] {
            assert_eq!(token_valid(node, given), valid, "{given:?}");
        }
    }

    #[test]
    fn tokens_are_random_and_long() {
        let (a, b) = (new_token(), new_token());
        assert_ne!(a, b);
        assert_eq!(a.len(), 64);
    }

    #[test]
    fn a_heartbeat_records_the_agent() {
        let node = node_with(&[("agent_verify_ca", "CERT\n"), ("keep", "me")]);
        let beat = Heartbeat {
            callback_url: "https://10.0.0.5:9999".into(),
            agent_version: Some("9.1.0".into()),
            agent_token: None,
            agent_verify_ca: Some("CERT".into()),
            agent_status: None,
            agent_status_message: None,
        };
        check_heartbeat(&node, &beat).unwrap();
        let changes = record_heartbeat(&node, &beat, "2026-01-01T00:00:00.000000".into());
        let info = changes.driver_internal_info.unwrap().0;
        assert_eq!(info["agent_url"], "https://10.0.0.5:9999");
        assert_eq!(info["agent_version"], "9.1.0");
        assert_eq!(info["agent_last_heartbeat"], "2026-01-01T00:00:00.000000");
        assert_eq!(info["agent_verify_ca"], "CERT");
        assert_eq!(info["keep"], "me");
        assert!(info.get("agent_status").is_none(), "{info:?}");
        let status = Heartbeat {
            agent_status: Some("end".into()),
            agent_status_message: Some("done".into()),
            ..beat.clone()
        };
        let info = record_heartbeat(&node, &status, "t".into())
            .driver_internal_info
            .unwrap()
            .0;
        assert_eq!(
            (&info["agent_status"], &info["agent_status_message"]),
            (&Value::from("end"), &Value::from("done"))
        );
        let changed = Heartbeat {
            agent_verify_ca: Some("OTHER".into()),
            ..beat
        };
        let e = check_heartbeat(&node, &changed).unwrap_err();
        assert!(e.to_string().contains("agent_verify_ca"), "{e}");
    }
}
