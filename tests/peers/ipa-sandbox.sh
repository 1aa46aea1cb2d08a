#!/usr/bin/env bash
# The real Ironic Python Agent (from PyPI, unmodified) as a test peer: one unprivileged agent
# process per directory, its only disk a sparse file, talking to an API on loopback.
# See tests/peers/README.md for what the sandbox guarantees and how each guarantee is checked.
#
#   ipa-sandbox.sh start --api-url URL --mac MAC --port PORT --dir DIR
#                        [--disk-size 64M] [--ip 127.0.0.1] [--extra-args AGENT-ARGS...]
#       prepare (cached), start one agent in DIR, print IPA_PID=, IPA_DISK=, IPA_LOG=,
#       IPA_SHIM_LOG= and IPA_URL= lines for eval. --extra-args must come last.
#   ipa-sandbox.sh stop --dir DIR [--rm]     stop that agent by its recorded PID; --rm: and
#                                            remove DIR
#   ipa-sandbox.sh status --dir DIR          "running pid N" (exit 0) or "stopped" (exit 1)
#   ipa-sandbox.sh setup                     install what is missing, make the agent's venv
#   ipa-sandbox.sh selftest [--agents N] [--keep]
#                                            check every safety layer, then N agents deploying
#                                            at once against a stand-in API; PASS or FAIL
#
# Run it as root: it builds each agent's mount namespace, then the agent drops to uid/gid
# 65534 with no capabilities before it runs a line of its own. Messages go to stderr; only
# `start` (its variables) and `selftest` (its report) print to stdout.
#
# Environment: FERRUM_PEERS_CACHE (default /tmp/ferrum-peers-cache; the venv goes there),
# FERRUM_IPA_SPEC (default ironic-python-agent==13.0.0), FERRUM_IPA_PYTHON (default
# /usr/bin/python3: the interpreter must be one uid 65534 may run), FERRUM_PEERS_NO_APT=1
# (fail instead of installing missing system packages).
set -euo pipefail
umask 022

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
CACHE="${FERRUM_PEERS_CACHE:-/tmp/ferrum-peers-cache}"
SPEC="${FERRUM_IPA_SPEC:-ironic-python-agent==13.0.0}"
PYTHON="${FERRUM_IPA_PYTHON:-/usr/bin/python3}"
# One venv per agent version; no "=" in its path (env(1) would read it as an assignment).
VENV="$CACHE/ipa-$(printf '%s' "$SPEC" | tr -c 'A-Za-z0-9.-' '_')"
NOBODY=65534
# How every agent process runs: nobody's uid and gid, no groups, no capabilities now or ever
# (empty bounding set), and no_new_privs, so that a setuid program (mount, su) cannot elevate.
DROP=(setpriv "--reuid=$NOBODY" "--regid=$NOBODY" --clear-groups --no-new-privs
      --inh-caps=-all --bounding-set=-all)

say() { echo "ipa-sandbox: $*" >&2; }
fail() { say "error: $*"; exit 1; }
clock() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(clock)" 'BEGIN { printf "%.1f", b - a }'; }

require_root() {
    [ "$(id -u)" = 0 ] || fail "run me as root: I build the agent's mount namespace, then \
the agent itself runs as uid $NOBODY"
}

# ---- set-up -----------------------------------------------------------------------------------

# System tools the sandbox and the agent's write_image need, as command:package.
TOOLS="setpriv:util-linux unshare:util-linux setsid:util-linux flock:util-linux
    lsblk:util-linux blkid:util-linux wipefs:util-linux blockdev:util-linux
    numfmt:coreutils mknod:coreutils parted:parted sgdisk:gdisk fuser:psmisc
    hexdump:bsdextrautils"

install_missing_tools() {
    local pair missing=""
    for pair in $TOOLS; do
        PATH="$PATH:/usr/sbin:/sbin" command -v "${pair%%:*}" >/dev/null 2>&1 \
            || missing="$missing ${pair#*:}"
    done
    [ -x "$PYTHON" ] || missing="$missing python3"
    "$PYTHON" -c 'import ensurepip, venv' 2>/dev/null || missing="$missing python3-venv"
    [ -n "$missing" ] || return 0
    missing="$(printf '%s\n' $missing | sort -u | tr '\n' ' ')"
    [ "${FERRUM_PEERS_NO_APT:-0}" != 1 ] || fail "missing packages: $missing"
    say "installing $missing"
    export DEBIAN_FRONTEND=noninteractive
    # The package lists may be missing or stale on a fresh machine: update only if needed.
    apt-get install -y -qq $missing >&2 \
        || { apt-get update -qq >&2 && apt-get install -y -qq $missing >&2; } \
        || fail "apt-get install $missing failed"
}

