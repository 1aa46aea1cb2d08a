//! The HTTP API: Ironic's REST API v1 over axum.
//!
//! Reads are answered from the database; every change is an RPC to the conductor that owns the
//! node. The API never calls a driver and never writes a provision state. Every error, including
//! those raised before a handler (unknown URL, wrong method, bad version, bad JSON), is rendered in
//! Ironic's envelope by `error_body`.

pub mod access_log;
pub mod allocations;
pub mod auth;
pub mod bios;
pub mod chassis;
pub mod collection;
pub mod conductors;
pub mod deploy_templates;
pub mod drivers;
pub mod error_body;
pub mod events;
pub mod extract;
pub mod firmware;
pub mod gates;
pub mod history;
pub mod inspection_rules;
pub mod inventory;
pub mod keystone;
pub mod listing;
pub mod named;
pub mod nodes;
pub mod ops;
pub mod portgroups;
pub mod ports;
pub mod ramdisk;
pub mod routing;
pub mod runbooks;
pub mod shards;
pub mod traits;
pub mod vendor;
pub mod views;
pub mod volume;
pub mod watch;

use std::sync::Arc;

use axum::{
    Extension, Json, Router,
    extract::{DefaultBodyLimit, FromRequestParts, Request, State},
    http::{header, request::Parts},
    middleware,
    routing::get,
};
use serde_json::{Value, json};

use self::{
    collection::list,
    extract::{MIN_VERSION, ServedMax},
    routing::ConductorRouter,
};
use crate::{
    allocation::Allocation,
    db::Db,
    error::Error,
    ports::{Port, Portgroup},
    rpc::RpcClient,
    volume::{VolumeConnector, VolumeTarget},
};

/// What every handler shares; cheap to clone.
#[derive(Clone)]
pub struct ApiState {
    pub db: Db,
    pub rpc: RpcClient,
    pub router: Arc<ConductorRouter>,
    /// `restrict_lookup` and `ramdisk_heartbeat_timeout` (the ramdisk endpoints read them).
    pub config: Arc<crate::config::ApiConfig>,
    /// Versioned notifications of what the API does (off unless configured).
    pub notifier: crate::notifications::Notifier,
    /// Who may use the API: None for `noauth`.
    pub auth: Option<Auth>,
    /// The node events `GET /ferrum/v1/watch` streams (None: the watch is off).
    pub watch: Option<crate::notifications::watch::Hub>,
    /// The hardware types of this build, as data (`drivers::catalogue`).
    pub hardware: &'static crate::node::hardware::Catalogue,
}

