//! `ipmitool-socat`: a node's serial console over IPMI serial-over-LAN, as Ironic's
//! `IPMISocatConsole`. `socat` listens on the node's `ipmi_terminal_port` and, for one client at
//! a time, runs `ipmitool … sol activate` on a pty (after `sol deactivate`: socat ends the
//! ipmitool of a client that left without a word to the BMC, which would refuse the next one); `console_info` is
//! `{"type": "socat", "url": "tcp://<console_socat_address>:<port>"}`.
//!
//! Starting first deactivates a SOL session left open (its "already de-activated" exit 1 is no
//! error: the BMC refuses a second session otherwise); stopping kills socat's process group
//! (socat, the connection it forked, its ipmitool) and deactivates the session. A conductor that
//! dies, even by SIGKILL, takes its consoles with it ([`LIFELINE`]); the next conductor of the
//! node starts them again. The group's PID is also kept in a file, so that one left behind
//! anyway is stopped before a new one takes its port.

use std::{
    collections::HashMap,
    path::{Path, PathBuf},
    process::Stdio,
    sync::{Arc, Mutex, PoisonError},
    time::Duration,
};

use async_trait::async_trait;
use serde_json::json;
use tracing::{info, warn};

use super::{
    driver_info::{IpmiInfo, parse_driver_info},
    ipmitool::{Ipmitool, pass_password},
};
use crate::{
    drivers::{ConsoleInterface, DriverError},
    node::{JsonObject, Node},
};

/// Runs its arguments (socat's command line) until they exit, or until this process's standard
/// input, a pipe the conductor holds, ends: then the whole group goes (socat, the connection it
/// forked, ipmitool), so that a conductor that dies, even by SIGKILL, leaves no console
/// listening. Exits with socat's status (a port that is taken: at once).
const LIFELINE: &str = r#"exec 3<&0 </dev/null
"$@" &
console=$!
{ read -r _ <&3; kill -TERM 0; } &
lifeline=$!
wait "$console"
status=$?
kill "$lifeline" 2>/dev/null
exit "$status""#;

/// How long socat has to refuse its port (taken, or not allowed) before it counts as started.
const START_CHECK: Duration = Duration::from_millis(300);
/// How long a stopped socat may take to exit.
const STOP_WAIT: Duration = Duration::from_secs(5);

pub struct SocatConsole {
    tool: Arc<Ipmitool>,
    /// Where socat listens, and the host of the URL (`console_socat_address`).
    address: String,
    /// socat's `-T`: an idle connection is closed after it (`console_terminal_timeout`).
    terminal_timeout: Duration,
    /// The PID and log files of the running consoles.
    dir: PathBuf,
    /// The consoles this process started, by node UUID.
    running: Mutex<HashMap<String, Running>>,
}

struct Running {
    /// The lifeline shell leading socat's group; its standard input is the lifeline.
    child: tokio::process::Child,
}

impl SocatConsole {
    pub(super) fn new(
        tool: Arc<Ipmitool>,
        address: String,
        terminal_timeout: Duration,
    ) -> SocatConsole {
        SocatConsole {
            tool,
            address,
            terminal_timeout,
            dir: std::env::temp_dir().join("ferrum-consoles"),
            running: Mutex::new(HashMap::new()),
        }
    }

    fn pid_file(&self, uuid: &str) -> PathBuf {
        self.dir.join(format!("{uuid}.pid"))
    }

    fn log_file(&self, uuid: &str) -> PathBuf {
        self.dir.join(format!("{uuid}.log"))
    }

    /// The console's URL: the host in brackets when it is an IPv6 address.
    fn url(&self, port: u16) -> String {
        if self.address.contains(':') {
            format!("tcp://[{}]:{port}", self.address)
        } else {
            format!("tcp://{}:{port}", self.address)
        }
    }

    /// socat's listening address: one client at a time, each served by a fork.
    fn listen_address(&self, port: u16) -> String {
        if self.address.contains(':') {
            format!(
                "TCP6-LISTEN:{port},bind=[{}],reuseaddr,fork,max-children=1",
                self.address
            )
        } else {
            format!(
                "TCP4-LISTEN:{port},bind={},reuseaddr,fork,max-children=1",
                self.address
            )
        }
    }

