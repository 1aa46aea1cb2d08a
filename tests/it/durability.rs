//! The all-in-one's embedded database under faults of its disk: acknowledged writes survive a
//! file-system error followed by a crash (what a power cut leaves), a full or read-only disk
//! gives 503 with the cause while reads go on and the process stays up, and a database file that
//! vanished is not silently replaced by an empty one. And the multi-host stack's MariaDB made
//! read-only: the same 503 with the cause, reads served, writes back once it is writable.
//!
//! These start the real `ferrum` binary: the process dying, or not, is the point. The disk
//! faults need root (loop devices, tmpfs mounts); without it they say so loudly and return.

use std::{
    io::Write as _,
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    time::{Duration, Instant},
};

use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use diesel::sql_query;
use diesel_async::{AsyncConnection as _, AsyncMysqlConnection, RunQueryDsl as _};

use crate::util::{Api, Cluster, ClusterOptions, PrivateMariaDb, cluster::free_port};

/// A lease of 2 s renewed every 0.5 s: a process that stopped for failed renewals would do so
/// within a test's few seconds.
const SHORT_LEASE: &[(&str, &str)] = &[
    ("FERRUM_HEARTBEAT_INTERVAL", "0.5"),
    ("FERRUM_HEARTBEAT_TIMEOUT", "2"),
];

/// A `ferrum` all-in-one on the SQLite file `<dir>/ferrum.sqlite`, its log in `log`.
struct AllInOne {
    child: Child,
    api: Api,
    log: PathBuf,
}

impl AllInOne {
    /// Starts it and waits until it serves.
    async fn start(dir: &Path, log_dir: &Path, env: &[(&str, &str)]) -> AllInOne {
        let mut all = AllInOne::spawn(dir, log_dir, env);
        let deadline = Instant::now() + Duration::from_secs(30);
        while all.api.try_get("/").await.is_none() {
            if let Ok(Some(status)) = all.child.try_wait() {
                panic!("ferrum exited at start ({status}): {}", all.log_text());
            }
            assert!(Instant::now() < deadline, "not up: {}", all.log_text());
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        all
    }

    fn spawn(dir: &Path, log_dir: &Path, env: &[(&str, &str)]) -> AllInOne {
        let port = free_port();
        let log = log_dir.join(format!("ferrum-{port}.log"));
        let log_file = std::fs::File::create(&log).expect("log file");
        let mut command = Command::new(env!("CARGO_BIN_EXE_ferrum"));
        command
            .current_dir(dir)
            .env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("FERRUM_API_BIND", format!("127.0.0.1:{port}"))
            .env("FERRUM_DATABASE_URL", "sqlite://ferrum.sqlite")
            .env("RUST_BACKTRACE", "0")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log_file);
        for (name, value) in env {
            command.env(name, value);
        }
        AllInOne {
            child: command.spawn().expect("spawn ferrum"),
            api: Api::new(format!("http://127.0.0.1:{port}")),
            log,
        }
    }

    fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    fn is_running(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// SIGTERM, and the exit awaited.
    async fn stop(&mut self) {
        Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status()
            .expect("kill -TERM");
        let deadline = Instant::now() + Duration::from_secs(30);
        while self.is_running() {
            assert!(Instant::now() < deadline, "ferrum did not stop");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

impl Drop for AllInOne {
    fn drop(&mut self) {
        self.kill();
    }
}

fn temp_dir(what: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("ferrum-{what}-{}", uuid::Uuid::new_v4().simple()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    dir
}

fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| o.stdout.trim_ascii() == b"0")
}

/// Runs a command that must succeed; its output when it does not.
fn run(program: &str, args: &[&str]) -> String {
    let output = Command::new(program)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("{program}: {e}"));
    assert!(
        output.status.success(),
        "{program} {args:?}: {}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).trim().to_owned()
}

/// Says loudly why a disk-fault test did not run.
fn skipped(why: &str) {
    let _ = writeln!(
        std::io::stderr(),
        "\n!!!!!!!! {why}: the disk-fault test was NOT run !!!!!!!!\n"
    );
}

/// An ext4 file system on a loop device, mounted with `errors=remount-ro`; unmounted and
/// detached on drop.
struct LoopExt4 {
    image: PathBuf,
    device: String,
    mount: PathBuf,
    mounted: bool,
}

impl LoopExt4 {
    fn create() -> Option<LoopExt4> {
        if !is_root() {
            skipped("not root (loop devices and mounts need it)");
            return None;
        }
        if !Path::new("/dev/loop-control").exists() {
            skipped("no loop devices here");
            return None;
        }
        let base = temp_dir("ext4");
        let image = base.join("disk.img");
        let mount = base.join("mnt");
        std::fs::create_dir_all(&mount).expect("mount point");
        std::fs::File::create(&image)
            .and_then(|f| f.set_len(64 << 20))
            .expect("image");
        run("mkfs.ext4", &["-q", "-F", image.to_str().expect("path")]);
        let device = run("losetup", &["-f", "--show", image.to_str().expect("path")]);
        let mut fs = LoopExt4 {
            image,
            device,
            mount,
            mounted: false,
        };
        fs.mount();
        Some(fs)
    }

    fn mount(&mut self) {
        run(
            "mount",
            &[
                "-o",
                "errors=remount-ro",
                &self.device,
                self.mount.to_str().expect("path"),
            ],
        );
        self.mounted = true;
    }

    fn unmount(&mut self) {
        run("umount", &[self.mount.to_str().expect("path")]);
        self.mounted = false;
    }

    /// What a failing disk or a crash mid-write does to ext4: the file system is marked in
    /// error and, with `errors=remount-ro`, goes read-only at once; what was not on the disk by
    /// then never gets there.
    fn trigger_error(&self) {
        let name = Path::new(&self.device)
            .file_name()
            .and_then(|n| n.to_str())
            .expect("device name");
        std::fs::write(format!("/sys/fs/ext4/{name}/trigger_fs_error"), "x")
            .expect("trigger_fs_error");
    }

    /// Checks and repairs the file system as a boot after a crash does (`e2fsck -fy`: 0, 1 and
    /// 2 mean it is clean or was repaired).
    fn fsck(&self) {
        let status = Command::new("e2fsck")
            .args(["-fy", &self.device])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .expect("e2fsck");
        assert!(
            matches!(status.code(), Some(0..=2)),
            "e2fsck could not repair the file system: {status}"
        );
    }
}

impl Drop for LoopExt4 {
    fn drop(&mut self) {
        if self.mounted {
            let _ = Command::new("umount").arg("-l").arg(&self.mount).status();
        }
        let _ = Command::new("losetup").args(["-d", &self.device]).status();
        if let Some(base) = self.image.parent() {
            let _ = std::fs::remove_dir_all(base);
        }
    }
}

/// Every node the API lists, with its `extra`.
async fn nodes(api: &Api) -> Vec<Value> {
    let reply = api
        .get("/v1/nodes?fields=uuid,name,extra,reservation&limit=1000")
        .await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.body);
    reply.body["nodes"].as_array().expect("nodes").clone()
}

/// Nodes created and changed through the API (each answered 201 or 200) are all there after
/// the file system failed under the running all-in-one, the process was killed, and the disk
/// was repaired and mounted again: as after a power cut. With `synchronous = NORMAL` and no
/// group commit, none were.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acknowledged_writes_survive_a_file_system_error_and_a_crash() {
    let Some(mut disk) = LoopExt4::create() else {
        return;
    };
    let logs = temp_dir("ext4-logs");
    // A short lease, so that an exit for failed renewals would come within the test.
    let mut ferrum = AllInOne::start(&disk.mount, &logs, SHORT_LEASE).await;
    for i in 0..20 {
        let reply = ferrum
            .api
            .request(
                Method::POST,
                "/v1/nodes",
                Some(json!({"name": format!("kept-{i}"), "driver": "fake-hardware"})),
            )
            .await;
        assert_eq!(reply.status, StatusCode::CREATED, "{}", reply.body);
        let reply = ferrum
            .api
            .patch(
                &format!("kept-{i}"),
                json!([{"op": "add", "path": "/extra/written", "value": i}]),
            )
            .await;
        assert_eq!(reply.status, StatusCode::OK, "{}", reply.body);
    }
    // The file system fails and turns read-only under the running process: writes are refused
    // with 503 and the cause, reads go on, and the process outlives its lease many times over.
    disk.trigger_error();
    let reply = ferrum
        .api
        .patch(
            "kept-0",
            json!([{"op": "add", "path": "/extra/refused", "value": 1}]),
        )
        .await;
    assert_eq!(
        reply.status,
        StatusCode::SERVICE_UNAVAILABLE,
        "{}",
        reply.body
    );
    assert!(
        reply.fault().contains("could not be stored"),
        "{}",
        reply.fault()
    );
    still_serving_reads(&mut ferrum, "kept-0", Duration::from_secs(4)).await;
    ferrum.kill();
    disk.unmount();
    disk.fsck();
    disk.mount();

    let ferrum = AllInOne::start(&disk.mount, &logs, &[]).await;
    let nodes = nodes(&ferrum.api).await;
    let mut kept: Vec<(String, Value)> = nodes
        .iter()
        .map(|n| {
            (
                n["name"].as_str().unwrap_or("").to_owned(),
                n["extra"]["written"].clone(),
            )
        })
        .collect();
    kept.sort_by_key(|(name, _)| name[5..].parse::<u32>().unwrap_or(u32::MAX));
    let expected: Vec<(String, Value)> = (0..20).map(|i| (format!("kept-{i}"), json!(i))).collect();
    assert_eq!(kept, expected, "log: {}", ferrum.log_text());
    assert!(
        !ferrum.log_text().contains("Creating a new, empty database"),
        "{}",
        ferrum.log_text()
    );
    drop(ferrum);
    let _ = std::fs::remove_dir_all(&logs);
}

/// A first start announces the new database (a warning with its path, and the banner); once a
/// database file is gone while its lock file is still there, a start refuses to serve an empty
/// one unless told to create it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_database_that_vanished_is_not_replaced_without_being_told() {
    let dir = temp_dir("vanished");
    let mut first = AllInOne::start(&dir, &dir, &[]).await;
    first
        .api
        .create_node(json!({"name": "before", "driver": "fake-hardware"}))
        .await;
    first.stop().await;
    let log = first.log_text();
    assert!(log.contains("Creating a new, empty database at"), "{log}");
    assert!(log.contains(&dir.display().to_string()), "the path: {log}");
    assert!(log.contains("NEW and empty"), "the banner: {log}");

