//! /v1/nodes: create, list, show, patch, delete, and the provision and power state verbs.
//! Reads come straight from the database; every change is an RPC to the node's conductor, which
//! takes the node's lock (the API never changes a provision state itself).

use axum::{
    Json,
    extract::State,
    http::{HeaderValue, StatusCode, header},
    response::{IntoResponse, Response},
};
use serde::Deserialize;
use serde_json::{Value, json};

use super::{
    ApiState, BaseUrl,
    extract::{ApiJson, ApiPath, ApiQuery, ApiVersion, OptionalJson, RequestId},
    views,
};
use crate::{
    db::{self, nodes::NodeIdent},
    error::{Error, Result},
    node::{
        JsonObject, Node, PowerTarget, Verb, fields, normalize_conductor_group, normalize_uuid,
    },
    patch::{self, PatchOp},
    rpc::{NodeCreate, Route, RpcReply, RpcRequest},
    states::ProvisionState,
};

/// Refuses a field newer than the negotiated version (406), as Ironic does.
pub(super) fn require_version(version: ApiVersion, minor: u32, what: &str) -> Result<()> {
    if version.at_least(minor) {
        Ok(())
    } else {
        Err(Error::NotAcceptable(format!(
            "{what} requires API version 1.{minor} or later; this request asked for {version}."
        )))
    }
}

/// Sends `req` to the conductor of its node. If that conductor turns out to be gone (its queue
/// is), the ring is read afresh and, when it now names another conductor, the call goes there once.
pub(super) async fn call(
    state: &ApiState,
    request_id: &RequestId,
    req: RpcRequest,
) -> Result<RpcReply> {
    let host = state.router.host_for(&req.routing()).await?;
    let reply = state.rpc.call(&host, &request_id.0, req.clone()).await;
    // Never delivered (unreachable), or delivered to a conductor that died before it answered
    // (lost): safe to send again either way, to the conductor that takes the node over when the
    // gone one leaves the ring, because a conductor applies a request id to a node at most once.
    let gone = match &reply {
        Err(Error::ConductorUnreachable { host } | Error::ConductorLost { host }) => host.clone(),
        _ => return reply,
    };
    match state.router.host_instead_of(&req.routing(), &gone).await? {
        Some(next) => state.rpc.call(&next, &request_id.0, req).await,
        None => reply,
    }
}

/// The field `name` of a request body, checked against the field table: a field the node does
/// not have, or that this kind of request cannot write, is refused as Ironic refuses unexpected
/// arguments (400); one newer than the negotiated version is 406.
fn check_written_field(
    version: ApiVersion,
    name: &str,
    allowed: fn(&fields::Write) -> bool,
) -> Result<()> {
    let field = fields::field(name)
        .filter(|f| f.write.as_ref().is_some_and(allowed))
        .ok_or_else(|| Error::InvalidParameterValue(format!("Unexpected arguments: {name}")))?;
    require_version(version, field.since, name)
}

pub async fn create(
    State(state): State<ApiState>,
    version: ApiVersion,
    request_id: RequestId,
    BaseUrl(base): BaseUrl,
    ApiJson(mut body): ApiJson<JsonObject>,
) -> Result<Response> {
    for name in body.keys() {
        check_written_field(version, name, |w| w.create)?;
    }
    let text = |name: &str, value: &Value| match value {
        Value::String(s) => Ok(s.clone()),
        other => Err(fields::wrong(name, "a string", other)),
    };
    let driver = match body.get("driver") {
        Some(d) => text("driver", d)?,
        None => {
            return Err(Error::MissingParameterValue(
                "Missing mandatory parameter: driver".to_owned(),
            ));
        }
    };
    let uuid = match body.remove("uuid") {
        Some(u) => normalize_uuid("uuid", &text("uuid", &u)?)?,
        None => uuid::Uuid::new_v4().to_string(),
    };
    let conductor_group = match body.get("conductor_group") {
        Some(g) => normalize_conductor_group(&text("conductor_group", g)?)?,
        None => String::new(),
    };
    let initial_state = if version.at_least(11) {
        ProvisionState::Enroll
    } else {
        ProvisionState::Available
    };
    let create = NodeCreate {
        uuid,
        driver,
        conductor_group,
        initial_state,
        fields: body,
    };
    let reply = call(
        &state,
        &request_id,
        RpcRequest::CreateNode {
            node: Box::new(create),
        },
    )
    .await?;
    let RpcReply::Node(node) = reply else {
        return Err(Error::internal("create_node answered without a node"));
    };
    let location = format!("{base}/v1/nodes/{}", node.uuid);
    let mut response = (
        StatusCode::CREATED,
        Json(detail(&state, &node, version, &base).await?),
    )
        .into_response();
    if let Ok(v) = HeaderValue::from_str(&location) {
        response.headers_mut().insert(header::LOCATION, v);
    }
    Ok(response)
}

