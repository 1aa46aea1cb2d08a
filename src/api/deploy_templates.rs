//! /v1/deploy_templates (API 1.55): the API reads and writes deploy templates itself, as
//! Ironic's does (no node lock is involved). A template is named by UUID or by name.

use axum::{
    Json,
    extract::State,
    http::{Method, StatusCode},
    response::Response,
};
use serde::Deserialize;
use serde_json::Value;

use super::{
    ApiState, BaseUrl,
    extract::{ApiJson, ApiPath, ApiQuery, ApiVersion},
    listing::{self, Paging, Route, ShowQuery},
};
use crate::{
    db,
    deploy_template::{self, DeployTemplate},
    error::{Error, Result},
    node::JsonObject,
    patch::{self, PatchOp},
};

/// Below 1.55 the resource does not exist: Ironic answers a GET 404 and any other method 405.
fn require(version: ApiVersion, method: &Method) -> Result<()> {
    if version.at_least(deploy_template::SINCE) {
        return Ok(());
    }
    let msg = "The API version does not allow deploy templates".to_owned();
    if method == Method::GET {
        Err(Error::NotFound(msg))
    } else {
        Err(Error::MethodNotAllowed(msg))
    }
}

#[derive(Debug, Default, Deserialize)]
pub struct ListQuery {
    #[serde(flatten)]
    paging: Paging,
}

/// GET /v1/deploy_templates[/detail].
pub async fn list(
    State(state): State<ApiState>,
    version: ApiVersion,
    BaseUrl(base): BaseUrl,
    route: Route,
    ApiQuery(q): ApiQuery<ListQuery>,
) -> Result<Json<Value>> {
    require(version, &Method::GET)?;
    let shape = q.paging.shape::<DeployTemplate>(version, route.detail)?;
    let sort = q.paging.sort(
        db::deploy_templates::SortKey::parse,
        db::deploy_templates::SortKey::NAMES,
        db::deploy_templates::SortKey::Id,
    )?;
    let items = db::deploy_templates::list(
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
        deploy_template::SUMMARY,
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
    ApiPath(ident): ApiPath<String>,
    ApiQuery(q): ApiQuery<ShowQuery>,
) -> Result<Json<Value>> {
    require(version, &Method::GET)?;
    let found = db::deploy_templates::get(&state.db, &ident).await?;
    listing::show_one(&found, q.fields.as_deref(), version, &base).map(Json)
}

pub async fn create(
    State(state): State<ApiState>,
    version: ApiVersion,
    BaseUrl(base): BaseUrl,
    ApiJson(body): ApiJson<JsonObject>,
) -> Result<Response> {
    require(version, &Method::POST)?;
    for name in body.keys() {
        listing::check_written_field::<DeployTemplate>(version, name, |w| w.create)?;
    }
    let new = deploy_template::from_create(body)?;
    let stored = db::deploy_templates::insert(&state.db, &new).await?;
    Ok(listing::created(&stored, version, &base))
}

/// PATCH: `name`, `steps` (whole, or a step or a step's member: `/steps/0/priority`, `/steps/-`)
/// and `extra`; the patched steps are checked whole, as a create's.
pub async fn update(
    State(state): State<ApiState>,
    version: ApiVersion,
    BaseUrl(base): BaseUrl,
    ApiPath(ident): ApiPath<String>,
    ApiJson(ops): ApiJson<Vec<PatchOp>>,
) -> Result<Json<Value>> {
    require(version, &Method::PATCH)?;
    listing::check_patch::<DeployTemplate>(version, &ops)?;
    let found = db::deploy_templates::get(&state.db, &ident).await?;
    let changes = patch::apply(&found, &ops)?;
    let updated = db::deploy_templates::update(&state.db, &found, changes).await?;
    Ok(Json(listing::detail(&updated, version, &base)))
}

pub async fn delete(
    State(state): State<ApiState>,
    version: ApiVersion,
    ApiPath(ident): ApiPath<String>,
) -> Result<StatusCode> {
    require(version, &Method::DELETE)?;
    let found = db::deploy_templates::get(&state.db, &ident).await?;
    db::deploy_templates::delete(&state.db, &found.uuid).await?;
    Ok(StatusCode::NO_CONTENT)
}