site_packages() {
    "$VENV/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])'
}

# The hardware manager and the shims, copied into the venv (the repository may not be
# readable by uid 65534), registered through a hand-written dist-info so that the agent finds
# the manager by its entry point. Copied again whenever the sources change.
install_plugin() {
    local sp sum
    sp="$(site_packages)"
    sum="$(cat "$HERE"/ipa_sandbox/*.py | sha256sum | cut -c1-16)"
    [ "$(cat "$sp/ipa_sandbox/SOURCES" 2>/dev/null)" != "$sum" ] || return 0
    rm -rf "$sp/ipa_sandbox" "$sp/ipa_sandbox-1.0.dist-info"
    mkdir -p "$sp/ipa_sandbox" "$sp/ipa_sandbox-1.0.dist-info"
    cp "$HERE"/ipa_sandbox/*.py "$sp/ipa_sandbox/"
    printf 'Metadata-Version: 2.1\nName: ipa-sandbox\nVersion: 1.0\n' \
        >"$sp/ipa_sandbox-1.0.dist-info/METADATA"
    printf '[ironic_python_agent.hardware_managers]\nipa_sandbox = %s\n' \
        ipa_sandbox.hardware:SandboxHardwareManager \
        >"$sp/ipa_sandbox-1.0.dist-info/entry_points.txt"
    : >"$sp/ipa_sandbox-1.0.dist-info/RECORD"
    "$VENV/bin/python" -m compileall -q "$sp/ipa_sandbox" >/dev/null
    echo "$sum" >"$sp/ipa_sandbox/SOURCES"
    say "installed the sandbox's hardware manager and shims into $VENV"
}

setup() {
    require_root
    mkdir -p "$CACHE"
    chmod 755 "$CACHE"
    # One set-up at a time (tests start agents in parallel); the others wait, then find it done.
    exec 8>"$CACHE/ipa.lock"
    flock 8
    install_missing_tools
    if [ ! -f "$VENV/READY" ]; then
        local t
        t="$(clock)"
        say "making $VENV with $SPEC (python $PYTHON)"
        rm -rf "$VENV"
        "$PYTHON" -m venv "$VENV" >&2
        "$VENV/bin/pip" install -q --disable-pip-version-check "$SPEC" >&2
        touch "$VENV/READY"
        say "venv made in $(since "$t") s"
    fi
    install_plugin
    chmod -R a+rX "$VENV"
    exec 8>&-
    "${DROP[@]}" -- "$VENV/bin/python" -c 'import ironic_python_agent, ipa_sandbox' \
        || fail "uid $NOBODY cannot run the agent from $VENV (is $PYTHON, or a directory \
above $CACHE, closed to it?)"
}

# ---- one agent's directory ----------------------------------------------------------------------

# 127.0.0.0/8 written as four numbers (not a name such as 127.example.com), localhost or ::1.
is_loopback() {
    [[ "$1" =~ ^127\.[0-9]{1,3}\.[0-9]{1,3}\.[0-9]{1,3}$ ]] \
        || [ "$1" = localhost ] || [ "$1" = ::1 ] || [ "$1" = "[::1]" ]
}

# scheme://[user@]host[:port]/path -> host ("[::1]" for an IPv6 literal)
host_of() {
    local rest="${1#*://}"
    rest="${rest%%/*}"
    rest="${rest##*@}"
    case "$rest" in
        \[*) printf '%s' "${rest%%]*}]" ;;
        *) printf '%s' "${rest%%:*}" ;;
    esac
}

# True if PID is a sandboxed agent: uid 65534, the agent's command line, and the leader of its
# own session (as `start` makes it). A PID reused by anything else fails one of these.
is_agent() {
    local pid="$1" stat
    [[ "$pid" =~ ^[0-9]+$ ]] && [ -r "/proc/$pid/status" ] || return 1
    grep -Eq "^Uid:[[:space:]]+$NOBODY[[:space:]]+$NOBODY[[:space:]]" "/proc/$pid/status" \
        || return 1
    tr '\0' ' ' <"/proc/$pid/cmdline" | grep -q 'bin/ironic-python-agent ' || return 1
    stat="$(cat "/proc/$pid/stat" 2>/dev/null)" || return 1
    # fields after "(comm)": state ppid pgrp session ...
    set -- ${stat##*) }
    [ "${4:-}" = "$pid" ]
}

# True while PID exists and is not a zombie.
is_running() {
    local stat
    stat="$(cat "/proc/$1/stat" 2>/dev/null)" || return 1
    set -- ${stat##*) }
    [ "${1:-Z}" != Z ]
}

# DIR: everything root's but what the agent writes (its disk, tmp/, home/, shims.log).
prepare_dir() { # DIR BYTES
    local dir="$1" bytes="$2" name
    mkdir -p "$dir/tmp" "$dir/home" "$dir/bin"
    chmod 755 "$dir" "$dir/bin"
    rm -f "$dir/disk.img"
    truncate -s "$bytes" "$dir/disk.img"
    [ -f "$dir/disk.img" ] && [ ! -L "$dir/disk.img" ] || fail "$dir/disk.img is not a plain file"
    : >"$dir/shims.log"
    : >"$dir/cmdline"
    printf '[DEFAULT]\n' >"$dir/ipa.conf"
    chown "$NOBODY:$NOBODY" "$dir/disk.img" "$dir/tmp" "$dir/home" "$dir/shims.log"
    chmod 644 "$dir/disk.img" "$dir/shims.log"
    chmod 700 "$dir/tmp" "$dir/home"
    rm -f "$dir/bin"/*
    for name in $("$VENV/bin/python" -I -m ipa_sandbox.shims --names); do
        printf '#!/bin/sh\nexec %s -I -m ipa_sandbox.shims %s "$@"\n' "$VENV/bin/python" "$name" \
            >"$dir/bin/$name"
        chmod 755 "$dir/bin/$name"
    done
    echo "ipa-sandbox" >"$dir/SANDBOX"
    "${DROP[@]}" -- test -w "$dir/disk.img" -a -w "$dir/tmp" \
        || fail "uid $NOBODY cannot reach $dir (a directory above it is closed to it): \
use a --dir under /tmp"
}

# Runs as root inside the new mount namespace (`start` and `selftest` call it through unshare):
# records its PID (which the agent keeps: every step execs), hides the host's /run, /dev and
# kernel command line, then becomes the given command as uid 65534 with a clean environment.
enter() { # OUTER-MOUNT-NAMESPACE DIR MAC IP BYTES COMMAND...
    local outer="$1" dir="$2" mac="$3" ip="$4" bytes="$5"
    shift 5
    # The mounts below would cover the host's own /run and /dev: refuse unless unshare really
    # made this a mount namespace of its own.
    [ "$(readlink /proc/self/ns/mnt)" != "$outer" ] || fail "not in a mount namespace of its own"
    echo $$ >"$dir/pid"
    mount --make-rprivate /
    # /run: the host's sockets (D-Bus, systemd) are out of reach; the agent's TLS files stay
    # private.
    mount -t tmpfs -o mode=755,size=16m,nosuid,nodev ipa-sandbox-run /run
    mkdir -m 700 /run/ironic-python-agent
    chown "$NOBODY:$NOBODY" /run/ironic-python-agent
    # /dev: character devices only. No block device node exists in here.
    mount -t tmpfs -o mode=755,size=1m,nosuid,noexec ipa-sandbox-dev /dev
    mknod -m 666 /dev/null c 1 3
    mknod -m 666 /dev/zero c 1 5
    mknod -m 666 /dev/full c 1 7
    mknod -m 666 /dev/random c 1 8
    mknod -m 666 /dev/urandom c 1 9
    mknod -m 666 /dev/tty c 5 0
    ln -s /proc/self/fd /dev/fd
    ln -s /proc/self/fd/0 /dev/stdin
    ln -s /proc/self/fd/1 /dev/stdout
    ln -s /proc/self/fd/2 /dev/stderr
    mkdir -m 1777 /dev/shm
    # The agent reads its settings from the kernel command line: give it an empty one.
    mount --bind "$dir/cmdline" /proc/cmdline
    exec "${DROP[@]}" -- env -i \
        "PATH=$dir/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin" \
        "HOME=$dir/home" "TMPDIR=$dir/tmp" LANG=C.UTF-8 PYTHONDONTWRITEBYTECODE=1 \
        IPA_SANDBOX=1 "IPA_SANDBOX_DISK=$dir/disk.img" "IPA_SANDBOX_DISK_SIZE=$bytes" \
        "IPA_SANDBOX_MAC=$mac" "IPA_SANDBOX_IP=$ip" "IPA_SANDBOX_SHIM_DIR=$dir/bin" \
        "IPA_SANDBOX_SHIM_LOG=$dir/shims.log" "$@"
}

# Runs COMMAND in a fresh sandbox on DIR, in the foreground, in a session of its own.
sandboxed() { # DIR MAC IP BYTES COMMAND...
    setsid unshare --mount --propagation private -- \
        bash "$HERE/ipa-sandbox.sh" _enter "$(readlink /proc/self/ns/mnt)" "$@"
}

# ---- commands ---------------------------------------------------------------------------------

cmd_start() {
    local api_url="" mac="" port="" dir="" size=64M ip=127.0.0.1 extra=()
    while [ $# -gt 0 ]; do
        case "$1" in
            --api-url) api_url="${2:-}"; shift 2 ;;
            --mac) mac="${2:-}"; shift 2 ;;
            --port) port="${2:-}"; shift 2 ;;
            --dir) dir="${2:-}"; shift 2 ;;
            --disk-size) size="${2:-}"; shift 2 ;;
            --ip) ip="${2:-}"; shift 2 ;;
            --extra-args) shift; extra=("$@"); break ;;
            *) fail "start: unknown argument $1" ;;
        esac
    done
    [ -n "$api_url" ] && [ -n "$mac" ] && [ -n "$port" ] && [ -n "$dir" ] \
        || fail "start needs --api-url, --mac, --port and --dir"
    [[ "$mac" =~ ^([0-9A-Fa-f]{2}:){5}[0-9A-Fa-f]{2}$ ]] || fail "not a MAC: $mac"
    mac="${mac,,}"
    [[ "$port" =~ ^[0-9]+$ ]] && [ "$port" -ge 1 ] && [ "$port" -le 65535 ] \
        || fail "not a port: $port"
    ip="${ip#[}"
    ip="${ip%]}"
    is_loopback "$ip" || fail "--ip $ip is not a loopback address"
    is_loopback "$(host_of "$api_url")" || fail "--api-url $api_url is not on loopback"
    local bytes
    bytes="$(numfmt --from=iec "$size" 2>/dev/null)" || fail "not a size: $size"
    [ "$bytes" -ge 1048576 ] || fail "--disk-size must be 1M or more"
    setup
    dir="$(realpath -m "$dir")"
    [[ "$dir" != *[=[:space:]]* ]] || fail "--dir must not hold '=' or spaces"
    if [ -f "$dir/pid" ] && is_agent "$(cat "$dir/pid")"; then
        fail "an agent already runs from $dir (pid $(cat "$dir/pid"))"
    fi
    mkdir -p "$dir"
    rm -f "$dir/pid"
    prepare_dir "$dir" "$bytes"
    echo "=== ipa-sandbox: start $(date -u +%FT%TZ) mac $mac on $ip:$port, API $api_url" \
        >>"$dir/ipa.log"
    sandboxed "$dir" "$mac" "$ip" "$bytes" "$VENV/bin/ironic-python-agent" \
        --config-file "$dir/ipa.conf" --api_url "$api_url" \
        --listen_host "$ip" --listen_port "$port" --advertise_host "$ip" --advertise_port "$port" \
        --disk_wait_attempts 0 --lookup_interval 1 --debug "${extra[@]}" \
        </dev/null >>"$dir/ipa.log" 2>&1 &
    local pid="" _
    for _ in $(seq 100); do
        pid="$(cat "$dir/pid" 2>/dev/null || true)"
        ! is_agent "$pid" || break
        sleep 0.1
    done
    if ! is_agent "$pid"; then
        tail -n 20 "$dir/ipa.log" >&2
        fail "the agent did not start (its log: $dir/ipa.log)"
    fi
    say "agent pid $pid (uid $NOBODY) for $mac on $ip:$port, disk $dir/disk.img ($size)"
    echo "IPA_PID=$pid"
    echo "IPA_DISK=$dir/disk.img"
    echo "IPA_LOG=$dir/ipa.log"
    echo "IPA_SHIM_LOG=$dir/shims.log"
    if [[ "$ip" == *:* ]]; then
        echo "IPA_URL=https://[$ip]:$port"
    else
        echo "IPA_URL=https://$ip:$port"
    fi
}

cmd_stop() {
    local dir="" remove=0
    while [ $# -gt 0 ]; do
        case "$1" in
            --dir) dir="${2:-}"; shift 2 ;;
            --rm) remove=1; shift ;;
            *) fail "stop: unknown argument $1" ;;
        esac
    done
    [ -n "$dir" ] || fail "stop needs --dir"
    local pid _
    pid="$(cat "$dir/pid" 2>/dev/null || true)"
    if is_agent "$pid"; then
        # The agent leads its own process group, which holds only it and what it runs (dd,
        # qemu-img): signal the group, and only after checking who leads it.
        kill -TERM -- "-$pid" 2>/dev/null || true
        for _ in $(seq 50); do
            is_running "$pid" || break
            sleep 0.1
        done
        if is_agent "$pid"; then
            kill -KILL -- "-$pid" 2>/dev/null || true
        fi
        say "stopped the agent, pid $pid"
    else
        say "no agent runs from $dir"
    fi
    rm -f "$dir/pid"
    # Only a directory this script made (it holds SANDBOX) is removed.
    if [ "$remove" = 1 ] && [ -f "$dir/SANDBOX" ]; then
        rm -rf "$dir"
    fi
}

cmd_status() {
    [ "${1:-}" = --dir ] && [ -n "${2:-}" ] || fail "status needs --dir DIR"
    local pid
    pid="$(cat "$2/pid" 2>/dev/null || true)"
    if is_agent "$pid"; then
        echo "running pid $pid"
    else
        echo "stopped"
        return 1
    fi
}

# ---- selftest -----------------------------------------------------------------------------------

free_port() {
    "$PYTHON" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

cmd_selftest() {
    local agents=2 keep=0
    while [ $# -gt 0 ]; do
        case "$1" in
            --agents) agents="${2:-}"; shift 2 ;;
            --keep) keep=1; shift ;;
            *) fail "selftest: unknown argument $1" ;;
        esac
    done
    [[ "$agents" =~ ^[1-9][0-9]?$ ]] || fail "--agents takes 1 to 99"
    local t0 setup_s
    t0="$(clock)"
    setup
    setup_s="$(since "$t0")"
    WORK="$(mktemp -d /tmp/ferrum-ipa-selftest.XXXXXX)"
    chmod 755 "$WORK"
    # The checks' own scripts, where uid 65534 can read them.
    cp "$HERE/ipa_selftest/probe.py" "$HERE/ipa_selftest/standin.py" "$WORK/"
    chmod 644 "$WORK"/*.py
    FAILED=0
    PASSED=0
    STANDINS=()
    trap 'selftest_cleanup' EXIT
    KEEP="$keep"
    echo "ipa-sandbox selftest: $SPEC, $agents agents, in $WORK (set-up ${setup_s} s)"

    echo "[1] uid $NOBODY alone, on the host's /dev"
    local host_disk="" b
    for b in /sys/block/*; do
        b="${b##*/}"
        case "$b" in loop*|ram*|zram*|nbd*) continue ;; esac
        if [ -b "/dev/$b" ]; then host_disk="/dev/$b"; break; fi
    done
    if [ -n "$host_disk" ]; then
        local out
        out="$("${DROP[@]}" -- "$PYTHON" -c '
