#!/usr/bin/env bash
# A virtual bare-metal lab: VMs that boot over the network, behind IPMI BMCs, in a network
# namespace of their own. See tests/lab/README.md (the contract a conductor relies on).
#
#   lab.sh up [--name NAME] [--vms N] [--firmware uefi|bios] [--dir DIR] [--memory MiB]
#             [--disk-size 10G]
#       namespace NAME (loopback up, bridge br0 198.51.100.1/24, one tap per VM), dnsmasq
#       (DHCP + TFTP, Ironic's hostsdir/optsdir model), and per VM a qcow2 disk, firmware
#       and an ipmi_sim BMC on 198.51.100.(20+N):623N (and 127.0.0.1:623N) inside the
#       namespace, which the VM sees as its IPMI KCS interface. VMs start powered off.
#   lab.sh down [--name NAME] [--dir DIR] [--rm]
#       stop every process the lab started, by PID; delete the namespace; --rm: and DIR
#   lab.sh status [--name NAME] [--dir DIR]      one line per VM, KEY=VALUE words
#   lab.sh exec [--name NAME] -- COMMAND...      run COMMAND inside the lab's namespace
#   lab.sh forward [--name NAME] [--to-host PORT]... [--from-host HOSTPORT:PORT]...
#       --to-host: the namespace's 127.0.0.1:PORT reaches the host's 127.0.0.1:PORT (MariaDB,
#       RabbitMQ); --from-host: the host's 127.0.0.1:HOSTPORT reaches 198.51.100.1:PORT in the
#       namespace (Ferrum's API). socat pairs joined by a Unix socket in DIR; down stops them.
#   lab.sh bmc [--name NAME] VM-NUMBER stop|start   a BMC stops answering / comes back
#   lab.sh setup                                 apt-get install what is missing
#   lab.sh build-ramdisk OUTDIR                  vmlinuz + initramfs that run the agent
#   lab.sh build-image OUTFILE                   a bootable whole-disk instance image (qcow2)
#   lab.sh build-esp OUTFILE                     an EFI system partition image whose GRUB boots
#                                                a CD's EFI/BOOT/grub.cfg (a boot ISO's bootloader)
#   lab.sh media [--name NAME] VM-NUMBER insert ISO|eject   the VM's virtual CD (next power on)
#   lab.sh selftest [--firmware uefi|bios] [--keep]
#       up 1 VM; IPMI -> DHCP -> iPXE -> the ramdisk -> the agent, which writes the instance
#       image and a config drive to the VM's disk; IPMI bootdev disk -> the image; down
#
# NAME defaults to ferrum-lab, DIR to /tmp/NAME. Run as root (namespaces, taps). Messages go
# to stderr; status and selftest print to stdout.
set -euo pipefail
umask 022

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(cd "$HERE/../.." && pwd)"
PYTHON=/usr/bin/python3
SUBNET_PREFIX=198.51.100
HOST_IP=$SUBNET_PREFIX.1
# IPv6 only so that iPXE gets a router advertisement: without one it waits ~13 s for it at
# every network boot. 2001:db8::/32 is IPv6's documentation range.
HOST_IP6=2001:db8:100::1
BRIDGE=br0
BMC_USER=admin
BMC_PASSWORD=ferrum-lab
OVMF_CODE=/usr/share/OVMF/OVMF_CODE_4M.fd
OVMF_VARS=/usr/share/OVMF/OVMF_VARS_4M.fd
# The agent's venv, as tests/peers/ipa-sandbox.sh makes it (same variables, same path).
PEERS_CACHE="${FERRUM_PEERS_CACHE:-/tmp/ferrum-peers-cache}"
IPA_SPEC="${FERRUM_IPA_SPEC:-ironic-python-agent==13.0.0}"
IPA_VENV="$PEERS_CACHE/ipa-$(printf '%s' "$IPA_SPEC" | tr -c 'A-Za-z0-9.-' '_')"

say() { echo "lab: $*" >&2; }
fail() { say "error: $*"; exit 1; }
clock() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(clock)" 'BEGIN { printf "%.1f", b - a }'; }

require_root() {
    [ "$(id -u)" = 0 ] || fail "run me as root: I create a network namespace and tap devices"
}

