//! DHCP for network boot (Ironic's `[dhcp]dhcp_provider`): `none` leaves DHCP to the operator;
//! `dnsmasq` writes the files a dnsmasq started with `--dhcp-hostsdir` and `--dhcp-optsdir`
//! reads as they change (inotify, no signal), as Ironic's `dnsmasq` provider does:
//!
//! - `<hostsdir>/ironic-<mac>.conf`: `<mac>,set:<node uuid>,set:ironic` while the node boots its
//!   ramdisk, `<mac>,ignore` otherwise; a dnsmasq that answers known hosts only
//!   (`dhcp-ignore=tag:!known`) serves a node's MACs only while it is being provisioned,
//!   cleaned, inspected or rescued.
//! - `<optsdir>/ironic-<node uuid>.conf`: the boot options for the node's tag, one a line,
//!   `tag:<node uuid>,<option>`.
//!
//! - `<hostsdir>/unknown_hosts_filter`: `*:*:*:*:*:*` while unknown MACs may DHCP (a node is
//!   being inspected unmanaged: the operator's boot configuration answers it),
//!   `*:*:*:*:*:*,ignore` otherwise; dnsmasq prefers a MAC's own file to this wildcard (Ironic's
//!   PXE filter).
//!
//! The tag is the node's UUID (Ironic makes a random one and remembers it): stable, unique, and
//! nothing to remember. Each file is written whole, then renamed into place
//! ([`super::replace_file`]), so dnsmasq never reads half of one.

use std::path::{Path, PathBuf};

use super::write_whole;
use crate::{
    config::{ConductorConfig, DhcpProvider},
    drivers::DriverError,
};

/// One DHCP option of a node's boot, as dnsmasq's `dhcp-option` reads it after the tag:
/// `[tag:<t>,]<number>,<value>` (e.g. `tag:ipxe,67,http://.../boot.ipxe`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DhcpOption(pub String);

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Dhcp {
    /// DHCP is the operator's: nothing is written.
    None,
    Dnsmasq {
        hostsdir: PathBuf,
        optsdir: PathBuf,
    },
}

/// The file that allows or ignores the MACs no other file names.
const UNKNOWN_HOSTS_FILE: &str = "unknown_hosts_filter";

impl Dhcp {
    /// The conductor's DHCP provider.
    pub fn of(config: &ConductorConfig) -> Dhcp {
        match config.dhcp_provider {
            DhcpProvider::None => Dhcp::None,
            DhcpProvider::Dnsmasq => Dhcp::Dnsmasq {
                hostsdir: config.dnsmasq_dhcp_hostsdir.clone(),
                optsdir: config.dnsmasq_dhcp_optsdir.clone(),
            },
        }
    }

    /// Allows or ignores the MACs of no node's (Ironic's PXE filter's `allow_unknown`); the
    /// file is rewritten only when that changes, so dnsmasq rereads nothing on a repeat.
    pub async fn allow_unknown(&self, allow: bool) -> Result<(), DriverError> {
        let Dhcp::Dnsmasq { hostsdir, .. } = self else {
            return Ok(());
        };
        let entry = if allow {
            "*:*:*:*:*:*\n"
        } else {
            "*:*:*:*:*:*,ignore\n"
        };
        let path = hostsdir.join(UNKNOWN_HOSTS_FILE);
        if std::fs::read_to_string(&path).ok().as_deref() == Some(entry) {
            return Ok(());
        }
        write_whole(&path, entry).await
    }

    /// Allows `macs` (node `node_uuid`'s) DHCP with `options` (Ironic's `update_dhcp_opts`).
    pub async fn allow(
        &self,
        node_uuid: &str,
        macs: &[String],
        options: &[DhcpOption],
    ) -> Result<(), DriverError> {
        let Dhcp::Dnsmasq { hostsdir, optsdir } = self else {
            return Ok(());
        };
        let lines: String = options
            .iter()
            .map(|o| format!("tag:{node_uuid},{}\n", o.0))
            .collect();
        write_whole(&optsdir.join(format!("ironic-{node_uuid}.conf")), &lines).await?;
        for mac in macs {
            let entry = format!("{mac},set:{node_uuid},set:ironic\n");
            write_whole(&host_file(hostsdir, mac), &entry).await?;
        }
        Ok(())
    }

