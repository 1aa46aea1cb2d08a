//! Running `ipmitool` as Ironic's `_exec_ipmitool` does: a child process (no shell), the
//! password in its environment (`-E`; nothing is written, see [`pass_password`]), killed when
//! it outlives `command_retry_timeout` (Ironic's `kill_on_timeout`), tried again until that
//! timeout, and at most one command at a time to one BMC, at least `min_command_interval` after
//! the one before.
//!
//! `ipmitool` exits 0 on some refusals (a BMC answering "Set Chassis Boot Parameter 5 failed:
//! Unspecified error"), so a line of stderr saying `failed` is a failure whatever the exit
//! status.

use std::{
    collections::HashMap,
    os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt},
    path::{Path, PathBuf},
    process::Stdio,
    sync::{Arc, LazyLock, Mutex},
    time::Duration,
};

use tokio::time::Instant;

use super::driver_info::IpmiInfo;
use crate::drivers::DriverError;

/// How `ipmitool` is run (the conductor's `ipmi_*` settings).
#[derive(Debug, Clone)]
pub(super) struct Settings {
    /// How long a failing command is tried again, and how long one process may run.
    pub(super) command_retry_timeout: Duration,
    /// The least time between two commands to one BMC.
    pub(super) min_command_interval: Duration,
}

/// What a command printed.
#[derive(Debug)]
pub(super) struct Output {
    pub(super) stdout: String,
}

/// The runner a hardware type's interfaces share, so that their commands to one BMC queue up.
pub(super) struct Ipmitool {
    settings: Settings,
    /// Per BMC: when its last command ended. Holding its lock is holding the BMC.
    bmcs: Mutex<HashMap<String, Arc<tokio::sync::Mutex<Option<Instant>>>>>,
}

impl Ipmitool {
    pub(super) fn new(settings: Settings) -> Self {
        Ipmitool {
            settings,
            bmcs: Mutex::new(HashMap::new()),
        }
    }

    fn bmc_slot(&self, bmc: String) -> Arc<tokio::sync::Mutex<Option<Instant>>> {
        let mut bmcs = self.bmcs.lock().unwrap_or_else(|e| e.into_inner());
        bmcs.entry(bmc).or_default().clone()
    }

    /// Runs `ipmitool <command>` against the node's BMC, retrying a failure until
    /// `command_retry_timeout` has passed (Ironic retries every failure when it, not ipmitool,
    /// does the retries). A failure is Ironic's "IPMI call failed: <command>." with the BMC's
    /// (or ipmitool's) words.
    pub(super) async fn run(
        &self,
        info: &IpmiInfo,
        node: &str,
        command: &[&str],
    ) -> Result<Output, DriverError> {
        let Settings {
            command_retry_timeout: timeout,
            min_command_interval: interval,
        } = self.settings;
        let shown = command.join(" ");
        let deadline = Instant::now() + timeout;
        let mut tries_left = if interval.is_zero() {
            u128::MAX
        } else {
            (timeout.as_millis() / interval.as_millis().max(1)).max(1)
        };
        loop {
            tries_left -= 1;
            match self.run_once(info, command).await {
                Ok(output) => return Ok(output),
                Err(reason) if Instant::now() >= deadline || tries_left == 0 => {
                    tracing::error!(node.uuid = %node,
                        "IPMI Error while attempting \"{shown}\" for node {node}. Error: {reason}");
                    return Err(DriverError::Failed(format!(
                        "IPMI call failed: {shown}. Error: {reason}"
                    )));
                }
                Err(reason) => {
                    tracing::warn!(node.uuid = %node,
                        "IPMI Error encountered, retrying \"{shown}\" for node {node}. Error: {reason}");
                }
            }
        }
    }

    /// One `ipmitool` process, in its turn at the BMC and not before `min_command_interval`
    /// after the command before; the error is what it (or the BMC through it) said.
    pub(super) async fn run_once(
        &self,
        info: &IpmiInfo,
        command: &[&str],
    ) -> Result<Output, String> {
        let slot = self.bmc_slot(info.bmc());
        let mut last = slot.lock().await;
        if let Some(last) = *last {
            tokio::time::sleep_until(last + self.settings.min_command_interval).await;
        }
        let result = self.once(info, command).await;
        *last = Some(Instant::now());
        result
    }

