//! Recovery of nodes whose holder is gone: a node locked by a conductor that restarted, shut
//! down with work cut short, or stopped heartbeating is failed out of its transient state along
//! the table's `fail` edge, with a `last_error` saying why, and unlocked.
//!
//! Every write is one statement conditional on the holder, the state and the version read, so a
//! holder that is alive after all keeps its node. Deciding *when* to recover (start-up, shutdown,
//! take-over) is the callers'.

use tracing::warn;

use super::{Ctx, flows::rescue::without_rescue_password, task};
use crate::{
    db,
    node::{Json, Node, NodeChanges, history},
    states::Event,
};

/// Every node whose lock this host holds (left over from a crash, or from work cut short by
/// shutdown) is moved out of its transient state along the table's `fail` edge with `reason` as
/// its `last_error`, its pending power change dropped, and its lock released.
pub async fn recover_held_nodes(ctx: &Ctx, reason: &str) -> crate::error::Result<()> {
    for node in db::nodes::held_by(&ctx.db, &ctx.host).await? {
        recover_node(ctx, &node, &ctx.host, reason).await;
    }
    db::nodes::clear_reservations(&ctx.db, &ctx.host).await?;
    Ok(())
}

/// Moves `node`, locked by `holder` (this host, or a dead one), out of a transient state along
/// the table's `fail` edge with `reason` as its `last_error`, drops a pending power change, and
/// releases the lock: one statement, conditional on the holder, state and version read.
pub(super) async fn recover_node(ctx: &Ctx, node: &Node, holder: &str, reason: &str) {
    let state = node.provision_state;
    let mut changes = NodeChanges::default().last_error(Some(reason.to_owned()));
    if node.target_power_state.is_some() {
        changes.target_power_state = Some(None);
    }
    if !node.deploy_step.is_empty() {
        changes.deploy_step = Some(Json::default());
    }
    if state == crate::states::ProvisionState::Rescuing {
        changes.instance_info = Some(Json(without_rescue_password(node)));
    }
    let mut moved = false;
    if state.stuck_fail_event_applies() {
        match task::Move::of(node, Event::Fail, Event::Fail.name()) {
            Ok(step) => {
                changes = step.changes(false, changes.clone());
                moved = true;
            }
            Err(e) => warn!(node.uuid = %node.uuid, error = %e, "no fail edge"),
        }
    } else if node.target_power_state.is_none() {
        // Nothing was in progress: only the lock is left to release.
        changes = NodeChanges::default();
    }
    // A dead holder's node is taken over; this host's own, failed at its start or after its
    // shutdown, is a start-up failure (Ironic's `states.TAKEOVER`, `states.STARTFAIL`).
    let event_type = if holder == ctx.host {
        history::STARTFAIL
    } else {
        history::TAKEOVER
    };
    let changes = changes.release();
    let written = db::nodes::update_held_as(
        &ctx.db,
        node.id,
        holder,
        state,
        node.version,
        changes.clone(),
        event_type,
    )
    .await;
    match written {
        Ok(()) => {
            warn!(node.uuid = %node.uuid, "recovered node from {state}: {reason}");
            if moved && ctx.notifier.enabled(crate::notifications::Level::Error) {
                let mut after = node.clone();
                changes.mirror_into(&mut after);
                task::notify_move(ctx, &after, state, node.target_provision_state, Event::Fail);
            }
        }
        Err(e) => warn!(node.uuid = %node.uuid, error = %e, "could not recover node"),
    }
}
