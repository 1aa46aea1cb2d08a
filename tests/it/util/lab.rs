//! The virtual bare-metal lab (`tests/lab/`, its README's "contract" section): QEMU VMs that boot
//! over the network behind `ipmi_sim` BMCs, in a network namespace of their own, with a Ferrum
//! all-in-one process running INSIDE that namespace (bound to the bridge's 198.51.100.1, where the
//! VMs' iPXE and agent reach it) and its API forwarded to the host's loopback for the test.
//!
//! Needs root (namespaces, taps) and the lab's Debian packages (`tests/lab/lab.sh setup`);
//! otherwise [`Lab::up`] says so loudly and returns None (a failure under
//! `FERRUM_REQUIRE_SERVICES=1`). Everything is taken down on drop: Ferrum by its PID, the lab by
//! `lab.sh down` (which stops its processes by PID and deletes the namespace); the state
//! directory goes too unless the test panicked or `FERRUM_LAB_KEEP=1` (then it stays, with every
//! log, for a look).

use std::{
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    sync::OnceLock,
    time::{Duration, Instant},
};

use super::{
    cluster::{Api, free_port},
    services::{not_run, random_suffix},
};

/// The bridge's address in the namespace: the conductor's side of the lab network.
pub const HOST_IP: &str = "198.51.100.1";
/// Where Ferrum's API listens inside the namespace (the agent's `ipa-api-url`).
pub const API_PORT: u16 = 6385;
/// The lab's deploy ramdisk's kernel parameters (Ironic's `[pxe]pxe_append_params`, as an
/// operator sets them): its console is the serial log; the agent logs its debug lines there;
/// an image download that fails (a 404, a wrong checksum) is tried 3 times 2 s apart, not
/// the agent's default 10 times 10 s apart (90 s of the agent's own retries per failed deploy).
pub const RAMDISK_PARAMS: &str = "nofb nomodeset console=ttyS0 ipa-debug=1 \
    ipa-image-download-connection-retries=2 ipa-image-download-connection-retry-interval=2";
/// Where Ferrum's own HTTP server serves `http_root` inside the namespace (iPXE, images).
pub const HTTP_PORT: u16 = 8080;
pub const BMC_USER: &str = "admin";
pub const BMC_PASSWORD: &str = "ferrum-lab";

fn lab_script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/lab/lab.sh")
}

fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status").is_ok_and(|s| {
        s.lines()
            .find(|l| l.starts_with("Uid:"))
            .and_then(|l| l.split_whitespace().nth(2))
            == Some("0")
    })
}

/// Runs a command to its end; its output on failure.
fn run(mut cmd: Command) -> Result<String, String> {
    let out = cmd
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("{cmd:?}: {e}"))?;
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    if out.status.success() {
        Ok(text)
    } else {
        Err(format!("{cmd:?} failed ({}):\n{text}", out.status))
    }
}

fn lab_sh(args: &[&str]) -> Command {
    let mut cmd = Command::new("bash");
    cmd.arg(lab_script()).args(args);
    cmd
}

/// One lab with one VM, and (once [`Lab::start_ferrum`] ran) Ferrum inside it.
pub struct Lab {
    pub name: String,
    /// The lab's state directory (`DIR` of the README).
    pub dir: PathBuf,
    /// `uefi` or `bios`: the VM's firmware, and the node's boot mode.
    pub firmware: String,
    /// VM 1's MAC.
    pub mac: String,
    /// VM 1's BMC, UDP <address>:<port> inside the namespace (vm.env's BMC_ADDRESS, BMC_PORT).
    pub bmc_address: String,
    pub bmc_port: u16,
    /// The host's way to Ferrum's API (`lab.sh forward --from-host`).
    pub api: Api,
    api_host_port: u16,
    ferrum: Option<Child>,
    /// Ferrum's CPU time, sampled while it runs.
    cpu: Option<CpuMeter>,
    /// Where callgrind writes Ferrum's instruction counts, when it runs under callgrind
    /// (`FERRUM_LAB_CALLGRIND=1`).
    callgrind: Option<PathBuf>,
}

