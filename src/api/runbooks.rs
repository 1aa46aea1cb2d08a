//! /v1/runbooks (API 1.92): the API reads and writes runbooks itself, as Ironic's does (no node
//! lock is involved), through the handlers of `collection.rs` (`named.rs`). A runbook is named by UUID or by name;
//! a clean or a service names one with `runbook` (`nodes/provision.rs`). Its traits (1.112) are a
//! sub-resource shaped as a node's, `/v1/runbooks/{id}/traits`, written here.

use axum::{Json, extract::State, http::StatusCode, response::Response};
use serde_json::{Value, json};

use super::{
    ApiState, BaseUrl,
    extract::{ApiPath, OptionalJson},
    named::Named,
    traits::{TraitsBody, added, check_added},
};
use crate::{
    db,
    error::{Error, Result},
    node::JsonObject,
    patch::PatchOp,
    runbook::{self, Runbook, RunbookChanges},
};

impl Named for Runbook {
    const SINCE: u32 = runbook::SINCE;
    const PLURAL: &'static str = "runbooks";
    const SUMMARY: &'static [&'static str] = runbook::SUMMARY;

    fn from_create(body: JsonObject, minor: u32) -> Result<Self> {
        runbook::from_create(body, minor)
    }

    fn check_patch(&self, ops: &[PatchOp], changes: &mut RunbookChanges) -> Result<()> {
        runbook::check_patch(self, ops, changes)
    }
}

super::named::named_collection!(Runbook);

/// GET /v1/runbooks/{id}/traits.
pub async fn list_traits(
    State(state): State<ApiState>,
    ApiPath(ident): ApiPath<String>,
) -> Result<Json<Value>> {
    let found = db::runbooks::get(&state.db, &ident).await?;
    Ok(Json(json!({ "traits": found.traits.0 })))
}

const PUT_USAGE: &str = "A single runbook trait may be added via PUT /v1/runbooks/<runbook identifier>/traits/<trait> with no body, or all runbook traits may be replaced via PUT /v1/runbooks/<runbook identifier>/traits with the list of traits specified in the request body.";

/// PUT /v1/runbooks/{id}/traits `{"traits": [...]}`: replaces all of them. 204.
pub async fn replace_traits(
    State(state): State<ApiState>,
    ApiPath(ident): ApiPath<String>,
    OptionalJson(body): OptionalJson<TraitsBody>,
) -> Result<StatusCode> {
    let Some(body) = body else {
        return Err(Error::InvalidParameterValue(PUT_USAGE.to_owned()));
    };
    let traits = runbook::checked_traits(body.traits)?;
    db::runbooks::set_traits(&state.db, &ident, traits).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// PUT /v1/runbooks/{id}/traits/{trait}, no body: adds one (a no-op when it is there). 204 with
/// its Location.
pub async fn add_trait(
    State(state): State<ApiState>,
    BaseUrl(base): BaseUrl,
    ApiPath((ident, name)): ApiPath<(String, String)>,
    OptionalJson(body): OptionalJson<Value>,
) -> Result<Response> {
    check_added(body, &name)?;
    db::runbooks::edit_traits(&state.db, &ident, |traits| {
        if !traits.contains(&name) {
            traits.push(name.clone());
        }
    })
    .await?;
    Ok(added(&format!("{base}/v1/runbooks/{ident}/traits/{name}")))
}

/// DELETE /v1/runbooks/{id}/traits: removes all of them. 204.
pub async fn remove_all_traits(
    State(state): State<ApiState>,
    ApiPath(ident): ApiPath<String>,
) -> Result<StatusCode> {
    db::runbooks::set_traits(&state.db, &ident, Vec::new()).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// DELETE /v1/runbooks/{id}/traits/{trait}: 204, also when the runbook lacks it (Ironic treats
/// that as a no-op, unlike a node's).
pub async fn remove_trait(
    State(state): State<ApiState>,
    ApiPath((ident, name)): ApiPath<(String, String)>,
) -> Result<StatusCode> {
    db::runbooks::edit_traits(&state.db, &ident, |traits| traits.retain(|t| *t != name)).await?;
    Ok(StatusCode::NO_CONTENT)
}
