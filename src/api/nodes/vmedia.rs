//! /v1/nodes/{id}/vmedia: virtual media attached (POST) and detached (DELETE) from API 1.89,
//! listed (GET) from 1.93, by the node's conductor through the management interface (404
//! before, as Ironic). The body and the device types are checked here as Ironic's
//! `NodeVmediaController` checks them.

use axum::{Json, http::StatusCode};
use serde::Deserialize;
use serde_json::Value;

use super::{OnNode, call_on};
use crate::{
    api::extract::{ApiJson, ApiQuery},
    error::{Error, Result},
    node::JsonObject,
    node::management::{BootDevice, VMEDIA_DEVICES},
    rpc::{RpcReply, RpcRequest},
};

/// The URL schemes a BMC can be handed (Ironic's `VMEDIA_SUPPORTED_URL_SCHEMES`).
const URL_SCHEMES: &[&str] = &["http", "https", "nfs", "cifs", "smb"];

/// The ways an image may be served to the BMC (`image_download_source`).
const DOWNLOAD_SOURCES: &[&str] = &["http", "local", "swift"];

/// A virtual media device type a client named: one of [`VMEDIA_DEVICES`].
fn vmedia_device(name: &str) -> Option<BootDevice> {
    VMEDIA_DEVICES.into_iter().find(|d| d.api_name() == name)
}

fn device_names() -> String {
    VMEDIA_DEVICES.map(BootDevice::api_name).join(", ")
}

/// The attach body, as Ironic's `VMEDIA_ATTACH_VALIDATOR` takes it: `device_type` and
/// `image_url` required, `image_download_source` optional (`local`), nothing else.
fn read_attach(body: &JsonObject) -> Result<(BootDevice, String, String)> {
    let invalid = |why: String| Error::InvalidParameterValue(format!("Invalid vmedia: {why}"));
    if let Some(key) = body
        .keys()
        .find(|k| !["device_type", "image_url", "image_download_source"].contains(&k.as_str()))
    {
        return Err(invalid(format!(
            "Additional properties are not allowed ('{key}' was unexpected)"
        )));
    }
    let string = |key: &str| match body.get(key) {
        None => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(other) => Err(invalid(format!(
            "{other} is not of type 'string' for {key}"
        ))),
    };
    let device_type = string("device_type")?
        .ok_or_else(|| invalid("'device_type' is a required property".to_owned()))?;
    let device = vmedia_device(&device_type).ok_or_else(|| {
        invalid(format!(
            "'{device_type}' is not one of [{}] for device_type",
            device_names()
        ))
    })?;
    let image_url = string("image_url")?
        .ok_or_else(|| invalid("'image_url' is a required property".to_owned()))?;
    let source = string("image_download_source")?.unwrap_or_else(|| "local".to_owned());
    if !DOWNLOAD_SOURCES.contains(&source.as_str()) {
        return Err(invalid(format!(
            "'{source}' is not one of [{}] for image_download_source",
            DOWNLOAD_SOURCES.join(", ")
        )));
    }
    let scheme = image_url
        .split_once("://")
        .map(|(s, _)| s.to_ascii_lowercase())
        .unwrap_or_default();
    if !URL_SCHEMES.contains(&scheme.as_str()) {
        return Err(Error::InvalidParameterValue(format!(
            "Unsupported or missing URL scheme: {scheme}"
        )));
    }
    Ok((device, image_url, source))
}

/// POST: 204 once attached.
pub async fn attach(
    OnNode(state, version, request_id, ident): OnNode,
    ApiJson(body): ApiJson<JsonObject>,
) -> Result<StatusCode> {
    let (device_type, image_url, image_download_source) = read_attach(&body)?;
    call_on(&state, &request_id, version, &ident, |node| {
        RpcRequest::AttachVirtualMedia {
            node,
            device_type,
            image_url,
            image_download_source,
        }
    })
    .await?;
    Ok(StatusCode::NO_CONTENT)
}

#[derive(Debug, Default, Deserialize)]
pub struct DetachQuery {
    device_types: Option<String>,
}

/// DELETE [?device_types=cdrom,floppy]: 204 once detached (all devices without the filter).
pub async fn detach(
    OnNode(state, version, request_id, ident): OnNode,
    ApiQuery(q): ApiQuery<DetachQuery>,
) -> Result<StatusCode> {
    let named: Vec<&str> = q
        .device_types
        .as_deref()
        .unwrap_or_default()
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .collect();
    let invalid: Vec<&str> = named
        .iter()
        .copied()
        .filter(|n| vmedia_device(n).is_none())
        .collect();
    if !invalid.is_empty() {
        return Err(Error::InvalidParameterValue(format!(
            "Invalid device type(s) {} (valid are {})",
            invalid.join(", "),
            device_names()
        )));
    }
    let device_types =
        (!named.is_empty()).then(|| named.iter().filter_map(|n| vmedia_device(n)).collect());
    call_on(&state, &request_id, version, &ident, |node| {
        RpcRequest::DetachVirtualMedia { node, device_types }
    })
    .await?;
    Ok(StatusCode::NO_CONTENT)
}

/// GET (1.93): what the driver reports, as Ironic returns it (a list of devices).
pub async fn get(OnNode(state, version, request_id, ident): OnNode) -> Result<Json<Value>> {
    let media = call_on(&state, &request_id, version, &ident, |node| {
        RpcRequest::GetVirtualMedia { node }
    })
    .await?
    .pick(|r| match r {
        RpcReply::VirtualMedia(media) => Ok(media),
        other => Err(other),
    })?;
    Ok(Json(Value::Array(media)))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn attach_bodies_follow_ironics_schema() {
        let body = |v: Value| v.as_object().unwrap().clone();
        let (device, url, source) = read_attach(&body(
            json!({"device_type": "cdrom", "image_url": "https://x/i.iso"}),
        ))
        .unwrap();
        assert_eq!(
            (device, url.as_str(), source.as_str()),
            (BootDevice::Cdrom, "https://x/i.iso", "local")
        );
        for (bad, says) in [
            (
                json!({"image_url": "http://x"}),
                "'device_type' is a required property",
            ),
            (
                json!({"device_type": "cdrom"}),
                "'image_url' is a required property",
            ),
            (
                json!({"device_type": "pxe", "image_url": "http://x"}),
                "device_type",
            ),
            (
                json!({"device_type": "cdrom", "image_url": "ftp://x"}),
                "Unsupported or missing URL scheme: ftp",
            ),
            (
                json!({"device_type": "cdrom", "image_url": "/local"}),
                "Unsupported or missing URL scheme: ",
            ),
            (
                json!({"device_type": "cdrom", "image_url": "http://x", "image_download_source": "glance"}),
                "image_download_source",
            ),
            (
                json!({"device_type": "cdrom", "image_url": "http://x", "insecure": true}),
                "'insecure' was unexpected",
            ),
            (
                json!({"device_type": 1, "image_url": "http://x"}),
                "device_type",
            ),
        ] {
            let e = read_attach(&body(bad.clone())).unwrap_err().to_string();
            assert!(e.contains(says), "{bad}: {e}");
        }
    }
}
