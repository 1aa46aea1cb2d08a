//! /v1/chassis: the API reads and writes chassis itself, as Ironic's does (no node lock is
//! involved); `/v1/chassis/{uuid}/nodes` lists a chassis' nodes.

use axum::{Json, extract::State, http::StatusCode, response::Response};
use serde::Deserialize;
use serde_json::Value;

use super::{
    ApiState, BaseUrl,
    extract::{ApiJson, ApiPath, ApiQuery, ApiVersion},
    listing::{self, Paging, Route, ShowQuery},
};
use crate::{
    chassis::{self, Chassis},
    db,
    error::Result,
    node::{JsonObject, normalize_uuid},
    patch::{self, PatchOp},
};

#[derive(Debug, Default, Deserialize)]
pub struct ListQuery {
    #[serde(flatten)]
    paging: Paging,
}

/// GET /v1/chassis[/detail].
pub async fn list(
    State(state): State<ApiState>,
    version: ApiVersion,
    BaseUrl(base): BaseUrl,
    route: Route,
    ApiQuery(q): ApiQuery<ListQuery>,
) -> Result<Json<Value>> {
    let shape = q.paging.shape::<Chassis>(version, route.detail)?;
    let sort = q.paging.sort(
        db::chassis::SortKey::parse,
        db::chassis::SortKey::NAMES,
        db::chassis::SortKey::Id,
    )?;
    let items = db::chassis::list(
        &state.db,
        sort,
        q.paging.descending()?,
        q.paging.limit()?,
        q.paging.marker.as_deref(),
    )
    .await?;
    listing::page(
        &items,
        &q.paging,
        &shape,
        chassis::SUMMARY,
        version,
        &base,
        &route.path,
        "",
    )
    .map(Json)
}

pub async fn show(
    State(state): State<ApiState>,
    version: ApiVersion,
    BaseUrl(base): BaseUrl,
    ApiPath(uuid): ApiPath<String>,
    ApiQuery(q): ApiQuery<ShowQuery>,
) -> Result<Json<Value>> {
    let found = db::chassis::get(&state.db, &uuid).await?;
    listing::show_one(&found, q.fields.as_deref(), version, &base).map(Json)
}

pub async fn create(
    State(state): State<ApiState>,
    version: ApiVersion,
    BaseUrl(base): BaseUrl,
    ApiJson(body): ApiJson<JsonObject>,
) -> Result<Response> {
    for name in body.keys() {
        listing::check_written_field::<Chassis>(version, name, |w| w.create)?;
    }
    let new = chassis::from_create(body)?;
    let stored = db::chassis::insert(&state.db, &new).await?;
    Ok(listing::created(&stored, version, &base))
}

pub async fn update(
    State(state): State<ApiState>,
    version: ApiVersion,
    BaseUrl(base): BaseUrl,
    ApiPath(uuid): ApiPath<String>,
    ApiJson(ops): ApiJson<Vec<PatchOp>>,
) -> Result<Json<Value>> {
    listing::check_patch::<Chassis>(version, &ops)?;
    let found = db::chassis::get(&state.db, &uuid).await?;
    let changes = patch::apply(&found, &ops)?;
    let updated = db::chassis::update(&state.db, &found, changes).await?;
    Ok(Json(listing::detail(&updated, version, &base)))
}

pub async fn delete(
    State(state): State<ApiState>,
    ApiPath(uuid): ApiPath<String>,
) -> Result<StatusCode> {
    let found = db::chassis::get(&state.db, &uuid).await?;
    db::chassis::delete(&state.db, &found.uuid).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// GET /v1/chassis/{uuid}/nodes[/detail]: the node listing, narrowed to the chassis.
pub async fn nodes(
    state: State<ApiState>,
    version: ApiVersion,
    base: BaseUrl,
    route: Route,
    ApiQuery(mut q): ApiQuery<super::nodes::list::ListQuery>,
) -> Result<Json<Value>> {
    let uuid = route.parent.map(|(_, id)| id).unwrap_or_default();
    let found = db::chassis::get(&state.db, &normalize_uuid("chassis_uuid", &uuid)?).await?;
    q.chassis_uuid = Some(found.uuid);
    if route.detail {
        super::nodes::list::list_detail(state, version, base, ApiQuery(q)).await
    } else {
        super::nodes::list::list(state, version, base, ApiQuery(q)).await
    }
}