#[derive(Debug, Default, Deserialize)]
pub struct ListQuery {
    limit: Option<i64>,
    marker: Option<String>,
    sort_key: Option<String>,
    sort_dir: Option<String>,
    fields: Option<String>,
    detail: Option<String>,
    provision_state: Option<String>,
    maintenance: Option<String>,
    driver: Option<String>,
    associated: Option<String>,
    instance_uuid: Option<String>,
    resource_class: Option<String>,
    conductor_group: Option<String>,
    fault: Option<String>,
    conductor: Option<String>,
    chassis_uuid: Option<String>,
}

/// Ironic's `faults.VALID_FAULTS`.
pub const VALID_FAULTS: &[&str] = &[
    "power failure",
    "clean failure",
    "rescue abort failure",
    "service failure",
];

const MAX_LIMIT: i64 = 1000;

fn parse_bool(name: &str, value: &str) -> Result<bool> {
    match value.to_ascii_lowercase().as_str() {
        "true" | "1" | "yes" | "on" => Ok(true),
        "false" | "0" | "no" | "off" => Ok(false),
        _ => Err(Error::InvalidParameterValue(format!(
            "Invalid value for {name}: '{value}' is not a boolean."
        ))),
    }
}

/// The query string of the next page: every filter of this one, then limit and marker
/// (Ironic's `next` link drops provision_state, driver, resource_class, conductor_group and
/// other filters: `_get_nodes_collection` in `ironic/api/controllers/v1/node.py`).
fn next_link(base: &str, path: &str, q: &ListQuery, limit: i64, marker: &str) -> String {
    let params = [
        ("sort_key", &q.sort_key),
        ("sort_dir", &q.sort_dir),
        ("fields", &q.fields),
        ("detail", &q.detail),
        ("provision_state", &q.provision_state),
        ("maintenance", &q.maintenance),
        ("driver", &q.driver),
        ("associated", &q.associated),
        ("resource_class", &q.resource_class),
        ("conductor_group", &q.conductor_group),
        ("fault", &q.fault),
        ("conductor", &q.conductor),
    ];
    let mut url = format!("{base}/v1/{path}?");
    for (k, v) in params {
        if let Some(v) = v {
            url.push_str(&format!("{k}={}&", encode_query_value(v)));
        }
    }
    url.push_str(&format!("limit={limit}&marker={marker}"));
    url
}

fn encode_query_value(v: &str) -> String {
    v.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' | b',' => {
                (b as char).to_string()
            }
            other => format!("%{other:02X}"),
        })
        .collect()
}

