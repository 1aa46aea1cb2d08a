#!/usr/bin/env bash
# A Redfish BMC as a test peer: sushy-tools' emulator (from PyPI) with its fake systems driver,
# which needs no libvirt, no OpenStack and no root. See tests/peers/README.md.
#
#   redfish-emulator.sh setup           make the venv if it is missing; print its path
#   redfish-emulator.sh [PORT] [N]      start N fake systems on 127.0.0.1:PORT in the background,
#                                       wait until the emulator answers, print the systems' ids
#                                       (one UUID a line)
#   redfish-emulator.sh stop [PORT]     stop the emulator started with the same PORT and
#                                       REDFISH_EMU_DIR, by its recorded PID
#
# Messages go to stderr, so `ids=$(redfish-emulator.sh 8000 3)` works. Every start begins from a
# fresh state: each system in its initial power state, no boot override, no media.
# Environment (all optional):
#   REDFISH_EMU_DIR          the emulator's directory: emulator.conf, state/, tmp/, emulator.log,
#                            emulator.pid (default /tmp/redfish-emulator-PORT)
#   REDFISH_EMU_VENV         the venv to run (default DIR/venv if there is one, else the cached
#                            one under FERRUM_PEERS_CACHE, default /tmp/ferrum-peers-cache)
#   REDFISH_EMU_HOST         listen address (default 127.0.0.1)
#   REDFISH_EMU_USER, REDFISH_EMU_PASSWORD
#                            require HTTP basic authentication with these credentials
#   REDFISH_EMU_POWER_DELAY  D: a power change lands D-1..D s after it is asked for (0: at the
#                            next read); unset: the fake driver's own 0..11 s, at random
#   REDFISH_EMU_POWER_STATE  every system's initial power state (default Off)
#   REDFISH_EMU_WAIT         seconds to wait for the emulator to answer (default 30)
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
CACHE="${FERRUM_PEERS_CACHE:-/tmp/ferrum-peers-cache}"
# Pinned, so that a new release cannot change a green run by itself.
SPEC="sushy-tools==2.2.0"

say() { echo "redfish-emulator: $*" >&2; }
fail() { say "error: $*"; exit 1; }

# Makes VENV with SPEC unless it is there; one set-up at a time.
make_venv() { # VENV
    local venv="$1"
    [ ! -x "$venv/bin/sushy-emulator" ] || return 0
    mkdir -p "$CACHE"
    exec 8>"$CACHE/redfish.lock"
    flock 8
    if [ ! -x "$venv/bin/sushy-emulator" ]; then
        if ! python3 -c 'import ensurepip, venv' 2>/dev/null; then
            [ "$(id -u)" = 0 ] && [ "${FERRUM_PEERS_NO_APT:-0}" != 1 ] \
                || fail "python3 cannot make a venv: install python3-venv"
            DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-venv >&2 \
                || fail "apt-get install python3-venv failed"
        fi
        say "making $venv with $SPEC"
        rm -rf "$venv"
        python3 -m venv "$venv" >&2
        "$venv/bin/pip" install -q --disable-pip-version-check $SPEC >&2
    fi
    exec 8>&-
}

if [ "${1:-}" = setup ]; then
    venv="${REDFISH_EMU_VENV:-$CACHE/redfish-$(printf '%s' "$SPEC" | tr -c 'A-Za-z0-9.-' '_')}"
    make_venv "$venv"
    echo "$venv"
    exit 0
fi

if [ "${1:-}" = stop ]; then
    PORT="${2:-8000}"
    DIR="${REDFISH_EMU_DIR:-/tmp/redfish-emulator-$PORT}"
    DIR="$(cd "$DIR" 2>/dev/null && pwd || echo "$DIR")"
    pid="$(cat "$DIR/emulator.pid" 2>/dev/null || true)"
    # Only the process this script started for DIR: its command line names DIR.
    if [[ "$pid" =~ ^[0-9]+$ ]] \
        && tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -qF "redfish_emulator.py serve $DIR "; then
        kill -TERM "$pid" 2>/dev/null || true
        # It takes a second or two to go; the port is free for a restart once it has.
        for _ in $(seq 50); do
            [ -d "/proc/$pid" ] || break
            sleep 0.1
        done
        [ ! -d "/proc/$pid" ] || kill -KILL "$pid" 2>/dev/null || true
        say "stopped pid $pid"
    else
        say "no emulator of mine runs from $DIR"
    fi
    rm -f "$DIR/emulator.pid"
    exit 0
fi

PORT="${1:-8000}"
SYSTEMS="${2:-3}"
[[ "$PORT" =~ ^[0-9]+$ ]] && [[ "$SYSTEMS" =~ ^[0-9]+$ ]] || fail "usage: $0 [PORT] [N] | stop [PORT] | setup"
HOST="${REDFISH_EMU_HOST:-127.0.0.1}"
DIR="${REDFISH_EMU_DIR:-/tmp/redfish-emulator-$PORT}"
mkdir -p "$DIR"
DIR="$(cd "$DIR" && pwd)"
if [ -n "${REDFISH_EMU_VENV:-}" ]; then
    VENV="$REDFISH_EMU_VENV"
elif [ -e "$DIR/venv" ]; then
    VENV="$DIR/venv"
else
    VENV="$(bash "$HERE/redfish-emulator.sh" setup)"
fi
make_venv "$VENV"

# A server already on the port would answer in place of this one.
if (exec 3<>"/dev/tcp/$HOST/$PORT") 2>/dev/null; then
    fail "something already listens on $HOST:$PORT"
fi
if [ -n "${REDFISH_EMU_USER:-}" ] && [ -z "${REDFISH_EMU_PASSWORD:-}" ]; then
    fail "REDFISH_EMU_USER needs REDFISH_EMU_PASSWORD"
fi

rm -rf "$DIR/state" "$DIR/tmp"
mkdir -p "$DIR/state" "$DIR/tmp"
"$VENV/bin/python" "$HERE/redfish_emulator.py" config "$DIR" "$HOST" "$PORT" "$SYSTEMS" \
    "${REDFISH_EMU_POWER_STATE:-Off}" ${REDFISH_EMU_USER:+"$REDFISH_EMU_USER" "$REDFISH_EMU_PASSWORD"}
# TMPDIR: the emulator downloads virtual media there.
TMPDIR="$DIR/tmp" REDFISH_EMU_POWER_DELAY="${REDFISH_EMU_POWER_DELAY:-}" \
    nohup "$VENV/bin/python" "$HERE/redfish_emulator.py" serve "$DIR" \
    </dev/null >"$DIR/emulator.log" 2>&1 &
PID=$!
echo "$PID" >"$DIR/emulator.pid"
if ! "$VENV/bin/python" "$HERE/redfish_emulator.py" ready "$HOST" "$PORT" "$PID" \
    "${REDFISH_EMU_WAIT:-30}" ${REDFISH_EMU_USER:+"$REDFISH_EMU_USER" "$REDFISH_EMU_PASSWORD"}; then
    tail -n 20 "$DIR/emulator.log" >&2
    REDFISH_EMU_DIR="$DIR" bash "$HERE/redfish-emulator.sh" stop "$PORT"
    fail "the emulator did not come up"
fi
say "pid $PID on http://$HOST:$PORT/redfish/v1, $SYSTEMS systems, in $DIR"