/// What Ferrum's `GET /metrics` counts at one moment ([`Lab::ferrum_counts`]), for the lab's
/// per-phase figures.
#[derive(Debug, Default, Clone, Copy)]
pub struct Counts {
    /// The CPU time of the conductor's background tasks: its periodic rounds and its lease.
    pub background: Duration,
    /// HTTP requests answered (the agent's, the test's), `GET /metrics` apart.
    pub requests: f64,
    /// Writes that waited to be on disk, and the WAL syncs that put them there.
    pub durable_writes: f64,
    pub wal_syncs: f64,
    /// Requests to the node's agent, and ipmitool processes run.
    pub agent_requests: f64,
    pub ipmitool_runs: f64,
}

/// A process's CPU time to the nanosecond: every 100 ms, each of its threads' time on a CPU
/// (`/proc/<pid>/task/<tid>/schedstat`) and its context switches, kept per thread, so that a
/// thread that ends keeps what it used (up to its last 100 ms: a worker thread of tokio's ends
/// after 10 s idle). The USER_HZ ticks of `/proc/<pid>/stat` (10 ms) cannot tell a 5 ms deploy
/// from idle. The threads of the conductor's file server (named `ferrum-files*`: the bytes of
/// ramdisks and images) are kept apart from the rest.
struct CpuMeter {
    threads: std::sync::Arc<std::sync::Mutex<std::collections::HashMap<u32, ThreadUse>>>,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
}

/// What one thread used so far.
#[derive(Debug, Default, Clone)]
struct ThreadUse {
    /// Its name (`comm`).
    name: String,
    cpu_ns: u64,
    /// Voluntary (a wait) and involuntary (preempted) context switches: how often the thread
    /// was woken, which costs more than most of what it then does.
    switches: u64,
}

impl ThreadUse {
    fn serves_files(&self) -> bool {
        self.name.starts_with("ferrum-files")
    }
}

impl CpuMeter {
    fn start(pid: u32) -> CpuMeter {
        let meter = CpuMeter {
            threads: Default::default(),
            stop: Default::default(),
        };
        let (threads, stop) = (meter.threads.clone(), meter.stop.clone());
        std::thread::spawn(move || {
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
                    return;
                };
                for task in tasks.flatten() {
                    let Ok(tid) = task.file_name().to_string_lossy().parse::<u32>() else {
                        continue;
                    };
                    let read = |file: &str| std::fs::read_to_string(task.path().join(file));
                    let ns = read("schedstat")
                        .ok()
                        .and_then(|s| s.split(' ').next()?.parse::<u64>().ok());
                    let name = read("comm").unwrap_or_default().trim().to_owned();
                    let switches = read("status")
                        .map(|status| {
                            status
                                .lines()
                                .filter(|l| l.contains("ctxt_switches:"))
                                .filter_map(|l| l.split_whitespace().last()?.parse::<u64>().ok())
                                .sum::<u64>()
                        })
                        .unwrap_or(0);
                    if let Some(ns) = ns {
                        let mut threads = threads.lock().expect("cpu meter");
                        let seen = threads.entry(tid).or_default();
                        seen.name = name;
                        seen.cpu_ns = seen.cpu_ns.max(ns);
                        seen.switches = seen.switches.max(switches);
                    }
                }
                std::thread::sleep(Duration::from_millis(100));
            }
        });
        meter
    }

    fn sum(&self, keep: impl Fn(&ThreadUse) -> bool, of: impl Fn(&ThreadUse) -> u64) -> u64 {
        let threads = self.threads.lock().expect("cpu meter");
        threads.values().filter(|t| keep(t)).map(of).sum()
    }

    /// The CPU time of the file server's threads.
    fn files(&self) -> Duration {
        Duration::from_nanos(self.sum(ThreadUse::serves_files, |t| t.cpu_ns))
    }

    fn total(&self) -> Duration {
        Duration::from_nanos(self.sum(|_| true, |t| t.cpu_ns))
    }

    /// The context switches of the threads that do not serve files.
    fn switches(&self) -> u64 {
        self.sum(|t| !t.serves_files(), |t| t.switches)
    }

    /// Per thread name (the runtime's workers, the WAL syncer, ...): CPU nanoseconds and
    /// context switches so far.
    fn by_name(&self) -> std::collections::BTreeMap<String, (u64, u64)> {
        let threads = self.threads.lock().expect("cpu meter");
        let mut named = std::collections::BTreeMap::<String, (u64, u64)>::new();
        for t in threads.values() {
            let sum = named.entry(t.name.clone()).or_default();
            sum.0 += t.cpu_ns;
            sum.1 += t.switches;
        }
        named
    }
}

