//! Test support: the real services (MariaDB/MySQL and RabbitMQ on loopback by default), a fresh
//! database per test, a cluster of real `ferrum` processes driven over HTTP, and the service in
//! process ([`TestApp`]) driven through its router.

pub mod app;
pub mod cluster;
pub mod clusters;
pub mod ipa;
pub mod ipmi_bmc;
pub mod keystone;
pub mod lab;
pub mod link_proxy;
pub mod load;
pub mod mysql_template;
pub mod private;
pub mod redfish;
pub mod services;
pub mod watch;

pub use app::TestApp;
pub use cluster::{Api, Cluster, ClusterOptions, Reply, STABLE_STATES, Supervisor};
pub use private::{PrivateMariaDb, PrivateRabbit};
pub use services::{Stack, TestDb, amqp_url, clients_venv, fake_hardware_row, ipa_sandbox};

/// `GET <base>/metrics`, checked for its content type and parsed.
pub async fn scrape_metrics(base: &str) -> Vec<prom_text_format_parser::Metric> {
    let resp = reqwest::get(format!("{base}/metrics"))
        .await
        .expect("GET /metrics");
    assert_eq!(resp.status(), reqwest::StatusCode::OK);
    assert_eq!(
        resp.headers()["content-type"],
        "text/plain; version=0.0.4; charset=utf-8"
    );
    let text = resp.text().await.expect("metrics text");
    prom_text_format_parser::Scrape::parse(&text)
        .unwrap_or_else(|e| panic!("unparseable metrics ({e:?}):\n{text}"))
        .metrics
}

/// Defines a test that runs once per stack, as `name::embedded` and `name::multi_host`: one
/// suite, parameterised, not two copies.
macro_rules! on_both_stacks {
    ($(#[doc = $doc:expr])* async fn $name:ident($stack:ident) $body:block) => {
        $(#[doc = $doc])*
        mod $name {
            #[allow(unused_imports)]
            use super::*;

            // A test body, like a #[test] fn, where clippy.toml allows unwrap.
            #[allow(clippy::unwrap_used)]
            async fn run($stack: $crate::util::Stack) $body

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn embedded() {
                run($crate::util::Stack::Embedded).await
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn multi_host() {
                run($crate::util::Stack::MultiHost).await
            }
        }
    };
}
pub(crate) use on_both_stacks;

/// Everything that booted node `uuid`'s ramdisk over the network is gone: the DHCP host file of
/// `mac` in `hosts` says `ignore`, the node's options file in `opts` is deleted, and so are its
/// boot files and the MAC's boot configuration (iPXE's, PXELINUX's or GRUB's) under `root` (the
/// conductor's HTTP root for `ipxe`, its TFTP root for `pxe`).
pub fn assert_network_boot_withdrawn(
    hosts: &std::path::Path,
    opts: &std::path::Path,
    root: &std::path::Path,
    uuid: &str,
    mac: &str,
) {
    let host =
        std::fs::read_to_string(hosts.join(format!("ironic-{mac}.conf"))).unwrap_or_default();
    assert_eq!(host, format!("{mac},ignore\n"), "DHCP still serves {mac}");
    assert!(
        !opts.join(format!("ironic-{uuid}.conf")).exists(),
        "the node's DHCP options remain"
    );
    assert!(!root.join(uuid).exists(), "the node's boot files remain");
    let hyphens = mac.replace(':', "-");
    for config in [
        root.join("pxelinux.cfg").join(&hyphens),
        root.join("pxelinux.cfg").join(format!("01-{hyphens}")),
        root.join(format!("grub.cfg-01-{hyphens}")),
    ] {
        assert!(
            config.symlink_metadata().is_err(),
            "the MAC's boot configuration {} remains",
            config.display()
        );
    }
}
