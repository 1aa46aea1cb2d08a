//! /v1/nodes/{id}/history (API 1.78): the events recorded on a node, oldest first (Ironic's
//! `NodeHistoryController`). A listing shows each entry's `uuid`, `created_at`, `severity` and
//! `event` (cut to 255 characters), `?detail=True` and a single entry also `event_type`,
//! `conductor` and `user`, from 1.113 `project`, from 1.115 `state`, `target_provision_state` and
//! `duration_seconds`; pages of `limit` after `marker` (an entry's UUID), with a `next` link.

use axum::{Json, extract::State};
use serde::Deserialize;
use serde_json::{Map, Value, json};

use super::{
    ApiState, BaseUrl,
    extract::{ApiPath, ApiQuery, ApiVersion, parse_bool},
    listing::Paging,
    nodes::{self, list::encode_query_value},
};
use crate::{
    db,
    error::{Error, Result},
    node::history::HistoryEntry,
    resource::timestamp,
};

/// The versions that added `project`, and the state fields, to an entry's detail.
const PROJECT: u32 = 113;
const STATE_FIELDS: u32 = 115;

/// The longest `event` a listing shows without `detail`; longer ones are cut to 251 characters
/// and `...` (Ironic's rule).
const SUMMARY_EVENT: usize = 255;

#[derive(Debug, Default, Deserialize)]
pub struct HistoryQuery {
    detail: Option<String>,
    marker: Option<String>,
    limit: Option<String>,
    sort_key: Option<String>,
    sort_dir: Option<String>,
}

/// GET /v1/nodes/{id}/history.
pub async fn list(
    State(state): State<ApiState>,
    version: ApiVersion,
    BaseUrl(base): BaseUrl,
    ApiPath(ident): ApiPath<String>,
    ApiQuery(q): ApiQuery<HistoryQuery>,
) -> Result<Json<Value>> {
    // The parameters are checked before the node is looked up, as Ironic's decorators do.
    let detail = match &q.detail {
        Some(d) => parse_bool("detail", d)?,
        None => false,
    };
    if let Some(m) = &q.marker
        && uuid::Uuid::try_parse(m).is_err()
    {
        return Err(Error::InvalidParameterValue(format!(
            "Expected UUID for marker: {m}"
        )));
    }
    let paging = Paging {
        limit: q.limit.clone(),
        sort_key: q.sort_key.clone(),
        sort_dir: q.sort_dir.clone(),
        ..Paging::default()
    };
    let limit = paging.limit()?;
    // Entries are ordered by when they were recorded, the only order Ironic's documents offer.
    paging.sort(|k| (k == "created_at").then_some(()), &["created_at"], ())?;
    let descending = paging.descending()?;
    let node = nodes::find(&state, &ident, version).await?;
    let marker = match &q.marker {
        Some(m) => Some(entry_of(&state, &node.uuid, node.id, m).await?),
        None => None,
    };
    let entries = db::history::list(&state.db, node.id, marker.as_ref(), limit, descending).await?;
    let items: Vec<Value> = entries
        .iter()
        .map(|e| Value::Object(render(e, &node.uuid, detail.then_some(version), &base)))
        .collect();
    let mut body = Map::new();
    body.insert("history".to_owned(), Value::Array(items));
    if entries.len() as i64 == limit
        && let Some(last) = entries.last()
    {
        let mut carried = String::new();
        for (k, v) in [
            ("detail", &q.detail),
            ("sort_key", &q.sort_key),
            ("sort_dir", &q.sort_dir),
        ] {
            if let Some(v) = v {
                carried.push_str(&format!("{k}={}&", encode_query_value(v)));
            }
        }
        body.insert(
            "next".to_owned(),
            json!(format!(
                "{base}/v1/nodes/{ident}/history?{carried}limit={limit}&marker={}",
                last.uuid
            )),
        );
    }
    Ok(Json(Value::Object(body)))
}

/// GET /v1/nodes/{id}/history/{event}: one entry, in full.
pub async fn show(
    State(state): State<ApiState>,
    version: ApiVersion,
    BaseUrl(base): BaseUrl,
    ApiPath((ident, event)): ApiPath<(String, String)>,
) -> Result<Json<Value>> {
    if uuid::Uuid::try_parse(&event).is_err() && crate::node::validate_name(&event).is_err() {
        return Err(Error::InvalidParameterValue(format!(
            "Expected UUID or name for event: {event}"
        )));
    }
    let node = nodes::find(&state, &ident, version).await?;
    let entry = entry_of(&state, &node.uuid, node.id, &event).await?;
    Ok(Json(Value::Object(render(
        &entry,
        &node.uuid,
        Some(version),
        &base,
    ))))
}

