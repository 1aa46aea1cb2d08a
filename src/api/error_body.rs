//! Renders [`Error`] as Ironic's error envelope: `{"error_message": "<JSON text>"}` whose text is
//! `{"faultcode": "Client"|"Server", "faultstring": ..., "debuginfo": null}`, keys in that order.
//! The one place an error becomes HTTP; a 500's cause is logged here and not shown.

use axum::{
    http::{HeaderValue, StatusCode, header},
    response::{IntoResponse, Response},
};
use tracing::error;

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

impl IntoResponse for Error {
    fn into_response(self) -> Response {
        let status = self.status();
        if status == StatusCode::INTERNAL_SERVER_ERROR {
            error!(error = %self, "internal error");
        } else if status == StatusCode::SERVICE_UNAVAILABLE {
            tracing::warn!(error = %self, "service unavailable");
        }
        let body = envelope(status, &self.client_message());
        let mut response = (status, body).into_response();
        response.headers_mut().insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
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
}
