//! Request plumbing shared by every handler: microversion negotiation, request ids, and a JSON
//! body extractor whose rejections use Ironic's envelope.

use axum::{
    body::Bytes,
    extract::{FromRequest, FromRequestParts, Request},
    http::{HeaderMap, HeaderValue, header, request::Parts},
    middleware::Next,
    response::{IntoResponse, Response},
};
use serde::de::DeserializeOwned;

use crate::error::Error;
use crate::http_server::MAX_BODY_BYTES;

pub const MIN_VERSION: ApiVersion = ApiVersion(1);
/// The highest microversion Ferrum announces. Every field and behaviour up to it must be real.
/// 1.71 (scope-based roles) and 1.80 (project-scoped node creation) change only Keystone
/// policy in Ironic; Ferrum has no Keystone nor policy, so they change nothing here.
pub const MAX_VERSION: ApiVersion = ApiVersion(115);

/// The highest microversion the server serves and announces ([`MAX_VERSION`]), carried to the
/// handlers as a request extension so that negotiation and the version documents read one value.
#[derive(Debug, Clone, Copy)]
pub struct ServedMax(pub ApiVersion);

impl Default for ServedMax {
    fn default() -> Self {
        ServedMax(MAX_VERSION)
    }
}

/// A negotiated API microversion `1.N`, stored as N.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct ApiVersion(pub u32);

impl std::fmt::Display for ApiVersion {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "1.{}", self.0)
    }
}

impl ApiVersion {
    pub fn at_least(self, minor: u32) -> bool {
        self.0 >= minor
    }

    /// For a resource that exists from 1.`minor` on: below it, Ironic answers 404 as for any
    /// unknown URL.
    pub fn require_resource(self, minor: u32) -> Result<(), Error> {
        if self.at_least(minor) {
            Ok(())
        } else {
            Err(Error::NotFound(
                "The resource could not be found.".to_owned(),
            ))
        }
    }

    /// Reads `OpenStack-API-Version: baremetal 1.N` (preferred) or the legacy
    /// `X-OpenStack-Ironic-API-Version: 1.N`; none means the minimum, `latest` the maximum.
    pub fn negotiate(headers: &HeaderMap, max: ServedMax) -> Result<ApiVersion, Error> {
        let ServedMax(max) = max;
        let modern = headers
            .get_all("openstack-api-version")
            .iter()
            .filter_map(|v| v.to_str().ok())
            .flat_map(|v| v.split(','))
            .find_map(|v| {
                let mut words = v.split_whitespace();
                match (words.next(), words.next()) {
                    (Some(service), Some(version)) if service.eq_ignore_ascii_case("baremetal") => {
                        Some(version.to_owned())
                    }
                    _ => None,
                }
            });
        let legacy = headers
            .get("x-openstack-ironic-api-version")
            .and_then(|v| v.to_str().ok())
            .map(|v| v.trim().to_owned());
        let Some(requested) = modern.or(legacy) else {
            return Ok(MIN_VERSION);
        };
        if requested.eq_ignore_ascii_case("latest") {
            return Ok(max);
        }
        let invalid = || {
            Error::VersionNotAcceptable(
                "Invalid value for X-OpenStack-Ironic-API-Version header".to_owned(),
            )
        };
        let (major, minor) = requested.split_once('.').ok_or_else(invalid)?;
        let major: u32 = major.parse().map_err(|_| invalid())?;
        let minor: u32 = minor.parse().map_err(|_| invalid())?;
        if major != 1 {
            return Err(Error::VersionNotAcceptable(format!(
                "Mutually exclusive versions requested. Version {major}.{minor} requested but not supported by this service. The supported version range is: [{MIN_VERSION}, {max}]."
            )));
        }
        let version = ApiVersion(minor);
        if version < MIN_VERSION || version > max {
            return Err(Error::VersionNotAcceptable(format!(
                "Version {version} was requested but the minor version is not supported by this service. The supported version range is: [{MIN_VERSION}, {max}]."
            )));
        }
        Ok(version)
    }
}

