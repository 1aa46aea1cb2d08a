//! /v1/allocations and /v1/nodes/{node}/allocation (API 1.52; PATCH 1.57, backfill 1.58, owner
//! 1.60). A create or delete is processed by a conductor (`conductor::allocations`): one with a
//! node goes to that node's conductor, one without to any alive conductor (Ironic's
//! `get_random_topic`). A create answers 201 with the allocation `allocating` (a backfill's
//! already processed), as Ironic's does; the client polls until it is `active` or `error`. The
//! API reads allocations itself and writes a PATCH (name, extra) itself, as Ironic's does.

use axum::{Json, extract::State, http::StatusCode, response::Response};
use rand::seq::SliceRandom;
use serde::Deserialize;
use serde_json::Value;

use super::{
    ApiState, BaseUrl,
    collection::{Found, ListRequest, Listed, Patched},
    extract::{ApiJson, ApiQuery, ApiVersion, JsonSuffix, RequestId},
    listing::{self, Route, ShowQuery},
    nodes::{self, require_version},
};
use crate::{
    allocation::{self, Allocation, AllocationChanges},
    db::{self, Db, allocations::SortKey},
    error::{Error, Result},
    node::{JsonObject, Node},
    rpc::{RpcReply, RpcRequest},
};

const BACKFILL: u32 = 58;
const OWNER: u32 = 60;

/// A listing's filters.
#[derive(Debug, Default, Deserialize)]
pub struct Filters {
    node: Option<String>,
    resource_class: Option<String>,
    state: Option<String>,
    owner: Option<String>,
}

/// A node named in a request about allocations (a filter, a candidate, a backfill): an unknown
/// one is a 400, as in Ironic.
async fn named_node(state: &ApiState, ident: &str, version: ApiVersion) -> Result<Node> {
    nodes::find(state, ident, version)
        .await
        .map_err(unknown_node_is_bad_request)
}

/// Ironic answers NodeNotFound with a 400 where the node is a parameter of the request.
fn unknown_node_is_bad_request(e: Error) -> Error {
    match e {
        Error::NodeNotFound { node } => {
            Error::InvalidParameterValue(format!("Node {node} could not be found."))
        }
        other => other,
    }
}

/// GET /v1/allocations[/detail]: narrowed by `node` (an unknown one is a 400), `resource_class`,
/// `state` and `owner` (1.60), each carried into the `next` link.
impl Listed for Allocation {
    const SUMMARY: &'static [&'static str] = allocation::SUMMARY;
    type Sort = SortKey;
    type Filters = Filters;

    async fn read(request: &ListRequest<'_, Self>, carried: &mut String) -> Result<Vec<Self>> {
        let (q, version) = (request.filters, request.version);
        if q.owner.is_some() {
            require_version(version, OWNER, "The owner filter")?;
        }
        if let Some(s) = &q.state
            && ![
                allocation::ALLOCATING,
                allocation::ACTIVE,
                allocation::ERROR,
            ]
            .contains(&s.as_str())
        {
            return Err(Error::InvalidParameterValue(format!(
                "Invalid state {s}; use one of allocating, active, error."
            )));
        }
        let node_uuid = match &q.node {
            Some(n) => Some(named_node(request.state, n, version).await?.uuid),
            None => None,
        };
        let filter = db::allocations::Filter {
            node_uuid,
            resource_class: q.resource_class.clone(),
            state: q.state.clone(),
            owner: q.owner.clone(),
        };
        let items = db::allocations::list(&request.state.db, &filter, &request.page()?).await?;
        listing::carry(
            carried,
            [
                ("node", &q.node),
                ("resource_class", &q.resource_class),
                ("state", &q.state),
                ("owner", &q.owner),
            ],
        );
        Ok(items)
    }
}

/// The allocation a route names: `/v1/allocations/{uuid or name}`, or
/// `/v1/nodes/{node}/allocation` (404 when the node has none), with the node when it has one.
async fn named(
    state: &ApiState,
    route: &Route,
    version: ApiVersion,
) -> Result<(Allocation, Option<Node>)> {
    let (collection, ident) = route.parent.clone().unwrap_or_default();
    if collection == "nodes" {
        let node = nodes::find(state, &ident, version).await?;
        let found = db::allocations::of_node(&state.db, &node.uuid).await?;
        let found = found
            .ok_or_else(|| Error::NotFound(format!("Allocation for node {ident} was not found")))?;
        return Ok((found, Some(node)));
    }
    let found = db::allocations::get(&state.db, &ident).await?;
    let node = match &found.node_uuid {
        Some(uuid) => match db::nodes::get_by_uuid(&state.db, uuid).await {
            Ok(node) => Some(node),
            Err(Error::NodeNotFound { .. }) => None,
            Err(e) => return Err(e),
        },
        None => None,
    };
    Ok((found, node))
}

