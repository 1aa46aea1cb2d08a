//! `POST /v1/events` (API 1.54): external events, today Neutron's port events. Ironic checks
//! each against its schema (`ironic/api/schemas/v1/event.py`) and only logs it
//! (`ironic/api/controllers/v1/event.py`); Ferrum does the same: no network interface of its acts
//! on them yet.

use axum::http::StatusCode;
use serde::Deserialize;

use super::extract::ApiJson;
use crate::{
    error::{Error, Result},
    node::normalize_uuid,
    ports::normalize_mac,
};

/// The event types Ironic accepts.
const EVENT_TYPES: &[&str] = &[
    "network.bind_port",
    "network.unbind_port",
    "network.delete_port",
];

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Events {
    events: Vec<Event>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Event {
    event: String,
    port_id: String,
    mac_address: String,
    status: String,
    device_id: Option<String>,
    #[serde(rename = "binding:host_id")]
    binding_host_id: Option<String>,
    #[serde(rename = "binding:vnic_type")]
    binding_vnic_type: Option<String>,
}

impl Event {
    fn check(&self) -> Result<()> {
        if !EVENT_TYPES.contains(&self.event.as_str()) {
            return Err(Error::InvalidParameterValue(format!(
                "Unknown event type '{}'; the known ones are {}.",
                self.event,
                EVENT_TYPES.join(", ")
            )));
        }
        normalize_uuid("port_id", &self.port_id)?;
        normalize_mac(&self.mac_address)?;
        for (field, value) in [
            ("device_id", &self.device_id),
            ("binding:host_id", &self.binding_host_id),
        ] {
            if let Some(value) = value {
                normalize_uuid(field, value)?;
            }
        }
        Ok(())
    }
}

/// POST /v1/events: 204 when every event is well formed, 400 naming the first that is not.
pub async fn post(ApiJson(body): ApiJson<serde_json::Value>) -> Result<StatusCode> {
    let body: Events = serde_json::from_value(body)
        .map_err(|e| Error::InvalidParameterValue(format!("Invalid events: {e}")))?;
    if body.events.is_empty() {
        return Err(Error::InvalidParameterValue(
            "events must hold at least one event.".to_owned(),
        ));
    }
    for event in &body.events {
        event.check()?;
    }
    for e in &body.events {
        tracing::info!(
            event = %e.event,
            port_id = %e.port_id,
            mac_address = %e.mac_address,
            status = %e.status,
            device_id = ?e.device_id,
            binding_host_id = ?e.binding_host_id,
            binding_vnic_type = ?e.binding_vnic_type,
            "received an external event"
        );
    }
    Ok(StatusCode::NO_CONTENT)
}
