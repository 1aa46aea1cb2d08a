//! What the agent is told of the instance image: the image information its `write_image`
//! step carries (Ironic's `AgentDeploy.write_image`, with its `PARTITION_IMAGE_LABELS`), from the
//! node's `instance_info` or from the raw copy the conductor published, and whether the image is
//! a partition image.

use serde_json::{Value, json};

use super::DirectDeploy;
use crate::{
    drivers::{DriverError, local_image::LocalImage},
    node::{JsonObject, Node},
};

/// What a partition image adds to the image information (Ironic's `PARTITION_IMAGE_LABELS`).
const PARTITION_IMAGE_LABELS: &[&str] = &[
    "kernel",
    "ramdisk",
    "root_gb",
    "root_mb",
    "swap_mb",
    "ephemeral_mb",
    "ephemeral_format",
    "configdrive",
    "preserve_ephemeral",
    "image_type",
    "deploy_boot_mode",
];

pub(super) fn info_str<'a>(node: &'a Node, key: &str) -> Option<&'a str> {
    node.instance_info
        .get(key)
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
}

/// Whether the instance image is a partition image: one with its own kernel and ramdisk
/// (Ironic's `is_whole_disk_image` for images that are not in Glance).
pub(super) fn is_partition_image(node: &Node) -> bool {
    match info_str(node, "image_type") {
        Some(kind) => kind == "partition",
        None => info_str(node, "kernel").is_some() && info_str(node, "ramdisk").is_some(),
    }
}

/// What the agent needs to fetch and write the image (Ironic's `AgentDeploy.write_image`):
/// the image's own URL and checksum, or those of the raw copy the conductor published (`local`).
fn image_info(
    node: &Node,
    stream_raw_images: bool,
    local: Option<&LocalImage>,
) -> Result<Value, DriverError> {
    let source = DirectDeploy::image_source(node)?;
    let mut info = JsonObject::new();
    let id = source.rsplit('/').next().unwrap_or(source);
    info.insert("id".into(), json!(id));
    let url = match local {
        Some(local) => local.url.as_str(),
        None => info_str(node, "image_url").unwrap_or(source),
    };
    info.insert("urls".into(), json!([url]));
    info.insert(
        "disk_format".into(),
        match local {
            Some(_) => json!("raw"),
            None => node
                .instance_info
                .get("image_disk_format")
                .cloned()
                .unwrap_or(Value::Null),
        },
    );
    info.insert(
        "container_format".into(),
        node.instance_info
            .get("image_container_format")
            .cloned()
            .unwrap_or(Value::Null),
    );
    info.insert("stream_raw_images".into(), json!(stream_raw_images));
    if let Some(local) = local {
        info.insert("os_hash_algo".into(), json!("sha256"));
        info.insert("os_hash_value".into(), json!(local.sha256));
    } else {
        if let Some(checksum) = info_str(node, "image_checksum") {
            info.insert("checksum".into(), json!(checksum));
        }
        if let (Some(algo), Some(value)) = (
            info_str(node, "image_os_hash_algo"),
            info_str(node, "image_os_hash_value"),
        ) {
            info.insert("os_hash_algo".into(), json!(algo));
            info.insert("os_hash_value".into(), json!(value));
        }
    }
    let mut proxies = JsonObject::new();
    for scheme in ["http", "https"] {
        if let Some(proxy) = node
            .driver_info
            .get(&format!("image_{scheme}_proxy"))
            .and_then(Value::as_str)
        {
            proxies.insert(scheme.into(), json!(proxy));
        }
    }
    if !proxies.is_empty() {
        info.insert("proxies".into(), Value::Object(proxies));
        if let Some(no_proxy) = node.driver_info.get("image_no_proxy") {
            info.insert("no_proxy".into(), no_proxy.clone());
        }
    }
    info.insert("node_uuid".into(), json!(node.uuid));
    if is_partition_image(node) {
        for label in PARTITION_IMAGE_LABELS {
            info.insert(
                (*label).into(),
                node.instance_info
                    .get(*label)
                    .cloned()
                    .unwrap_or(Value::Null),
            );
        }
        info.insert("image_type".into(), json!("partition"));
    } else {
        info.insert("image_type".into(), json!("whole-disk"));
    }
    if let Some(configdrive) = node.instance_info.get("configdrive") {
        info.insert("configdrive".into(), configdrive.clone());
    }
    Ok(Value::Object(info))
}

/// `deploy.write_image` as the agent runs it, with the image information.
pub(super) fn agent_write_image_step(
    node: &Node,
    stream_raw_images: bool,
    local: Option<&LocalImage>,
) -> Result<Value, DriverError> {
    Ok(json!({
        "interface": "deploy",
        "step": "write_image",
        "priority": 80,
        "reboot_requested": false,
        "args": {
            "image_info": image_info(node, stream_raw_images, local)?,
            "configdrive": node.instance_info.get("configdrive").cloned().unwrap_or(Value::Null),
        },
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_agent_gets_the_image_as_ironic_describes_it() {
        let mut node: Node = crate::node::tests_support::node();
        for (k, v) in [
            ("image_source", "http://127.0.0.1:8080/images/disk.raw"),
            ("image_os_hash_algo", "sha256"),
            ("image_os_hash_value", "feed"),
            ("image_disk_format", "raw"),
        ] {
            node.instance_info.insert(k.into(), json!(v));
        }
        let step = agent_write_image_step(&node, true, None).unwrap();
        let info = &step["args"]["image_info"];
        assert_eq!(info["id"], "disk.raw");
        assert_eq!(
            info["urls"],
            json!(["http://127.0.0.1:8080/images/disk.raw"])
        );
        assert_eq!(info["os_hash_algo"], "sha256");
        assert_eq!(info["os_hash_value"], "feed");
        assert_eq!(info["disk_format"], "raw");
        assert_eq!(info["stream_raw_images"], true);
        assert_eq!(info["image_type"], "whole-disk");
        assert_eq!(info["node_uuid"], json!(node.uuid));
        assert_eq!(step["priority"], 80);

        // The raw copy the conductor published replaces the image's URL, format and hash.
        let local = LocalImage {
            url: "http://10.0.0.1:8088/agent_images/n".to_owned(),
            sha256: "beef".to_owned(),
        };
        node.instance_info
            .insert("image_disk_format".into(), json!("qcow2"));
        node.instance_info
            .insert("image_checksum".into(), json!("c0ffee"));
        let step = agent_write_image_step(&node, true, Some(&local)).unwrap();
        let info = &step["args"]["image_info"];
        assert_eq!(info["urls"], json!([local.url]));
        assert_eq!(info["disk_format"], "raw");
        assert_eq!(info["os_hash_value"], "beef");
        assert!(info.get("checksum").is_none(), "{info}");
    }
}
