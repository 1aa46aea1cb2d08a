#!/usr/bin/env bash
# Clustered engines on loopback, as test peers (issue 28): a RabbitMQ cluster of three nodes, and
# a MariaDB Galera cluster of three nodes (Debian's galera-4, rsync state transfers).
# Everything runs as the calling user from DIR, on free ports of 127.0.0.1, under node names of
# its own, and is stopped by the PIDs recorded in DIR; the machine's own `rabbit@` node is never
# touched (every rabbitmqctl names its node with -n).
#
#   clusters.sh setup                   install what the clusters need when missing (as root):
#                                       galera-4 and rsync (RabbitMQ and MariaDB are the
#                                       machine's services already)
#   clusters.sh rabbit up DIR [NODES]   start NODES (default 3) RabbitMQ nodes clustered together
#                                       (classic peer discovery, node 1 first), wait until all run
#                                       in one cluster; print, one a line (for eval),
#                                       RABBIT_URL= (every node, oslo.messaging's form),
#                                       RABBIT_NODES= and RABBIT_PORTS= (space-separated)
#   clusters.sh rabbit kill DIR I       SIGKILL node I (1-based): its whole Erlang VM
#   clusters.sh rabbit start DIR I      start node I again and wait until it is back in the cluster
#   clusters.sh rabbit status DIR       each node's PID and state, and the cluster as node 1 sees it
#   clusters.sh rabbit ctl DIR I ARGS   rabbitmqctl -n <node I> ARGS
#   clusters.sh rabbit down DIR         stop every node started in DIR (SIGTERM, then SIGKILL)
#   clusters.sh galera up DIR [NODES]   start NODES (default 3) mariadbd with wsrep, node 1
#                                       bootstrapping the cluster (--wsrep-new-cluster), the
#                                       others joining it one after the other (a state transfer
#                                       each); wait until all are Synced; print GALERA_PORTS=
#                                       (space-separated) and GALERA_URLS= (mysql://root@…, one a
#                                       node, space-separated)
#   clusters.sh galera kill DIR I       SIGKILL node I
#   clusters.sh galera start DIR I      start node I again once the others dropped it, from the
#                                       position it recovers (incremental state transfer), and
#                                       wait until Synced
#   clusters.sh galera status DIR       each node's PID, state and the cluster's size
#   clusters.sh galera down DIR         stop every node started in DIR
#
# DIR/rabbit.env and DIR/galera.env hold what `up` printed. Each node has DIR/rabbit-I/ (mnesia, logs, config,
# server.out); the nodes share an Erlang cookie in DIR/home and the machine's epmd (127.0.0.1).
set -euo pipefail

say() { echo "clusters: $*" >&2; }
fail() { say "error: $*"; exit 1; }

# The PID recorded in PIDFILE if that process still runs from DIR (its working directory is in
# DIR, so not a reused PID) and is no zombie.
live_pid() { # PIDFILE DIR
    local pid cwd state
    pid="$(cat "$1" 2>/dev/null || true)"
    [[ "$pid" =~ ^[0-9]+$ ]] || return 1
    cwd="$(readlink "/proc/$pid/cwd" 2>/dev/null)" || return 1
    case "$cwd" in "$2" | "$2"/*) ;; *) return 1 ;; esac
    state="$(sed -n 's/^State:[[:space:]]*\([A-Z]\).*/\1/p' "/proc/$pid/status" 2>/dev/null)"
    [ "$state" != Z ] || return 1
    echo "$pid"
}

# Each node of KIND (rabbit, galera) lives in DIR/KIND-I, its PID (that of its process group:
# it is started with setsid) in DIR/KIND-I/pid.
node_pid() { # DIR KIND I: the node's PID, if it runs
    live_pid "$1/$2-$3/pid" "$1/$2-$3"
}

# SIGKILL to the node's process group; waits (30 s at most) until it is gone.
kill_node() { # DIR KIND I
    local pid deadline=$((SECONDS + 30))
    pid="$(node_pid "$1" "$2" "$3")" || fail "$2 node $3 does not run"
    kill -KILL -- "-$pid" 2>/dev/null || true
    while node_pid "$1" "$2" "$3" >/dev/null; do
        [ "$SECONDS" -lt "$deadline" ] || fail "$2 node $3 (pid $pid) did not die"
        sleep 0.05
    done
}

