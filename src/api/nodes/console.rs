//! PUT /v1/nodes/{id}/states/console.

use axum::{extract::State, response::Response};
use serde::Deserialize;

use super::{accepted, call, find};
use crate::{
    api::{
        ApiState, BaseUrl,
        extract::{ApiJson, ApiPath, ApiVersion, RequestId},
    },
    error::Result,
    rpc::RpcRequest,
};

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConsoleBody {
    enabled: bool,
}

/// PUT /v1/nodes/{id}/states/console: 202.
pub async fn set_console(
    State(state): State<ApiState>,
    version: ApiVersion,
    request_id: RequestId,
    BaseUrl(base): BaseUrl,
    ApiPath(ident): ApiPath<String>,
    ApiJson(body): ApiJson<ConsoleBody>,
) -> Result<Response> {
    let node = find(&state, &ident, version).await?;
    call(
        &state,
        &request_id,
        RpcRequest::SetConsoleMode {
            node: Box::new(node),
            enabled: body.enabled,
        },
    )
    .await?;
    Ok(accepted(&base, &ident))
}