pub fn router(state: ApiState) -> Router {
    let nodes = Router::new()
        .merge(node_states_routes(|sub| format!("/{{ident}}/states{sub}")))
        // Ironic's routing also reaches a node's states controller with the node named after
        // it (pecan's `RestController` takes `states` for its sub-controller wherever it stands
        // in the path, and its handlers' node argument from what follows): `GET
        // /v1/nodes/states/console/{ident}` is `GET /v1/nodes/{ident}/states/console`.
        .merge(node_states_routes(|sub| format!("/states{sub}/{{ident}}")))
        .route("/", get(nodes::list::list).post(nodes::create::create))
        .route("/detail", get(nodes::list::list_detail))
        .route(
            "/{ident}",
            get(nodes::show::show)
                .patch(nodes::update::update)
                .delete(nodes::delete::delete),
        )
        .route(
            "/{ident}/maintenance",
            axum::routing::put(nodes::maintenance::set_maintenance)
                .delete(nodes::maintenance::unset_maintenance),
        )
        .route("/{ident}/validate", get(nodes::validate::validate))
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
        // Virtual media (API 1.89; GET 1.93).
        .route(
            "/{ident}/vmedia",
            get(nodes::vmedia::get)
                .post(nodes::vmedia::attach)
                .delete(nodes::vmedia::detach),
        )
        .route("/{ident}/bios", get(bios::list))
        .route("/{ident}/bios/{name}", get(bios::show))
        .route("/{ident}/history", get(history::list))
        .route("/{ident}/history/{event}", get(history::show))
        .route("/{ident}/firmware", get(firmware::list))
        .route("/{ident}/inventory", get(inventory::show))
        .route("/{ident}/children", get(nodes::children::list))
        .route(
            "/{ident}/management/boot_device",
            get(nodes::management::get_boot_device).put(nodes::management::set_boot_device),
        )
        .route(
            "/{ident}/management/boot_device/supported",
            get(nodes::management::supported_boot_devices),
        )
        .route(
            "/{ident}/management/inject_nmi",
            axum::routing::put(nodes::management::inject_nmi),
        )
        // Indicators (API 1.63): the node's LEDs, listed, read and set.
        .route(
            "/{ident}/management/indicators",
            get(nodes::indicators::list),
        )
        .route(
            "/{ident}/management/indicators/{indicator}",
            get(nodes::indicators::get_state).put(nodes::indicators::set_state),
        )
        .route("/{ident}/vendor_passthru", passthru(vendor::node_passthru))
        .route(
            "/{ident}/vendor_passthru/methods",
            get(vendor::node_methods),
        )
        .route(
            "/{ident}/vendor_passthru/{method}",
            passthru(vendor::node_passthru),
        )
        .route("/{ident}/ports", get(list::<Port>))
        .route("/{ident}/ports/detail", get(list::<Port>))
        .route("/{ident}/portgroups", get(list::<Portgroup>))
        .route("/{ident}/portgroups/detail", get(list::<Portgroup>))
        .route(
            "/{ident}/vifs",
            get(nodes::vifs::list).post(nodes::vifs::attach),
        )
        .route(
            "/{ident}/vifs/{vif}",
            axum::routing::delete(nodes::vifs::detach),
        )
        .route("/{ident}/volume", get(volume::node_root))
        .route("/{ident}/volume/connectors", get(list::<VolumeConnector>))
        .route("/{ident}/volume/targets", get(list::<VolumeTarget>));
    let chassis = stored_routes::<crate::chassis::Chassis>("/{uuid}", true)
        .route("/{uuid}/nodes", get(chassis::nodes))
        .route("/{uuid}/nodes/detail", get(chassis::nodes));
    let ports = Router::new()
        .route("/", get(list::<Port>).post(ports::create))
        .route("/detail", get(list::<Port>))
        .route(
            "/{uuid}",
            get(collection::show::<Port>)
                .patch(collection::update_child::<Port>)
                .delete(collection::delete_child::<Port>),
        );
    let portgroups = Router::new()
        .route("/", get(list::<Portgroup>).post(portgroups::create))
        .route("/detail", get(list::<Portgroup>))
        .route(
            "/{ident}",
            get(collection::show::<Portgroup>)
                .patch(collection::update_child::<Portgroup>)
                .delete(collection::delete_child::<Portgroup>),
        )
        .route("/{ident}/ports", get(list::<Port>))
        .route("/{ident}/ports/detail", get(list::<Port>));
    // Allocations (API 1.52, PATCH 1.57): the collection and a node's allocation.
    let allocations = Router::new()
        .route("/", get(list::<Allocation>).post(allocations::create))
        .route("/detail", get(list::<Allocation>))
        .route(
            "/{ident}",
            get(allocations::show)
                .patch(collection::update::<Allocation>)
                .delete(allocations::delete),
        );
    let nodes = nodes.route(
        "/{ident}/allocation",
        get(allocations::show).delete(allocations::delete),
    );
    // Deploy templates (API 1.55) and runbooks (1.92), both through `named.rs`.
    let deploy_templates =
        stored_routes::<crate::deploy_template::DeployTemplate>("/{ident}", true);
    let runbooks = stored_routes::<crate::runbook::Runbook>("/{ident}", true)
        .route(
            "/{ident}/traits",
            get(runbooks::list_traits)
                .put(runbooks::replace_traits)
                .delete(runbooks::remove_all_traits),
        )
        .route(
            "/{ident}/traits/{name}",
            axum::routing::put(runbooks::add_trait).delete(runbooks::remove_trait),
        );
    // Inspection rules (API 1.96), named by UUID only.
    let inspection_rules =
        stored_routes::<crate::inspection_rule::InspectionRule>("/{ident}", false);
    let routes = Router::new()
        .route("/", get(root))
        // Operations, outside Ironic's API: Prometheus metrics and the health check.
        .route("/metrics", get(ops::metrics))
        .route("/healthcheck", get(ops::health))
        .nest("/v1/allocations", allocations)
        .route("/v1", get(v1))
        .nest("/v1/nodes", nodes)
        .nest("/v1/chassis", chassis)
        .nest("/v1/deploy_templates", deploy_templates)
        .nest("/v1/runbooks", runbooks)
        .nest("/v1/inspection_rules", inspection_rules)
        .nest("/v1/ports", ports)
        .nest("/v1/portgroups", portgroups)
        .route("/v1/volume", get(volume::root))
        .nest("/v1/volume/connectors", volume_routes::<VolumeConnector>())
        .nest("/v1/volume/targets", volume_routes::<VolumeTarget>())
        .route("/v1/drivers", get(drivers::list))
        .route("/v1/drivers/{name}", get(drivers::show))
        .route(
            "/v1/drivers/{name}/vendor_passthru",
            passthru(vendor::driver_passthru),
        )
        .route(
            "/v1/drivers/{name}/vendor_passthru/methods",
            get(vendor::driver_methods),
        )
        .route(
            "/v1/drivers/{name}/vendor_passthru/{method}",
            passthru(vendor::driver_passthru),
        )
        .route("/v1/conductors", get(conductors::list))
        .route("/v1/shards", get(shards::list))
        .route("/v1/conductors/{host}", get(conductors::show))
        .route("/v1/drivers/{name}/properties", get(drivers::properties))
        .route(
            "/v1/drivers/{name}/raid/logical_disk_properties",
            get(drivers::raid_logical_disk_properties),
        )
        .route("/v1/events", axum::routing::post(events::post))
        .route("/v1/lookup", get(ramdisk::lookup))
        .route(
            "/v1/continue_inspection",
            axum::routing::post(ramdisk::continue_inspection),
        )
        .route(
            "/v1/heartbeat/{ident}",
            axum::routing::post(ramdisk::heartbeat),
        )
        .route(
            "/v1/heartbeat",
            axum::routing::post(ramdisk::heartbeat_named_in_body),
        )
        // Beyond Ironic, outside its `/v1` tree.
        .route("/ferrum/v1/watch", get(watch::watch))
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed);
    let max = ServedMax::default();
    let auth = state.auth.clone();
    with_middleware(routes, state, max, auth)
}

