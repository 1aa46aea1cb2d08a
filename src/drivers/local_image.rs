//! Instance images the conductor fetches itself (Ironic's `[agent]image_download_source =
//! local`, with `[DEFAULT]force_raw_images`): the `direct` deploy downloads the image, checks it
//! against the checksum in `instance_info`, inspects it with `qemu-img`, converts it to raw and
//! puts it under `http_root`, from where the agent downloads it at `http_url` (served by the
//! conductor's own image server when `http_bind` is set, else by any web server over the same
//! directory). The agent then writes a raw image whatever the user gave: it needs no
//! `qemu-img` of its own, and an image it could not convert onto its disk deploys all the same.
//!
//! One file per node, `<http_root>/agent_images/<node uuid>`, removed when the deploy no longer
//! needs it (after the write, on failure, at tear-down). Unlike Ironic, there is no master cache
//! shared between nodes: two nodes deploying one image download it twice.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;
use serde_json::Value;
use sha2::{Digest, Sha256, Sha384, Sha512};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::config::{ConductorConfig, ImageDownloadSource};
use crate::drivers::DriverError;
use crate::node::Node;

/// The directory under `http_root` the images go to (Ironic's `[deploy]http_image_subdir`).
pub const IMAGE_SUBDIR: &str = "agent_images";

/// Where the conductor keeps and publishes the images it converts.
#[derive(Debug, Clone)]
pub struct LocalImages {
    root: PathBuf,
    url: Option<String>,
    default_source: ImageDownloadSource,
}

/// A raw image ready for the agent: where it downloads it and the image's SHA-256.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LocalImage {
    pub url: String,
    pub sha256: String,
}

/// The formats a downloaded image may have (Ironic's `[conductor]permitted_image_formats`
/// without `iso`, which `qemu-img` reads as raw anyway).
const PERMITTED_FORMATS: &[&str] = &["raw", "qcow2"];

impl LocalImages {
    pub fn new(config: &ConductorConfig) -> LocalImages {
        LocalImages {
            root: config.http_root.clone(),
            url: config.http_url.clone(),
            default_source: config.image_download_source,
        }
    }

    /// Where the agent gets `node`'s image: the node's `instance_info` (then `driver_info`)
    /// `image_download_source`, else the conductor's, as Ironic decides it.
    pub fn source_for(&self, node: &Node) -> Result<ImageDownloadSource, DriverError> {
        let named = [&node.instance_info, &node.driver_info]
            .into_iter()
            .find_map(|doc| doc.get("image_download_source"));
        match named {
            None | Some(Value::Null) => Ok(self.default_source),
            Some(Value::String(s)) => {
                ImageDownloadSource::parse(s).ok_or_else(|| invalid_source(s))
            }
            Some(other) => Err(invalid_source(&other.to_string())),
        }
    }

    fn path_of(&self, node_uuid: &str) -> PathBuf {
        self.root.join(IMAGE_SUBDIR).join(node_uuid)
    }

