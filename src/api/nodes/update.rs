//! PATCH /v1/nodes/{id}: the API checks the patch's paths and their versions; the conductor
//! applies it to the node it reads under the lock.

use axum::{Json, extract::State};
use serde::Deserialize;
use serde_json::Value;

use super::{call, check_written_field, detail, find, require_version};
use crate::{
    api::{
        ApiState, BaseUrl,
        extract::{ApiJson, ApiPath, ApiQuery, ApiVersion, JsonSuffix, RequestId, parse_bool},
    },
    error::{Error, Result},
    notifications::{Status, node as payload},
    patch::{self, PatchOp},
    rpc::{Route, RpcRequest},
    states::ProvisionState,
};

#[derive(Debug, Default, Deserialize)]
pub struct PatchQuery {
    reset_interfaces: Option<String>,
}

#[expect(
    clippy::too_many_arguments,
    reason = "an axum handler: one extractor per part of the request"
)]
pub async fn update(
    State(state): State<ApiState>,
    version: ApiVersion,
    request_id: RequestId,
    BaseUrl(base): BaseUrl,
    suffix: JsonSuffix,
    ApiPath(ident): ApiPath<String>,
    ApiQuery(query): ApiQuery<PatchQuery>,
    ApiJson(mut ops): ApiJson<Vec<PatchOp>>,
) -> Result<Json<Value>> {
    patch::validate::<crate::node::Node>(&ops)?;
    let reset_interfaces = match &query.reset_interfaces {
        Some(r) => {
            require_version(version, 45, "The reset_interfaces parameter")?;
            parse_bool("reset_interfaces", r)?
        }
        None => false,
    };
    if reset_interfaces && !ops.iter().any(|op| op.path == "/driver") {
        return Err(Error::InvalidParameterValue(
            "The reset_interfaces parameter can only be used when changing the node's driver."
                .to_owned(),
        ));
    }
    for op in &ops {
        // patch::validate has checked that the root is a patchable field.
        let root = op
            .path
            .trim_start_matches('/')
            .split('/')
            .next()
            .unwrap_or("");
        check_written_field(version, root, |w| w.patch)?;
    }
    let node = suffix
        .find(&ident, |i| {
            let state = &state;
            async move { find(state, &i, version).await }
        })
        .await?;
    if version.at_least(39) && node.provision_state == ProvisionState::Inspecting {
        return Err(Error::InvalidState(format!(
            "Cannot update node \"{}\" while it is in state \"inspecting\".",
            node.uuid
        )));
    }
    for op in ops.iter_mut().filter(|op| op.is_on_field("parent_node")) {
        if let Some(value) = &op.value {
            let owner = node.owner.as_deref();
            op.value = Some(
                super::children::resolve_parent(&state, version, value, owner, Some(&node.uuid))
                    .await?,
            );
        }
    }
    let on = |field: &str| ops.iter().any(|op| op.is_on_field(field));
    let moves = on("driver") || on("conductor_group");
    // What the API itself must look up is checked here, on the patch applied to the node as
    // read; the conductor applies it again to the node as it is then. A PATCH touching none of
    // these fields does not pay for it.
    if moves || on("chassis_uuid") {
        let changes = patch::apply(&node, &ops)?;
        if let Some(chassis) = &changes.chassis_uuid {
            if chassis.is_none() && !version.at_least(25) {
                return Err(Error::NotAcceptable(
                    "Removing chassis_uuid needs API version 1.25 or later.".to_owned(),
                ));
            }
            if let Some(chassis) = chassis {
                super::check_chassis(&state, chassis).await?;
            }
        }
        if moves {
            // Like Ironic, refuse a driver or group no conductor serves (400 NoValidHost) rather
            // than strand the node where no request can reach it.
            let driver = changes.driver.as_deref().unwrap_or(&node.driver);
            let group = changes
                .conductor_group
                .as_deref()
                .unwrap_or(&node.conductor_group);
            let route = Route {
                uuid: &node.uuid,
                driver,
                group,
            };
            state.router.host_for(&route).await?;
        }
    }
    // Ironic's API announces the node as the patch makes it (`update.start`), and then the
    // failure (`update.error`, the same node) or the node as updated (`update.end`), in
    // `NodeCRUDPayload`s. The patched node is made only when something is sent.
    let notifier = &state.notifier;
    // Error is the highest level: enabled whenever start or error would be sent.
    let patched = notifier.enabled(Status::Error.level()).then(|| {
        let mut patched = node.clone();
        if let Ok(changes) = patch::apply(&node, &ops) {
            changes.set_into(&mut patched);
        }
        patched
    });
    if let Some(patched) = &patched {
        notifier.emit("node", "update", Status::Start, || payload::crud(patched));
    }
    let updated = call(
        &state,
        &request_id,
        RpcRequest::UpdateNode {
            node: Box::new(node),
            patch: ops,
            reset_interfaces,
        },
    )
    .await
    .and_then(|reply| reply.into_node());
    let node = match updated {
        Ok(node) => node,
        Err(err) => {
            if let Some(patched) = &patched {
                notifier.emit("node", "update", Status::Error, || payload::crud(patched));
            }
            return Err(err);
        }
    };
    notifier.emit("node", "update", Status::End, || payload::crud(&node));
    detail(&state, &node, version, &base).await.map(Json)
}
