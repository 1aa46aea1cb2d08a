#!/bin/busybox sh
# /init of the lab's deploy ramdisk (lab.sh build-ramdisk). PID 1 stays this script; the agent
# runs chrooted into a root made of the host's /usr (9p, read-only, under a tmpfs overlay) and
# the agent's venv (9p, read-only, at the path it has on the host).
#   network: DHCP on the NIC named by BOOTIF= (iPXE's ${mac} or pxelinux's 01-xx-xx-..),
#            else on the first NIC with a carrier
#   agent:   the unmodified ironic-python-agent; it reads ipa-api-url= and the rest from
#            /proc/cmdline itself
#   BMC:     /dev/ipmi0 (ipmi_si on the VM's KCS interface), where the agent reads its BMC's
#            address; the address goes to the console too
# Lines on the console start with "ferrum-lab-ramdisk:" (the lab's selftest reads them).
/bin/busybox mkdir -p /proc /sys /dev /run /tmp /usr/bin /usr/sbin /sbin
/bin/busybox --install -s
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
exec </dev/console >/dev/console 2>&1

. /etc/ramdisk.env   # IPA_VENV=, KVER=
say() { echo "ferrum-lab-ramdisk: $*"; }
uptime_s() { cut -d' ' -f1 /proc/uptime; }
die() {
    say "FAILED: $*; a shell on the console, power off in 10 minutes"
    sleep 600
    echo o >/proc/sysrq-trigger
}
say "init at $(uptime_s) s, kernel $(uname -r)"

for m in $(cat /lib/modules/load-order); do
    [ "$m" = efivarfs.ko ] && [ ! -d /sys/firmware/efi ] && continue   # booted by BIOS
    insmod "/lib/modules/$m" || say "insmod $m failed"
done
# ipmi_si finds the VM's KCS interface in SMBIOS (type 38) and ACPI (IPI0001), where QEMU's
# isa-ipmi-kcs describes it, and ipmi_devintf makes it /dev/ipmi0 (the agent reads its BMC's
# address there), possibly just after insmod returns. A VM without one has neither.
ipmi=no
if [ -e /sys/firmware/dmi/entries/38-0 ] || [ -e /sys/bus/acpi/devices/IPI0001:00 ]; then
    for _ in $(seq 50); do
        [ -c /dev/ipmi0 ] && ipmi=/dev/ipmi0 && break
        sleep 0.1
    done
fi
say "modules loaded at $(uptime_s) s; IPMI device: $ipmi"

# The ACPI power button (IPMI `power soft`, QEMU's system_powerdown) powers the machine off,
# as a distribution's acpid or logind would.
for ev in /sys/class/input/event*; do
    if grep -q "Power Button" "$ev/device/name" 2>/dev/null; then
        (head -c 1 "/dev/input/${ev##*/}" >/dev/null && echo "power button: powering off" \
            && sync && poweroff -f) &
    fi
done
bootif=""
for word in $(cat /proc/cmdline); do
    case "$word" in
        BOOTIF=*) bootif="${word#BOOTIF=}" ;;
    esac
done
# pxelinux passes 01-52-54-00-..; iPXE's ${mac} is 52:54:00:..
bootif="$(echo "${bootif#01-}" | tr 'A-F-' 'a-f:')"

iface=""
for _ in $(seq 50); do
    for dev in /sys/class/net/*; do
        name="${dev##*/}"
        [ "$name" = lo ] && continue
        if [ -n "$bootif" ]; then
            [ "$(cat "$dev/address")" = "$bootif" ] && iface="$name"
        elif [ -z "$iface" ]; then
            iface="$name"
        fi
    done
    [ -n "$iface" ] && break
    sleep 0.1
done
[ -n "$iface" ] || die "no network interface ${bootif:+with MAC $bootif}"
ip link set lo up
ip link set "$iface" up
say "DHCP on $iface (${bootif:-no BOOTIF}) at $(uptime_s) s"
udhcpc -i "$iface" -s /etc/udhcpc.script -t 30 -T 1 -n -x "hostname:ferrum-lab-ramdisk" \
    || die "no DHCP lease on $iface"

# The new root: tmpfs, with /usr an overlay over the host's /usr.
mount -t tmpfs -o mode=755 root /root
mkdir -p /root/usr /root/.rw /host/usr
mount -t tmpfs -o mode=755 rw /root/.rw
mkdir -p /root/.rw/usr /root/.rw/work
ninep="trans=virtio,version=9p2000.L,ro,msize=262144,cache=loose"
mount -t 9p -o "$ninep" usr /host/usr || die "cannot mount the 9p share 'usr' (QEMU -virtfs)"
mount -t overlay -o lowerdir=/host/usr,upperdir=/root/.rw/usr,workdir=/root/.rw/work \
    usr /root/usr || die "cannot mount the overlay on /usr"
for d in bin sbin lib lib64; do ln -s "usr/$d" "/root/$d"; done
mkdir -p /root/proc /root/sys /root/dev /root/run /root/tmp /root/var/log /root/var/lib \
    /root/var/tmp /root/root /root/etc "/root$IPA_VENV"
chmod 1777 /root/tmp /root/var/tmp
cp -a /etc/. /root/etc/
# Container runners on the host's /usr would make the agent load its container hardware
# manager: a ramdisk has none. Removed in the overlay only (a whiteout), never on the host.
for runner in docker podman; do
    rm -f "/root/usr/bin/$runner" "/root/usr/sbin/$runner" "/root/usr/local/bin/$runner" \
        "/root/usr/local/sbin/$runner"
done
mount -t 9p -o "$ninep" ipa "/root$IPA_VENV" || die "cannot mount the 9p share 'ipa' (the venv)"
# ipmitool's IANA registry, short (build.sh says why), where it looks first: in the agent's HOME.
mkdir -p /root/root/.local/usr/share/misc
mv /root/etc/enterprise-numbers.txt /root/root/.local/usr/share/misc/
mount -t proc proc /root/proc
mount -t sysfs sysfs /root/sys
mount -t devtmpfs devtmpfs /root/dev
mkdir -p /root/dev/pts /root/dev/shm
mount -t devpts devpts /root/dev/pts
mount -t tmpfs -o mode=1777 shm /root/dev/shm
mount -t tmpfs -o mode=755 run /root/run
[ -d /sys/firmware/efi/efivars ] && mount -t efivarfs efivarfs /root/sys/firmware/efi/efivars
say "root ready at $(uptime_s) s; starting ironic-python-agent"
# The BMC's address as the agent reads it (`ipmitool lan print 1` on /dev/ipmi0, the host's
# ipmitool in the agent's root), for the console: in the background, the agent need not wait.
if [ "$ipmi" != no ]; then
    (
        out="$(HOME=/root chroot /root /usr/bin/ipmitool lan print 1 2>&1)"
        addr="$(echo "$out" | sed -n 's/^IP Address  *: *//p')"
        say "bmc address ${addr:-unknown: $(echo "$out" | tail -n 1)} at $(uptime_s) s"
    ) &
fi

# Like a ramdisk's service manager: the agent is started again if it ever exits.
while true; do
    chroot /root /usr/bin/env -i HOME=/root LANG=C.UTF-8 \
        PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
        "$IPA_VENV/bin/ironic-python-agent"
    say "ironic-python-agent exited ($?); starting it again in 5 s"
    sleep 5
done
