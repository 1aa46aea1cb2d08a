#!/bin/busybox sh
# /init of the lab's instance image (lab.sh build-image): says it booted, and the host name
# the config drive gives it (a device or partition labelled config-2, ISO 9660, holding
# openstack/latest/meta_data.json), on the console; then idles, as an instance would.
/bin/busybox mkdir -p /proc /sys /dev /usr/bin /usr/sbin /sbin
/bin/busybox --install -s
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
exec </dev/console >/dev/console 2>&1
for m in $(cat /lib/modules/load-order); do insmod "/lib/modules/$m" 2>/dev/null; done
# The ACPI power button (IPMI `power soft`, QEMU's system_powerdown) powers the machine off,
# as a distribution's acpid or logind would.
for ev in /sys/class/input/event*; do
    if grep -q "Power Button" "$ev/device/name" 2>/dev/null; then
        (head -c 1 "/dev/input/${ev##*/}" >/dev/null && echo "power button: powering off" \
            && sync && poweroff -f) &
    fi
done
echo "FERRUM-LAB-INSTANCE-BOOTED"
hostname=""
for _ in $(seq 50); do
    dev="$(findfs LABEL=config-2 2>/dev/null)" || dev=""
    if [ -n "$dev" ] && mount -t iso9660 -o ro "$dev" /mnt 2>/dev/null; then
        hostname="$(sed -n 's/.*"hostname": *"\([^"]*\)".*/\1/p' \
            /mnt/openstack/latest/meta_data.json 2>/dev/null)"
        echo "FERRUM-LAB-INSTANCE-CONFIG-DRIVE=$dev"
        umount /mnt
        break
    fi
    sleep 0.1
done
if [ -n "$hostname" ]; then
    hostname "$hostname"
    echo "FERRUM-LAB-INSTANCE-HOSTNAME=$hostname"
else
    echo "FERRUM-LAB-INSTANCE-HOSTNAME= (no config drive labelled config-2 with a hostname)"
fi
# A line every few seconds, so that a console attached later sees the machine is up.
while true; do sleep 5; echo "FERRUM-LAB-INSTANCE-ALIVE ${hostname:-}"; done