impl Drop for CpuMeter {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
    }
}

impl Lab {
    /// `lab.sh up` with one VM under a unique name. None (announced) without root, the lab's
    /// packages or the agent's venv (`tests/peers/ipa-sandbox.sh setup`).
    pub fn up(firmware: &str) -> Option<Lab> {
        static ANNOUNCED: OnceLock<()> = OnceLock::new();
        let skip = |why: String| {
            not_run(
                &format!("{why}; the lab's end-to-end provisioning test was NOT run"),
                &ANNOUNCED,
            );
        };
        if !is_root() {
            skip("the virtual bare-metal lab needs root (namespaces, tap devices)".to_owned());
            return None;
        }
        // `setup` without apt: fails naming the missing packages (CI's `.ci/run` installs them).
        let mut setup = lab_sh(&["setup"]);
        setup.env("FERRUM_PEERS_NO_APT", "1");
        if let Err(e) = run(setup) {
            skip(format!(
                "the lab's packages are missing ({e}); 'tests/lab/lab.sh setup'"
            ));
            return None;
        }
        let venv = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/peers/ipa-sandbox.sh");
        if let Err(e) = run({
            let mut c = Command::new("bash");
            c.arg(venv).arg("setup");
            c
        }) {
            skip(format!("the agent's venv could not be made: {e}"));
            return None;
        }
        let name = format!("lab-it-{}", &random_suffix()[..8]);
        let dir = std::env::temp_dir().join(format!("ferrum-{name}"));
        let dir_text = dir.display().to_string();
        run(lab_sh(&[
            "up",
            "--name",
            &name,
            "--dir",
            &dir_text,
            "--vms",
            "1",
            "--firmware",
            firmware,
        ]))
        .unwrap_or_else(|e| panic!("lab.sh up: {e}"));
        let api_host_port = free_port();
        let mut lab = Lab {
            name,
            dir,
            firmware: firmware.to_owned(),
            mac: String::new(),
            bmc_address: String::new(),
            bmc_port: 0,
            api: Api::new(format!("http://127.0.0.1:{api_host_port}")),
            api_host_port,
            ferrum: None,
            cpu: None,
            callgrind: None,
        };
        let env = std::fs::read_to_string(lab.vm_dir().join("vm.env")).expect("vm.env");
        let var = |key: &str| {
            env.lines()
                .find_map(|l| l.strip_prefix(&format!("{key}=")))
                .map(|v| v.trim_matches('"').to_owned())
                .unwrap_or_else(|| panic!("no {key} in vm.env:\n{env}"))
        };
        lab.mac = var("MAC").to_lowercase();
        lab.bmc_address = var("BMC_ADDRESS");
        lab.bmc_port = var("BMC_PORT").parse().expect("BMC_PORT");
        Some(lab)
    }

    /// VM 1's directory (`DIR/vms/vm1`).
    pub fn vm_dir(&self) -> PathBuf {
        self.dir.join("vms/vm1")
    }

    /// Everything VM 1 has printed on its serial console so far (all its boots).
    pub fn serial_log(&self) -> String {
        String::from_utf8_lossy(
            &std::fs::read(self.vm_dir().join("serial.log")).unwrap_or_default(),
        )
        .into_owned()
    }

