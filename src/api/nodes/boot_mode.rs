//! PUT /v1/nodes/{id}/states/boot_mode and /states/secure_boot (API 1.76): the target is
//! checked here, the node's state here and again by the conductor under the lock, which calls
//! the management interface and records the outcome on the node (`boot_mode`, `secure_boot`,
//! 1.75; or `last_error`).

use axum::response::Response;
use serde::Deserialize;
use serde_json::Value;

use super::{OnNode, accepted, call, find};
use crate::{
    api::{
        BaseUrl,
        extract::{ApiJson, ApiVersion},
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
    on: OnNode,
    BaseUrl(base): BaseUrl,
    ApiJson(body): ApiJson<TargetBody>,
) -> Result<Response> {
    change(on, &base, body, |target| match target {
        Value::String(name) => Ok(BootSetting::Mode(BootMode::parse(&name)?)),
        other => Err(Error::InvalidParameterValue(format!(
            "Expected string for target: {other}"
        ))),
    })
    .await
}

pub async fn set_secure_boot(
    on: OnNode,
    BaseUrl(base): BaseUrl,
    ApiJson(body): ApiJson<TargetBody>,
) -> Result<Response> {
    change(on, &base, body, |target| {
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

/// Reads the body's target as `setting` reads it and asks the node's conductor to change it, the
/// node not moving (202, as Ironic's).
async fn change(
    OnNode(state, version, request_id, ident): OnNode,
    base: &str,
    body: TargetBody,
    setting: impl FnOnce(Value) -> Result<BootSetting>,
) -> Result<Response> {
    let node = find(&state, &ident, version).await?;
    require_endpoint(version)?;
    let setting = setting(body.target.ok_or_else(missing_target)?)?;
    refuse_unstable(&node)?;
    let rpc = RpcRequest::ChangeBootSetting {
        node: Box::new(node),
        setting,
    };
    call(&state, &request_id, rpc).await?;
    Ok(accepted(base, &ident))
}
