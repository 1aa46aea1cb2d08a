//! `pxe` and `ipxe`: the node boots its agent's ramdisk over the network (Ironic's `PXEBoot`
//! and `iPXEBoot`, local boot after the deploy).
//!
//! At `prepare_ramdisk`, under the interface's root (`tftp_root` for `pxe`, `http_root` for
//! `ipxe`):
//! - `<uuid>/deploy_kernel`, `<uuid>/deploy_ramdisk`: hard links into the image cache
//!   ([`super::image_cache`]), fetched once whatever the number of nodes;
//! - `<uuid>/config`: the node's boot configuration: an iPXE script (`ipxe`), a PXELINUX one
//!   (`pxe`, BIOS) or a GRUB one (`pxe`, UEFI), with the kernel parameters
//!   (`kernel_append_params`, the node's own in `driver_info` first, and `ipa-api-url`);
//! - a link to it per MAC the node boots from (its `pxe_enabled` ports), where the boot loader
//!   looks: `pxelinux.cfg/<aa-bb-..>` (iPXE, chained from the root's `boot.ipxe`),
//!   `pxelinux.cfg/01-<aa-bb-..>` (PXELINUX), `grub.cfg-01-<aa-bb-..>` (GRUB);
//! - `<uuid>/macs`: those MACs, for the clean-up;
//!
//! then the MACs are allowed DHCP with the boot file options ([`super::dhcp`]), and the node's
//! next boot (once) is the network. `clean_up_ramdisk` removes all of it and withdraws DHCP.

use std::{
    path::{Path, PathBuf},
    sync::Arc,
};

use async_trait::async_trait;
use serde_json::Value;

use super::{
    BootInterface, BootSettings, InspectionBoot, boot_mode_of, deploy_kernel_and_ramdisk,
    dhcp::DhcpOption, io_failed, pxe_macs, replace_file, write_whole,
};
use crate::{
    config::ConductorConfig,
    drivers::{BootDevice, Driver, DriverError, Properties, StepContext},
    node::{JsonObject, Node, management::BootMode},
};

/// Where the links per MAC go, under the root (Ironic's `[pxe]pxe_config_subdir`).
const MAC_DIR: &str = "pxelinux.cfg";

/// The iPXE script every node's iPXE is handed by DHCP, at the root of `http_url`.
pub const IPXE_BOOT_SCRIPT: &str = "boot.ipxe";

const PROPERTIES: Properties = &[
    (
        "deploy_kernel",
        "URL (http://, https:// or file://) of the kernel of the deploy ramdisk. Required.",
    ),
    (
        "deploy_ramdisk",
        "URL (http://, https:// or file://) of the initramfs of the deploy ramdisk. Required.",
    ),
    (
        "kernel_append_params",
        "Kernel parameters of the deploy ramdisk, in place of the conductor's kernel_append_params. Optional.",
    ),
];

/// `pxe` (`ipxe: false`) or `ipxe`.
pub struct NetworkBoot {
    pub ipxe: bool,
    pub settings: Arc<BootSettings>,
}

/// The boot loader a node's configuration is written for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Loader {
    Ipxe,
    Pxelinux,
    Grub,
}

impl NetworkBoot {
    fn root(&self) -> &Path {
        if self.ipxe {
            &self.settings.http_root
        } else {
            &self.settings.tftp_root
        }
    }

    fn loader(&self, mode: BootMode) -> Loader {
        match (self.ipxe, mode) {
            (true, _) => Loader::Ipxe,
            (false, BootMode::Bios) => Loader::Pxelinux,
            (false, BootMode::Uefi) => Loader::Grub,
        }
    }

