//! `direct`: the image deploy. It writes an image fetched over HTTP(S) through the agent ramdisk.
//!
//! What exists today is its front half, which is what Ironic's agent deploy does before the agent
//! is involved: it accepts only `http://` and `https://` images in `instance_info.image_source`
//! and fails in `prepare` with ImageUnacceptable otherwise (the failure of Ironic bug 1405420).
//! With an acceptable image the node boots the ramdisk and waits for it (`wait call-back`); the
//! agent side that then writes the image is not built yet, so such a node waits there until it is
//! torn down.

use async_trait::async_trait;

use super::{DeployInterface, DeployOutcome, DriverError, Properties};
use crate::node::Node;

pub struct DirectDeploy;

impl DirectDeploy {
    fn image_source(node: &Node) -> Result<&str, DriverError> {
        node.instance_info
            .get("image_source")
            .and_then(|v| v.as_str())
            .filter(|s| !s.is_empty())
            .ok_or_else(|| {
                DriverError::MissingParameterValue(
                    "Node's instance_info is missing image_source, required by the direct deploy interface."
                        .to_owned(),
                )
            })
    }
}

#[async_trait]
impl DeployInterface for DirectDeploy {
    fn name(&self) -> &'static str {
        "direct"
    }

    /// What Ironic's direct deploy reads from `driver_info` (its `agent.py` and `agent_base.py`
    /// properties), described in Ferrum's words.
    fn properties(&self) -> Properties {
        &[
            (
                "deploy_kernel",
                "The kernel image (an image service UUID or a URL) the deploy ramdisk boots with. Required.",
            ),
            (
                "deploy_ramdisk",
                "The ramdisk image (an image service UUID or a URL) with the agent that writes the instance image. Required.",
            ),
            (
                "image_http_proxy",
                "The URL of the proxy the agent fetches images through over HTTP. Optional.",
            ),
            (
                "image_https_proxy",
                "The URL of the proxy the agent fetches images through over HTTPS. Optional.",
            ),
            (
                "image_no_proxy",
                "Comma-separated host names, IP addresses and domains (a leading dot for a domain, an optional :port) the agent reaches without the proxies; only read when a proxy is set. Optional.",
            ),
            (
                "image_download_source",
                "Where the agent downloads the image from: \"swift\", \"http\" (the image's own URL) or \"local\" (a copy cached and served by the conductor). Optional.",
            ),
            (
                "deploy_forces_oob_reboot",
                "Whether the node is rebooted out of band (by its power interface) once the image is written, for ramdisks that cannot reboot themselves. Default false. Optional.",
            ),
            (
                "agent_verify_ca",
                "How the agent's TLS certificate is checked: true to verify it, false not to, or the path of a CA bundle file or directory to verify it against. Default true. Optional.",
            ),
        ]
    }

    fn validate(&self, node: &Node) -> Result<(), DriverError> {
        Self::image_source(node).map(|_| ())
    }

    async fn prepare(&self, node: &Node) -> Result<(), DriverError> {
        let image = Self::image_source(node)?;
        let scheme_ok = image.split_once("://").is_some_and(|(scheme, rest)| {
            (scheme.eq_ignore_ascii_case("http") || scheme.eq_ignore_ascii_case("https"))
                && !rest.is_empty()
        });
        if !scheme_ok {
            return Err(DriverError::ImageUnacceptable {
                image: image.to_owned(),
                reason: "Agent deploy supports only HTTP(S) URLs".to_owned(),
            });
        }
        Ok(())
    }

    async fn deploy(&self, _node: &Node) -> Result<DeployOutcome, DriverError> {
        // The node now boots the agent ramdisk; the agent's heartbeat continues the deploy.
        Ok(DeployOutcome::Wait)
    }

    async fn tear_down(&self, _node: &Node) -> Result<(), DriverError> {
        Ok(())
    }

    async fn clean_up(&self, _node: &Node) -> Result<(), DriverError> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn only_http_images_are_acceptable() {
        let mut node: Node = crate::node::tests_support::node();
        for (image, ok) in [
            ("http://example.com/img.qcow2", true),
            ("HTTPS://example.com/img", true),
            ("file:///home/user/aaa", false),
            ("/var/lib/img.raw", false),
            ("http://", false),
        ] {
            node.instance_info
                .insert("image_source".into(), serde_json::json!(image));
            let got = DirectDeploy.prepare(&node).await;
            assert_eq!(got.is_ok(), ok, "{image}: {got:?}");
            if !ok {
                let msg = got.unwrap_err().to_string();
                assert!(
                    msg.starts_with(&format!("Image {image} is unacceptable: ")),
                    "{msg}"
                );
            }
        }
        node.instance_info.remove("image_source");
        assert!(DirectDeploy.validate(&node).is_err());
    }
}
