//! /v1/nodes/{id}/traits (API 1.37): the node's traits, read from the database and changed by
//! the node's conductor.

use axum::{
    Json,
    extract::State,
    http::{HeaderValue, StatusCode, header},
    response::{IntoResponse, Response},
};
use serde::Deserialize;
use serde_json::{Value, json};

use super::{
    ApiState, BaseUrl,
    extract::{ApiPath, ApiVersion, OptionalJson, RequestId},
    nodes::{call, find},
};
use crate::{
    error::{Error, Result},
    node::validate_trait,
    rpc::RpcRequest,
};

pub async fn list(
    State(state): State<ApiState>,
    version: ApiVersion,
    ApiPath(ident): ApiPath<String>,
) -> Result<Json<Value>> {
    let node = find(&state, &ident, version).await?;
    Ok(Json(json!({ "traits": node.traits })))
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TraitsBody {
    traits: Vec<String>,
}

const PUT_USAGE: &str = "A single node trait may be added via PUT /v1/nodes/<node identifier>/traits/<trait> with no body, or all node traits may be replaced via PUT /v1/nodes/<node identifier>/traits with the list of traits specified in the request body.";

/// PUT /v1/nodes/{id}/traits `{"traits": [...]}`: replaces all of them. 204.
pub async fn replace(
    State(state): State<ApiState>,
    version: ApiVersion,
    request_id: RequestId,
    ApiPath(ident): ApiPath<String>,
    OptionalJson(body): OptionalJson<TraitsBody>,
) -> Result<StatusCode> {
    let Some(body) = body else {
        return Err(Error::InvalidParameterValue(PUT_USAGE.to_owned()));
    };
    for t in &body.traits {
        validate_trait("body", t)?;
    }
    let node = find(&state, &ident, version).await?;
    let request = RpcRequest::AddNodeTraits {
        node: Box::new(node),
        traits: body.traits,
        replace: true,
    };
    call(&state, &request_id, request).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// PUT /v1/nodes/{id}/traits/{trait}, no body: adds one. 204 with its Location.
pub async fn add(
    State(state): State<ApiState>,
    version: ApiVersion,
    request_id: RequestId,
    BaseUrl(base): BaseUrl,
    ApiPath((ident, name)): ApiPath<(String, String)>,
    OptionalJson(body): OptionalJson<Value>,
) -> Result<Response> {
    if body.is_some_and(|b| !b.is_null() && b != json!({})) {
        return Err(Error::InvalidParameterValue(
            "No body should be provided when adding a trait".to_owned(),
        ));
    }
    validate_trait("trait", &name)?;
    let node = find(&state, &ident, version).await?;
    let request = RpcRequest::AddNodeTraits {
        node: Box::new(node),
        traits: vec![name.clone()],
        replace: false,
    };
    call(&state, &request_id, request).await?;
    let mut response = StatusCode::NO_CONTENT.into_response();
    if let Ok(v) = HeaderValue::from_str(&format!("{base}/v1/nodes/{ident}/traits/{name}")) {
        response.headers_mut().insert(header::LOCATION, v);
    }
    Ok(response)
}

/// DELETE /v1/nodes/{id}/traits: removes all of them. 204.
pub async fn remove_all(
    State(state): State<ApiState>,
    version: ApiVersion,
    request_id: RequestId,
    ApiPath(ident): ApiPath<String>,
) -> Result<StatusCode> {
    let node = find(&state, &ident, version).await?;
    let request = RpcRequest::RemoveNodeTraits {
        node: Box::new(node),
        traits: None,
    };
    call(&state, &request_id, request).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// DELETE /v1/nodes/{id}/traits/{trait}: 204, or 404 when the node lacks it.
pub async fn remove(
    State(state): State<ApiState>,
    version: ApiVersion,
    request_id: RequestId,
    ApiPath((ident, name)): ApiPath<(String, String)>,
) -> Result<StatusCode> {
    let node = find(&state, &ident, version).await?;
    let request = RpcRequest::RemoveNodeTraits {
        node: Box::new(node),
        traits: Some(vec![name]),
    };
    call(&state, &request_id, request).await?;
    Ok(StatusCode::NO_CONTENT)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trait_names() {
        for good in ["CUSTOM_RAID", "HW_CPU_X86_VMX", "CUSTOM_A_1"] {
            assert!(validate_trait("trait", good).is_ok(), "{good}");
        }
        let long = format!("CUSTOM_{}", "A".repeat(250));
        for bad in [
            "",
            "custom_raid",
            "CUSTOM_",
            "CUSTOM-X",
            "1ABC",
            long.as_str(),
        ] {
            assert!(validate_trait("trait", bad).is_err(), "{bad}");
        }
    }
}
