//! Operations endpoints beside Ironic's API (none under `/v1`, so no Ironic endpoint changes):
//! `GET /metrics`, the process's Prometheus metrics (`crate::metrics`), and `GET /healthcheck`,
//! whether this API can serve: its database answers, its message broker connection is up
//! (multi-host), and at least one conductor is alive. `/healthcheck` is the path Ironic's API
//! answers health checks on (oslo.middleware's, `[healthcheck]enabled`), so a load balancer's
//! probe written for Ironic works unchanged; Ferrum's answer is JSON naming each check.

use std::time::Duration;

use axum::{
    Json, Router,
    extract::State,
    http::{StatusCode, header},
    response::{IntoResponse, Response},
    routing::get,
};
use serde_json::{Map, Value, json};

use super::ApiState;
use crate::{
    db::{self, Db},
    error::Error,
};

/// How long each check may take before it counts as down: a probe must get an answer even
/// when the database hangs.
const CHECK_TIMEOUT: Duration = Duration::from_secs(5);

/// `GET /metrics`: the Prometheus text format.
pub async fn metrics(State(state): State<ApiState>) -> Response {
    render(&state.db)
}

fn render(db: &Db) -> Response {
    (
        [(header::CONTENT_TYPE, crate::metrics::CONTENT_TYPE)],
        crate::metrics::render(db.pool_status()),
    )
        .into_response()
}

/// What a conductor process serves on `conductor.metrics_bind`: `GET /metrics` alone (its
/// process has no API; in all-in-one the API's `/metrics` covers both halves).
pub fn metrics_router(db: Db) -> Router {
    Router::new()
        .route(
            "/metrics",
            get(|State(db): State<Db>| async move { render(&db) }),
        )
        .with_state(db)
}

/// `GET /healthcheck`: 200 and `{"status": "ok", "checks": {...}}` when every check passes,
/// else 503 and `{"status": "down", "down": [<the checks that failed>], "checks": {...}}`.
/// The checks: `database` (a `SELECT 1`), `broker` (the AMQP connection; absent with the
/// in-process transport) and `conductors` (the conductors whose heartbeat is recent, from the
/// conductors table).
pub async fn health(State(state): State<ApiState>) -> Response {
    // In this order in `down`.
    let mut checks: Vec<(&str, Value)> = Vec::new();
    let database = within(state.db.ping()).await;
    let database_ok = database.is_ok();
    checks.push(("database", check(database.map(|()| json!({})))));
    if let Some(connected) = state.rpc.connected() {
        let broker = if connected {
            Ok(json!({}))
        } else {
            Err("the connection to the message broker is down".to_owned())
        };
        checks.push(("broker", check(broker)));
    }
    let conductors = if database_ok {
        within(db::conductors::list_alive(
            &state.db,
            state.router.heartbeat_timeout(),
        ))
        .await
        .and_then(|alive| {
            if alive.is_empty() {
                Err("no conductor is alive".to_owned())
            } else {
                let hosts: Vec<&str> = alive.iter().map(|c| c.hostname.as_str()).collect();
                Ok(json!({ "alive": hosts }))
            }
        })
    } else {
        Err("unknown: the database is unavailable".to_owned())
    };
    checks.push(("conductors", check(conductors)));
    let down: Vec<&str> = checks
        .iter()
        .filter(|(_, c)| c["ok"] == false)
        .map(|(name, _)| *name)
        .collect();
    let checks: Map<String, Value> = checks
        .into_iter()
        .map(|(name, c)| (name.to_owned(), c))
        .collect();
    if down.is_empty() {
        Json(json!({ "status": "ok", "checks": checks })).into_response()
    } else {
        tracing::warn!(?down, "health check: {} down", down.join(", "));
        let body = json!({ "status": "down", "down": down, "checks": checks });
        (StatusCode::SERVICE_UNAVAILABLE, Json(body)).into_response()
    }
}

/// A check's outcome as the body shows it: `{"ok": true, ...details}` or `{"ok": false,
/// "error": "..."}`.
fn check(outcome: Result<Value, String>) -> Value {
    match outcome {
        Ok(mut details) => {
            details["ok"] = true.into();
            details
        }
        Err(error) => json!({ "ok": false, "error": error }),
    }
}

/// Runs one check within [`CHECK_TIMEOUT`]; its error as the client may read it (the cause,
/// which may name hosts, is logged).
async fn within<T>(check: impl Future<Output = Result<T, Error>>) -> Result<T, String> {
    match tokio::time::timeout(CHECK_TIMEOUT, check).await {
        Ok(Ok(value)) => Ok(value),
        Ok(Err(e)) => {
            tracing::warn!(error = %e, "health check failed");
            Err(e.client_message())
        }
        Err(_) => Err(format!("no answer within {} s", CHECK_TIMEOUT.as_secs())),
    }
}
