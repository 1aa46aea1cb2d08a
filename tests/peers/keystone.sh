#!/usr/bin/env bash
# A real Keystone as a test peer (auth_strategy = keystone): keystone from PyPI, pinned, in a venv
# kept outside the clone, on SQLite, served by gunicorn on loopback. See tests/peers/README.md.
#
#   keystone.sh setup         make the venv and a bootstrapped template (database, fernet and
#                             credential keys) if missing; print the template's directory
#   keystone.sh up DIR PORT   copy the template to DIR and serve it on 127.0.0.1:PORT; the PID of
#                             gunicorn's master goes to DIR/pid; returns once Keystone answers
#   keystone.sh down DIR      stop what `up` started in DIR (SIGTERM, then SIGKILL), by its PID
#
# The template's Keystone has the bootstrap user `admin` (password `admin-secret`) with the
# admin role on the system and on project `admin`. Messages go to stderr. Environment:
# FERRUM_PEERS_CACHE (default /tmp/ferrum-peers-cache).
set -euo pipefail

CACHE="${FERRUM_PEERS_CACHE:-/tmp/ferrum-peers-cache}"
SPEC="keystone==30.0.0 gunicorn==23.0.0"

say() { echo "keystone: $*" >&2; }
fail() { say "error: $*"; exit 1; }

# keystone.conf for a Keystone whose state is in $1.
conf() {
    cat <<CONF
[DEFAULT]
use_stderr = true
[database]
connection = sqlite:///$1/keystone.db
[token]
provider = fernet
expiration = 3600
[fernet_tokens]
key_repository = $1/fernet-keys
[fernet_receipts]
key_repository = $1/fernet-receipts
[credential]
key_repository = $1/credential-keys
[oslo_policy]
enforce_new_defaults = true
enforce_scope = true
[identity]
# The fewest bcrypt rounds: every password check of the tests costs milliseconds, not 0.3 s.
password_hash_rounds = 4
CONF
}

# The template's make is part of the key: a change to conf() makes a new one.
VENV="$CACHE/keystone-$(printf '%s' "$SPEC" "$(declare -f conf 2>/dev/null)" | sha256sum | cut -c1-12)"
TEMPLATE="$VENV/template"

setup() {
    if [ -f "$VENV/.complete" ]; then
        echo "$TEMPLATE"
        return
    fi
    mkdir -p "$CACHE"
    exec 8>"$CACHE/keystone.lock"
    flock 8
    if [ ! -f "$VENV/.complete" ]; then
        python3 -c 'import ensurepip, venv' 2>/dev/null || fail "python3 cannot make a venv: install python3-venv"
        say "making $VENV with $SPEC"
        rm -rf "$VENV"
        python3 -m venv "$VENV" >&2
        # shellcheck disable=SC2086
        "$VENV/bin/pip" install -q --disable-pip-version-check $SPEC >&2
        mkdir -p "$TEMPLATE"
        conf "$TEMPLATE" >"$TEMPLATE/keystone.conf"
        local manage=("$VENV/bin/keystone-manage" --config-file "$TEMPLATE/keystone.conf")
        local me
        me="$(id -un)"
        {
            "${manage[@]}" db_sync
            "${manage[@]}" fernet_setup --keystone-user "$me" --keystone-group "$(id -gn)"
            "${manage[@]}" credential_setup --keystone-user "$me" --keystone-group "$(id -gn)"
            "${manage[@]}" bootstrap --bootstrap-password admin-secret \
                --bootstrap-public-url http://127.0.0.1:5000/v3 --bootstrap-region-id RegionOne
        } >"$TEMPLATE/setup.log" 2>&1 || { cat "$TEMPLATE/setup.log" >&2; fail "bootstrapping the template failed"; }
        # Keystone's WSGI application reads its configuration through oslo.config, which must
        # not see gunicorn's arguments.
        cat >"$VENV/ferrum_keystone_wsgi.py" <<'PY'
import sys
sys.argv = sys.argv[:1]
from keystone.server import wsgi
application = wsgi.initialize_public_application()
PY
        touch "$VENV/.complete"
    fi
    exec 8>&-
    echo "$TEMPLATE"
}

up() {
    local dir="$1" port="$2"
    setup >/dev/null
    mkdir -p "$dir"
    cp -a "$TEMPLATE/keystone.db" "$TEMPLATE/fernet-keys" "$TEMPLATE/fernet-receipts" \
        "$TEMPLATE/credential-keys" "$dir/"
    conf "$dir" >"$dir/keystone.conf"
    OS_KEYSTONE_CONFIG_FILES="$dir/keystone.conf" setsid "$VENV/bin/gunicorn" \
        --chdir "$VENV" --bind "127.0.0.1:$port" --workers 1 --threads 4 \
        --pid "$dir/gunicorn.pid" ferrum_keystone_wsgi:application \
        >"$dir/keystone.log" 2>&1 </dev/null &
    echo $! >"$dir/pid"
    for _ in $(seq 1 120); do
        if curl -fsS -o /dev/null "http://127.0.0.1:$port/v3"; then
            return 0
        fi
        kill -0 "$(cat "$dir/pid")" 2>/dev/null || { tail -n 20 "$dir/keystone.log" >&2; fail "Keystone exited at start"; }
        sleep 0.25
    done
    tail -n 20 "$dir/keystone.log" >&2
    fail "Keystone did not answer on 127.0.0.1:$port within 30 s"
}

down() {
    local dir="$1" pid
    [ -f "$dir/pid" ] || return 0
    pid="$(cat "$dir/pid")"
    # gunicorn's master stops its workers on SIGTERM; its whole process group goes after.
    kill -TERM -- "-$pid" 2>/dev/null || kill -TERM "$pid" 2>/dev/null || true
    for _ in $(seq 1 40); do
        kill -0 "$pid" 2>/dev/null || { rm -f "$dir/pid"; return 0; }
        sleep 0.25
    done
    kill -KILL -- "-$pid" 2>/dev/null || kill -KILL "$pid" 2>/dev/null || true
    rm -f "$dir/pid"
}

case "${1:-}" in
    setup) setup ;;
    up) [ $# -eq 3 ] || fail "usage: $0 up DIR PORT"; up "$2" "$3" ;;
    down) [ $# -eq 2 ] || fail "usage: $0 down DIR"; down "$2" ;;
    *) fail "usage: $0 setup | up DIR PORT | down DIR" ;;
esac
