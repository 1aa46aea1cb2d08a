//! The handlers of a resource the API reads and writes itself, named by UUID or by a unique
//! name, with no node lock involved: deploy templates (API 1.55) and runbooks (1.92), each
//! described by a [`Named`] implementation beside its routes. A listing pages and sorts as
//! every listing does; `.json` below 1.91 is dropped from the name as for nodes.

use axum::{Json, extract::State, http::StatusCode, response::Response};
use serde::Deserialize;
use serde_json::Value;

use super::{
    ApiState, BaseUrl,
    extract::{ApiJson, ApiPath, ApiQuery, ApiVersion, JsonSuffix},
    listing::{self, Paging, Route, ShowQuery},
};
use crate::{
    db::named::{NamedQueries, SortKey},
    error::Result,
    node::JsonObject,
    patch::{self, PatchOp},
    resource::Resource,
};

/// A resource served by these handlers: its version, its short form, how a create and a PATCH
/// are checked; its queries are its [`NamedQueries`].
pub trait Named:
    Resource<Changes: Send> + NamedQueries<Update = <Self as Resource>::Changes> + Send + Sync
{
    /// The API minor version that introduced it.
    const SINCE: u32;
    /// What it is called in the answer to a version without it ("deploy templates").
    const PLURAL: &'static str;
    /// The fields of the short form of a listing.
    const SUMMARY: &'static [&'static str];

    /// The new record a create's body at API `minor` asks for, checked.
    fn from_create(body: JsonObject, minor: u32) -> Result<Self>;

    /// Rules of a PATCH beyond the fields' own, with the patch's changes at hand.
    fn check_patch(&self, _ops: &[PatchOp], _changes: &mut Self::Changes) -> Result<()> {
        Ok(())
    }
}

async fn find<R: Named>(state: &ApiState, suffix: JsonSuffix, ident: &str) -> Result<R> {
    suffix
        .find(ident, |i| {
            let db = &state.db;
            async move { <R as NamedQueries>::get(db, &i).await }
        })
        .await
}

#[derive(Debug, Default, Deserialize)]
pub struct ListQuery {
    #[serde(flatten)]
    paging: Paging,
}

/// GET /v1/<collection>[/detail].
pub async fn list<R: Named>(
    State(state): State<ApiState>,
    version: ApiVersion,
    BaseUrl(base): BaseUrl,
    route: Route,
    ApiQuery(q): ApiQuery<ListQuery>,
) -> Result<Json<Value>> {
    let shape = q.paging.shape::<R>(version, route.detail)?;
    let sort = q.paging.sort(SortKey::parse, SortKey::NAMES, SortKey::Id)?;
    let items = <R as NamedQueries>::list(
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
        R::SUMMARY,
        version,
        &base,
        &route.path,
        "",
    )
    .map(Json)
}

pub async fn show<R: Named>(
    State(state): State<ApiState>,
    version: ApiVersion,
    BaseUrl(base): BaseUrl,
    suffix: JsonSuffix,
    ApiPath(ident): ApiPath<String>,
    ApiQuery(q): ApiQuery<ShowQuery>,
) -> Result<Json<Value>> {
    let found: R = find(&state, suffix, &ident).await?;
    listing::show_one(&found, q.fields.as_deref(), version, &base).map(Json)
}

pub async fn create<R: Named>(
    State(state): State<ApiState>,
    version: ApiVersion,
    BaseUrl(base): BaseUrl,
    ApiJson(body): ApiJson<JsonObject>,
) -> Result<Response> {
    for name in body.keys() {
        listing::check_written_field::<R>(version, name, |w| w.create)?;
    }
    let new = R::from_create(body, version.0)?;
    let stored = <R as NamedQueries>::insert(&state.db, &new).await?;
    Ok(listing::created(&stored, version, &base))
}

/// PATCH: the writable fields, `steps` whole or by index (`/steps/0/priority`, `/steps/-`);
/// the patched steps are checked whole, as a create's.
pub async fn update<R: Named>(
    State(state): State<ApiState>,
    version: ApiVersion,
    BaseUrl(base): BaseUrl,
    suffix: JsonSuffix,
    ApiPath(ident): ApiPath<String>,
    ApiJson(ops): ApiJson<Vec<PatchOp>>,
) -> Result<Json<Value>> {
    listing::check_patch::<R>(version, &ops)?;
    let found: R = find(&state, suffix, &ident).await?;
    let mut changes = patch::apply(&found, &ops)?;
    found.check_patch(&ops, &mut changes)?;
    let updated = <R as NamedQueries>::update(&state.db, &found, changes).await?;
    Ok(Json(listing::detail(&updated, version, &base)))
}

pub async fn delete<R: Named>(
    State(state): State<ApiState>,
    suffix: JsonSuffix,
    ApiPath(ident): ApiPath<String>,
) -> Result<StatusCode> {
    let found: R = find(&state, suffix, &ident).await?;
    <R as NamedQueries>::delete(&state.db, found.uuid()).await?;
    Ok(StatusCode::NO_CONTENT)
}