    /// The node's deploy kernel and ramdisk URLs, or Ironic's MissingParameterValue.
    fn kernel_and_ramdisk<'a>(&self, node: &'a Node) -> Result<[&'a str; 2], DriverError> {
        deploy_kernel_and_ramdisk(node, "Cannot validate PXE bootloader")
    }

    fn kernel_params(&self, node: &Node, inspection: bool) -> Result<String, DriverError> {
        let settings = &self.settings;
        settings.ramdisk_params(
            node,
            &settings.kernel_append_params,
            "Network boot",
            inspection,
        )
    }

    fn http_url(&self) -> Result<&str, DriverError> {
        self.settings.http_url.as_deref().ok_or_else(|| {
            DriverError::InvalidParameterValue(
                "iPXE boot is enabled but the conductor's http_url is not set.".to_owned(),
            )
        })
    }

    /// The node's boot configuration for `loader`.
    fn config_text(
        &self,
        node: &Node,
        loader: Loader,
        inspection: bool,
    ) -> Result<String, DriverError> {
        let params = self.kernel_params(node, inspection)?;
        let uuid = &node.uuid;
        Ok(match loader {
            Loader::Ipxe => {
                let base = format!("{}/{uuid}", self.http_url()?);
                format!(
                    "#!ipxe\n\
                     # Node {uuid}: the deploy ramdisk (written by Ferrum).\n\
                     set tries:int32 0\n\
                     :fetch\n\
                     imgfree\n\
                     kernel {base}/deploy_kernel {params} BOOTIF=${{mac}} initrd=deploy_ramdisk || goto again\n\
                     initrd {base}/deploy_ramdisk || goto again\n\
                     boot\n\
                     :again\n\
                     inc tries\n\
                     iseq ${{tries}} 10 && goto give_up ||\n\
                     echo The deploy ramdisk could not be fetched; trying again in ${{tries}} s.\n\
                     sleep ${{tries}}\n\
                     goto fetch\n\
                     :give_up\n\
                     echo The deploy ramdisk could not be fetched: powering off in 30 s.\n\
                     sleep 30\n\
                     poweroff\n"
                )
            }
            Loader::Pxelinux => format!(
                "default deploy\n\
                 label deploy\n\
                 kernel {uuid}/deploy_kernel\n\
                 append initrd={uuid}/deploy_ramdisk {params}\n\
                 ipappend 2\n"
            ),
            Loader::Grub => format!(
                "set default=deploy\n\
                 set timeout=5\n\
                 menuentry \"deploy\" --id deploy {{\n\
                 \x20   linux /{uuid}/deploy_kernel {params} BOOTIF=${{net_default_mac}}\n\
                 \x20   initrd /{uuid}/deploy_ramdisk\n\
                 }}\n"
            ),
        })
    }

    /// Where the boot loader looks for the configuration of `mac`, under the root.
    fn mac_link(&self, loader: Loader, mac: &str) -> PathBuf {
        let hyphens = mac.replace(':', "-");
        let root = self.root();
        match loader {
            Loader::Ipxe => root.join(MAC_DIR).join(hyphens),
            Loader::Pxelinux => root.join(MAC_DIR).join(format!("01-{hyphens}")),
            Loader::Grub => root.join(format!("grub.cfg-01-{hyphens}")),
        }
    }

    /// The DHCP options of a node's boot (Ironic's `dhcp_options_for_instance`).
    fn dhcp_options(&self, mode: BootMode) -> Result<Vec<DhcpOption>, DriverError> {
        let index = usize::from(mode == BootMode::Uefi);
        let mut options = if self.ipxe {
            let bootfile = &self.settings.ipxe_bootfile[index];
            vec![
                // Firmware that is not iPXE yet is handed iPXE over TFTP first.
                DhcpOption(format!("tag:!ipxe,67,{bootfile}")),
                DhcpOption(format!(
                    "tag:ipxe,67,{}/{IPXE_BOOT_SCRIPT}",
                    self.http_url()?
                )),
            ]
        } else {
            vec![DhcpOption(format!(
                "67,{}",
                self.settings.pxe_bootfile[index]
            ))]
        };
        if let Some(server) = &self.settings.tftp_server {
            // 66 and 150 name the TFTP server; 255 makes dnsmasq send it as `siaddr`.
            for option in [66, 150, 255] {
                options.push(DhcpOption(format!("{option},{server}")));
            }
        }
        Ok(options)
    }
}

/// The master iPXE script: chains to the configuration of the first NIC that has one, else to
/// `fallback` (the operator's script for machines Ferrum does not boot: unmanaged inspection),
/// else reboots.
fn ipxe_boot_script(fallback: Option<&str>) -> String {
    let fallback = fallback.map_or(String::new(), |script| {
        format!(
            "echo No boot configuration of Ferrum's for this machine: chaining {script}.\n\
             chain --autofree {script} || goto failed\n\
             :failed\n"
        )
    });
    format!(
        "#!ipxe\n\
         # Written by Ferrum: boot the configuration of the first network device that has one.\n\
         set netid:int32 -1\n\
         :next\n\
         inc netid\n\
         isset ${{net${{netid}}/mac}} || goto none\n\
         chain --autofree pxelinux.cfg/${{net${{netid}}/mac:hexhyp}} || goto next\n\
         :none\n\
         {fallback}\
         echo No boot configuration for this machine's network devices; rebooting in 10 s.\n\
         sleep 10\n\
         reboot\n"
    )
}

