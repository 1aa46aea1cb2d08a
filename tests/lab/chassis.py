#!/usr/bin/env python3
"""The chassis of one lab VM: ipmi_sim's `chassis_control` program, which owns the VM's QEMU.

ipmi_sim (OpenIPMI 2.0.33) runs `chassis.py VMDIR get power`, `chassis.py VMDIR set power 1`,
`... set power 0`, `... set reset 1`, `... set shutdown 1` (IPMI soft off), `... get boot`,
`... set boot pxe|default|cdrom|bios|none`, and reads `power:N` / `boot:NAME` lines back. It must
answer within about a second (else ipmitool retransmits and the command runs twice), so QEMU is
started in the background, in a session of its own, and never waited for.

The files are those of tests/peers/ipmi-bmc.sh's chassis (ipmi_bmc_chassis.sh), so that a test
reads either BMC the same way; here the power state is QEMU's, not a file's:
  VMDIR/vm.env        KEY=VALUE lines: how to start this VM's QEMU (lab.sh writes it)
  VMDIR/state/boot    the boot device, as ipmi_sim names it (pxe, default [the disk], cdrom,
                      bios, none); pxe puts the NIC first in the firmware's boot order, any
                      other the disk
  VMDIR/state/cdrom   the ISO in the VM's virtual CD (`lab.sh media`), if any
  VMDIR/state/power   1 or 0: written on each change and on each read, from whether QEMU lives
  VMDIR/state/log     a line per request and per action
  VMDIR/qemu.pid      the running QEMU's PID
  VMDIR/hooks/<event> optional executables, started in the background (never waited for) after
                      power-on, power-off and reset, with the boot device as their argument;
                      their output goes to VMDIR/hooks.log

ipmi_sim also runs `chassis.py VMDIR lan get ip_addr ...` (its lan_config_program, for LAN
channel 1) and reads `ip_addr:198.51.100.21`-style lines back: the BMC's address, MAC and
netmask from vm.env, which ipmi_sim itself does not know. `lan set` is refused (the lab's
addresses are fixed).

Also run by hand or by lab.sh: `chassis.py VMDIR on [BOOT-DEVICE]|off|status|command`
(`command` prints the QEMU command line, for debugging), and
`chassis.py VMDIR on-kernel KERNEL INITRD CMDLINE`: QEMU boots that kernel directly (-kernel),
a quick check of a ramdisk without DHCP or iPXE; the BMC then reads and powers it off as usual.
"""
import os
import signal
import socket
import subprocess
import sys
import time

# The boot devices ipmi_sim passes (ipmitool's "disk" arrives as "default").
BOOT_DEVICES = ("pxe", "default", "cdrom", "bios", "none")


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
        with open(self.path("state/log"), "a") as f:
            f.write("%s %s\n" % (time.strftime("%Y-%m-%dT%H:%M:%S"), message))

    # ---- boot device and power files -------------------------------------------------------

    def boot_device(self):
        try:
            with open(self.path("state/boot")) as f:
                device = f.read().strip()
        except FileNotFoundError:
            return "default"
        return device if device in BOOT_DEVICES else "default"

    def set_boot_device(self, device):
        if device not in BOOT_DEVICES:
            raise ValueError("unknown boot device %r" % device)
        self.write_state("boot", device)

    def write_state(self, name, value):
        tmp = self.path("state/%s.tmp" % name)
        with open(tmp, "w") as f:
            f.write("%s\n" % value)
        os.replace(tmp, self.path("state/" + name))

    def powered(self):
        on = self.qemu_pid() is not None
        self.write_state("power", 1 if on else 0)
        return on

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
            # The serial port: a TCP server on the namespace's loopback (uart.py connects
            # there, the wire to ipmi_sim's SOL) that also logs everything the VM prints to
            # serial.log.
            "-chardev", "socket,id=serial0,host=127.0.0.1,port=%s,server=on,wait=off,"
            "logfile=%s,logappend=on" % (e["SERIAL_PORT"], e["SERIAL_LOG"]),
            "-serial", "chardev:serial0",
            "-drive", "if=none,id=disk0,format=qcow2,file=%s" % e["DISK"],
            "-device", "virtio-blk-pci,drive=disk0,bootindex=%d" % disk_index,
            "-netdev", "tap,id=net0,ifname=%s,script=no,downscript=no" % e["TAP"],
            "-device", "virtio-net-pci,netdev=net0,mac=%s,bootindex=%d" % (e["MAC"], net_index),
        ]
        # The BMC as the VM sees it: a KCS system interface whose other end is ipmi_sim (`serial
        # kcs ... codec VM` in its config; it listens, QEMU connects, and reconnects if
        # ipmi_sim restarts). QEMU also describes it in SMBIOS (type 38) and ACPI, where the
        # guest's ipmi_si finds it. Power stays with this chassis: ipmi_sim uses the VM
        # codec's power commands only when it has no chassis_control program.
        # The virtual CD (`lab.sh media`): first in the boot order when the boot device is
        # cdrom, else last.
        try:
            with open(self.path("state/cdrom")) as f:
                iso = f.read().strip()
        except FileNotFoundError:
            iso = ""
        if iso:
            cmd += [
                "-drive", "if=none,id=cd0,media=cdrom,readonly=on,format=raw,file=%s" % iso,
                "-device", "ide-cd,drive=cd0,bus=ide.0,bootindex=%d"
                % (0 if boot == "cdrom" else 3),
            ]
        if e.get("BMC_KCS_PORT"):
            cmd += [
                "-chardev", "socket,id=ipmi0,host=127.0.0.1,port=%s,reconnect=2"
                % e["BMC_KCS_PORT"],
                "-device", "ipmi-bmc-extern,id=bmc0,chardev=ipmi0",
                "-device", "isa-ipmi-kcs,bmc=bmc0",
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

    def power_on(self, direct=()):
        """DIRECT: (kernel, initrd, kernel command line) to boot those instead of the
        firmware's boot order (QEMU -kernel; for quick checks, not over IPMI)."""
        if self.qemu_pid():
            return
        boot = self.boot_device()
        cmd = self.qemu_command(boot)
        if direct:
            cmd += ["-kernel", direct[0], "-initrd", direct[1], "-append", direct[2]]
            boot = "kernel %s" % direct[0]
        # QEMU must run in the lab's namespace, where its tap is (ipmi_sim runs there; a
        # person running this by hand may not): outside, it would make a tap on the host.
        netns = "/run/netns/" + self.env["NETNS"]
        if os.stat("/proc/self/ns/net").st_ino != os.stat(netns).st_ino:
            cmd = ["ip", "netns", "exec", self.env["NETNS"]] + cmd
        with open(self.path("qemu.log"), "ab") as out:
            proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL,
                                    stdout=out, stderr=out, cwd=self.dir,
                                    start_new_session=True)
        with open(self.path("qemu.pid"), "w") as f:
            f.write("%d\n" % proc.pid)
        self.write_state("power", 1)
        self.log("power on: qemu pid %d, boot %s" % (proc.pid, boot))

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
        self.write_state("power", 0)

    def reset(self):
        # A reset starts QEMU afresh so that a boot device set since the last power on takes
        # effect (QEMU's bootindex is fixed at start).
        if not self.qemu_pid():
            self.log("reset while off: nothing to do")
            return False
        self.power_off()
        self.power_on()
        return True

    def soft_off(self):
        # ACPI power button, over QMP; a guest without ACPI handling ignores it, as a real
        # machine's OS without acpid would.
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

    def hook(self, event):
        hook = self.path(os.path.join("hooks", event))
        if not os.access(hook, os.X_OK):
            return
        with open(self.path("hooks.log"), "ab") as out:
            subprocess.Popen([hook, self.boot_device()], cwd=self.dir,
                             stdin=subprocess.DEVNULL, stdout=out, stderr=out,
                             start_new_session=True)
        self.log("hook %s started" % event)


