//! PUT /v1/nodes/{id}/states/power.

use axum::{extract::State, response::Response};
use serde::Deserialize;

use super::{accepted, call, find, require_version};
use crate::{
    api::{
        ApiState, BaseUrl,
        extract::{ApiJson, ApiPath, ApiVersion, RequestId},
    },
    error::{Error, Result},
    node::PowerTarget,
    rpc::RpcRequest,
};

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PowerBody {
    target: String,
    timeout: Option<i64>,
}

pub async fn set_power_state(
    State(state): State<ApiState>,
    version: ApiVersion,
    request_id: RequestId,
    BaseUrl(base): BaseUrl,
    ApiPath(ident): ApiPath<String>,
    ApiJson(body): ApiJson<PowerBody>,
) -> Result<Response> {
    let target = PowerTarget::parse(&body.target)?;
    if target.is_soft() || body.timeout.is_some() {
        require_version(version, 27, "Soft power actions and timeout")?;
    }
    let timeout = match body.timeout {
        Some(t) if t < 1 => {
            return Err(Error::InvalidParameterValue(format!(
                "timeout has to be positive integer, got {t}"
            )));
        }
        Some(t) => Some(u32::try_from(t).unwrap_or(u32::MAX)),
        None => None,
    };
    let node = find(&state, &ident, version).await?;
    call(
        &state,
        &request_id,
        RpcRequest::ChangeNodePowerState {
            node: Box::new(node),
            new_state: target,
            timeout,
        },
    )
    .await?;
    Ok(accepted(&base, &ident))
}
