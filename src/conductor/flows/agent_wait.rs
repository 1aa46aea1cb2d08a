//! The wait of a deploy (`wait call-back`) or a cleaning (`clean wait`) for the node's agent:
//! a poller that asks the agent whether the step it runs has finished ([`spawn_poller`]),
//! settling what the agent (asked by the poller or on a heartbeat) said ([`settle_wait`]), and
//! failing a wait that outlasted its callback timeout ([`fail_timed_out`]). What differs between
//! a deploy and a cleaning is an [`AgentWait`]: the state, the question to the agent, the
//! failure's changes.

use std::time::Duration;

use tokio::time::Instant;

use super::start;
use crate::{
    conductor::Ctx,
    drivers::StepPoll,
    error::{Error, Result},
    node::{Node, NodeChanges},
    states::{Event, ProvisionState},
};

/// A wait for the node's agent that a poller asks about and a timeout ends: a deploy's
/// (`deploy::DeployCallback`) or a cleaning's (`clean::CleanCallback`).
#[async_trait::async_trait]
pub(super) trait AgentWait: Copy + Send + Sync + 'static {
    /// The state the node waits in.
    fn state(self) -> ProvisionState;

    /// What waits, for messages.
    fn noun(self) -> &'static str;

    /// How long the agent may take (`deploy_callback_timeout`, `clean_callback_timeout`).
    fn timeout(self, ctx: &Ctx) -> Duration;

    /// Whether the step at `index` of `node` has finished, as its agent tells.
    async fn poll(self, ctx: &Ctx, node: &Node, index: usize) -> Result<StepPoll>;

    /// Continues or fails the wait of `node` after `poll` (through [`settle_wait`]).
    async fn settle(self, ctx: &Ctx, node: Node, index: usize, poll: StepPoll) -> Result<()>;

    /// What a failed wait writes besides `last_error`.
    fn failure(self, node: &Node, message: &str) -> NodeChanges;
}

/// How often a waiting step's agent is asked whether its command has finished: first after
/// `POLL_FIRST`, then twice as long each time up to `POLL_MAX`. The agent also heartbeats
/// when a command ends (within 5 s, and never within 5 s of its last heartbeat), which ends
/// the wait as well: the polls find the short commands sooner, and a long one is left to the
/// heartbeat, each poll being a request to the agent and a wake-up of the conductor (0.25 s
/// growing by half to 2 s asked a 15 s image write 11 times; these, 5 times).
const POLL_FIRST: Duration = Duration::from_millis(500);
const POLL_MAX: Duration = Duration::from_secs(8);

/// Asks the agent of `node`, waiting in the step at `index`, until that step has finished or
/// failed, then continues or fails the deploy or cleaning. It holds no lock and reads no row
/// while it asks: the conditional write of [`AgentWait::settle`] settles a race with a heartbeat
/// doing the same. It ends with the callback timeout, when the conductor stops taking work, or
/// when the wait has moved on; an agent that cannot be reached is asked again (the timeout
/// decides).
pub(super) fn spawn_poller(ctx: Ctx, node: Node, wait: impl AgentWait, index: usize) {
    tokio::spawn(async move {
        let give_up = Instant::now() + wait.timeout(&ctx);
        let mut interval = POLL_FIRST;
        while Instant::now() < give_up && ctx.lease.is_serving() {
            tokio::time::sleep(interval).await;
            interval = (interval * 2).min(POLL_MAX);
            match wait.poll(&ctx, &node, index).await {
                Ok(StepPoll::Running) => continue,
                Ok(poll) => {
                    if let Err(e) = wait.settle(&ctx, node.clone(), index, poll).await {
                        tracing::debug!(node.uuid = %node.uuid, error = %e,
                            "The {} of node {} was not continued from the poll", wait.noun(), node.uuid);
                    }
                    return;
                }
                Err(e) => {
                    tracing::debug!(node.uuid = %node.uuid, error = %e, index,
                        "Cannot ask the agent of node {} about its step yet", node.uuid);
                }
            }
        }
    });
}

/// What a deploy and a cleaning that wait for their agent do with a poll: resume when the step
/// has finished, fail with `wait`'s changes and the message when it failed, provided
/// `still_waiting` holds for the node as the write reads it (a heartbeat and the poller may
/// both get here; the conditional write lets one through).
pub(super) async fn settle_wait(
    wait: impl AgentWait,
    ctx: &Ctx,
    node: Node,
    poll: StepPoll,
    still_waiting: impl Fn(&Node) -> Result<()> + Send + Sync,
) -> Result<()> {
    match poll {
        StepPoll::Running => Ok(()),
        StepPoll::Finished => {
            start(ctx, node, None, "resume", Event::Resume, |node, _| {
                still_waiting(node)?;
                Ok(NodeChanges::default())
            })
            .await
        }
        StepPoll::Failed(message) => {
            tracing::error!(node.uuid = %node.uuid, "{message}");
            start(ctx, node, None, "fail", Event::Fail, |node, _| {
                still_waiting(node)?;
                Ok(wait
                    .failure(node, &message)
                    .last_error(Some(message.clone())))
            })
            .await
        }
    }
}

/// Fails the `wait` of `node` with `message` as its `last_error`, writing the wait's failure
/// changes too, unless the wait has moved on since `node` was read (a heartbeat or a poller won
/// the race).
pub(super) async fn fail_timed_out(
    wait: impl AgentWait,
    ctx: &Ctx,
    node: Node,
    message: String,
) -> Result<()> {
    let waited_since = node.provision_updated_at;
    start(ctx, node, None, "fail", Event::Fail, move |node, _| {
        if node.provision_state != wait.state() || node.provision_updated_at != waited_since {
            return Err(Error::Conflict(format!(
                "The {} of node {} has moved on already.",
                wait.noun(),
                node.uuid
            )));
        }
        Ok(wait
            .failure(node, &message)
            .last_error(Some(message.clone())))
    })
    .await
}