    /// One `ipmitool` process; the error is what it (or the BMC through it) said.
    async fn once(&self, info: &IpmiInfo, command: &[&str]) -> Result<Output, String> {
        // Ironic's timing arguments when it does the retries: one retransmission, the
        // interval as ipmitool's timeout (whole seconds, at least one).
        let ipmitool_timeout = self
            .settings
            .min_command_interval
            .as_secs_f64()
            .ceil()
            .max(1.0);
        let mut child = tokio::process::Command::new("ipmitool");
        if let Some(home) = short_registry_home() {
            child.env("HOME", home);
        }
        pass_password(&mut child, &info.password);
        let (stdout, stderr) = (
            Capture::new("ipmitool-stdout")?,
            Capture::new("ipmitool-stderr")?,
        );
        child
            .args(info.ipmitool_args())
            .args(["-R", "1", "-N", &format!("{ipmitool_timeout}")])
            .args(command)
            .stdin(Stdio::null())
            .stdout(stdout.for_child()?)
            .stderr(stderr.for_child()?)
            // Dropped on timeout: killed, as Ironic's kill_on_timeout.
            .kill_on_drop(true);
        crate::metrics::get().ipmitool_run();
        let mut child = child.spawn().map_err(|e| {
            if e.kind() == std::io::ErrorKind::NotFound {
                "ipmitool was not found on the conductor's PATH (install ipmitool)".to_owned()
            } else {
                format!("could not start ipmitool: {e}")
            }
        })?;
        let limit = self.settings.command_retry_timeout;
        let status = match tokio::time::timeout(limit, child.wait()).await {
            Ok(Ok(status)) => status,
            Ok(Err(e)) => return Err(format!("could not run ipmitool: {e}")),
            Err(_) => {
                return Err(format!(
                    "ipmitool did not finish within {} s and was killed",
                    limit.as_secs_f64()
                ));
            }
        };
        let stdout = String::from_utf8_lossy(&stdout.written()?).into_owned();
        let stderr = String::from_utf8_lossy(&stderr.written()?).into_owned();
        if !status.success() {
            let said = stderr.trim();
            return Err(if said.is_empty() {
                format!("ipmitool exited with {status}")
            } else {
                said.lines().collect::<Vec<_>>().join("; ")
            });
        }
        if let Some(refusal) = stderr.lines().find(|l| says_failed(l)) {
            return Err(refusal.trim().to_owned());
        }
        Ok(Output { stdout })
    }
}

/// Where a child's output goes: an anonymous file in memory (`memfd_create`), read once the
/// child has exited. A pipe would wake the conductor for each write the child makes and for
/// its end (three or four wake-ups of a runtime thread per command, most of the CPU time a
/// command costs the conductor); with a file, only the child's exit does.
struct Capture(std::fs::File);

impl Capture {
    fn new(name: &str) -> Result<Capture, String> {
        rustix::fs::memfd_create(name, rustix::fs::MemfdFlags::CLOEXEC)
            .map(|fd| Capture(std::fs::File::from(fd)))
            .map_err(|e| format!("could not make a file for ipmitool's output: {e}"))
    }

    /// The same file for the child (its descriptor is duplicated into the child).
    fn for_child(&self) -> Result<Stdio, String> {
        self.0
            .try_clone()
            .map(Stdio::from)
            .map_err(|e| format!("could not make a file for ipmitool's output: {e}"))
    }

    /// What the child wrote, once it has exited.
    fn written(mut self) -> Result<Vec<u8>, String> {
        use std::io::{Read, Seek};
        let mut bytes = Vec::new();
        self.0
            .rewind()
            .and_then(|()| self.0.read_to_end(&mut bytes))
            .map_err(|e| format!("could not read ipmitool's output: {e}"))?;
        Ok(bytes)
    }
}

/// A home directory for ipmitool whose registry of IANA enterprise numbers names one. ipmitool
/// 1.8.19 reads the whole registry (Debian's `/usr/share/misc/enterprise-numbers.txt`, 4.7 MB)
/// at every start, only to name manufacturers, which nothing Ferrum reads shows: ~25 ms of CPU a
/// command, more than the rest of its work with the BMC. It looks first in
/// `$HOME/.local/usr/share/misc/`. The directory is the conductor user's own
/// (`<temp>/ferrum-ipmitool-<uid>`, 0700); None, and ipmitool keeps the inherited HOME, when it
/// cannot be made so.
pub(super) fn short_registry_home() -> Option<&'static Path> {
    static HOME: LazyLock<Option<PathBuf>> = LazyLock::new(|| match make_short_registry_home() {
        Ok(home) => Some(home),
        Err(e) => {
            tracing::warn!("ipmitool will read its whole IANA registry at every command: {e}");
            None
        }
    });
    HOME.as_deref()
}