    // Restarted on the same file: nothing new to announce.
    let mut again = AllInOne::start(&dir, &dir, &[]).await;
    assert_eq!(nodes(&again.api).await.len(), 1);
    again.stop().await;
    assert!(
        !again.log_text().contains("NEW and empty"),
        "{}",
        again.log_text()
    );

    for file in ["ferrum.sqlite", "ferrum.sqlite-wal", "ferrum.sqlite-shm"] {
        let _ = std::fs::remove_file(dir.join(file));
    }
    let mut refused = AllInOne::spawn(&dir, &dir, &[]);
    let status = refused.child.wait().expect("exit");
    assert!(!status.success());
    let log = refused.log_text();
    assert!(log.contains("is gone"), "{log}");
    assert!(log.contains("FERRUM_DATABASE_RECREATE"), "{log}");
    assert!(!dir.join("ferrum.sqlite").exists(), "no new file was made");

    let mut recreated = AllInOne::start(&dir, &dir, &[("FERRUM_DATABASE_RECREATE", "true")]).await;
    assert_eq!(nodes(&recreated.api).await.len(), 0);
    recreated.stop().await;
    assert!(
        recreated.log_text().contains("NEW and empty"),
        "{}",
        recreated.log_text()
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// A small tmpfs mounted for one test; unmounted on drop.
struct Tmpfs {
    mount: PathBuf,
}

impl Tmpfs {
    fn create(size: &str) -> Option<Tmpfs> {
        if !is_root() {
            skipped("not root (a tmpfs mount needs it)");
            return None;
        }
        let mount = temp_dir("tmpfs");
        run(
            "mount",
            &[
                "-t",
                "tmpfs",
                "-o",
                &format!("size={size}"),
                "tmpfs",
                mount.to_str().expect("path"),
            ],
        );
        Some(Tmpfs { mount })
    }

    /// Fills the file system up with a file of its own; removing the file frees the space.
    fn fill(&self) -> PathBuf {
        let filler = self.mount.join("filler");
        let mut file = std::fs::File::create(&filler).expect("filler");
        let chunk = vec![0u8; 64 << 10];
        while file.write_all(&chunk).is_ok() {}
        let _ = file.sync_all();
        filler
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.mount).status();
        let _ = std::fs::remove_dir_all(&self.mount);
    }
}

/// A PATCH growing the node by `bytes` of `extra`.
async fn grow(api: &Api, node: &str, i: usize, bytes: usize) -> crate::util::Reply {
    api.patch(
        node,
        json!([{"op": "add", "path": format!("/extra/k{i}"), "value": "x".repeat(bytes)}]),
    )
    .await
}

/// Reads go on and the process stays up for longer than its lease could last, however long the
/// disk refuses writes.
async fn still_serving_reads(ferrum: &mut AllInOne, node: &str, for_how_long: Duration) {
    let until = Instant::now() + for_how_long;
    while Instant::now() < until {
        assert!(ferrum.is_running(), "ferrum exited: {}", ferrum.log_text());
        let reply = ferrum.api.get(&format!("/v1/nodes/{node}")).await;
        assert_eq!(reply.status, StatusCode::OK, "{}", reply.body);
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// A full disk under the all-in-one: writes get 503 in Ironic's envelope naming the cause,
/// reads are served, the process outlives several lease periods (it used to exit once its
/// renewals failed), no node stays locked, and writes work again within a second of the space
/// being freed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_disk_refuses_writes_with_the_cause_and_serves_reads() {
    let Some(disk) = Tmpfs::create("4m") else {
        return;
    };
    let logs = temp_dir("tmpfs-logs");
    let mut ferrum = AllInOne::start(&disk.mount, &logs, SHORT_LEASE).await;
    ferrum
        .api
        .create_node(json!({"name": "full", "driver": "fake-hardware"}))
        .await;

    // Full: writes grow the WAL until one finds no space.
    let filler = disk.fill();
    let mut refused = None;
    for i in 0..200 {
        let reply = grow(&ferrum.api, "full", i, 16 << 10).await;
        if reply.status != StatusCode::OK {
            refused = Some(reply);
            break;
        }
    }
    let refused = refused.expect("a write on a full disk is refused");
    assert_eq!(
        refused.status,
        StatusCode::SERVICE_UNAVAILABLE,
        "{}",
        refused.body
    );
    assert!(
        refused.fault().contains("out of space"),
        "{}",
        refused.fault()
    );
    let provision = ferrum.api.provision("full", "manage").await;
    assert_eq!(
        provision.status,
        StatusCode::SERVICE_UNAVAILABLE,
        "{}",
        provision.body
    );
    still_serving_reads(&mut ferrum, "full", Duration::from_secs(4)).await;

    std::fs::remove_file(&filler).expect("free the space");
    let freed = Instant::now();
    let reply = ferrum
        .api
        .patch(
            "full",
            json!([{"op": "add", "path": "/extra/after", "value": "space"}]),
        )
        .await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.body);
    assert!(freed.elapsed() < Duration::from_secs(1));
    ferrum.api.accepted("full", "manage").await;
    ferrum.api.wait_for("full", "manageable").await;

    let node = ferrum.api.node("full").await;
    assert_eq!(node["reservation"], Value::Null, "{node}");
    assert_eq!(node["extra"]["after"], "space");
    assert!(ferrum.is_running());
    drop(ferrum);
    let _ = std::fs::remove_dir_all(&logs);
}

/// MariaDB made read-only (`read_only`, which binds every user without the admin privilege)
/// under a multi-host deployment, for less than a lease: writes get 503 in Ironic's envelope
/// naming the cause, reads are served, no node stays locked, and writes work again within a
/// second of the server being writable. (A full disk under MariaDB: the next test.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_read_only_mariadb_refuses_writes_with_the_cause_and_serves_reads() {
    let Some(mariadb) = PrivateMariaDb::start().await else {
        return;
    };
    let mut root = AsyncMysqlConnection::establish(&format!("{}/mysql", mariadb.url()))
        .await
        .expect("connect as root");
    // A user as a deployment has one: its databases' privileges, nothing of the server's.
    // (Over TCP or, as the client prefers on loopback, the server's socket.)
    for host in ["127.0.0.1", "localhost"] {
        for statement in [
            format!("CREATE USER 'ferrum'@'{host}' IDENTIFIED BY 'ferrum'"),
            format!("GRANT ALL PRIVILEGES ON `ferrum\\_%`.* TO 'ferrum'@'{host}'"),
            format!("GRANT SELECT ON `mysql`.* TO 'ferrum'@'{host}'"),
        ] {
            sql_query(&statement)
                .execute(&mut root)
                .await
                .unwrap_or_else(|e| panic!("{statement}: {e}"));
        }
    }
    let as_user = mariadb.url().replace("root@", "ferrum:ferrum@");
    let Some(cluster) = Cluster::start(ClusterOptions {
        conductors: 1,
        mysql_url: Some(as_user),
        ..ClusterOptions::default()
    })
    .await
    else {
        return;
    };
    let api = cluster.api.clone();
    api.create_node(json!({"name": "ro", "driver": "fake-hardware"}))
        .await;