/// Writes `boot.ipxe` at the root of `http_root` (Ironic's `place_common_config`, at a
/// conductor's start), so that a machine Ferrum has no configuration for finds the fallback
/// script before any node has been prepared.
pub async fn write_boot_script(config: &ConductorConfig) -> Result<(), DriverError> {
    write_whole(
        &config.http_root.join(IPXE_BOOT_SCRIPT),
        &ipxe_boot_script(config.ipxe_fallback_script.as_deref()),
    )
    .await
}

#[async_trait]
impl BootInterface for NetworkBoot {
    fn name(&self) -> &'static str {
        if self.ipxe { "ipxe" } else { "pxe" }
    }

    fn properties(&self) -> Properties {
        PROPERTIES
    }

    fn validate(&self, node: &Node) -> Result<(), DriverError> {
        self.kernel_and_ramdisk(node)?;
        self.kernel_params(node, false)?;
        if self.ipxe {
            self.http_url()?;
        }
        Ok(())
    }

    /// Ironic's: what is missing to boot the node (a port, or a setting) makes the inspection
    /// unmanageable rather than failed.
    fn validate_inspection(
        &self,
        node: &Node,
        ports: &[Value],
    ) -> Result<InspectionBoot, DriverError> {
        let insufficient = |why: &dyn std::fmt::Display| {
            Ok(InspectionBoot::Unmanageable(format!(
                "Insufficient information provided for managed inspection: {why}"
            )))
        };
        if ports.is_empty() {
            return insufficient(&format!(
                "Node {} does not have any port associated with it",
                node.uuid
            ));
        }
        match self.validate(node) {
            Ok(()) => Ok(InspectionBoot::Managed),
            Err(e @ DriverError::MissingParameterValue(_)) => insufficient(&e),
            Err(e) => Err(e),
        }
    }

    async fn prepare_ramdisk(
        &self,
        node: &Node,
        ctx: &StepContext<'_>,
    ) -> Result<JsonObject, DriverError> {
        let [kernel, ramdisk] = self.kernel_and_ramdisk(node)?;
        let macs = pxe_macs(ctx.ports);
        if macs.is_empty() {
            return Err(DriverError::InvalidParameterValue(format!(
                "Node {} has no port with pxe_enabled to boot from the network.",
                node.uuid
            )));
        }
        let mode = boot_mode_of(node);
        let loader = self.loader(mode);
        let config = self.config_text(node, loader, ctx.inspection)?;
        let options = self.dhcp_options(mode)?;
        let node_dir = self.root().join(&node.uuid);
        let cache = if self.ipxe {
            &self.settings.http_cache
        } else {
            &self.settings.tftp_cache
        };
        cache.link(kernel, &node_dir.join("deploy_kernel")).await?;
        cache
            .link(ramdisk, &node_dir.join("deploy_ramdisk"))
            .await?;
        write_whole(&node_dir.join("config"), &config).await?;
        write_whole(&node_dir.join("macs"), &(macs.join("\n") + "\n")).await?;
        if loader == Loader::Ipxe {
            let script = ipxe_boot_script(self.settings.ipxe_fallback_script.as_deref());
            write_whole(&self.root().join(IPXE_BOOT_SCRIPT), &script).await?;
        }
        for mac in &macs {
            let link = self.mac_link(loader, mac);
            let target = match loader {
                Loader::Grub => PathBuf::from(&node.uuid).join("config"),
                Loader::Ipxe | Loader::Pxelinux => {
                    PathBuf::from("..").join(&node.uuid).join("config")
                }
            };
            replace_file(&link, async |staged| {
                std::os::unix::fs::symlink(&target, staged)
            })
            .await?;
        }
        self.settings
            .dhcp
            .allow(&node.uuid, &macs, &options)
            .await?;
        tracing::info!(node.uuid = %node.uuid, boot = self.name(), mode = mode.api_name(),
            "Node {} boots its deploy ramdisk over the network from {}", node.uuid, self.root().display());
        ctx.driver
            .management
            .set_boot_device(node, BootDevice::Pxe, false)
            .await
    }

    async fn clean_up_ramdisk(&self, node: &Node, _driver: &Driver) -> Result<(), DriverError> {
        let node_dir = self.root().join(&node.uuid);
        let macs: Vec<String> = match std::fs::read_to_string(node_dir.join("macs")) {
            Ok(text) => text.lines().map(str::to_owned).collect(),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
            Err(e) => return Err(io_failed("read", &node_dir.join("macs"), &e)),
        };
        for mac in &macs {
            for loader in [Loader::Ipxe, Loader::Pxelinux, Loader::Grub] {
                let _ = std::fs::remove_file(self.mac_link(loader, mac));
            }
        }
        self.settings.dhcp.withdraw(&node.uuid, &macs).await?;
        match std::fs::remove_dir_all(&node_dir) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(io_failed("remove", &node_dir, &e)),
        }
    }
}
