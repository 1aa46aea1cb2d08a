//! /v1/shards (API 1.82): the shards nodes are in and how many nodes each has, read from the
//! nodes (Ironic's `ShardController`: no paging, no single shard to show).

use axum::{Json, extract::State};
use serde_json::{Value, json};

use super::ApiState;
use crate::{db, error::Result};

pub async fn list(State(state): State<ApiState>) -> Result<Json<Value>> {
    let shards: Vec<Value> = db::nodes::shard_counts(&state.db)
        .await?
        .into_iter()
        .map(|(name, count)| json!({ "name": name, "count": count }))
        .collect();
    Ok(Json(json!({ "shards": shards })))
}
