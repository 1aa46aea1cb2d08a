//! PUT and DELETE /v1/nodes/{id}/maintenance.

use axum::{extract::State, http::StatusCode};
use serde::Deserialize;

use super::{call, find};
use crate::{
    api::{
        ApiState,
        extract::{ApiPath, ApiVersion, OptionalJson, RequestId},
    },
    error::Result,
    rpc::RpcRequest,
};

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MaintenanceBody {
    reason: Option<String>,
}

/// PUT /v1/nodes/{id}/maintenance: 202; the reason is optional.
pub async fn set_maintenance(
    State(state): State<ApiState>,
    version: ApiVersion,
    request_id: RequestId,
    ApiPath(ident): ApiPath<String>,
    OptionalJson(body): OptionalJson<MaintenanceBody>,
) -> Result<StatusCode> {
    let node = find(&state, &ident, version).await?;
    let reason = body.and_then(|b| b.reason);
    call(
        &state,
        &request_id,
        RpcRequest::SetMaintenance {
            node: Box::new(node),
            maintenance: true,
            reason,
        },
    )
    .await?;
    Ok(StatusCode::ACCEPTED)
}

/// DELETE /v1/nodes/{id}/maintenance: 202.
pub async fn unset_maintenance(
    State(state): State<ApiState>,
    version: ApiVersion,
    request_id: RequestId,
    ApiPath(ident): ApiPath<String>,
) -> Result<StatusCode> {
    let node = find(&state, &ident, version).await?;
    call(
        &state,
        &request_id,
        RpcRequest::SetMaintenance {
            node: Box::new(node),
            maintenance: false,
            reason: None,
        },
    )
    .await?;
    Ok(StatusCode::ACCEPTED)
}