    /// Downloads `node`'s image, checks it, converts it to raw and publishes it. Any failure
    /// leaves nothing behind.
    pub async fn prepare(&self, node: &Node, source: &str) -> Result<LocalImage, DriverError> {
        let base = self.url.as_deref().ok_or_else(|| {
            DriverError::InvalidParameterValue(
                "image_download_source is local, but the conductor has no http_url to serve the image from".to_owned(),
            )
        })?;
        let expected = expected_hash(node)?;
        let dir = self.root.join(IMAGE_SUBDIR);
        tokio::fs::create_dir_all(&dir).await.map_err(|e| {
            DriverError::Failed(format!(
                "Cannot create the image directory {}: {e}",
                dir.display()
            ))
        })?;
        let target = self.path_of(&node.uuid);
        let downloaded = dir.join(format!("{}.download", node.uuid));
        let converted = dir.join(format!("{}.raw", node.uuid));
        let result = async {
            let got = download(source, &downloaded, expected.algo).await?;
            if !got.eq_ignore_ascii_case(&expected.value) {
                return Err(unacceptable(
                    source,
                    format!(
                        "its {} is {got}, not {} as instance_info says",
                        expected.algo.name(),
                        expected.value
                    ),
                ));
            }
            let declared = node
                .instance_info
                .get("image_disk_format")
                .and_then(Value::as_str);
            let format = inspect(source, &downloaded, declared).await?;
            if format == "raw" {
                tokio::fs::rename(&downloaded, &target).await
            } else {
                convert(source, &downloaded, &format, &converted).await?;
                tokio::fs::rename(&converted, &target).await
            }
            .map_err(|e| DriverError::Failed(format!("Cannot publish the image: {e}")))?;
            let sha256 = if format == "raw" && expected.algo == HashAlgo::Sha256 {
                got.to_ascii_lowercase()
            } else {
                hash_file(&target, HashAlgo::Sha256).await?
            };
            Ok(LocalImage {
                url: format!(
                    "{}/{IMAGE_SUBDIR}/{}",
                    base.trim_end_matches('/'),
                    node.uuid
                ),
                sha256,
            })
        }
        .await;
        for leftover in [&downloaded, &converted] {
            let _ = tokio::fs::remove_file(leftover).await;
        }
        if result.is_err() {
            let _ = tokio::fs::remove_file(&target).await;
        }
        result
    }

