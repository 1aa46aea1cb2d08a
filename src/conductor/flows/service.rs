//! Servicing a deployed node (the `service` verb, API 1.87): the steps the client named, checked
//! against the service steps the node's interfaces offer, run by the step runner; it ends
//! `active` (`Service`).

use serde_json::Value;
use tokio::time::Instant;

use super::{
    HOLD_STEP, refuse_in_maintenance, start,
    step_runner::{StepRun, run_steps},
};
use crate::{
    conductor::{
        Ctx,
        task::Task,
        worker::{Failure, Flow},
    },
    drivers::Driver,
    error::{Error, Result},
    node::{InterfaceKind, Json, JsonObject, Node, NodeChanges},
    states::{Event, ProvisionState},
};

/// Servicing a deployed node (API 1.87; Ironic's `do_node_service`) with `service_steps`, from
/// `active`, `service hold` or `service failed`: not in maintenance, the power credentials
/// valid, every step offered by the node's driver (the fake vendor interface's), then the steps
/// run as manual cleaning's do, and the node is active again. No service step Ferrum's drivers
/// offer needs the ramdisk, so none is booted (Ironic's `prepare_service` is called only for a
/// step that needs one); `disable_ramdisk` (API 1.108) is kept with the node while it services,
/// as Ironic keeps it, for a step that would.
pub async fn do_node_service(
    ctx: &Ctx,
    node: Node,
    service_steps: Vec<Value>,
    disable_ramdisk: bool,
    deadline: Option<Instant>,
) -> Result<()> {
    start(
        ctx,
        node,
        deadline,
        "service",
        Event::Service,
        |node, driver| {
            refuse_in_maintenance(node, "service")?;
            driver.power.validate(node).map_err(|e| {
                Error::InvalidParameterValue(format!(
                    "Validation of node {} for servicing failed: {e}",
                    node.uuid
                ))
            })?;
            let info = ServiceSteps.accept(node, driver, &service_steps, disable_ramdisk)?;
            Ok(NodeChanges {
                service_step: Some(Json::default()),
                driver_internal_info: Some(Json(info)),
                ..NodeChanges::default()
            })
        },
    )
    .await
}

/// Servicing a deployed node with steps, run by a worker ([`service`]). It also continues a
/// servicing sent back to `service wait` by `unhold`.
pub(super) struct Service;

#[async_trait::async_trait]
impl Flow for Service {
    fn name(&self) -> &'static str {
        "Servicing"
    }

    async fn run(&self, task: &mut Task, driver: &Driver) -> std::result::Result<(), String> {
        service(task, driver).await
    }

    /// A failed servicing has no current step, nor steps left (Ironic's
    /// `servicing_error_handler`).
    fn failure(&self, node: &Node, _: &str) -> Failure {
        Failure {
            extra: NodeChanges {
                service_step: Some(Json::default()),
                driver_internal_info: Some(Json(ServiceSteps.without_info(node))),
                ..NodeChanges::default()
            },
            fail_edge: true,
        }
    }
}

/// Servicing, from the first step, or, when `unhold` sent it back to `service wait`, from the
/// step after the hold (Ironic's `continue_node_service`, which resumes into `servicing`).
async fn service(task: &mut Task, driver: &Driver) -> std::result::Result<(), String> {
    let first = if task.node.provision_state == ProvisionState::ServiceWait {
        task.process_event(Event::Resume, true, NodeChanges::default())
            .await
            .map_err(|e| format!("Failed to resume servicing: {e}"))?;
        ServiceSteps.reached(&task.node).map_or(0, |i| i + 1)
    } else {
        0
    };
    run_steps(task, driver, ServiceSteps, first).await
}

/// The steps of a servicing, run by the step runner ([`run_steps`]): checked against the service
/// steps the node's interfaces offer, shown in `service_step`; the fake vendor's
/// `trigger_servicewait` leaves the node in `service wait`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ServiceSteps;

