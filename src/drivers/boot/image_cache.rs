//! The cache of deploy (and rescue) kernels and ramdisks the network boot interfaces publish
//! (Ironic's `[pxe]image_cache_size` / `image_cache_ttl` master image cache): each URL is
//! fetched once into `<root>/master_images/`, its SHA-256 recorded beside it, and hard-linked
//! into each node's directory, so that evicting a master copy never takes a file from a node
//! that is booting. The cache is bounded by size (least recently used first) and by age (a copy
//! older than the TTL is fetched again when next asked for). Its state is the directory itself:
//! conductors sharing a root share the cache, and a restart loses nothing.

use std::{
    collections::HashMap,
    path::{Path, PathBuf},
    sync::{Arc, LazyLock, Mutex},
    time::{Duration, SystemTime},
};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::{io_failed, replace_file};
use crate::drivers::{
    DriverError,
    local_image::{download_sha256, sha256_of_file},
};

/// The directory of the master copies under the root (Ironic's `master_images`).
pub const MASTER_DIR: &str = "master_images";

#[derive(Debug, Clone)]
pub struct ImageCache {
    dir: PathBuf,
    /// Bytes the master copies may take in all; 0 is unbounded.
    size_limit: u64,
    /// How long a master copy is used before it is fetched again.
    ttl: Duration,
}

/// What is recorded beside a master copy.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
struct Record {
    url: String,
    sha256: String,
    size: u64,
}

/// One lock per master copy within this process, so that two nodes asking for one URL at once
/// fetch it once. (Across processes the rename into place keeps the copy whole.)
static FETCHING: LazyLock<Mutex<HashMap<PathBuf, Arc<tokio::sync::Mutex<()>>>>> =
    LazyLock::new(Mutex::default);

impl ImageCache {
    pub fn new(root: &Path, size_limit_mib: u64, ttl: Duration) -> ImageCache {
        ImageCache {
            dir: root.join(MASTER_DIR),
            size_limit: size_limit_mib.saturating_mul(1 << 20),
            ttl,
        }
    }

    /// The master copy's path for `url`: named by the URL's SHA-256, so any URL is a safe name.
    fn master_of(&self, url: &str) -> PathBuf {
        let digest = Sha256::digest(url.as_bytes());
        let name: String = digest[..16].iter().map(|b| format!("{b:02x}")).collect();
        self.dir.join(name)
    }

    /// Puts the image at `url` (`http(s)://` or `file://`) at `dest`, a hard link to its master
    /// copy, fetched first when it is not cached, is older than the TTL, or no longer has the
    /// size recorded for it. The SHA-256 of the image.
    pub async fn link(&self, url: &str, dest: &Path) -> Result<String, DriverError> {
        let record = self.fetch(url).await?;
        let master = self.master_of(url);
        // Replaced, not overwritten: a node still reading the old link keeps its file.
        replace_file(dest, async |staged| std::fs::hard_link(&master, staged)).await?;
        Ok(record.sha256)
    }

    async fn fetch(&self, url: &str) -> Result<Record, DriverError> {
        let master = self.master_of(url);
        let lock = {
            let mut locks = FETCHING.lock().unwrap_or_else(|e| e.into_inner());
            locks.entry(master.clone()).or_default().clone()
        };
        let _fetching = lock.lock().await;
        if let Some(record) = self.fresh(&master, url) {
            touch(&record_path(&master));
            return Ok(record);
        }
        std::fs::create_dir_all(&self.dir).map_err(|e| io_failed("create", &self.dir, &e))?;
        let part = master.with_extension(format!("part-{}", std::process::id()));
        let fetched = fetch_into(url, &part).await;
        let sha256 = match fetched {
            Ok(sha256) => sha256,
            Err(e) => {
                let _ = std::fs::remove_file(&part);
                return Err(e);
            }
        };
        let size = std::fs::metadata(&part)
            .map_err(|e| io_failed("read", &part, &e))?
            .len();
        std::fs::rename(&part, &master).map_err(|e| io_failed("rename", &master, &e))?;
        let record = Record {
            url: url.to_owned(),
            sha256,
            size,
        };
        let text = serde_json::to_vec(&record).unwrap_or_default();
        std::fs::write(record_path(&master), text)
            .map_err(|e| io_failed("write", &record_path(&master), &e))?;
        tracing::info!(url, sha256 = %record.sha256, size, "Cached boot image {url}");
        self.evict(&master);
        Ok(record)
    }

