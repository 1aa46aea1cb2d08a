//! /v1/drivers: the hardware types the alive conductors offer, and which hosts offer them.

use std::collections::BTreeMap;

use axum::{Json, extract::State};
use serde_json::{Value, json};

use super::{
    ApiState, BaseUrl,
    extract::{ApiPath, ApiVersion},
};
use crate::{
    db,
    error::{Error, Result},
    node::fields::links,
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

fn driver_view(base: &str, name: &str, hosts: &[String], version: ApiVersion) -> Value {
    let mut v = json!({
        "name": name,
        "hosts": hosts,
        "type": "dynamic",
        "links": links(base, "drivers", name),
    });
    if version.at_least(2) {
        v["properties"] = links(base, "drivers", &format!("{name}/properties"));
    }
    v
}

pub async fn list(
    State(state): State<ApiState>,
    version: ApiVersion,
    BaseUrl(base): BaseUrl,
) -> Result<Json<Value>> {
    let drivers: Vec<Value> = hosts_by_driver(&state)
        .await?
        .iter()
        .map(|(name, hosts)| driver_view(&base, name, hosts, version))
        .collect();
    Ok(Json(json!({ "drivers": drivers })))
}

pub async fn show(
    State(state): State<ApiState>,
    version: ApiVersion,
    BaseUrl(base): BaseUrl,
    ApiPath(name): ApiPath<String>,
) -> Result<Json<Value>> {
    let by_driver = hosts_by_driver(&state).await?;
    let hosts = by_driver
        .get(&name)
        .ok_or_else(|| Error::driver_not_found(&name))?;
    Ok(Json(driver_view(&base, &name, hosts, version)))
}
