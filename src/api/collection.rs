//! The handlers every collection but the nodes' shares, written once: a listing ([`list`]), a
//! GET of one item ([`show`]); for what the API writes itself, a create, a PATCH and a delete
//! ([`create`], [`update`], [`delete`]); for a node's children, which its conductor writes, a
//! PATCH and a delete ([`update_child`], [`delete_child`]). Each resource says only what is its
//! own: how a listing is narrowed and read ([`Listed`]), how a path names an item ([`Found`]),
//! how a PATCH and a create are checked and written ([`Patched`], [`Stored`], [`NodeChild`]).
//! Checks run in the order they always ran, so an answer names the same fault it always did.

use std::future::Future;

use axum::{
    Json,
    extract::{FromRequestParts, State},
    http::{StatusCode, request::Parts},
    response::Response,
};
use serde::{Deserialize, de::DeserializeOwned};
use serde_json::Value;

use super::{
    ApiState, BaseUrl,
    extract::{ApiJson, ApiPath, ApiQuery, ApiVersion, JsonSuffix, RequestId},
    listing::{self, Paging, Route, Shape, ShowQuery},
    nodes::call,
};
use crate::{
    db::{
        self, Db,
        listing::{Page, SortKeys},
    },
    error::{Error, Result},
    node::{JsonObject, Node},
    patch::{self, PatchOp},
    resource::Resource,
    rpc::{RpcReply, RpcRequest},
};

/// The query of a listing: paging and shaping, and the resource's own filters.
#[derive(Debug, Default, Deserialize)]
pub struct ListQuery<F> {
    #[serde(flatten)]
    pub paging: Paging,
    #[serde(flatten)]
    pub filters: F,
}

/// The filters of a listing that has none.
#[derive(Debug, Default, Deserialize)]
pub struct NoFilters {}

/// A listing asked for, as a resource's [`Listed::read`] sees it.
pub struct ListRequest<'a, R: Listed> {
    pub state: &'a ApiState,
    pub version: ApiVersion,
    pub route: &'a Route,
    pub paging: &'a Paging,
    pub filters: &'a R::Filters,
    pub sort: R::Sort,
}

impl<'a, R: Listed> ListRequest<'a, R> {
    /// The page asked for; read only once the filters are checked, as Ironic reads them.
    pub fn page(&self) -> Result<Page<'a, R::Sort>> {
        self.paging.page(self.sort)
    }
}

/// A collection [`list`] serves.
pub trait Listed: Resource + Send + Sync + Sized {
    /// The fields of a listing's short form.
    const SUMMARY: &'static [&'static str];
    /// What a listing can be sorted by.
    type Sort: SortKeys;
    /// The listing's query parameters beyond paging.
    type Filters: DeserializeOwned + Send + Sync;

    /// How the items are shown: `/detail`, `detail` (1.43) or `fields` (1.8).
    fn shape(paging: &Paging, version: ApiVersion, detail: bool) -> Result<Shape> {
        paging.shape::<Self>(version, detail)
    }

    /// One page of the listing, its filters checked; the filters its `next` link carries go
    /// into `carried` (`key=value&` each).
    fn read(
        request: &ListRequest<'_, Self>,
        carried: &mut String,
    ) -> impl Future<Output = Result<Vec<Self>>> + Send;
}

/// GET of a collection: `/v1/<collection>[/detail]`, or a sub-collection of the item its route
/// names (`/v1/nodes/{id}/ports`).
pub async fn list<R: Listed>(
    State(state): State<ApiState>,
    version: ApiVersion,
    BaseUrl(base): BaseUrl,
    route: Route,
    ApiQuery(q): ApiQuery<ListQuery<R::Filters>>,
) -> Result<Json<Value>> {
    let shape = R::shape(&q.paging, version, route.detail)?;
    let sort = q.paging.sort(R::Sort::parse, R::Sort::NAMES, R::Sort::ID)?;
    let request = ListRequest::<R> {
        state: &state,
        version,
        route: &route,
        paging: &q.paging,
        filters: &q.filters,
        sort,
    };
    let mut carried = String::new();
    let items = R::read(&request, &mut carried).await?;
    listing::page(
        &items,
        &q.paging,
        &shape,
        R::SUMMARY,
        version,
        &base,
        &route.path,
        &carried,
    )
    .map(Json)
}

/// An item its path names.
pub trait Found: Resource + Send + Sync + Sized {
    /// The path's identifier as [`find`](Found::find) takes it, checked first (an inspection
    /// rule's must be a UUID); most take it as it is.
    fn checked_ident(ident: String) -> Result<String> {
        Ok(ident)
    }

    /// The item `ident` names (`suffix`: the path lost a `.json`).
    fn find(
        state: &ApiState,
        suffix: JsonSuffix,
        ident: &str,
    ) -> impl Future<Output = Result<Self>> + Send;
}

/// The path of one item: the identifier in it, and whether it lost a `.json` ([`JsonSuffix`]).
pub struct ItemPath {
    pub ident: String,
    pub suffix: JsonSuffix,
}

impl<S: Send + Sync> FromRequestParts<S> for ItemPath {
    type Rejection = Error;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self> {
        let Ok(suffix) = JsonSuffix::from_request_parts(parts, state).await;
        let ApiPath(ident) = ApiPath::<String>::from_request_parts(parts, state).await?;
        Ok(ItemPath { ident, suffix })
    }
}

