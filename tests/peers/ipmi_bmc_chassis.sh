#!/bin/sh
# The chassis of the simulated BMC (ipmi-bmc.sh): ipmi_sim runs it as `DIR get PARAM...` or
# `DIR set PARAM VALUE...` and must have its answer within about a second, else ipmitool sends
# the request again. Power and boot device are files in DIR/state; a hook in DIR/hooks is
# started in the background, never waited for.
DIR="$1"
shift
S="$DIR/state"
echo "$*" >>"$S/log"

hook() { # NAME
    if [ -x "$DIR/hooks/$1" ]; then
        "$DIR/hooks/$1" "$(cat "$S/boot")" </dev/null >>"$DIR/hooks.log" 2>&1 &
    fi
}

op="$1"
shift
case "$op" in
get)
    for param in "$@"; do
        case "$param" in
        power) echo "power:$(cat "$S/power")" ;;
        boot) echo "boot:$(cat "$S/boot")" ;;
        *) echo "$param:0" ;;
        esac
    done
    ;;
set)
    while [ $# -ge 2 ]; do
        param="$1" value="$2"
        shift 2
        case "$param" in
        power)
            [ "$value" = 1 ] && echo 1 >"$S/power" && hook power-on
            [ "$value" = 0 ] && echo 0 >"$S/power" && hook power-off
            ;;
        shutdown)
            # A graceful power off: the simulated machine stops at once.
            [ "$value" = 1 ] && echo 0 >"$S/power" && hook power-off
            ;;
        reset) [ "$(cat "$S/power")" = 1 ] && hook reset ;;
        boot) echo "$value" >"$S/boot" ;;
        esac
    done
    ;;
esac
exit 0
