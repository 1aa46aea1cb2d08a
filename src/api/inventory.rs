//! /v1/nodes/{id}/inventory (API 1.81): the inventory and plugin data an inspection stored for
//! the node (Ironic's `NodeInventoryController`, database backend); 404 when there is none.

use axum::{Json, extract::State};
use serde_json::{Value, json};

use super::{
    ApiState,
    extract::{ApiPath, ApiVersion},
    nodes,
};
use crate::{
    db,
    error::{Error, Result},
};

/// GET /v1/nodes/{id}/inventory.
pub async fn show(
    State(state): State<ApiState>,
    version: ApiVersion,
    ApiPath(ident): ApiPath<String>,
) -> Result<Json<Value>> {
    let node = nodes::find(&state, &ident, version).await?;
    match db::inventory::get(&state.db, node.id).await? {
        Some(record) => Ok(Json(json!({
            "inventory": record.inventory_data.0,
            "plugin_data": record.plugin_data.0,
        }))),
        None => Err(Error::NotFound(format!(
            "Node inventory record for node {} could not be found.",
            node.uuid
        ))),
    }
}