async fn list_page(
    state: &ApiState,
    q: &ListQuery,
    version: ApiVersion,
    base: &str,
    detail_path: bool,
) -> Result<Value> {
    let limit = match q.limit {
        Some(l) if l <= 0 => {
            return Err(Error::InvalidParameterValue(format!(
                "Value must be positive: limit={l}"
            )));
        }
        Some(l) => l.min(MAX_LIMIT),
        None => MAX_LIMIT,
    };
    let detail_param = match &q.detail {
        Some(d) => {
            require_version(version, 43, "The detail parameter")?;
            parse_bool("detail", d)?
        }
        None => false,
    };
    if detail_path && q.detail.is_some() {
        return Err(Error::InvalidParameterValue(
            "The detail parameter cannot be used on /v1/nodes/detail.".to_owned(),
        ));
    }
    let detail = detail_path || detail_param;
    let fields: Option<Vec<String>> = match &q.fields {
        Some(f) => {
            require_version(version, 8, "The fields parameter")?;
            if detail {
                return Err(Error::InvalidParameterValue(
                    "Can not specify ?detail=True and fields in the same request.".to_owned(),
                ));
            }
            let names: Vec<String> = f
                .split(',')
                .map(|s| s.trim().to_owned())
                .filter(|s| !s.is_empty())
                .collect();
            views::check_field_names(version, &names)?;
            Some(names)
        }
        None => None,
    };
    let sort = match q.sort_key.as_deref() {
        None => db::nodes::SortKey::Id,
        Some(k) => db::nodes::SortKey::parse(k).ok_or_else(|| {
            Error::InvalidParameterValue(format!(
                "The sort_key value \"{k}\" is an invalid field for sorting; use one of {}.",
                db::nodes::SortKey::NAMES.join(", ")
            ))
        })?,
    };
    let descending = match q.sort_dir.as_deref() {
        None | Some("asc") => false,
        Some("desc") => true,
        Some(other) => {
            return Err(Error::InvalidParameterValue(format!(
                "Invalid sort direction: {other}. Acceptable values are 'asc' or 'desc'"
            )));
        }
    };
    let mut filter = db::nodes::NodeFilter::default();
    if let Some(s) = &q.provision_state {
        require_version(version, 9, "The provision_state filter")?;
        let Some(wanted) = ProvisionState::from_api_name(s) else {
            return Err(Error::InvalidParameterValue(format!(
                "Invalid value for provision_state: '{s}' is not a provision state."
            )));
        };
        filter.provision_state = Some(wanted);
    }
    if let Some(m) = &q.maintenance {
        filter.maintenance = Some(parse_bool("maintenance", m)?);
    }
    if let Some(d) = &q.driver {
        require_version(version, 16, "The driver filter")?;
        filter.driver = Some(d.clone());
    }
    if let Some(a) = &q.associated {
        filter.associated = Some(parse_bool("associated", a)?);
    }
    if let Some(c) = &q.chassis_uuid {
        // Ferrum has no chassis yet, so no node is in one.
        normalize_uuid("chassis_uuid", c)?;
        return Ok(json!({ "nodes": [] }));
    }
    if let Some(i) = &q.instance_uuid {
        filter.instance_uuid = Some(normalize_uuid("instance_uuid", i)?);
    }
    if let Some(r) = &q.resource_class {
        require_version(version, 21, "The resource_class filter")?;
        filter.resource_class = Some(r.clone());
    }
    if let Some(g) = &q.conductor_group {
        require_version(version, 46, "The conductor_group filter")?;
        filter.conductor_group = Some(g.clone());
    }
    if let Some(f) = &q.fault {
        require_version(version, 42, "The fault filter")?;
        if !VALID_FAULTS.contains(&f.as_str()) {
            return Err(Error::InvalidParameterValue(format!(
                "Unrecognized fault \"{f}\" is specified, allowed faults are {}",
                VALID_FAULTS.join(", ")
            )));
        }
        filter.fault = Some(f.clone());
    }
    if q.conductor.is_some() {
        require_version(version, 49, "The conductor filter")?;
    }
    let nodes = db::nodes::list_filtered(
        &state.db,
        &filter,
        sort,
        descending,
        limit,
        q.marker.as_deref(),
    )
    .await?;
    let wants_conductor = q.conductor.is_some()
        || match &fields {
            Some(fields) => fields.iter().any(|f| f == "conductor"),
            None => detail,
        };
    let mut items = Vec::with_capacity(nodes.len());
    for n in &nodes {
        let conductor = if wants_conductor {
            conductor_shown(state, n, version).await?
        } else {
            None
        };
        // As in Ironic, the conductor filter applies to the page read, so a page may come out
        // short while `next` still leads on.
        if let Some(wanted) = &q.conductor
            && conductor.as_deref() != Some(wanted.as_str())
        {
            continue;
        }
        let conductor = conductor.as_deref();
        items.push(match &fields {
            Some(fields) => views::node_fields(n, version, base, conductor, fields),
            None if detail => views::node_detail(n, version, base, conductor),
            None => views::node_summary(n, version, base),
        });
    }
    let mut body = json!({ "nodes": items });
    if nodes.len() as i64 == limit
        && let Some(last) = nodes.last()
        && q.instance_uuid.is_none()
    {
        let path = if detail_path { "nodes/detail" } else { "nodes" };
        body["next"] = json!(next_link(base, path, q, limit, &last.uuid));
    }
    Ok(body)
}

pub async fn list(
    State(state): State<ApiState>,
    version: ApiVersion,
    BaseUrl(base): BaseUrl,
    ApiQuery(query): ApiQuery<ListQuery>,
) -> Result<Json<Value>> {
    list_page(&state, &query, version, &base, false)
        .await
        .map(Json)
}

pub async fn list_detail(
    State(state): State<ApiState>,
    version: ApiVersion,
    BaseUrl(base): BaseUrl,
    ApiQuery(query): ApiQuery<ListQuery>,
) -> Result<Json<Value>> {
    list_page(&state, &query, version, &base, true)
        .await
        .map(Json)
}

