//! A real Redfish BMC as a test peer: sushy-tools' emulator with its fake systems driver,
//! through the repository's script (`tests/peers/redfish-emulator.sh`, see `tests/peers/README.md`).
//! Every [`Emulator`] runs on a free port of its own with its own state directory; all of them
//! share one Python venv, made by the script's `setup` on first use (or
//! `FERRUM_REDFISH_EMULATOR_VENV`) and linked into each directory as its `venv`. Where the
//! emulator cannot be had the tests say so loudly and return, or fail under
//! `FERRUM_REQUIRE_SERVICES=1`.

use std::{
    path::PathBuf,
    process::Command,
    sync::{Arc, Mutex, OnceLock},
    time::Duration,
};

use serde_json::Value;

use super::{
    ipa::Agent,
    services::{not_run, peer_script, random_suffix},
};

/// The emulator script (`tests/peers/redfish-emulator.sh`, or `FERRUM_REDFISH_EMULATOR_SCRIPT`)
/// and the venv it runs (`FERRUM_REDFISH_EMULATOR_VENV`, or the one the script's `setup` makes,
/// asked once per test process), or None (announced) when either cannot be had.
fn prepared() -> Option<(PathBuf, PathBuf)> {
    static PREPARED: OnceLock<Result<(PathBuf, PathBuf), String>> = OnceLock::new();
    static ANNOUNCED: OnceLock<()> = OnceLock::new();
    let prepared = PREPARED.get_or_init(|| {
        let script = std::env::var_os("FERRUM_REDFISH_EMULATOR_SCRIPT")
            .map_or_else(|| peer_script("redfish-emulator.sh"), PathBuf::from);
        if !script.is_file() {
            return Err(format!(
                "no Redfish emulator script at {} (FERRUM_REDFISH_EMULATOR_SCRIPT)",
                script.display()
            ));
        }
        let venv = match std::env::var_os("FERRUM_REDFISH_EMULATOR_VENV") {
            Some(venv) => PathBuf::from(venv),
            None => {
                let out = Command::new("bash")
                    .arg(&script)
                    .arg("setup")
                    .output()
                    .map_err(|e| format!("cannot run {}: {e}", script.display()))?;
                if !out.status.success() {
                    return Err(format!(
                        "`{} setup` failed: {}",
                        script.display(),
                        String::from_utf8_lossy(&out.stderr).trim()
                    ));
                }
                PathBuf::from(String::from_utf8_lossy(&out.stdout).trim())
            }
        };
        if !venv.join("bin/sushy-emulator").is_file() {
            return Err(format!(
                "no Redfish emulator venv at {} (FERRUM_REDFISH_EMULATOR_VENV)",
                venv.display()
            ));
        }
        Ok((script, venv))
    });
    match prepared {
        Ok(prepared) => Some(prepared.clone()),
        Err(problem) => {
            not_run(
                &format!("{problem}; the Redfish emulator suite was NOT run."),
                &ANNOUNCED,
            );
            None
        }
    }
}

/// How to start an emulator.
#[derive(Debug, Clone)]
pub struct EmulatorOptions {
    pub systems: usize,
    /// `REDFISH_EMU_POWER_DELAY`: a power change lands within delay-1..delay s.
    pub power_delay: Option<u32>,
    /// Basic authentication (user, password).
    pub credentials: Option<(String, String)>,
    /// A network namespace to run in (the virtual lab's, where Ferrum runs): the emulator's
    /// 127.0.0.1 is then the namespace's, which the test's own requests do not reach.
    pub netns: Option<String>,
}

impl Default for EmulatorOptions {
    fn default() -> Self {
        EmulatorOptions {
            systems: 1,
            power_delay: Some(1),
            credentials: None,
            netns: None,
        }
    }
}

/// One running emulator, stopped (and its directory removed) when dropped.
pub struct Emulator {
    script: PathBuf,
    pub dir: PathBuf,
    pub port: u16,
    options: EmulatorOptions,
    /// The systems' paths, `/redfish/v1/Systems/<uuid>`.
    pub systems: Vec<String>,
    http: reqwest::Client,
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("free port")
}

impl Emulator {
    /// How many whole seconds after the one a power change is asked in it lands (0: at once).
    pub fn power_delay(&self) -> u64 {
        self.options.power_delay.unwrap_or(0).into()
    }

