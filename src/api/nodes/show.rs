//! GET /v1/nodes/{id}, its states and its console: straight from the database.

use axum::{Json, extract::State};
use serde::Deserialize;
use serde_json::{Value, json};

use super::{conductor_shown, detail, find, require_version};
use crate::{
    api::{
        ApiState, BaseUrl,
        extract::{ApiPath, ApiQuery, ApiVersion, JsonSuffix},
        views,
    },
    error::Result,
    node,
};

#[derive(Debug, Default, Deserialize)]
pub struct ShowQuery {
    fields: Option<String>,
}

/// GET /v1/nodes/{id}, or only `?fields=` of it (1.8), as the listing's `fields` does.
pub async fn show(
    State(state): State<ApiState>,
    version: ApiVersion,
    BaseUrl(base): BaseUrl,
    suffix: JsonSuffix,
    ApiPath(ident): ApiPath<String>,
    ApiQuery(query): ApiQuery<ShowQuery>,
) -> Result<Json<Value>> {
    let Some(fields) = &query.fields else {
        let node = suffix
            .find(&ident, |i| {
                let state = &state;
                async move { find(state, &i, version).await }
            })
            .await?;
        return detail(&state, &node, version, &base).await.map(Json);
    };
    require_version(version, 8, "The fields parameter")?;
    let names = views::field_names(fields);
    views::check_field_names(version, &names)?;
    let node = suffix
        .find(&ident, |i| {
            let state = &state;
            async move { find(state, &i, version).await }
        })
        .await?;
    let conductor = if names.iter().any(|n| n == "conductor") {
        conductor_shown(&state, &node, version).await?
    } else {
        None
    };
    Ok(Json(views::node_fields(
        &node,
        version,
        &base,
        conductor.as_deref(),
        &names,
    )))
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
        node::console::info(&node, state.config.vnc_public_url.as_deref())
    } else {
        Value::Null
    };
    Ok(Json(json!({
        "console_enabled": node.console_enabled,
        "console_info": info,
    })))
}
