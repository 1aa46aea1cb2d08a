//! The conductor's periodic work, every `heartbeat_interval`: taking over the nodes that dead
//! conductors left locked.
//!
//! The lease's own renewal, which runs on the same beat, is the lease's (`lease::keep`): it
//! fences the conductor when it cannot renew, and must outlive everything here. These loops end
//! with the shutdown signal.

use tokio_util::sync::CancellationToken;
use tracing::warn;

use super::{Ctx, recovery::recover_node};
use crate::{
    db,
    rpc::{Route, topology::Rings},
};

/// Takes over the nodes that a dead conductor left locked: every `heartbeat_interval`, the locks
/// held by hosts that are not alive, on nodes this conductor now owns on the hash ring, are
/// recovered as that host's own restart would (Ironic's `_check_orphan_nodes`, for every
/// transient state).
pub(super) async fn takeover_loop(ctx: Ctx, shutdown: CancellationToken) {
    let mut tick = tokio::time::interval(ctx.config.heartbeat_interval);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            biased;
            _ = shutdown.cancelled() => return,
            _ = tick.tick() => {}
        }
        if let Err(e) = take_over_orphans(&ctx).await {
            warn!(error = %e, "take-over check failed");
        }
    }
}

async fn take_over_orphans(ctx: &Ctx) -> crate::error::Result<()> {
    // After a database outage every lease looks run out until its owner renews it.
    if !ctx.lease.db_ok_for(ctx.config.heartbeat_timeout) || ctx.lease.is_lost() {
        return Ok(());
    }
    let leased = db::conductors::leased_hosts(&ctx.db, ctx.config.heartbeat_timeout).await?;
    let orphans = db::nodes::locked_by_others(&ctx.db, &leased).await?;
    if orphans.is_empty() {
        return Ok(());
    }
    let alive = db::conductors::list_alive(&ctx.db, ctx.config.heartbeat_timeout).await?;
    // The rings the API routes with: a node is taken over by the conductor it is routed to.
    let rings = Rings::from_conductors(&alive);
    for node in orphans {
        if rings.owner(&Route::of(&node)) != Some(ctx.host.as_str()) {
            continue;
        }
        let Some(dead) = node.reservation.clone() else {
            continue;
        };
        recover_node(
            ctx,
            &node,
            &dead,
            &format!(
                "Operation was aborted due to conductor take over: {dead} stopped heartbeating."
            ),
        )
        .await;
    }
    Ok(())
}
