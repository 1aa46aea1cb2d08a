//! The deploy ramdisk's endpoints (API 1.22, no authentication in Ironic): `GET /v1/lookup`, by
//! which the agent finds its node, and `POST /v1/heartbeat/{node}`, by which it reports in
//! (Ironic's `v1/ramdisk.py`). Lookup reads the database; from 1.62 it asks the node's conductor
//! for the node's agent token (made on the first lookup). A heartbeat is checked here and
//! recorded by the conductor (`conductor::agent`). `POST /v1/continue_inspection` (1.84) takes
//! what the agent found on an inspected node (`conductor::flows::inspect`).

use axum::{Json, extract::State, http::StatusCode};
use serde::Deserialize;
use serde_json::{Value, json};
use tracing::warn;

use super::{
    ApiState, BaseUrl,
    extract::{ApiJson, ApiPath, ApiQuery, ApiVersion, JsonSuffix, OptionalJson, RequestId},
    nodes::{call, find},
};
use crate::{
    db,
    error::{Error, Result},
    node::{InterfaceKind, JsonObject, Node, fields::View, inventory::LOOKUP_BMC_ADDRESSES},
    ports::normalize_mac,
    resource,
    rpc::{Heartbeat, RpcRequest},
    states::ProvisionState,
};

/// The ramdisk endpoints appeared in 1.22, `agent_version` in a heartbeat in 1.36, the agent
/// token in 1.62 and `agent_verify_ca` in 1.68 (Ironic's `api/controllers/v1/versions.py`).
const SINCE: u32 = 22;
const AGENT_VERSION_SINCE: u32 = 36;
const AGENT_TOKEN_SINCE: u32 = 62;
const VERIFY_CA_SINCE: u32 = 68;
/// The API minor version from which a heartbeat carries `agent_status` and its message.
const AGENT_STATUS_SINCE: u32 = 72;
/// The statuses an agent may report (Ironic's `AGENT_VALID_STATES`, `ramdisk.py`).
const AGENT_STATUSES: &[&str] = &["start", "end", "error"];

/// The API minor version of `POST /v1/continue_inspection` and its `node_uuid`. Ironic also
/// takes it at the base version 1.1, where it answers as ironic-inspector did (`{"uuid"}`):
/// what the agent sends, which names no version.
const CONTINUE_INSPECTION_SINCE: u32 = 84;

/// The node's fields lookup answers with (Ironic's `_LOOKUP_RETURN_FIELDS`, and the links).
const LOOKUP_FIELDS: &[&str] = &[
    "uuid",
    "properties",
    "instance_info",
    "driver_internal_info",
    "links",
];

/// Ironic's answer to a lookup that finds nothing, the same whether there is no such node or it
/// is in a state lookup does not find nodes in (so the two cannot be told apart).
fn not_found() -> Error {
    Error::NotFound("Resource could not be found.".to_owned())
}

#[derive(Debug, Default, Deserialize)]
pub struct LookupQuery {
    addresses: Option<String>,
    node_uuid: Option<String>,
}

/// The MAC addresses of `addresses` (comma-separated) that are valid, normalized; invalid ones
/// are ignored, as Ironic ignores them (with a warning).
fn valid_macs(addresses: &str) -> Vec<String> {
    let mut valid: Vec<String> = Vec::new();
    for address in addresses
        .split(',')
        .map(str::trim)
        .filter(|a| !a.is_empty())
    {
        match normalize_mac(address) {
            Ok(mac) if !valid.contains(&mac) => valid.push(mac),
            Ok(_) => {}
            Err(_) => warn!(address, "lookup ignores the invalid MAC address {address}"),
        }
    }
    valid
}

