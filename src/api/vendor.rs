//! Vendor passthru: `/v1/nodes/{id}/vendor_passthru?method=` (to the node's conductor) and
//! `/v1/drivers/{name}/vendor_passthru?method=` (to any conductor offering the driver, picked at
//! random as Ironic's `get_topic_for_driver` does), with their `/methods` listings. The method
//! may also be the path's last segment (`.../vendor_passthru/<method>`, as python-ironicclient
//! sends it; Ironic's controller takes both).
//!
//! The body (none: `{}`) is the method's arguments; the HTTP method is passed along, and the
//! conductor checks the method answers it. An asynchronous method answers 202 with no body, a
//! synchronous one 200 with its return value as JSON, or as the body itself when the method
//! attaches it. Ironic's API caches the listings per driver for its lifetime (so a node with
//! another vendor interface of the same driver is shown the first one's); Ferrum asks each time.

use axum::{
    Json,
    extract::State,
    http::{HeaderValue, Method, StatusCode, header},
    response::{IntoResponse, Response},
};
use rand::seq::IndexedRandom as _;
use serde::Deserialize;
use serde_json::Value;

use super::{
    ApiState, drivers,
    extract::{ApiPath, ApiQuery, ApiVersion, OptionalJson, RequestId},
    nodes::{OnNode, call_on},
};
use crate::{
    error::{Error, Result},
    node::JsonObject,
    rpc::{RpcReply, RpcRequest},
};

#[derive(Debug, Deserialize)]
pub struct PassthruQuery {
    method: Option<String>,
}

/// `{ident}` (a node) or `{name}` (a driver), and the method when the path names it.
#[derive(Debug, Deserialize)]
pub struct PassthruPath {
    #[serde(alias = "name")]
    ident: String,
    #[serde(default)]
    method: Option<String>,
}

/// The method the path or `?method=` names; none or empty is Ironic's 400.
fn method_named(path: Option<String>, query: PassthruQuery) -> Result<String> {
    path.or(query.method)
        .filter(|m| !m.is_empty())
        .ok_or_else(|| Error::InvalidParameterValue("Method not specified".to_owned()))
}

/// The response to a vendor method's answer (see the module doc).
fn passthru_response(reply: RpcReply) -> Result<Response> {
    let (return_value, asynchronous, attach) = reply.pick(|r| match r {
        RpcReply::Passthru {
            return_value,
            asynchronous,
            attach,
        } => Ok((return_value, asynchronous, attach)),
        other => Err(other),
    })?;
    if asynchronous {
        return Ok(StatusCode::ACCEPTED.into_response());
    }
    if !attach {
        return Ok((StatusCode::OK, Json(return_value)).into_response());
    }
    // Attached: a string is the body's bytes as they are, anything else its JSON text.
    let bytes = match return_value {
        Value::String(s) => s.into_bytes(),
        other => other.to_string().into_bytes(),
    };
    let mut response = (StatusCode::OK, bytes).into_response();
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/octet-stream"),
    );
    Ok(response)
}

fn methods_body(reply: RpcReply) -> Result<Json<Value>> {
    let methods = reply.pick(|r| match r {
        RpcReply::VendorMethods(methods) => Ok(methods),
        other => Err(other),
    })?;
    Ok(Json(Value::Object(methods)))
}

/// /v1/nodes/{id}/vendor_passthru?method=: GET, POST, PUT, PATCH or DELETE, as the method allows.
pub async fn node_passthru(
    State(state): State<ApiState>,
    version: ApiVersion,
    request_id: RequestId,
    http_method: Method,
    ApiPath(path): ApiPath<PassthruPath>,
    ApiQuery(query): ApiQuery<PassthruQuery>,
    OptionalJson(args): OptionalJson<JsonObject>,
) -> Result<Response> {
    let (ident, method) = (path.ident, method_named(path.method, query)?);
    let reply = call_on(&state, &request_id, version, &ident, |node| {
        RpcRequest::VendorPassthru {
            node,
            method,
            http_method: http_method.as_str().to_owned(),
            args: args.unwrap_or_default(),
        }
    })
    .await?;
    passthru_response(reply)
}

/// GET /v1/nodes/{id}/vendor_passthru/methods.
pub async fn node_methods(
    OnNode(state, version, request_id, ident): OnNode,
) -> Result<Json<Value>> {
    let reply = call_on(&state, &request_id, version, &ident, |node| {
        RpcRequest::GetNodeVendorPassthruMethods { node }
    })
    .await?;
    methods_body(reply)
}

/// Sends a driver-level request to a conductor offering `driver`, picked at random; none
/// alive: DriverNotFound (404), as Ironic answers.
async fn call_driver(
    state: &ApiState,
    request_id: &RequestId,
    request: RpcRequest,
) -> Result<RpcReply> {
    let driver = request.routing().driver;
    let by_driver = drivers::hosts_by_driver(state).await?;
    let host = by_driver
        .get(driver)
        .and_then(|hosts| hosts.choose(&mut rand::rng()))
        .ok_or_else(|| Error::driver_not_found(driver))?
        .clone();
    state.rpc.call(&host, &request_id.0, request).await
}

/// /v1/drivers/{name}/vendor_passthru?method=.
pub async fn driver_passthru(
    State(state): State<ApiState>,
    request_id: RequestId,
    http_method: Method,
    ApiPath(path): ApiPath<PassthruPath>,
    ApiQuery(query): ApiQuery<PassthruQuery>,
    OptionalJson(args): OptionalJson<JsonObject>,
) -> Result<Response> {
    let request = RpcRequest::DriverVendorPassthru {
        method: method_named(path.method, query)?,
        driver: path.ident,
        http_method: http_method.as_str().to_owned(),
        args: args.unwrap_or_default(),
    };
    passthru_response(call_driver(&state, &request_id, request).await?)
}

/// GET /v1/drivers/{name}/vendor_passthru/methods.
pub async fn driver_methods(
    State(state): State<ApiState>,
    request_id: RequestId,
    ApiPath(driver): ApiPath<String>,
) -> Result<Json<Value>> {
    let request = RpcRequest::GetDriverVendorPassthruMethods { driver };
    methods_body(call_driver(&state, &request_id, request).await?)
}