# SIGTERM to every node's process group, then SIGKILL to those still there after 30 s.
stop_nodes() { # DIR KIND COUNT
    local dir="$1" kind="$2" i pid
    for i in $(seq "$3"); do
        pid="$(node_pid "$dir" "$kind" "$i")" || continue
        kill -TERM -- "-$pid" 2>/dev/null || true
    done
    for i in $(seq "$3"); do
        for _ in $(seq 150); do
            node_pid "$dir" "$kind" "$i" >/dev/null || break
            sleep 0.2
        done
        ! node_pid "$dir" "$kind" "$i" >/dev/null || kill_node "$dir" "$kind" "$i"
    done
}

free_port() {
    python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# The rabbitmq-server script that runs a node in the foreground as the calling user (Debian's
# /usr/sbin/rabbitmq-server wraps it, switches to the rabbitmq user and drops the environment).
rabbit_bin() {
    local found real
    found="$(command -v rabbitmq-server || echo /usr/sbin/rabbitmq-server)"
    [ -e "$found" ] || fail "rabbitmq-server is not installed (Debian package rabbitmq-server)"
    real="$(readlink -f "$found")"
    if [ "$(basename "$real")" = rabbitmq-script-wrapper ]; then
        real="$(dirname "$real")/rabbitmq-server"
    fi
    [ -x "$real" ] || fail "no rabbitmq-server script at $real"
    echo "$(dirname "$real")"
}

# The environment of node I, from DIR/rabbit.env.
rabbit_env() { # DIR I
    local dir="$1" i="$2" node_dir="$1/rabbit-$2" port dist node
    # shellcheck disable=SC1091
    . "$dir/rabbit.env"
    port="$(echo "$RABBIT_PORTS" | cut -d' ' -f"$i")"
    dist="$(echo "$RABBIT_DIST_PORTS" | cut -d' ' -f"$i")"
    node="$(echo "$RABBIT_NODES" | cut -d' ' -f"$i")"
    [ -n "$node" ] || fail "no node $i in $dir"
    echo "HOME=$dir/home"
    echo "LANG=C.UTF-8"
    echo "PATH=/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin"
    echo "RABBITMQ_CONF_ENV_FILE=$node_dir/rabbitmq-env.conf"
    echo "RABBITMQ_NODENAME=$node"
    echo "RABBITMQ_NODE_IP_ADDRESS=127.0.0.1"
    echo "RABBITMQ_NODE_PORT=$port"
    echo "RABBITMQ_DIST_PORT=$dist"
    echo "RABBITMQ_MNESIA_BASE=$node_dir/mnesia"
    echo "RABBITMQ_LOG_BASE=$node_dir/log"
    echo "RABBITMQ_CONFIG_FILE=$node_dir/rabbitmq.conf"
    echo "RABBITMQ_ENABLED_PLUGINS_FILE=$node_dir/enabled_plugins"
    echo "ERL_EPMD_ADDRESS=127.0.0.1"
    echo "ERL_FLAGS=-kernel inet_dist_use_interface {127,0,0,1}"
}

rabbit_ctl() { # DIR I ARGS...
    local dir="$1" i="$2" node
    shift 2
    node="$(rabbit_env "$dir" "$i" | sed -n 's/^RABBITMQ_NODENAME=//p')"
    local -a env
    mapfile -t env < <(rabbit_env "$dir" "$i")
    env -i "${env[@]}" "$(rabbit_bin)/rabbitmqctl" -n "$node" "$@"
}

rabbit_nodes() { # DIR
    (. "$1/rabbit.env"; wc -w <<<"$RABBIT_NODES")
}

rabbit_start() { # DIR I: start node I in its own session (process group = its PID)
    local dir="$1" i="$2" node_dir="$1/rabbit-$2"
    [ -z "$(node_pid "$dir" rabbit "$i")" ] || fail "node $i runs already"
    local -a env
    mapfile -t env < <(rabbit_env "$dir" "$i")
    (cd "$node_dir" && exec setsid env -i "${env[@]}" "$(rabbit_bin)/rabbitmq-server" \
        >>"$node_dir/server.out" 2>&1 </dev/null) &
    echo $! >"$node_dir/pid"
}

rabbit_wait() { # DIR I: until node I runs its applications
    local dir="$1" i="$2"
    local deadline=$((SECONDS + 120))
    until rabbit_ctl "$dir" "$i" await_startup --timeout 5 >/dev/null 2>&1; do
        [ -n "$(node_pid "$dir" rabbit "$i")" ] \
            || fail "node $i exited: $(tail -n 20 "$dir/rabbit-$i/server.out")"
        [ "$SECONDS" -lt "$deadline" ] || fail "node $i did not start within 120 s"
        sleep 0.5
    done
}

rabbit_running_nodes() { # DIR I: how many nodes node I sees running in its cluster
    rabbit_ctl "$1" "$2" cluster_status --formatter json 2>/dev/null \
        | python3 -c 'import json, sys; print(len(json.load(sys.stdin)["running_nodes"]))'
}

rabbit_up() { # DIR NODES
    local dir="$1" nodes="$2" id i peers="" ports="" dists="" names=""
    command -v erl >/dev/null || fail "erl is missing (Debian package rabbitmq-server)"
    rabbit_bin >/dev/null
    mkdir -p "$dir/home"
    [ ! -e "$dir/rabbit.env" ] || fail "$dir has a cluster already"
    id="$(head -c 6 /dev/urandom | od -An -tx1 | tr -d ' \n')"
    for i in $(seq "$nodes"); do
        names="$names ferrum-cluster-$id-$i@localhost"
        ports="$ports $(free_port)"
        dists="$dists $(free_port)"
    done
    names="${names# }" ports="${ports# }" dists="${dists# }"
    head -c 20 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$dir/home/.erlang.cookie"
    chmod 400 "$dir/home/.erlang.cookie"
    local url="" n=1
    for name in $names; do
        peers="${peers}cluster_formation.classic_config.nodes.$n = $name"$'\n'
        url="$url,guest:guest@127.0.0.1:$(echo "$ports" | cut -d' ' -f"$n")"
        n=$((n + 1))
    done
    cat >"$dir/rabbit.env" <<EOF
RABBIT_URL='amqp://${url#,}/%2f'
RABBIT_NODES='$names'
RABBIT_PORTS='$ports'
RABBIT_DIST_PORTS='$dists'
EOF
    for i in $(seq "$nodes"); do
        local node_dir="$dir/rabbit-$i"
        mkdir -p "$node_dir/mnesia" "$node_dir/log"
        cat >"$node_dir/rabbitmq.conf" <<EOF
listeners.tcp.default = 127.0.0.1:$(echo "$ports" | cut -d' ' -f"$i")
loopback_users.guest = true
disk_free_limit.absolute = 10MB
log.file.level = info
log.console = false
cluster_formation.peer_discovery_backend = classic_config
$peers
EOF
        echo "[]." >"$node_dir/enabled_plugins"
        : >"$node_dir/rabbitmq-env.conf"
    done
    # Node 1 forms the cluster; the others, started once it runs, join it.
    rabbit_start "$dir" 1
    rabbit_wait "$dir" 1
    for i in $(seq 2 "$nodes"); do rabbit_start "$dir" "$i"; done
    for i in $(seq 2 "$nodes"); do rabbit_wait "$dir" "$i"; done
    local deadline=$((SECONDS + 60))
    until [ "$(rabbit_running_nodes "$dir" 1 || echo 0)" = "$nodes" ]; do
        [ "$SECONDS" -lt "$deadline" ] || fail "the nodes did not form one cluster: $(rabbit_ctl "$dir" 1 cluster_status 2>&1)"
        sleep 0.5
    done
    say "RabbitMQ cluster of $nodes nodes up in $dir"
    grep -v DIST "$dir/rabbit.env"
}

rabbit_down() { # DIR
    [ -e "$1/rabbit.env" ] || return 0
    stop_nodes "$1" rabbit "$(rabbit_nodes "$1")"
    say "RabbitMQ cluster in $1 stopped"
}

rabbit_status() { # DIR
    local dir="$1" i
    for i in $(seq "$(rabbit_nodes "$dir")"); do
        echo "node $i: pid $(node_pid "$dir" rabbit "$i" || echo '-')"
    done
    rabbit_ctl "$dir" 1 cluster_status || true
}

# Who runs the Galera nodes: as root, the mysql user, since the joiner's rsync daemon of a state
# transfer, started by root, would write as `nobody`; else the calling user.
galera_user() {
    if [ "$(id -u)" = 0 ]; then
        id mysql >/dev/null 2>&1 || fail "no mysql user to run the Galera nodes as (Debian package mariadb-server)"
        echo mysql
    else
        id -un
    fi
}

galera_provider() {
    local p
    for p in /usr/lib/galera/libgalera_smm.so /usr/lib/libgalera_smm.so; do
        [ -e "$p" ] && { echo "$p"; return; }
    done
    fail "libgalera_smm.so is missing (Debian package galera-4)"
}

galera_field() { # DIR FIELD I
    # shellcheck disable=SC1091
    (. "$1/galera.env"; eval "echo \"\$$2\"" | cut -d' ' -f"$3")
}

galera_nodes() { # DIR
    (. "$1/galera.env"; wc -w <<<"$GALERA_PORTS")
}

galera_sql() { # DIR I SQL: its answer, tab-separated, no header
    mariadb --no-defaults -h 127.0.0.1 -P "$(galera_field "$1" GALERA_PORTS "$2")" -u root \
        --connect-timeout=2 -N -B -e "$3" 2>/dev/null
}

# How soon the others give up on a node that went silent. Galera's defaults (suspected after
# 5 s, inactive after 15 s) stop every commit in the cluster for ~6 s after a node dies; these
# (keepalive <= check period <= suspect <= inactive, as Galera requires) make it ~2 s, which a
# LAN allows (README, production topology).
GALERA_FAILURE_DETECTION="evs.keepalive_period=PT0.5S;evs.inactive_check_period=PT0.5S;evs.suspect_timeout=PT1.5S;evs.inactive_timeout=PT3S"

galera_args() { # DIR I: node I's mariadbd arguments, into the array GALERA_ARGS
    local dir="$1" i="$2" node_dir="$1/galera-$2" gcomm="" j
    for j in $(seq "$(galera_nodes "$dir")"); do
        gcomm="$gcomm,127.0.0.1:$(galera_field "$dir" GALERA_GCOMM "$j")"
    done
    GALERA_ARGS=(
        --no-defaults
        "--datadir=$node_dir/data" "--tmpdir=$node_dir/tmp"
        "--port=$(galera_field "$dir" GALERA_PORTS "$i")" "--socket=$node_dir/sock"
        "--pid-file=$node_dir/mariadbd.pid" "--log-error=$node_dir/error.log"
        --bind-address=127.0.0.1 "--user=$(galera_user)" --skip-name-resolve --skip-log-bin
        --performance-schema=OFF --innodb-buffer-pool-size=64M --innodb-log-file-size=16M
        --max-connections=300 --binlog-format=ROW --default-storage-engine=InnoDB
        --innodb-autoinc-lock-mode=2 --innodb-flush-log-at-trx-commit=2
        --wsrep-on=ON "--wsrep-provider=$(galera_provider)"
        "--wsrep-cluster-name=$(galera_field "$dir" GALERA_NAME 1)"
        "--wsrep-cluster-address=gcomm://${gcomm#,}"
        "--wsrep-node-name=node-$i" --wsrep-node-address=127.0.0.1
        "--wsrep-provider-options=gmcast.listen_addr=tcp://127.0.0.1:$(galera_field "$dir" GALERA_GCOMM "$i");ist.recv_addr=127.0.0.1:$(galera_field "$dir" GALERA_IST "$i");gcache.size=64M;$GALERA_FAILURE_DETECTION"
        --wsrep-sst-method=rsync
        "--wsrep-sst-receive-address=127.0.0.1:$(galera_field "$dir" GALERA_SST "$i")"
    )
}

galera_start() { # DIR I [MARIADBD ARGS...]
    local dir="$1" i="$2" node_dir="$1/galera-$2"
    shift 2
    [ -z "$(node_pid "$dir" galera "$i")" ] || fail "galera node $i runs already"
    galera_args "$dir" "$i"
    (cd "$node_dir" && exec setsid mariadbd "${GALERA_ARGS[@]}" "$@" >>"$node_dir/server.out" 2>&1 </dev/null) &
    echo $! >"$node_dir/pid"
}

# Starts node I again after it was killed, as Galera's own `galera_recovery` does: first once
# more the others agree it is gone (a new incarnation joining while the old one is still being
# evicted makes the cluster re-form its view again and again, stopping every commit meanwhile);
# then the last position its InnoDB committed (`--wsrep-recover`), so that it rejoins by
# incremental state transfer from a donor's cache rather than by a full copy (rsync's, which
# stops the donor's commits while it runs).
galera_restart() { # DIR I
    local dir="$1" i="$2" node_dir="$1/galera-$2" j others=0 deadline=$((SECONDS + 30)) position
    for j in $(seq "$(galera_nodes "$dir")"); do
        [ "$j" = "$i" ] || [ -z "$(node_pid "$dir" galera "$j")" ] || others=$((others + 1))
    done
    for j in $(seq "$(galera_nodes "$dir")"); do
        [ "$j" != "$i" ] && [ -n "$(node_pid "$dir" galera "$j")" ] || continue
        until [ "$(galera_sql "$dir" "$j" "SHOW STATUS LIKE 'wsrep_cluster_size'" | cut -f2)" = "$others" ]; do
            [ "$SECONDS" -lt "$deadline" ] || fail "galera node $j still counts node $i after 30 s"
            sleep 0.2
        done
    done
    galera_args "$dir" "$i"
    (cd "$node_dir" && mariadbd "${GALERA_ARGS[@]}" --wsrep-recover \
        "--log-error=$node_dir/recover.log" >"$node_dir/recover.out" 2>&1 </dev/null) \
        || fail "galera node $i: --wsrep-recover failed: $(tail -n 20 "$node_dir/recover.log")"
    position="$(sed -n 's/.*WSREP: Recovered position: *\([0-9a-f-]*:[0-9-]*\).*/\1/p' "$node_dir/recover.log" | tail -n 1)"
    if [ -n "$position" ]; then
        galera_start_synced "$dir" "$i" "--wsrep-start-position=$position"
    else
        galera_start_synced "$dir" "$i"
    fi
}

galera_wait() { # DIR I: until node I is Synced
    local dir="$1" i="$2" deadline=$((SECONDS + 180))
    until [ "$(galera_sql "$dir" "$i" "SHOW STATUS LIKE 'wsrep_local_state_comment'" | cut -f2)" = Synced ]; do
        [ -n "$(node_pid "$dir" galera "$i")" ] \
            || fail "galera node $i exited: $(tail -n 30 "$dir/galera-$i/error.log")"
        [ "$SECONDS" -lt "$deadline" ] \
            || fail "galera node $i not Synced within 180 s: $(tail -n 30 "$dir/galera-$i/error.log")"
        sleep 0.5
    done
}

# Starts node I and waits until it is Synced; once more if it exited while starting (Galera
# 26.4 sometimes fails to open its group connection at start, "Failed to read thread
# schedparams", a race of its own).
galera_start_synced() { # DIR I [MARIADBD ARGS...]
    local dir="$1" i="$2"
    galera_start "$@"
    if ! (galera_wait "$dir" "$i"); then
        [ -z "$(node_pid "$dir" galera "$i")" ] || fail "galera node $i did not become Synced"
        say "galera node $i exited while starting: starting it once more"
        galera_start "$@"
        galera_wait "$dir" "$i"
    fi
}

galera_up() { # DIR NODES
    local dir="$1" nodes="$2" i p ports="" gcomm="" ist="" sst="" urls=""
    command -v mariadbd >/dev/null || fail "mariadbd is missing (Debian package mariadb-server)"
    command -v rsync >/dev/null || fail "rsync is missing (the state transfer; Debian package rsync)"
    galera_provider >/dev/null
    [ ! -e "$dir/galera.env" ] || fail "$dir has a Galera cluster already"
    mkdir -p "$dir"
    for i in $(seq "$nodes"); do
        ports="$ports $(free_port)" gcomm="$gcomm $(free_port)"
        ist="$ist $(free_port)" sst="$sst $(free_port)"
    done
    ports="${ports# }" gcomm="${gcomm# }" ist="${ist# }" sst="${sst# }"
    for p in $ports; do urls="$urls mysql://root@127.0.0.1:$p"; done
    {
        echo "GALERA_PORTS='$ports'"
        echo "GALERA_URLS='${urls# }'"
        echo "GALERA_GCOMM='$gcomm'"
        echo "GALERA_IST='$ist'"
        echo "GALERA_SST='$sst'"
        echo "GALERA_NAME='ferrum-$(head -c 4 /dev/urandom | od -An -tx1 | tr -d ' \n')'"
    } >"$dir/galera.env"
    for i in $(seq "$nodes"); do
        mkdir -p "$dir/galera-$i/data" "$dir/galera-$i/tmp"
        chown -R "$(galera_user)" "$dir/galera-$i"
        mariadb-install-db --no-defaults "--datadir=$dir/galera-$i/data" \
            "--tmpdir=$dir/galera-$i/tmp" --auth-root-authentication-method=normal \
            "--user=$(galera_user)" \
            --skip-test-db --skip-log-bin >"$dir/galera-$i/install.out" 2>&1 \
            || fail "mariadb-install-db: $(tail -n 20 "$dir/galera-$i/install.out")"
    done
    galera_start_synced "$dir" 1 --wsrep-new-cluster
    # One joiner at a time: each takes a full state transfer from a donor.
    for i in $(seq 2 "$nodes"); do
        galera_start_synced "$dir" "$i"
    done
    [ "$(galera_sql "$dir" 1 "SHOW STATUS LIKE 'wsrep_cluster_size'" | cut -f2)" = "$nodes" ] \
        || fail "the Galera cluster does not have $nodes nodes"
    say "Galera cluster of $nodes nodes up in $dir"
    grep -E '^GALERA_(PORTS|URLS)=' "$dir/galera.env"
}

galera_down() { # DIR
    [ -e "$1/galera.env" ] || return 0
    stop_nodes "$1" galera "$(galera_nodes "$1")"
    say "Galera cluster in $1 stopped"
}

galera_status() { # DIR
    local dir="$1" i
    for i in $(seq "$(galera_nodes "$dir")"); do
        echo "node $i: pid $(node_pid "$dir" galera "$i" || echo '-')," \
            "$(galera_sql "$dir" "$i" "SHOW STATUS LIKE 'wsrep_local_state_comment'" | cut -f2)," \
            "cluster size $(galera_sql "$dir" "$i" "SHOW STATUS LIKE 'wsrep_cluster_size'" | cut -f2)"
    done
}

setup() {
    local missing=()
    [ -e /usr/lib/galera/libgalera_smm.so ] || [ -e /usr/lib/libgalera_smm.so ] || missing+=(galera-4)
    command -v rsync >/dev/null || missing+=(rsync)
    [ ${#missing[@]} -gt 0 ] || return 0
    [ "$(id -u)" = 0 ] && [ "${FERRUM_PEERS_NO_APT:-0}" != 1 ] \
        || fail "missing: ${missing[*]} (Debian packages)"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >&2 \
        || fail "apt-get install ${missing[*]} failed"
}

[ "${1:-}" != setup ] || { setup; exit 0; }

case "${1:-} ${2:-}" in
    "rabbit up") [ $# -ge 3 ] || fail "usage: clusters.sh rabbit up DIR [NODES]"
        rabbit_up "$(realpath -m "$3")" "${4:-3}" ;;
    "rabbit kill") [ $# -eq 4 ] || fail "usage: clusters.sh rabbit kill DIR I"
        kill_node "$(realpath -m "$3")" rabbit "$4" ;;
    "rabbit start") [ $# -eq 4 ] || fail "usage: clusters.sh rabbit start DIR I"
        rabbit_start "$(realpath -m "$3")" "$4"
        rabbit_wait "$(realpath -m "$3")" "$4" ;;
    "rabbit status") [ $# -eq 3 ] || fail "usage: clusters.sh rabbit status DIR"
        rabbit_status "$(realpath -m "$3")" ;;
    "rabbit ctl") [ $# -ge 4 ] || fail "usage: clusters.sh rabbit ctl DIR I ARGS..."
        dir="$(realpath -m "$3")" i="$4"
        shift 4
        rabbit_ctl "$dir" "$i" "$@" ;;
    "rabbit down") [ $# -eq 3 ] || fail "usage: clusters.sh rabbit down DIR"
        rabbit_down "$(realpath -m "$3")" ;;
    "galera up") [ $# -ge 3 ] || fail "usage: clusters.sh galera up DIR [NODES]"
        galera_up "$(realpath -m "$3")" "${4:-3}" ;;
    "galera kill") [ $# -eq 4 ] || fail "usage: clusters.sh galera kill DIR I"
        kill_node "$(realpath -m "$3")" galera "$4" ;;
    "galera start") [ $# -eq 4 ] || fail "usage: clusters.sh galera start DIR I"
        galera_restart "$(realpath -m "$3")" "$4" ;;
    "galera status") [ $# -eq 3 ] || fail "usage: clusters.sh galera status DIR"
        galera_status "$(realpath -m "$3")" ;;
    "galera down") [ $# -eq 3 ] || fail "usage: clusters.sh galera down DIR"
        galera_down "$(realpath -m "$3")" ;;
    *) sed -n '2,35p' "$0" >&2; exit 2 ;;
esac