/// The registry's header and its first entry, as IANA writes them.
const SHORT_REGISTRY: &str = "PRIVATE ENTERPRISE NUMBERS\n\n\
    Decimal\n| Organization\n| | Contact\n| | | Email\n| | | |\n\
    0\n  Reserved\n    Internet Assigned Numbers Authority\n      iana&iana.org\n";

fn make_short_registry_home() -> std::io::Result<PathBuf> {
    use std::io::{Error, ErrorKind};
    // The owner of /proc/self is this process's effective user.
    let uid = std::fs::metadata("/proc/self")?.uid();
    let home = std::env::temp_dir().join(format!("ferrum-ipmitool-{uid}"));
    match std::fs::DirBuilder::new().mode(0o700).create(&home) {
        Ok(()) => {}
        Err(e) if e.kind() == ErrorKind::AlreadyExists => {
            // Made before, by this user: only if nobody else can have put anything in it.
            let found = std::fs::symlink_metadata(&home)?;
            if !found.is_dir() || found.uid() != uid || found.permissions().mode() & 0o077 != 0 {
                return Err(Error::other(format!(
                    "{} is not a directory of this user's alone",
                    home.display()
                )));
            }
        }
        Err(e) => return Err(e),
    }
    let dir = home.join(".local/usr/share/misc");
    std::fs::create_dir_all(&dir)?;
    // Written aside and renamed, so that an ipmitool started meanwhile reads it whole.
    let aside = dir.join(format!("enterprise-numbers.txt.{}", std::process::id()));
    std::fs::write(&aside, SHORT_REGISTRY)?;
    std::fs::rename(&aside, dir.join("enterprise-numbers.txt"))?;
    Ok(home)
}

/// Whether a line of ipmitool's stderr, when it exits 0, reports a refusal ("Set Chassis Boot
/// Parameter 5 failed: ..."); its warnings ("Unable to Get Channel Cipher Suites") are not.
fn says_failed(line: &str) -> bool {
    line.contains(" failed")
}

/// The variable `ipmitool -E` reads the BMC password from. (It prefers `IPMITOOL_PASSWORD`,
/// which [`pass_password`] therefore removes.)
pub(super) const PASSWORD_VARIABLE: &str = "IPMI_PASSWORD";

/// Gives `command` (ipmitool, or socat that starts it) the BMC password in its environment,
/// which only the conductor's user (and root) can read, as it could the password file Ironic
/// writes for each command; nothing is written, and nothing is left behind by a crash.
pub(super) fn pass_password(command: &mut tokio::process::Command, password: &str) {
    command
        .env(PASSWORD_VARIABLE, password)
        .env_remove("IPMITOOL_PASSWORD");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ipmitool_reads_a_short_registry_of_its_own() {
        let home = short_registry_home().expect("a home of this user's");
        let registry = home.join(".local/usr/share/misc/enterprise-numbers.txt");
        let text = std::fs::read_to_string(registry).expect("the registry");
        assert!(text.contains("\n0\n  Reserved\n"), "{text}");
        let mode = std::fs::metadata(home).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o700);
    }

    #[tokio::test]
    async fn a_capture_holds_what_the_child_wrote() {
        let (out, err) = (Capture::new("out").unwrap(), Capture::new("err").unwrap());
        let status = tokio::process::Command::new("sh")
            .args(["-c", "echo said; echo refused >&2; echo more"])
            .stdout(out.for_child().unwrap())
            .stderr(err.for_child().unwrap())
            .status()
            .await
            .unwrap();
        assert!(status.success());
        assert_eq!(out.written().unwrap(), b"said\nmore\n");
        assert_eq!(err.written().unwrap(), b"refused\n");
    }

    #[test]
    fn refusals_are_found_in_stderr() {
        assert!(says_failed(
            "Set Chassis Boot Parameter 5 failed: Unspecified error"
        ));
        assert!(says_failed(
            "Set Chassis Power Control to Diag failed: Invalid data field in request"
        ));
        assert!(!says_failed("Unable to Get Channel Cipher Suites"));
        assert!(!says_failed("Chassis Power is on"));
    }
}