    /// Forgets `node`'s published image, if it has one.
    pub async fn remove(&self, node_uuid: &str) {
        let path = self.path_of(node_uuid);
        match tokio::fs::remove_file(&path).await {
            Ok(()) => {
                tracing::debug!(node.uuid = %node_uuid, "Removed the local image {}", path.display())
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => {
                tracing::warn!(node.uuid = %node_uuid, "Cannot remove the local image {}: {e}", path.display())
            }
        }
    }
}

fn invalid_source(value: &str) -> DriverError {
    DriverError::InvalidParameterValue(format!(
        "image_download_source can be one of ['http', 'local'], not {value}"
    ))
}

fn unacceptable(image: &str, reason: String) -> DriverError {
    DriverError::ImageUnacceptable {
        image: image.to_owned(),
        reason,
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum HashAlgo {
    Sha256,
    Sha384,
    Sha512,
}

impl HashAlgo {
    fn name(self) -> &'static str {
        match self {
            HashAlgo::Sha256 => "sha256",
            HashAlgo::Sha384 => "sha384",
            HashAlgo::Sha512 => "sha512",
        }
    }

    fn parse(name: &str) -> Option<HashAlgo> {
        [HashAlgo::Sha256, HashAlgo::Sha384, HashAlgo::Sha512]
            .into_iter()
            .find(|a| a.name().eq_ignore_ascii_case(name))
    }
}

/// A running digest of one of the algorithms.
enum Hasher {
    Sha256(Sha256),
    Sha384(Sha384),
    Sha512(Sha512),
}

impl Hasher {
    fn new(algo: HashAlgo) -> Hasher {
        match algo {
            HashAlgo::Sha256 => Hasher::Sha256(Sha256::new()),
            HashAlgo::Sha384 => Hasher::Sha384(Sha384::new()),
            HashAlgo::Sha512 => Hasher::Sha512(Sha512::new()),
        }
    }

    fn update(&mut self, data: &[u8]) {
        match self {
            Hasher::Sha256(h) => h.update(data),
            Hasher::Sha384(h) => h.update(data),
            Hasher::Sha512(h) => h.update(data),
        }
    }

    fn hex(self) -> String {
        let bytes: Vec<u8> = match self {
            Hasher::Sha256(h) => h.finalize().to_vec(),
            Hasher::Sha384(h) => h.finalize().to_vec(),
            Hasher::Sha512(h) => h.finalize().to_vec(),
        };
        bytes.iter().map(|b| format!("{b:02x}")).collect()
    }
}

struct ExpectedHash {
    algo: HashAlgo,
    value: String,
}

/// The hash the downloaded image must have: `image_os_hash_algo`/`_value`, else
/// `image_checksum` read by its length (an MD5 is refused: it proves nothing).
fn expected_hash(node: &Node) -> Result<ExpectedHash, DriverError> {
    let text = |key: &str| {
        node.instance_info
            .get(key)
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
    };
    if let (Some(algo), Some(value)) = (text("image_os_hash_algo"), text("image_os_hash_value")) {
        let algo = HashAlgo::parse(algo).ok_or_else(|| {
            DriverError::InvalidParameterValue(format!(
                "The conductor checks the images it downloads by sha256, sha384 or sha512, not by {algo}"
            ))
        })?;
        return Ok(ExpectedHash {
            algo,
            value: value.to_owned(),
        });
    }
    let checksum = text("image_checksum").ok_or_else(|| {
        DriverError::MissingParameterValue(format!(
            "Node {} has no image_os_hash_value or image_checksum to check its image by",
            node.uuid
        ))
    })?;
    let algo = match checksum.len() {
        64 => HashAlgo::Sha256,
        96 => HashAlgo::Sha384,
        128 => HashAlgo::Sha512,
        _ => {
            return Err(DriverError::InvalidParameterValue(
                "The conductor checks the images it downloads by sha256, sha384 or sha512: give image_os_hash_algo and image_os_hash_value".to_owned(),
            ));
        }
    };
    Ok(ExpectedHash {
        algo,
        value: checksum.to_owned(),
    })
}

/// One client for every image download: connection reuse, bounded waits, and the system's
/// CA bundle for `https` images (the crate is built without roots of its own).
fn client() -> Result<&'static reqwest::Client, DriverError> {
    static CLIENT: std::sync::OnceLock<reqwest::Client> = std::sync::OnceLock::new();
    if let Some(c) = CLIENT.get() {
        return Ok(c);
    }
    let mut builder = reqwest::Client::builder()
        .connect_timeout(Duration::from_secs(30))
        .read_timeout(Duration::from_secs(60));
    if let Ok(pem) = std::fs::read("/etc/ssl/certs/ca-certificates.crt") {
        for cert in reqwest::Certificate::from_pem_bundle(&pem).unwrap_or_default() {
            builder = builder.add_root_certificate(cert);
        }
    }
    let built = builder
        .build()
        .map_err(|e| DriverError::Failed(format!("Cannot build the image download client: {e}")))?;
    Ok(CLIENT.get_or_init(|| built))
}

/// Streams `url` into `path`, hashing as it goes; the hex digest.
async fn download(url: &str, path: &Path, algo: HashAlgo) -> Result<String, DriverError> {
    let failed = |e: String| unacceptable(url, format!("the conductor could not download it: {e}"));
    let mut response = client()?
        .get(url)
        .send()
        .await
        .map_err(|e| failed(e.to_string()))?;
    if !response.status().is_success() {
        return Err(failed(format!("HTTP {}", response.status())));
    }
    let mut file = tokio::fs::File::create(path)
        .await
        .map_err(|e| DriverError::Failed(format!("Cannot write {}: {e}", path.display())))?;
    let mut hasher = Hasher::new(algo);
    while let Some(chunk) = response.chunk().await.map_err(|e| failed(e.to_string()))? {
        hasher.update(&chunk);
        file.write_all(&chunk)
            .await
            .map_err(|e| DriverError::Failed(format!("Cannot write {}: {e}", path.display())))?;
    }
    file.flush()
        .await
        .map_err(|e| DriverError::Failed(format!("Cannot write {}: {e}", path.display())))?;
    Ok(hasher.hex())
}

/// Streams `url` into `path`; the SHA-256 of what arrived (the boot interfaces' image cache).
pub(crate) async fn download_sha256(url: &str, path: &Path) -> Result<String, DriverError> {
    download(url, path, HashAlgo::Sha256).await
}

/// The SHA-256 of the file at `path`.
pub(crate) async fn sha256_of_file(path: &Path) -> Result<String, DriverError> {
    hash_file(path, HashAlgo::Sha256).await
}

async fn hash_file(path: &Path, algo: HashAlgo) -> Result<String, DriverError> {
    let fail =
        |e: std::io::Error| DriverError::Failed(format!("Cannot read {}: {e}", path.display()));
    let mut file = tokio::fs::File::open(path).await.map_err(fail)?;
    let mut hasher = Hasher::new(algo);
    let mut buffer = vec![0_u8; 1 << 20];
    loop {
        let n = file.read(&mut buffer).await.map_err(fail)?;
        if n == 0 {
            return Ok(hasher.hex());
        }
        hasher.update(&buffer[..n]);
    }
}

/// What `qemu-img info --output=json` says of an image, as far as it matters here.
#[derive(Debug, Deserialize)]
struct ImageInfo {
    format: String,
    #[serde(rename = "backing-filename")]
    backing_filename: Option<String>,
    #[serde(rename = "format-specific")]
    format_specific: Option<Value>,
}

/// The image's format, refusing what is unsafe to convert: a format not permitted, one other
/// than the declared `image_disk_format`, a backing file or an external data file (either would
/// make `qemu-img` read a file of the conductor's host into the image).
async fn inspect(url: &str, path: &Path, declared: Option<&str>) -> Result<String, DriverError> {
    let output =
        run_qemu_img(&["info".as_ref(), "--output=json".as_ref(), path.as_os_str()]).await?;
    let info: ImageInfo = serde_json::from_slice(&output)
        .map_err(|e| DriverError::Failed(format!("Cannot read qemu-img's report: {e}")))?;
    if !PERMITTED_FORMATS.contains(&info.format.as_str()) {
        return Err(unacceptable(
            url,
            format!(
                "its format {} is not one of the permitted formats {PERMITTED_FORMATS:?}",
                info.format
            ),
        ));
    }
    // A declared `gpt` or `iso` image is raw to qemu-img.
    if let Some(declared) = declared.filter(|d| !d.is_empty())
        && declared != info.format
        && !(info.format == "raw" && matches!(declared, "gpt" | "iso"))
    {
        return Err(unacceptable(
            url,
            format!(
                "it is a {} image, not {declared} as image_disk_format says",
                info.format
            ),
        ));
    }
    if let Some(backing) = info.backing_filename {
        return Err(unacceptable(
            url,
            format!("it names a backing file ({backing})"),
        ));
    }
    if info
        .format_specific
        .as_ref()
        .and_then(|f| f.pointer("/data/data-file"))
        .is_some()
    {
        return Err(unacceptable(
            url,
            "it names an external data file".to_owned(),
        ));
    }
    Ok(info.format)
}

async fn convert(url: &str, from: &Path, format: &str, to: &Path) -> Result<(), DriverError> {
    run_qemu_img(&[
        "convert".as_ref(),
        "-f".as_ref(),
        format.as_ref(),
        "-O".as_ref(),
        "raw".as_ref(),
        from.as_os_str(),
        to.as_os_str(),
    ])
    .await
    .map(drop)
    .map_err(|e| unacceptable(url, format!("it could not be converted to raw: {e}")))
}

async fn run_qemu_img(args: &[&std::ffi::OsStr]) -> Result<Vec<u8>, DriverError> {
    let output = tokio::process::Command::new("qemu-img")
        .args(args)
        .kill_on_drop(true)
        .output()
        .await
        .map_err(|e| DriverError::Failed(format!("Cannot run qemu-img: {e}")))?;
    if !output.status.success() {
        return Err(DriverError::Failed(format!(
            "qemu-img {} failed: {}",
            args.first()
                .map(|a| a.to_string_lossy())
                .unwrap_or_default(),
            String::from_utf8_lossy(&output.stderr).trim()
        )));
    }
    Ok(output.stdout)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hex_of(algo: HashAlgo, data: &[u8]) -> String {
        let mut h = Hasher::new(algo);
        h.update(data);
        h.hex()
    }

    #[test]
    fn digests_are_lower_case_hex_of_the_right_length() {
        assert_eq!(
            hex_of(HashAlgo::Sha256, b"abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        assert_eq!(hex_of(HashAlgo::Sha384, b"").len(), 96);
        assert_eq!(hex_of(HashAlgo::Sha512, b"").len(), 128);
    }

    fn node_with(info: serde_json::Value) -> Node {
        let mut node: Node = crate::node::tests_support::node();
        if let serde_json::Value::Object(map) = info {
            node.instance_info.extend(map);
        }
        node
    }

    #[test]
    fn the_expected_hash_comes_from_os_hash_or_a_sha_checksum() {
        let node = node_with(serde_json::json!({
            "image_os_hash_algo": "SHA512", "image_os_hash_value": "ab"}));
        let e = expected_hash(&node).unwrap();
        assert_eq!((e.algo, e.value.as_str()), (HashAlgo::Sha512, "ab"));
        let node = node_with(serde_json::json!({"image_checksum": "a".repeat(64)}));
        assert_eq!(expected_hash(&node).unwrap().algo, HashAlgo::Sha256);
        let md5 = node_with(serde_json::json!({"image_checksum": "a".repeat(32)}));
        assert!(expected_hash(&md5).is_err());
        let md5 = node_with(serde_json::json!({
            "image_os_hash_algo": "md5", "image_os_hash_value": "ab"}));
        assert!(expected_hash(&md5).is_err());
        assert!(expected_hash(&node_with(serde_json::json!({}))).is_err());
    }

    async fn qemu_img_image(dir: &Path, format: &str, extra: &[&str]) -> PathBuf {
        let path = dir.join(format!("image.{format}"));
        let mut args = vec!["create", "-q", "-f", format];
        args.extend_from_slice(extra);
        let path_text = path.to_string_lossy().into_owned();
        args.push(&path_text);
        args.push("1M");
        let status = tokio::process::Command::new("qemu-img")
            .args(&args)
            .status()
            .await
            .expect("qemu-img (package qemu-utils) runs");
        assert!(status.success());
        path
    }

    fn temp_dir(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!(
            "ferrum-local-image-{name}-{}",
            uuid::Uuid::new_v4()
        ));
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[tokio::test]
    async fn inspection_takes_qcow2_and_raw_and_refuses_backing_files_and_lies() {
        let dir = temp_dir("inspect");
        let qcow2 = qemu_img_image(&dir, "qcow2", &[]).await;
        assert_eq!(inspect("u", &qcow2, Some("qcow2")).await.unwrap(), "qcow2");
        assert_eq!(inspect("u", &qcow2, None).await.unwrap(), "qcow2");
        let e = inspect("u", &qcow2, Some("raw"))
            .await
            .unwrap_err()
            .to_string();
        assert!(e.contains("not raw as image_disk_format says"), "{e}");

        let raw = qemu_img_image(&dir, "raw", &[]).await;
        assert_eq!(inspect("u", &raw, Some("gpt")).await.unwrap(), "raw");

        let backed = dir.join("backed.qcow2");
        let status = tokio::process::Command::new("qemu-img")
            .args(["create", "-q", "-f", "qcow2", "-F", "raw", "-b"])
            .arg(&raw)
            .arg(&backed)
            .status()
            .await
            .unwrap();
        assert!(status.success());
        let e = inspect("u", &backed, None).await.unwrap_err().to_string();
        assert!(e.contains("backing file"), "{e}");

        let vmdk = qemu_img_image(&dir, "vmdk", &[]).await;
        let e = inspect("u", &vmdk, None).await.unwrap_err().to_string();
        assert!(e.contains("not one of the permitted formats"), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[tokio::test]
    async fn a_converted_image_is_raw_with_the_same_contents() {
        let dir = temp_dir("convert");
        let raw = dir.join("disk.raw");
        let content: Vec<u8> = (0..(1 << 20)).map(|i: u32| (i % 251) as u8).collect();
        std::fs::write(&raw, &content).unwrap();
        let qcow2 = dir.join("disk.qcow2");
        let status = tokio::process::Command::new("qemu-img")
            .args(["convert", "-q", "-f", "raw", "-O", "qcow2"])
            .arg(&raw)
            .arg(&qcow2)
            .status()
            .await
            .unwrap();
        assert!(status.success());
        let back = dir.join("back.raw");
        convert("u", &qcow2, "qcow2", &back).await.unwrap();
        assert_eq!(std::fs::read(&back).unwrap(), content);
        assert_eq!(
            hash_file(&back, HashAlgo::Sha256).await.unwrap(),
            hex_of(HashAlgo::Sha256, &content)
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
