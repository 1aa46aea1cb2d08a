//! /v1/volume (1.32): the root with its links, /v1/volume/connectors and /v1/volume/targets, and
//! a node's (`/v1/nodes/{id}/volume[/connectors|/targets]`). Listings are read from the
//! database; a create is written here, as Ironic's API writes it (no lock: the foreign key keeps
//! it from outliving its node, the unique keys from doubling another); an update or delete goes
//! to the conductor of the node (`conductor/volume.rs`). Connectors and targets share every
//! handler through [`Kind`].

use std::future::Future;

use axum::{Json, extract::State, http::StatusCode, response::Response};
use serde::Deserialize;
use serde_json::{Value, json};

use super::{
    ApiState, BaseUrl,
    extract::{ApiJson, ApiPath, ApiQuery, ApiVersion, RequestId},
    listing::{self, Paging, ShowQuery},
    nodes::{call, find},
    ports::parent_node,
};
use crate::{
    db::{self, Db, volume::SortKey},
    error::{Error, Result},
    node::{JsonObject, normalize_uuid},
    patch::{self, PatchOp},
    resource::{Resource, links},
    rpc::{RpcReply, RpcRequest, VolumeChange},
    volume::{self, VolumeConnector, VolumeTarget},
};

/// What differs between connectors and targets for their handlers.
pub trait Kind: Resource + Clone + Send + Sync {
    /// The fields of a listing's short form.
    const SUMMARY: &'static [&'static str];
    /// The fields a create must give.
    const REQUIRED: &'static [&'static str];
    fn template() -> Self;
    fn node_uuid(&self) -> &str;
    fn set_node_uuid(&mut self, uuid: String);
    /// Writes `changes` into the item.
    fn apply(&mut self, changes: Self::Changes);
    fn get(db: &Db, uuid: &str) -> impl Future<Output = Result<Self>> + Send;
    fn list(
        db: &Db,
        node_uuid: Option<&str>,
        sort: SortKey,
        descending: bool,
        limit: i64,
        marker: Option<&str>,
    ) -> impl Future<Output = Result<Vec<Self>>> + Send;
    fn insert(db: &Db, item: &Self) -> impl Future<Output = Result<Self>> + Send;
    fn update(uuid: String, patch: Vec<PatchOp>) -> VolumeChange;
    fn destroy(uuid: String) -> VolumeChange;
    fn from_reply(reply: RpcReply) -> std::result::Result<Self, RpcReply>;
}

/// Implements [`Kind`] for `$ty` from its queries, its change variants and its reply variant.
macro_rules! kind {
    ($ty:ident, $summary:expr, $required:expr, $get:ident, $list:ident, $insert:ident,
     $update:ident, $destroy:ident) => {
        impl Kind for $ty {
            const SUMMARY: &'static [&'static str] = $summary;
            const REQUIRED: &'static [&'static str] = $required;
            fn template() -> Self {
                $ty::template()
            }
            fn node_uuid(&self) -> &str {
                &self.node_uuid
            }
            fn set_node_uuid(&mut self, uuid: String) {
                self.node_uuid = uuid;
            }
            fn apply(&mut self, changes: Self::Changes) {
                changes.set_into(self);
            }
            fn get(db: &Db, uuid: &str) -> impl Future<Output = Result<Self>> + Send {
                db::volume::$get(db, uuid)
            }
            fn list(
                db: &Db,
                node_uuid: Option<&str>,
                sort: SortKey,
                descending: bool,
                limit: i64,
                marker: Option<&str>,
            ) -> impl Future<Output = Result<Vec<Self>>> + Send {
                db::volume::$list(db, node_uuid, sort, descending, limit, marker)
            }
            fn insert(db: &Db, item: &Self) -> impl Future<Output = Result<Self>> + Send {
                db::volume::$insert(db, item)
            }
            fn update(uuid: String, patch: Vec<PatchOp>) -> VolumeChange {
                VolumeChange::$update { uuid, patch }
            }
            fn destroy(uuid: String) -> VolumeChange {
                VolumeChange::$destroy { uuid }
            }
            fn from_reply(reply: RpcReply) -> std::result::Result<Self, RpcReply> {
                match reply {
                    RpcReply::$ty(item) => Ok(*item),
                    other => Err(other),
                }
            }
        }
    };
}

kind!(
    VolumeConnector,
    volume::CONNECTOR_SUMMARY,
    &["connector_id", "node_uuid", "type"],
    get_connector,
    list_connectors,
    insert_connector,
    UpdateConnector,
    DestroyConnector
);
kind!(
    VolumeTarget,
    volume::TARGET_SUMMARY,
    &["boot_index", "node_uuid", "volume_id", "volume_type"],
    get_target,
    list_targets,
    insert_target,
    UpdateTarget,
    DestroyTarget
);

/// The volume root of `prefix` (`volume` or `nodes/<id>/volume`): its own links and its two
/// collections'.
fn root_document(base: &str, prefix: &str) -> Value {
    json!({
        "links": links(base, prefix, ""),
        "connectors": links(base, prefix, "connectors"),
        "targets": links(base, prefix, "targets"),
    })
}

pub async fn root(BaseUrl(base): BaseUrl) -> Result<Json<Value>> {
    Ok(Json(root_document(&base, "volume")))
}

pub async fn node_root(
    State(state): State<ApiState>,
    version: ApiVersion,
    BaseUrl(base): BaseUrl,
    ApiPath(node): ApiPath<String>,
) -> Result<Json<Value>> {
    find(&state, &node, version).await?;
    Ok(Json(root_document(&base, &format!("nodes/{node}/volume"))))
}

#[derive(Debug, Default, Deserialize)]
pub struct ListQuery {
    #[serde(flatten)]
    paging: Paging,
    node: Option<String>,
}

