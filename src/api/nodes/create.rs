//! POST /v1/nodes: the API checks which fields the request may give at its version and routes
//! it by driver and group; the conductor reads the values onto a new node.

use axum::{
    Json,
    extract::State,
    http::{HeaderValue, StatusCode, header},
    response::{IntoResponse, Response},
};
use serde_json::Value;

use super::{call, check_written_field, detail};
use crate::{
    api::{
        ApiState, BaseUrl,
        extract::{ApiJson, ApiVersion, RequestId},
    },
    error::{Error, Result},
    node::{JsonObject, Node, normalize_conductor_group, normalize_uuid},
    notifications::{Status, node as payload},
    patch,
    rpc::{NodeCreate, RpcRequest},
    states::ProvisionState,
};

pub async fn create(
    State(state): State<ApiState>,
    version: ApiVersion,
    request_id: RequestId,
    BaseUrl(base): BaseUrl,
    ApiJson(mut body): ApiJson<JsonObject>,
) -> Result<Response> {
    for name in body.keys() {
        check_written_field(version, name, |w| w.create)?;
    }
    let text = |name: &str, value: &Value| match value {
        Value::String(s) => Ok(s.clone()),
        other => Err(crate::resource::wrong(name, "a string", other)),
    };
    let driver = match body.get("driver") {
        Some(d) => text("driver", d)?,
        None => {
            return Err(Error::MissingParameterValue(
                "Missing mandatory parameter: driver".to_owned(),
            ));
        }
    };
    let uuid = match body.remove("uuid") {
        Some(u) => normalize_uuid("uuid", &text("uuid", &u)?)?,
        None => uuid::Uuid::new_v4().to_string(),
    };
    let conductor_group = match body.get("conductor_group") {
        Some(g) => normalize_conductor_group(&text("conductor_group", g)?)?,
        None => String::new(),
    };
    if let Some(Value::String(chassis)) = body.get("chassis_uuid") {
        super::check_chassis(&state, &normalize_uuid("chassis_uuid", chassis)?).await?;
    }
    if let Some(parent) = body.get("parent_node") {
        let owner = body.get("owner").and_then(Value::as_str);
        let parent = super::children::resolve_parent(&state, version, parent, owner, None).await?;
        body.insert("parent_node".to_owned(), parent);
    }
    let initial_state = if version.at_least(11) {
        ProvisionState::Enroll
    } else {
        ProvisionState::Available
    };
    // Ironic's API announces the node it is about to create (`create.start`), and the failure
    // (`create.error`) or the node created (`create.end`), in `NodeCRUDPayload`s. Before the
    // conductor made it, the node is what the request gives: built only when it is sent.
    let proposed = |create: &NodeCreate| {
        let mut node = Node {
            uuid: create.uuid.clone(),
            driver: create.driver.clone(),
            conductor_group: create.conductor_group.clone(),
            provision_state: create.initial_state,
            ..Node::default()
        };
        if let Ok(changes) = patch::changes_for_create(&node, create.fields.clone()) {
            changes.set_into(&mut node);
        }
        payload::crud_unsaved(&node)
    };
    let create = NodeCreate {
        uuid,
        driver,
        conductor_group,
        initial_state,
        fields: body,
    };
    let notifier = &state.notifier;
    notifier.emit("node", "create", Status::Start, || proposed(&create));
    let unsent = notifier
        .enabled(Status::Error.level())
        .then(|| create.clone());
    let created = call(
        &state,
        &request_id,
        RpcRequest::CreateNode {
            node: Box::new(create),
        },
    )
    .await
    .and_then(|reply| reply.into_node());
    let node = match created {
        Ok(node) => node,
        Err(err) => {
            if let Some(create) = &unsent {
                notifier.emit("node", "create", Status::Error, || proposed(create));
            }
            return Err(err);
        }
    };
    notifier.emit("node", "create", Status::End, || payload::crud(&node));
    let location = format!("{base}/v1/nodes/{}", node.uuid);
    let mut response = (
        StatusCode::CREATED,
        Json(detail(&state, &node, version, &base).await?),
    )
        .into_response();
    if let Ok(v) = HeaderValue::from_str(&location) {
        response.headers_mut().insert(header::LOCATION, v);
    }
    Ok(response)
}
