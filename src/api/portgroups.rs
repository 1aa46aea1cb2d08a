//! /v1/portgroups (1.23) and /v1/nodes/{id}/portgroups (1.24): listings are read from the
//! database; a change goes to the conductor of the portgroup's node (`conductor/ports.rs`).

use axum::{extract::State, response::Response};
use serde::Deserialize;

use super::{
    ApiState, BaseUrl,
    collection::{Found, ListRequest, Listed, NodeChild},
    extract::{ApiJson, ApiVersion, JsonSuffix, RequestId},
    listing,
    nodes::{find, require_version},
    ports::{parent_node, ports_call},
};
use crate::{
    db::{
        self,
        ports::{PortgroupFilter, SortKey},
    },
    error::{Error, Result},
    node::{JsonObject, Node},
    patch::PatchOp,
    ports::{self, Portgroup},
    rpc::{PortsChange, RpcReply, RpcRequest},
};

/// A listing's filters.
#[derive(Debug, Default, Deserialize)]
pub struct Filters {
    node: Option<String>,
    address: Option<String>,
    shard: Option<String>,
    conductor_groups: Option<String>,
}

/// GET /v1/portgroups[/detail] and /v1/nodes/{id}/portgroups[/detail] (1.24).
impl Listed for Portgroup {
    const SUMMARY: &'static [&'static str] = ports::PORTGROUP_SUMMARY;
    type Sort = SortKey;
    type Filters = Filters;

    async fn read(request: &ListRequest<'_, Self>, carried: &mut String) -> Result<Vec<Self>> {
        let (state, version, q) = (request.state, request.version, request.filters);
        let parent = request.route.parent.as_ref().map(|(_, id)| id.as_str());
        if q.shard.is_some() {
            require_version(version, 106, "The shard filter")?;
        }
        // `conductor_groups` (1.99) is taken at every version, as Ironic takes it.
        let groups = q
            .conductor_groups
            .as_deref()
            .map(super::ports::string_list)
            .filter(|g| !g.is_empty());
        let shards = q
            .shard
            .as_deref()
            .map(super::nodes::list::shard_list)
            .filter(|s| s.iter().any(|s| !s.is_empty()));
        // Ironic's `_get_portgroups_collection`: node, address, shard and conductor groups exclude
        // one another.
        let narrowing = [
            parent.or(q.node.as_deref()).is_some(),
            q.address.is_some(),
            shards.is_some(),
            groups.is_some(),
        ];
        if narrowing.iter().filter(|given| **given).count() > 1 {
            return Err(Error::InvalidParameterValue(
                "Filtering by node, address, or shard simultaneously is not supported.".to_owned(),
            ));
        }
        let node = match parent.or(q.node.as_deref()) {
            Some(n) => Some(find(state, n, version).await?.uuid),
            None => None,
        };
        let filter = PortgroupFilter {
            node_uuid: node.clone(),
            address: q.address.as_deref().map(ports::normalize_mac).transpose()?,
            node_shard_in: shards,
            node_conductor_group_in: groups,
        };
        let items = db::ports::list_portgroups(&state.db, &filter, &request.page()?).await?;
        if let (None, Some(n)) = (parent, &node) {
            carried.push_str(&format!("node={n}&"));
        }
        listing::carry(
            carried,
            [
                ("shard", &q.shard),
                ("conductor_groups", &q.conductor_groups),
            ],
        );
        Ok(items)
    }
}

/// A portgroup is named by UUID or name (with `.json` put back when the path lost it).
impl Found for Portgroup {
    async fn find(state: &ApiState, suffix: JsonSuffix, ident: &str) -> Result<Self> {
        let db = &state.db;
        suffix
            .find(
                ident,
                |i| async move { db::ports::get_portgroup(db, &i).await },
            )
            .await
    }
}

pub async fn create(
    State(state): State<ApiState>,
    version: ApiVersion,
    request_id: RequestId,
    BaseUrl(base): BaseUrl,
    ApiJson(body): ApiJson<JsonObject>,
) -> Result<Response> {
    listing::check_create::<Portgroup>(version, &body)?;
    let node = parent_node(&state, &body).await?;
    let change = PortsChange::CreatePortgroup { fields: body };
    let pg = ports_call(&state, &request_id, node, change)
        .await?
        .into_portgroup()?;
    Ok(listing::created(&pg, version, &base))
}

/// A portgroup is patched and deleted by its node's conductor.
impl NodeChild for Portgroup {
    fn node_uuid(&self) -> &str {
        &self.node_uuid
    }

    fn patch_request(node: Box<Node>, uuid: String, patch: Vec<PatchOp>) -> RpcRequest {
        let change = PortsChange::UpdatePortgroup { uuid, patch };
        RpcRequest::ChangePorts { node, change }
    }

    fn destroy_request(node: Box<Node>, uuid: String) -> RpcRequest {
        let change = PortsChange::DestroyPortgroup { uuid };
        RpcRequest::ChangePorts { node, change }
    }

    fn patched_item(reply: RpcReply) -> Result<Self> {
        reply.into_portgroup()
    }
}
