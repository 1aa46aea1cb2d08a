//! `GET /ferrum/v1/watch` (beyond Ironic): the node events (`baremetal.node.*`, as the
//! versioned notifications carry them) as server-sent events, so a client waits for a state
//! instead of polling. Outside Ironic's `/v1` tree: it changes no Ironic endpoint and cannot be
//! taken for a node name.
//!
//! Query: `node` (UUID or name; comma-separated: any of them; unset: every node) and
//! `event_type` (comma-separated; an event type, or a prefix of one ending at a dot:
//! `baremetal.node.provision_set` takes its start, end, success and error).
//!
//! The stream: first `event: watching` (the filter, resolved to UUIDs: what follows is what
//! happened after it), then one `event: <event_type>` per node event, its `data` a JSON object
//! (`event_type`, `priority`, `timestamp`, `node_uuid`, `node_name`, `provision_state`,
//! `target_provision_state`, `power_state`, `target_power_state`, `payload`); `event: lagged`
//! (`{"missed": n}`) when this client fell behind and lost the `n` oldest; `event: gap` when
//! events may have been lost on the way (the API process lost the broker, or cannot reach it
//! as the stream starts); a `: keep-alive` comment every `watch.keepalive` when idle. The
//! stream ends at the API's shutdown.

use std::{convert::Infallible, sync::Arc};

use axum::{
    extract::State,
    response::sse::{Event, KeepAlive, Sse},
};
use futures::Stream;
use serde::Deserialize;
use serde_json::json;
use tokio::sync::broadcast::{Receiver, error::RecvError};
use tokio_util::sync::CancellationToken;

use crate::{
    api::{ApiState, extract::ApiQuery},
    db::{self, nodes::NodeIdent},
    error::{Error, Result},
    notifications::watch::{Item, WatchEvent},
};

#[derive(Debug, Default, Deserialize)]
pub struct WatchQuery {
    node: Option<String>,
    event_type: Option<String>,
}

/// Which events a stream passes.
#[derive(Debug, Clone, Default, PartialEq)]
struct Filter {
    /// Node UUIDs; empty: all.
    nodes: Vec<String>,
    /// Event types or prefixes; empty: all.
    event_types: Vec<String>,
}

impl Filter {
    fn passes(&self, event: &WatchEvent) -> bool {
        (self.nodes.is_empty() || self.nodes.contains(&event.node_uuid))
            && (self.event_types.is_empty()
                || self.event_types.iter().any(|t| {
                    event.event_type == *t
                        || event
                            .event_type
                            .strip_prefix(t.as_str())
                            .is_some_and(|rest| rest.starts_with('.'))
                }))
    }
}

fn split(values: Option<&str>) -> Vec<String> {
    values
        .into_iter()
        .flat_map(|v| v.split(','))
        .map(str::trim)
        .filter(|v| !v.is_empty())
        .map(str::to_owned)
        .collect()
}

pub async fn watch(
    State(state): State<ApiState>,
    ApiQuery(query): ApiQuery<WatchQuery>,
) -> Result<Sse<impl Stream<Item = std::result::Result<Event, Infallible>>>> {
    let Some(hub) = state.watch.clone() else {
        return Err(Error::NotFound(
            "The watch is disabled: set watch.enabled (FERRUM_WATCH_ENABLED) on this API process and on every conductor.".to_owned(),
        ));
    };
    // Subscribed before the names are resolved: nothing that happens after the answer's first
    // event is missed.
    let (rx, complete) = hub.open_stream().await;
    let mut nodes = Vec::new();
    for ident in split(query.node.as_deref()) {
        let node = db::nodes::get(&state.db, NodeIdent::parse(&ident)).await?;
        nodes.push(node.uuid);
    }
    let filter = Filter {
        nodes,
        event_types: split(query.event_type.as_deref()),
    };
    // Last first: `watching`, then the gap notice of an incomplete stream.
    let mut first = Vec::new();
    if !complete {
        first.push(gap(BROKER_AWAY));
    }
    first.push(
        Event::default()
            .event("watching")
            .data(json!({"node": filter.nodes, "event_type": filter.event_types}).to_string()),
    );
    let stream = Watcher {
        rx,
        filter,
        closed: hub.closed.clone(),
        first,
    }
    .into_stream();
    Ok(Sse::new(stream).keep_alive(KeepAlive::new().interval(hub.keepalive).text("keep-alive")))
}

struct Watcher {
    rx: Receiver<Item>,
    filter: Filter,
    closed: CancellationToken,
    /// What is sent before the stream's events, last first.
    first: Vec<Event>,
}

impl Watcher {
    fn into_stream(self) -> impl Stream<Item = std::result::Result<Event, Infallible>> {
        futures::stream::unfold(self, |mut w| async move {
            let event = w.next().await?;
            Some((Ok::<Event, Infallible>(event), w))
        })
    }

    /// The next event to send; None ends the stream (shutdown).
    async fn next(&mut self) -> Option<Event> {
        if let Some(first) = self.first.pop() {
            return Some(first);
        }
        loop {
            let item = tokio::select! {
                () = self.closed.cancelled() => return None,
                item = self.rx.recv() => item,
            };
            match item {
                Ok(Item::Event(event)) if self.filter.passes(&event) => {
                    return Some(to_sse(&event));
                }
                Ok(Item::Event(_)) => {}
                Ok(Item::Gap(reason)) => return Some(gap(reason)),
                Err(RecvError::Lagged(missed)) => {
                    return Some(
                        Event::default()
                            .event("lagged")
                            .data(json!({"missed": missed}).to_string()),
                    );
                }
                Err(RecvError::Closed) => return None,
            }
        }
    }
}

/// Why a stream that starts while its API process has no broker may miss events.
const BROKER_AWAY: &str =
    "the API process cannot reach the message broker: events may be missed until it is back";

fn gap(reason: &str) -> Event {
    Event::default()
        .event("gap")
        .data(json!({"reason": reason}).to_string())
}

fn to_sse(event: &Arc<WatchEvent>) -> Event {
    Event::default().event(&event.event_type).data(&event.json)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(event_type: &str, uuid: &str) -> WatchEvent {
        WatchEvent {
            event_type: event_type.to_owned(),
            node_uuid: uuid.to_owned(),
            node_name: None,
            json: "{}".to_owned(),
        }
    }

    #[test]
    fn filters_by_node_and_by_event_type_or_its_dotted_prefix() {
        let all = Filter::default();
        assert!(all.passes(&event("baremetal.node.power_set.end", "a")));
        let f = Filter {
            nodes: vec!["a".to_owned()],
            event_types: split(Some(
                "baremetal.node.provision_set, baremetal.node.power_set.end",
            )),
        };
        assert!(f.passes(&event("baremetal.node.provision_set.start", "a")));
        assert!(f.passes(&event("baremetal.node.power_set.end", "a")));
        assert!(!f.passes(&event("baremetal.node.power_set.start", "a")));
        assert!(!f.passes(&event("baremetal.node.provision_set.end", "b")));
        let f = Filter {
            nodes: vec![],
            event_types: vec!["baremetal.node.power".to_owned()],
        };
        assert!(
            !f.passes(&event("baremetal.node.power_set.end", "a")),
            "a prefix ends at a dot"
        );
    }
}
