//! /v1/nodes/{id}/firmware (API 1.86): the firmware components stored for a node (Ironic's
//! `NodeFirmwareController`), `{"firmware": [...]}`, each with its `component` and versions
//! and, always, `created_at` and `updated_at`; `?fields=` picks among them. From 1.114 each also
//! shows the identity of the hardware it runs on (`vendor`, `model`, `serial_number`).

use axum::{Json, extract::State};
use serde::Deserialize;
use serde_json::{Map, Value, json};

use super::{
    ApiState,
    extract::{ApiPath, ApiQuery, ApiVersion, parse_bool},
    nodes::find,
};
use crate::{
    db,
    error::{Error, Result},
    node::firmware::FirmwareComponent,
    resource::{field_names, opt_timestamp, timestamp},
};

/// What a component shows by default.
const DEFAULT_FIELDS: &[&str] = &[
    "component",
    "initial_version",
    "current_version",
    "last_version_flashed",
];
/// The version the identity fields appeared in.
const IDENTITY: u32 = 114;
/// Ironic's identity fields, shown by default from 1.114, which `?fields=` may not name before.
const IDENTITY_FIELDS: &[&str] = &["vendor", "model", "serial_number"];

#[derive(Debug, Default, Deserialize)]
pub struct FirmwareQuery {
    detail: Option<String>,
    fields: Option<String>,
}

/// GET /v1/nodes/{id}/firmware.
pub async fn list(
    State(state): State<ApiState>,
    version: ApiVersion,
    ApiPath(ident): ApiPath<String>,
    ApiQuery(q): ApiQuery<FirmwareQuery>,
) -> Result<Json<Value>> {
    let detail = match &q.detail {
        Some(d) => parse_bool("detail", d)?,
        None => false,
    };
    let fields = match &q.fields {
        Some(_) if detail => {
            return Err(Error::InvalidParameterValue(
                "Can not specify ?detail=True and fields in the same request.".to_owned(),
            ));
        }
        Some(f) => checked_fields(f, version.at_least(IDENTITY))?,
        // Ironic shows only the timestamps with `detail=True` (its fields are then none); the
        // default fields are what a client asking for detail means.
        None => default_fields(version.at_least(IDENTITY))
            .map(str::to_owned)
            .collect(),
    };
    let node = find(&state, &ident, version).await?;
    let components = db::firmware::list(&state.db, node.id).await?;
    let items: Vec<Value> = components
        .iter()
        .map(|c| Value::Object(render(c, &fields)))
        .collect();
    Ok(Json(json!({ "firmware": items })))
}

/// The fields a component shows by default: the identity fields too from 1.114.
fn default_fields(identity: bool) -> impl Iterator<Item = &'static str> {
    let identity_fields: &[&str] = if identity { IDENTITY_FIELDS } else { &[] };
    DEFAULT_FIELDS.iter().chain(identity_fields).copied()
}

/// The names of `?fields=`: the default fields and the timestamps; before 1.114 the identity
/// fields are a later version's (Ironic's message).
fn checked_fields(fields: &str, identity: bool) -> Result<Vec<String>> {
    let names = field_names(fields);
    let mut later: Vec<&str> = names
        .iter()
        .map(String::as_str)
        .filter(|n| !identity && IDENTITY_FIELDS.contains(n))
        .collect();
    if !later.is_empty() {
        later.sort_unstable();
        return Err(Error::InvalidParameterValue(format!(
            "Fields {} are not allowed in this API version. They require at least API version 1.114.",
            later.join(", ")
        )));
    }
    if let Some(bad) = names.iter().find(|n| {
        !default_fields(identity).any(|f| f == n.as_str())
            && !["created_at", "updated_at"].contains(&n.as_str())
    }) {
        return Err(Error::InvalidParameterValue(format!(
            "Field {bad} is not a valid field."
        )));
    }
    Ok(names)
}

/// A component with `names` and its timestamps.
fn render(c: &FirmwareComponent, names: &[String]) -> Map<String, Value> {
    let mut m = Map::new();
    m.insert("created_at".into(), json!(timestamp(&c.created_at)));
    m.insert("updated_at".into(), opt_timestamp(&c.updated_at));
    for name in names {
        let value = match name.as_str() {
            "component" => json!(c.component),
            "initial_version" => json!(c.initial_version),
            "current_version" => json!(c.current_version),
            "last_version_flashed" => json!(c.last_version_flashed),
            "vendor" => json!(c.vendor),
            "model" => json!(c.model),
            "serial_number" => json!(c.serial_number),
            // The timestamps, shown above.
            _ => continue,
        };
        m.insert(name.clone(), value);
    }
    m
}