/// GET /v1/lookup?addresses=<mac,...>&node_uuid=<uuid>.
pub async fn lookup(
    State(state): State<ApiState>,
    version: ApiVersion,
    request_id: RequestId,
    BaseUrl(base): BaseUrl,
    ApiQuery(query): ApiQuery<LookupQuery>,
) -> Result<Json<Value>> {
    if let Some(uuid) = &query.node_uuid
        && uuid::Uuid::try_parse(uuid).is_err()
    {
        return Err(Error::InvalidParameterValue(format!(
            "Expected UUID for node_uuid: {uuid}"
        )));
    }
    let macs = query
        .addresses
        .as_deref()
        .map(valid_macs)
        .unwrap_or_default();
    let node = match (&query.node_uuid, macs.is_empty()) {
        (None, true) => {
            return Err(Error::InvalidParameterValue(
                "At least one of 'addresses' and 'node_uuid' parameters is required".to_owned(),
            ));
        }
        (Some(uuid), _) => db::nodes::get_by_uuid(&state.db, uuid).await,
        (None, false) => match db::ports::nodes_with_addresses(&state.db, &macs).await?[..] {
            [ref uuid] => db::nodes::get_by_uuid(&state.db, uuid).await,
            [] => Err(not_found()),
            // Ironic's DuplicateNodeOnLookup, a NodeNotFound to the client.
            _ => {
                warn!(
                    ?macs,
                    "Multiple nodes with port addresses {macs:?} were found"
                );
                Err(not_found())
            }
        },
    };
    let node = match node {
        Ok(node) => node,
        Err(Error::NodeNotFound { .. } | Error::NotFound(_)) => return Err(not_found()),
        Err(e) => return Err(e),
    };
    if state.config.restrict_lookup && !node.provision_state.lookup_allowed() {
        warn!(node.uuid = %node.uuid, state = %node.provision_state,
            "Lookup is not allowed for node {} in the provision state {}",
            node.uuid, node.provision_state);
        return Err(not_found());
    }
    let with_token = version.at_least(AGENT_TOKEN_SINCE);
    let node = if with_token {
        node_with_token(&state, &request_id, node).await?
    } else {
        node
    };
    Ok(Json(json!({
        "node": resource::render_some(&View::new(&node, version.0, &base), LOOKUP_FIELDS),
        "config": agent_config(&state, &node, with_token),
    })))
}

/// The node with its agent token, which its conductor makes on the first ask (1.62).
async fn node_with_token(state: &ApiState, request_id: &RequestId, node: Node) -> Result<Node> {
    call(
        state,
        request_id,
        RpcRequest::GetNodeWithToken {
            node: Box::new(node),
        },
    )
    .await?
    .into_node()
}

/// What the agent is told with its node (Ironic's `ramdisk.config`, its options at Ironic's
/// defaults but the heartbeat timeout). The token only from 1.62: below it the node has none
/// that lookup made, and one made otherwise is never shown.
fn agent_config(state: &ApiState, node: &Node, with_token: bool) -> Value {
    let management = node.interfaces.get(InterfaceKind::Management);
    let mut config = json!({
        "metrics": {
            "backend": "noop",
            "prepend_host": false,
            "prepend_uuid": false,
            "prepend_host_reverse": true,
            "global_prefix": null,
        },
        "metrics_statsd": {"statsd_host": "localhost", "statsd_port": 8125},
        "heartbeat_timeout": state.config.ramdisk_heartbeat_timeout.as_secs(),
        "agent_containers": {
            "allow_arbitrary_containers": false,
            "allowed_containers": [],
            "container_steps_file": "/etc/ironic-python-agent.d/mysteps.yaml",
            "runner": "podman",
            "pull_options": [],
            "run_options": ["--rm", "--network=host"],
        },
        "agent_md5_checksum_enable": true,
        "disable_deep_image_inspection": false,
        "permitted_image_formats": ["raw", "gpt", "qcow2", "iso"],
        "agent_skip_bmc_detect": matches!(management, "redfish" | "idrac-redfish"),
        "enable_bios_bootloader_install": false,
        "tls_min_version": "1.3",
        "tls_cipher_suites": null,
    });
    if with_token {
        config["agent_token"] = node
            .driver_internal_info
            .get(crate::node::AGENT_TOKEN_KEY)
            .cloned()
            .unwrap_or(Value::Null);
        config["agent_token_required"] = Value::Bool(true);
    }
    config
}

