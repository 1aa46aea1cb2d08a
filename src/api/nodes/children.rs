//! A node's parent (API 1.83): resolving the `parent_node` a client writes (a node's UUID or
//! name, stored as its UUID) and GET /v1/nodes/{id}/children (Ironic's
//! `NodeChildrenController`: the children's UUIDs and a link to the filtered node list).

use axum::{Json, extract::State};
use serde_json::{Value, json};

use super::find;
use crate::{
    api::{
        ApiState, BaseUrl,
        extract::{ApiPath, ApiVersion},
    },
    db,
    error::{Error, Result},
};

/// The version parent and child nodes appeared in.
pub const PARENT_NODE: u32 = 83;

/// Ironic's `authorize_node_link`: one message whether the node is missing, owned by another
/// project or (Ferrum only) the node itself, so that it discloses nothing.
fn invalid(value: &str) -> Error {
    Error::InvalidParameterValue(format!(
        "Unable to apply the requested parent_node '{value}'. Requested value was invalid."
    ))
}

/// The UUID a written `parent_node` names: a string up to 36 characters (Ironic's schema) naming
/// an existing node of the same owner that is not `self_uuid`. Null stays null; a value of
/// another type is left for the field table to refuse.
pub(super) async fn resolve_parent(
    state: &ApiState,
    version: ApiVersion,
    value: &Value,
    owner: Option<&str>,
    self_uuid: Option<&str>,
) -> Result<Value> {
    let Value::String(ident) = value else {
        return Ok(value.clone());
    };
    if ident.chars().count() > 36 {
        return Err(Error::InvalidParameterValue(format!(
            "Invalid parent_node: '{ident}' is longer than 36 characters."
        )));
    }
    let parent = match find(state, ident, version).await {
        Ok(parent) => parent,
        Err(Error::NodeNotFound { .. }) => return Err(invalid(ident)),
        Err(other) => return Err(other),
    };
    if parent.owner.as_deref() != owner || Some(parent.uuid.as_str()) == self_uuid {
        return Err(invalid(ident));
    }
    Ok(Value::String(parent.uuid))
}

/// GET /v1/nodes/{id}/children: 404 below 1.83.
pub async fn list(
    State(state): State<ApiState>,
    version: ApiVersion,
    BaseUrl(base): BaseUrl,
    ApiPath(ident): ApiPath<String>,
) -> Result<Json<Value>> {
    let node = find(&state, &ident, version).await?;
    let children = db::nodes::children_of(&state.db, &node.uuid).await?;
    Ok(Json(json!({
        "children": children,
        "links": {
            "href": format!("{base}/v1/nodes?parent_node={}", node.uuid),
            "rel": "children",
        },
    })))
}
