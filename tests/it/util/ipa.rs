//! The real Ironic Python Agent as a test peer, through the repository's sandbox script
//! (`tests/peers/ipa-sandbox.sh`, see `tests/peers/README.md`): one unprivileged agent per
//! [`Agent`], with a plain file as its only disk, looking its node up by one MAC; and a loopback
//! HTTP server for the images it downloads.

use std::{
    collections::HashMap,
    path::PathBuf,
    process::Command,
    sync::{Arc, Mutex},
    time::Duration,
};

use axum::{
    Router,
    body::Body,
    extract::{Path, State},
    http::StatusCode,
    response::Response,
    routing::get,
};

use super::services::{ipa_sandbox, random_suffix};

/// One running agent; stopped (and its directory removed) when dropped.
pub struct Agent {
    script: PathBuf,
    pub dir: PathBuf,
    /// The agent's disk: a plain file the image is written into.
    pub disk: PathBuf,
    pub log: PathBuf,
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("free port")
}

/// A MAC address of the locally administered range, different for each call.
pub fn random_mac() -> String {
    let id = uuid::Uuid::new_v4();
    let b = id.as_bytes();
    format!("52:54:00:{:02x}:{:02x}:{:02x}", b[0], b[1], b[2])
}

impl Agent {
    /// Starts an agent that talks to the API at `api_url` and looks itself up by `mac`, with a
    /// disk of `disk_size` (e.g. "16M"). None when the sandbox cannot run here (announced, or
    /// a failure under `FERRUM_REQUIRE_SERVICES=1`).
    pub fn start(api_url: &str, mac: &str, disk_size: &str) -> Option<Agent> {
        Agent::start_with(api_url, mac, disk_size, &[])
    }

