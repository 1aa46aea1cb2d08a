//! /v1/conductors (API 1.49): the registered conductors and whether they are alive.

use axum::{Json, extract::State};
use serde::Deserialize;
use serde_json::{Value, json};

use super::{
    ApiState, BaseUrl,
    extract::{ApiPath, ApiQuery, parse_bool},
};
use crate::{
    db::{self, models::Conductor},
    error::{Error, Result},
    node::fields::{links, timestamp},
};

fn view(state: &ApiState, base: &str, c: &Conductor, detail: bool) -> Value {
    let heartbeat_timeout = chrono::Duration::from_std(state.router.heartbeat_timeout())
        .unwrap_or(chrono::Duration::MAX);
    let alive = c.online && c.updated_at >= crate::node::now() - heartbeat_timeout;
    let mut v = json!({
        "hostname": c.hostname,
        "conductor_group": c.conductor_group,
        "alive": alive,
        "links": links(base, "conductors", &c.hostname),
    });
    if detail {
        v["drivers"] = json!(c.drivers);
        v["created_at"] = json!(timestamp(&c.created_at));
        v["updated_at"] = json!(timestamp(&c.updated_at));
    }
    v
}

#[derive(Debug, Deserialize)]
pub struct ListQuery {
    detail: Option<String>,
    limit: Option<i64>,
    marker: Option<String>,
}

pub async fn list(
    State(state): State<ApiState>,
    BaseUrl(base): BaseUrl,
    ApiQuery(q): ApiQuery<ListQuery>,
) -> Result<Json<Value>> {
    let limit = match q.limit {
        Some(l) if l <= 0 => {
            return Err(Error::InvalidParameterValue(format!(
                "Value must be positive: limit={l}"
            )));
        }
        Some(l) => l.min(1000),
        None => 1000,
    };
    let detail = match &q.detail {
        Some(d) => parse_bool("detail", d)?,
        None => false,
    };
    let conductors = db::conductors::list(&state.db, limit, q.marker.as_deref()).await?;
    let items: Vec<Value> = conductors
        .iter()
        .map(|c| view(&state, &base, c, detail))
        .collect();
    let mut body = json!({ "conductors": items });
    if conductors.len() as i64 == limit
        && let Some(last) = conductors.last()
    {
        body["next"] = json!(format!(
            "{base}/v1/conductors?limit={limit}&marker={}{}",
            last.hostname,
            if detail { "&detail=True" } else { "" }
        ));
    }
    Ok(Json(body))
}

pub async fn show(
    State(state): State<ApiState>,
    BaseUrl(base): BaseUrl,
    ApiPath(host): ApiPath<String>,
) -> Result<Json<Value>> {
    let conductor = db::conductors::get(&state.db, &host).await?;
    Ok(Json(view(&state, &base, &conductor, true)))
}