    /// Starts an emulator; None when it cannot run here (announced, or a failure under
    /// `FERRUM_REQUIRE_SERVICES=1`).
    pub fn start(options: EmulatorOptions) -> Option<Emulator> {
        let (script, venv) = prepared()?;
        let dir = std::env::temp_dir().join(format!("ferrum-redfish-{}", random_suffix()));
        std::fs::create_dir_all(&dir).expect("emulator dir");
        std::os::unix::fs::symlink(&venv, dir.join("venv")).expect("link the shared venv");
        let mut emulator = Emulator {
            script,
            dir,
            port: 0,
            options,
            systems: Vec::new(),
            http: reqwest::Client::builder()
                .timeout(Duration::from_secs(10))
                .build()
                .expect("http client"),
        };
        // Another emulator may take the free port between its choice and this one's start
        // (tests start them in parallel): then this one exits, and another port is tried.
        let mut tries = 3;
        loop {
            tries -= 1;
            match emulator.try_launch(free_port()) {
                Ok(()) => return Some(emulator),
                Err(e) if tries == 0 => panic!("{e}"),
                Err(_) => {}
            }
        }
    }

    fn script_command(&self) -> Command {
        let mut cmd = match &self.options.netns {
            Some(netns) => {
                let mut cmd = Command::new("ip");
                cmd.args(["netns", "exec", netns, "bash"]);
                cmd
            }
            None => Command::new("bash"),
        };
        cmd.arg(&self.script).env("REDFISH_EMU_DIR", &self.dir);
        cmd
    }

    fn launch(&mut self, port: u16) {
        self.try_launch(port).unwrap_or_else(|e| panic!("{e}"));
    }

