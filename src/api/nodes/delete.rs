//! DELETE /v1/nodes/{id}: the conductor decides whether the node's state allows it.

use axum::{extract::State, http::StatusCode};

use super::{call, find};
use crate::{
    api::{
        ApiState,
        extract::{ApiPath, ApiVersion, JsonSuffix, RequestId},
    },
    error::Result,
    notifications::{Status, node as payload},
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
    // Announced as Ironic's API announces it: `baremetal.node.delete.{start,end,error}`.
    let notifier = &state.notifier;
    notifier.emit("node", "delete", Status::Start, || payload::crud(&node));
    let deleted = call(
        &state,
        &request_id,
        RpcRequest::DestroyNode {
            node: Box::new(node.clone()),
        },
    )
    .await;
    let status = if deleted.is_ok() {
        Status::End
    } else {
        Status::Error
    };
    notifier.emit("node", "delete", status, || payload::crud(&node));
    deleted?;
    Ok(StatusCode::NO_CONTENT)
}
