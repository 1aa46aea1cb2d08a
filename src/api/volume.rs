//! /v1/volume (1.32): the root with its links, /v1/volume/connectors and /v1/volume/targets, and
//! a node's (`/v1/nodes/{id}/volume[/connectors|/targets]`). Listings are read from the
//! database; a create is written here, as Ironic's API writes it (no lock: the foreign key keeps
//! it from outliving its node, the unique keys from doubling another); an update or delete goes
//! to the conductor of the node (`conductor/volume.rs`). Connectors and targets share every
//! handler through [`Kind`].

use std::future::Future;

use axum::{Json, extract::State, response::Response};
use serde::Deserialize;
use serde_json::{Value, json};

use super::{
    ApiState, BaseUrl,
    collection::{Found, ListRequest, Listed, NodeChild},
    extract::{ApiJson, ApiPath, ApiVersion, JsonSuffix},
    listing::{self, Paging, Shape},
    nodes::find,
    ports::parent_node,
};
use crate::{
    db::{self, Db, volume::SortKey},
    error::{Error, Result},
    node::{JsonObject, Node, normalize_uuid},
    patch::{self, PatchOp},
    resource::links,
    rpc::{RpcReply, RpcRequest, VolumeChange},
    volume::{self, VolumeConnector, VolumeTarget},
};

/// What differs between connectors and targets for a create, beyond their listing, lookup and
/// changes ([`Listed`], [`Found`], [`NodeChild`]).
pub trait Kind: Listed<Sort = SortKey, Filters = Filters> + NodeChild + Clone {
    /// The fields a create must give.
    const REQUIRED: &'static [&'static str];
    fn template() -> Self;
    fn set_node_uuid(&mut self, uuid: String);
    fn insert(db: &Db, item: &Self) -> impl Future<Output = Result<Self>> + Send;
}

/// Implements [`Kind`], [`Listed`], [`Found`] and [`NodeChild`] for `$ty` from its queries, its
/// change variants and its reply variant.
macro_rules! kind {
    ($ty:ident, $summary:expr, $required:expr, $get:ident, $list:ident, $insert:ident,
     $update:ident, $destroy:ident) => {
        impl Listed for $ty {
            const SUMMARY: &'static [&'static str] = $summary;
            type Sort = SortKey;
            type Filters = Filters;

            fn shape(paging: &Paging, version: ApiVersion, detail: bool) -> Result<Shape> {
                shape::<Self>(paging, version, detail)
            }

            async fn read(
                request: &ListRequest<'_, Self>,
                carried: &mut String,
            ) -> Result<Vec<Self>> {
                let node = listed_node(request, carried).await?;
                db::volume::$list(&request.state.db, node.as_deref(), &request.page()?).await
            }
        }

        /// Named by UUID only.
        impl Found for $ty {
            fn checked_ident(ident: String) -> Result<String> {
                normalize_uuid("uuid", &ident)
            }

            async fn find(state: &ApiState, _: JsonSuffix, uuid: &str) -> Result<Self> {
                db::volume::$get(&state.db, uuid).await
            }
        }

        impl NodeChild for $ty {
            fn node_uuid(&self) -> &str {
                &self.node_uuid
            }
            fn patch_request(node: Box<Node>, uuid: String, patch: Vec<PatchOp>) -> RpcRequest {
                let change = VolumeChange::$update { uuid, patch };
                RpcRequest::ChangeVolume { node, change }
            }
            fn destroy_request(node: Box<Node>, uuid: String) -> RpcRequest {
                let change = VolumeChange::$destroy { uuid };
                RpcRequest::ChangeVolume { node, change }
            }
            fn patched_item(reply: RpcReply) -> Result<Self> {
                reply.pick(|reply| match reply {
                    RpcReply::$ty(item) => Ok(*item),
                    other => Err(other),
                })
            }
        }

        impl Kind for $ty {
            const REQUIRED: &'static [&'static str] = $required;
            fn template() -> Self {
                $ty::template()
            }
            fn set_node_uuid(&mut self, uuid: String) {
                self.node_uuid = uuid;
            }
            fn insert(db: &Db, item: &Self) -> impl Future<Output = Result<Self>> + Send {
                db::volume::$insert(db, item)
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

/// A listing's filter: the node (a node's own listing names it in its route).
#[derive(Debug, Default, Deserialize)]
pub struct Filters {
    node: Option<String>,
}

/// Ironic's `VolumeConnectorsController.get_all` and `VolumeTargetsController.get_all` take
/// `detail` at 1.32 (no 1.43 gate), refusing it with `fields` in their own words.
fn shape<K: Kind>(paging: &Paging, version: ApiVersion, detail: bool) -> Result<Shape> {
    paging.shape_as::<K>(
        version,
        detail,
        32,
        "Can't fetch a subset of fields with 'detail' set",
    )
}

/// The UUID of the node a listing is narrowed to: its route's, or its `node` filter's (which
/// its `next` link carries).
async fn listed_node<K: Kind>(
    request: &ListRequest<'_, K>,
    carried: &mut String,
) -> Result<Option<String>> {
    let parent = request.route.parent.as_ref().map(|(_, id)| id.as_str());
    let node = match parent.or(request.filters.node.as_deref()) {
        Some(n) => Some(find(request.state, n, request.version).await?.uuid),
        None => None,
    };
    if let (None, Some(n)) = (parent, &node) {
        carried.push_str(&format!("node={n}&"));
    }
    Ok(node)
}

pub async fn create<K: Kind>(
    State(state): State<ApiState>,
    version: ApiVersion,
    BaseUrl(base): BaseUrl,
    ApiJson(body): ApiJson<JsonObject>,
) -> Result<Response> {
    listing::check_create::<K>(version, &body)?;
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