# What the lab needs, as COMMAND-or-FILE:debian-package. lshw is for the agent inside the VMs
# (they run the host's /usr).
NEEDS="ip:iproute2 qemu-system-x86_64:qemu-system-x86 qemu-img:qemu-utils
    $OVMF_CODE:ovmf /usr/lib/ipxe/qemu/efi-virtio.rom:ipxe-qemu /usr/lib/ipxe/snponly.efi:ipxe
    dnsmasq:dnsmasq-base ipmi_sim:openipmi ipmitool:ipmitool socat:socat
    /usr/lib/modules/*/kernel/fs/9p/9p.ko:linux-image-amd64 busybox:busybox-static cpio:cpio
    syslinux:syslinux /usr/lib/syslinux/mbr/mbr.bin:syslinux-common
    /usr/lib/PXELINUX/pxelinux.0:pxelinux
    /usr/lib/SYSLINUX.EFI/efi64/syslinux.efi:syslinux-efi mcopy:mtools mkfs.fat:dosfstools
    /usr/lib/ISOLINUX/isolinux.bin:isolinux grub-mkstandalone:grub-common
    /usr/lib/grub/x86_64-efi/linux.mod:grub-efi-amd64-bin
    sfdisk:fdisk lshw:lshw"

missing_packages() {
    local pair what missing=""
    for pair in $NEEDS; do
        what="${pair%%:*}"
        case "$what" in
            /*) compgen -G "$what" >/dev/null || missing="$missing ${pair#*:}" ;;
            *) PATH="$PATH:/usr/sbin:/sbin" command -v "$what" >/dev/null 2>&1 \
                   || missing="$missing ${pair#*:}" ;;
        esac
    done
    # busybox must be the static one: the ramdisk has no libc of its own.
    if command -v busybox >/dev/null && ldd "$(command -v busybox)" >/dev/null 2>&1; then
        missing="$missing busybox-static"
    fi
    echo "$missing"
}

require_tools() {
    local missing
    missing="$(missing_packages)"
    [ -z "$missing" ] || fail "missing Debian packages:$missing ('lab.sh setup' installs them)"
    [ -c /dev/net/tun ] || fail "/dev/net/tun is missing: the lab's VMs need tap devices"
}

# Installs the missing packages (as tests/peers/ipa-sandbox.sh does; FERRUM_PEERS_NO_APT=1:
# fail instead).
cmd_setup() {
    require_root
    local missing
    missing="$(missing_packages)"
    if [ -n "$missing" ]; then
        [ "${FERRUM_PEERS_NO_APT:-0}" != 1 ] || fail "missing Debian packages:$missing"
        say "installing$missing"
        export DEBIAN_FRONTEND=noninteractive
        apt-get install -y -qq $missing >&2 \
            || { apt-get update -qq >&2 && apt-get install -y -qq $missing >&2; } \
            || fail "apt-get install$missing failed"
        # A newer qemu-utils (a backport) gives way to qemu-system-x86's own release in the
        # same install, leaving none: a second pass installs the matching one.
        missing="$(missing_packages)"
        if [ -n "$missing" ]; then
            say "installing$missing (second pass)"
            apt-get install -y -qq $missing >&2 || fail "apt-get install$missing failed"
        fi
    fi
    require_tools
}

# Options shared by up/down/status/exec: --name, --dir. Sets NAME, DIR, REST (the others).
parse_common() {
    NAME=ferrum-lab
    DIR=""
    REST=()
    while [ $# -gt 0 ]; do
        case "$1" in
            --name) NAME="${2:-}"; shift 2 ;;
            --dir) DIR="${2:-}"; shift 2 ;;
            --) REST+=("$@"); break ;;
            *) REST+=("$1"); shift ;;
        esac
    done
    [[ "$NAME" =~ ^[a-z][a-z0-9-]{0,30}$ ]] \
        || fail "--name must be lower-case letters, digits and '-' (up to 31), not '$NAME'"
    DIR="$(realpath -m "${DIR:-/tmp/$NAME}")"
}

ns_exists() { ip netns list | awk '{print $1}' | grep -qx "$1"; }

# True if PID lives and its command line contains WORD (so a reused PID is never killed).
pid_is() { # PID WORD
    local pid="$1"
    [[ "$pid" =~ ^[0-9]+$ ]] && [ -r "/proc/$pid/cmdline" ] || return 1
    tr '\0' ' ' <"/proc/$pid/cmdline" | grep -qF -- "$2"
}

# Stops the process whose PID is in FILE, if it still is the one (WORD in its command line).
stop_pidfile() { # FILE WORD WHAT
    local pid _
    pid="$(cat "$1" 2>/dev/null || true)"
    if pid_is "$pid" "$2"; then
        kill -TERM "$pid" 2>/dev/null || true
        for _ in $(seq 30); do pid_is "$pid" "$2" || break; sleep 0.1; done
        pid_is "$pid" "$2" && kill -KILL "$pid" 2>/dev/null || true
        say "stopped $3 (pid $pid)"
    fi
    rm -f "$1"
}

vm_mac() { printf '52:54:00:%02x:%02x:%02x' "$LAB_ID" 0 "$1"; }
vm_dir() { echo "$DIR/vms/vm$1"; }
bmc_port() { echo $((6230 + $1)); }
# VM I's BMC has an address of its own on the bridge (what `ipmitool lan print` in the VM
# reports, and what a conductor's lookup by BMC address matches): .21-.99, below the DHCP
# range (.100-.199), hence at most 79 VMs.
bmc_ip() { echo "$SUBNET_PREFIX.$((20 + $1))"; }
# The BMC's MAC as `lan print` reports it (no NIC has it: ipmi_sim's LAN is a UDP socket); the
# VMs' NICs have 52:54:00:<lab>:00:<i>.
bmc_mac() { printf '52:54:00:%02x:01:%02x' "$LAB_ID" "$1"; }
# VM I's serial port: ipmi_sim's SOL connects to uart.py on serial_port, uart.py to QEMU's
# serial server on vm_serial_port (see uart.py: the wire outlives the VM's power cycles).
serial_port() { echo $((5000 + $1)); }
vm_serial_port() { echo $((5100 + $1)); }
# ipmi_sim's end of the VM's IPMI system interface (QEMU's ipmi-bmc-extern connects there).
kcs_port() { echo $((9000 + $1)); }

# ---- up ------------------------------------------------------------------------------------

cmd_up() {
    require_root
    parse_common "$@"
    set -- "${REST[@]+"${REST[@]}"}"
    local vms=1 firmware=uefi memory=1024 disk_size=10G
    while [ $# -gt 0 ]; do
        case "$1" in
            --vms) vms="${2:-}"; shift 2 ;;
            --firmware) firmware="${2:-}"; shift 2 ;;
            --memory) memory="${2:-}"; shift 2 ;;
            --disk-size) disk_size="${2:-}"; shift 2 ;;
            *) fail "up: unknown argument $1" ;;
        esac
    done
    [[ "$vms" =~ ^[1-9][0-9]?$ ]] && [ "$vms" -le 79 ] \
        || fail "--vms takes 1 to 79 (the BMCs' addresses .21-.99 stay below the DHCP range)"
    [ "$firmware" = uefi ] || [ "$firmware" = bios ] || fail "--firmware is uefi or bios"
    [[ "$memory" =~ ^[0-9]+$ ]] || fail "--memory takes MiB"
    require_tools
    [ "$firmware" = bios ] || [ -r "$OVMF_CODE" ] || fail "$OVMF_CODE missing (apt-get install ovmf)"
    if ns_exists "$NAME"; then
        fail "lab $NAME is already up (namespace $NAME exists): 'lab.sh down --name $NAME' first"
    fi
    if [ -f "$DIR/lab.env" ]; then
        local other
        other="$(sed -n 's/^NAME=//p' "$DIR/lab.env")"
        fail "$DIR holds lab $other already: 'lab.sh down --name $other --dir $DIR --rm'," \
            "or another --dir"
    fi
    local t0
    t0="$(clock)"
    mkdir -p "$DIR"/{dhcp-hosts,dhcp-opts,tftp,vms}
    chmod 755 "$DIR"
    # A byte of the VMs' MACs that differs between labs (two labs can run at once; their
    # VMs should not share MACs, in case a test compares them across labs).
    LAB_ID=$(( $(printf '%s' "$NAME" | cksum | cut -d' ' -f1) % 256 ))
    {
        echo "NAME=$NAME"
        echo "DIR=$DIR"
        echo "VMS=$vms"
        echo "FIRMWARE=$firmware"
        echo "LAB_ID=$LAB_ID"
        echo "HOST_IP=$HOST_IP"
    } >"$DIR/lab.env"
    # From here on a failure (an error or a `fail`) takes down what was made; the logs stay.
    trap 'say "up failed: taking down what was made"; cmd_down --name "$NAME" --dir "$DIR" || true' EXIT

    ip netns add "$NAME"
    ip -n "$NAME" link set lo up
    ip -n "$NAME" link add "$BRIDGE" type bridge forward_delay 0 stp_state 0
    ip -n "$NAME" addr add "$HOST_IP/24" dev "$BRIDGE"
    ip -n "$NAME" addr add "$HOST_IP6/64" dev "$BRIDGE" nodad
    ip -n "$NAME" link set "$BRIDGE" up
    say "namespace $NAME: lo, $BRIDGE $HOST_IP/24"

    start_dnsmasq

    local i
    for i in $(seq "$vms"); do
        make_vm "$i" "$firmware" "$memory" "$disk_size"
    done
    trap - EXIT
    say "lab $NAME up in $(since "$t0") s: $vms VM(s), $firmware, state in $DIR"
}

start_dnsmasq() {
    # Unknown MACs: ignored, as Ironic's PXE filter does it (a wildcard host entry with
    # ",ignore"; dnsmasq prefers an exact MAC's entry to a wildcard one). A conductor allows
    # unknown MACs by writing "*:*:*:*:*:*" into this file instead.
    echo '*:*:*:*:*:*,ignore' >"$DIR/dhcp-hosts/unknown_hosts_filter"
    # Firmware without iPXE (none of QEMU's NIC ROMs: they are iPXE) would load these by TFTP.
    local f
    for f in /usr/lib/ipxe/snponly.efi /usr/lib/ipxe/ipxe.efi /usr/lib/ipxe/undionly.kpxe; do
        [ -r "$f" ] && cp "$f" "$DIR/tftp/"
    done
    # The `pxe` boot interface's BIOS loader, as an operator installs it in the TFTP root
    # (Ironic's pxe_bootfile_name): PXELINUX and the module it loads first.
    for f in /usr/lib/PXELINUX/pxelinux.0 /usr/lib/syslinux/modules/bios/ldlinux.c32; do
        [ -r "$f" ] && cp "$f" "$DIR/tftp/"
    done
    : >"$DIR/dnsmasq.log"
    # dnsmasq runs as root here (--user=root): a lab's directories may be mktemp's (0700).
    ip netns exec "$NAME" dnsmasq --keep-in-foreground --conf-file=/dev/null --user=root --group=root \
        --port=0 --interface="$BRIDGE" --bind-interfaces --except-interface=lo \
        --dhcp-range="$SUBNET_PREFIX.100,$SUBNET_PREFIX.199,255.255.255.0,10m" \
        --dhcp-leasefile="$DIR/dnsmasq.leases" \
        --dhcp-hostsdir="$DIR/dhcp-hosts" --dhcp-optsdir="$DIR/dhcp-opts" \
        --dhcp-match=set:ipxe,175 \
        --enable-ra --dhcp-range="::,constructor:$BRIDGE,ra-stateless,64,10m" \
        --enable-tftp --tftp-root="$DIR/tftp" \
        --log-dhcp --log-facility="$DIR/dnsmasq.log" \
        </dev/null >>"$DIR/dnsmasq.log" 2>&1 &
    echo $! >"$DIR/dnsmasq.pid"
    local _
    # Up to 30 s: on a loaded machine (builds on both cores) dnsmasq has taken more than 5.
    for _ in $(seq 300); do
        grep -q "DHCP, IP range" "$DIR/dnsmasq.log" && break
        # Alive, not "is dnsmasq": just after `&` the child may not have exec'd it yet.
        kill -0 "$(cat "$DIR/dnsmasq.pid")" 2>/dev/null || break
        sleep 0.1
    done
    grep -q "DHCP, IP range" "$DIR/dnsmasq.log" \
        || { tail -n 5 "$DIR/dnsmasq.log" >&2; fail "dnsmasq did not start"; }
    say "dnsmasq pid $(cat "$DIR/dnsmasq.pid") on $BRIDGE"
}

make_vm() { # I FIRMWARE MEMORY DISK-SIZE
    local i="$1" firmware="$2" memory="$3" disk_size="$4"
    local vmdir mac shares=""
    vmdir="$(vm_dir "$i")"
    mac="$(vm_mac "$i")"
    mkdir -p "$vmdir/hooks" "$vmdir/state" "$vmdir/bmc-state"
    ip -n "$NAME" tuntap add dev "tap$i" mode tap
    ip -n "$NAME" link set "tap$i" master "$BRIDGE" up
    qemu-img create -q -f qcow2 "$vmdir/disk.qcow2" "$disk_size"
    [ "$firmware" = bios ] || cp "$OVMF_VARS" "$vmdir/OVMF_VARS.fd"
    # The deploy ramdisk (build-ramdisk) mounts these read-only by tag: the host's /usr (its
    # Python and tools) and the agent's venv.
    shares="usr=/usr"
    if [ -d "$IPA_VENV" ]; then
        shares="$shares ipa=$IPA_VENV"
    else
        say "note: no agent venv at $IPA_VENV (tests/peers/ipa-sandbox.sh setup makes it):" \
            "the deploy ramdisk cannot run the agent in these VMs"
    fi
    cat >"$vmdir/vm.env" <<EOF
NAME=$NAME-vm$i
NETNS=$NAME
MAC=$mac
FIRMWARE=$firmware
MEMORY=$memory
CPUS=1
ACCEL=tcg
TAP=tap$i
DISK=$vmdir/disk.qcow2
OVMF_CODE=$OVMF_CODE
OVMF_VARS=$vmdir/OVMF_VARS.fd
SERIAL_LOG=$vmdir/serial.log
SERIAL_PORT=$(vm_serial_port "$i")
SHARES=$shares
BMC_ADDRESS=$(bmc_ip "$i")
BMC_PORT=$(bmc_port "$i")
BMC_USER=$BMC_USER
BMC_PASSWORD=$BMC_PASSWORD
BMC_MAC=$(bmc_mac "$i")
BMC_KCS_PORT=$(kcs_port "$i")
EOF
    echo default >"$vmdir/state/boot"
    echo 0 >"$vmdir/state/power"
    : >"$vmdir/state/log"
    : >"$vmdir/serial.log"
    # The BMC's own address, on the bridge (ipmi_sim binds it, so it must exist first).
    ip -n "$NAME" addr add "$(bmc_ip "$i")/32" dev "$BRIDGE"
    # LAN channel 1 is the BMC's own address; ipmi_sim knows none of its LAN parameters (`lan
    # print` would say 0.0.0.0) unless lan_config_program gives them: chassis.py answers from
    # vm.env. Channel 2 is the address the lab had first, on the namespace's loopback.
    # `serial kcs ... codec VM` is ipmi_sim's end of the VM's KCS interface (QEMU's
    # ipmi-bmc-extern connects there): the agent's `ipmitool lan print 1` in the VM comes in
    # there. Power stays chassis_control's: ipmi_sim uses the VM codec's power commands only
    # when it has no chassis_control program.
    cat >"$vmdir/bmc.conf" <<EOF
name "$NAME-vm$i"
set_working_mc 0x20
  startlan 1
    addr $(bmc_ip "$i") $(bmc_port "$i")
$(lan_channel_settings "$i")
    lan_config_program "$PYTHON $HERE/chassis.py $vmdir lan"
  endlan
  startlan 2
    addr 127.0.0.1 $(bmc_port "$i")
$(lan_channel_settings "$i")
  endlan
  serial kcs 127.0.0.1 $(kcs_port "$i") codec VM
  chassis_control "$PYTHON $HERE/chassis.py $vmdir"
  sol "tcp:127.0.0.1:$(serial_port "$i")" 115200
  user 2 true "$BMC_USER" "$BMC_PASSWORD" admin 10 none md2 md5 straight
EOF
    cat >"$vmdir/bmc.emu" <<'EOF'
mc_setbmc 0x20
mc_add 0x20 0 no-device-sdrs 0x23 9 8 0x9f 0x1291 0xf02 persist_sdr
sel_enable 0x20 1000 0x0a
mc_enable 0x20
EOF
    ip netns exec "$NAME" "$PYTHON" "$HERE/uart.py" "$(serial_port "$i")" "$(vm_serial_port "$i")" \
        </dev/null >>"$vmdir/uart.log" 2>&1 &
    echo $! >"$vmdir/uart.pid"
    wait_listening "$(serial_port "$i")" "uart.py of vm$i"
    start_bmc "$i"
    [[ "$BMC_ANSWER" == "Chassis Power is off" ]] || fail "BMC of vm$i answers: $BMC_ANSWER"
    say "vm$i: mac $mac, BMC $(bmc_ip "$i"):$(bmc_port "$i") and 127.0.0.1:$(bmc_port "$i")" \
        "(ipmi_sim pid $(cat "$vmdir/bmc.pid"))"
}

# What both LAN channels of VM I's BMC share, for bmc.conf.
lan_channel_settings() { # I
    cat <<EOF
    priv_limit admin
    allowed_auths_callback none md2 md5 straight
    allowed_auths_user none md2 md5 straight
    allowed_auths_operator none md2 md5 straight
    allowed_auths_admin none md2 md5 straight
    guid $(printf '%s' "$NAME-vm$1" | md5sum | cut -c1-32)
EOF
}

# Waits until something listens on PORT of the namespace's loopback.
wait_listening() { # PORT WHAT
    local _
    for _ in $(seq 50); do
        ip netns exec "$NAME" bash -c "exec 3<>/dev/tcp/127.0.0.1/$1" 2>/dev/null && return 0
        sleep 0.1
    done
    fail "$2 does not listen on 127.0.0.1:$1"
}

# Starts VM I's ipmi_sim and waits until it answers; BMC_ANSWER is its power status line.
start_bmc() { # I
    local i="$1" vmdir _
    vmdir="$(vm_dir "$i")"
    ip netns exec "$NAME" ipmi_sim -n -c "$vmdir/bmc.conf" -f "$vmdir/bmc.emu" -s "$vmdir/bmc-state" \
        </dev/null >>"$vmdir/bmc.log" 2>&1 &
    echo $! >"$vmdir/bmc.pid"
    BMC_ANSWER=""
    for _ in $(seq 30); do
        BMC_ANSWER="$(ip netns exec "$NAME" ipmitool -I lanplus -C 3 -H "$(bmc_ip "$i")" \
            -p "$(bmc_port "$i")" -U "$BMC_USER" -P "$BMC_PASSWORD" -N 1 -R 1 \
            chassis power status 2>&1 || true)"
        [[ "$BMC_ANSWER" == "Chassis Power is"* ]] && return 0
        sleep 0.2
    done
    fail "BMC of vm$i does not answer: $BMC_ANSWER"
}

# A BMC that stops answering (for failure tests) and comes back; its VM runs on meanwhile.
cmd_bmc() {
    require_root
    parse_common "$@"
    set -- "${REST[@]+"${REST[@]}"}"
    [ $# = 2 ] && [[ "$1" =~ ^[1-9][0-9]?$ ]] || fail "bmc [--name NAME] VM-NUMBER stop|start"
    local vmdir
    vmdir="$(vm_dir "$1")"
    [ -f "$vmdir/vm.env" ] || fail "no vm$1 in $DIR"
    case "$2" in
        stop) stop_pidfile "$vmdir/bmc.pid" "$vmdir/bmc.conf" "ipmi_sim of vm$1" ;;
        start)
            if pid_is "$(cat "$vmdir/bmc.pid" 2>/dev/null)" "$vmdir/bmc.conf"; then
                say "the BMC of vm$1 runs already"
            else
                start_bmc "$1"
                say "BMC of vm$1 back (ipmi_sim pid $(cat "$vmdir/bmc.pid")): $BMC_ANSWER"
            fi
            ;;
        *) fail "bmc: stop or start, not $2" ;;
    esac
}

# A VM's virtual CD, as a BMC's virtual media holds one: an ISO file inserted (QEMU takes
# drives at start: from the VM's next power on; `chassis bootdev cdrom` boots it first) or
# ejected.
cmd_media() {
    parse_common "$@"
    set -- "${REST[@]+"${REST[@]}"}"
    [[ "${1:-}" =~ ^[1-9][0-9]?$ ]] || fail "media [--name NAME] VM-NUMBER insert ISO|eject"
    local vmdir
    vmdir="$(vm_dir "$1")"
    [ -f "$vmdir/vm.env" ] || fail "no vm$1 in $DIR"
    case "${2:-}" in
        insert)
            [ $# = 3 ] && [ -r "$3" ] || fail "media: no ISO file at ${3:-}"
            realpath "$3" >"$vmdir/state/cdrom"
            say "vm$1's CD holds $3"
            ;;
        eject) [ $# = 2 ] || fail "media VM-NUMBER eject"; rm -f "$vmdir/state/cdrom" ;;
        *) fail "media: insert ISO or eject, not ${2:-nothing}" ;;
    esac
}

# ---- down, status, exec --------------------------------------------------------------------

cmd_down() {
    require_root
    parse_common "$@"
    local remove=0 vmdir pids
    for a in "${REST[@]+"${REST[@]}"}"; do
        case "$a" in
            --rm) remove=1 ;;
            *) fail "down: unknown argument $a" ;;
        esac
    done
    if [ -d "$DIR/vms" ]; then
        for vmdir in "$DIR"/vms/vm*; do
            [ -f "$vmdir/vm.env" ] || continue
            # The BMC first, so that nothing powers the VM on again; then the VM.
            stop_pidfile "$vmdir/bmc.pid" "$vmdir/bmc.conf" "ipmi_sim of ${vmdir##*/}"
            "$PYTHON" "$HERE/chassis.py" "$vmdir" off
            stop_pidfile "$vmdir/uart.pid" "$HERE/uart.py" "uart.py of ${vmdir##*/}"
        done
    fi
    stop_pidfile "$DIR/dnsmasq.pid" "$DIR/dhcp-hosts" dnsmasq
    local f
    for f in "$DIR"/forwards/*.pid; do
        [ -f "$f" ] && stop_pidfile "$f" "$DIR/forwards/" "socat ($(basename "$f" .pid))"
    done
    if ns_exists "$NAME"; then
        pids="$(ip netns pids "$NAME" | tr '\n' ' ')"
        if [ -n "$pids" ]; then
            say "warning: processes the lab did not start still run in namespace $NAME" \
                "(pids $pids): stop them yourself; the namespace goes when they do"
        fi
        ip netns delete "$NAME"
        say "deleted namespace $NAME"
    fi
    if [ "$remove" = 1 ] && [ -f "$DIR/lab.env" ]; then
        rm -rf "$DIR"
        say "removed $DIR"
    elif [ -f "$DIR/lab.env" ]; then
        mv "$DIR/lab.env" "$DIR/lab.env.down"
    fi
}

cmd_status() {
    parse_common "$@"
    [ -f "$DIR/lab.env" ] || fail "no lab in $DIR (lab.sh up --name $NAME first)"
    local up=no vmdir
    ns_exists "$NAME" && up=yes
    echo "lab=$NAME up=$up dir=$DIR namespace=$NAME bridge=$BRIDGE host_ip=$HOST_IP" \
        "dhcp_hostsdir=$DIR/dhcp-hosts dhcp_optsdir=$DIR/dhcp-opts" \
        "dhcp_leasefile=$DIR/dnsmasq.leases tftp_root=$DIR/tftp" \
        "dnsmasq_pid=$(cat "$DIR/dnsmasq.pid" 2>/dev/null || echo none)"
    for vmdir in "$DIR"/vms/vm*; do
        [ -f "$vmdir/vm.env" ] || continue
        # shellcheck disable=SC1091
        (
            . "$vmdir/vm.env"
            echo "vm=${vmdir##*/} name=$NAME mac=$MAC firmware=$FIRMWARE" \
                "bmc_address=$BMC_ADDRESS bmc_port=$BMC_PORT bmc_user=$BMC_USER" \
                "bmc_password=$BMC_PASSWORD power=$("$PYTHON" "$HERE/chassis.py" "$vmdir" status)" \
                "boot_device=$(cat "$vmdir/state/boot")" \
                "serial_log=$SERIAL_LOG serial_port=$SERIAL_PORT disk=$DISK vm_dir=$vmdir"
        )
    done
}