impl<S: Send + Sync> FromRequestParts<S> for ApiVersion {
    type Rejection = Error;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, Self::Rejection> {
        parts
            .extensions
            .get::<ApiVersion>()
            .copied()
            .ok_or_else(|| Error::internal("version middleware did not run"))
    }
}

/// Whether the request's path ended in `.json`, dropped before routing because the request
/// asked for an API version below 1.91 (Ironic's `JsonExtensionMiddleware`: older clients
/// could append it to any URL). A handler that looks a resource up by name tries the name with
/// `.json` put back when the shorter one is not found, as Ironic's `*_with_suffix` lookups do;
/// from 1.91, or with no version asked for, a name ending in `.json` is simply the name.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct JsonSuffix(pub bool);

impl JsonSuffix {
    /// Drops a trailing `.json` from the request's path when its version header asks for a
    /// version below 1.91, and records that it did for the handler.
    pub fn strip(mut request: Request) -> Request {
        let path = request.uri().path();
        let asked_for = request.headers().contains_key("openstack-api-version")
            || request
                .headers()
                .contains_key("x-openstack-ironic-api-version");
        let Some(stripped) = path.strip_suffix(".json") else {
            return request;
        };
        if !asked_for
            || !ApiVersion::negotiate(request.headers(), ServedMax::default())
                .is_ok_and(|v| v.0 < 91)
        {
            return request;
        }
        let rebuilt = match request.uri().query() {
            Some(q) => format!("{stripped}?{q}"),
            None => stripped.to_owned(),
        };
        if let Ok(uri) = rebuilt.parse() {
            *request.uri_mut() = uri;
            request.extensions_mut().insert(JsonSuffix(true));
        }
        request
    }

    /// Looks `ident` up with `get`, and, when it is not found and the path lost a `.json`,
    /// `ident` with `.json` again.
    pub async fn find<T, F, Fut>(self, ident: &str, get: F) -> Result<T, Error>
    where
        F: Fn(String) -> Fut,
        Fut: std::future::Future<Output = Result<T, Error>>,
    {
        match get(ident.to_owned()).await {
            Err(e) if self.0 && e.status() == axum::http::StatusCode::NOT_FOUND => {
                get(format!("{ident}.json")).await
            }
            other => other,
        }
    }
}

impl<S: Send + Sync> FromRequestParts<S> for JsonSuffix {
    type Rejection = std::convert::Infallible;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, Self::Rejection> {
        Ok(parts
            .extensions
            .get::<JsonSuffix>()
            .copied()
            .unwrap_or_default())
    }
}

/// The request id, `req-<uuid>`, carried into RPCs and logs.
#[derive(Debug, Clone)]
pub struct RequestId(pub String);

impl<S: Send + Sync> FromRequestParts<S> for RequestId {
    type Rejection = Error;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, Self::Rejection> {
        parts
            .extensions
            .get::<RequestId>()
            .cloned()
            .ok_or_else(|| Error::internal("request id middleware did not run"))
    }
}

/// The client's own `X-OpenStack-Request-Id`, when it is one Ironic would accept (`req-` and a
/// UUID). It names the request end to end: a client that retries a request after an answer
/// that says it may or may not have been applied sends the same id, and the conductor applies
/// it at most once (the node keeps the id of the last request applied to it).
fn client_request_id(headers: &axum::http::HeaderMap) -> Option<String> {
    let id = headers.get("x-openstack-request-id")?.to_str().ok()?;
    let uuid = id.strip_prefix("req-")?;
    // The hyphenated form only, as Ironic's own ids are.
    (uuid.len() == 36).then_some(())?;
    uuid::Uuid::try_parse(uuid).ok()?;
    Some(id.to_owned())
}