    /// Withdraws `macs`' DHCP and the node's options (Ironic's `clean_dhcp_opts`): the host
    /// files say `ignore`, the options file goes.
    pub async fn withdraw(&self, node_uuid: &str, macs: &[String]) -> Result<(), DriverError> {
        let Dhcp::Dnsmasq { hostsdir, optsdir } = self else {
            return Ok(());
        };
        for mac in macs {
            write_whole(&host_file(hostsdir, mac), &format!("{mac},ignore\n")).await?;
        }
        let options = optsdir.join(format!("ironic-{node_uuid}.conf"));
        match std::fs::remove_file(&options) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(write_failed(&options, &e)),
        }
    }
}

fn host_file(hostsdir: &Path, mac: &str) -> PathBuf {
    hostsdir.join(format!("ironic-{mac}.conf"))
}

fn write_failed(path: &Path, e: &std::io::Error) -> DriverError {
    DriverError::Failed(format!(
        "Cannot write the DHCP file {}: {e}",
        path.display()
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn dnsmasq_files_allow_the_macs_with_the_options_then_ignore_them() {
        let dir = std::env::temp_dir().join(format!("ferrum-dhcp-{}", std::process::id()));
        let dhcp = Dhcp::Dnsmasq {
            hostsdir: dir.join("hosts"),
            optsdir: dir.join("opts"),
        };
        let macs = [
            "52:54:00:aa:bb:01".to_owned(),
            "52:54:00:aa:bb:02".to_owned(),
        ];
        let options = [
            DhcpOption("tag:!ipxe,67,snponly.efi".into()),
            DhcpOption("tag:ipxe,67,http://198.51.100.1:8080/boot.ipxe".into()),
        ];
        dhcp.allow("n-1", &macs, &options).await.unwrap();
        let read = |p: PathBuf| std::fs::read_to_string(p).unwrap();
        assert_eq!(
            read(dir.join("hosts/ironic-52:54:00:aa:bb:01.conf")),
            "52:54:00:aa:bb:01,set:n-1,set:ironic\n"
        );
        assert_eq!(
            read(dir.join("opts/ironic-n-1.conf")),
            "tag:n-1,tag:!ipxe,67,snponly.efi\ntag:n-1,tag:ipxe,67,http://198.51.100.1:8080/boot.ipxe\n"
        );
        dhcp.withdraw("n-1", &macs).await.unwrap();
        assert_eq!(
            read(dir.join("hosts/ironic-52:54:00:aa:bb:02.conf")),
            "52:54:00:aa:bb:02,ignore\n"
        );
        assert!(!dir.join("opts/ironic-n-1.conf").exists());
        // Twice is as once; no temporary file is left.
        dhcp.withdraw("n-1", &macs).await.unwrap();
        let names: Vec<_> = std::fs::read_dir(dir.join("hosts"))
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        assert!(names.iter().all(|n| n.ends_with(".conf")), "{names:?}");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[tokio::test]
    async fn unknown_macs_are_allowed_then_ignored_and_a_repeat_rewrites_nothing() {
        let dir = std::env::temp_dir().join(format!("ferrum-dhcp-unknown-{}", std::process::id()));
        let dhcp = Dhcp::Dnsmasq {
            hostsdir: dir.join("hosts"),
            optsdir: dir.join("opts"),
        };
        let file = dir.join("hosts/unknown_hosts_filter");
        let read = || std::fs::read_to_string(&file).unwrap();
        dhcp.allow_unknown(false).await.unwrap();
        assert_eq!(read(), "*:*:*:*:*:*,ignore\n");
        dhcp.allow_unknown(true).await.unwrap();
        assert_eq!(read(), "*:*:*:*:*:*\n");
        // A write renames a new file into place: the same inode is the same file.
        let inode = || std::os::unix::fs::MetadataExt::ino(&std::fs::metadata(&file).unwrap());
        let written = inode();
        dhcp.allow_unknown(true).await.unwrap();
        assert_eq!(inode(), written);
        dhcp.allow_unknown(false).await.unwrap();
        assert_eq!(read(), "*:*:*:*:*:*,ignore\n");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[tokio::test]
    async fn none_writes_nothing() {
        Dhcp::None
            .allow("n", &["52:54:00:aa:bb:01".to_owned()], &[])
            .await
            .unwrap();
        Dhcp::None.withdraw("n", &[]).await.unwrap();
        Dhcp::None.allow_unknown(true).await.unwrap();
    }
}