    /// [`Agent::start`] with more of the agent's own arguments (`--inspection_callback_url ...`).
    pub fn start_with(api_url: &str, mac: &str, disk_size: &str, extra: &[&str]) -> Option<Agent> {
        let script = ipa_sandbox()?;
        let dir = std::env::temp_dir().join(format!("ferrum-ipa-{}", random_suffix()));
        let port = free_port();
        let out = Command::new("bash")
            .arg(&script)
            .args(["start", "--api-url", api_url, "--mac", mac])
            .args(["--port", &port.to_string(), "--disk-size", disk_size])
            .arg("--dir")
            .arg(&dir)
            // An image that fails its checksum is fetched again once, 1 s later (the agent's
            // defaults, 9 times 10 s apart, are for flaky networks, not for tests).
            .args(["--extra-args", "--lookup_interval", "1"])
            .args(["--image_download_connection_retries", "1"])
            .args(["--image_download_connection_retry_interval", "1"])
            .args(extra)
            .output()
            .expect("run the IPA sandbox script");
        assert!(
            out.status.success(),
            "the IPA sandbox did not start: {}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        let vars: HashMap<String, String> = String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter_map(|l| l.split_once('='))
            .map(|(k, v)| {
                (
                    k.to_owned(),
                    v.trim_matches('\'').trim_matches('"').to_owned(),
                )
            })
            .collect();
        Some(Agent {
            script,
            disk: vars
                .get("IPA_DISK")
                .map_or_else(|| dir.join("disk.img"), PathBuf::from),
            log: vars
                .get("IPA_LOG")
                .map_or_else(|| dir.join("ipa.log"), PathBuf::from),
            dir,
        })
    }

    /// Stops the agent (SIGTERM to its process group, as the script does it), keeping its files.
    pub fn stop(&self) {
        let _ = Command::new("bash")
            .arg(&self.script)
            .args(["stop", "--dir"])
            .arg(&self.dir)
            .output();
    }

    /// The agent's log and the sandbox's record of the commands it ran, for a failing test's
    /// message.
    pub fn log_text(&self) -> String {
        let log = std::fs::read_to_string(&self.log).unwrap_or_default();
        let shims = std::fs::read_to_string(self.dir.join("shims.log")).unwrap_or_default();
        format!("{log}\n--- commands the agent ran (shims.log) ---\n{shims}")
    }

    /// Writes `bytes` at the start of the agent's disk, as an earlier boot would have left it.
    pub fn fill_disk(&self, bytes: &[u8]) {
        use std::io::Write as _;
        let mut disk = std::fs::OpenOptions::new()
            .write(true)
            .open(&self.disk)
            .expect("open the agent's disk");
        disk.write_all(bytes).expect("write the agent's disk");
    }

    /// Makes the agent's disk read-only to the agent (an unprivileged process: the mode binds
    /// it), so that a step writing it fails in the agent.
    pub fn make_disk_read_only(&self) {
        use std::os::unix::fs::PermissionsExt as _;
        std::fs::set_permissions(&self.disk, std::fs::Permissions::from_mode(0o444))
            .expect("chmod the agent's disk");
    }

    /// The first `len` bytes of the agent's disk.
    pub fn disk_prefix(&self, len: usize) -> Vec<u8> {
        let mut bytes = std::fs::read(&self.disk).expect("read the agent's disk");
        bytes.truncate(len);
        bytes
    }
}

impl Drop for Agent {
    fn drop(&mut self) {
        let _ = Command::new("bash")
            .arg(&self.script)
            .args(["stop", "--rm", "--dir"])
            .arg(&self.dir)
            .output();
    }
}

/// A whole-disk raw image of `size` bytes (a multiple of 512): an MBR with one Linux partition
/// from 1 MiB to the end (the agent checks that a written disk has a partition table), and
/// bytes that differ from image to image (`seed`) after it.
pub fn raw_disk_image(size: usize, seed: u64) -> Vec<u8> {
    assert!(size.is_multiple_of(512) && size > 2 << 20, "size");
    let mut image = vec![0_u8; size];
    let sectors = (size / 512) as u32;
    let entry = &mut image[446..462];
    entry[4] = 0x83;
    entry[8..12].copy_from_slice(&2048_u32.to_le_bytes());
    entry[12..16].copy_from_slice(&(sectors - 2048).to_le_bytes());
    image[440..444].copy_from_slice(&(seed as u32 | 1).to_le_bytes()); // disk signature
    image[510] = 0x55;
    image[511] = 0xAA;
    let mut x = seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    for byte in &mut image[1 << 20..] {
        x = x
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        *byte = (x >> 56) as u8;
    }
    image
}

/// The SHA-256 of `bytes`, in hex (by the system's `sha256sum`).
pub fn sha256_hex(bytes: &[u8]) -> String {
    let path = std::env::temp_dir().join(format!("ferrum-sha-{}", random_suffix()));
    std::fs::write(&path, bytes).expect("write for sha256sum");
    let out = Command::new("sha256sum")
        .arg(&path)
        .output()
        .expect("sha256sum");
    let _ = std::fs::remove_file(&path);
    String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .next()
        .expect("a sha256 sum")
        .to_owned()
}

#[derive(Clone, Default)]
struct Images {
    files: Arc<Mutex<HashMap<String, Arc<Vec<u8>>>>>,
    /// Per image: a pause after each 64 KiB sent, to make a download slow.
    drip: Arc<Mutex<HashMap<String, Duration>>>,
    served: Arc<Mutex<HashMap<String, usize>>>,
}

/// Images served over loopback HTTP at `{base}/images/<name>`, as an image server would.
pub struct ImageServer {
    pub base: String,
    images: Images,
    task: tokio::task::JoinHandle<()>,
}

impl ImageServer {
    pub async fn start() -> ImageServer {
        let images = Images::default();
        let app = Router::new()
            .route("/images/{name}", get(serve))
            .with_state(images.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind the image server");
        let base = format!("http://{}", listener.local_addr().expect("address"));
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        ImageServer { base, images, task }
    }

    /// Serves `bytes` as `name`; returns its URL.
    pub fn add(&self, name: &str, bytes: Vec<u8>) -> String {
        self.images
            .files
            .lock()
            .expect("image server state")
            .insert(name.to_owned(), Arc::new(bytes));
        format!("{}/images/{name}", self.base)
    }

    /// Makes downloads of `name` pause `pause` after every 64 KiB.
    pub fn drip(&self, name: &str, pause: Duration) {
        self.images
            .drip
            .lock()
            .expect("image server state")
            .insert(name.to_owned(), pause);
    }

    /// How many times `name` was downloaded.
    pub fn served(&self, name: &str) -> usize {
        self.images
            .served
            .lock()
            .expect("image server state")
            .get(name)
            .copied()
            .unwrap_or(0)
    }
}

impl Drop for ImageServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn serve(State(images): State<Images>, Path(name): Path<String>) -> Response {
    let Some(bytes) = images
        .files
        .lock()
        .expect("image server state")
        .get(&name)
        .cloned()
    else {
        return Response::builder()
            .status(StatusCode::NOT_FOUND)
            .body(Body::from("no such image"))
            .expect("a response");
    };
    *images
        .served
        .lock()
        .expect("image server state")
        .entry(name.clone())
        .or_default() += 1;
    let pause = images
        .drip
        .lock()
        .expect("image server state")
        .get(&name)
        .copied();
    let len = bytes.len();
    let body = match pause {
        None => Body::from(bytes.as_ref().clone()),
        Some(pause) => {
            let chunks = futures::stream::unfold(0_usize, move |at| {
                let bytes = bytes.clone();
                async move {
                    if at >= bytes.len() {
                        return None;
                    }
                    tokio::time::sleep(pause).await;
                    let end = (at + (64 << 10)).min(bytes.len());
                    let chunk = bytes[at..end].to_vec();
                    Some((Ok::<_, std::io::Error>(chunk), end))
                }
            });
            Body::from_stream(chunks)
        }
    };
    Response::builder()
        .header("content-type", "application/octet-stream")
        .header("content-length", len.to_string())
        .body(body)
        .expect("a response")
}
