//! /v1/nodes: one module per verb (create, list, show, update, delete, and the provision, power,
//! maintenance, management, validate, console and RAID verbs), and what they share: finding the node, calling its
//! conductor, the version gates.
//! Reads come straight from the database; every change is an RPC to the node's conductor, which
//! takes the node's lock (the API never changes a provision state itself).

pub mod boot_mode;
pub mod children;
pub mod console;
pub mod create;
pub mod delete;
pub mod indicators;
pub mod list;
pub mod maintenance;
pub mod management;
pub mod power;
pub mod provision;
pub mod raid;
pub mod show;
pub mod update;
pub mod validate;
pub mod vifs;
pub mod vmedia;

use axum::{
    extract::FromRequestParts,
    http::{HeaderValue, StatusCode, header, request::Parts},
    response::{IntoResponse, Response},
};
use serde_json::Value;

use super::{
    ApiState,
    extract::{ApiPath, ApiVersion, RequestId},
    views,
};
use crate::{
    db::{self, nodes::NodeIdent},
    error::{Error, Result},
    node::{Node, fields},
    rpc::{Route, RpcReply, RpcRequest},
};

/// What a handler of a request on one node (`/v1/nodes/{id}/...`, the path's one parameter)
/// reads first, in this order: the negotiated version, the request id, the node's name or UUID
/// (as the path gives it); with the API's state first.
pub struct OnNode(pub ApiState, pub ApiVersion, pub RequestId, pub String);

impl FromRequestParts<ApiState> for OnNode {
    type Rejection = Error;

    async fn from_request_parts(parts: &mut Parts, state: &ApiState) -> Result<Self> {
        let version = ApiVersion::from_request_parts(parts, state).await?;
        let request_id = RequestId::from_request_parts(parts, state).await?;
        let ApiPath(ident) = ApiPath::<String>::from_request_parts(parts, state).await?;
        Ok(OnNode(state.clone(), version, request_id, ident))
    }
}

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

/// Finds the node `ident` and sends its conductor the request `make` builds from it.
pub(super) async fn call_on(
    state: &ApiState,
    request_id: &RequestId,
    version: ApiVersion,
    ident: &str,
    make: impl FnOnce(Box<Node>) -> RpcRequest,
) -> Result<RpcReply> {
    let node = Box::new(find(state, ident, version).await?);
    call(state, request_id, make(node)).await
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

/// A chassis a node is put in must exist: Ironic's ChassisNotFound, as a 400 for a request on a
/// node.
async fn check_chassis(state: &ApiState, chassis: &str) -> Result<()> {
    match db::chassis::get(&state.db, chassis).await {
        Err(Error::NotFound(why)) => Err(Error::InvalidParameterValue(why)),
        other => other.map(|_| ()),
    }
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

/// 202 Accepted with `Location: <url>/v1/nodes/<id as given>/states`.
fn accepted(base: &str, ident: &str) -> Response {
    let mut response = StatusCode::ACCEPTED.into_response();
    if let Ok(v) = HeaderValue::from_str(&format!("{base}/v1/nodes/{ident}/states")) {
        response.headers_mut().insert(header::LOCATION, v);
    }
    response
}
