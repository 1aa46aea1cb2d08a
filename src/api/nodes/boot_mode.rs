//! PUT /v1/nodes/{id}/states/boot_mode and /states/secure_boot (API 1.76): the target is
//! checked here, the node's state here and again by the conductor under the lock, which calls
//! the management interface and records the outcome on the node (`boot_mode`, `secure_boot`,
//! 1.75; or `last_error`).

use axum::{extract::State, response::Response};
use serde::Deserialize;
use serde_json::Value;

use super::{accepted, call, find};
use crate::{
    api::{
        ApiState, BaseUrl,
        extract::{ApiJson, ApiPath, ApiVersion, RequestId},
    },
    error::{Error, Result},
    node::management::{BootMode, refuse_unstable},
    resource,
    rpc::RpcRequest,
};

/// The API minor version of the two endpoints.
const SINCE: u32 = 76;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TargetBody {
    target: Option<Value>,
}

/// Below 1.76 the endpoints do not exist (Ironic's 404 names the version).
fn require_endpoint(version: ApiVersion) -> Result<()> {
    if version.at_least(SINCE) {
        Ok(())
    } else {
        Err(Error::NotFound(format!(
            "This endpoint is supported starting with the API version 1.{SINCE}"
        )))
    }
}

fn missing_target() -> Error {
    Error::MissingParameterValue("Missing mandatory parameter: target".to_owned())
}

pub async fn set_boot_mode(
    State(state): State<ApiState>,
    version: ApiVersion,
    request_id: RequestId,
    BaseUrl(base): BaseUrl,
    ApiPath(ident): ApiPath<String>,
    ApiJson(body): ApiJson<TargetBody>,
) -> Result<Response> {
    let node = find(&state, &ident, version).await?;
    require_endpoint(version)?;
    let mode = match body.target.ok_or_else(missing_target)? {
        Value::String(name) => BootMode::parse(&name)?,
        other => {
            return Err(Error::InvalidParameterValue(format!(
                "Expected string for target: {other}"
            )));
        }
    };
    refuse_unstable(&node)?;
    let request = RpcRequest::ChangeNodeBootMode {
        node: Box::new(node),
        mode,
    };
    call(&state, &request_id, request).await?;
    Ok(accepted(&base, &ident))
}

pub async fn set_secure_boot(
    State(state): State<ApiState>,
    version: ApiVersion,
    request_id: RequestId,
    BaseUrl(base): BaseUrl,
    ApiPath(ident): ApiPath<String>,
    ApiJson(body): ApiJson<TargetBody>,
) -> Result<Response> {
    let node = find(&state, &ident, version).await?;
    require_endpoint(version)?;
    let target = body.target.ok_or_else(missing_target)?;
    let shown = target.to_string();
    let Some(on) = resource::boolean("target", target)? else {
        return Err(Error::InvalidParameterValue(format!(
            "Invalid secure_boot {shown} requested for node. Allowed secure_boot states are: True, False) "
        )));
    };
    refuse_unstable(&node)?;
    let request = RpcRequest::ChangeNodeSecureBoot {
        node: Box::new(node),
        on,
    };
    call(&state, &request_id, request).await?;
    Ok(accepted(&base, &ident))
}
