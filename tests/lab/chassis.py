#!/usr/bin/env python3
"""The chassis of one lab VM: ipmi_sim's `chassis_control` program.

ipmi_sim (OpenIPMI 2.0.33) runs `chassis.py VMDIR get power`, `chassis.py VMDIR set power 1`,
`... set power 0`, `... set reset 1`, `... set shutdown 1` (IPMI soft off), `... get boot`,
`... set boot pxe|default|cdrom|bios|none`, and reads `power:N` / `boot:NAME` lines back. It must
answer within about a second (else ipmitool retransmits and the command runs twice), so QEMU is
started in the background, in a session of its own, and never waited for.

The VM's state lives in VMDIR (lab.sh writes vm.env there; the README's "chassis state" table):
  vm.env        KEY=VALUE lines: how to start this VM's QEMU (read-only for this program)
  boot-device   pxe | disk | cdrom | bios (IPMI's "default" and "none" are stored as disk)
  qemu.pid      PID of the running QEMU (the power state is whether that process lives)
  chassis.log   one line per call, and what it did
  hooks/<event> optional executables run after power-on, power-off and reset, as
                `hooks/<event> <event> <boot-device>`, in VMDIR, their output appended to the log

Also run by lab.sh directly: `chassis.py VMDIR on|off|status|command [BOOT-DEVICE]`
(`command` prints the QEMU command line, for debugging).
"""
import os
import signal
import subprocess
import sys
import time

# IPMI boot device names (as ipmi_sim passes them) -> the device the VM tries first.
BOOT_DEVICES = {
    "pxe": "pxe",
    "default": "disk",
    "none": "disk",
    "disk": "disk",
    "cdrom": "cdrom",
    "bios": "bios",
}