/// A heartbeat's body. The values are read as JSON so that a value of the wrong type gets
/// Ironic's message naming it.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HeartbeatBody {
    /// The node, when the path does not name it (`POST /v1/heartbeat`).
    node_ident: Option<Value>,
    callback_url: Option<Value>,
    agent_version: Option<Value>,
    agent_token: Option<Value>,
    agent_verify_ca: Option<Value>,
    agent_status: Option<Value>,
    agent_status_message: Option<Value>,
}

/// A string argument, or Ironic's 400 naming it (`args.string`); JSON null is absent.
fn string(name: &str, value: Option<Value>) -> Result<Option<String>> {
    match value {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(other) => Err(Error::InvalidParameterValue(format!(
            "Expected string for {name}: {other}"
        ))),
    }
}

/// The callback URL as Ironic's `urlparse` check takes it: a scheme that contains `http` (so
/// `http` and `https`), lower-cased, and a well-formed bracketed host; `""` is accepted (a
/// one-way ramdisk sends it).
fn check_callback_url(url: &str) -> Result<String> {
    if url.is_empty() {
        return Ok(String::new());
    }
    let bad = || {
        Error::InvalidParameterValue(
            "An issue with the supplied \"callback_url\" has been detected.".to_owned(),
        )
    };
    let (scheme, rest) = url.split_once(':').ok_or_else(bad)?;
    let scheme_ok = scheme.starts_with(|c: char| c.is_ascii_alphabetic())
        && scheme
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'));
    let scheme = scheme.to_ascii_lowercase();
    if !scheme_ok || !scheme.contains("http") {
        return Err(bad());
    }
    let host = rest
        .strip_prefix("//")
        .map(|r| r.split(['/', '?', '#']).next().unwrap_or(""))
        .unwrap_or("");
    if host.contains('[') != host.contains(']') {
        return Err(bad());
    }
    Ok(format!("{scheme}:{rest}"))
}

/// POST /v1/heartbeat/{node uuid or name}: 202 with no body.
pub async fn heartbeat(
    State(state): State<ApiState>,
    version: ApiVersion,
    request_id: RequestId,
    suffix: JsonSuffix,
    ApiPath(ident): ApiPath<String>,
    OptionalJson(body): OptionalJson<HeartbeatBody>,
) -> Result<StatusCode> {
    let body = body.unwrap_or_default();
    if body.node_ident.is_some() {
        return Err(Error::InvalidParameterValue(
            "Unexpected arguments: node_ident".to_owned(),
        ));
    }
    process_heartbeat(&state, version, &request_id, suffix, &ident, body).await
}

/// POST /v1/heartbeat with the node in the body (`node_ident`): Ironic's heartbeat handler
/// takes its arguments from the path and the body alike (pecan passes a JSON body's keys as
/// arguments; `HeartbeatController.post`, `ironic/api/controllers/v1/ramdisk.py`), so the node
/// may be named in either. Without it: 400, at any version.
pub async fn heartbeat_named_in_body(
    State(state): State<ApiState>,
    version: ApiVersion,
    request_id: RequestId,
    suffix: JsonSuffix,
    OptionalJson(body): OptionalJson<HeartbeatBody>,
) -> Result<StatusCode> {
    let mut body = body.unwrap_or_default();
    let ident = string("node_ident", body.node_ident.take())?.ok_or_else(|| {
        Error::MissingParameterValue("Missing mandatory parameter: node_ident".to_owned())
    })?;
    process_heartbeat(&state, version, &request_id, suffix, &ident, body).await
}