/// The full node at `version`, with its conductor.
async fn detail(state: &ApiState, node: &Node, version: ApiVersion, base: &str) -> Result<Value> {
    let conductor = conductor_shown(state, node, version).await?;
    Ok(views::node_detail(
        node,
        version,
        base,
        conductor.as_deref(),
    ))
}

/// The node's conductor for the `conductor` field (1.49); not computed for older versions.
async fn conductor_shown(
    state: &ApiState,
    node: &Node,
    version: ApiVersion,
) -> Result<Option<String>> {
    if !version.at_least(49) {
        return Ok(None);
    }
    state.router.conductor_of(&Route::of(node)).await
}

pub(super) async fn find(state: &ApiState, ident: &str, version: ApiVersion) -> Result<Node> {
    let ident = NodeIdent::parse(ident);
    if matches!(ident, NodeIdent::Name(_)) && !version.at_least(5) {
        // Before names existed, anything that is not a UUID is simply not a node.
        return Err(Error::node_not_found(match ident {
            NodeIdent::Uuid(s) | NodeIdent::Name(s) => s,
        }));
    }
    db::nodes::get(&state.db, ident).await
}

pub async fn show(
    State(state): State<ApiState>,
    version: ApiVersion,
    BaseUrl(base): BaseUrl,
    ApiPath(ident): ApiPath<String>,
) -> Result<Json<Value>> {
    let node = find(&state, &ident, version).await?;
    detail(&state, &node, version, &base).await.map(Json)
}

#[derive(Debug, Default, Deserialize)]
pub struct PatchQuery {
    reset_interfaces: Option<String>,
}

pub async fn update(
    State(state): State<ApiState>,
    version: ApiVersion,
    request_id: RequestId,
    BaseUrl(base): BaseUrl,
    ApiPath(ident): ApiPath<String>,
    ApiQuery(query): ApiQuery<PatchQuery>,
    ApiJson(ops): ApiJson<Vec<PatchOp>>,
) -> Result<Json<Value>> {
    patch::validate(&ops)?;
    let reset_interfaces = match &query.reset_interfaces {
        Some(r) => {
            require_version(version, 45, "The reset_interfaces parameter")?;
            parse_bool("reset_interfaces", r)?
        }
        None => false,
    };
    if reset_interfaces && !ops.iter().any(|op| op.path == "/driver") {
        return Err(Error::InvalidParameterValue(
            "The reset_interfaces parameter can only be used when changing the node's driver."
                .to_owned(),
        ));
    }
    for op in &ops {
        // patch::validate has checked that the root is a patchable field.
        let root = op
            .path
            .trim_start_matches('/')
            .split('/')
            .next()
            .unwrap_or("");
        check_written_field(version, root, |w| w.patch)?;
    }
    let node = find(&state, &ident, version).await?;
    if version.at_least(39) && node.provision_state == ProvisionState::Inspecting {
        return Err(Error::InvalidState(format!(
            "Cannot update node \"{}\" while it is in state \"inspecting\".",
            node.uuid
        )));
    }
    let moves = ops
        .iter()
        .any(|op| op.path == "/driver" || op.path == "/conductor_group");
    if moves {
        // Like Ironic, refuse a driver or group no conductor serves (400 NoValidHost) rather
        // than strand the node where no request can reach it.
        let changes = patch::apply(&node, &ops)?;
        let driver = changes.driver.as_deref().unwrap_or(&node.driver);
        let group = changes
            .conductor_group
            .as_deref()
            .unwrap_or(&node.conductor_group);
        let route = Route {
            uuid: &node.uuid,
            driver,
            group,
        };
        state.router.host_for(&route).await?;
    }
    let reply = call(
        &state,
        &request_id,
        RpcRequest::UpdateNode {
            node: Box::new(node),
            patch: ops,
            reset_interfaces,
        },
    )
    .await?;
    let RpcReply::Node(node) = reply else {
        return Err(Error::internal("update_node answered without a node"));
    };
    detail(&state, &node, version, &base).await.map(Json)
}

pub async fn delete(
    State(state): State<ApiState>,
    version: ApiVersion,
    request_id: RequestId,
    ApiPath(ident): ApiPath<String>,
) -> Result<StatusCode> {
    let node = find(&state, &ident, version).await?;
    call(
        &state,
        &request_id,
        RpcRequest::DestroyNode {
            node: Box::new(node),
        },
    )
    .await?;
    Ok(StatusCode::NO_CONTENT)
}