    /// The `ipmi` hardware type's driver_info for VM 1's BMC.
    pub fn driver_info(&self) -> serde_json::Value {
        serde_json::json!({
            "ipmi_address": self.bmc_address,
            "ipmi_port": self.bmc_port,
            "ipmi_username": BMC_USER,
            "ipmi_password": BMC_PASSWORD,
            // ipmi_sim offers suite 3; without it ipmitool asks for the suites, which ipmi_sim
            // never answers, and waits ~10 s at every command.
            "ipmi_cipher_suite": "3",
        })
    }

    /// `lab.sh build-ramdisk`: the deploy kernel and initramfs that run the agent in the VM.
    pub fn build_ramdisk(&self) -> (PathBuf, PathBuf) {
        let out = self.dir.join("ramdisk");
        run(lab_sh(&["build-ramdisk", &out.display().to_string()]))
            .unwrap_or_else(|e| panic!("lab.sh build-ramdisk: {e}"));
        (out.join("vmlinuz"), out.join("initramfs"))
    }

    /// `lab.sh build-image` into `file`: the bootable instance image; its sha256.
    pub fn build_image(&self, file: &Path) -> String {
        std::fs::create_dir_all(file.parent().expect("a directory")).expect("image directory");
        let out = run(lab_sh(&["build-image", &file.display().to_string()]))
            .unwrap_or_else(|e| panic!("lab.sh build-image: {e}"));
        out.lines()
            .find_map(|l| l.strip_prefix("sha256 "))
            .and_then(|l| l.split_whitespace().next())
            .unwrap_or_else(|| panic!("no sha256 line from build-image:\n{out}"))
            .to_owned()
    }

    /// `lab.sh build-esp`: an EFI system partition image (FAT) whose GRUB boots by the
    /// `EFI/BOOT/grub.cfg` of the CD it is on, a UEFI boot ISO's `bootloader`.
    pub fn build_esp(&self) -> PathBuf {
        let out = self.dir.join("esp.img");
        run(lab_sh(&["build-esp", &out.display().to_string()]))
            .unwrap_or_else(|e| panic!("lab.sh build-esp: {e}"));
        out
    }

    /// `lab.sh media`: VM 1's virtual CD holds `iso` from its next power on.
    pub fn insert_cd(&self, iso: &Path) {
        let dir = self.dir.display().to_string();
        let iso = iso.display().to_string();
        run(lab_sh(&[
            "media", "--name", &self.name, "--dir", &dir, "1", "insert", &iso,
        ]))
        .unwrap_or_else(|e| panic!("lab.sh media 1 insert: {e}"));
    }

    /// The operator's DHCP answers VM 1's MAC from the lab's range, with no boot options (a
    /// host file of dnsmasq's `--dhcp-hostsdir` of its own): what a machine booted from virtual
    /// media needs for its ramdisk's network, as Ironic's virtual media boot writes no DHCP.
    pub fn answer_dhcp(&self) {
        std::fs::write(
            self.dir.join("dhcp-hosts/operator-vm1.conf"),
            format!("{}\n", self.mac),
        )
        .expect("the operator's DHCP host file");
    }

    /// VM 1's firmware from its next power on: `uefi` (OVMF) or `bios` (SeaBIOS).
    pub fn switch_firmware(&mut self, firmware: &str) {
        let path = self.vm_dir().join("vm.env");
        let env = std::fs::read_to_string(&path).expect("vm.env");
        let env: String = env
            .lines()
            .map(|l| match l.strip_prefix("FIRMWARE=") {
                Some(_) => format!("FIRMWARE={firmware}\n"),
                None => format!("{l}\n"),
            })
            .collect();
        std::fs::write(&path, env).expect("vm.env");
        self.firmware = firmware.to_owned();
    }

