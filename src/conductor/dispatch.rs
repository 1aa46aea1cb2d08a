//! Decodes each RPC envelope and dispatches its request, one exhaustive match.
//!
//! A panic anywhere in a handler becomes an internal error reply (the conductor keeps serving); a
//! task held at that moment is released by its drop backstop.

use std::{panic::AssertUnwindSafe, time::Duration};

use futures::FutureExt;
use tracing::{Instrument, info_span, warn};

use super::{
    Ctx, agent, management, node_ops, power, provision,
    task::{deadline_after, queue_wait},
    vendor,
};
use crate::{
    error::{Error, panic_message},
    rpc::{
        self, Envelope, RpcReply, RpcRequest, RpcResult, WIRE_VERSION,
        transport::{Rejection, RequestHandler},
    },
};

pub struct Dispatcher {
    ctx: Ctx,
}

impl Dispatcher {
    pub fn new(ctx: Ctx) -> Self {
        Dispatcher { ctx }
    }
}

#[async_trait::async_trait]
impl RequestHandler for Dispatcher {
    async fn handle(&self, body: Vec<u8>) -> Result<Vec<u8>, Rejection> {
        let started = std::time::Instant::now();
        let envelope: Envelope = match rpc::decode(&body) {
            Ok(envelope) => envelope,
            Err(reason) => {
                // Most likely an API newer than this conductor (a rolling upgrade): tell it now
                // rather than let it wait out its timeout.
                let answer: RpcResult = Err(Error::internal(format!(
                    "conductor {} cannot decode the request (is it older than the API?): {reason}",
                    self.ctx.host
                )));
                return Err(Rejection {
                    reason,
                    reply: rpc::encode(&answer).ok(),
                });
            }
        };
        let method = envelope.request.method();
        let span = info_span!(
            "rpc",
            rpc.method = method,
            request_id = %envelope.request_id,
            node.uuid = envelope.request.node_uuid(),
        );
        let result: RpcResult = if envelope.version > WIRE_VERSION {
            Err(Error::internal(format!(
                "RPC envelope version {} is newer than this conductor's {WIRE_VERSION}",
                envelope.version
            )))
        } else if !self.ctx.lease.is_held() {
            // Its nodes may have been taken over, and the request sent again to their next
            // owner: applied now, it could undo what was done since.
            Err(Error::TemporaryFailure(format!(
                "Conductor {} lost its lease on its host name and did not apply {method}; \
                 please retry.",
                self.ctx.host
            )))
        } else {
            let ctx = self.ctx.clone();
            // The key a node records: the request id and what was asked (see `digest`).
            let key = format!("{}/{:016x}", envelope.request_id, envelope.request.digest());
            AssertUnwindSafe(super::task::REQUEST_ID.scope(key, dispatch(ctx, envelope)))
                .catch_unwind()
                .instrument(span.clone())
                .await
                .unwrap_or_else(|panic| {
                    Err(Error::internal(format!(
                        "{method} panicked: {}",
                        panic_message(&*panic)
                    )))
                })
        };
        if let Err(e) = &result {
            let _guard = span.enter();
            if e.status().is_server_error() {
                warn!(error = %e, "{method} failed");
            }
        }
        crate::metrics::get().rpc_handled(method, result.is_ok(), started.elapsed().as_secs_f64());
        rpc::encode(&result).map_err(|e| Rejection::silent(e.to_string()))
    }
}