    fn try_launch(&mut self, port: u16) -> Result<(), String> {
        let mut cmd = self.script_command();
        cmd.arg(port.to_string())
            .arg(self.options.systems.to_string());
        match self.options.power_delay {
            Some(d) => cmd.env("REDFISH_EMU_POWER_DELAY", d.to_string()),
            None => cmd.env_remove("REDFISH_EMU_POWER_DELAY"),
        };
        if let Some((user, password)) = &self.options.credentials {
            cmd.env("REDFISH_EMU_USER", user)
                .env("REDFISH_EMU_PASSWORD", password);
        }
        let out = cmd.output().expect("run the Redfish emulator script");
        if !out.status.success() {
            return Err(format!(
                "the Redfish emulator did not start on port {port}: {}\n{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            ));
        }
        self.port = port;
        self.systems = String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter(|l| !l.trim().is_empty())
            .map(|id| format!("/redfish/v1/Systems/{}", id.trim()))
            .collect();
        assert_eq!(self.systems.len(), self.options.systems, "{out:?}");
        Ok(())
    }

    /// Starts the emulator again on the same port, with the same systems, each in its initial
    /// power state (the script starts from a fresh state).
    pub fn restart(&mut self) {
        self.stop();
        let port = self.port;
        self.launch(port);
    }

    /// Stops the emulator (its state goes with it: a start begins afresh).
    pub fn stop(&self) {
        let _ = self
            .script_command()
            .arg("stop")
            .arg(self.port.to_string())
            .output();
    }

    /// `http://127.0.0.1:<port>`, a node's `redfish_address`.
    pub fn address(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// The `driver_info` of a node on system `i`.
    pub fn driver_info(&self, i: usize) -> Value {
        let mut info = serde_json::json!({
            "redfish_address": self.address(),
            "redfish_system_id": self.systems[i],
        });
        if let Some((user, password)) = &self.options.credentials {
            info["redfish_username"] = user.clone().into();
            info["redfish_password"] = password.clone().into();
        }
        info
    }

    /// Resets system `i` directly on the emulator (`On`, `ForceOff`, ...): a change made behind
    /// Ferrum's back.
    pub async fn reset(&self, i: usize, reset_type: &str) {
        let url = format!(
            "{}{}/Actions/ComputerSystem.Reset",
            self.address(),
            self.systems[i]
        );
        let mut req = self
            .http
            .post(url)
            .json(&serde_json::json!({ "ResetType": reset_type }));
        if let Some((user, password)) = &self.options.credentials {
            req = req.basic_auth(user, Some(password));
        }
        let r = req.send().await.expect("POST to the emulator");
        assert!(
            r.status().is_success(),
            "reset {reset_type}: {}",
            r.status()
        );
    }

    /// How many `GET <path prefix>...` requests the emulator has served since it (re)started,
    /// from its access log.
    pub fn gets_served(&self, path_prefix: &str) -> usize {
        let log = std::fs::read_to_string(self.dir.join("emulator.log")).unwrap_or_default();
        let needle = format!("\"GET {path_prefix}");
        log.lines().filter(|l| l.contains(&needle)).count()
    }

    /// GETs `path` from the emulator directly, as the test's own view of the BMC.
    pub async fn get(&self, path: &str) -> Value {
        let mut req = self.http.get(format!("{}{path}", self.address()));
        if let Some((user, password)) = &self.options.credentials {
            req = req.basic_auth(user, Some(password));
        }
        let r = req.send().await.expect("GET from the emulator");
        assert!(r.status().is_success(), "GET {path}: {}", r.status());
        r.json().await.expect("JSON from the emulator")
    }
}

impl Drop for Emulator {
    fn drop(&mut self) {
        self.stop();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A machine's firmware, as far as a deploy needs one: it watches an emulated system, and when
/// the system is powered on to boot once from its virtual CD with the deploy ISO inserted, it
/// boots the deploy ramdisk, that is, starts a sandboxed agent (`util::ipa`) that looks itself
/// up by the system's MAC; when the system is powered off, the ramdisk goes with it (the agent
/// is stopped, its disk kept). Booting from any other device starts nothing: the instance
/// written to the disk is not run. The emulator itself boots nothing, so this is what makes its
/// power and boot settings matter.
pub struct Firmware {
    seen: Arc<Mutex<FirmwareLog>>,
    noted: Arc<tokio::sync::Notify>,
    task: tokio::task::JoinHandle<()>,
}

/// What the firmware did, in order, and the agents it booted (the last one running or
/// stopped, its disk as the machine's disk).
#[derive(Default)]
pub struct FirmwareLog {
    pub events: Vec<String>,
    pub agents: Vec<Agent>,
    pub running: bool,
}

impl Emulator {
    /// The firmware of system `i`, booting ramdisks that talk to the API at `api_url` when the
    /// system boots from its CD holding `iso_url`.
    pub fn firmware(&self, i: usize, api_url: &str, mac: &str, iso_url: &str) -> Firmware {
        self.watched(i, api_url, mac, iso_url, None)
    }

    /// The firmware of system `i` as a network boot would have it: when the system is powered
    /// on to boot from the network, it does what iPXE does with what Ferrum published: asks
    /// DHCP (the dnsmasq files under `dhcp`: `hosts/`, `opts/`) for its boot file, fetches the
    /// iPXE script over HTTP, the configuration it chains to for the NIC's MAC, and the kernel
    /// and ramdisk that names; then starts the agent as the ramdisk would, with the
    /// `ipa-api-url` of the kernel command line. A step that fails is noted and boots nothing,
    /// as a machine would sit in its firmware.
    pub fn network_firmware(&self, i: usize, mac: &str, dhcp: &std::path::Path) -> Firmware {
        self.watched(i, "", mac, "", Some(dhcp.to_owned()))
    }

    fn watched(
        &self,
        i: usize,
        api_url: &str,
        mac: &str,
        iso_url: &str,
        dhcp: Option<std::path::PathBuf>,
    ) -> Firmware {
        let seen = Arc::new(Mutex::new(FirmwareLog::default()));
        let noted = Arc::new(tokio::sync::Notify::new());
        let watch = Watch {
            http: self.http.clone(),
            base: self.address(),
            system: self.systems[i].clone(),
            credentials: self.options.credentials.clone(),
            api_url: api_url.to_owned(),
            mac: mac.to_owned(),
            iso_url: iso_url.to_owned(),
            dhcp,
            seen: seen.clone(),
            noted: noted.clone(),
        };
        Firmware {
            seen,
            noted,
            task: tokio::spawn(watch.run()),
        }
    }

    /// The MAC of system `i`'s first NIC (the emulator names its interfaces by MAC).
    pub async fn mac(&self, i: usize) -> String {
        let nics = self
            .get(&format!("{}/EthernetInterfaces", self.systems[i]))
            .await;
        let first = nics["Members"][0]["@odata.id"]
            .as_str()
            .expect("a NIC")
            .to_owned();
        self.get(&first).await["MACAddress"]
            .as_str()
            .expect("its MAC")
            .to_lowercase()
    }
}

impl Firmware {
    /// What happened so far, one line per event.
    pub fn events(&self) -> Vec<String> {
        self.seen.lock().expect("firmware log").events.clone()
    }

    /// The events once the last one matches `last`, waiting up to `limit` for it: the firmware
    /// polls the emulator, so it may note a power change a moment after the node shows it.
    pub async fn events_ending_with(
        &self,
        last: impl Fn(&str) -> bool,
        limit: Duration,
    ) -> Vec<String> {
        let deadline = tokio::time::Instant::now() + limit;
        loop {
            // Registered before the check, so a note made in between still wakes us.
            let noted = self.noted.notified();
            let events = self.events();
            if events.last().is_some_and(|e| last(e)) {
                return events;
            }
            if tokio::time::timeout_at(deadline, noted).await.is_err() {
                return events;
            }
        }
    }

    /// Runs `f` over the log (the agents, for their disks and logs).
    pub fn with_log<T>(&self, f: impl FnOnce(&FirmwareLog) -> T) -> T {
        f(&self.seen.lock().expect("firmware log"))
    }

    /// Every agent's log, for a failing test's message.
    pub fn agent_logs(&self) -> String {
        self.with_log(|log| {
            log.agents
                .iter()
                .map(Agent::log_text)
                .collect::<Vec<_>>()
                .join("\n=== next boot ===\n")
        })
    }
}

impl Drop for Firmware {
    fn drop(&mut self) {
        self.task.abort();
    }
}

struct Watch {
    http: reqwest::Client,
    base: String,
    system: String,
    credentials: Option<(String, String)>,
    api_url: String,
    mac: String,
    iso_url: String,
    /// The dnsmasq directories of a network boot (`hosts/`, `opts/`).
    dhcp: Option<std::path::PathBuf>,
    seen: Arc<Mutex<FirmwareLog>>,
    noted: Arc<tokio::sync::Notify>,
}

/// What a network boot fetched: the kernel command line's API URL and the sizes it read.
struct NetBooted {
    api_url: String,
    kernel: usize,
    ramdisk: usize,
}

impl Watch {
    async fn fetch(&self, path: &str) -> Option<Value> {
        let mut req = self.http.get(format!("{}{path}", self.base));
        if let Some((user, password)) = &self.credentials {
            req = req.basic_auth(user, Some(password));
        }
        let r = req.send().await.ok()?;
        if !r.status().is_success() {
            return None;
        }
        r.json().await.ok()
    }

    /// iPXE's part of a network boot over what Ferrum published (see
    /// [`Emulator::network_firmware`]).
    async fn net_boot(&self, dhcp: &std::path::Path) -> Result<NetBooted, String> {
        let read = |path: std::path::PathBuf| {
            std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))
        };
        let host = read(dhcp.join(format!("hosts/ironic-{}.conf", self.mac)))?;
        let tag = host
            .trim()
            .split(',')
            .find_map(|field| field.strip_prefix("set:"))
            .filter(|_| !host.contains(",ignore"))
            .ok_or_else(|| format!("DHCP ignores {}: {host:?}", self.mac))?
            .to_owned();
        let options = read(dhcp.join(format!("opts/ironic-{tag}.conf")))?;
        let script_url = options
            .lines()
            .find_map(|l| l.strip_prefix(&format!("tag:{tag},tag:ipxe,67,")))
            .ok_or_else(|| format!("no iPXE boot file for tag {tag}: {options:?}"))?
            .to_owned();
        let get = async |url: &str| -> Result<Vec<u8>, String> {
            let r = self
                .http
                .get(url)
                .send()
                .await
                .map_err(|e| format!("{url}: {e}"))?;
            if !r.status().is_success() {
                return Err(format!("{url}: HTTP {}", r.status()));
            }
            Ok(r.bytes().await.map_err(|e| format!("{url}: {e}"))?.to_vec())
        };
        let script = String::from_utf8_lossy(&get(&script_url).await?).into_owned();
        if !script.starts_with("#!ipxe")
            || !script.contains("pxelinux.cfg/${net${netid}/mac:hexhyp}")
        {
            return Err(format!(
                "{script_url} is not the chaining iPXE script: {script:?}"
            ));
        }
        let base = script_url
            .rsplit_once('/')
            .map(|(b, _)| b)
            .unwrap_or_default();
        let config_url = format!("{base}/pxelinux.cfg/{}", self.mac.replace(':', "-"));
        let config = String::from_utf8_lossy(&get(&config_url).await?).into_owned();
        let line = |word: &str| {
            config
                .lines()
                .find_map(|l| l.strip_prefix(word))
                .map(str::to_owned)
                .ok_or_else(|| format!("{config_url} has no {word}line: {config:?}"))
        };
        let kernel_line = line("kernel ")?;
        let mut words = kernel_line.split_whitespace();
        let kernel_url = words.next().unwrap_or_default().to_owned();
        let api_url = words
            .find_map(|w| w.strip_prefix("ipa-api-url="))
            .ok_or_else(|| format!("no ipa-api-url on the kernel line {kernel_line:?}"))?
            .to_owned();
        let initrd_line = line("initrd ")?;
        let ramdisk_url = initrd_line
            .split_whitespace()
            .next()
            .unwrap_or_default()
            .to_owned();
        let kernel = get(&kernel_url).await?.len();
        let ramdisk = get(&ramdisk_url).await?.len();
        Ok(NetBooted {
            api_url,
            kernel,
            ramdisk,
        })
    }

    fn note(&self, event: String) {
        eprintln!("firmware of {}: {event}", self.system);
        self.seen.lock().expect("firmware log").events.push(event);
        self.noted.notify_waiters();
    }

    /// Every 100 ms: a system that is on and set to boot from a CD holding the deploy ISO
    /// boots the ramdisk (once per power-on); a system that is off has no ramdisk running.
    /// (Power changes land 1-2 s after they are asked for with `power_delay: Some(2)`, so an
    /// off between two ons is always seen.)
    async fn run(self) {
        let mut on = false;
        loop {
            tokio::time::sleep(Duration::from_millis(100)).await;
            let Some(system) = self.fetch(&self.system).await else {
                continue;
            };
            let now_on = system["PowerState"] == "On";
            if now_on && !on {
                let target = system["Boot"]["BootSourceOverrideTarget"]
                    .as_str()
                    .unwrap_or("None")
                    .to_owned();
                let Some(cd) = self
                    .fetch(&format!("{}/VirtualMedia/Cd", self.system))
                    .await
                else {
                    continue;
                };
                let image = cd["Image"].as_str().unwrap_or_default();
                let inserted = cd["Inserted"] == true;
                if let (Some(dhcp), "Pxe") = (&self.dhcp, target.as_str()) {
                    match self.net_boot(dhcp).await {
                        Ok(booted) => {
                            self.note(format!(
                                "powered on, network boot: kernel {} bytes, ramdisk {} bytes, agent for {}",
                                booted.kernel, booted.ramdisk, booted.api_url
                            ));
                            let mac = self.mac.clone();
                            let agent = tokio::task::spawn_blocking(move || {
                                Agent::start(&booted.api_url, &mac, "16M")
                            })
                            .await
                            .expect("start the agent");
                            let mut seen = self.seen.lock().expect("firmware log");
                            seen.agents.extend(agent);
                            seen.running = true;
                        }
                        Err(e) => self.note(format!("powered on, network boot failed: {e}")),
                    }
                } else if target == "Cd" && inserted && image == self.iso_url {
                    self.note(format!(
                        "powered on, booting the deploy ISO {image} from Cd"
                    ));
                    let (api, mac) = (self.api_url.clone(), self.mac.clone());
                    let agent =
                        tokio::task::spawn_blocking(move || Agent::start(&api, &mac, "16M"))
                            .await
                            .expect("start the agent");
                    let mut seen = self.seen.lock().expect("firmware log");
                    seen.agents.extend(agent);
                    seen.running = true;
                } else {
                    self.note(format!(
                        "powered on, booting from {target} (CD inserted: {inserted}, image {image:?}): no ramdisk"
                    ));
                }
            }
            if !now_on && on {
                let running = {
                    let mut seen = self.seen.lock().expect("firmware log");
                    std::mem::replace(&mut seen.running, false)
                };
                if running {
                    self.note("powered off, the ramdisk's agent stopped".to_owned());
                    let seen = self.seen.clone();
                    tokio::task::spawn_blocking(move || {
                        if let Some(agent) = seen.lock().expect("firmware log").agents.last() {
                            agent.stop();
                        }
                    })
                    .await
                    .expect("stop the agent");
                } else {
                    self.note("powered off".to_owned());
                }
            }
            on = now_on;
        }
    }
}
