//! The boot ISO `redfish-virtual-media` inserts when a node has no ready `deploy_iso`: built
//! from its `deploy_kernel` and `deploy_ramdisk` and published at
//! `<http_url>/redfish/boot-<uuid>.iso` for the BMC to download (Ironic's
//! `image_utils.prepare_deploy_iso` with `images.create_boot_iso`, published by its
//! `LocalPublisher`).
//!
//! - UEFI: the EFI system partition image `bootloader` (the node's `driver_info`, else the
//!   conductor's setting) is the El Torito boot image; its GRUB reads the configuration
//!   written at `grub_config_path` (`EFI/BOOT/grub.cfg`), which boots `/vmlinuz` with
//!   `/initrd`. Ironic needs the same image: a UEFI ISO cannot boot without a boot loader.
//! - BIOS: ISOLINUX (`isolinux_bin`, with the boot information table patched in, and
//!   `ldlinux.c32`) boots them by `isolinux/isolinux.cfg`.
//!
//! The kernel, ramdisk and boot loader image come through the image cache of `http_root`
//! (fetched once for all nodes); the ISO is written beside its final name and renamed into
//! place, with the ramdisk copied by the kernel, not through Ferrum's memory.

use std::path::{Path, PathBuf};

use serde_json::Value;

use super::{BootSettings, boot_mode_of, deploy_kernel_and_ramdisk, io_failed, replace_file};
use crate::{
    configdrive::iso9660::{self, Boot, Source},
    drivers::DriverError,
    node::{Node, management::BootMode},
};

/// Under `http_root` (Ironic's `image_subdir` for Redfish).
const SUBDIR: &str = "redfish";

/// The volume label (Ironic's; the agent looks for it among its devices).
const LABEL: &str = "VMEDIA_BOOT_ISO";

/// Where ISOLINUX's `ldlinux.c32` is looked for when `ldlinux_c32` is unset (Ironic's).
const LDLINUX_DIRS: [&str; 2] = ["/usr/lib/syslinux/modules/bios", "/usr/share/syslinux"];

fn iso_path(settings: &BootSettings, node: &Node) -> PathBuf {
    settings
        .http_root
        .join(SUBDIR)
        .join(format!("boot-{}.iso", node.uuid))
}

/// Where the cached images are linked while an ISO is written.
fn staging_dir(settings: &BootSettings, node: &Node) -> PathBuf {
    settings
        .http_root
        .join(SUBDIR)
        .join(format!(".boot-{}", node.uuid))
}

fn http_url(settings: &BootSettings) -> Result<&str, DriverError> {
    settings.http_url.as_deref().ok_or_else(|| {
        DriverError::InvalidParameterValue(
            "Building a boot ISO for virtual media needs the conductor's http_url (where the BMC downloads it): it is not set.".to_owned(),
        )
    })
}

/// The boot loader image of a UEFI ISO: the node's `driver_info.bootloader`, else the
/// conductor's `bootloader`.
fn bootloader<'a>(settings: &'a BootSettings, node: &'a Node) -> Result<&'a str, DriverError> {
    node.driver_info
        .get("bootloader")
        .and_then(Value::as_str)
        .filter(|v| !v.is_empty())
        .or(settings.bootloader.as_deref())
        .ok_or_else(|| {
            DriverError::MissingParameterValue(format!(
                "Node {} boots in UEFI mode from an ISO built from its deploy kernel and ramdisk, which needs an EFI system partition image: set driver_info bootloader or the conductor's bootloader.",
                node.uuid
            ))
        })
}

fn kernel_params(
    settings: &BootSettings,
    node: &Node,
    inspection: bool,
) -> Result<String, DriverError> {
    let params = settings.ramdisk_params(
        node,
        &settings.vmedia_kernel_append_params,
        "Virtual media boot",
        inspection,
    )?;
    // The agent reads its configuration from the medium it booted from (Ironic's mandatory
    // parameter for virtual media).
    Ok(format!("{params} boot_method=vmedia"))
}

/// Ironic's words before the deploy kernel and ramdisk that are missing.
const MISSING: &str = "Error validating Redfish virtual media";

/// Checks, without fetching anything, that an ISO can be built for the node.
pub fn validate(settings: &BootSettings, node: &Node) -> Result<(), DriverError> {
    deploy_kernel_and_ramdisk(node, MISSING)?;
    http_url(settings)?;
    kernel_params(settings, node, false)?;
    if boot_mode_of(node) == BootMode::Uefi {
        bootloader(settings, node)?;
    }
    Ok(())
}

