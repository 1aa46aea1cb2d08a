//! The power-state sync's figures: one all-in-one service in process (SQLite), `--bmcs` Redfish
//! emulators (sushy-tools, through the shared script) of `--systems` systems each, one redfish
//! node per system written straight into the database, then `--rounds` sync rounds run one after
//! the other, each printed with its time, the GETs the emulators served per node (from their
//! access logs) and the most nodes in flight per BMC and overall.
//!
//! ```sh
//! FERRUM_REDFISH_EMULATOR_VENV=/tmp/ferrum-redfish-emu/venv \
//! cargo run --release --example power_sync_bench -- --bmcs 4 --systems 250
//! ```

#![expect(clippy::print_stdout, reason = "a benchmark's figures are its output")]

use std::{
    path::PathBuf,
    process::Command,
    time::{Duration, Instant},
};

use anyhow::{Context as _, bail};
use ferrum::{
    conductor::power_sync,
    config::Config,
    db::{self, nodes::PowerScan},
    drivers::Registry,
    node::{Interfaces, Json, Node, PowerState},
    service::AllInOne,
    states::ProvisionState,
};
use futures::StreamExt as _;
use tokio_util::sync::CancellationToken;

struct Options {
    bmcs: usize,
    systems: usize,
    workers: usize,
    per_bmc: usize,
    rounds: usize,
}

fn options() -> anyhow::Result<Options> {
    let mut o = Options {
        bmcs: 4,
        systems: 250,
        workers: 8,
        per_bmc: 2,
        rounds: 3,
    };
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let mut value =
            || -> anyhow::Result<usize> { Ok(args.next().context("missing value")?.parse()?) };
        match a.as_str() {
            "--bmcs" => o.bmcs = value()?,
            "--systems" => o.systems = value()?,
            "--workers" => o.workers = value()?,
            "--per-bmc" => o.per_bmc = value()?,
            "--rounds" => o.rounds = value()?,
            other => bail!(
                "unknown argument {other} (--bmcs N --systems N --workers N --per-bmc N --rounds N)"
            ),
        }
    }
    Ok(o)
}

/// One emulator started by the shared script, stopped when dropped.
struct Emulator {
    script: PathBuf,
    dir: PathBuf,
    port: u16,
    systems: Vec<String>,
}