import os, sys
try:
    os.close(os.open(sys.argv[1], os.O_RDONLY))
    print("opened")
except OSError as e:
    print(e.strerror)' "$host_disk" 2>&1 || true)"
        check "$([ "$out" = "Permission denied" ] && echo ok)" \
            "open($host_disk) as uid $NOBODY: $out"
    else
        echo "  (no host disk to try)"
    fi

    echo "[2] the whole sandbox (mount namespace, shims, uid $NOBODY), probed from inside"
    prepare_dir "$WORK/probe" $((8 << 20))
    if sandboxed "$WORK/probe" 52:54:00:00:00:99 127.0.0.1 $((8 << 20)) \
        "$VENV/bin/python" "$WORK/probe.py" "$host_disk"; then
        check ok "every probe inside the sandbox"
    else
        check "" "a probe inside the sandbox"
    fi
    check "$([ ! -e /run/ironic-python-agent/probe ] && echo ok)" \
        "the host's /run is untouched"
    check "$(grep -q 'faked poweroff' "$WORK/probe/shims.log" \
        && grep -q 'faked ip link set lo down' "$WORK/probe/shims.log" && echo ok)" \
        "shims.log holds the faked poweroff and ip link set lo down"

    echo "[3] $agents agents deploy at once, each against its own stand-in API"
    local i dir port
    for i in $(seq "$agents"); do
        dir="$WORK/agent$i"
        mkdir -p "$dir"
        chmod 755 "$dir"
        port="$(free_port)"
        "${DROP[@]}" -- "$PYTHON" "$WORK/standin.py" --port "$port" \
            --mac "$(printf '52:54:00:5e:00:%02x' "$i")" --disk "$dir/disk.img" \
            --seed "$i" >"$dir/standin.out" 2>&1 &
        STANDINS+=("$!")
        if (cmd_start --api-url "http://127.0.0.1:$port" \
            --mac "$(printf '52:54:00:5e:00:%02x' "$i")" --port "$(free_port)" \
            --disk-size 32M --dir "$dir") >"$dir/start.out"; then
            check ok "agent $i started: $(tr '\n' ' ' <"$dir/start.out" | cut -c1-60)"
        else
            check "" "agent $i started"
        fi
    done
    local missing word
    for i in $(seq "$agents"); do
        dir="$WORK/agent$i"
        if wait "${STANDINS[$((i - 1))]}"; then
            check ok "agent $i: the stand-in's whole deploy passed"
        else
            check "" "agent $i: the stand-in's deploy"
        fi
        sed 's/^/      /' "$dir/standin.out"
        missing=""
        for word in 'faked iscsistart' 'faked mdadm' 'faked modprobe' 'faked udevadm' \
            'faked partprobe' 'faked blockdev' 'ran, rewritten dd' 'faked lsblk' \
            'faked poweroff'; do
            grep -qF "$word" "$dir/shims.log" || missing="$missing [$word]"
        done
        check "$([ -z "$missing" ] && echo ok)" \
            "agent $i: shims.log ($(wc -l <"$dir/shims.log") calls) shows each shim used$missing"
        check "$(is_agent "$(cat "$dir/pid")" && echo ok)" \
            "agent $i runs on after its power_off, as uid $NOBODY"
        cmd_stop --dir "$dir" 2>/dev/null
        check "$(! is_agent "$(cat "$dir/pid" 2>/dev/null)" && [ ! -f "$dir/pid" ] && echo ok)" \
            "agent $i stopped by its PID"
        if [ "$FAILED" != 0 ]; then
            echo "---- agent $i: the end of its log"
            tail -n 30 "$dir/ipa.log" | cut -c1-300
        fi
    done
    echo "timings: set-up ${setup_s} s, whole selftest $(since "$t0") s"
    if [ "$FAILED" = 0 ]; then
        echo "ipa-sandbox selftest: PASS ($PASSED checks)"
    else
        echo "ipa-sandbox selftest: FAIL ($FAILED of $((PASSED + FAILED)) checks)"
        return 1
    fi
}

check() { # "ok" or "" / what
    if [ "$1" = ok ]; then
        PASSED=$((PASSED + 1))
        echo "  ok   $2"
    else
        FAILED=$((FAILED + 1))
        echo "  FAIL $2"
    fi
}

selftest_cleanup() {
    local dir pid
    for dir in "$WORK"/agent*; do
        [ -d "$dir" ] && cmd_stop --dir "$dir" 2>/dev/null
    done
    for pid in "${STANDINS[@]}"; do
        kill "$pid" 2>/dev/null || true
    done
    if [ "$KEEP" = 1 ]; then
        say "kept $WORK"
    else
        rm -rf "$WORK"
    fi
}

case "${1:-}" in
    start) shift; cmd_start "$@" ;;
    stop) shift; cmd_stop "$@" ;;
    status) shift; cmd_status "$@" ;;
    setup) setup ;;
    selftest) shift; cmd_selftest "$@" ;;
    _enter) shift; enter "$@" ;;
    *) sed -n '2,25p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2 ;;
esac