/// A heartbeat from the agent on node `ident`: its arguments checked as Ironic's handler checks
/// them, then handed to the node's conductor.
async fn process_heartbeat(
    state: &ApiState,
    version: ApiVersion,
    request_id: &RequestId,
    suffix: JsonSuffix,
    ident: &str,
    body: HeartbeatBody,
) -> Result<StatusCode> {
    version.require_resource(SINCE)?;
    let agent_version = string("agent_version", body.agent_version)?;
    if agent_version.is_some() && !version.at_least(AGENT_VERSION_SINCE) {
        return Err(Error::InvalidParameterValue(
            "Field \"agent_version\" not recognised".to_owned(),
        ));
    }
    let agent_status = string("agent_status", body.agent_status)?;
    let agent_status_message = string("agent_status_message", body.agent_status_message)?;
    // Ironic tests them for truth: an empty string is not refused.
    let given = |v: &Option<String>| v.as_deref().is_some_and(|s| !s.is_empty());
    if (given(&agent_status) || given(&agent_status_message))
        && !version.at_least(AGENT_STATUS_SINCE)
    {
        return Err(Error::InvalidParameterValue(
            "Fields \"agent_status\" and \"agent_status_message\" not recognised.".to_owned(),
        ));
    }
    let agent_verify_ca = string("agent_verify_ca", body.agent_verify_ca)?;
    if agent_verify_ca.is_some() && !version.at_least(VERIFY_CA_SINCE) {
        return Err(Error::InvalidParameterValue(
            "Field \"agent_verify_ca\" not recognised in this version".to_owned(),
        ));
    }
    let callback_url = string("callback_url", body.callback_url)?.ok_or_else(|| {
        Error::MissingParameterValue("Missing mandatory parameter: callback_url".to_owned())
    })?;
    let agent_token = string("agent_token", body.agent_token)?;
    let node = suffix
        .find(ident, |i| async move { find(state, &i, version).await })
        .await?;
    let callback_url = check_callback_url(&callback_url)?;
    let recorded = node
        .driver_internal_info
        .get("agent_url")
        .and_then(Value::as_str);
    if recorded.is_some_and(|url| url != callback_url) {
        warn!(node.uuid = %node.uuid, url = %callback_url,
            "Received heartbeat for node {} with callback URL {callback_url}, not the one recorded; not processed",
            node.uuid);
        return Err(Error::InvalidParameterValue(
            "Detected change in ramdisk provided \"callback_url\"".to_owned(),
        ));
    }
    // From 1.62, where lookup hands tokens out, a heartbeat must carry one (Ironic requires it
    // at every version: its lookups always make one).
    if agent_token.is_none() && version.at_least(AGENT_TOKEN_SINCE) {
        return Err(Error::InvalidParameterValue(
            "Agent token is required for heartbeat processing.".to_owned(),
        ));
    }
    if let Some(status) = &agent_status
        && !AGENT_STATUSES.contains(&status.as_str())
    {
        warn!(node.uuid = %node.uuid, agent_status = %status,
            "Agent heartbeat received for node {} has an invalid agent status: {status}", node.uuid);
        return Err(Error::InvalidParameterValue(format!(
            "Agent status is invalid. Valid states are {}.",
            AGENT_STATUSES.join(",")
        )));
    }
    let heartbeat = Heartbeat {
        callback_url,
        agent_version,
        agent_token,
        agent_verify_ca,
        agent_status,
        agent_status_message,
    };
    call(
        state,
        request_id,
        RpcRequest::Heartbeat {
            node: Box::new(node),
            heartbeat,
        },
    )
    .await?;
    Ok(StatusCode::ACCEPTED)
}

#[derive(Debug, Default, Deserialize)]
pub struct ContinueInspectionQuery {
    node_uuid: Option<String>,
}