    /// Ends the SOL session the BMC has open for the node, if any.
    async fn deactivate(&self, info: &IpmiInfo, node: &Node) {
        if let Err(said) = self.tool.run_once(info, &["sol", "deactivate"]).await
            && !said.contains("already de-activated")
        {
            warn!(node.uuid = %node.uuid, "Could not deactivate the SOL session of node {}: {said}", node.uuid);
        }
    }

    /// Stops the node's socat: the one this process started, else one a predecessor left (its
    /// PID file names a live socat of this node).
    async fn stop_process(&self, uuid: &str) {
        let pid_file = self.pid_file(uuid);
        let running = lock(&self.running).remove(uuid);
        if let Some(mut running) = running {
            if let Some(pid) = running.child.id() {
                kill_group(pid).await;
            }
            if tokio::time::timeout(STOP_WAIT, running.child.wait())
                .await
                .is_err()
            {
                let _ = running.child.kill().await;
            }
        } else if let Some(pid) = left_over(&pid_file, uuid) {
            info!(node.uuid = %uuid, pid, "Stopping the console socat an earlier conductor left running");
            kill_group(pid).await;
        }
        let _ = std::fs::remove_file(&pid_file);
    }
}

/// Whether `arg` can go into the shell line socat runs for each connection: only characters
/// neither socat's address syntax nor the shell reads (letters, digits and `-_.:/@%+=,`).
fn exec_safe(arg: &str) -> bool {
    !arg.is_empty()
        && arg
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_.:/@%+=,".contains(c))
}

/// The PID in `pid_file` if it is a running console of node `uuid` (its lifeline shell's command
/// line names the node and socat), so that a PID reused by another process is never signalled.
fn left_over(pid_file: &Path, uuid: &str) -> Option<u32> {
    let pid: u32 = std::fs::read_to_string(pid_file)
        .ok()?
        .trim()
        .parse()
        .ok()?;
    let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
    let cmdline = String::from_utf8_lossy(&cmdline);
    let name = format!("\0ferrum-console-{uuid}\0socat\0");
    cmdline.contains(&name).then_some(pid)
}

