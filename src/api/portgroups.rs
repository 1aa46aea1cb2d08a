//! /v1/portgroups (1.23) and /v1/nodes/{id}/portgroups (1.24): listings are read from the
//! database; a change goes to the conductor of the portgroup's node (`conductor/ports.rs`).

use axum::{Json, extract::State, http::StatusCode, response::Response};
use serde::Deserialize;
use serde_json::Value;

use super::{
    ApiState, BaseUrl,
    extract::{ApiJson, ApiPath, ApiQuery, ApiVersion, JsonSuffix, RequestId},
    listing::{self, Paging, Route, ShowQuery},
    nodes::{find, require_version},
    ports::{parent_node, ports_call},
};
use crate::{
    db::{self, ports::PortgroupFilter},
    error::{Error, Result},
    node::JsonObject,
    patch::PatchOp,
    ports::{self, Portgroup},
    rpc::PortsChange,
};

#[derive(Debug, Default, Deserialize)]
pub struct ListQuery {
    #[serde(flatten)]
    paging: Paging,
    node: Option<String>,
    address: Option<String>,
    shard: Option<String>,
    conductor_groups: Option<String>,
}

/// GET /v1/portgroups[/detail] and /v1/nodes/{id}/portgroups[/detail] (1.24).
pub async fn list(
    State(state): State<ApiState>,
    version: ApiVersion,
    BaseUrl(base): BaseUrl,
    route: Route,
    ApiQuery(q): ApiQuery<ListQuery>,
) -> Result<Json<Value>> {
    let shape = q.paging.shape::<Portgroup>(version, route.detail)?;
    let sort = q.paging.sort(
        db::ports::SortKey::parse,
        db::ports::SortKey::NAMES,
        db::ports::SortKey::Id,
    )?;
    let parent = route.parent.as_ref().map(|(_, id)| id.as_str());
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
        Some(n) => Some(find(&state, n, version).await?.uuid),
        None => None,
    };
    let filter = PortgroupFilter {
        node_uuid: node.clone(),
        address: q.address.as_deref().map(ports::normalize_mac).transpose()?,
        node_shard_in: shards,
        node_conductor_group_in: groups,
    };
    let items = db::ports::list_portgroups(
        &state.db,
        &filter,
        sort,
        q.paging.descending()?,
        q.paging.limit()?,
        q.paging.marker.as_deref(),
    )
    .await?;
    let mut carried = match (parent, &node) {
        (None, Some(n)) => format!("node={n}&"),
        _ => String::new(),
    };
    for (key, value) in [
        ("shard", &q.shard),
        ("conductor_groups", &q.conductor_groups),
    ] {
        if let Some(value) = value {
            carried.push_str(&format!(
                "{key}={}&",
                super::nodes::list::encode_query_value(value)
            ));
        }
    }
    listing::page(
        &items,
        &q.paging,
        &shape,
        ports::PORTGROUP_SUMMARY,
        version,
        &base,
        &route.path,
        &carried,
    )
    .map(Json)
}

pub async fn show(
    State(state): State<ApiState>,
    version: ApiVersion,
    BaseUrl(base): BaseUrl,
    suffix: JsonSuffix,
    ApiPath(ident): ApiPath<String>,
    ApiQuery(q): ApiQuery<ShowQuery>,
) -> Result<Json<Value>> {
    let pg = suffix
        .find(&ident, |i| {
            let db = &state.db;
            async move { db::ports::get_portgroup(db, &i).await }
        })
        .await?;
    listing::show_one(&pg, q.fields.as_deref(), version, &base).map(Json)
}

pub async fn create(
    State(state): State<ApiState>,
    version: ApiVersion,
    request_id: RequestId,
    BaseUrl(base): BaseUrl,
    ApiJson(body): ApiJson<JsonObject>,
) -> Result<Response> {
    for name in body.keys() {
        listing::check_written_field::<Portgroup>(version, name, |w| w.create)?;
    }
    let node = parent_node(&state, &body).await?;
    let change = PortsChange::CreatePortgroup { fields: body };
    let pg = ports_call(&state, &request_id, node, change)
        .await?
        .into_portgroup()?;
    Ok(listing::created(&pg, version, &base))
}

pub async fn update(
    State(state): State<ApiState>,
    version: ApiVersion,
    request_id: RequestId,
    BaseUrl(base): BaseUrl,
    ApiPath(ident): ApiPath<String>,
    ApiJson(ops): ApiJson<Vec<PatchOp>>,
) -> Result<Json<Value>> {
    listing::check_patch::<Portgroup>(version, &ops)?;
    let pg = db::ports::get_portgroup(&state.db, &ident).await?;
    let node = db::nodes::get_by_uuid(&state.db, &pg.node_uuid).await?;
    let change = PortsChange::UpdatePortgroup {
        uuid: pg.uuid,
        patch: ops,
    };
    let pg = ports_call(&state, &request_id, node, change)
        .await?
        .into_portgroup()?;
    Ok(Json(listing::detail(&pg, version, &base)))
}

pub async fn delete(
    State(state): State<ApiState>,
    request_id: RequestId,
    ApiPath(ident): ApiPath<String>,
) -> Result<StatusCode> {
    let pg = db::ports::get_portgroup(&state.db, &ident).await?;
    let node = db::nodes::get_by_uuid(&state.db, &pg.node_uuid).await?;
    let change = PortsChange::DestroyPortgroup { uuid: pg.uuid };
    ports_call(&state, &request_id, node, change).await?;
    Ok(StatusCode::NO_CONTENT)
}
