//! GET /v1/nodes/{id}/validate: each interface's verdict, from the node's conductor.

use axum::Json;
use serde_json::{Value, json};

use super::{OnNode, call, find};
use crate::{error::Result, rpc::RpcRequest};

/// GET /v1/nodes/{id}/validate: `{<interface>: {"result": bool|null, "reason"?: str}}`.
pub async fn validate(OnNode(state, version, request_id, ident): OnNode) -> Result<Json<Value>> {
    let node = find(&state, &ident, version).await?;
    let results = call(
        &state,
        &request_id,
        RpcRequest::ValidateDriverInterfaces {
            node: Box::new(node),
        },
    )
    .await?
    .into_validation()?;
    let mut body = serde_json::Map::new();
    for v in results {
        let mut entry = serde_json::Map::new();
        entry.insert("result".into(), json!(v.result));
        if let Some(reason) = v.reason {
            entry.insert("reason".into(), json!(reason));
        }
        body.insert(v.interface, Value::Object(entry));
    }
    Ok(Json(Value::Object(body)))
}