/// GET /v1/allocations/{uuid or name} and /v1/nodes/{node}/allocation.
pub async fn show(
    State(state): State<ApiState>,
    version: ApiVersion,
    BaseUrl(base): BaseUrl,
    route: Route,
    ApiQuery(q): ApiQuery<ShowQuery>,
) -> Result<Json<Value>> {
    // Ironic's GET of a node's allocation looks the node up as it looks up a `node` filter
    // (`_get_allocations_collection`): an unknown node is a 400 there, a 404 for DELETE.
    let (found, _) = named(&state, &route, version)
        .await
        .map_err(unknown_node_is_bad_request)?;
    listing::show_one(&found, q.fields.as_deref(), version, &base).map(Json)
}

/// Sends an allocation request: to the node's conductor when there is a node, else to any alive
/// conductor.
async fn call(state: &ApiState, request_id: &RequestId, req: RpcRequest) -> Result<RpcReply> {
    let has_node = matches!(
        &req,
        RpcRequest::CreateAllocation { node: Some(_), .. }
            | RpcRequest::DestroyAllocation { node: Some(_), .. }
    );
    if has_node {
        return nodes::call(state, request_id, req).await;
    }
    let mut alive: Vec<String> =
        db::conductors::list_alive(&state.db, state.router.heartbeat_timeout())
            .await?
            .into_iter()
            .map(|c| c.hostname)
            .collect();
    alive.shuffle(&mut rand::rng());
    let Some(first) = alive.first() else {
        return Err(Error::TemporaryFailure(
            "No conductor service is online; please retry.".to_owned(),
        ));
    };
    let reply = state.rpc.call(first, &request_id.0, req.clone()).await;
    // A conductor gone before it answered: once more on another (the conductor takes a retried
    // create as the same request).
    match (&reply, alive.get(1)) {
        (Err(Error::ConductorUnreachable { .. } | Error::ConductorLost { .. }), Some(next)) => {
            state.rpc.call(next, &request_id.0, req).await
        }
        _ => reply,
    }
}

/// POST /v1/allocations.
pub async fn create(
    State(state): State<ApiState>,
    version: ApiVersion,
    request_id: RequestId,
    BaseUrl(base): BaseUrl,
    ApiJson(mut body): ApiJson<JsonObject>,
) -> Result<Response> {
    let node_ident = match body.remove("node") {
        None | Some(Value::Null) => None,
        Some(_) if !version.at_least(BACKFILL) => {
            return Err(Error::InvalidParameterValue(
                "Cannot set node when creating an allocation in this API version".to_owned(),
            ));
        }
        Some(v) => Some(crate::resource::string("node", v)?),
    };
    listing::check_create::<Allocation>(version, &body)?;
    let uuid_given = body.contains_key("uuid");
    let mut new = allocation::from_create(body)?;
    let node = match &node_ident {
        Some(ident) => Some(named_node(&state, ident, version).await?),
        None => None,
    };
    if new.resource_class.is_none() {
        match &node {
            Some(node) => new.resource_class = node.resource_class.clone(),
            None => {
                return Err(Error::InvalidParameterValue(
                    "The resource_class field is mandatory when not backfilling".to_owned(),
                ));
            }
        }
    }
    let mut candidates = Vec::with_capacity(new.candidate_nodes.0.len());
    for ident in &new.candidate_nodes.0 {
        let uuid = named_node(&state, ident, version).await?.uuid;
        if !candidates.contains(&uuid) {
            candidates.push(uuid);
        }
    }
    new.candidate_nodes.0 = candidates;
    if !uuid_given && let Some(instance) = node.as_ref().and_then(|n| n.instance_uuid.clone()) {
        new.uuid = instance;
    }
    let request = RpcRequest::CreateAllocation {
        allocation: Box::new(new),
        node: node.map(Box::new),
    };
    let created = call(&state, &request_id, request)
        .await?
        .pick(|r| match r {
            RpcReply::Allocation(a) => Ok(*a),
            other => Err(other),
        })?;
    Ok(listing::created(&created, version, &base))
}

/// An allocation is named by UUID or name (for a PATCH; a GET or DELETE by its route, [`named`]).
impl Found for Allocation {
    async fn find(state: &ApiState, _: JsonSuffix, ident: &str) -> Result<Self> {
        db::allocations::get(&state.db, ident).await
    }
}

/// PATCH /v1/allocations/{ident} (1.57): name and extra only, written by the API. Before 1.57,
/// 405 as in Ironic.
impl Patched for Allocation {
    async fn write(db: &Db, allocation: &Self, changes: AllocationChanges) -> Result<Self> {
        db::allocations::update(db, allocation, changes).await
    }
}

/// DELETE /v1/allocations/{ident} and /v1/nodes/{node}/allocation.
pub async fn delete(
    State(state): State<ApiState>,
    version: ApiVersion,
    request_id: RequestId,
    route: Route,
) -> Result<StatusCode> {
    let (found, node) = named(&state, &route, version).await?;
    let request = RpcRequest::DestroyAllocation {
        allocation: Box::new(found),
        node: node.map(Box::new),
    };
    call(&state, &request_id, request).await?;
    Ok(StatusCode::NO_CONTENT)
}
