//! A real IPMI BMC as a test peer: OpenIPMI's `ipmi_sim` through the repository's script
//! (`tests/peers/ipmi-bmc.sh`, see `tests/peers/README.md`). Every [`Bmc`] has its own UDP port
//! and directory, and is stopped (by its PID) when dropped. Where `ipmi_sim` or `ipmitool` is
//! missing the tests say so loudly and return, or fail under `FERRUM_REQUIRE_SERVICES=1`.

use std::{path::PathBuf, process::Command, sync::OnceLock};

use serde_json::{Value, json};

use super::services::{not_run, peer_script, random_suffix};

/// The BMC user's credentials.
pub const USER: &str = "admin";
pub const PASSWORD: &str = "ipmi-s3cret";

pub struct Bmc {
    pub port: u16,
    pub pid: u32,
    /// The BMC's files: `state/power`, `state/boot`, `state/log`, `hooks/`.
    pub dir: PathBuf,
}

/// Whether ipmi_sim and ipmitool are installed; announced once when not.
fn tools_present() -> bool {
    static PRESENT: OnceLock<bool> = OnceLock::new();
    static ANNOUNCED: OnceLock<()> = OnceLock::new();
    let present = *PRESENT.get_or_init(|| {
        ["ipmi_sim", "ipmitool", "socat"].iter().all(|tool| {
            Command::new("sh")
                .args(["-c", &format!("command -v {tool}")])
                .output()
                .is_ok_and(|o| o.status.success())
        })
    });
    if !present {
        not_run(
            "ipmi_sim, ipmitool or socat is missing (Debian packages openipmi, ipmitool, socat); the IPMI suite was NOT run.",
            &ANNOUNCED,
        );
    }
    present
}

impl Bmc {
    /// Starts a BMC on a free port of 127.0.0.1, its machine off; None (announced) when the
    /// tools are missing.
    pub fn start() -> Option<Bmc> {
        Self::start_with_serial(None)
    }

    /// [`Bmc::start`], its serial-over-LAN connected to `serial_port` of 127.0.0.1 (which must
    /// be listening: the simulator connects as it starts).
    pub fn start_with_serial(serial_port: Option<u16>) -> Option<Bmc> {
        if !tools_present() {
            return None;
        }
        let dir = std::env::temp_dir().join(format!("ferrum-ipmi-bmc-{}", random_suffix()));
        let mut script = Command::new("bash");
        if let Some(port) = serial_port {
            script.env("IPMI_BMC_SOL_PORT", port.to_string());
        }
        let out = script
            .arg(peer_script("ipmi-bmc.sh"))
            .arg("start")
            .arg(&dir)
            .env("IPMI_BMC_USER", USER)
            .env("IPMI_BMC_PASSWORD", PASSWORD)
            .output()
            .expect("run tests/peers/ipmi-bmc.sh");
        assert!(
            out.status.success(),
            "ipmi-bmc.sh start failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        let value = |key: &str| {
            text.lines()
                .find_map(|l| l.strip_prefix(key))
                .unwrap_or_else(|| panic!("ipmi-bmc.sh printed no {key}: {text}"))
                .to_owned()
        };
        Some(Bmc {
            port: value("IPMI_BMC_PORT=").parse().expect("port"),
            pid: value("IPMI_BMC_PID=").parse().expect("pid"),
            dir: PathBuf::from(value("IPMI_BMC_DIR=")),
        })
    }

    /// The `driver_info` of a node behind this BMC.
    pub fn driver_info(&self) -> Value {
        json!({
            "ipmi_address": "127.0.0.1",
            "ipmi_port": self.port,
            "ipmi_username": USER,
            "ipmi_password": PASSWORD,
        })
    }

    fn state(&self, name: &str) -> String {
        std::fs::read_to_string(self.dir.join("state").join(name))
            .unwrap_or_default()
            .trim()
            .to_owned()
    }

    /// Whether the simulated machine is on, as its chassis keeps it.
    pub fn powered_on(&self) -> bool {
        self.state("power") == "1"
    }

    /// The boot device as the simulator passed it to its chassis (pxe, default, cdrom, bios).
    pub fn boot_device(&self) -> String {
        self.state("boot")
    }

    /// The chassis requests so far, one a line (`set power 1`, `get boot`, ...).
    pub fn requests(&self) -> Vec<String> {
        self.state("log").lines().map(str::to_owned).collect()
    }

    /// Whether the simulator's process is still there.
    pub fn running(&self) -> bool {
        std::path::Path::new(&format!("/proc/{}", self.pid)).exists()
    }

    /// Stops the simulator (by its PID, through the script); the machine's files stay.
    pub fn stop(&self) {
        let _ = Command::new("bash")
            .arg(peer_script("ipmi-bmc.sh"))
            .arg("stop")
            .arg(&self.dir)
            .output();
    }
}

impl Drop for Bmc {
    fn drop(&mut self) {
        self.stop();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