    sql_query("SET GLOBAL read_only = 1")
        .execute(&mut root)
        .await
        .expect("read-only");
    let refused = api
        .patch(
            "ro",
            json!([{"op": "add", "path": "/extra/k", "value": "v"}]),
        )
        .await;
    assert_eq!(
        refused.status,
        StatusCode::SERVICE_UNAVAILABLE,
        "{}",
        refused.body
    );
    assert!(refused.fault().contains("read-only"), "{}", refused.fault());
    let provision = api.provision("ro", "manage").await;
    assert_eq!(
        provision.status,
        StatusCode::SERVICE_UNAVAILABLE,
        "{}",
        provision.body
    );
    for _ in 0..8 {
        let reply = api.get("/v1/nodes/ro").await;
        assert_eq!(reply.status, StatusCode::OK, "{}", reply.body);
        tokio::time::sleep(Duration::from_millis(250)).await;
    }

    sql_query("SET GLOBAL read_only = 0")
        .execute(&mut root)
        .await
        .expect("writable");
    let writable = Instant::now();
    let reply = api
        .patch(
            "ro",
            json!([{"op": "add", "path": "/extra/after", "value": "writable"}]),
        )
        .await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.body);
    assert!(
        writable.elapsed() < Duration::from_secs(1),
        "{:?}",
        writable.elapsed()
    );
    api.accepted("ro", "manage").await;
    api.wait_for("ro", "manageable").await;
    let node = api.node("ro").await;
    assert_eq!(node["extra"]["after"], "writable", "{node}");
    assert!(node["extra"].get("k").is_none(), "{node}");
    cluster.assert_no_locks().await;
    drop(cluster);
    drop(mariadb);
}