/// How the API authenticates its callers (`auth_strategy`, but `noauth`).
#[derive(Clone)]
pub enum Auth {
    /// `http_basic`: the users of an htpasswd file.
    Basic(Arc<auth::BasicAuth>),
    /// `keystone`: Keystone tokens.
    Keystone(Arc<keystone::Keystone>),
}

/// The routes of a node's states controller (Ironic's `NodeStatesController`), each at
/// `path(sub)` for its sub-path `sub` (`""` for the states themselves): the path names the
/// node as `{ident}`. Boot mode and secure boot are of API 1.76.
fn node_states_routes(path: fn(&str) -> String) -> Router<ApiState> {
    use axum::routing::put;
    Router::new()
        .route(&path(""), get(nodes::show::states))
        .route(
            &path("/console"),
            get(nodes::show::console).put(nodes::console::set_console),
        )
        .route(
            &path("/provision"),
            put(nodes::provision::set_provision_state),
        )
        .route(&path("/power"), put(nodes::power::set_power_state))
        .route(&path("/raid"), put(nodes::raid::set_target_raid_config))
        .route(&path("/boot_mode"), put(nodes::boot_mode::set_boot_mode))
        .route(
            &path("/secure_boot"),
            put(nodes::boot_mode::set_secure_boot),
        )
}

