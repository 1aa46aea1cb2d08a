//! /v1/drivers: the hardware types the alive conductors offer, which hosts offer them, their
//! interfaces (1.30), their properties, and the properties of a RAID logical disk (1.12).
//!
//! Which hardware types exist, and which of their interfaces are enabled, is read from the alive
//! conductors' rows (each registers what its configuration enables); their properties from the
//! build's catalogue (`ApiState::hardware`).

use std::collections::BTreeMap;

use axum::{Json, extract::State};
use serde::Deserialize;
use serde_json::{Value, json};

use super::{
    ApiState, BaseUrl,
    extract::{ApiPath, ApiQuery, ApiVersion, parse_bool},
};
use crate::{
    db::{self, models::Conductor},
    error::{Error, Result},
    node::{
        InterfaceKind,
        fields::links,
        hardware::{Catalogue, HardwareTypeFacts},
        raid::LOGICAL_DISK_PROPERTIES,
    },
};

/// Driver name → the conductors alive now that offer it.
async fn offering_by_driver(state: &ApiState) -> Result<BTreeMap<String, Vec<Conductor>>> {
    let alive = db::conductors::list_alive(&state.db, state.router.heartbeat_timeout()).await?;
    let mut by_driver: BTreeMap<String, Vec<Conductor>> = BTreeMap::new();
    for c in alive {
        for d in &c.drivers {
            by_driver.entry(d.clone()).or_default().push(c.clone());
        }
    }
    Ok(by_driver)
}

/// Driver name → hosts offering it, from the conductors alive now.
pub(super) async fn hosts_by_driver(state: &ApiState) -> Result<BTreeMap<String, Vec<String>>> {
    Ok(offering_by_driver(state)
        .await?
        .into_iter()
        .map(|(d, cs)| (d, cs.into_iter().map(|c| c.hostname).collect()))
        .collect())
}

/// The conductors offering `name`, or Ironic's DriverNotFound.
async fn offering(state: &ApiState, name: &str) -> Result<Vec<Conductor>> {
    offering_by_driver(state)
        .await?
        .remove(name)
        .ok_or_else(|| Error::driver_not_found(name))
}

/// The interfaces of `kind` of the hardware type `name` that `conductors` enable, and the
/// default, as Ironic's API gathers them from every conductor's registration: the union of the
/// enabled ones, and a default (assumed the same on every conductor). A conductor of a release
/// that registered none is taken to enable every interface of the build's hardware type.
fn enabled_interfaces(
    hardware: &Catalogue,
    name: &str,
    kind: InterfaceKind,
    conductors: &[Conductor],
) -> (Option<String>, Vec<String>) {
    let mut default = None;
    let mut enabled: Vec<String> = Vec::new();
    for c in conductors {
        let (d, names): (Option<String>, Vec<String>) =
            match c.hardware_interfaces.as_ref().and_then(|h| h.get(name)) {
                Some(described) => (
                    described[format!("default_{}_interface", kind.name())]
                        .as_str()
                        .map(str::to_owned),
                    serde_json::from_value(
                        described[format!("enabled_{}_interfaces", kind.name())].clone(),
                    )
                    .unwrap_or_default(),
                ),
                None => {
                    let names: Vec<String> = hardware
                        .get(name)
                        .map(|hw| hw.interface_names(kind))
                        .unwrap_or_default()
                        .iter()
                        .map(|n| (*n).to_owned())
                        .collect();
                    (names.first().cloned(), names)
                }
            };
        default = default.or(d);
        for n in names {
            if !enabled.contains(&n) {
                enabled.push(n);
            }
        }
    }
    (default, enabled)
}

/// The version from which a driver shows its interfaces of `kind`: 1.30 for the standard ones,
/// and the node field's version for the three that came later (Ironic's driver.py hide rules).
fn interfaces_shown_since(kind: InterfaceKind) -> u32 {
    match kind {
        InterfaceKind::Storage => 33,
        InterfaceKind::Rescue => 38,
        InterfaceKind::Bios => 40,
        InterfaceKind::Firmware => 86,
        InterfaceKind::Deploy
        | InterfaceKind::Power
        | InterfaceKind::Management
        | InterfaceKind::Boot
        | InterfaceKind::Console
        | InterfaceKind::Inspect
        | InterfaceKind::Network
        | InterfaceKind::Raid
        | InterfaceKind::Vendor => 30,
    }
}

/// Dynamic drivers (hardware types), the `type` field and the interfaces: API 1.30.
const DYNAMIC_DRIVERS: u32 = 30;

fn driver_view(
    hardware: &Catalogue,
    base: &str,
    name: &str,
    conductors: &[Conductor],
    version: ApiVersion,
    detail: bool,
) -> Value {
    let hosts: Vec<&str> = conductors.iter().map(|c| c.hostname.as_str()).collect();
    let mut v = json!({
        "name": name,
        "hosts": hosts,
        "links": links(base, "drivers", name),
    });
    if version.at_least(14) {
        v["properties"] = links(base, "drivers", &format!("{name}/properties"));
    }
    if version.at_least(DYNAMIC_DRIVERS) {
        v["type"] = json!("dynamic");
    }
    if detail && version.at_least(DYNAMIC_DRIVERS) {
        for kind in InterfaceKind::ALL {
            if !version.at_least(interfaces_shown_since(kind)) {
                continue;
            }
            let (default, enabled) = enabled_interfaces(hardware, name, kind, conductors);
            v[format!("default_{}_interface", kind.name())] = json!(default);
            v[format!("enabled_{}_interfaces", kind.name())] = json!(enabled);
        }
    }
    v
}