/// MariaDB on a full disk under a multi-host deployment: a write that needs more space is refused
/// at once (InnoDB answers "The table is full") and gets 503 naming the cause, not an answer at
/// the request's timeout; reads are served; nothing stays locked; once space is freed, writes
/// work again within a second.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_mariadb_disk_refuses_growing_writes_at_once_and_serves_reads() {
    let Some(disk) = Tmpfs::create("200m") else {
        return;
    };
    let Some(mariadb) = PrivateMariaDb::start_in(disk.mount.join("mariadb")).await else {
        return;
    };
    let Some(cluster) = Cluster::start(ClusterOptions {
        conductors: 1,
        rpc_timeout: 20.0,
        mysql_url: Some(mariadb.url()),
        ..ClusterOptions::default()
    })
    .await
    else {
        return;
    };
    let api = cluster.api.clone();
    api.create_node(json!({"name": "full", "driver": "fake-hardware"}))
        .await;

    let filler = disk.fill();
    // Each PATCH stores 64 KiB more of the node: pages InnoDB must find room for.
    let mut refused = None;
    for i in 0..200 {
        let started = Instant::now();
        let reply = grow(&api, "full", i, 64 << 10).await;
        let took = started.elapsed();
        assert!(
            took < Duration::from_secs(2),
            "answered after {took:?}: {}",
            reply.body
        );
        match reply.status {
            StatusCode::OK => continue,
            StatusCode::SERVICE_UNAVAILABLE => {
                refused = Some(reply);
                break;
            }
            status => panic!("{status}: {}", reply.body),
        }
    }
    let refused = refused.expect("a write on the full disk is refused");
    assert!(
        refused.fault().contains("the database is out of space"),
        "{}",
        refused.fault()
    );
    for _ in 0..4 {
        let reply = api.get("/v1/nodes/full").await;
        assert_eq!(reply.status, StatusCode::OK, "{}", reply.body);
        tokio::time::sleep(Duration::from_millis(250)).await;
    }

    std::fs::remove_file(&filler).expect("free the space");
    let freed = Instant::now();
    let reply = grow(&api, "full", 1000, 64 << 10).await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.body);
    assert!(
        freed.elapsed() < Duration::from_secs(1),
        "{:?}",
        freed.elapsed()
    );
    api.accepted("full", "manage").await;
    api.wait_for("full", "manageable").await;
    cluster.assert_no_locks().await;
    drop(cluster);
    drop(mariadb);
}
