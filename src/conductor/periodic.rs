//! The conductor's periodic work: every `heartbeat_interval`, taking over the nodes that dead
//! conductors left locked and the allocations they left `allocating`; every
//! `check_provision_state_interval`, failing the deploys that waited for their agent longer than
//! `deploy_callback_timeout`, and opening or closing unknown MACs' DHCP as nodes are inspected
//! or not; every two minutes, turning off the graphical consoles whose session
//! expired.
//!
//! The lease's own renewal, which runs on the same beat, is the lease's (`lease::keep`): it
//! fences the conductor when it cannot renew, and must outlive everything here. These loops end
//! with the shutdown signal.

use std::time::Duration;

use tokio_util::sync::CancellationToken;
use tracing::warn;

use super::{
    Ctx, Owner,
    flows::{deploy::fail_timed_out_deploy, inspect::sync_unknown_hosts},
    recovery::recover_node,
};
use crate::{db, states::ProvisionState};

/// How many timed-out nodes one check fails at most; the next check takes the rest.
const TIMEOUTS_PER_CHECK: i64 = 100;

/// Takes over the nodes that a dead conductor left locked: every `heartbeat_interval`, the locks
/// held by hosts that are not alive, on nodes this conductor now owns on the hash ring, are
/// recovered as that host's own restart would (Ironic's `_check_orphan_nodes`, for every
/// transient state).
pub(super) async fn takeover_loop(ctx: Ctx, shutdown: CancellationToken) {
    let period = ctx.config.heartbeat_interval;
    every(ctx, shutdown, period, "take-over check", take_over_orphans).await;
}

/// Runs `round` every `period` (the first at once) until `shutdown`; a failed round is logged
/// as `what` and the next one runs all the same.
async fn every(
    ctx: Ctx,
    shutdown: CancellationToken,
    period: Duration,
    what: &str,
    round: impl AsyncFn(&Ctx) -> crate::error::Result<()>,
) {
    let mut tick = tokio::time::interval(period);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            biased;
            _ = shutdown.cancelled() => return,
            _ = tick.tick() => {}
        }
        if let Err(e) = round(&ctx).await {
            warn!(error = %e, "{what} failed");
        }
    }
}

async fn take_over_orphans(ctx: &Ctx) -> crate::error::Result<()> {
    // After a database outage every lease looks run out until its owner renews it.
    if !ctx.lease.db_ok_for(ctx.config.heartbeat_timeout) || ctx.lease.is_lost() {
        return Ok(());
    }
    let leased = db::conductors::leased_hosts(&ctx.db, ctx.config.heartbeat_timeout).await?;
    if let Err(e) = super::allocations::take_over_orphans(ctx, &leased).await {
        warn!(error = %e, "allocation take-over check failed");
    }
    let orphans = db::nodes::locked_by_others(&ctx.db, &leased).await?;
    if orphans.is_empty() {
        return Ok(());
    }
    // A node is taken over by the conductor the API routes it to.
    let owner = Owner::now(ctx).await?;
    for node in orphans {
        if !owner.owns(&node) {
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

/// Fails, every `check_provision_state_interval`, the deploys (and, past `inspect_wait_timeout`,
/// the inspections in `inspect wait`; past `clean_callback_timeout`, the cleanings in `clean
/// wait`) of nodes this conductor owns on
/// the hash ring that have waited in `wait call-back` for longer than `deploy_callback_timeout`
/// (Ironic's `_check_deploy_timeouts`): the agent never called back, or never finished a
/// command. Locked nodes and nodes in maintenance are left, as Ironic leaves them.
pub(super) async fn callback_timeout_loop(ctx: Ctx, shutdown: CancellationToken) {
    let period = ctx.config.check_provision_state_interval;
    every(
        ctx,
        shutdown,
        period,
        "callback timeout check",
        fail_timed_out_waits,
    )
    .await;
}

/// Allows or ignores unknown MACs in dnsmasq, every `check_provision_state_interval`, as some
/// node is being inspected or none is (`flows::inspect::sync_unknown_hosts`); the first round
/// at once, so a conductor that starts puts right what a stopped one left.
pub(super) async fn unknown_hosts_loop(ctx: Ctx, shutdown: CancellationToken) {
    let period = ctx.config.check_provision_state_interval;
    every(
        ctx,
        shutdown,
        period,
        "unknown MACs' DHCP sync",
        sync_unknown_hosts,
    )
    .await;
}

/// Turns off, every `node::console::EXPIRE_INTERVAL`, the graphical consoles of nodes this
/// conductor owns on the hash ring whose session outlived its token (Ironic's
/// `_expire_fake_console_sessions`, every `[vnc]expire_console_session_interval`).
pub(super) async fn console_expiry_loop(ctx: Ctx, shutdown: CancellationToken) {
    let period = crate::node::console::EXPIRE_INTERVAL;
    every(
        ctx,
        shutdown,
        period,
        "console session expiry check",
        expire_console_sessions,
    )
    .await;
}

/// One round of [`console_expiry_loop`]; locked nodes are left to the next.
pub async fn expire_console_sessions(ctx: &Ctx) -> crate::error::Result<()> {
    if !ctx.lease.is_serving() {
        return Ok(());
    }
    let now = crate::node::now();
    let nodes = db::nodes::unlocked_with_console_on(
        &ctx.db,
        crate::node::console::FAKE_GRAPHICAL,
        TIMEOUTS_PER_CHECK,
    )
    .await?;
    let expired: Vec<_> = nodes
        .into_iter()
        .filter(|n| crate::node::console::expired(n, now))
        .collect();
    if expired.is_empty() {
        return Ok(());
    }
    let owner = Owner::now(ctx).await?;
    for node in expired {
        if !owner.owns(&node) {
            continue;
        }
        let uuid = node.uuid.clone();
        if let Err(e) = super::node_ops::expire_console(ctx, node).await {
            tracing::debug!(node.uuid = %uuid, error = %e, "The console of node {uuid} was not turned off: {e}");
        }
    }
    Ok(())
}

async fn fail_timed_out_waits(ctx: &Ctx) -> crate::error::Result<()> {
    if !ctx.lease.is_serving() {
        return Ok(());
    }
    let waits = [
        (
            ProvisionState::DeployWait,
            ctx.config.deploy_callback_timeout,
        ),
        (ProvisionState::InspectWait, ctx.config.inspect_wait_timeout),
        (ProvisionState::CleanWait, ctx.config.clean_callback_timeout),
    ];
    for (state, timeout) in waits {
        let timeout = chrono::Duration::from_std(timeout).unwrap_or(chrono::Duration::MAX);
        let before = crate::node::now()
            .checked_sub_signed(timeout)
            .unwrap_or(chrono::NaiveDateTime::MIN);
        let nodes =
            db::nodes::unlocked_in_state_since(&ctx.db, state, before, TIMEOUTS_PER_CHECK).await?;
        if nodes.is_empty() {
            continue;
        }
        let owner = Owner::now(ctx).await?;
        for node in nodes {
            if !owner.owns(&node) {
                continue;
            }
            let uuid = node.uuid.clone();
            let failed = match state {
                ProvisionState::InspectWait => {
                    super::flows::inspect::fail_timed_out_inspection(ctx, node).await
                }
                ProvisionState::CleanWait => {
                    super::flows::clean::fail_timed_out_cleaning(ctx, node).await
                }
                _ => fail_timed_out_deploy(ctx, node).await,
            };
            if let Err(e) = failed {
                tracing::debug!(node.uuid = %uuid, error = %e, "Timed-out node {uuid} was not failed: {e}");
            }
        }
    }
    Ok(())
}
