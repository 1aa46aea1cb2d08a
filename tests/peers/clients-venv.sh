#!/usr/bin/env bash
# The real OpenStack clients as a test peer: a venv with python-ironicclient (the `baremetal`
# CLI), openstacksdk, pycdlib (an ISO reader to check config drives with) and oslo.messaging (a
# stock notification listener), pinned, so that a new release cannot change a green run by
# itself. See tests/peers/README.md.
#
#   clients-venv.sh setup    make the venv if it is missing or not the pinned set; print its path
#
# Messages go to stderr. Environment: FERRUM_PEERS_CACHE (default /tmp/ferrum-peers-cache), where
# the venv is kept, one per pinned set, so later runs reuse it.
set -euo pipefail

CACHE="${FERRUM_PEERS_CACHE:-/tmp/ferrum-peers-cache}"
SPEC="python-ironicclient==6.3.0 openstacksdk==4.22.0 pycdlib==1.22.0 oslo.messaging==18.3.1"
VENV="$CACHE/clients-$(printf '%s' "$SPEC" | sha256sum | cut -c1-12)"

say() { echo "clients-venv: $*" >&2; }
fail() { say "error: $*"; exit 1; }

[ "${1:-}" = setup ] || fail "usage: $0 setup"

# A venv is complete once its marker is written, after every package installed: a set-up cut
# short is made again, never used half made.
if [ ! -f "$VENV/.complete" ]; then
    mkdir -p "$CACHE"
    exec 8>"$CACHE/clients.lock"
    flock 8
    if [ ! -f "$VENV/.complete" ]; then
        python3 -c 'import ensurepip, venv' 2>/dev/null || fail "python3 cannot make a venv: install python3-venv"
        say "making $VENV with $SPEC"
        rm -rf "$VENV"
        python3 -m venv "$VENV" >&2
        # shellcheck disable=SC2086
        "$VENV/bin/pip" install -q --disable-pip-version-check $SPEC >&2
        "$VENV/bin/python" -W ignore -c "import ironicclient, openstack, pycdlib, oslo_messaging" \
            >/dev/null 2>&1 || fail "the venv at $VENV cannot import the clients"
        touch "$VENV/.complete"
    fi
    exec 8>&-
fi
echo "$VENV"