/// SIGTERM to the process group `pgid` (the lifeline shell leads socat's).
async fn kill_group(pgid: u32) {
    let killed = tokio::process::Command::new("kill")
        .args(["-TERM", "--", &format!("-{pgid}")])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .await;
    if let Err(e) = killed {
        warn!(pgid, "Could not signal the console's processes: {e}");
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The console's TCP port: Ironic's message when the node has none.
fn terminal_port(info: &IpmiInfo) -> Result<u16, DriverError> {
    info.terminal_port.ok_or_else(|| {
        DriverError::MissingParameterValue(
            "Missing 'ipmi_terminal_port' parameter in node's driver_info.".to_owned(),
        )
    })
}

#[async_trait]
impl ConsoleInterface for SocatConsole {
    fn name(&self) -> &'static str {
        "ipmitool-socat"
    }

    fn validate(&self, node: &Node) -> Result<(), DriverError> {
        terminal_port(&parse_driver_info(node)?).map(|_| ())
    }

    async fn start(&self, node: &Node) -> Result<JsonObject, DriverError> {
        let info = parse_driver_info(node)?;
        let port = terminal_port(&info)?;
        self.stop_process(&node.uuid).await;
        self.deactivate(&info, node).await;
        let failed = |e: std::io::Error| {
            DriverError::Failed(format!("Console subprocess failed to start. {e}"))
        };
        std::fs::create_dir_all(&self.dir).map_err(failed)?;
        let mut ipmitool = vec!["ipmitool".to_owned()];
        ipmitool.extend(info.ipmitool_args());
        if let Some(bad) = ipmitool.iter().find(|arg| !exec_safe(arg)) {
            return Err(DriverError::InvalidParameterValue(format!(
                "The console of node {} cannot pass \"{bad}\" to ipmitool through socat: only \
                 letters, digits and -_.:/@%+=, are allowed in its driver_info values.",
                node.uuid
            )));
        }
        let ipmitool = ipmitool.join(" ");
        // Each connection first ends the session the one before left open (socat ends its
        // ipmitool without a word to the BMC, which then refuses the next activation).
        let session = format!(
            "{ipmitool} sol deactivate >/dev/null 2>/dev/null; exec {ipmitool} sol activate"
        );
        let log_file = self.log_file(&node.uuid);
        let log = std::fs::File::create(&log_file).map_err(failed)?;
        let mut socat = tokio::process::Command::new("sh");
        // The shell's name carries the node's UUID, for `left_over` to know it by.
        socat.args([
            "-c",
            LIFELINE,
            &format!("ferrum-console-{}", node.uuid),
            "socat",
        ]);
        // socat's children, each connection's ipmitool, inherit these.
        if let Some(home) = super::ipmitool::short_registry_home() {
            socat.env("HOME", home);
        }
        pass_password(&mut socat, &info.password);
        if !self.terminal_timeout.is_zero() {
            socat.arg(format!("-T{}", self.terminal_timeout.as_secs().max(1)));
        }
        socat
            .arg(self.listen_address(port))
            .arg(format!("SYSTEM:\"{session}\",pty,stderr"))
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(log)
            // A group of its own, so that stopping it also stops the connection it forked.
            .process_group(0)
            .kill_on_drop(true);
        let mut child = socat.spawn().map_err(failed)?;
        if let Some(pid) = child.id() {
            std::fs::write(self.pid_file(&node.uuid), pid.to_string()).map_err(failed)?;
        }
        // A port that is taken or not allowed makes socat exit at once.
        tokio::time::sleep(START_CHECK).await;
        if let Ok(Some(status)) = child.try_wait() {
            let said = std::fs::read_to_string(&log_file).unwrap_or_default();
            let _ = std::fs::remove_file(self.pid_file(&node.uuid));
            return Err(DriverError::Failed(format!(
                "Console subprocess failed to start. socat exited with {status}: {}",
                said.trim()
            )));
        }
        info!(node.uuid = %node.uuid, port, "Started the serial console of node {}", node.uuid);
        lock(&self.running).insert(node.uuid.clone(), Running { child });
        let mut console = JsonObject::new();
        console.insert("type".into(), json!("socat"));
        console.insert("url".into(), json!(self.url(port)));
        Ok(console)
    }

    async fn stop(&self, node: &Node) -> Result<(), DriverError> {
        self.stop_process(&node.uuid).await;
        let _ = std::fs::remove_file(self.log_file(&node.uuid));
        // The BMC keeps a session whose client went: end it, or the next one is refused.
        if let Ok(info) = parse_driver_info(node) {
            self.deactivate(&info, node).await;
        }
        info!(node.uuid = %node.uuid, "Stopped the serial console of node {}", node.uuid);
        Ok(())
    }

    async fn stop_all(&self) {
        let uuids: Vec<String> = lock(&self.running).keys().cloned().collect();
        for uuid in uuids {
            self.stop_process(&uuid).await;
            let _ = std::fs::remove_file(self.log_file(&uuid));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_socat_cannot_pass_is_refused() {
        assert!(exec_safe("-E"));
        assert!(exec_safe("fe80::1"));
        for bad in [
            "two words",
            "quo\"te",
            "it's",
            "back\\slash",
            "",
            "tab\there",
        ] {
            assert!(!exec_safe(bad), "{bad:?}");
        }
    }

    #[test]
    fn the_url_and_listening_address_bracket_ipv6() {
        let console = |address: &str| {
            SocatConsole::new(
                Arc::new(Ipmitool::new(super::super::ipmitool::Settings {
                    command_retry_timeout: Duration::from_secs(1),
                    min_command_interval: Duration::ZERO,
                })),
                address.to_owned(),
                Duration::from_secs(600),
            )
        };
        let v4 = console("192.0.2.5");
        assert_eq!(v4.url(7000), "tcp://192.0.2.5:7000");
        assert_eq!(
            v4.listen_address(7000),
            "TCP4-LISTEN:7000,bind=192.0.2.5,reuseaddr,fork,max-children=1"
        );
        let v6 = console("2001:db8::5");
        assert_eq!(v6.url(7000), "tcp://[2001:db8::5]:7000");
        assert!(
            v6.listen_address(7000)
                .starts_with("TCP6-LISTEN:7000,bind=[2001:db8::5],")
        );
    }
}
