//! The access log and the HTTP metrics: one middleware, outside every other layer of the router,
//! sees each request's answer, whoever gave it (a handler, an extractor, another middleware).
//!
//! Each request is one log line (target `ferrum::access`) with its method, path, status,
//! duration and request id (the `X-OpenStack-Request-Id` the answer carries): at info level,
//! a client error (4xx) with its message, a 500 at error level and another 5xx (a 503) at warning level,
//! each with its cause, which the client is not shown (`error_body::ErrorCause`). The same
//! answer is counted in the metrics by its route template, never its raw path.

use std::time::Instant;

use axum::{
    extract::{MatchedPath, Request},
    http::StatusCode,
    middleware::Next,
    response::Response,
};

use super::error_body::ErrorCause;

/// The label of a request that matched no route (answered 404 by the fallback).
const UNMATCHED: &str = "unmatched";

/// Middleware: logs and counts each request once it is answered.
pub async fn access_log(request: Request, next: Next) -> Response {
    let started = Instant::now();
    let method = request.method().clone();
    // Cheap clones: the route template is a shared `Arc<str>`, the URI shares its bytes.
    let route = request.extensions().get::<MatchedPath>().cloned();
    let uri = request.uri().clone();
    let mut response = next.run(request).await;
    let elapsed = started.elapsed();
    let status = response.status();
    crate::metrics::get().http_request(
        crate::metrics::method_label(&method),
        route.as_ref().map_or(UNMATCHED, MatchedPath::as_str),
        status.as_str(),
        elapsed.as_secs_f64(),
    );
    let cause = response.extensions_mut().remove::<ErrorCause>();
    let request_id = response
        .headers()
        .get("x-openstack-request-id")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("-");
    let path = uri.path();
    let status = status.as_u16();
    let duration_ms = elapsed.as_secs_f64() * 1000.0;
    match cause {
        Some(ErrorCause(e)) if status == StatusCode::INTERNAL_SERVER_ERROR.as_u16() => {
            tracing::error!(target: "ferrum::access", %method, %path, status, duration_ms,
                %request_id, error = %e, "internal error");
        }
        Some(ErrorCause(e)) if status >= 500 => {
            tracing::warn!(target: "ferrum::access", %method, %path, status, duration_ms,
                %request_id, error = %e, "server error");
        }
        Some(ErrorCause(e)) => {
            tracing::info!(target: "ferrum::access", %method, %path, status, duration_ms,
                %request_id, error = %e, "client error");
        }
        None => {
            tracing::info!(target: "ferrum::access", %method, %path, status, duration_ms,
                %request_id, "answered");
        }
    }
    response
}