/// The entry `uuid` of the node `node_id`: one of another node is not found here either.
async fn entry_of(
    state: &ApiState,
    node_uuid: &str,
    node_id: i32,
    uuid: &str,
) -> Result<HistoryEntry> {
    match db::history::get(&state.db, uuid).await? {
        Some(entry) if entry.node_id == node_id => Ok(entry),
        _ => {
            tracing::debug!(node.uuid = %node_uuid, "no history entry {uuid} on the node");
            Err(Error::NotFound(format!(
                "Node history record {uuid} could not be found."
            )))
        }
    }
}

/// An entry as the API shows it: the summary fields or, with `detail` (the version asked for),
/// all of that version's.
fn render(
    entry: &HistoryEntry,
    node_uuid: &str,
    detail: Option<ApiVersion>,
    base: &str,
) -> Map<String, Value> {
    let mut m = Map::new();
    m.insert("uuid".into(), json!(entry.uuid));
    m.insert("created_at".into(), json!(timestamp(&entry.created_at)));
    m.insert("severity".into(), json!(entry.severity));
    if let Some(version) = detail {
        m.insert("event_type".into(), json!(entry.event_type));
        m.insert("event".into(), json!(entry.event));
        m.insert("conductor".into(), json!(entry.conductor));
        m.insert("user".into(), json!(entry.user));
        if version.at_least(PROJECT) {
            m.insert("project".into(), json!(entry.project));
        }
        if version.at_least(STATE_FIELDS) {
            m.insert("state".into(), json!(entry.state));
            m.insert(
                "target_provision_state".into(),
                json!(entry.target_provision_state),
            );
            m.insert("duration_seconds".into(), json!(entry.duration_seconds));
        }
    } else {
        m.insert("event".into(), json!(summary_event(&entry.event)));
    }
    m.insert(
        "links".into(),
        json!([{
            "href": format!("{base}/v1/nodes/{node_uuid}/history/{}", entry.uuid),
            "rel": "self",
        }]),
    );
    m
}

/// `event` as a listing without `detail` shows it: over 255 characters, its first 251 and `...`.
fn summary_event(event: &str) -> String {
    if event.chars().count() > SUMMARY_EVENT {
        let cut: String = event.chars().take(SUMMARY_EVENT - 4).collect();
        format!("{cut}...")
    } else {
        event.to_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::states::ProvisionState;

    #[test]
    fn a_long_event_is_cut_in_a_summary() {
        assert_eq!(summary_event("short"), "short");
        let long = "x".repeat(300);
        let cut = summary_event(&long);
        assert_eq!(cut.len(), 254);
        assert!(cut.ends_with("x..."));
        assert_eq!(summary_event(&"y".repeat(255)), "y".repeat(255));
    }

    #[test]
    fn detail_adds_the_type_conductor_and_user() {
        let e = HistoryEntry::error(1, "c1", "deploying", "boom", ProvisionState::Deploying);
        let summary = render(&e, "n", None, "http://h");
        let mut keys: Vec<_> = summary.keys().cloned().collect();
        keys.sort();
        assert_eq!(keys, ["created_at", "event", "links", "severity", "uuid"]);
        let detail = render(&e, "n", Some(ApiVersion(112)), "http://h");
        assert_eq!(detail.len(), 8);
        assert_eq!(render(&e, "n", Some(ApiVersion(113)), "http://h").len(), 9);
        let latest = render(&e, "n", Some(ApiVersion(115)), "http://h");
        assert_eq!(latest.len(), 12);
        assert_eq!(
            (&latest["state"], &latest["target_provision_state"]),
            (&json!("deploying"), &json!("active"))
        );
        assert_eq!(detail["event_type"], "deploying");
        assert_eq!(detail["conductor"], "c1");
        assert_eq!(
            detail["links"][0]["href"],
            format!("http://h/v1/nodes/n/history/{}", e.uuid)
        );
    }
}
