//! /v1/inspection_rules (API 1.96): the API reads and writes inspection rules itself, as
//! Ironic's does (no node lock is involved). A rule is named by UUID only (Ironic's schema asks
//! for one: anything else is a 400). Listings page, sort and shape as every listing does, and
//! filter on `phase` (which Ironic carries into its `next` link but does not apply; Ferrum
//! applies it). Below 1.96 a GET is 404 and any other method 405, as in Ironic.

use axum::{Json, extract::State, http::StatusCode, response::Response};
use serde::Deserialize;
use serde_json::Value;

use super::{
    ApiState, BaseUrl,
    extract::{ApiJson, ApiPath, ApiQuery, ApiVersion},
    listing::{self, Paging, Route, ShowQuery},
};
use crate::{
    db::{self, inspection_rules::SortKey},
    error::{Error, Result},
    inspection_rule::{self, InspectionRule, SUMMARY},
    node::JsonObject,
    patch::PatchOp,
};

/// The rule named in a path: a UUID (Ironic's parameter schema), or a 400.
fn rule_uuid(ident: &str) -> Result<String> {
    uuid::Uuid::try_parse(ident)
        .map(|u| u.hyphenated().to_string())
        .map_err(|_| {
            Error::InvalidParameterValue(format!("Schema error: '{ident}' is not a 'uuid'"))
        })
}

#[derive(Debug, Default, Deserialize)]
pub struct ListQuery {
    #[serde(flatten)]
    paging: Paging,
    phase: Option<String>,
}

/// GET /v1/inspection_rules.
pub async fn list(
    State(state): State<ApiState>,
    version: ApiVersion,
    BaseUrl(base): BaseUrl,
    route: Route,
    ApiQuery(q): ApiQuery<ListQuery>,
) -> Result<Json<Value>> {
    let shape = q.paging.shape::<InspectionRule>(version, route.detail)?;
    let sort = q.paging.sort(SortKey::parse, SortKey::NAMES, SortKey::Id)?;
    let items = db::inspection_rules::list(
        &state.db,
        sort,
        q.paging.descending()?,
        q.paging.limit()?,
        q.paging.marker.as_deref(),
        q.phase.as_deref(),
    )
    .await?;
    let filters = match &q.phase {
        Some(p) => format!("phase={}&", super::nodes::list::encode_query_value(p)),
        None => String::new(),
    };
    listing::page(
        &items,
        &q.paging,
        &shape,
        SUMMARY,
        version,
        &base,
        &route.path,
        &filters,
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
    let rule = db::inspection_rules::get(&state.db, &rule_uuid(&ident)?).await?;
    listing::show_one(&rule, q.fields.as_deref(), version, &base).map(Json)
}

/// POST: checked as Ironic's schema and `validate_rule` check it, then stored; 201 with the
/// rule and its `Location`.
pub async fn create(
    State(state): State<ApiState>,
    version: ApiVersion,
    BaseUrl(base): BaseUrl,
    ApiJson(body): ApiJson<JsonObject>,
) -> Result<Response> {
    let rule = inspection_rule::from_create(body)?;
    let stored = db::inspection_rules::insert(&state.db, &rule).await?;
    Ok(listing::created(&stored, version, &base))
}

/// PATCH: the schema's fields, `conditions` and `actions` whole or by index
/// (`/actions/0/args/value`); the patched rule is checked whole, as a created one.
pub async fn update(
    State(state): State<ApiState>,
    version: ApiVersion,
    BaseUrl(base): BaseUrl,
    ApiPath(ident): ApiPath<String>,
    ApiJson(ops): ApiJson<Vec<PatchOp>>,
) -> Result<Json<Value>> {
    let uuid = rule_uuid(&ident)?;
    listing::check_patch::<InspectionRule>(version, &ops)?;
    let rule = db::inspection_rules::get(&state.db, &uuid).await?;
    let changes = inspection_rule::patched(&rule, &ops)?;
    let updated = db::inspection_rules::update(&state.db, &rule, changes).await?;
    Ok(Json(listing::detail(&updated, version, &base)))
}

pub async fn delete(
    State(state): State<ApiState>,
    ApiPath(ident): ApiPath<String>,
) -> Result<StatusCode> {
    let uuid = rule_uuid(&ident)?;
    db::inspection_rules::delete(&state.db, &uuid).await?;
    Ok(StatusCode::NO_CONTENT)
}
