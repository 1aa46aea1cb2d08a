//! Vendor passthru (Ironic's `vendor_passthru`, `driver_vendor_passthru` and the two method
//! listings): relays a call to a method of the node's vendor interface, or of a driver's
//! default one, without looking into its arguments or result.
//!
//! As Ironic: the method must exist and answer the HTTP method used; the interface checks the
//! arguments before the call is accepted; a method that requires it runs under the node's lock
//! (else on a shared lock, which takes nothing); an asynchronous method runs in the worker pool
//! after the reply (202), which owns the lock until the method ends, and a synchronous one while
//! the client waits (200 with its return value). One departure: a failed asynchronous method
//! that held the lock is recorded in `last_error`, as every failed worker is, where Ironic only
//! logs it.

use serde_json::Value;
use tokio::time::Instant;

use super::{
    Ctx,
    task::{Task, lock},
    worker::{Failure, Flow, Worker, hw, hw_now},
};
use crate::{
    drivers::{Driver, VendorMethod, no_handler},
    error::{Error, Result},
    node::{JsonObject, Node},
    rpc::RpcReply,
};

/// The method `name` of `methods`, if it answers `http_method`.
fn find(methods: &'static [VendorMethod], name: &str, http_method: &str) -> Result<VendorMethod> {
    let method = methods
        .iter()
        .find(|m| m.name == name)
        .ok_or_else(|| Error::InvalidParameterValue(no_handler(name).to_string()))?;
    if !method.http_methods.contains(&http_method) {
        return Err(Error::InvalidParameterValue(format!(
            "The method {name} does not support HTTP {http_method}"
        )));
    }
    Ok(*method)
}

fn answer(method: &VendorMethod, return_value: Value) -> RpcReply {
    RpcReply::Passthru {
        return_value,
        asynchronous: method.asynchronous,
        attach: method.attach,
    }
}

/// `{<method>: <metadata>}` of `methods`.
fn listing(methods: &[VendorMethod], node_methods: bool) -> RpcReply {
    RpcReply::VendorMethods(
        methods
            .iter()
            .map(|m| (m.name.to_owned(), m.metadata(node_methods)))
            .collect(),
    )
}

/// A node's vendor method (see the module doc).
pub async fn vendor_passthru(
    ctx: &Ctx,
    node: Node,
    name: String,
    http_method: String,
    args: JsonObject,
    deadline: Option<Instant>,
) -> Result<RpcReply> {
    let vendor = ctx.drivers.for_node(&node)?.vendor;
    let method = find(vendor.methods(), &name, &http_method)?;
    let task = if method.require_exclusive_lock {
        lock(ctx, &node.uuid, deadline).await?
    } else {
        Task::shared(ctx, node)
    };
    let accepted = vendor
        .validate(&task.node, &name, &args)
        .map_err(|e| e.into_error(&task.node.driver))
        .and_then(|()| method.asynchronous.then(|| Worker::take(ctx)).transpose());
    let worker = match accepted {
        Ok(worker) => worker,
        Err(e) => {
            task.release().await;
            return Err(e);
        }
    };
    if let Some(worker) = worker {
        let call = VendorCall {
            name,
            http_method,
            args,
        };
        worker.run(task, call)?;
        return Ok(answer(&method, Value::Null));
    }
    let value = hw_now(&task, vendor.call(&task.node, &name, &http_method, args)).await;
    task.release().await;
    Ok(answer(&method, value?))
}

/// The worker half of an asynchronous vendor method: the call, then the lock's release (by the
/// worker, when the task holds one).
struct VendorCall {
    name: String,
    http_method: String,
    args: JsonObject,
}

#[async_trait::async_trait]
impl Flow for VendorCall {
    fn name(&self) -> &'static str {
        "Vendor passthru"
    }

    async fn run(&self, task: &mut Task, driver: &Driver) -> std::result::Result<(), String> {
        let call = driver
            .vendor
            .call(&task.node, &self.name, &self.http_method, self.args.clone());
        hw(task, call)
            .await?
            .map(|_| ())
            .map_err(|e| format!("Vendor passthru method {} failed: {e}", self.name))
    }

    /// A failed method leaves the node's states alone.
    fn failure(&self, _: &Node, _: &str) -> Failure {
        Failure::default()
    }
}

/// A driver's vendor method, on its default vendor interface: no node, so no lock.
pub async fn driver_vendor_passthru(
    ctx: &Ctx,
    driver: String,
    name: String,
    http_method: String,
    args: JsonObject,
) -> Result<RpcReply> {
    let vendor = ctx.drivers.default_vendor(&driver)?;
    let method = find(vendor.driver_methods(), &name, &http_method)?;
    vendor
        .driver_validate(&name, &args)
        .map_err(|e| e.into_error(&driver))?;
    if method.asynchronous {
        let worker = Worker::take(ctx)?;
        worker.run_detached(ctx, "Driver vendor passthru", async move {
            let called = vendor.driver_call(&name, &http_method, args).await;
            called
                .map(|_| ())
                .map_err(|e| format!("method {name}: {e}"))
        });
        return Ok(answer(&method, Value::Null));
    }
    let value = vendor
        .driver_call(&name, &http_method, args)
        .await
        .map_err(|e| e.into_error(&driver))?;
    Ok(answer(&method, value))
}

pub fn node_methods(ctx: &Ctx, node: &Node) -> Result<RpcReply> {
    let vendor = ctx.drivers.for_node(node)?.vendor;
    Ok(listing(vendor.methods(), true))
}

pub fn driver_methods(ctx: &Ctx, driver: &str) -> Result<RpcReply> {
    let vendor = ctx.drivers.default_vendor(driver)?;
    Ok(listing(vendor.driver_methods(), false))
}
