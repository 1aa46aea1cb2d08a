//! GET /v1/nodes/{id}, its states and its console: straight from the database.

use axum::{Json, extract::State};
use serde_json::{Value, json};

use super::{detail, find};
use crate::{
    api::{
        ApiState, BaseUrl,
        extract::{ApiPath, ApiVersion},
        views,
    },
    error::Result,
};

pub async fn show(
    State(state): State<ApiState>,
    version: ApiVersion,
    BaseUrl(base): BaseUrl,
    ApiPath(ident): ApiPath<String>,
) -> Result<Json<Value>> {
    let node = find(&state, &ident, version).await?;
    detail(&state, &node, version, &base).await.map(Json)
}

pub async fn states(
    State(state): State<ApiState>,
    version: ApiVersion,
    ApiPath(ident): ApiPath<String>,
) -> Result<Json<Value>> {
    let node = find(&state, &ident, version).await?;
    Ok(Json(views::node_states(&node, version)))
}

/// GET /v1/nodes/{id}/states/console.
pub async fn console(
    State(state): State<ApiState>,
    version: ApiVersion,
    ApiPath(ident): ApiPath<String>,
) -> Result<Json<Value>> {
    let node = find(&state, &ident, version).await?;
    let info = if node.console_enabled {
        json!({"type": "fake", "url": format!("fake://{}", node.uuid)})
    } else {
        Value::Null
    };
    Ok(Json(json!({
        "console_enabled": node.console_enabled,
        "console_info": info,
    })))
}
