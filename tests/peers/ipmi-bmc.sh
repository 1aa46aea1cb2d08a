#!/usr/bin/env bash
# An IPMI BMC as a test peer: OpenIPMI's simulator (`ipmi_sim`, Debian package openipmi) on a UDP
# port of 127.0.0.1, speaking IPMI 1.5 and 2.0 (lanplus) to ipmitool. Its chassis is
# `ipmi_bmc_chassis.sh`, which keeps the power state and the boot device in files and runs hooks
# on power changes (so a lab can plug a virtual machine in). See tests/peers/README.md.
#
#   ipmi-bmc.sh start DIR [PORT]   start a BMC whose files are in DIR, on PORT (default: a free
#                                  one); wait until it answers; print, one a line,
#                                  IPMI_BMC_PORT=, IPMI_BMC_PID=, IPMI_BMC_DIR= (for eval)
#   ipmi-bmc.sh stop DIR           stop the BMC started in DIR, by its recorded PID
#   ipmi-bmc.sh setup              install openipmi and ipmitool when missing (as root)
#
# DIR/state/power is 1 (on) or 0 (off); DIR/state/boot the boot device ipmi_sim names (pxe,
# default [the disk], cdrom, bios, none); DIR/state/log a line per chassis request. Executables
# DIR/hooks/power-on, power-off and reset, if present, are started in the background with the
# boot device as their argument. ipmi_sim keeps only the device of a boot setting: persistence
# and the EFI bit are dropped, and it refuses `safe`.
# Environment (all optional): IPMI_BMC_USER (admin), IPMI_BMC_PASSWORD (password),
# IPMI_BMC_POWER (initial power, 0 or 1; default 0), IPMI_BMC_SOL_PORT (a TCP port of 127.0.0.1
# serving as the machine's serial port for serial-over-LAN; listening before the BMC starts),
# FERRUM_PEERS_NO_APT=1 (never apt-get).
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
say() { echo "ipmi-bmc: $*" >&2; }
fail() { say "error: $*"; exit 1; }

# Installs openipmi, ipmitool and socat (the conductor's `ipmitool-socat` console) when missing,
# as root, unless told not to.
ensure_tools() {
    command -v ipmi_sim >/dev/null && command -v ipmitool >/dev/null && command -v socat >/dev/null \
        && return 0
    [ "$(id -u)" = 0 ] && [ "${FERRUM_PEERS_NO_APT:-0}" != 1 ] \
        || fail "ipmi_sim, ipmitool or socat is missing: install the Debian packages openipmi, ipmitool and socat"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq openipmi ipmitool socat >&2 \
        || fail "apt-get install openipmi ipmitool socat failed"
}

# Stops the simulator recorded in DIR, only if its command line names DIR.
stop() { # DIR
    local dir="$1" pid
    pid="$(cat "$dir/ipmi_sim.pid" 2>/dev/null || true)"
    if [[ "$pid" =~ ^[0-9]+$ ]] \
        && tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -qF -- "-c $dir/lan.conf"; then
        kill -TERM "$pid" 2>/dev/null || true
        for _ in $(seq 50); do
            [ -d "/proc/$pid" ] || break
            sleep 0.1
        done
        [ ! -d "/proc/$pid" ] || kill -KILL "$pid" 2>/dev/null || true
        say "stopped pid $pid"
    fi
    rm -f "$dir/ipmi_sim.pid"
}

udp_port_free() { # PORT
    [ -z "$(ss -Hlun "sport = :$1" 2>/dev/null)" ]
}

case "${1:-}" in
setup)
    ensure_tools
    exit 0
    ;;
stop)
    [ -n "${2:-}" ] || fail "usage: $0 stop DIR"
    stop "$(cd "$2" 2>/dev/null && pwd || echo "$2")"
    exit 0
    ;;
start) ;;
*) fail "usage: $0 start DIR [PORT] | stop DIR | setup" ;;
esac

[ -n "${2:-}" ] || fail "usage: $0 start DIR [PORT]"
ensure_tools
mkdir -p "$2"
DIR="$(cd "$2" && pwd)"
USER_NAME="${IPMI_BMC_USER:-admin}"
PASSWORD="${IPMI_BMC_PASSWORD:-password}"
stop "$DIR"
rm -rf "$DIR/state" "$DIR/sim"
mkdir -p "$DIR/state" "$DIR/sim" "$DIR/hooks"
echo "${IPMI_BMC_POWER:-0}" >"$DIR/state/power"
echo default >"$DIR/state/boot"
: >"$DIR/state/log"

# ipmi_sim runs the chassis program with its own arguments after these.
cat >"$DIR/chassis-control" <<CONTROL
#!/bin/sh
exec "$HERE/ipmi_bmc_chassis.sh" "$DIR" "\$@"
CONTROL
chmod +x "$DIR/chassis-control"

cat >"$DIR/sim.emu" <<'EMU'
mc_setbmc 0x20
mc_add 0x20 0 no-device-sdrs 0x23 9 8 0x9f 0x1291 0xf02 persist_sdr
sel_enable 0x20 1000 0x0a
mc_enable 0x20
EMU

start_on() { # PORT
    local port="$1"
    # Serial-over-LAN to the machine's serial port: ipmi_sim connects to it as it starts.
    SOL_LINE=""
    [ -z "${IPMI_BMC_SOL_PORT:-}" ] || SOL_LINE="  sol \"tcp:127.0.0.1:$IPMI_BMC_SOL_PORT\" 115200"
    cat >"$DIR/lan.conf" <<CONF
name "bmc"
set_working_mc 0x20
  startlan 1
    addr 127.0.0.1 $port
    priv_limit admin
    allowed_auths_callback none md2 md5 straight
    allowed_auths_user none md2 md5 straight
    allowed_auths_operator none md2 md5 straight
    allowed_auths_admin none md2 md5 straight
    guid a123456789abcdefa123456789abcdef
  endlan
  chassis_control "$DIR/chassis-control"
$SOL_LINE
  user 2 true "$USER_NAME" "$PASSWORD" admin 10 none md2 md5 straight
CONF
    nohup ipmi_sim -n -c "$DIR/lan.conf" -f "$DIR/sim.emu" -s "$DIR/sim" \
        </dev/null >"$DIR/ipmi_sim.log" 2>&1 &
    echo $! >"$DIR/ipmi_sim.pid"
    local pid=$!
    for _ in $(seq 50); do
        [ -d "/proc/$pid" ] || return 1
        if ipmitool -I lanplus -H 127.0.0.1 -p "$port" -U "$USER_NAME" -P "$PASSWORD" \
            -R 1 -N 1 power status >/dev/null 2>&1; then
            return 0
        fi
        sleep 0.1
    done
    return 1
}

PORT="${3:-}"
for _ in $(seq 10); do
    port="${PORT:-$((20000 + RANDOM % 40000))}"
    if udp_port_free "$port" && start_on "$port"; then
        echo "IPMI_BMC_PORT=$port"
        echo "IPMI_BMC_PID=$(cat "$DIR/ipmi_sim.pid")"
        echo "IPMI_BMC_DIR=$DIR"
        say "pid $(cat "$DIR/ipmi_sim.pid") on udp 127.0.0.1:$port, files in $DIR"
        exit 0
    fi
    stop "$DIR"
    [ -z "$PORT" ] || break
done
tail -n 20 "$DIR/ipmi_sim.log" >&2 || true
fail "ipmi_sim did not come up"