class Vm:
    def __init__(self, vmdir):
        self.dir = os.path.abspath(vmdir)
        self.env = {}
        with open(self.path("vm.env")) as f:
            for line in f:
                line = line.strip()
                if line and not line.startswith("#") and "=" in line:
                    key, value = line.split("=", 1)
                    self.env[key] = value

    def path(self, name):
        return os.path.join(self.dir, name)

    def log(self, message):
        with open(self.path("chassis.log"), "a") as f:
            f.write("%s %s\n" % (time.strftime("%Y-%m-%dT%H:%M:%S"), message))

    # ---- boot device ---------------------------------------------------------------------

    def boot_device(self):
        try:
            with open(self.path("boot-device")) as f:
                return BOOT_DEVICES.get(f.read().strip(), "disk")
        except FileNotFoundError:
            return "disk"

    def set_boot_device(self, name):
        device = BOOT_DEVICES.get(name)
        if device is None:
            raise ValueError("unknown boot device %r" % name)
        tmp = self.path("boot-device.tmp")
        with open(tmp, "w") as f:
            f.write(device + "\n")
        os.replace(tmp, self.path("boot-device"))

    # ---- QEMU ----------------------------------------------------------------------------

    def qemu_command(self, boot):
        e = self.env
        # bootindex decides the order under both firmwares (OVMF ignores -boot order=).
        net_index, disk_index = (1, 2) if boot == "pxe" else (2, 1)
        cmd = [
            "qemu-system-x86_64",
            "-name", "%s,process=%s" % (e["NAME"], e["NAME"]),
            "-machine", "q35", "-accel", e.get("ACCEL", "tcg"), "-cpu", e.get("CPU", "max"),
            "-smp", e.get("CPUS", "1"), "-m", e.get("MEMORY", "1024"),
            "-nodefaults", "-nographic", "-monitor", "none",
            "-qmp", "unix:%s,server=on,wait=off" % self.path("qmp.sock"),
            # The serial port: a TCP server on the namespace's loopback (ipmi_sim's SOL
            # connects there) that also logs everything the VM prints to serial.log.
            "-chardev", "socket,id=serial0,host=127.0.0.1,port=%s,server=on,wait=off,"
            "logfile=%s,logappend=on" % (e["SERIAL_PORT"], e["SERIAL_LOG"]),
            "-serial", "chardev:serial0",
            "-drive", "if=none,id=disk0,format=qcow2,file=%s" % e["DISK"],
            "-device", "virtio-blk-pci,drive=disk0,bootindex=%d" % disk_index,
            "-netdev", "tap,id=net0,ifname=%s,script=no,downscript=no" % e["TAP"],
            "-device", "virtio-net-pci,netdev=net0,mac=%s,bootindex=%d" % (e["MAC"], net_index),
        ]
        if e.get("FIRMWARE", "uefi") == "uefi":
            cmd += [
                "-drive", "if=pflash,format=raw,unit=0,readonly=on,file=%s" % e["OVMF_CODE"],
                "-drive", "if=pflash,format=raw,unit=1,file=%s" % e["OVMF_VARS"],
            ]
        # Read-only 9p shares (the deploy ramdisk mounts them by tag). QEMU takes them only
        # at start, so every power on passes them.
        for i, share in enumerate(filter(None, e.get("SHARES", "").split(" "))):
            tag, path = share.split("=", 1)
            cmd += ["-fsdev", "local,id=fs%d,path=%s,security_model=none,readonly=on,"
                    "multidevs=remap" % (i, path),
                    "-device", "virtio-9p-pci,fsdev=fs%d,mount_tag=%s" % (i, tag)]
        return cmd

    def qemu_pid(self):
        """The PID in qemu.pid if that process is this VM's QEMU and alive, else None."""
        try:
            with open(self.path("qemu.pid")) as f:
                pid = int(f.read().strip())
            with open("/proc/%d/cmdline" % pid, "rb") as f:
                args = f.read().split(b"\0")
            with open("/proc/%d/stat" % pid) as f:
                state = f.read().rsplit(")", 1)[1].split()[0]
        except (FileNotFoundError, ValueError, ProcessLookupError):
            return None
        if state == "Z" or b"-name" not in args:
            return None
        name = args[args.index(b"-name") + 1].decode(errors="replace").split(",")[0]
        return pid if name == self.env["NAME"] else None

    def power_on(self):
        if self.qemu_pid():
            return
        boot = self.boot_device()
        with open(self.path("qemu.log"), "ab") as out:
            proc = subprocess.Popen(self.qemu_command(boot), stdin=subprocess.DEVNULL,
                                    stdout=out, stderr=out, cwd=self.dir,
                                    start_new_session=True)
        with open(self.path("qemu.pid"), "w") as f:
            f.write("%d\n" % proc.pid)
        self.log("power on: qemu pid %d, boot %s" % (proc.pid, boot))
        self.hook("power-on", boot)

    def power_off(self):
        pid = self.qemu_pid()
        if pid:
            os.kill(pid, signal.SIGTERM)
            deadline = time.monotonic() + 0.6
            while self.qemu_pid() and time.monotonic() < deadline:
                time.sleep(0.02)
            if self.qemu_pid():
                os.kill(pid, signal.SIGKILL)
                while self.qemu_pid() and time.monotonic() < deadline + 0.3:
                    time.sleep(0.02)
            self.log("power off: killed qemu pid %d" % pid)
        try:
            os.remove(self.path("qemu.pid"))
        except FileNotFoundError:
            pass
        self.hook("power-off", self.boot_device())

    def reset(self):
        # A reset starts QEMU afresh so that a boot device set since the last power on takes
        # effect (QEMU's bootindex is fixed at start).
        if not self.qemu_pid():
            self.log("reset while off: nothing to do")
            return
        self.power_off()
        self.power_on()
        self.hook("reset", self.boot_device())

    def soft_off(self):
        # ACPI power button, over QMP; a guest without ACPI handling ignores it, as a real
        # machine's OS without acpid would.
        import socket
        try:
            s = socket.socket(socket.AF_UNIX)
            s.settimeout(0.5)
            s.connect(self.path("qmp.sock"))
            s.recv(4096)
            s.sendall(b'{"execute":"qmp_capabilities"}\n')
            s.recv(4096)
            s.sendall(b'{"execute":"system_powerdown"}\n')
            s.recv(4096)
            s.close()
            self.log("soft off: ACPI power button pressed")
        except OSError as e:
            self.log("soft off: QMP failed: %s" % e)

    def hook(self, event, boot):
        hook = self.path(os.path.join("hooks", event))
        if not os.access(hook, os.X_OK):
            return
        with open(self.path("chassis.log"), "ab") as out:
            rc = subprocess.call([hook, event, boot], cwd=self.dir, stdin=subprocess.DEVNULL,
                                 stdout=out, stderr=out, timeout=0.5)
        self.log("hook %s %s: exit %d" % (event, boot, rc))


def ipmi_sim_call(vm, args):
    """The ipmi_sim chassis_control protocol; returns the process exit code."""
    if args[0] == "get":
        for what in args[1:]:
            if what == "power":
                print("power:%d" % (1 if vm.qemu_pid() else 0))
            elif what == "boot":
                device = vm.boot_device()
                print("boot:%s" % ("default" if device == "disk" else device))
        return 0
    if args[0] == "set":
        pairs = list(zip(args[1::2], args[2::2]))
        for what, value in pairs:
            vm.log("ipmi: set %s %s" % (what, value))
            if what == "power":
                vm.power_on() if value == "1" else vm.power_off()
            elif what == "reset":
                vm.reset()
            elif what == "shutdown":
                vm.soft_off()
            elif what == "boot":
                vm.set_boot_device(value)
            else:
                vm.log("ipmi: unsupported %s" % what)
                return 1
        return 0
    return 1


def main(argv):
    if len(argv) < 3:
        print(__doc__, file=sys.stderr)
        return 2
    vm = Vm(argv[1])
    args = argv[2:]
    if args[0] in ("get", "set"):
        return ipmi_sim_call(vm, args)
    if args[0] == "on":
        if len(args) > 1:
            vm.set_boot_device(args[1])
        vm.power_on()
    elif args[0] == "off":
        vm.power_off()
    elif args[0] == "status":
        print("on" if vm.qemu_pid() else "off")
    elif args[0] == "command":
        print(" ".join(vm.qemu_command(args[1] if len(args) > 1 else vm.boot_device())))
    else:
        print("unknown command %s" % args[0], file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