/// 406 for a query parameter of a newer version than the request's.
fn too_new(minor: u32) -> Error {
    Error::NotAcceptable(format!(
        "Request not acceptable. The minimal required API version should be 1.{minor}"
    ))
}

#[derive(Debug, Deserialize)]
pub struct ListQuery {
    detail: Option<String>,
    #[serde(rename = "type")]
    kind: Option<String>,
    fields: Option<String>,
}

#[derive(Debug, Deserialize)]
pub struct ShowQuery {
    fields: Option<String>,
}

/// `fields` on drivers (1.77): 406 below it; a comma-separated list of the names to show.
fn read_fields(version: ApiVersion, fields: Option<&str>) -> Result<Option<Vec<String>>> {
    let Some(fields) = fields else {
        return Ok(None);
    };
    if !version.at_least(77) {
        return Err(too_new(77));
    }
    Ok(Some(
        fields.split(',').map(|f| f.trim().to_owned()).collect(),
    ))
}

/// Keeps only the `fields` asked for (and `links`), as Ironic's `driver_sanitize`: a field the
/// driver does not show at this version is the client's 400.
fn select_fields(mut view: Value, fields: Option<&[String]>) -> Result<Value> {
    let (Some(fields), Some(map)) = (fields, view.as_object_mut()) else {
        return Ok(view);
    };
    let invalid: Vec<&str> = fields
        .iter()
        .map(String::as_str)
        .filter(|f| !map.contains_key(*f))
        .collect();
    if !invalid.is_empty() {
        return Err(Error::InvalidParameterValue(format!(
            "Field(s) \"{}\" are not valid",
            invalid.join(", ")
        )));
    }
    map.retain(|k, _| k == "links" || fields.iter().any(|f| f == k));
    Ok(view)
}

pub async fn list(
    State(state): State<ApiState>,
    version: ApiVersion,
    BaseUrl(base): BaseUrl,
    ApiQuery(q): ApiQuery<ListQuery>,
) -> Result<Json<Value>> {
    let detail = q
        .detail
        .as_deref()
        .map(|d| parse_bool("detail", d))
        .transpose()?
        .unwrap_or(false);
    if detail && q.fields.is_some() {
        return Err(Error::InvalidParameterValue(
            "Can not specify ?detail=True and fields in the same request.".to_owned(),
        ));
    }
    if (q.detail.is_some() || q.kind.is_some()) && !version.at_least(DYNAMIC_DRIVERS) {
        return Err(too_new(DYNAMIC_DRIVERS));
    }
    let fields = read_fields(version, q.fields.as_deref())?;
    // Every hardware type is dynamic: a `classic` filter finds none.
    let classic = match q.kind.as_deref() {
        None | Some("dynamic") => false,
        Some("classic") => true,
        Some(_) => {
            return Err(Error::InvalidParameterValue(
                "\"type\" filter must be one of \"classic\" or \"dynamic\", if specified."
                    .to_owned(),
            ));
        }
    };
    let by_driver = if classic {
        BTreeMap::new()
    } else {
        offering_by_driver(&state).await?
    };
    let drivers = by_driver
        .iter()
        .map(|(name, conductors)| {
            select_fields(
                driver_view(state.hardware, &base, name, conductors, version, detail),
                fields.as_deref(),
            )
        })
        .collect::<Result<Vec<Value>>>()?;
    Ok(Json(json!({ "drivers": drivers })))
}

/// One driver, with its interfaces (as Ironic, always in detail).
pub async fn show(
    State(state): State<ApiState>,
    version: ApiVersion,
    BaseUrl(base): BaseUrl,
    ApiPath(name): ApiPath<String>,
    ApiQuery(q): ApiQuery<ShowQuery>,
) -> Result<Json<Value>> {
    let fields = read_fields(version, q.fields.as_deref())?;
    let conductors = offering(&state, &name).await?;
    let view = driver_view(state.hardware, &base, &name, &conductors, version, true);
    Ok(Json(select_fields(view, fields.as_deref())?))
}

/// The hardware type `name` as a conductor offers it (DriverNotFound otherwise).
async fn offered(state: &ApiState, name: &str) -> Result<&'static HardwareTypeFacts> {
    offering(state, name).await?;
    state.hardware.get(name).ok_or_else(|| {
        Error::internal(format!(
            "a conductor offers {name}, which this API's build does not know"
        ))
    })
}

/// GET /v1/drivers/{name}/properties: what the driver reads from a node's `driver_info`.
pub async fn properties(
    State(state): State<ApiState>,
    ApiPath(name): ApiPath<String>,
) -> Result<Json<Value>> {
    let hw = offered(&state, &name).await?;
    Ok(Json(json!(hw.properties)))
}

/// GET /v1/drivers/{name}/raid/logical_disk_properties (1.12): what a target RAID
/// configuration may say of a logical disk. Every RAID interface answers it, `no-raid`
/// included, so Ironic's 404 for a driver without RAID support never happens to a hardware type.
pub async fn raid_logical_disk_properties(
    State(state): State<ApiState>,
    version: ApiVersion,
    ApiPath(name): ApiPath<String>,
) -> Result<Json<Value>> {
    if !version.at_least(12) {
        return Err(Error::NotAcceptable("Request not acceptable.".to_owned()));
    }
    offered(&state, &name).await?;
    let properties: BTreeMap<_, _> = LOGICAL_DISK_PROPERTIES.iter().copied().collect();
    Ok(Json(json!(properties)))
}
