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
    node::management::{BootMode, BootSetting, refuse_unstable},
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
    let request = Request {
        version,
        request_id: &request_id,
        base: &base,
        ident: &ident,
    };
    change(&state, request, body, |target| match target {
        Value::String(name) => Ok(BootSetting::Mode(BootMode::parse(&name)?)),
        other => Err(Error::InvalidParameterValue(format!(
            "Expected string for target: {other}"
        ))),
    })
    .await
}

pub async fn set_secure_boot(
    State(state): State<ApiState>,
    version: ApiVersion,
    request_id: RequestId,
    BaseUrl(base): BaseUrl,
    ApiPath(ident): ApiPath<String>,
    ApiJson(body): ApiJson<TargetBody>,
) -> Result<Response> {
    let request = Request {
        version,
        request_id: &request_id,
        base: &base,
        ident: &ident,
    };
    change(&state, request, body, |target| {
        let shown = target.to_string();
        match resource::boolean("target", target)? {
            Some(on) => Ok(BootSetting::SecureBoot(on)),
            None => Err(Error::InvalidParameterValue(format!(
                "Invalid secure_boot {shown} requested for node. Allowed secure_boot states are: True, False) "
            ))),
        }
    })
    .await
}

/// What a change request names besides its body.
struct Request<'a> {
    version: ApiVersion,
    request_id: &'a RequestId,
    base: &'a str,
    ident: &'a str,
}

/// Reads the body's target as `setting` reads it and asks the node's conductor to change it, the
/// node not moving (202, as Ironic's).
async fn change(
    state: &ApiState,
    request: Request<'_>,
    body: TargetBody,
    setting: impl FnOnce(Value) -> Result<BootSetting>,
) -> Result<Response> {
    let node = find(state, request.ident, request.version).await?;
    require_endpoint(request.version)?;
    let setting = setting(body.target.ok_or_else(missing_target)?)?;
    refuse_unstable(&node)?;
    let rpc = RpcRequest::ChangeBootSetting {
        node: Box::new(node),
        setting,
    };
    call(state, request.request_id, rpc).await?;
    Ok(accepted(request.base, request.ident))
}