    /// `ipmitool` against VM 1's BMC, inside the namespace, as an operator would run it; its
    /// output.
    pub fn ipmitool(&self, args: &[&str]) -> String {
        let port = self.bmc_port.to_string();
        let mut cmd = lab_sh(&["exec", "--name", &self.name, "--"]);
        cmd.args([
            "ipmitool",
            "-I",
            "lanplus",
            "-H",
            &self.bmc_address,
            "-p",
            &port,
        ])
        .args(["-U", BMC_USER, "-P", BMC_PASSWORD])
        .args(args);
        run(cmd).unwrap_or_else(|e| panic!("ipmitool {args:?}: {e}"))
    }

    /// Where Ferrum's HTTP server serves from (its `http_root`), on the host's file system.
    pub fn http_root(&self) -> PathBuf {
        self.dir.join("http")
    }

    /// The URL of `http_root` as the VMs reach it.
    pub fn http_url(&self) -> String {
        format!("http://{HOST_IP}:{HTTP_PORT}")
    }

    fn ferrum_log(&self) -> PathBuf {
        self.dir.join("ferrum.log")
    }

    /// Starts `ferrum all-in-one` inside the namespace (`lab.sh exec`) on an SQLite file, with
    /// the lab's DHCP directories, its API and HTTP server on 198.51.100.1, and `env` on top;
    /// forwards the API to the host and waits until it answers and its conductor is registered.
    pub async fn start_ferrum(&mut self, env: &[(&str, String)]) {
        std::fs::create_dir_all(self.http_root()).expect("http root");
        let dir = |p: &str| self.dir.join(p).display().to_string();
        let mut settings: Vec<(&str, String)> = vec![
            (
                "PATH",
                "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin".to_owned(),
            ),
            ("RUST_LOG", "info,ferrum=debug".to_owned()),
            (
                "FERRUM_DATABASE_URL",
                format!("sqlite://{}", dir("ferrum.sqlite")),
            ),
            ("FERRUM_TRANSPORT_URL", "local".to_owned()),
            ("FERRUM_CONDUCTOR_HOST", format!("{}-conductor", self.name)),
            ("FERRUM_API_BIND", format!("{HOST_IP}:{API_PORT}")),
            ("FERRUM_API_URL", format!("http://{HOST_IP}:{API_PORT}")),
            ("FERRUM_HTTP_ROOT", dir("http")),
            ("FERRUM_HTTP_BIND", format!("{HOST_IP}:{HTTP_PORT}")),
            ("FERRUM_HTTP_URL", self.http_url()),
            ("FERRUM_TFTP_ROOT", dir("tftp")),
            ("FERRUM_TFTP_SERVER", HOST_IP.to_owned()),
            ("FERRUM_DHCP_PROVIDER", "dnsmasq".to_owned()),
            ("FERRUM_DNSMASQ_DHCP_HOSTSDIR", dir("dhcp-hosts")),
            ("FERRUM_DNSMASQ_DHCP_OPTSDIR", dir("dhcp-opts")),
            // Ironic's [pxe]pxe_append_params.
            ("FERRUM_KERNEL_APPEND_PARAMS", RAMDISK_PARAMS.to_owned()),
        ];
        settings.extend(env.iter().cloned());
        // The size of Ferrum's runtime, to measure its CPU time with another.
        if let Ok(workers) = std::env::var("TOKIO_WORKER_THREADS") {
            settings.push(("TOKIO_WORKER_THREADS", workers));
        }
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.ferrum_log())
            .expect("ferrum log");
        let mut cmd = lab_sh(&["exec", "--name", &self.name, "--"]);
        // FERRUM_LAB_BIN: another build (a release one, to measure Ferrum's CPU time).
        let ferrum = std::env::var("FERRUM_LAB_BIN")
            .unwrap_or_else(|_| env!("CARGO_BIN_EXE_ferrum").to_owned());
        // FERRUM_LAB_CALLGRIND=1: under valgrind's callgrind, which counts the instructions
        // Ferrum executes (its own code and its libraries, not the kernel's work for its system
        // calls): a figure this machine's cache effects and neighbours cannot blur, read at
        // each phase's end ([`Lab::ferrum_instructions`]).
        if std::env::var("FERRUM_LAB_CALLGRIND").is_ok_and(|v| v == "1") {
            let out = self.dir.join("callgrind.out");
            cmd.args(["valgrind", "--tool=callgrind"])
                .arg(format!("--callgrind-out-file={}", out.display()));
            self.callgrind = Some(out);
        }
        cmd.arg(ferrum)
            .arg("all-in-one")
            .current_dir(&self.dir)
            .env_clear()
            .envs(settings)
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("log"))
            .stderr(log);
        // lab.sh execs `ip netns exec`, which execs ferrum: the child's PID is Ferrum's.
        let ferrum = cmd.spawn().expect("spawn ferrum in the lab");
        self.cpu = Some(CpuMeter::start(ferrum.id()));
        self.ferrum = Some(ferrum);
        let forward = format!("{}:{API_PORT}", self.api_host_port);
        run(lab_sh(&[
            "forward",
            "--name",
            &self.name,
            "--dir",
            &self.dir.display().to_string(),
            "--from-host",
            &forward,
        ]))
        .unwrap_or_else(|e| panic!("lab.sh forward: {e}"));
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            if let Some(status) = self
                .ferrum
                .as_mut()
                .and_then(|c| c.try_wait().ok().flatten())
            {
                panic!("ferrum exited ({status}):\n{}", self.ferrum_log_tail(60));
            }
            let drivers = self.api.try_get("/v1/drivers").await;
            let ready = drivers.is_some_and(|d| {
                d["drivers"]
                    .as_array()
                    .is_some_and(|list| list.iter().any(|x| x["name"] == "ipmi"))
            });
            if ready {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "Ferrum's API never answered through the forward:\n{}",
                self.ferrum_log_tail(60)
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// Ferrum's CPU time so far, to the nanosecond (see [`CpuMeter`]); zero before it starts.
    pub fn ferrum_cpu(&self) -> Duration {
        self.cpu.as_ref().map_or(Duration::ZERO, CpuMeter::total)
    }

    /// Ferrum's context switches so far, its file server's apart: how often its threads woke.
    pub fn ferrum_switches(&self) -> u64 {
        self.cpu.as_ref().map_or(0, CpuMeter::switches)
    }

    /// Ferrum's CPU nanoseconds and context switches so far by thread name.
    pub fn ferrum_threads(&self) -> std::collections::BTreeMap<String, (u64, u64)> {
        self.cpu.as_ref().map(CpuMeter::by_name).unwrap_or_default()
    }

    /// The instructions Ferrum executed since the last call (or its start), when it runs under
    /// callgrind: `callgrind_control --dump` writes the counts since the dump before into a new
    /// file (`callgrind.out.<n>`) and zeroes them.
    pub fn ferrum_instructions(&self) -> Option<u64> {
        let (out, ferrum) = (self.callgrind.as_ref()?, self.ferrum.as_ref()?);
        let mut dump = Command::new("callgrind_control");
        dump.args(["--dump", &ferrum.id().to_string()]);
        run(dump).unwrap_or_else(|e| panic!("callgrind_control: {e}"));
        let prefix = format!("{}.", out.file_name()?.to_string_lossy());
        let newest = std::fs::read_dir(out.parent()?)
            .ok()?
            .flatten()
            .filter_map(|entry| {
                let name = entry.file_name().to_string_lossy().into_owned();
                name.strip_prefix(&prefix)?
                    .parse::<u32>()
                    .ok()
                    .map(|n| (n, entry.path()))
            })
            .max_by_key(|(n, _)| *n)?
            .1;
        // The file's `summary:` line (`totals:` in older versions) holds its events: Ir only.
        let text = std::fs::read_to_string(newest).ok()?;
        text.lines()
            .find_map(|l| {
                l.strip_prefix("summary:")
                    .or_else(|| l.strip_prefix("totals:"))
            })?
            .trim()
            .parse()
            .ok()
    }

    /// The part of [`Lab::ferrum_cpu`] spent by its file server (ramdisk and image bytes).
    pub fn ferrum_files_cpu(&self) -> Duration {
        self.cpu.as_ref().map_or(Duration::ZERO, CpuMeter::files)
    }

    /// What Ferrum's `GET /metrics` counts now; zeros before it starts.
    pub async fn ferrum_counts(&self) -> Counts {
        if self.ferrum.is_none() {
            return Counts::default();
        }
        let metrics =
            super::scrape_metrics(&format!("http://127.0.0.1:{}", self.api_host_port)).await;
        let sum = |name: &str, keep: &dyn Fn(&prom_text_format_parser::Sample) -> bool| -> f64 {
            metrics
                .iter()
                .filter(|m| m.name == name)
                .flat_map(|m| &m.samples)
                .filter(|s| keep(s))
                .map(|s| s.value.value.as_f64())
                .sum()
        };
        let all = |_: &prom_text_format_parser::Sample| true;
        Counts {
            background: Duration::from_micros(
                sum("ferrum_background_cpu_microseconds_total", &all) as u64,
            ),
            requests: sum("ferrum_http_requests_total", &|s| {
                !s.labels
                    .iter()
                    .any(|l| l.key == "route" && l.value == "/metrics")
            }),
            durable_writes: sum("ferrum_db_durable_writes_total", &all),
            wal_syncs: sum("ferrum_db_wal_syncs_total", &all),
            agent_requests: sum("ferrum_agent_requests_total", &all),
            ipmitool_runs: sum("ferrum_ipmitool_runs_total", &all),
        }
    }

    /// The last `lines` lines of Ferrum's log.
    pub fn ferrum_log_tail(&self, lines: usize) -> String {
        tail(&self.ferrum_log(), lines)
    }

    /// The operator's network boot of machines Ferrum does not boot, for unmanaged inspection
    /// (as Ironic's documentation sets it up): dnsmasq hands an unknown host, once allowed,
    /// `boot.ipxe`, whose fallback (Ferrum's `ipxe_fallback_script`) `inspector.ipxe` boots
    /// `kernel` and `ramdisk` with the agent's inspection callback.
    pub fn configure_unmanaged_inspection(&self, kernel: &Path, ramdisk: &Path) {
        let dir = self.http_root().join("inspector");
        std::fs::create_dir_all(&dir).expect("inspector dir");
        std::fs::copy(kernel, dir.join("vmlinuz")).expect("inspector kernel");
        std::fs::copy(ramdisk, dir.join("initramfs")).expect("inspector ramdisk");
        let (http, api) = (self.http_url(), format!("http://{HOST_IP}:{API_PORT}"));
        let script = format!(
            "#!ipxe\n\
             :retry\n\
             imgfree\n\
             kernel {http}/inspector/vmlinuz nofb nomodeset console=ttyS0 ipa-debug=1 ipa-api-url={api} ipa-inspection-callback-url={api}/v1/continue_inspection BOOTIF=${{mac}} initrd=initramfs || goto retry\n\
             initrd {http}/inspector/initramfs || goto retry\n\
             boot\n"
        );
        std::fs::write(self.http_root().join("inspector.ipxe"), script).expect("inspector.ipxe");
        std::fs::write(
            self.dir.join("dhcp-opts/unknown-hosts.conf"),
            format!("tag:!ironic,tag:ipxe,67,{http}/boot.ipxe\n"),
        )
        .expect("unknown hosts' boot option");
    }

    /// `lab.sh bmc`: VM 1's BMC stops answering (`false`) or comes back (`true`); the VM runs on.
    pub fn bmc_answers(&self, on: bool) {
        let what = if on { "start" } else { "stop" };
        let dir = self.dir.display().to_string();
        run(lab_sh(&[
            "bmc", "--name", &self.name, "--dir", &dir, "1", what,
        ]))
        .unwrap_or_else(|e| panic!("lab.sh bmc 1 {what}: {e}"));
    }

    /// Writes `bytes` at the start of VM 1's disk (`qemu-io`; the VM must be off).
    pub fn write_disk_head(&self, bytes: &[u8]) {
        let file = self.dir.join("disk-head.bin");
        std::fs::write(&file, bytes).expect("disk head file");
        let mut io = Command::new("qemu-io");
        io.args(["-f", "qcow2", "-c"])
            .arg(format!("write -s {} 0 {}", file.display(), bytes.len()))
            .arg(self.vm_dir().join("disk.qcow2"));
        run(io).unwrap_or_else(|e| panic!("qemu-io write: {e}"));
    }

    /// The first `len` bytes of VM 1's disk (`qemu-img dd`, sharing it with a QEMU that is still exiting).
    pub fn read_disk_head(&self, len: usize) -> Vec<u8> {
        let file = self.dir.join("disk-head.read");
        let mut dd = Command::new("qemu-img");
        dd.args(["dd", "-U", "-f", "qcow2", "-O", "raw", "bs=512"])
            .arg(format!("count={}", len.div_ceil(512)))
            .arg(format!("if={}", self.vm_dir().join("disk.qcow2").display()))
            .arg(format!("of={}", file.display()));
        run(dd).unwrap_or_else(|e| panic!("qemu-img dd: {e}"));
        let mut head = std::fs::read(&file).expect("disk head");
        head.truncate(len);
        head
    }

    /// Connects to `host:port` inside the namespace and appends what it reads to `file` until
    /// the returned process is killed (a console client, as a user attaches one).
    pub fn capture_tcp(&self, host: &str, port: u16, file: &Path) -> Child {
        let out = std::fs::File::create(file).expect("capture file");
        let mut cmd = lab_sh(&["exec", "--name", &self.name, "--"]);
        cmd.args(["socat", "-u", &format!("TCP:{host}:{port}"), "STDOUT"])
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(Stdio::null());
        cmd.spawn().expect("socat in the lab")
    }

    /// VM 1's disk size in bytes, as its guest sees it (`qemu-img info`).
    pub fn disk_size(&self) -> u64 {
        let mut info = Command::new("qemu-img");
        info.args(["info", "-U", "--output", "json"])
            .arg(self.vm_dir().join("disk.qcow2"));
        let out = run(info).unwrap_or_else(|e| panic!("qemu-img info: {e}"));
        let json: serde_json::Value = serde_json::from_str(&out).expect("qemu-img info's JSON");
        json["virtual-size"].as_u64().expect("virtual-size")
    }

    /// What to show when a phase fails: Ferrum's log, the serial console, dnsmasq's log.
    pub fn diagnostics(&self) -> String {
        format!(
            "--- ferrum ({}) ---\n{}\n--- serial console ---\n{}\n--- dnsmasq ---\n{}\n--- bmc ---\n{}",
            self.ferrum_log().display(),
            self.ferrum_log_tail(80),
            tail(&self.vm_dir().join("serial.log"), 40),
            tail(&self.dir.join("dnsmasq.log"), 15),
            tail(&self.vm_dir().join("state/log"), 15),
        )
    }
}

fn tail(path: &Path, lines: usize) -> String {
    let text = String::from_utf8_lossy(&std::fs::read(path).unwrap_or_default()).into_owned();
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..]
        .iter()
        .map(|l| l.chars().take(300).collect::<String>())
        .collect::<Vec<_>>()
        .join("\n")
}

impl Drop for Lab {
    fn drop(&mut self) {
        // FERRUM_LAB_KEEP=1 keeps it after a pass too (Ferrum's log, the serial console, ...).
        let keep =
            std::thread::panicking() || std::env::var("FERRUM_LAB_KEEP").is_ok_and(|v| v == "1");
        if let Some(mut child) = self.ferrum.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
        let dir = self.dir.display().to_string();
        let mut args = vec!["down", "--name", &self.name, "--dir", &dir];
        if !keep {
            args.push("--rm");
        }
        if let Err(e) = run(lab_sh(&args)) {
            eprintln!("lab.sh down: {e}");
        }
        if keep {
            eprintln!("the lab's state directory (logs, disk) is kept: {dir}");
        }
    }
}