/// The routes of a collection the API writes itself (`collection.rs`): its listing (with
/// `/detail` when `detail`), a create, and an item's GET, PATCH and DELETE at `item`.
fn stored_routes<R: collection::Listed + collection::Stored + 'static>(
    item: &str,
    detail: bool,
) -> Router<ApiState> {
    use collection::{create, delete, list, show, update};
    let routes = Router::new()
        .route("/", get(list::<R>).post(create::<R>))
        .route(item, get(show::<R>).patch(update::<R>).delete(delete::<R>));
    if detail {
        routes.route("/detail", get(list::<R>))
    } else {
        routes
    }
}

/// The routes of `/v1/volume/connectors` or `/v1/volume/targets`.
fn volume_routes<K: volume::Kind + 'static>() -> Router<ApiState> {
    Router::new()
        .route("/", get(list::<K>).post(volume::create::<K>))
        .route("/detail", get(list::<K>))
        .route(
            "/{uuid}",
            get(collection::show::<K>)
                .patch(collection::update_child::<K>)
                .delete(collection::delete_child::<K>),
        )
}

/// A vendor passthru route: the HTTP methods a vendor method may answer (the conductor checks
/// which one it does).
fn passthru<H, T>(handler: H) -> axum::routing::MethodRouter<ApiState>
where
    H: axum::handler::Handler<T, ApiState>,
    T: 'static,
{
    use axum::routing::MethodFilter;
    let methods = MethodFilter::GET
        .or(MethodFilter::POST)
        .or(MethodFilter::PUT)
        .or(MethodFilter::PATCH)
        .or(MethodFilter::DELETE);
    axum::routing::on(methods, handler)
}

/// The middleware around every route, innermost first: panics become 500s, the body limits,
/// authentication (`http_basic` or `keystone`: before any body is read, and inside the request id
/// so that a 401 carries one, as Ironic's does; `auth::is_public` routes pass), version negotiation
/// and request ids, the request's span (so that every line logged for a request carries its
/// method, path and request id), and outermost the access log and HTTP metrics
/// (`access_log.rs`: one line per request, with a 4xx's message or a 5xx's cause, so that it
/// sees the answers of all the others, 401s included). Being a layer of the router, it sees the
/// route template a request matched.
fn with_middleware<S: Clone + Send + Sync + 'static>(
    routes: Router<S>,
    state: S,
    max: ServedMax,
    auth: Option<Auth>,
) -> Router {
    let routes = routes
        .layer(middleware::from_fn(catch_panics))
        .layer(DefaultBodyLimit::max(crate::http_server::MAX_BODY_BYTES))
        .layer(middleware::from_fn(extract::refuse_oversized_body))
        .layer(middleware::from_fn(gates::refuse_too_old));
    let routes = match auth {
        Some(Auth::Basic(users)) => {
            routes.layer(middleware::from_fn_with_state(users, auth::require))
        }
        Some(Auth::Keystone(keystone)) => {
            routes.layer(middleware::from_fn_with_state(keystone, keystone::require))
        }
        None => routes,
    };
    let routes = routes
        .layer(middleware::from_fn_with_state(
            max,
            extract::version_and_request_id,
        ))
        .layer(middleware::from_fn(request_span))
        .layer(middleware::from_fn(access_log::access_log))
        .with_state(state);
    // Ironic answers `/v1/nodes/` like `/v1/nodes` (clients use both): drop a trailing slash
    // before routing.
    // Below API 1.91 a path's `.json` suffix is dropped as well (`extract::JsonSuffix`), and a
    // path without its version segment is taken as under `/v1` (`add_version_segment`).
    Router::new().fallback_service(tower::ServiceExt::map_request(routes, |request| {
        add_version_segment(extract::JsonSuffix::strip(strip_trailing_slash(request)))
    }))
}

