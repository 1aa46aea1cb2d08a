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
    nodes::{OnNode, call, find},
};
use crate::{
    error::{Error, Result},
    node::{Node, validate_trait},
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

/// The body of a PUT of all the traits (of a node, or of a runbook).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TraitsBody {
    pub traits: Vec<String>,
}

/// A PUT adding the trait `name` has no body (an empty object or null pass, as in Ironic), and
/// names a valid trait.
pub(super) fn check_added(body: Option<Value>, name: &str) -> Result<()> {
    if body.is_some_and(|b| !b.is_null() && b != json!({})) {
        return Err(Error::InvalidParameterValue(
            "No body should be provided when adding a trait".to_owned(),
        ));
    }
    validate_trait("trait", name)
}

/// 204 with the added trait's `Location`.
pub(super) fn added(location: &str) -> Response {
    let mut response = StatusCode::NO_CONTENT.into_response();
    if let Ok(v) = HeaderValue::from_str(location) {
        response.headers_mut().insert(header::LOCATION, v);
    }
    response
}

/// Sends the request `make` makes of the node `ident` names to the node's conductor.
async fn change(
    state: &ApiState,
    version: ApiVersion,
    request_id: &RequestId,
    ident: &str,
    make: impl FnOnce(Box<Node>) -> RpcRequest,
) -> Result<StatusCode> {
    let node = find(state, ident, version).await?;
    call(state, request_id, make(Box::new(node))).await?;
    Ok(StatusCode::NO_CONTENT)
}

const PUT_USAGE: &str = "A single node trait may be added via PUT /v1/nodes/<node identifier>/traits/<trait> with no body, or all node traits may be replaced via PUT /v1/nodes/<node identifier>/traits with the list of traits specified in the request body.";

/// PUT /v1/nodes/{id}/traits `{"traits": [...]}`: replaces all of them. 204.
pub async fn replace(
    OnNode(state, version, request_id, ident): OnNode,
    OptionalJson(body): OptionalJson<TraitsBody>,
) -> Result<StatusCode> {
    let Some(body) = body else {
        return Err(Error::InvalidParameterValue(PUT_USAGE.to_owned()));
    };
    for t in &body.traits {
        validate_trait("body", t)?;
    }
    change(&state, version, &request_id, &ident, |node| {
        RpcRequest::AddNodeTraits {
            node,
            traits: body.traits,
            replace: true,
        }
    })
    .await
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
    check_added(body, &name)?;
    let traits = vec![name.clone()];
    change(&state, version, &request_id, &ident, |node| {
        RpcRequest::AddNodeTraits {
            node,
            traits,
            replace: false,
        }
    })
    .await?;
    Ok(added(&format!("{base}/v1/nodes/{ident}/traits/{name}")))
}

/// DELETE /v1/nodes/{id}/traits: removes all of them. 204.
pub async fn remove_all(OnNode(state, version, request_id, ident): OnNode) -> Result<StatusCode> {
    change(&state, version, &request_id, &ident, |node| {
        RpcRequest::RemoveNodeTraits { node, traits: None }
    })
    .await
}

/// DELETE /v1/nodes/{id}/traits/{trait}: 204, or 404 when the node lacks it.
pub async fn remove(
    State(state): State<ApiState>,
    version: ApiVersion,
    request_id: RequestId,
    ApiPath((ident, name)): ApiPath<(String, String)>,
) -> Result<StatusCode> {
    change(&state, version, &request_id, &ident, |node| {
        RpcRequest::RemoveNodeTraits {
            node,
            traits: Some(vec![name]),
        }
    })
    .await
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