/// Middleware: negotiates the version (406 on a bad one), assigns a request id, and adds the
/// version and request id headers to every response, errors included.
pub async fn version_and_request_id(
    axum::extract::State(max): axum::extract::State<ServedMax>,
    mut request: Request,
    next: Next,
) -> Response {
    let request_id = client_request_id(request.headers())
        .unwrap_or_else(|| format!("req-{}", uuid::Uuid::new_v4()));
    tracing::Span::current().record("request_id", tracing::field::display(&request_id));
    let negotiated = ApiVersion::negotiate(request.headers(), max);
    request.extensions_mut().insert(max);
    let mut response = match negotiated {
        Ok(version) => {
            request.extensions_mut().insert(version);
            request
                .extensions_mut()
                .insert(RequestId(request_id.clone()));
            let mut response = next.run(request).await;
            if let Ok(v) = HeaderValue::from_str(&version.to_string()) {
                response
                    .headers_mut()
                    .insert("x-openstack-ironic-api-version", v);
            }
            if let Ok(v) = HeaderValue::from_str(&format!("baremetal {version}")) {
                response.headers_mut().insert("openstack-api-version", v);
            }
            response
        }
        Err(e) => e.into_response(),
    };
    let headers = response.headers_mut();
    headers.insert(
        "x-openstack-ironic-api-minimum-version",
        HeaderValue::from_static("1.1"),
    );
    if let Ok(v) = HeaderValue::from_str(&max.0.to_string()) {
        headers.insert("x-openstack-ironic-api-maximum-version", v);
    }
    if let Ok(v) = HeaderValue::from_str(&request_id) {
        headers.insert("openstack-request-id", v.clone());
        headers.insert("x-openstack-request-id", v);
    }
    response
}

/// A body over the limit but declared at most this large is read (and dropped) before the 413
/// goes out, within [`DRAIN_TIME`]: a client still writing it would otherwise get a broken
/// pipe instead of the answer. A larger one is answered at once, and the connection closed.
const DRAIN_MAX_BYTES: u64 = 4 * MAX_BODY_BYTES as u64;
const DRAIN_TIME: std::time::Duration = std::time::Duration::from_secs(5);

/// Middleware: a request whose declared `Content-Length` exceeds [`MAX_BODY_BYTES`] gets 413
/// without its body reaching a handler; only a body up to [`DRAIN_MAX_BYTES`] is read at all
/// (see there). A chunked body is cut at the same size by the body limit [`ApiJson`] reads
/// under.
pub async fn refuse_oversized_body(request: Request, next: Next) -> Response {
    let declared = request
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    match declared {
        Some(len) if len > DRAIN_MAX_BYTES => body_too_large().into_response(),
        Some(len) if len > MAX_BODY_BYTES as u64 => {
            use futures::StreamExt as _;
            let mut body = request.into_body().into_data_stream();
            let _ = tokio::time::timeout(DRAIN_TIME, async {
                while let Some(Ok(_)) = body.next().await {}
            })
            .await;
            body_too_large().into_response()
        }
        _ => next.run(request).await,
    }
}

fn body_too_large() -> Error {
    Error::PayloadTooLarge(format!(
        "The request body is too large: the limit is {MAX_BODY_BYTES} bytes."
    ))
}

/// A JSON body; malformed JSON, a wrong content type or a bad shape is a 400/415 in Ironic's
/// envelope naming the problem.
pub struct ApiJson<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequest<S> for ApiJson<T> {
    type Rejection = Error;

    async fn from_request(req: Request, state: &S) -> Result<Self, Self::Rejection> {
        match read_json(req, state).await? {
            Some(value) => Ok(ApiJson(value)),
            None => Err(Error::InvalidParameterValue(
                "The request body is empty; send a JSON document.".to_owned(),
            )),
        }
    }
}

/// A JSON body that may be absent (empty): None then.
pub struct OptionalJson<T>(pub Option<T>);

impl<S: Send + Sync, T: DeserializeOwned> FromRequest<S> for OptionalJson<T> {
    type Rejection = Error;

    async fn from_request(req: Request, state: &S) -> Result<Self, Self::Rejection> {
        read_json(req, state).await.map(OptionalJson)
    }
}

