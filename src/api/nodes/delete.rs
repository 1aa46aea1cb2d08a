//! DELETE /v1/nodes/{id}: the conductor decides whether the node's state allows it.

use axum::{extract::State, http::StatusCode};

use super::{call, find};
use crate::{
    api::{
        ApiState,
        extract::{ApiPath, ApiVersion, JsonSuffix, RequestId},
    },
    error::Result,
    rpc::RpcRequest,
};

pub async fn delete(
    State(state): State<ApiState>,
    version: ApiVersion,
    request_id: RequestId,
    suffix: JsonSuffix,
    ApiPath(ident): ApiPath<String>,
) -> Result<StatusCode> {
    let node = suffix
        .find(&ident, |i| {
            let state = &state;
            async move { find(state, &i, version).await }
        })
        .await?;
    call(
        &state,
        &request_id,
        RpcRequest::DestroyNode {
            node: Box::new(node),
        },
    )
    .await?;
    Ok(StatusCode::NO_CONTENT)
}
