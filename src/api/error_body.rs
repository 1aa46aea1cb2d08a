//! Renders [`Error`] as Ironic's error envelope: `{"error_message": "<JSON text>"}` whose text is
//! `{"faultcode": "Client"|"Server", "faultstring": ..., "debuginfo": null}`, keys in that order.
//! The one place an error becomes HTTP. The error rides in the response's extensions
//! ([`ErrorCause`]), and the access log (`access_log.rs`) logs it, once: a 5xx's cause is not
//! shown to the client, only logged.

use axum::{
    http::{HeaderValue, StatusCode, header},
    response::{IntoResponse, Response},
};

use crate::error::Error;

pub fn envelope(status: StatusCode, faultstring: &str) -> String {
    let faultcode = if status.is_client_error() {
        "Client"
    } else {
        "Server"
    };
    let inner = format!(
        "{{\"faultcode\": \"{faultcode}\", \"faultstring\": {}, \"debuginfo\": null}}",
        serde_json::Value::String(faultstring.to_owned())
    );
    serde_json::json!({ "error_message": inner }).to_string()
}

/// The body Ironic's web framework (pecan) gives an HTTP error raised outside the handlers, such
/// as a bad microversion: `{"error_message": "<JSON text>"}` whose text is
/// `{"code": <status>, "title": "<reason phrase>", "description": "<detail>"}`, keys in that
/// order. python-ironicclient shows `description` when there is no `faultstring`.
pub fn framework_envelope(status: StatusCode, description: &str) -> String {
    let inner = format!(
        "{{\"code\": {}, \"title\": {}, \"description\": {}}}",
        status.as_u16(),
        serde_json::Value::String(status.canonical_reason().unwrap_or_default().to_owned()),
        serde_json::Value::String(description.to_owned())
    );
    serde_json::json!({ "error_message": inner }).to_string()
}

/// The body of a refusal of `http_basic` authentication. Ironic's basic-auth middleware
/// (`auth_basic.py`) runs outside its web framework and answers `{"error": {"message": ...,
/// "code": <status>}}` only, which python-ironicclient and openstacksdk cannot read (they look
/// for `error_message`), so the CLI says just "Unauthorized (HTTP 401)". Ferrum sends both:
/// Ironic's keys as they are, and the usual envelope ([`envelope`]) with the same message, so
/// that a client written for either reads it and the CLI shows why it was refused.
pub fn auth_envelope(status: StatusCode, message: &str) -> String {
    let mut body = serde_json::json!({ "error": { "message": message, "code": status.as_u16() } });
    if let (Some(object), Ok(serde_json::Value::Object(usual))) = (
        body.as_object_mut(),
        serde_json::from_str::<serde_json::Value>(&envelope(status, message)),
    ) {
        object.extend(usual);
    }
    body.to_string()
}

/// The error a response was rendered from, for the access log. Extensions never reach the
/// client.
#[derive(Debug, Clone)]
pub struct ErrorCause(pub Error);

impl IntoResponse for Error {
    fn into_response(self) -> Response {
        let status = self.status();
        let body = match &self {
            Error::VersionNotAcceptable(detail) => framework_envelope(status, detail),
            Error::Unauthorized(message) | Error::BadAuthorization(message) => {
                auth_envelope(status, message)
            }
            _ => envelope(status, &self.client_message()),
        };
        let mut response = (status, body).into_response();
        if let Error::Unauthorized(_) = self {
            // Ironic's exception.Unauthorized: the client is asked for Basic credentials.
            response.headers_mut().insert(
                header::WWW_AUTHENTICATE,
                HeaderValue::from_static("Basic realm=\"Baremetal API\""),
            );
        }
        response.headers_mut().insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
        response.extensions_mut().insert(ErrorCause(self));
        response
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn envelope_matches_ironic() {
        let body = envelope(StatusCode::CONFLICT, "Node x is \"locked\"");
        let outer: serde_json::Value = serde_json::from_str(&body).unwrap();
        let text = outer["error_message"].as_str().unwrap();
        assert_eq!(
            text,
            r#"{"faultcode": "Client", "faultstring": "Node x is \"locked\"", "debuginfo": null}"#
        );
        let inner: serde_json::Value = serde_json::from_str(text).unwrap();
        assert_eq!(inner["faultstring"], "Node x is \"locked\"");
        assert!(
            envelope(StatusCode::SERVICE_UNAVAILABLE, "x").contains(r#"\"faultcode\": \"Server\""#)
        );
    }

    #[test]
    fn auth_envelope_has_ironics_keys_and_the_usual_envelope() {
        let body = auth_envelope(StatusCode::UNAUTHORIZED, "Authorization required");
        let outer: serde_json::Value = serde_json::from_str(&body).unwrap();
        assert_eq!(
            outer["error"],
            serde_json::json!({"message": "Authorization required", "code": 401})
        );
        assert_eq!(
            outer["error_message"],
            r#"{"faultcode": "Client", "faultstring": "Authorization required", "debuginfo": null}"#
        );
        assert_eq!(outer.as_object().unwrap().len(), 2);
    }

    #[test]
    fn framework_envelope_matches_pecan() {
        let body = framework_envelope(StatusCode::NOT_ACCEPTABLE, "Version 1.99 was \"requested\"");
        let outer: serde_json::Value = serde_json::from_str(&body).unwrap();
        assert_eq!(
            outer["error_message"],
            r#"{"code": 406, "title": "Not Acceptable", "description": "Version 1.99 was \"requested\""}"#
        );
    }
}