/// POST /v1/continue_inspection[?node_uuid=]: the agent of a node in `inspect wait` sends its
/// inventory (and, beside it, what its collectors gathered: the plugin data). The node is found
/// by the inventory's MAC addresses through its ports, or by `node_uuid` (1.84), and must be in
/// `inspect wait`; anything else is the same undisclosing 404 as lookup's. Its conductor takes
/// the data and finishes the inspection after the reply. Ironic also finds nodes by the
/// inventory's BMC addresses and can enroll unknown ones (auto-discovery); Ferrum does neither.
pub async fn continue_inspection(
    State(state): State<ApiState>,
    version: ApiVersion,
    request_id: RequestId,
    BaseUrl(base): BaseUrl,
    ApiQuery(query): ApiQuery<ContinueInspectionQuery>,
    ApiJson(mut data): ApiJson<JsonObject>,
) -> Result<(StatusCode, Json<Value>)> {
    let current = version.at_least(CONTINUE_INSPECTION_SINCE);
    if !current && (version.0 != 1 || query.node_uuid.is_some()) {
        return Err(Error::NotFound(format!(
            "API version 1.{CONTINUE_INSPECTION_SINCE} or newer is required"
        )));
    }
    if let Some(uuid) = &query.node_uuid
        && uuid::Uuid::try_parse(uuid).is_err()
    {
        return Err(Error::InvalidParameterValue(format!(
            "Expected UUID for node_uuid: {uuid}"
        )));
    }
    let inventory = inspection_inventory(&mut data)?;
    let macs: Vec<String> = inventory["interfaces"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|iface| iface["mac_address"].as_str())
        .filter_map(|mac| normalize_mac(mac).ok())
        .collect();
    let bmc_addresses: Vec<String> = ["bmc_address", "bmc_v6address"]
        .iter()
        .filter_map(|key| inventory.get(*key).and_then(Value::as_str))
        .filter(|address| !address.is_empty())
        .map(str::to_owned)
        .collect();
    if macs.is_empty() && bmc_addresses.is_empty() && query.node_uuid.is_none() {
        return Err(Error::InvalidParameterValue(
            "No lookup information provided".to_owned(),
        ));
    }
    let node = inspected_node(&state, query.node_uuid.as_deref(), &macs, &bmc_addresses).await?;
    let node = if current {
        node_with_token(&state, &request_id, node).await?
    } else {
        node
    };
    let uuid = node.uuid.clone();
    let reply = if current {
        json!({
            "node": resource::render_some(&View::new(&node, version.0, &base), LOOKUP_FIELDS),
            "config": agent_config(&state, &node, true),
        })
    } else {
        json!({ "uuid": uuid })
    };
    call(
        &state,
        &request_id,
        RpcRequest::ContinueInspection {
            node: Box::new(node),
            inventory,
            plugin_data: data,
        },
    )
    .await?;
    Ok((StatusCode::ACCEPTED, Json(reply)))
}

/// Takes the inventory out of the posted data, checked as Ironic's schema checks it: an object
/// with a non-empty list of interfaces, each an object with a string `mac_address`, and BMC
/// addresses that are strings or null.
fn inspection_inventory(data: &mut JsonObject) -> Result<JsonObject> {
    let invalid =
        |why: &str| Error::InvalidParameterValue(format!("Invalid inspection data: {why}"));
    let Some(inventory) = data.remove("inventory") else {
        return Err(invalid("'inventory' is a required property"));
    };
    let Value::Object(inventory) = inventory else {
        return Err(invalid("'inventory' must be an object"));
    };
    for key in ["bmc_address", "bmc_v6address"] {
        if inventory
            .get(key)
            .is_some_and(|v| !v.is_string() && !v.is_null())
        {
            return Err(invalid(&format!(
                "inventory '{key}' must be a string or null"
            )));
        }
    }
    let interfaces = match inventory.get("interfaces") {
        Some(Value::Array(interfaces)) if !interfaces.is_empty() => interfaces,
        Some(Value::Array(_)) => return Err(invalid("inventory 'interfaces' must not be empty")),
        Some(_) => return Err(invalid("inventory 'interfaces' must be a list")),
        None => {
            return Err(invalid(
                "'interfaces' is a required property of the inventory",
            ));
        }
    };
    for iface in interfaces {
        if !iface.get("mac_address").is_some_and(Value::is_string) {
            return Err(invalid(&format!(
                "each inventory interface needs a string 'mac_address': {iface}"
            )));
        }
    }
    Ok(inventory)
}

