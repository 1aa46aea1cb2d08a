//! The HTTP API: Ironic's REST API v1 over axum.
//!
//! Reads are answered from the database; every change is an RPC to the conductor that owns the
//! node. The API never calls a driver and never writes a provision state. Every error, including
//! those raised before a handler (unknown URL, wrong method, bad version, bad JSON), is rendered in
//! Ironic's envelope by `error_body`.

pub mod bios;
pub mod conductors;
pub mod drivers;
pub mod error_body;
pub mod extract;
pub mod nodes;
pub mod routing;
pub mod server;
pub mod traits;
pub mod views;

use std::sync::Arc;

use axum::{
    Json, Router,
    extract::{DefaultBodyLimit, FromRequestParts, Request, State},
    http::{header, request::Parts},
    middleware,
    routing::get,
};
use serde_json::{Value, json};

use self::{
    extract::{MAX_VERSION, MIN_VERSION},
    routing::ConductorRouter,
};
use crate::{db::Db, error::Error, rpc::RpcClient};

/// What every handler shares; cheap to clone.
#[derive(Clone)]
pub struct ApiState {
    pub db: Db,
    pub rpc: RpcClient,
    pub router: Arc<ConductorRouter>,
}

pub fn router(state: ApiState) -> Router {
    let nodes = Router::new()
        .route("/", get(nodes::list).post(nodes::create))
        .route("/detail", get(nodes::list_detail))
        .route(
            "/{ident}",
            get(nodes::show).patch(nodes::update).delete(nodes::delete),
        )
        .route("/{ident}/states", get(nodes::states))
        .route(
            "/{ident}/states/provision",
            axum::routing::put(nodes::set_provision_state),
        )
        .route(
            "/{ident}/states/power",
            axum::routing::put(nodes::set_power_state),
        )
        .route(
            "/{ident}/maintenance",
            axum::routing::put(nodes::set_maintenance).delete(nodes::unset_maintenance),
        )
        .route("/{ident}/validate", get(nodes::validate))
        .route(
            "/{ident}/states/console",
            get(nodes::console).put(nodes::set_console),
        )
        .route(
            "/{ident}/traits",
            get(traits::list)
                .put(traits::replace)
                .delete(traits::remove_all),
        )
        .route(
            "/{ident}/traits/{name}",
            axum::routing::put(traits::add).delete(traits::remove),
        )
        .route("/{ident}/bios", get(bios::list))
        .route("/{ident}/bios/{name}", get(bios::show));
    let routes = Router::new()
        .route("/", get(root))
        .route("/v1", get(v1))
        .nest("/v1/nodes", nodes)
        .route("/v1/drivers", get(drivers::list))
        .route("/v1/drivers/{name}", get(drivers::show))
        .route("/v1/conductors", get(conductors::list))
        .route("/v1/conductors/{host}", get(conductors::show))
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(middleware::from_fn(catch_panics))
        .layer(DefaultBodyLimit::max(server::MAX_BODY_BYTES))
        .layer(middleware::from_fn(extract::refuse_oversized_body))
        .layer(middleware::from_fn(extract::version_and_request_id))
        .with_state(state);
    // Ironic answers `/v1/nodes/` like `/v1/nodes` (clients use both): drop a trailing slash
    // before routing.
    Router::new().fallback_service(tower::ServiceExt::map_request(routes, strip_trailing_slash))
}

fn strip_trailing_slash(mut request: Request) -> Request {
    let path = request.uri().path();
    if path.len() > 1 && path.ends_with('/') {
        let trimmed = path.trim_end_matches('/');
        let trimmed = if trimmed.is_empty() { "/" } else { trimmed };
        let rebuilt = match request.uri().query() {
            Some(q) => format!("{trimmed}?{q}"),
            None => trimmed.to_owned(),
        };
        if let Ok(uri) = rebuilt.parse() {
            *request.uri_mut() = uri;
        }
    }
    request
}

/// A handler that panics answers 500 in the envelope; the process and its other requests go on.
async fn catch_panics(request: Request, next: middleware::Next) -> axum::response::Response {
    use axum::response::IntoResponse;
    use futures::FutureExt;
    match std::panic::AssertUnwindSafe(next.run(request))
        .catch_unwind()
        .await
    {
        Ok(response) => response,
        Err(panic) => Error::internal(format!(
            "request handler panicked: {}",
            crate::error::panic_message(&*panic)
        ))
        .into_response(),
    }
}

async fn not_found() -> Error {
    Error::NotFound("The resource could not be found.".to_owned())
}

async fn method_not_allowed() -> Error {
    Error::MethodNotAllowed("The method is not allowed for this resource.".to_owned())
}

/// The URL clients reached us by, for links: `http://<Host>`.
pub struct BaseUrl(pub String);

impl<S: Send + Sync> FromRequestParts<S> for BaseUrl {
    type Rejection = Error;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, Self::Rejection> {
        let host = parts
            .headers
            .get(header::HOST)
            .and_then(|h| h.to_str().ok())
            .unwrap_or("localhost:6385");
        Ok(BaseUrl(format!("http://{host}")))
    }
}

fn version_doc(base: &str) -> Value {
    json!({
        "id": "v1",
        "links": [{"href": format!("{base}/v1/"), "rel": "self"}],
        "status": "CURRENT",
        "min_version": MIN_VERSION.to_string(),
        "version": MAX_VERSION.to_string(),
    })
}

async fn root(BaseUrl(base): BaseUrl) -> Json<Value> {
    Json(json!({
        "name": "OpenStack Ironic API",
        "description": "Ironic is an OpenStack project which enables the provision and management of baremetal machines.",
        "default_version": version_doc(&base),
        "versions": [version_doc(&base)],
    }))
}

/// GET /v1: the resources Ferrum serves at the negotiated version (no chassis, ports,
/// portgroups or volume yet, so they are not announced).
async fn v1(
    BaseUrl(base): BaseUrl,
    version: extract::ApiVersion,
    State(_): State<ApiState>,
) -> Json<Value> {
    let res = |name: &str| {
        json!([
            {"href": format!("{base}/v1/{name}/"), "rel": "self"},
            {"href": format!("{base}/{name}/"), "rel": "bookmark"},
        ])
    };
    let mut doc = json!({
        "id": "v1",
        "links": [
            {"href": format!("{base}/v1/"), "rel": "self"},
            {"href": "https://docs.openstack.org//ironic/latest/contributor//webapi.html",
             "rel": "describedby", "type": "text/html"},
        ],
        "media_types": {"base": "application/json",
                        "type": "application/vnd.openstack.ironic.v1+json"},
        "nodes": res("nodes"),
        "drivers": res("drivers"),
        "version": version_doc(&base),
    });
    if version.at_least(49) {
        doc["conductors"] = res("conductors");
    }
    Json(doc)
}