/// Builds the node's boot ISO and publishes it; returns its URL.
pub async fn publish(
    settings: &BootSettings,
    node: &Node,
    inspection: bool,
) -> Result<String, DriverError> {
    // `build` checks the rest of what `validate` checks (kernel parameters, boot loader).
    let url = format!("{}/{SUBDIR}/boot-{}.iso", http_url(settings)?, node.uuid);
    let [kernel, ramdisk] = deploy_kernel_and_ramdisk(node, MISSING)?;
    let staging = staging_dir(settings, node);
    let built = build(settings, node, inspection, kernel, ramdisk, &staging).await;
    let _ = tokio::fs::remove_dir_all(&staging).await;
    built.map(|()| url)
}

/// Withdraws the node's boot ISO (Ironic's `cleanup_iso_image`): safe with none published.
pub async fn withdraw(settings: &BootSettings, node: &Node) -> Result<(), DriverError> {
    let path = iso_path(settings, node);
    match tokio::fs::remove_file(&path).await {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(io_failed("remove", &path, &e)),
    }
}

/// A file of the ISO, owned, to cross into the blocking writer.
enum Part {
    Bytes(Vec<u8>),
    File(PathBuf),
}

async fn build(
    settings: &BootSettings,
    node: &Node,
    inspection: bool,
    kernel: &str,
    ramdisk: &str,
    staging: &Path,
) -> Result<(), DriverError> {
    let params = kernel_params(settings, node, inspection)?;
    // A UEFI ISO boots its boot loader image, a BIOS one ISOLINUX; checked before any fetch.
    let loader = match boot_mode_of(node) {
        BootMode::Uefi => Some(bootloader(settings, node)?),
        BootMode::Bios => None,
    };
    let cache = &settings.http_cache;
    cache.link(kernel, &staging.join("vmlinuz")).await?;
    cache.link(ramdisk, &staging.join("initrd")).await?;
    let mut parts = vec![
        ("vmlinuz".to_owned(), Part::File(staging.join("vmlinuz"))),
        ("initrd".to_owned(), Part::File(staging.join("initrd"))),
    ];
    let boot = match loader {
        Some(loader) => {
            let esp = staging.join("efiboot.img");
            cache.link(loader, &esp).await?;
            parts.push(("boot/grub/efiboot.img".to_owned(), Part::File(esp)));
            let grub = format!(
                "set default=0\n\
                 set timeout=5\n\
                 set hidden_timeout_quiet=false\n\
                 \n\
                 menuentry \"boot_partition\" {{\n\
                 linux /vmlinuz {params} --\n\
                 initrd /initrd\n\
                 }}\n"
            );
            let grub_path = settings.grub_config_path.trim_start_matches('/').to_owned();
            parts.push((grub_path, Part::Bytes(grub.into_bytes())));
            Boot::Efi(2)
        }
        None => {
            let isolinux = read_local(&settings.isolinux_bin, "isolinux_bin").await?;
            parts.push(("isolinux/isolinux.bin".to_owned(), Part::Bytes(isolinux)));
            let ldlinux = match &settings.ldlinux_c32 {
                Some(path) => Some(path.clone()),
                None => LDLINUX_DIRS
                    .iter()
                    .map(|dir| Path::new(dir).join("ldlinux.c32"))
                    .find(|path| path.is_file()),
            };
            // Only ISOLINUX before 5.0 runs without it (as Ironic: none found, none put).
            if let Some(path) = ldlinux {
                let bytes = read_local(&path, "ldlinux_c32").await?;
                parts.push(("isolinux/ldlinux.c32".to_owned(), Part::Bytes(bytes)));
            }
            let cfg = format!(
                "default boot\n\
                 \n\
                 label boot\n\
                 kernel /vmlinuz\n\
                 append initrd=/initrd text {params} --\n"
            );
            parts.push((
                "isolinux/isolinux.cfg".to_owned(),
                Part::Bytes(cfg.into_bytes()),
            ));
            Boot::Bios(2)
        }
    };
    replace_file(&iso_path(settings, node), async |staged| {
        let staged = staged.to_owned();
        tokio::task::spawn_blocking(move || {
            let files: Vec<(&str, Source<'_>)> = parts
                .iter()
                .map(|(path, part)| {
                    let source = match part {
                        Part::Bytes(b) => Source::Bytes(b),
                        Part::File(p) => Source::File(p),
                    };
                    (path.as_str(), source)
                })
                .collect();
            let mut out = std::fs::File::create(&staged)?;
            iso9660::write_bootable(&mut out, LABEL, &files, boot)
        })
        .await
        .map_err(std::io::Error::other)?
    })
    .await
}

/// A file of the conductor's host named by a setting, or a clear error naming the setting.
async fn read_local(path: &Path, setting: &str) -> Result<Vec<u8>, DriverError> {
    tokio::fs::read(path).await.map_err(|e| {
        DriverError::Failed(format!(
            "Cannot read {} (the conductor's {setting}) to build a BIOS boot ISO: {e}",
            path.display()
        ))
    })
}