impl Emulator {
    fn start(systems: usize) -> anyhow::Result<Emulator> {
        let script = PathBuf::from(
            std::env::var("FERRUM_REDFISH_EMULATOR_SCRIPT")
                .unwrap_or_else(|_| "/work/shared/scripts/start-redfish-emulator.sh".to_owned()),
        );
        let venv = PathBuf::from(
            std::env::var("FERRUM_REDFISH_EMULATOR_VENV")
                .unwrap_or_else(|_| "/tmp/ferrum-redfish-emu/venv".to_owned()),
        );
        let port = std::net::TcpListener::bind("127.0.0.1:0")?
            .local_addr()?
            .port();
        let dir = std::env::temp_dir().join(format!("ferrum-sync-bench-{port}"));
        std::fs::create_dir_all(&dir)?;
        let link = dir.join("venv");
        if !link.exists() {
            std::os::unix::fs::symlink(&venv, &link)?;
        }
        let out = Command::new("bash")
            .arg(&script)
            .arg(port.to_string())
            .arg(systems.to_string())
            .env("REDFISH_EMU_DIR", &dir)
            .env("REDFISH_EMU_POWER_DELAY", "1")
            .output()
            .context("running the emulator script")?;
        if !out.status.success() {
            bail!(
                "the emulator did not start: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        let systems = String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter(|l| !l.trim().is_empty())
            .map(|id| format!("/redfish/v1/Systems/{}", id.trim()))
            .collect();
        Ok(Emulator {
            script,
            dir,
            port,
            systems,
        })
    }

    fn gets_served(&self) -> usize {
        std::fs::read_to_string(self.dir.join("emulator.log"))
            .unwrap_or_default()
            .lines()
            .filter(|l| l.contains("\"GET /redfish/v1/Systems/"))
            .count()
    }
}

impl Drop for Emulator {
    fn drop(&mut self) {
        let _ = Command::new("bash")
            .arg(&self.script)
            .arg("stop")
            .arg(self.port.to_string())
            .env("REDFISH_EMU_DIR", &self.dir)
            .output();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn node(emu: &Emulator, system: &str, n: usize) -> Node {
    let info = serde_json::json!({
        "redfish_address": format!("http://127.0.0.1:{}", emu.port),
        "redfish_system_id": system,
    });
    Node {
        uuid: uuid::Uuid::new_v4().to_string(),
        name: Some(format!("bench-{n}")),
        driver: "redfish".into(),
        interfaces: Interfaces {
            deploy: "direct".into(),
            power: "redfish".into(),
            management: "redfish".into(),
            bios: "no-bios".into(),
            boot: "ipxe".into(),
            console: "no-console".into(),
            inspect: "no-inspect".into(),
            network: "noop".into(),
            raid: "no-raid".into(),
            rescue: "no-rescue".into(),
            storage: "noop".into(),
            vendor: "no-vendor".into(),
            firmware: "no-firmware".into(),
        },
        driver_info: Json(info.as_object().cloned().unwrap_or_default()),
        provision_state: ProvisionState::Manageable,
        power_state: Some(PowerState::Off),
        created_at: ferrum::node::now(),
        ..Node::default()
    }
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let o = options()?;
    let started = Instant::now();
    let emus = (0..o.bmcs)
        .map(|_| Emulator::start(o.systems))
        .collect::<anyhow::Result<Vec<_>>>()?;
    println!(
        "{} emulators of {} systems started in {:.1} s",
        o.bmcs,
        o.systems,
        started.elapsed().as_secs_f64()
    );

    let dir = std::env::temp_dir().join(format!("ferrum-sync-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let mut config = Config::default();
    config.database.url = format!("sqlite://{}", dir.join("ferrum.sqlite").display());
    config.api.bind = "127.0.0.1:0".parse()?;
    let c = &mut config.conductor;
    c.host = "bench".to_owned();
    // Rounds are run here, one after the other, not by the conductor's loops.
    c.sync_power_state_interval = Duration::ZERO;
    c.power_failure_recovery_interval = Duration::ZERO;
    c.sync_power_state_workers = o.workers;
    c.sync_power_state_workers_per_bmc = o.per_bmc;
    c.heartbeat_interval = Duration::from_secs(1);
    c.heartbeat_timeout = Duration::from_secs(10);
    config.validate()?;
    let shutdown = CancellationToken::new();
    let all = AllInOne::start(
        &config,
        Registry::builtin(&config.conductor),
        shutdown.clone(),
    )
    .await?;
    let ctx = all.conductor().clone();

    // Interleaved, as the nodes of racks are.
    let rows: Vec<Node> = (0..o.systems)
        .flat_map(|i| emus.iter().map(move |emu| (emu, i)))
        .enumerate()
        .map(|(n, (emu, i))| node(emu, &emu.systems[i], n))
        .collect();
    let total = rows.len();
    let inserted = Instant::now();
    futures::stream::iter(rows.into_iter().map(|row| {
        let db = ctx.db.clone();
        async move { db::nodes::insert(&db, &row).await }
    }))
    .buffer_unordered(8)
    .collect::<Vec<_>>()
    .await
    .into_iter()
    .collect::<Result<Vec<_>, _>>()?;
    println!(
        "{total} nodes written in {:.1} s",
        inserted.elapsed().as_secs_f64()
    );

    let stop = CancellationToken::new();
    for round in 1..=o.rounds {
        let before: usize = emus.iter().map(Emulator::gets_served).sum();
        let stats = power_sync::round(&ctx, PowerScan::Sync, &stop).await?;
        let served = emus.iter().map(Emulator::gets_served).sum::<usize>() - before;
        println!(
            "round {round}: {} nodes in {:.3} s ({:.0} nodes/s), {:.2} BMC requests per node, \
             at most {} in flight per BMC (bound {}), {} overall (bound {}); {} corrected, {} failed, {} locked",
            stats.nodes,
            stats.took.as_secs_f64(),
            stats.nodes as f64 / stats.took.as_secs_f64(),
            served as f64 / stats.nodes.max(1) as f64,
            stats.max_in_flight_per_bmc,
            o.per_bmc,
            stats.max_in_flight,
            o.workers,
            stats.corrected,
            stats.failed,
            stats.locked,
        );
    }
    all.stop().await?;
    drop(emus);
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}