def ipmi_sim_call(vm, args):
    """The ipmi_sim chassis_control protocol; returns the process exit code."""
    vm.log("request: %s" % " ".join(args))
    if args[0] == "get":
        for what in args[1:]:
            if what == "power":
                print("power:%d" % (1 if vm.powered() else 0))
            elif what == "boot":
                print("boot:%s" % vm.boot_device())
            else:
                print("%s:0" % what)
        return 0
    if args[0] == "set":
        for what, value in zip(args[1::2], args[2::2]):
            if what == "power" and value == "1":
                vm.power_on()
                vm.hook("power-on")
            elif what == "power" and value == "0":
                vm.power_off()
                vm.hook("power-off")
            elif what == "reset" and value == "1":
                if vm.reset():
                    vm.hook("reset")
            elif what == "shutdown" and value == "1":
                vm.soft_off()
            elif what == "boot":
                vm.set_boot_device(value)
            else:
                vm.log("unsupported: set %s %s" % (what, value))
                return 1
        return 0
    return 1


def lan_config(vm, args):
    """ipmi_sim's lan_config_program protocol (see OpenIPMI's ipmi_sim_lancontrol): `get PARM...`
    prints PARM:VALUE lines; `set`/`check` are refused, with the reason on stdout."""
    e = vm.env
    values = {
        "ip_addr": e.get("BMC_ADDRESS", "0.0.0.0"),
        "ip_addr_src": "static",
        "mac_addr": e.get("BMC_MAC", "00:00:00:00:00:00"),
        "subnet_mask": "255.255.255.0",
        "default_gw_ip_addr": "0.0.0.0",
        "default_gw_mac_addr": "00:00:00:00:00:00",
        "backup_gw_ip_addr": "0.0.0.0",
        "backup_gw_mac_addr": "00:00:00:00:00:00",
    }
    if args[:1] == ["get"]:
        for name in args[1:]:
            if name not in values:
                print("Invalid parameter: %s" % name)
                return 1
            print("%s:%s" % (name, values[name]))
        return 0
    vm.log("lan: refused: %s" % " ".join(args))
    print("the lab's BMC addresses are fixed (vm.env)")
    return 1


def main(argv):
    if len(argv) < 3:
        print(__doc__, file=sys.stderr)
        return 2
    vm = Vm(argv[1])
    args = argv[2:]
    if args[0] in ("get", "set"):
        return ipmi_sim_call(vm, args)
    if args[0] == "lan":
        return lan_config(vm, args[1:])
    if args[0] == "on":
        if len(args) > 1:
            vm.set_boot_device("default" if args[1] == "disk" else args[1])
        vm.power_on()
    elif args[0] == "on-kernel" and len(args) == 4:
        vm.power_on(direct=(os.path.abspath(args[1]), os.path.abspath(args[2]), args[3]))
    elif args[0] == "off":
        vm.power_off()
    elif args[0] == "status":
        print("on" if vm.powered() else "off")
    elif args[0] == "command":
        print(" ".join(vm.qemu_command(args[1] if len(args) > 1 else vm.boot_device())))
    else:
        print("unknown command %s" % args[0], file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