    /// The record of a master copy still good to use: of this URL, younger than the TTL, and of
    /// the recorded size.
    fn fresh(&self, master: &Path, url: &str) -> Option<Record> {
        let text = std::fs::read(record_path(master)).ok()?;
        let record: Record = serde_json::from_slice(&text).ok()?;
        let meta = std::fs::metadata(master).ok()?;
        let age = meta.modified().ok()?.elapsed().unwrap_or_default();
        (record.url == url && meta.len() == record.size && age < self.ttl).then_some(record)
    }

    /// Removes the least recently used master copies (their records' modification time) until
    /// the cache fits its size, never `keep`, the copy just fetched. Nodes keep their links.
    fn evict(&self, keep: &Path) {
        if self.size_limit == 0 {
            return;
        }
        let Ok(entries) = std::fs::read_dir(&self.dir) else {
            return;
        };
        let mut copies = Vec::new();
        for entry in entries.flatten() {
            let path = entry.path();
            if path.extension().is_some() {
                continue;
            }
            let (Ok(meta), Ok(used)) = (entry.metadata(), std::fs::metadata(record_path(&path)))
            else {
                continue;
            };
            let used = used.modified().unwrap_or(SystemTime::UNIX_EPOCH);
            copies.push((used, meta.len(), path));
        }
        let mut total: u64 = copies.iter().map(|(_, size, _)| size).sum();
        copies.sort();
        for (_, size, path) in copies {
            if total <= self.size_limit {
                break;
            }
            if path == keep {
                continue;
            }
            tracing::info!(path = %path.display(), "Evicting cached boot image {}", path.display());
            let _ = std::fs::remove_file(record_path(&path));
            let _ = std::fs::remove_file(&path);
            total = total.saturating_sub(size);
        }
    }
}

fn record_path(master: &Path) -> PathBuf {
    master.with_extension("json")
}

/// Marks a master copy used now (for the least-recently-used order).
fn touch(path: &Path) {
    if let Ok(file) = std::fs::File::options().append(true).open(path) {
        let _ = file.set_modified(SystemTime::now());
    }
}

/// Fetches `url` into `part`; its SHA-256.
async fn fetch_into(url: &str, part: &Path) -> Result<String, DriverError> {
    let lower = url.to_ascii_lowercase();
    if lower.starts_with("http://") || lower.starts_with("https://") {
        return download_sha256(url, part).await;
    }
    let Some(path) = url.strip_prefix("file://") else {
        return Err(DriverError::InvalidParameterValue(format!(
            "Cannot fetch boot image {url}: only http://, https:// and file:// URLs are supported"
        )));
    };
    tokio::fs::copy(path, part)
        .await
        .map_err(|e| DriverError::Failed(format!("Cannot fetch boot image {url}: {e}")))?;
    sha256_of_file(part).await
}

#[cfg(test)]
mod tests {
    use super::*;

    fn temp_dir(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!(
            "ferrum-image-cache-{name}-{}-{}",
            std::process::id(),
            SystemTime::now()
                .duration_since(SystemTime::UNIX_EPOCH)
                .unwrap_or_default()
                .as_nanos()
        ));
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    fn inode(path: &Path) -> u64 {
        use std::os::unix::fs::MetadataExt;
        std::fs::metadata(path).unwrap().ino()
    }

