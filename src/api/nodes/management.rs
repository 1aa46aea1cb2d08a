//! /v1/nodes/{id}/management: the boot device (GET, PUT, and the devices supported) and NMIs
//! (PUT `inject_nmi`, API 1.29), each answered by the node's conductor once the driver has.

use axum::{Json, http::StatusCode};
use serde::Deserialize;
use serde_json::{Value, json};

use super::{OnNode, call_on};
use crate::{
    api::extract::{ApiJson, OptionalJson, parse_bool},
    error::{Error, Result},
    node::management::BootDevice,
    rpc::{RpcReply, RpcRequest},
};

/// GET .../management/boot_device: `{"boot_device", "persistent"}`, null where the hardware
/// cannot tell.
pub async fn get_boot_device(
    OnNode(state, version, request_id, ident): OnNode,
) -> Result<Json<Value>> {
    let setting = call_on(&state, &request_id, version, &ident, |node| {
        RpcRequest::GetBootDevice { node }
    })
    .await?
    .pick(|r| match r {
        RpcReply::BootDevice(setting) => Ok(setting),
        other => Err(other),
    })?;
    Ok(Json(json!({
        "boot_device": setting.boot_device.map(BootDevice::api_name),
        "persistent": setting.persistent,
    })))
}

/// GET .../management/boot_device/supported: `{"supported_boot_devices": [...]}`.
pub async fn supported_boot_devices(
    OnNode(state, version, request_id, ident): OnNode,
) -> Result<Json<Value>> {
    let devices = call_on(&state, &request_id, version, &ident, |node| {
        RpcRequest::GetSupportedBootDevices { node }
    })
    .await?
    .pick(|r| match r {
        RpcReply::BootDevices(devices) => Ok(devices),
        other => Err(other),
    })?;
    let names: Vec<&str> = devices.into_iter().map(BootDevice::api_name).collect();
    Ok(Json(json!({ "supported_boot_devices": names })))
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BootDeviceBody {
    boot_device: String,
    /// A boolean, or a string that reads as one (Ironic's `args.boolean`).
    #[serde(default)]
    persistent: Option<Value>,
}

/// PUT .../management/boot_device `{"boot_device", "persistent"?}`: 204 once it is set.
pub async fn set_boot_device(
    OnNode(state, version, request_id, ident): OnNode,
    ApiJson(body): ApiJson<BootDeviceBody>,
) -> Result<StatusCode> {
    let device = BootDevice::parse(&body.boot_device)?;
    let persistent = match &body.persistent {
        None | Some(Value::Null) => false,
        Some(Value::Bool(b)) => *b,
        Some(Value::String(s)) => parse_bool("persistent", s)?,
        Some(other) => {
            return Err(Error::InvalidParameterValue(format!(
                "Invalid value for persistent: {other} is not a boolean."
            )));
        }
    };
    call_on(&state, &request_id, version, &ident, |node| {
        RpcRequest::SetBootDevice {
            node,
            device,
            persistent,
        }
    })
    .await?;
    Ok(StatusCode::NO_CONTENT)
}

/// What PUT .../inject_nmi takes: nothing (the client sends `{}`).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NoArguments {}

/// PUT .../management/inject_nmi (1.29; 404 before, as Ironic): 204 once injected.
pub async fn inject_nmi(
    OnNode(state, version, request_id, ident): OnNode,
    OptionalJson(_): OptionalJson<NoArguments>,
) -> Result<StatusCode> {
    call_on(&state, &request_id, version, &ident, |node| {
        RpcRequest::InjectNmi { node }
    })
    .await?;
    Ok(StatusCode::NO_CONTENT)
}