async fn list_page<K: Kind>(
    state: &ApiState,
    q: &ListQuery,
    version: ApiVersion,
    base: &str,
    parent: Option<&str>,
    detail_path: bool,
) -> Result<Value> {
    // Ironic's `VolumeConnectorsController.get_all` and `VolumeTargetsController.get_all`
    // take `detail` at 1.32 (no 1.43 gate), refusing it with `fields` in their own words.
    let shape = q.paging.shape_as::<K>(
        version,
        detail_path,
        32,
        "Can't fetch a subset of fields with 'detail' set",
    )?;
    let sort = q.paging.sort(SortKey::parse, SortKey::NAMES, SortKey::Id)?;
    let node = match parent.or(q.node.as_deref()) {
        Some(n) => Some(find(state, n, version).await?.uuid),
        None => None,
    };
    let items = K::list(
        &state.db,
        node.as_deref(),
        sort,
        q.paging.descending()?,
        q.paging.limit()?,
        q.paging.marker.as_deref(),
    )
    .await?;
    let suffix = if detail_path { "/detail" } else { "" };
    let (path, carried) = match (parent, &node) {
        (Some(p), _) => (
            format!("nodes/{p}/{}{suffix}", K::COLLECTION),
            String::new(),
        ),
        (None, Some(n)) => (format!("{}{suffix}", K::COLLECTION), format!("node={n}&")),
        (None, None) => (format!("{}{suffix}", K::COLLECTION), String::new()),
    };
    listing::page(
        &items,
        &q.paging,
        &shape,
        K::SUMMARY,
        version,
        base,
        &path,
        &carried,
    )
}

pub async fn list<K: Kind>(
    State(state): State<ApiState>,
    version: ApiVersion,
    BaseUrl(base): BaseUrl,
    ApiQuery(q): ApiQuery<ListQuery>,
) -> Result<Json<Value>> {
    list_page::<K>(&state, &q, version, &base, None, false)
        .await
        .map(Json)
}

pub async fn list_detail<K: Kind>(
    State(state): State<ApiState>,
    version: ApiVersion,
    BaseUrl(base): BaseUrl,
    ApiQuery(q): ApiQuery<ListQuery>,
) -> Result<Json<Value>> {
    list_page::<K>(&state, &q, version, &base, None, true)
        .await
        .map(Json)
}

pub async fn of_node<K: Kind>(
    State(state): State<ApiState>,
    version: ApiVersion,
    BaseUrl(base): BaseUrl,
    ApiPath(node): ApiPath<String>,
    ApiQuery(q): ApiQuery<ListQuery>,
) -> Result<Json<Value>> {
    list_page::<K>(&state, &q, version, &base, Some(&node), false)
        .await
        .map(Json)
}

pub async fn show<K: Kind>(
    State(state): State<ApiState>,
    version: ApiVersion,
    BaseUrl(base): BaseUrl,
    ApiPath(uuid): ApiPath<String>,
    ApiQuery(q): ApiQuery<ShowQuery>,
) -> Result<Json<Value>> {
    let item = K::get(&state.db, &normalize_uuid("uuid", &uuid)?).await?;
    listing::show_one(&item, q.fields.as_deref(), version, &base).map(Json)
}

pub async fn create<K: Kind>(
    State(state): State<ApiState>,
    version: ApiVersion,
    BaseUrl(base): BaseUrl,
    ApiJson(body): ApiJson<JsonObject>,
) -> Result<Response> {
    for name in body.keys() {
        listing::check_written_field::<K>(version, name, |w| w.create)?;
    }
    if let Some(missing) = K::REQUIRED.iter().find(|f| !body.contains_key(**f)) {
        return Err(Error::MissingParameterValue(format!(
            "Missing mandatory parameter: {missing}"
        )));
    }
    let node = parent_node(&state, &body).await?;
    let mut item = K::template();
    let changes = patch::changes_for_create(&item, body)?;
    item.apply(changes);
    item.set_node_uuid(node.uuid);
    let stored = K::insert(&state.db, &item).await?;
    Ok(listing::created(&stored, version, &base))
}

/// Sends an update or delete of one of `item`'s node's volume resources to the node's conductor.
async fn volume_call<K: Kind>(
    state: &ApiState,
    request_id: &RequestId,
    item: &K,
    change: VolumeChange,
) -> Result<RpcReply> {
    let node = db::nodes::get_by_uuid(&state.db, item.node_uuid()).await?;
    let request = RpcRequest::ChangeVolume {
        node: Box::new(node),
        change,
    };
    call(state, request_id, request).await
}

pub async fn update<K: Kind>(
    State(state): State<ApiState>,
    version: ApiVersion,
    request_id: RequestId,
    BaseUrl(base): BaseUrl,
    ApiPath(uuid): ApiPath<String>,
    ApiJson(ops): ApiJson<Vec<PatchOp>>,
) -> Result<Json<Value>> {
    listing::check_patch::<K>(version, &ops)?;
    let item = K::get(&state.db, &normalize_uuid("uuid", &uuid)?).await?;
    let change = K::update(item.uuid().to_owned(), ops);
    let updated = volume_call(&state, &request_id, &item, change)
        .await?
        .pick(K::from_reply)?;
    Ok(Json(listing::detail(&updated, version, &base)))
}

pub async fn delete<K: Kind>(
    State(state): State<ApiState>,
    request_id: RequestId,
    ApiPath(uuid): ApiPath<String>,
) -> Result<StatusCode> {
    let item = K::get(&state.db, &normalize_uuid("uuid", &uuid)?).await?;
    let change = K::destroy(item.uuid().to_owned());
    volume_call(&state, &request_id, &item, change).await?;
    Ok(StatusCode::NO_CONTENT)
}
