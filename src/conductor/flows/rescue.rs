//! Rescue and unrescue: the rescue ramdisk booted with the operator's password (`Rescue`),
//! then the instance booted again (`Unrescue`).

use serde_json::Value;
use tokio::time::Instant;

use super::{refuse_in_maintenance, start};
use crate::{
    conductor::{
        Ctx,
        task::Task,
        worker::{Failure, Flow},
    },
    drivers::{Driver, require_interface},
    error::Result,
    node::{InterfaceKind, Json, Node, NodeChanges},
    states::Event,
};

/// `rescue`: boot the rescue ramdisk with `rescue_password` for the operator's login. The
/// password is kept in `instance_info` (masked in every response) until unrescue.
pub async fn do_node_rescue(
    ctx: &Ctx,
    node: Node,
    rescue_password: String,
    deadline: Option<Instant>,
) -> Result<()> {
    start(ctx, node, deadline, "rescue", Event::Rescue, |node, _| {
        refuse_in_maintenance(node, "rescuing")?;
        require_interface(node, InterfaceKind::Rescue)?;
        let mut instance_info = node.instance_info.0.clone();
        instance_info.insert(
            "rescue_password".to_owned(),
            Value::String(rescue_password.clone()),
        );
        Ok(NodeChanges {
            instance_info: Some(Json(instance_info)),
            ..NodeChanges::default()
        })
    })
    .await
}

/// `unrescue`: boot the instance again.
pub async fn do_node_unrescue(ctx: &Ctx, node: Node, deadline: Option<Instant>) -> Result<()> {
    start(
        ctx,
        node,
        deadline,
        "unrescue",
        Event::Unrescue,
        |node, _| {
            refuse_in_maintenance(node, "unrescuing")?;
            require_interface(node, InterfaceKind::Rescue)?;
            Ok(NodeChanges::default())
        },
    )
    .await
}

/// Booting the rescue ramdisk, run by a worker ([`rescue`]).
pub(super) struct Rescue;

#[async_trait::async_trait]
impl Flow for Rescue {
    fn name(&self) -> &'static str {
        "Rescue"
    }

    async fn run(&self, task: &mut Task, _: &Driver) -> std::result::Result<(), String> {
        rescue(task).await
    }

    /// Nobody may log into a rescue ramdisk that did not come up.
    fn failure(&self, node: &Node, _: &str) -> Failure {
        Failure {
            extra: NodeChanges {
                instance_info: Some(Json(without_rescue_password(node))),
                ..NodeChanges::default()
            },
            fail_edge: true,
        }
    }
}

/// Booting the instance again, run by a worker ([`unrescue`]).
pub(super) struct Unrescue;

#[async_trait::async_trait]
impl Flow for Unrescue {
    fn name(&self) -> &'static str {
        "Unrescue"
    }

    async fn run(&self, task: &mut Task, _: &Driver) -> std::result::Result<(), String> {
        unrescue(task).await
    }

    fn failure(&self, _: &Node, _: &str) -> Failure {
        Failure::fail_edge()
    }
}

/// Rescue on the fake rescue interface: the "ramdisk" is up at once.
async fn rescue(task: &mut Task) -> std::result::Result<(), String> {
    task.process_event(Event::Done, false, NodeChanges::default().release())
        .await
        .map_err(|e| format!("Failed to rescue: {e}"))
}

/// Unrescue on the fake rescue interface: back to the instance, forgetting the rescue password.
async fn unrescue(task: &mut Task) -> std::result::Result<(), String> {
    let changes = NodeChanges {
        instance_info: Some(Json(without_rescue_password(&task.node))),
        ..NodeChanges::default()
    };
    task.process_event(Event::Done, false, changes.release())
        .await
        .map_err(|e| format!("Failed to unrescue: {e}"))
}

pub(crate) fn without_rescue_password(node: &Node) -> serde_json::Map<String, Value> {
    let mut instance_info = node.instance_info.0.clone();
    instance_info.remove("rescue_password");
    instance_info.remove("hashed_rescue_password");
    instance_info
}