#[async_trait::async_trait]
impl StepRun for ServiceSteps {
    fn name(self) -> &'static str {
        "service"
    }

    fn keys(self) -> (&'static str, &'static str) {
        ("service_steps", "service_step_index")
    }

    fn disable_ramdisk_key(self) -> &'static str {
        "service_disable_ramdisk"
    }

    fn check_step(self, node: &Node, _: &Driver, step: &Value) -> Result<()> {
        check_service_step(node, step)
    }

    fn showing(self, mut changes: NodeChanges, step: JsonObject) -> NodeChanges {
        changes.service_step = Some(Json(step));
        changes
    }

    fn end_event(self, _: &Node) -> Event {
        Event::Done
    }

    fn in_band(self, _: &Node, _: &Driver) -> bool {
        false
    }

    fn waits_before(self, node: &Node, interface: &str, name: &str) -> bool {
        service_step_waits(node, interface, name)
    }

    /// The fake hardware's service steps do nothing.
    async fn execute(
        self,
        _: &mut Task,
        _: &Driver,
        _: usize,
        _: &Value,
        _: &[Value],
    ) -> std::result::Result<bool, String> {
        Ok(false)
    }
}

/// A service step the fake hardware offers, on the interface implementation it needs, and
/// whether it leaves the node waiting for its ramdisk (as Ironic's fake vendor
/// `trigger_servicewait`, which nothing in Ferrum continues: the node waits for an abort).
/// Clean steps are the driver's (`Driver::clean_steps`).
struct ServiceStep {
    interface: &'static str,
    implementation: &'static str,
    step: &'static str,
    waits: bool,
}

/// The service steps of Ironic's fake vendor interface (`FakeVendorB`): `log_passthrough`
/// logs, `trigger_servicewait` leaves the node in `service wait`.
const SERVICE_STEPS: &[ServiceStep] = &[
    ServiceStep {
        interface: "vendor",
        implementation: "fake",
        step: "log_passthrough",
        waits: false,
    },
    ServiceStep {
        interface: "vendor",
        implementation: "fake",
        step: "trigger_servicewait",
        waits: true,
    },
];

/// The service steps `node`'s interfaces offer.
fn service_steps_offered(node: &Node) -> impl Iterator<Item = &'static ServiceStep> + '_ {
    SERVICE_STEPS.iter().filter(|s| {
        InterfaceKind::from_name(s.interface)
            .is_some_and(|kind| node.interfaces.get(kind) == s.implementation)
    })
}

/// Whether `node`'s service step `interface.name` leaves the node waiting for its ramdisk.
fn service_step_waits(node: &Node, interface: &str, name: &str) -> bool {
    service_steps_offered(node).any(|s| s.interface == interface && s.step == name && s.waits)
}

/// Checks one service step against the ones `node`'s interfaces offer; the reserved `hold`
/// step belongs to the conductor (Ironic's `use_reserved_step_handler`), on any interface.
fn check_service_step(node: &Node, step: &Value) -> Result<()> {
    let interface = step.get("interface").and_then(Value::as_str);
    let name = step.get("step").and_then(Value::as_str);
    let (Some(interface), Some(name)) = (interface, name) else {
        return Err(Error::InvalidParameterValue(format!(
            "Each service step needs \"interface\" and \"step\": {step}"
        )));
    };
    if name == HOLD_STEP
        || service_steps_offered(node).any(|s| s.interface == interface && s.step == name)
    {
        return Ok(());
    }
    let offered: Vec<_> = service_steps_offered(node)
        .map(|s| format!("{}.{}", s.interface, s.step))
        .collect();
    let offered = if offered.is_empty() {
        "none".to_owned()
    } else {
        offered.join(", ")
    };
    Err(Error::InvalidParameterValue(format!(
        "Node {}: the service step {interface}.{name} is not supported by its driver; supported: {offered}.",
        node.uuid
    )))
}
