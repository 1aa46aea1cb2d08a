//! `redfish-virtual-media`: the deploy ISO inserted into the node's virtual CD and the CD made
//! its next boot device (Ironic's `RedfishVirtualMediaBoot.prepare_ramdisk`); ejected again
//! once the ramdisk's work is done. The ISO is the node's `driver_info.deploy_iso` (an http(s)
//! URL) as it is, else one Ferrum builds from `deploy_kernel` and `deploy_ramdisk` and
//! publishes ([`crate::drivers::boot::vmedia_iso`]), withdrawn with the CD's ejection.

use std::sync::Arc;

use async_trait::async_trait;

use super::validate_virtual_media_boot;
use crate::{
    drivers::{
        BootDevice, BootInterface, Driver, DriverError, Properties, StepContext,
        boot::{BootSettings, vmedia_iso},
    },
    node::{JsonObject, Node},
};

const PROPERTIES: Properties = &[
    (
        "deploy_iso",
        "URL (http:// or https://) of a ready deploy ISO, inserted as it is. Either this or deploy_kernel and deploy_ramdisk.",
    ),
    (
        "deploy_kernel",
        "URL (http://, https:// or file://) of the kernel of the deploy ramdisk, for the ISO Ferrum builds.",
    ),
    (
        "deploy_ramdisk",
        "URL (http://, https:// or file://) of the initramfs of the deploy ramdisk, for the ISO Ferrum builds.",
    ),
    (
        "bootloader",
        "URL of the EFI system partition image a UEFI ISO boots (in place of the conductor's bootloader). Optional.",
    ),
    (
        "kernel_append_params",
        "Kernel parameters of the deploy ramdisk, in place of the conductor's redfish_kernel_append_params. Optional.",
    ),
];

pub(super) struct VirtualMediaBoot {
    pub(super) settings: Arc<BootSettings>,
}

/// The node's ready deploy ISO, if it names one.
fn deploy_iso(node: &Node) -> Result<Option<&str>, DriverError> {
    let Some(iso) = node
        .driver_info
        .get("deploy_iso")
        .filter(|v| !v.is_null() && v.as_str() != Some(""))
    else {
        return Ok(None);
    };
    iso.as_str()
        .filter(|u| u.starts_with("http://") || u.starts_with("https://"))
        .map(Some)
        .ok_or_else(|| {
            DriverError::InvalidParameterValue(format!(
                "Node {} boots by redfish-virtual-media: driver_info deploy_iso must be the http(s) URL of the deploy ISO, not {iso}",
                node.uuid
            ))
        })
}

#[async_trait]
impl BootInterface for VirtualMediaBoot {
    fn name(&self) -> &'static str {
        "redfish-virtual-media"
    }

    fn properties(&self) -> Properties {
        PROPERTIES
    }

    fn validate(&self, node: &Node) -> Result<(), DriverError> {
        validate_virtual_media_boot(node)?;
        match deploy_iso(node)? {
            Some(_) => Ok(()),
            None => vmedia_iso::validate(&self.settings, node),
        }
    }

    async fn prepare_ramdisk(
        &self,
        node: &Node,
        ctx: &StepContext<'_>,
    ) -> Result<JsonObject, DriverError> {
        let iso = match deploy_iso(node)? {
            Some(iso) => iso.to_owned(),
            None => vmedia_iso::publish(&self.settings, node, ctx.inspection).await?,
        };
        let management = &ctx.driver.management;
        let mut kept = management
            .attach_virtual_media(node, BootDevice::Cdrom, &iso)
            .await?;
        kept.extend(
            management
                .set_boot_device(node, BootDevice::Cdrom, false)
                .await?,
        );
        Ok(kept)
    }

    /// The virtual CD ejected (Ironic's `_eject_all`, for the CD: Ferrum inserts nothing else)
    /// and the ISO built for it withdrawn.
    async fn clean_up_ramdisk(&self, node: &Node, driver: &Driver) -> Result<(), DriverError> {
        driver
            .management
            .detach_virtual_media(node, Some(&[BootDevice::Cdrom]))
            .await?;
        vmedia_iso::withdraw(&self.settings, node).await
    }
}