    #[tokio::test]
    async fn an_image_is_fetched_once_and_linked_per_node() {
        let dir = temp_dir("once");
        let source = dir.join("kernel");
        std::fs::write(&source, b"kernel bytes").unwrap();
        let url = format!("file://{}", source.display());
        let cache = ImageCache::new(&dir.join("root"), 1, Duration::from_secs(3600));
        let (a, b) = (
            dir.join("root/n1/deploy_kernel"),
            dir.join("root/n2/deploy_kernel"),
        );
        let sha = cache.link(&url, &a).await.unwrap();
        let expected: String = Sha256::digest(b"kernel bytes")
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        assert_eq!(sha, expected);
        // The source changing does not change the cached copy within the TTL.
        std::fs::write(&source, b"other bytes!").unwrap();
        cache.link(&url, &b).await.unwrap();
        assert_eq!(std::fs::read(&b).unwrap(), b"kernel bytes");
        assert_eq!(inode(&a), inode(&b));
        assert_eq!(inode(&a), inode(&cache.master_of(&url)));
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[tokio::test]
    async fn a_stale_copy_is_fetched_again_and_nodes_keep_theirs() {
        let dir = temp_dir("stale");
        let source = dir.join("ramdisk");
        std::fs::write(&source, b"first").unwrap();
        let url = format!("file://{}", source.display());
        let cache = ImageCache::new(&dir.join("root"), 0, Duration::ZERO);
        let old = dir.join("root/n1/deploy_ramdisk");
        let first = cache.link(&url, &old).await.unwrap();
        std::fs::write(&source, b"second").unwrap();
        let new = dir.join("root/n2/deploy_ramdisk");
        let second = cache.link(&url, &new).await.unwrap();
        assert_ne!(first, second);
        assert_eq!(std::fs::read(&old).unwrap(), b"first");
        assert_eq!(std::fs::read(&new).unwrap(), b"second");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[tokio::test]
    async fn the_least_recently_used_copies_go_when_the_cache_is_full() {
        let dir = temp_dir("evict");
        // 1 MiB limit, three images of 600 KiB: the first two cannot both stay.
        let cache = ImageCache::new(&dir.join("root"), 1, Duration::from_secs(3600));
        let mut urls = Vec::new();
        for name in ["a", "b", "c"] {
            let source = dir.join(name);
            std::fs::write(&source, vec![name.as_bytes()[0]; 600 << 10]).unwrap();
            let url = format!("file://{}", source.display());
            cache
                .link(&url, &dir.join(format!("root/n-{name}/k")))
                .await
                .unwrap();
            urls.push(url);
            std::thread::sleep(Duration::from_millis(20));
        }
        assert!(!cache.master_of(&urls[0]).exists());
        assert!(!cache.master_of(&urls[1]).exists());
        assert!(cache.master_of(&urls[2]).exists());
        // The nodes' links outlive the eviction.
        assert_eq!(
            std::fs::read(dir.join("root/n-a/k")).unwrap().len(),
            600 << 10
        );
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[tokio::test]
    async fn a_missing_file_or_an_unknown_scheme_is_a_clear_error() {
        let dir = temp_dir("errors");
        let cache = ImageCache::new(&dir, 0, Duration::from_secs(60));
        let e = cache
            .link("file:///nonexistent/kernel", &dir.join("n/k"))
            .await
            .unwrap_err();
        assert!(
            e.to_string()
                .contains("Cannot fetch boot image file:///nonexistent/kernel"),
            "{e}"
        );
        let e = cache
            .link("glance://x", &dir.join("n/k"))
            .await
            .unwrap_err();
        assert!(
            e.to_string().contains("only http://, https:// and file://"),
            "{e}"
        );
        assert!(!cache.dir.exists() || std::fs::read_dir(&cache.dir).unwrap().next().is_none());
        let _ = std::fs::remove_dir_all(&dir);
    }
}
