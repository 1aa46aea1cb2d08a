//! /v1/nodes/{id}/bios (API 1.40): the BIOS settings cached for a node. The fake BIOS interface
//! reports none, and Ferrum has no BIOS setting store yet, so every node's list is empty.

use axum::{Json, extract::State};
use serde_json::{Value, json};

use super::{
    ApiState,
    extract::{ApiPath, ApiVersion},
    nodes::find,
};
use crate::error::{Error, Result};

pub async fn list(
    State(state): State<ApiState>,
    version: ApiVersion,
    ApiPath(ident): ApiPath<String>,
) -> Result<Json<Value>> {
    version.require_resource(40)?;
    find(&state, &ident, version).await?;
    Ok(Json(json!({ "bios": [] })))
}

pub async fn show(
    State(state): State<ApiState>,
    version: ApiVersion,
    ApiPath((ident, name)): ApiPath<(String, String)>,
) -> Result<Json<Value>> {
    version.require_resource(40)?;
    let node = find(&state, &ident, version).await?;
    Err(Error::BiosSettingNotFound {
        node: node.uuid,
        name,
    })
}