/// Reads the body (under the body limit) and parses it as JSON; None when it is empty,
/// whatever its declared type. A non-JSON content type is 415.
async fn read_json<S: Send + Sync, T: DeserializeOwned>(
    req: Request,
    state: &S,
) -> Result<Option<T>, Error> {
    let content_type = req
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .map(|v| v.to_ascii_lowercase());
    let body = Bytes::from_request(req, state).await.map_err(|e| {
        if e.status().as_u16() == 413 {
            body_too_large()
        } else {
            Error::InvalidParameterValue(format!("Could not read the request body: {e}"))
        }
    })?;
    if body.is_empty() {
        return Ok(None);
    }
    if let Some(ct) = &content_type
        && !ct.starts_with("application/json")
        && !ct.contains("+json")
    {
        return Err(Error::UnsupportedMediaType(format!(
            "The content type {ct} is not supported; send application/json."
        )));
    }
    serde_json::from_slice(&body).map(Some).map_err(body_error)
}

/// Ironic's wording for a body with keys it does not take; serde's reason for the rest.
fn body_error(e: serde_json::Error) -> Error {
    let text = e.to_string();
    if let Some(rest) = text.strip_prefix("unknown field `")
        && let Some((field, _)) = rest.split_once('`')
    {
        return Error::InvalidParameterValue(format!("Unexpected arguments: {field}"));
    }
    if let Some(rest) = text.strip_prefix("missing field `")
        && let Some((field, _)) = rest.split_once('`')
    {
        return Error::MissingParameterValue(format!("Missing mandatory parameter: {field}"));
    }
    match e.classify() {
        serde_json::error::Category::Syntax | serde_json::error::Category::Eof => {
            Error::InvalidParameterValue(format!("Malformed JSON body: {text}"))
        }
        serde_json::error::Category::Data | serde_json::error::Category::Io => {
            Error::InvalidParameterValue(format!("Invalid request body: {text}"))
        }
    }
}

/// A boolean query parameter as Ironic reads one (any case: the CLI sends `True`).
pub fn parse_bool(name: &str, value: &str) -> Result<bool, Error> {
    match value.to_ascii_lowercase().as_str() {
        "true" | "1" | "yes" | "on" => Ok(true),
        "false" | "0" | "no" | "off" => Ok(false),
        _ => Err(Error::InvalidParameterValue(format!(
            "Invalid value for {name}: '{value}' is not a boolean."
        ))),
    }
}

/// Query parameters; a bad one is a 400 in Ironic's envelope naming it.
pub struct ApiQuery<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequestParts<S> for ApiQuery<T> {
    type Rejection = Error;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        axum::extract::Query::<T>::from_request_parts(parts, state)
            .await
            .map(|q| ApiQuery(q.0))
            .map_err(|e| Error::InvalidParameterValue(format!("Invalid query: {}", e.body_text())))
    }
}

/// A path segment (a node's UUID or name); a bad one is a 400 in Ironic's envelope.
pub struct ApiPath<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned + Send> FromRequestParts<S> for ApiPath<T> {
    type Rejection = Error;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        axum::extract::Path::<T>::from_request_parts(parts, state)
            .await
            .map(|p| ApiPath(p.0))
            .map_err(|e| Error::InvalidParameterValue(format!("Invalid path: {}", e.body_text())))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.insert(*k, HeaderValue::from_static(v));
        }
        h
    }

    #[test]
    fn negotiation() {
        assert_eq!(
            ApiVersion::negotiate(&headers(&[]), ServedMax::default()).unwrap(),
            MIN_VERSION
        );
        assert_eq!(
            ApiVersion::negotiate(
                &headers(&[("openstack-api-version", "baremetal 1.11")]),
                ServedMax::default()
            )
            .unwrap(),
            ApiVersion(11)
        );
        assert_eq!(
            ApiVersion::negotiate(
                &headers(&[("x-openstack-ironic-api-version", "latest")]),
                ServedMax::default()
            )
            .unwrap(),
            MAX_VERSION
        );
        for bad in ["1.999", "2.1", "abc", "1"] {
            let e = ApiVersion::negotiate(
                &headers(&[("x-openstack-ironic-api-version", bad)]),
                ServedMax::default(),
            )
            .unwrap_err();
            assert_eq!(e.status(), axum::http::StatusCode::NOT_ACCEPTABLE, "{bad}");
        }
    }
}