async fn dispatch(ctx: Ctx, envelope: Envelope) -> RpcResult {
    // A request read after its caller gave up (it sat in this paused process's socket, or in a
    // long queue) is not applied: the caller was told to retry.
    let waited = queue_wait(envelope.sent_at_ms, std::time::SystemTime::now());
    if envelope.timeout_ms != 0 && waited >= Duration::from_millis(envelope.timeout_ms) {
        let method = envelope.request.method();
        warn!(
            waited_ms = waited.as_millis(),
            "{method} was read {:.1} s after it was sent, past its caller's time limit; not applied (if requests are fresh, this host's clock is ahead of the API's)",
            waited.as_secs_f64()
        );
        return Err(Error::TemporaryFailure(format!(
            "The request waited {:.1} s for its conductor, past its time limit; nothing was changed. Please retry.",
            waited.as_secs_f64()
        )));
    }
    let deadline = deadline_after(envelope.timeout_ms, waited);
    match envelope.request {
        RpcRequest::CreateNode { node } => node_ops::create(&ctx, *node)
            .await
            .map(|n| RpcReply::Node(Box::new(n))),
        RpcRequest::UpdateNode {
            node,
            patch,
            reset_interfaces,
        } => node_ops::update(&ctx, *node, &patch, reset_interfaces, deadline)
            .await
            .map(|n| RpcReply::Node(Box::new(n))),
        RpcRequest::DestroyNode { node } => node_ops::destroy(&ctx, *node, deadline)
            .await
            .map(|()| RpcReply::Done),
        RpcRequest::DoNodeDeploy {
            node,
            rebuild,
            configdrive,
            deploy_steps,
        } => provision::do_node_deploy(&ctx, *node, rebuild, configdrive, deploy_steps, deadline)
            .await
            .map(|()| RpcReply::Accepted),
        RpcRequest::DoNodeTearDown { node } => provision::do_node_tear_down(&ctx, *node, deadline)
            .await
            .map(|()| RpcReply::Accepted),
        RpcRequest::DoNodeClean {
            node,
            clean_steps,
            disable_ramdisk,
        } => provision::do_node_clean(&ctx, *node, clean_steps, disable_ramdisk, deadline)
            .await
            .map(|()| RpcReply::Accepted),
        RpcRequest::DoNodeService {
            node,
            service_steps,
            disable_ramdisk,
        } => provision::do_node_service(&ctx, *node, service_steps, disable_ramdisk, deadline)
            .await
            .map(|()| RpcReply::Accepted),
        RpcRequest::AddNodeTraits {
            node,
            traits,
            replace,
        } => node_ops::add_traits(&ctx, *node, traits, replace, deadline)
            .await
            .map(|()| RpcReply::Done),
        RpcRequest::RemoveNodeTraits { node, traits } => {
            node_ops::remove_traits(&ctx, *node, traits, deadline)
                .await
                .map(|()| RpcReply::Done)
        }
        RpcRequest::DoNodeRescue {
            node,
            rescue_password,
        } => provision::do_node_rescue(&ctx, *node, rescue_password, deadline)
            .await
            .map(|()| RpcReply::Accepted),
        RpcRequest::DoNodeUnrescue { node } => provision::do_node_unrescue(&ctx, *node, deadline)
            .await
            .map(|()| RpcReply::Accepted),
        RpcRequest::DoProvisioningAction { node, action } => {
            provision::do_provisioning_action(&ctx, *node, action, deadline)
                .await
                .map(|()| RpcReply::Accepted)
        }
        RpcRequest::ChangeNodePowerState {
            node,
            new_state,
            timeout,
        } => power::change_node_power_state(&ctx, *node, new_state, timeout, deadline)
            .await
            .map(|()| RpcReply::Accepted),
        RpcRequest::SetMaintenance {
            node,
            maintenance,
            reason,
        } => node_ops::set_maintenance(&ctx, *node, maintenance, reason, deadline)
            .await
            .map(|n| RpcReply::Node(Box::new(n))),
        RpcRequest::SetConsoleMode { node, enabled } => {
            node_ops::set_console_mode(&ctx, *node, enabled, deadline)
                .await
                .map(|()| RpcReply::Accepted)
        }
        RpcRequest::ChangePorts { node, change } => {
            super::ports::change(&ctx, *node, change, deadline).await
        }
        RpcRequest::ChangeVolume { node, change } => {
            super::volume::change(&ctx, *node, change, deadline).await
        }
        RpcRequest::ValidateDriverInterfaces { node } => {
            node_ops::validate(&ctx, &node).map(RpcReply::Validation)
        }
        RpcRequest::SetTargetRaidConfig {
            node,
            target_raid_config,
        } => node_ops::set_target_raid_config(&ctx, *node, target_raid_config, deadline)
            .await
            .map(|()| RpcReply::Done),
        RpcRequest::GetSupportedBootDevices { node } => {
            management::get_supported_boot_devices(&ctx, *node)
                .await
                .map(RpcReply::BootDevices)
        }
        RpcRequest::GetBootDevice { node } => management::get_boot_device(&ctx, *node, deadline)
            .await
            .map(RpcReply::BootDevice),
        RpcRequest::SetBootDevice {
            node,
            device,
            persistent,
        } => management::set_boot_device(&ctx, *node, device, persistent, deadline)
            .await
            .map(|()| RpcReply::Done),
        RpcRequest::InjectNmi { node } => management::inject_nmi(&ctx, *node, deadline)
            .await
            .map(|()| RpcReply::Done),
        RpcRequest::VendorPassthru {
            node,
            method,
            http_method,
            args,
        } => vendor::vendor_passthru(&ctx, *node, method, http_method, args, deadline).await,
        RpcRequest::GetNodeVendorPassthruMethods { node } => vendor::node_methods(&ctx, &node),
        RpcRequest::DriverVendorPassthru {
            driver,
            method,
            http_method,
            args,
        } => vendor::driver_vendor_passthru(&ctx, driver, method, http_method, args).await,
        RpcRequest::GetDriverVendorPassthruMethods { driver } => {
            vendor::driver_methods(&ctx, &driver)
        }
        RpcRequest::Heartbeat { node, heartbeat } => {
            agent::heartbeat(&ctx, *node, heartbeat, deadline)
                .await
                .map(|()| RpcReply::Accepted)
        }
        RpcRequest::ContinueInspection {
            node,
            inventory,
            plugin_data,
        } => super::flows::inspect::continue_inspection(
            &ctx,
            *node,
            inventory,
            plugin_data,
            deadline,
        )
        .await
        .map(|()| RpcReply::Accepted),
        RpcRequest::GetNodeWithToken { node } => agent::get_node_with_token(&ctx, *node, deadline)
            .await
            .map(|n| RpcReply::Node(Box::new(n))),
        RpcRequest::CreateAllocation { allocation, node } => {
            super::allocations::create(&ctx, *allocation, node.map(|n| *n), deadline)
                .await
                .map(|a| RpcReply::Allocation(Box::new(a)))
        }
        RpcRequest::DestroyAllocation { allocation, node } => {
            super::allocations::destroy(&ctx, *allocation, node.map(|n| *n), deadline)
                .await
                .map(|()| RpcReply::Done)
        }
        RpcRequest::GetSupportedIndicators { node } => {
            management::get_supported_indicators(&ctx, *node)
                .await
                .map(RpcReply::Indicators)
        }
        RpcRequest::GetIndicatorState {
            node,
            component,
            indicator,
        } => management::get_indicator_state(&ctx, *node, &component, &indicator)
            .await
            .map(RpcReply::IndicatorState),
        RpcRequest::SetIndicatorState {
            node,
            component,
            indicator,
            state,
        } => management::set_indicator_state(&ctx, *node, &component, &indicator, state, deadline)
            .await
            .map(|()| RpcReply::Done),
        RpcRequest::ChangeBootSetting { node, setting } => {
            management::change_boot_setting(&ctx, *node, setting, deadline)
                .await
                .map(|()| RpcReply::Accepted)
        }
        RpcRequest::AttachVirtualMedia {
            node,
            device_type,
            image_url,
            image_download_source: _,
        } => management::attach_virtual_media(&ctx, *node, device_type, &image_url, deadline)
            .await
            .map(|()| RpcReply::Done),
        RpcRequest::DetachVirtualMedia { node, device_types } => {
            management::detach_virtual_media(&ctx, *node, device_types, deadline)
                .await
                .map(|()| RpcReply::Done)
        }
        RpcRequest::GetVirtualMedia { node } => management::get_virtual_media(&ctx, *node)
            .await
            .map(RpcReply::VirtualMedia),
    }
}