/// The first segments of the paths Ferrum serves outside Ironic's `/v1` tree.
const OUTSIDE_V1: &[&str] = &["metrics", "healthcheck", "ferrum"];

/// Ironic's root controller takes any path whose first segment is not `v1` as one under `/v1`
/// (`RootController._lookup`, `ironic/api/controllers/root.py`): `/nodes/x` is `/v1/nodes/x`.
/// Only `/` itself is the root document; Ferrum's own endpoints ([`OUTSIDE_V1`]) keep theirs.
/// Authentication still judges the path as sent (`auth::require` reads the original URI), as
/// Ironic's, which runs before its routing, does.
fn add_version_segment(mut request: Request) -> Request {
    let path = request.uri().path();
    let first = path.trim_start_matches('/').split('/').next().unwrap_or("");
    if first.is_empty() || first == "v1" || OUTSIDE_V1.contains(&first) {
        return request;
    }
    let rebuilt = match request.uri().query() {
        Some(q) => format!("/v1{path}?{q}"),
        None => format!("/v1{path}"),
    };
    if let Ok(uri) = rebuilt.parse() {
        *request.uri_mut() = uri;
    }
    request
}

/// Runs the request inside a `request` span (its request id is recorded once it is known).
async fn request_span(request: Request, next: middleware::Next) -> axum::response::Response {
    use tracing::Instrument;
    let span = tracing::info_span!(
        "request",
        method = %request.method(),
        path = %request.uri().path(),
        request_id = tracing::field::Empty,
    );
    next.run(request).instrument(span).await
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

/// A handler that panics answers 500 in the envelope (its cause logged by
/// the access log); the process and its other requests go on.
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

/// The URL clients reached us by, for links: `http://<Host>`, or `https://<Host>` on a TLS
/// listener (`http_server::Https`).
pub struct BaseUrl(pub String);

impl<S: Send + Sync> FromRequestParts<S> for BaseUrl {
    type Rejection = Error;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, Self::Rejection> {
        let host = parts
            .headers
            .get(header::HOST)
            .and_then(|h| h.to_str().ok())
            .unwrap_or("localhost:6385");
        let scheme = if parts
            .extensions
            .get::<crate::http_server::Https>()
            .is_some()
        {
            "https"
        } else {
            "http"
        };
        Ok(BaseUrl(format!("{scheme}://{host}")))
    }
}

fn version_doc(base: &str, max: ServedMax) -> Value {
    json!({
        "id": "v1",
        "links": [{"href": format!("{base}/v1/"), "rel": "self"}],
        "status": "CURRENT",
        "min_version": MIN_VERSION.to_string(),
        "version": max.0.to_string(),
    })
}

async fn root(BaseUrl(base): BaseUrl, Extension(max): Extension<ServedMax>) -> Json<Value> {
    Json(json!({
        "name": "OpenStack Ironic API",
        "description": "Ironic is an OpenStack project which enables the provision and management of baremetal machines.",
        "default_version": version_doc(&base, max),
        "versions": [version_doc(&base, max)],
    }))
}

/// GET /v1: the resources of the negotiated version, as Ironic lists them
/// (`v1/__init__.py`): chassis, nodes, ports and drivers always, the others from their version.
async fn v1(
    BaseUrl(base): BaseUrl,
    Extension(max): Extension<ServedMax>,
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
        "chassis": res("chassis"),
        "nodes": res("nodes"),
        "ports": res("ports"),
        "drivers": res("drivers"),
        "version": version_doc(&base, max),
    });
    for (name, since) in [
        ("lookup", 22),
        ("heartbeat", 22),
        ("portgroups", 23),
        ("volume", 32),
        ("conductors", 49),
        ("events", 54),
        ("allocations", 52),
        ("deploy_templates", 55),
        ("continue_inspection", 84),
        ("shards", 82),
        ("runbooks", 92),
        ("inspection_rules", 96),
    ] {
        if version.at_least(since) {
            doc[name] = res(name);
        }
    }
    Json(doc)
}
#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use axum::{
        body::Body,
        http::{Request, StatusCode},
    };
    use tower::ServiceExt;

    use super::*;

    /// Log lines written by the test's subscriber.
    #[derive(Clone, Default)]
    struct Logs(Arc<Mutex<Vec<u8>>>);

    impl std::io::Write for Logs {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(buf);
            Ok(buf.len())
        }

        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    impl Logs {
        /// The lines logged on this thread until the guard is dropped.
        fn capture() -> (Logs, tracing::subscriber::DefaultGuard) {
            let logs = Logs::default();
            let subscriber = tracing_subscriber::fmt()
                .with_writer({
                    let logs = logs.clone();
                    move || logs.clone()
                })
                .with_ansi(false)
                .finish();
            let guard = tracing::subscriber::set_default(subscriber);
            (logs, guard)
        }

        fn take(&self) -> String {
            String::from_utf8(std::mem::take(&mut *self.0.lock().unwrap())).unwrap()
        }
    }

    /// The status, body and `X-OpenStack-Request-Id` of a GET.
    async fn fetch(app: &Router, path: &str) -> (StatusCode, String, String) {
        let response = app
            .clone()
            .oneshot(Request::get(path).body(Body::empty()).unwrap())
            .await
            .unwrap();
        let status = response.status();
        let id = response.headers()["x-openstack-request-id"]
            .to_str()
            .unwrap()
            .to_owned();
        let body = axum::body::to_bytes(response.into_body(), usize::MAX)
            .await
            .unwrap();
        (status, String::from_utf8(body.to_vec()).unwrap(), id)
    }

    /// Checks that one line was logged since the last look, holding `head` and `tail`.
    fn logged_once(logs: &Logs, head: &str, tail: &str) {
        let lines = logs.take();
        assert_eq!(lines.lines().count(), 1, "{lines}");
        assert!(lines.contains(head), "{lines}");
        assert!(lines.contains(tail), "{lines}");
    }

    async fn panics() -> Error {
        panic!("boom in a handler")
    }

    /// The tests that capture log lines, each in a process of its own: a thread-local subscriber
    /// sees nothing when another test's thread registers a callsite while it is being set
    /// (tracing's global level filter is then computed without it), so they cannot share a
    /// process with tests running in parallel.
    #[test]
    fn log_lines_in_a_process_of_their_own() {
        for test in [
            "api::tests::every_request_is_logged_once_with_its_request_id",
            "api::tests::lines_logged_for_a_request_name_it",
        ] {
            let out = std::process::Command::new(std::env::current_exe().unwrap())
                .args([
                    test,
                    "--exact",
                    "--ignored",
                    "--test-threads=1",
                    "--nocapture",
                ])
                .output()
                .unwrap();
            let said = String::from_utf8_lossy(&out.stdout);
            assert!(
                out.status.success() && said.contains("1 passed"),
                "{test}: {said}{}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
    }

    /// One access line per request: its method, path, status, duration and request id (the one
    /// the answer carries), a 5xx with its cause (which the client does not see), a 4xx with its
    /// message.
    #[tokio::test]
    #[ignore = "run by log_lines_in_a_process_of_their_own"]
    async fn every_request_is_logged_once_with_its_request_id() {
        let (logs, capture) = Logs::capture();
        let routes = Router::new()
            .route("/v1/panic", get(panics))
            .route("/v1/busy", get(|| async { Error::NoFreeConductorWorker }))
            .route("/v1/ok", get(|| async { "ok" }))
            .fallback(not_found);
        let app = with_middleware(routes, (), ServedMax::default(), None);

        let (status, body, request_id) = fetch(&app, "/v1/panic").await;
        assert_eq!(status, StatusCode::INTERNAL_SERVER_ERROR);
        assert!(body.contains("An internal error occurred"), "{body}");
        assert!(!body.contains("boom"), "{body}");
        logged_once(
            &logs,
            "ERROR ferrum::access: internal error method=GET path=/v1/panic status=500 duration_ms=",
            &format!("request_id={request_id} error=request handler panicked: boom in a handler"),
        );

        // A server's error with its cause, and a client's with its message.
        for (path, expected, head, message) in [
            (
                "/v1/busy",
                StatusCode::SERVICE_UNAVAILABLE,
                "WARN ferrum::access: server error method=GET path=/v1/busy status=503",
                "Requested action cannot be performed",
            ),
            (
                "/v1/nowhere",
                StatusCode::NOT_FOUND,
                "INFO ferrum::access: client error method=GET path=/v1/nowhere status=404",
                "The resource could not be found.",
            ),
        ] {
            let (status, _, request_id) = fetch(&app, path).await;
            assert_eq!(status, expected);
            logged_once(
                &logs,
                head,
                &format!("request_id={request_id} error={message}"),
            );
        }

        // An answer.
        let (status, _, request_id) = fetch(&app, "/v1/ok").await;
        assert_eq!(status, StatusCode::OK);
        let lines = logs.take();
        assert_eq!(lines.lines().count(), 1, "{lines}");
        assert!(
            lines.contains("INFO ferrum::access: answered method=GET path=/v1/ok status=200"),
            "{lines}"
        );
        assert!(
            lines
                .trim_end()
                .ends_with(&format!("request_id={request_id}")),
            "{lines}"
        );
        assert!(request_id.starts_with("req-"), "{request_id}");
        drop(capture);
    }

    /// A path without `/v1` is routed as under it (Ferrum's own endpoints stay where they are);
    /// authentication judges the path as sent, so `/continue_inspection` is not public as
    /// `/v1/continue_inspection` is (Ironic matches its public routes before routing).
    #[tokio::test]
    async fn a_path_without_its_version_is_under_v1_and_authenticated_as_sent() {
        let routes = Router::new()
            .route("/v1/continue_inspection", get(|| async { "inspection" }))
            .route("/metrics", get(|| async { "metrics" }))
            .fallback(not_found);
        let open = with_middleware(routes.clone(), (), ServedMax::default(), None);
        for (path, said) in [
            ("/continue_inspection", "inspection"),
            ("/continue_inspection/", "inspection"),
            ("/metrics", "metrics"),
        ] {
            let (status, body, _) = fetch(&open, path).await;
            assert_eq!((status, body.as_str()), (StatusCode::OK, said), "{path}");
        }
        let users = Arc::new(auth::BasicAuth::parse("").unwrap());
        let closed = with_middleware(routes, (), ServedMax::default(), Some(Auth::Basic(users)));
        assert_eq!(
            fetch(&closed, "/v1/continue_inspection").await.0,
            StatusCode::OK
        );
        assert_eq!(
            fetch(&closed, "/continue_inspection").await.0,
            StatusCode::UNAUTHORIZED
        );
    }

    /// A line logged while a request is handled is in the request's span: it names the request.
    #[tokio::test]
    #[ignore = "run by log_lines_in_a_process_of_their_own"]
    async fn lines_logged_for_a_request_name_it() {
        let (logs, _guard) = Logs::capture();
        let routes = Router::new().route(
            "/v1/says",
            get(|| async {
                tracing::info!("inside");
                "said"
            }),
        );
        let app = with_middleware(routes, (), ServedMax::default(), None);
        let (_, _, request_id) = fetch(&app, "/v1/says").await;
        let lines = logs.take();
        assert!(
            lines.contains(&format!("request{{method=GET path=/v1/says request_id={request_id}}}: ferrum::api::tests: inside")),
            "{lines}"
        );
    }
}