pub async fn states(
    State(state): State<ApiState>,
    version: ApiVersion,
    ApiPath(ident): ApiPath<String>,
) -> Result<Json<Value>> {
    let node = find(&state, &ident, version).await?;
    Ok(Json(views::node_states(&node, version)))
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProvisionBody {
    target: String,
    configdrive: Option<Value>,
    clean_steps: Option<Vec<Value>>,
    rescue_password: Option<String>,
}

/// 202 Accepted with `Location: <url>/v1/nodes/<id as given>/states`.
fn accepted(base: &str, ident: &str) -> Response {
    let mut response = StatusCode::ACCEPTED.into_response();
    if let Ok(v) = HeaderValue::from_str(&format!("{base}/v1/nodes/{ident}/states")) {
        response.headers_mut().insert(header::LOCATION, v);
    }
    response
}

pub async fn set_provision_state(
    State(state): State<ApiState>,
    version: ApiVersion,
    request_id: RequestId,
    BaseUrl(base): BaseUrl,
    ApiPath(ident): ApiPath<String>,
    ApiJson(body): ApiJson<ProvisionBody>,
) -> Result<Response> {
    let target = body.target.as_str();
    let Some(verb) = Verb::parse(target) else {
        return Err(Error::InvalidParameterValue(format!(
            "\"{target}\" is not a valid provision state target."
        )));
    };
    if !verb.is_supported() {
        return Err(Error::InvalidParameterValue(format!(
            "The provision state target \"{target}\" is not supported by Ferrum yet."
        )));
    }
    require_version(version, verb.since(), &format!("The \"{target}\" target"))?;
    if body.configdrive.is_some() && !matches!(verb, Verb::Active | Verb::Deploy | Verb::Rebuild) {
        return Err(Error::InvalidParameterValue(
            "configdrive can only be specified when deploying or rebuilding a node.".to_owned(),
        ));
    }
    if body.clean_steps.is_some() && verb != Verb::Clean {
        return Err(Error::InvalidParameterValue(
            "\"clean_steps\" is only valid when setting target provision state to clean".to_owned(),
        ));
    }
    if verb == Verb::Clean && body.clean_steps.is_none() {
        return Err(Error::InvalidParameterValue(
            "\"clean_steps\" is required when setting target provision state to clean".to_owned(),
        ));
    }
    if body.rescue_password.is_some() {
        require_version(version, 38, "rescue_password")?;
        if verb != Verb::Rescue {
            return Err(Error::InvalidParameterValue(
                "\"rescue_password\" is only valid when setting target provision state to rescue"
                    .to_owned(),
            ));
        }
    }
    if body.configdrive.is_some() && verb == Verb::Rebuild {
        require_version(version, 35, "configdrive on rebuild")?;
    }
    let node = find(&state, &ident, version).await?;
    let node = Box::new(node);
    let request = match verb {
        Verb::Active | Verb::Deploy => RpcRequest::DoNodeDeploy {
            node,
            rebuild: false,
            configdrive: body.configdrive,
        },
        Verb::Rebuild => RpcRequest::DoNodeDeploy {
            node,
            rebuild: true,
            configdrive: body.configdrive,
        },
        Verb::Deleted | Verb::Undeploy => RpcRequest::DoNodeTearDown { node },
        Verb::Rescue => {
            let password = body.rescue_password.unwrap_or_default();
            if password.trim().is_empty() {
                return Err(Error::InvalidParameterValue(
                    "A non-empty \"rescue_password\" is required when setting target provision state to rescue".to_owned(),
                ));
            }
            RpcRequest::DoNodeRescue {
                node,
                rescue_password: password,
            }
        }
        Verb::Unrescue => RpcRequest::DoNodeUnrescue { node },
        Verb::Clean => RpcRequest::DoNodeClean {
            node,
            clean_steps: body.clean_steps.unwrap_or_default(),
        },
        Verb::Manage
        | Verb::Provide
        | Verb::Inspect
        | Verb::Abort
        | Verb::Adopt
        | Verb::Unhold
        | Verb::Service => RpcRequest::DoProvisioningAction { node, action: verb },
    };
    call(&state, &request_id, request).await?;
    Ok(accepted(&base, &ident))
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PowerBody {
    target: String,
    timeout: Option<i64>,
}

pub async fn set_power_state(
    State(state): State<ApiState>,
    version: ApiVersion,
    request_id: RequestId,
    BaseUrl(base): BaseUrl,
    ApiPath(ident): ApiPath<String>,
    ApiJson(body): ApiJson<PowerBody>,
) -> Result<Response> {
    let target = PowerTarget::parse(&body.target)?;
    if target.is_soft() || body.timeout.is_some() {
        require_version(version, 27, "Soft power actions and timeout")?;
    }
    let timeout = match body.timeout {
        Some(t) if t < 1 => {
            return Err(Error::InvalidParameterValue(format!(
                "timeout has to be positive integer, got {t}"
            )));
        }
        Some(t) => Some(u32::try_from(t).unwrap_or(u32::MAX)),
        None => None,
    };
    let node = find(&state, &ident, version).await?;
    call(
        &state,
        &request_id,
        RpcRequest::ChangeNodePowerState {
            node: Box::new(node),
            new_state: target,
            timeout,
        },
    )
    .await?;
    Ok(accepted(&base, &ident))
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MaintenanceBody {
    reason: Option<String>,
}

/// PUT /v1/nodes/{id}/maintenance: 202; the reason is optional.
pub async fn set_maintenance(
    State(state): State<ApiState>,
    version: ApiVersion,
    request_id: RequestId,
    ApiPath(ident): ApiPath<String>,
    OptionalJson(body): OptionalJson<MaintenanceBody>,
) -> Result<StatusCode> {
    let node = find(&state, &ident, version).await?;
    let reason = body.and_then(|b| b.reason);
    call(
        &state,
        &request_id,
        RpcRequest::SetMaintenance {
            node: Box::new(node),
            maintenance: true,
            reason,
        },
    )
    .await?;
    Ok(StatusCode::ACCEPTED)
}

/// DELETE /v1/nodes/{id}/maintenance: 202.
pub async fn unset_maintenance(
    State(state): State<ApiState>,
    version: ApiVersion,
    request_id: RequestId,
    ApiPath(ident): ApiPath<String>,
) -> Result<StatusCode> {
    let node = find(&state, &ident, version).await?;
    call(
        &state,
        &request_id,
        RpcRequest::SetMaintenance {
            node: Box::new(node),
            maintenance: false,
            reason: None,
        },
    )
    .await?;
    Ok(StatusCode::ACCEPTED)
}

/// GET /v1/nodes/{id}/validate: `{<interface>: {"result": bool|null, "reason"?: str}}`.
pub async fn validate(
    State(state): State<ApiState>,
    version: ApiVersion,
    request_id: RequestId,
    ApiPath(ident): ApiPath<String>,
) -> Result<Json<Value>> {
    let node = find(&state, &ident, version).await?;
    let reply = call(
        &state,
        &request_id,
        RpcRequest::ValidateDriverInterfaces {
            node: Box::new(node),
        },
    )
    .await?;
    let RpcReply::Validation(results) = reply else {
        return Err(Error::internal("validate answered without results"));
    };
    let mut body = serde_json::Map::new();
    for v in results {
        let mut entry = serde_json::Map::new();
        entry.insert("result".into(), json!(v.result));
        if let Some(reason) = v.reason {
            entry.insert("reason".into(), json!(reason));
        }
        body.insert(v.interface, Value::Object(entry));
    }
    Ok(Json(Value::Object(body)))
}

/// GET /v1/nodes/{id}/states/console.
pub async fn console(
    State(state): State<ApiState>,
    version: ApiVersion,
    ApiPath(ident): ApiPath<String>,
) -> Result<Json<Value>> {
    let node = find(&state, &ident, version).await?;
    let info = if node.console_enabled {
        json!({"type": "fake", "url": format!("fake://{}", node.uuid)})
    } else {
        Value::Null
    };
    Ok(Json(json!({
        "console_enabled": node.console_enabled,
        "console_info": info,
    })))
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConsoleBody {
    enabled: bool,
}

/// PUT /v1/nodes/{id}/states/console: 202.
pub async fn set_console(
    State(state): State<ApiState>,
    version: ApiVersion,
    request_id: RequestId,
    BaseUrl(base): BaseUrl,
    ApiPath(ident): ApiPath<String>,
    ApiJson(body): ApiJson<ConsoleBody>,
) -> Result<Response> {
    let node = find(&state, &ident, version).await?;
    call(
        &state,
        &request_id,
        RpcRequest::SetConsoleMode {
            node: Box::new(node),
            enabled: body.enabled,
        },
    )
    .await?;
    Ok(accepted(&base, &ident))
}
