//! PUT /v1/nodes/{id}/states/raid (API 1.12): the node's target RAID configuration.

use axum::http::StatusCode;
use serde_json::Value;

use super::{OnNode, call, find, require_version};
use crate::{
    api::extract::ApiJson,
    error::{Error, Result},
    rpc::RpcRequest,
};

/// The body is the target RAID configuration itself, a JSON object (`{}` clears it). The
/// conductor checks it with the node's RAID interface; 204 once stored. Ironic answers a RAID
/// interface that does not support it (`no-raid`) with 404 here: RAID is a standard interface
/// that a driver may lack.
pub async fn set_target_raid_config(
    OnNode(state, version, request_id, ident): OnNode,
    ApiJson(body): ApiJson<Value>,
) -> Result<StatusCode> {
    let node = find(&state, &ident, version).await?;
    require_version(version, 12, "Setting a target RAID configuration")?;
    let Value::Object(target_raid_config) = body else {
        return Err(Error::InvalidParameterValue(format!(
            "Invalid target_raid_config: expected a JSON object, got {body}"
        )));
    };
    let request = RpcRequest::SetTargetRaidConfig {
        node: Box::new(node),
        target_raid_config,
    };
    match call(&state, &request_id, request).await {
        Ok(_) => Ok(StatusCode::NO_CONTENT),
        Err(unsupported @ Error::UnsupportedDriverExtension { .. }) => {
            Err(Error::NotFound(unsupported.to_string()))
        }
        Err(e) => Err(e),
    }
}
