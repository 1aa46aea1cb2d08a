//! The provisioning verbs, as `dispatch.rs` calls them. A verb with its own request (deploy and
//! rebuild, tear down, clean, service, rescue, unrescue) lives with the flow it starts, under
//! `flows/`, and is named here for the dispatcher; the verbs that only name an event (manage,
//! provide, inspect, adopt, abort, unhold) are here: the state table's move decides which flow,
//! if any, follows (`flows::after`).

use tokio::time::Instant;

pub use super::flows::{
    clean::do_node_clean,
    deploy::do_node_deploy,
    rescue::{do_node_rescue, do_node_unrescue},
    service::do_node_service,
    tear_down::do_node_tear_down,
};
use super::{
    Ctx,
    flows::{
        clean::CleanSteps,
        deploy::without_deploy_steps,
        inspect::{self, require_inspectable},
        ports_of,
        service::ServiceSteps,
        start, step_id,
        step_runner::StepRun,
    },
};
use crate::{
    error::{Error, Result},
    node::{self, Json, Node, NodeChanges, Verb},
    states::{Event, ProvisionState},
};

/// manage, provide, inspect, adopt, abort and unhold (API 1.85: clean hold and deploy hold go
/// back to their wait state, where the next heartbeat continues; service hold goes to `service
/// wait` and servicing continues at once). Abort stops a servicing that waits or holds in
/// `service failed`, the table's abort edge, and from there a second abort returns the node to
/// `active`; Ironic takes both edges in one request (and, for a step not marked abortable, only
/// marks it to abort after it), Ferrum takes them one request each, as it aborts a held cleaning.
pub async fn do_provisioning_action(
    ctx: &Ctx,
    node: Node,
    action: Verb,
    deadline: Option<Instant>,
) -> Result<()> {
    let event = match action {
        Verb::Manage | Verb::Provide | Verb::Abort | Verb::Inspect | Verb::Adopt | Verb::Unhold => {
            action.event()
        }
        Verb::Active
        | Verb::Deploy
        | Verb::Rebuild
        | Verb::Deleted
        | Verb::Undeploy
        | Verb::Clean
        | Verb::Rescue
        | Verb::Unrescue
        | Verb::Service => {
            return Err(Error::InvalidParameterValue(format!(
                "The provisioning action \"{action}\" is not supported."
            )));
        }
    };
    let verb = action.api_name();
    // An in-band inspection may need the node's ports to boot (`require_inspectable`).
    let ports = if event == Event::Inspect && inspect::in_band(&node) {
        ports_of(&ctx.db, &node).await?
    } else {
        Vec::new()
    };
    start(ctx, node, deadline, verb, event, |node, driver| {
        let mut extra = NodeChanges::default();
        if event == Event::Provide && node.retired {
            return Err(Error::NodeIsRetired {
                op: "providing".to_owned(),
                node: node.uuid.clone(),
            });
        }
        if event == Event::Inspect {
            require_inspectable(node, driver, &ports, &ctx.config)?;
            extra.inspection_started_at = Some(Some(node::now()));
            extra.inspection_finished_at = Some(None);
        }
        if event == Event::Abort {
            // The table has an abort edge here (checked before `check` runs), so the state
            // names the operation it stops.
            let what = node.provision_state.aborted_operation().ok_or_else(|| {
                Error::internal(format!(
                    "no aborted operation is named for state {}",
                    node.provision_state
                ))
            })?;
            extra = extra.last_error(Some(format!(
                "By request, the {what} operation was aborted"
            )));
            if what == "deploy" {
                // From `wait call-back` (API 1.110) or `deploy hold`: the deploy forgets its
                // steps and the agent's URL, so that no heartbeat or poll resumes it (Ironic's
                // `_do_abort` and `do_node_deploy_abort`). Every deploy step Ferrum runs is
                // abortable (Ironic's default), so none is left to finish first; the deploy
                // interfaces' `clean_up` has nothing to undo (neither holds a resource), so no
                // worker follows.
                if let Some(step) = step_id(&node.deploy_step) {
                    extra = extra.last_error(Some(format!(
                        "By request, the deploy operation was aborted during or after the completion of step \"{step}\""
                    )));
                }
                let mut info = without_deploy_steps(node);
                info.remove("agent_url");
                extra.deploy_step = Some(Json::default());
                extra.driver_internal_info = Some(Json(info));
            }
            // An aborted cleaning or servicing forgets its steps and where it was (Ironic's
            // `do_node_clean_abort`, `do_node_service_abort`, which names the step reached).
            if what == "clean" {
                if let Some(step) = step_id(&node.clean_step) {
                    extra = extra.last_error(Some(format!(
                        "By request, the clean operation was aborted during or after the completion of step \"{step}\""
                    )));
                }
                extra.driver_internal_info = Some(Json(CleanSteps.without_info(node)));
                extra.clean_step = Some(Json::default());
            }
            if what == "service" {
                if node.maintenance && node.provision_state == ProvisionState::ServiceFail {
                    return Err(Error::InvalidState(format!(
                        "Can not abort service on node \"{}\" while it is in maintenance mode. Please remove the node from maintenance prior to issuing the request to abort the service operation.",
                        node.uuid
                    )));
                }
                if let Some(step) = step_id(&node.service_step) {
                    extra = extra.last_error(Some(format!(
                        "By request, the service operation was aborted during or after the completion of step \"{step}\""
                    )));
                }
                extra.service_step = Some(Json::default());
                extra.driver_internal_info = Some(Json(ServiceSteps.without_info(node)));
            }
        }
        Ok(extra)
    })
    .await
}
