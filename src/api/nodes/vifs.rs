//! /v1/nodes/{id}/vifs (1.28): list (from the database), attach and detach (through the node's
//! conductor, which picks the port or portgroup: `ports/vif.rs`). A node on the `noop` network
//! interface records no VIF: it lists none, and attaches and detaches any (`vif::recorded`).

use axum::{Json, extract::State, http::StatusCode};
use serde_json::{Value, json};

use super::{OnNode, find, require_version};
use crate::{
    api::{
        ApiState,
        extract::{ApiJson, ApiPath, ApiVersion, RequestId},
        ports::ports_call,
    },
    db,
    error::{Error, Result},
    node::JsonObject,
    ports::vif,
    rpc::PortsChange,
};

pub async fn list(
    State(state): State<ApiState>,
    version: ApiVersion,
    ApiPath(ident): ApiPath<String>,
) -> Result<Json<Value>> {
    let node = find(&state, &ident, version).await?;
    if !vif::recorded(&node) {
        return Ok(Json(json!({ "vifs": [] })));
    }
    let children = db::children::children(&state.db, &node.uuid).await?;
    let vifs: Vec<Value> = vif::list(&children.ports, &children.portgroups)
        .into_iter()
        .map(|id| json!({ "id": id }))
        .collect();
    Ok(Json(json!({ "vifs": vifs })))
}

pub async fn attach(
    OnNode(state, version, request_id, ident): OnNode,
    ApiJson(vif_info): ApiJson<JsonObject>,
) -> Result<StatusCode> {
    if vif_info.contains_key("port_uuid") || vif_info.contains_key("portgroup_uuid") {
        require_version(version, 67, "port_uuid and portgroup_uuid in vif_info")?;
        if vif_info.contains_key("port_uuid") && vif_info.contains_key("portgroup_uuid") {
            return Err(Error::InvalidParameterValue(
                "Cannot specify both port_uuid and portgroup_uuid.".to_owned(),
            ));
        }
    }
    let node = find(&state, &ident, version).await?;
    ports_call(
        &state,
        &request_id,
        node,
        PortsChange::AttachVif { vif_info },
    )
    .await?;
    Ok(StatusCode::NO_CONTENT)
}

pub async fn detach(
    State(state): State<ApiState>,
    version: ApiVersion,
    request_id: RequestId,
    ApiPath((ident, vif_id)): ApiPath<(String, String)>,
) -> Result<StatusCode> {
    let node = find(&state, &ident, version).await?;
    ports_call(&state, &request_id, node, PortsChange::DetachVif { vif_id }).await?;
    Ok(StatusCode::NO_CONTENT)
}