/// The node an inspection's data names (Ironic's `lookup_node`): by `node_uuid` if given, by
/// its ports' MAC addresses otherwise (which must then agree with it), else by the BMC address
/// the agent reports among those kept by the nodes in `inspect wait` (a node without ports,
/// inspected unmanaged), which must name one node, and the one found, if any; in `inspect wait`.
/// Every failure is the same 404, disclosing nothing.
async fn inspected_node(
    state: &ApiState,
    node_uuid: Option<&str>,
    macs: &[String],
    bmc_addresses: &[String],
) -> Result<Node> {
    let by_macs = if macs.is_empty() {
        None
    } else {
        match db::ports::nodes_with_addresses(&state.db, macs).await?[..] {
            [ref uuid] => Some(uuid.clone()),
            [] => None,
            _ => {
                warn!(
                    ?macs,
                    "Multiple nodes with port addresses {macs:?} were found during inspection lookup"
                );
                return Err(not_found());
            }
        }
    };
    let known = match (node_uuid, by_macs) {
        (Some(given), Some(found)) if !given.eq_ignore_ascii_case(&found) => {
            warn!(node.uuid = %given, ?macs, "Inspection lookup with node {given} found node {found} by MAC addresses {macs:?}");
            return Err(not_found());
        }
        (Some(given), _) => Some(given.to_ascii_lowercase()),
        (None, found) => found,
    };
    let by_bmc = if bmc_addresses.is_empty() {
        Vec::new()
    } else {
        db::nodes::internal_info_in_state(&state.db, ProvisionState::InspectWait)
            .await?
            .into_iter()
            .filter(|(_, info)| {
                info.get(LOOKUP_BMC_ADDRESSES)
                    .and_then(Value::as_array)
                    .is_some_and(|kept| {
                        kept.iter()
                            .filter_map(Value::as_str)
                            .any(|a| bmc_addresses.iter().any(|b| b == a))
                    })
            })
            .map(|(uuid, _)| uuid)
            .collect()
    };
    let uuid = match (known, &by_bmc[..]) {
        (Some(known), []) => known,
        (Some(known), found) if found.contains(&known) => known,
        (Some(known), found) => {
            warn!(node.uuid = %known, ?macs, ?bmc_addresses, "Inspection lookup: nodes {found:?} have BMC addresses {bmc_addresses:?}, node {known} the MAC addresses {macs:?}");
            return Err(not_found());
        }
        (None, [found]) => found.clone(),
        (None, []) => {
            warn!(
                ?macs,
                ?bmc_addresses,
                "No nodes satisfy MAC addresses {macs:?} and BMC addresses {bmc_addresses:?} during inspection lookup"
            );
            return Err(not_found());
        }
        (None, found) => {
            warn!(
                ?macs,
                ?bmc_addresses,
                "Several nodes {found:?} satisfy BMC addresses {bmc_addresses:?} and none MAC addresses {macs:?}: they need ports to be inspected"
            );
            return Err(not_found());
        }
    };
    let node = match db::nodes::get_by_uuid(&state.db, &uuid).await {
        Ok(node) => node,
        Err(Error::NodeNotFound { .. }) => return Err(not_found()),
        Err(e) => return Err(e),
    };
    if node.provision_state != ProvisionState::InspectWait {
        warn!(node.uuid = %node.uuid, state = %node.provision_state,
            "Node {} was found during inspection lookup, but it is in provision state {}",
            node.uuid, node.provision_state);
        return Err(not_found());
    }
    Ok(node)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn invalid_addresses_are_ignored() {
        assert_eq!(
            valid_macs("52:54:00:AA:BB:01, nonsense,,52:54:00:aa:bb:01,52:54:00:aa:bb:02"),
            ["52:54:00:aa:bb:01", "52:54:00:aa:bb:02"]
        );
        assert!(valid_macs("zz:zz, ").is_empty());
    }

    #[test]
    fn callback_urls_as_ironic_checks_them() {
        for (url, ok) in [
            ("http://10.0.0.5:9999", Some("http://10.0.0.5:9999")),
            ("HTTPS://[fd00::5]:9999/", Some("https://[fd00::5]:9999/")),
            ("", Some("")),
            ("ftp://10.0.0.5", None),
            ("10.0.0.5:9999", None),
            ("no scheme", None),
            ("http://[fd00::5:9999", None),
            ("1http://x", None),
        ] {
            let got = check_callback_url(url).ok();
            assert_eq!(got.as_deref(), ok, "{url}");
        }
    }
}