/// GET of one item, or only `?fields=` of it (1.8).
pub async fn show<R: Found>(
    State(state): State<ApiState>,
    version: ApiVersion,
    BaseUrl(base): BaseUrl,
    path: ItemPath,
    ApiQuery(q): ApiQuery<ShowQuery>,
) -> Result<Json<Value>> {
    let found = R::find(&state, path.suffix, &R::checked_ident(path.ident)?).await?;
    listing::show_one(&found, q.fields.as_deref(), version, &base).map(Json)
}

/// An item the API patches itself (no node lock is involved).
pub trait Patched: Found + Resource<Changes: Send> {
    /// The changes `ops` make: the fields' own, then any rule between them.
    fn patched(&self, ops: &[PatchOp]) -> Result<Self::Changes> {
        patch::apply(self, ops)
    }

    /// Writes `changes` to `item` and reads it back.
    fn write(
        db: &Db,
        item: &Self,
        changes: Self::Changes,
    ) -> impl Future<Output = Result<Self>> + Send;
}

/// PATCH of one item: the patch checked against the resource's fields at this version, then
/// applied and written.
pub async fn update<R: Patched>(
    State(state): State<ApiState>,
    version: ApiVersion,
    BaseUrl(base): BaseUrl,
    path: ItemPath,
    ApiJson(ops): ApiJson<Vec<PatchOp>>,
) -> Result<Json<Value>> {
    let ident = R::checked_ident(path.ident)?;
    listing::check_patch::<R>(version, &ops)?;
    let found = R::find(&state, path.suffix, &ident).await?;
    let changes = found.patched(&ops)?;
    let updated = R::write(&state.db, &found, changes).await?;
    Ok(Json(listing::detail(&updated, version, &base)))
}

/// An item the API creates and deletes itself (no node lock is involved).
pub trait Stored: Patched {
    /// The new item a create's body asks for, checked.
    fn from_create(body: JsonObject, version: ApiVersion) -> Result<Self>;

    /// Inserts `item` and reads it back.
    fn insert(db: &Db, item: &Self) -> impl Future<Output = Result<Self>> + Send;

    /// Deletes the item `uuid`.
    fn remove(db: &Db, uuid: &str) -> impl Future<Output = Result<()>> + Send;
}

/// POST to a collection: 201 with the item and its `Location`.
pub async fn create<R: Stored>(
    State(state): State<ApiState>,
    version: ApiVersion,
    BaseUrl(base): BaseUrl,
    ApiJson(body): ApiJson<JsonObject>,
) -> Result<Response> {
    let new = R::from_create(body, version)?;
    let stored = R::insert(&state.db, &new).await?;
    Ok(listing::created(&stored, version, &base))
}

/// DELETE of one item: 204.
pub async fn delete<R: Stored>(
    State(state): State<ApiState>,
    path: ItemPath,
) -> Result<StatusCode> {
    let found = R::find(&state, path.suffix, &R::checked_ident(path.ident)?).await?;
    R::remove(&state.db, found.uuid()).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// An item of a node that the node's conductor changes and deletes (a port, a portgroup, a
/// volume connector or target), as Ironic's API hands such a change to the node's conductor.
pub trait NodeChild: Found {
    /// The UUID of its node.
    fn node_uuid(&self) -> &str;

    /// Rules of a PATCH's operations beyond the fields' own, before the item is read.
    fn check_ops(_version: ApiVersion, _ops: &[PatchOp]) -> Result<()> {
        Ok(())
    }

    /// Rules of a PATCH of this item as it is.
    fn check_patch_of(&self, _version: ApiVersion, _ops: &[PatchOp]) -> Result<()> {
        Ok(())
    }

    /// The request that patches the item `uuid` of `node`.
    fn patch_request(node: Box<Node>, uuid: String, patch: Vec<PatchOp>) -> RpcRequest;

    /// The request that deletes the item `uuid` of `node`.
    fn destroy_request(node: Box<Node>, uuid: String) -> RpcRequest;

    /// The item a patch answered with.
    fn patched_item(reply: RpcReply) -> Result<Self>;
}

/// PATCH of a node's child: checked here, written by its node's conductor.
pub async fn update_child<R: NodeChild>(
    State(state): State<ApiState>,
    version: ApiVersion,
    request_id: RequestId,
    BaseUrl(base): BaseUrl,
    ApiPath(ident): ApiPath<String>,
    ApiJson(ops): ApiJson<Vec<PatchOp>>,
) -> Result<Json<Value>> {
    listing::check_patch::<R>(version, &ops)?;
    R::check_ops(version, &ops)?;
    let item = R::find(&state, JsonSuffix::default(), &R::checked_ident(ident)?).await?;
    item.check_patch_of(version, &ops)?;
    let node = db::nodes::get_by_uuid(&state.db, item.node_uuid()).await?;
    let request = R::patch_request(Box::new(node), item.uuid().to_owned(), ops);
    let updated = R::patched_item(call(&state, &request_id, request).await?)?;
    Ok(Json(listing::detail(&updated, version, &base)))
}

/// DELETE of a node's child, by its node's conductor: 204.
pub async fn delete_child<R: NodeChild>(
    State(state): State<ApiState>,
    request_id: RequestId,
    ApiPath(ident): ApiPath<String>,
) -> Result<StatusCode> {
    let item = R::find(&state, JsonSuffix::default(), &R::checked_ident(ident)?).await?;
    let node = db::nodes::get_by_uuid(&state.db, item.node_uuid()).await?;
    let request = R::destroy_request(Box::new(node), item.uuid().to_owned());
    call(&state, &request_id, request).await?;
    Ok(StatusCode::NO_CONTENT)
}
