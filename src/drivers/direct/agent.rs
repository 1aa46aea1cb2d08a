//! The direct deploy's exchanges with the agent about steps: the node as the agent is shown
//! it, the agent's deploy and clean steps read and kept (with its hardware managers' versions,
//! which every step sent to it carries), and where an asynchronous step the agent runs stands
//! (Ironic's `agent_base.py`: `refresh_steps`, `_get_completed_command`).

use serde_json::{Value, json};

use super::{CACHED_STEPS, MANAGER_VERSION};
use crate::{
    drivers::{
        DriverError, StepContext, StepDone,
        agent_client::{AgentClient, CommandResult, CommandStatus},
    },
    node::{Node, mask},
    steps::CleanStep,
};

/// The node as the agent is shown it (Ironic sends `node.as_dict(secure=True)`): its
/// identity and documents, secrets masked.
pub(super) fn node_for_agent(node: &Node) -> Value {
    json!({
        "uuid": node.uuid,
        "name": node.name,
        "driver": node.driver,
        "driver_info": mask::mask_secrets(&node.driver_info),
        "driver_internal_info": mask::mask_secrets(&node.driver_internal_info),
        "instance_info": mask::masked_instance_info(&node.instance_info),
        "instance_uuid": node.instance_uuid,
        "properties": node.properties.0,
        "extra": node.extra.0,
        "provision_state": node.provision_state.api_name(),
        "deploy_step": node.deploy_step.0,
    })
}

/// Where an asynchronous step the agent runs stands.
pub(super) enum AgentStep {
    Running,
    Finished,
    /// The agent's last command, which did not succeed.
    Failed(CommandResult),
}

/// Where the agent's asynchronous `command` running `interface.step` stands (Ironic's
/// `_get_completed_command`): finished once the agent's last command is this command, done,
/// with this step in its result under `result_key`; running until then.
pub(super) async fn poll_agent_step(
    node: &Node,
    command: &str,
    result_key: &str,
    interface: &str,
    step: &str,
) -> Result<AgentStep, DriverError> {
    let mut commands = AgentClient::for_node(node)?.commands().await?;
    let Some(last) = commands.pop() else {
        return Ok(AgentStep::Running);
    };
    if last.command_name != command {
        return Ok(AgentStep::Running);
    }
    Ok(match last.status() {
        CommandStatus::Running => AgentStep::Running,
        CommandStatus::Succeeded => {
            let finished = last.command_result.as_ref().and_then(|r| r.get(result_key));
            let same = finished.is_some_and(|s| {
                s.get("interface").and_then(Value::as_str) == Some(interface)
                    && s.get("step").and_then(Value::as_str) == Some(step)
            });
            if same {
                AgentStep::Finished
            } else {
                AgentStep::Running
            }
        }
        CommandStatus::Failed | CommandStatus::VersionMismatch | CommandStatus::Other(_) => {
            AgentStep::Failed(last)
        }
    })
}

/// A clean step the agent failed, in its words (Ironic's "Agent returned error for clean
/// step ..."); a changed set of hardware managers is its own failure.
pub(super) fn clean_step_failed(node: &Node, step: &str, result: &CommandResult) -> DriverError {
    DriverError::Failed(match result.status() {
        CommandStatus::VersionMismatch => format!(
            "The agent of node {} changed its hardware managers during the cleaning (VERSION_MISMATCH); clean again.",
            node.uuid
        ),
        _ => format!(
            "Agent returned error for clean step deploy.{step} on node {} : {}.",
            node.uuid,
            result.error_text()
        ),
    })
}

/// The agent's clean steps (keyed by hardware manager, each step once: the agent keeps the
/// one of its highest-priority manager) as automated cleaning ranks them, with the
/// conductor's priority overrides for the disk erasures.
pub(super) fn agent_clean_steps(
    offered: &Value,
    config: &crate::config::ConductorConfig,
) -> Vec<CleanStep> {
    let mut steps: Vec<CleanStep> = Vec::new();
    for step in offered
        .as_object()
        .into_iter()
        .flat_map(|managers| managers.values())
        .filter_map(Value::as_array)
        .flatten()
    {
        let (Some(interface), Some(name)) = (
            step.get("interface").and_then(Value::as_str),
            step.get("step").and_then(Value::as_str),
        ) else {
            continue;
        };
        let own = step
            .get("priority")
            .and_then(Value::as_u64)
            .and_then(|p| u32::try_from(p).ok())
            .unwrap_or(0);
        let priority = match name {
            "erase_devices" => config.erase_devices_priority.unwrap_or(own),
            "erase_devices_metadata" => config.erase_devices_metadata_priority.unwrap_or(own),
            _ => own,
        };
        if steps
            .iter()
            .any(|s| s.interface == interface && s.step == name)
        {
            continue;
        }
        steps.push(CleanStep {
            interface: interface.to_owned(),
            step: name.to_owned(),
            priority,
        });
    }
    steps
}

/// Reads the agent's deploy steps and its hardware managers' versions (Ironic's
/// `refresh_steps`), which every step sent to it must carry.
pub(super) async fn refresh_steps(
    agent: &AgentClient,
    node: &Node,
    ctx: &StepContext<'_>,
    done: &mut StepDone,
) -> Result<Value, DriverError> {
    if let Some(version) = node.driver_internal_info.get(MANAGER_VERSION) {
        return Ok(version.clone());
    }
    let result = get_agent_steps(agent, node, ctx, "deploy.get_deploy_steps").await?;
    let version = result
        .get("hardware_manager_version")
        .cloned()
        .unwrap_or(Value::Null);
    done.remember.insert(
        CACHED_STEPS.into(),
        result.get("deploy_steps").cloned().unwrap_or(Value::Null),
    );
    done.remember
        .insert(MANAGER_VERSION.into(), version.clone());
    Ok(version)
}

/// Asks the agent for its steps (`command`: `deploy.get_deploy_steps` or
/// `clean.get_clean_steps`), showing it the node and its ports: the agent's answer.
pub(super) async fn get_agent_steps(
    agent: &AgentClient,
    node: &Node,
    ctx: &StepContext<'_>,
    command: &str,
) -> Result<Value, DriverError> {
    Ok(agent
        .run(
            command,
            json!({"node": node_for_agent(node), "ports": ctx.ports}),
        )
        .await?
        .unwrap_or(Value::Null))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn automated_cleaning_takes_the_agents_priorities_or_the_conductors() {
        let offered = json!({
            "GenericHardwareManager": [
                {"step": "erase_devices", "priority": 10, "interface": "deploy"},
                {"step": "erase_devices_metadata", "priority": 99, "interface": "deploy"},
                {"step": "apply_configuration", "priority": 0, "interface": "raid"},
            ],
            "SandboxHardwareManager": [{"step": "erase_devices", "priority": 10, "interface": "deploy"}],
        });
        let mut config = crate::config::ConductorConfig::default();
        let priorities = |config: &crate::config::ConductorConfig| {
            agent_clean_steps(&offered, config)
                .into_iter()
                .map(|s| (s.step, s.priority))
                .collect::<Vec<_>>()
        };
        assert_eq!(
            priorities(&config),
            [
                ("erase_devices".to_owned(), 10),
                ("erase_devices_metadata".to_owned(), 99),
                ("apply_configuration".to_owned(), 0)
            ]
        );
        config.erase_devices_priority = Some(0);
        config.erase_devices_metadata_priority = Some(5);
        assert_eq!(
            priorities(&config)[..2],
            [
                ("erase_devices".to_owned(), 0),
                ("erase_devices_metadata".to_owned(), 5)
            ]
        );
    }
}