cmd_exec() {
    parse_common "$@"
    [ "${REST[0]:-}" = -- ] && REST=("${REST[@]:1}")
    [ ${#REST[@]} -gt 0 ] || fail "exec: which command? lab.sh exec --name NAME -- COMMAND..."
    ns_exists "$NAME" || fail "lab $NAME is not up"
    exec ip netns exec "$NAME" "${REST[@]}"
}

# A TCP port joined across the namespace boundary: two socat processes, one on each side,
# meeting at a Unix socket (the file system is shared; the network is not). No interface,
# route or firewall rule is made on the host.
cmd_forward() {
    require_root
    require_tools
    parse_common "$@"
    set -- "${REST[@]+"${REST[@]}"}"
    ns_exists "$NAME" || fail "lab $NAME is not up"
    mkdir -p "$DIR/forwards"
    local arg sock
    while [ $# -gt 0 ]; do
        case "$1" in
            --to-host)
                arg="${2:-}"; shift 2
                [[ "$arg" =~ ^[0-9]+$ ]] || fail "--to-host takes a port"
                sock="$DIR/forwards/to-host-$arg.sock"
                rm -f "$sock"
                socat "UNIX-LISTEN:$sock,fork" "TCP:127.0.0.1:$arg" </dev/null \
                    >>"$DIR/forwards/socat.log" 2>&1 &
                echo $! >"$DIR/forwards/to-host-$arg-host.pid"
                ip netns exec "$NAME" socat "TCP-LISTEN:$arg,bind=127.0.0.1,reuseaddr,fork" \
                    "UNIX-CONNECT:$sock" </dev/null >>"$DIR/forwards/socat.log" 2>&1 &
                echo $! >"$DIR/forwards/to-host-$arg-ns.pid"
                say "namespace 127.0.0.1:$arg -> host 127.0.0.1:$arg"
                ;;
            --from-host)
                arg="${2:-}"; shift 2
                [[ "$arg" =~ ^[0-9]+:[0-9]+$ ]] || fail "--from-host takes HOSTPORT:PORT"
                sock="$DIR/forwards/from-host-${arg%%:*}.sock"
                rm -f "$sock"
                ip netns exec "$NAME" socat "UNIX-LISTEN:$sock,fork" "TCP:$HOST_IP:${arg#*:}" \
                    </dev/null >>"$DIR/forwards/socat.log" 2>&1 &
                echo $! >"$DIR/forwards/from-host-${arg%%:*}-ns.pid"
                socat "TCP-LISTEN:${arg%%:*},bind=127.0.0.1,reuseaddr,fork" "UNIX-CONNECT:$sock" \
                    </dev/null >>"$DIR/forwards/socat.log" 2>&1 &
                echo $! >"$DIR/forwards/from-host-${arg%%:*}-host.pid"
                say "host 127.0.0.1:${arg%%:*} -> namespace $HOST_IP:${arg#*:}"
                ;;
            *) fail "forward: unknown argument $1" ;;
        esac
    done
}

case "${1:-}" in
    setup) shift; cmd_setup ;;
    up) shift; cmd_up "$@" ;;
    forward) shift; cmd_forward "$@" ;;
    bmc) shift; cmd_bmc "$@" ;;
    media) shift; cmd_media "$@" ;;
    down) shift; cmd_down "$@" ;;
    status) shift; cmd_status "$@" ;;
    exec) shift; cmd_exec "$@" ;;
    build-ramdisk) shift; source "$HERE/build.sh"; build_ramdisk "$@" ;;
    build-image) shift; source "$HERE/build.sh"; build_image "$@" ;;
    build-esp) shift; source "$HERE/build.sh"; build_esp "$@" ;;
    selftest) shift; source "$HERE/build.sh"; source "$HERE/selftest.sh"; selftest "$@" ;;
    *) sed -n '2,27p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2 ;;
esac
