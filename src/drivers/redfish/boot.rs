//! `redfish-virtual-media`: the deploy ISO (`driver_info.deploy_iso`, an http(s) URL) inserted
//! into the node's virtual CD and the CD made its next boot device (Ironic's
//! `RedfishVirtualMediaBoot.prepare_ramdisk`, without building an ISO from `deploy_kernel` and
//! `deploy_ramdisk`, which Ferrum does not do yet); ejected again once the ramdisk's work is
//! done.

use async_trait::async_trait;
use serde_json::Value;

use super::validate_virtual_media_boot;
use crate::{
    drivers::{BootDevice, BootInterface, Driver, DriverError, StepContext},
    node::{JsonObject, Node},
};

pub(super) struct VirtualMediaBoot;

#[async_trait]
impl BootInterface for VirtualMediaBoot {
    fn name(&self) -> &'static str {
        "redfish-virtual-media"
    }

    fn validate(&self, node: &Node) -> Result<(), DriverError> {
        validate_virtual_media_boot(node)
    }

    async fn prepare_ramdisk(
        &self,
        node: &Node,
        ctx: &StepContext<'_>,
    ) -> Result<JsonObject, DriverError> {
        let iso = node
            .driver_info
            .get("deploy_iso")
            .and_then(Value::as_str)
            .filter(|u| u.starts_with("http://") || u.starts_with("https://"))
            .ok_or_else(|| {
                DriverError::InvalidParameterValue(format!(
                    "Node {} boots by redfish-virtual-media: driver_info deploy_iso must be the http(s) URL of the deploy ISO (Ferrum does not build one from deploy_kernel and deploy_ramdisk yet)",
                    node.uuid
                ))
            })?;
        let management = &ctx.driver.management;
        let mut kept = management
            .attach_virtual_media(node, BootDevice::Cdrom, iso)
            .await?;
        kept.extend(
            management
                .set_boot_device(node, BootDevice::Cdrom, false)
                .await?,
        );
        Ok(kept)
    }

    /// The virtual CD ejected (Ironic's `_eject_all`, for the CD: Ferrum inserts nothing else).
    async fn clean_up_ramdisk(&self, node: &Node, driver: &Driver) -> Result<(), DriverError> {
        driver
            .management
            .detach_virtual_media(node, Some(&[BootDevice::Cdrom]))
            .await
            .map(|_| ())
    }
}
