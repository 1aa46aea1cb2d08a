//! /v1/drivers: the hardware types the alive conductors offer, which hosts offer them, their
//! interfaces (1.30), their properties, and the properties of a RAID logical disk (1.12).
//!
//! Which hardware types exist is read from the alive conductors' rows; what a hardware type is
//! (its interfaces and properties) from the build's catalogue (`drivers::catalogue`).

use std::collections::BTreeMap;

use axum::{Json, extract::State};
use serde::Deserialize;
use serde_json::{Value, json};

use super::{
    ApiState, BaseUrl,
    extract::{ApiPath, ApiQuery, ApiVersion, parse_bool},
};
use crate::{
    db,
    drivers::{self, HardwareType},
    error::{Error, Result},
    node::{InterfaceKind, fields::links},
};

/// Driver name → hosts offering it, from the conductors alive now.
pub(super) async fn hosts_by_driver(state: &ApiState) -> Result<BTreeMap<String, Vec<String>>> {
    let alive = db::conductors::list_alive(&state.db, state.router.heartbeat_timeout()).await?;
    let mut by_driver: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for c in alive {
        for d in c.drivers {
            by_driver.entry(d).or_default().push(c.hostname.clone());
        }
    }
    Ok(by_driver)
}

/// The hosts offering `name`, or Ironic's DriverNotFound.
async fn hosts_of(state: &ApiState, name: &str) -> Result<Vec<String>> {
    hosts_by_driver(state)
        .await?
        .remove(name)
        .ok_or_else(|| Error::driver_not_found(name))
}

/// The version from which a driver shows its interfaces of `kind`: 1.30 for the standard ones,
/// and the node field's version for the three that came later (Ironic's driver.py hide rules).
fn interfaces_shown_since(kind: InterfaceKind) -> u32 {
    match kind {
        InterfaceKind::Storage => 33,
        InterfaceKind::Rescue => 38,
        InterfaceKind::Bios => 40,
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
    base: &str,
    name: &str,
    hosts: &[String],
    version: ApiVersion,
    detail: bool,
) -> Value {
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
        let hw = drivers::catalogue().get(name);
        for kind in InterfaceKind::ALL {
            if !version.at_least(interfaces_shown_since(kind)) {
                continue;
            }
            let enabled = hw.map(|hw| hw.interface_names(kind)).unwrap_or_default();
            v[format!("default_{}_interface", kind.name())] = json!(enabled.first());
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

/// `fields` on drivers came with 1.77, above Ferrum's maximum: always too new.
fn refuse_fields(fields: &Option<String>) -> Result<()> {
    match fields {
        Some(_) => Err(too_new(77)),
        None => Ok(()),
    }
}

pub async fn list(
    State(state): State<ApiState>,
    version: ApiVersion,
    BaseUrl(base): BaseUrl,
    ApiQuery(q): ApiQuery<ListQuery>,
) -> Result<Json<Value>> {
    if q.detail.is_some() && q.fields.is_some() {
        return Err(Error::InvalidParameterValue(
            "Can not specify ?detail=True and fields in the same request.".to_owned(),
        ));
    }
    if (q.detail.is_some() || q.kind.is_some()) && !version.at_least(DYNAMIC_DRIVERS) {
        return Err(too_new(DYNAMIC_DRIVERS));
    }
    refuse_fields(&q.fields)?;
    let detail = q
        .detail
        .as_deref()
        .map(|d| parse_bool("detail", d))
        .transpose()?
        .unwrap_or(false);
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
        hosts_by_driver(&state).await?
    };
    let drivers: Vec<Value> = by_driver
        .iter()
        .map(|(name, hosts)| driver_view(&base, name, hosts, version, detail))
        .collect();
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
    refuse_fields(&q.fields)?;
    let hosts = hosts_of(&state, &name).await?;
    Ok(Json(driver_view(&base, &name, &hosts, version, true)))
}

/// The hardware type `name` as a conductor offers it (DriverNotFound otherwise).
async fn offered(state: &ApiState, name: &str) -> Result<&'static HardwareType> {
    hosts_of(state, name).await?;
    drivers::catalogue().get(name).ok_or_else(|| {
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
    Ok(Json(json!(hw.properties())))
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
    let properties: BTreeMap<_, _> = drivers::raid::LOGICAL_DISK_PROPERTIES
        .iter()
        .copied()
        .collect();
    Ok(Json(json!(properties)))
}
