//! A real Redfish BMC as a test peer: sushy-tools' emulator with its fake systems driver,
//! through the shared script (`shared/redfish-emulator.md`). Every [`Emulator`] runs on a free
//! port of its own with its own state directory; all of them share one prepared Python venv
//! (`FERRUM_REDFISH_EMULATOR_VENV`, default /tmp/ferrum-redfish-emu/venv, which `.ci/run`
//! prepares), linked into each directory as the `venv` the script expects, so no test installs
//! anything. Where the venv or the script is missing the tests say so loudly and return, or
//! fail under `FERRUM_REQUIRE_SERVICES=1`.

use std::{path::PathBuf, process::Command, sync::OnceLock, time::Duration};

use serde_json::Value;

use super::services::random_suffix;

fn required() -> bool {
    std::env::var("FERRUM_REQUIRE_SERVICES").is_ok_and(|v| v == "1")
}

/// The emulator script and the prepared venv, or None (announced) when either is missing.
fn prepared() -> Option<(PathBuf, PathBuf)> {
    static ANNOUNCED: OnceLock<()> = OnceLock::new();
    let scripts: Vec<PathBuf> = match std::env::var("FERRUM_REDFISH_EMULATOR_SCRIPT") {
        Ok(path) => vec![path.into()],
        Err(_) => vec![
            std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("../shared/scripts/start-redfish-emulator.sh"),
            "/work/shared/scripts/start-redfish-emulator.sh".into(),
        ],
    };
    let venv = PathBuf::from(
        std::env::var("FERRUM_REDFISH_EMULATOR_VENV")
            .unwrap_or_else(|_| "/tmp/ferrum-redfish-emu/venv".to_owned()),
    );
    let script = scripts.iter().find(|p| p.is_file()).cloned();
    let problem = match (&script, venv.join("bin/sushy-emulator").is_file()) {
        (Some(script), true) => return Some((script.clone(), venv)),
        (None, _) => format!(
            "no Redfish emulator script at {scripts:?} (set FERRUM_REDFISH_EMULATOR_SCRIPT)"
        ),
        (Some(_), false) => format!(
            "no prepared Redfish emulator venv at {} (.ci/run prepares it; or set FERRUM_REDFISH_EMULATOR_VENV)",
            venv.display()
        ),
    };
    let message = format!("{problem}; the Redfish emulator suite was NOT run.");
    if required() {
        panic!("FERRUM_REQUIRE_SERVICES=1: {message}");
    }
    ANNOUNCED.get_or_init(|| {
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr(), "\n!!!!!!!! {message} !!!!!!!!\n");
    });
    None
}

/// How to start an emulator.
#[derive(Debug, Clone)]
pub struct EmulatorOptions {
    pub systems: usize,
    /// `REDFISH_EMU_POWER_DELAY`: a power change lands within delay-1..delay s.
    pub power_delay: Option<u32>,
    /// Basic authentication (user, password).
    pub credentials: Option<(String, String)>,
}

impl Default for EmulatorOptions {
    fn default() -> Self {
        EmulatorOptions {
            systems: 1,
            power_delay: Some(1),
            credentials: None,
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
        emulator.launch(free_port());
        Some(emulator)
    }

    fn script_command(&self) -> Command {
        let mut cmd = Command::new("bash");
        cmd.arg(&self.script).env("REDFISH_EMU_DIR", &self.dir);
        cmd
    }

    fn launch(&mut self, port: u16) {
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
        assert!(
            out.status.success(),
            "the Redfish emulator did not start on port {port}: {}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        self.port = port;
        self.systems = String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter(|l| !l.trim().is_empty())
            .map(|id| format!("/redfish/v1/Systems/{}", id.trim()))
            .collect();
        assert_eq!(self.systems.len(), self.options.systems, "{out:?}");
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
