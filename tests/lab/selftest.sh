# Sourced by lab.sh: `lab.sh selftest [--firmware uefi|bios] [--keep]`.
#
# One VM, booted the way Ironic's ipxe boot interface with the dnsmasq DHCP provider boots a
# node: the files a conductor writes (a host file, an options file, boot.ipxe, the node's
# iPXE config, its kernel and ramdisk), then IPMI `chassis bootdev pxe` and `power on`, up to
# the unmodified agent's inspection data (its inventory's bmc_address must be the VM's BMC's
# address, which the agent reads over the VM's KCS interface) and lookup, inside the VM, at the
# URLs on its kernel command line. Then a stand-in conductor (standin_conductor.py) has the
# agent write the instance image and a config drive to the VM's disk and power off; over IPMI
# `bootdev disk`, `power on`: the image prints its marker and the config drive's host name;
# `power soft`; `power off`. Prints each step's time.

SELFTEST_HTTP_PORT=8080
SELFTEST_API_PORT=6385
SELFTEST_NODE=1be26c0b-03f2-4d2e-ae87-c02d7f33c123
SELFTEST_HOSTNAME=lab-selftest-instance

selftest() {
    require_root
    local firmware=uefi keep=0
    while [ $# -gt 0 ]; do
        case "$1" in
            --firmware) firmware="${2:-}"; shift 2 ;;
            --keep) keep=1; shift ;;
            *) fail "selftest: unknown argument $1" ;;
        esac
    done
    cmd_setup
    local t0
    t0="$(clock)"
    NAME="lab-selftest-$$"
    DIR="$(mktemp -d /tmp/ferrum-lab-selftest.XXXXXX)"
    SELFTEST_KEEP="$keep"
    SELFTEST_PIDS=()
    SELFTEST_OK=0
    # The report's stream, kept for the clean-up: a signal may come while a step's output is
    # redirected.
    exec 3>&1
    trap selftest_cleanup EXIT
    trap "exit 130" INT TERM
    echo "lab selftest: $firmware, namespace $NAME, state in $DIR"

    step "the agent's venv" \
        bash "$REPO/tests/peers/ipa-sandbox.sh" setup
    local clients
    clients="$(bash "$REPO/tests/peers/clients-venv.sh" setup)" \
        || fail "tests/peers/clients-venv.sh setup failed (pycdlib for the config drive)"
    step "build the deploy ramdisk" \
        build_ramdisk "$DIR/ramdisk"
    step "build the instance image" \
        build_image "$DIR/images/instance.qcow2"
    step "lab up (1 VM, $firmware)" \
        cmd_up --name "$NAME" --dir "$DIR" --vms 1 --firmware "$firmware"
    local vmdir mac bmc bmc_ip bmc_port
    vmdir="$DIR/vms/vm1"
    mac="$(sed -n 's/^MAC=//p' "$vmdir/vm.env")"
    bmc_ip="$(sed -n 's/^BMC_ADDRESS=//p' "$vmdir/vm.env")"
    bmc_port="$(sed -n 's/^BMC_PORT=//p' "$vmdir/vm.env")"
    bmc=(ip netns exec "$NAME" ipmitool -I lanplus -C 3 -H "$bmc_ip" -p "$bmc_port"
         -U "$BMC_USER" -P "$BMC_PASSWORD")
    step "IPMI: the BMC answers on 127.0.0.1:$bmc_port too" \
        expect_output "Chassis Power is off" ip netns exec "$NAME" ipmitool -I lanplus -C 3 \
        -H 127.0.0.1 -p "$bmc_port" -U "$BMC_USER" -P "$BMC_PASSWORD" chassis power status
    step "IPMI: lan print 1 says IP Address $bmc_ip" \
        expect_output_line "^IP Address  *: ${bmc_ip//./\\.}\$" "${bmc[@]}" lan print 1

    # What a conductor writes (tests/lab/README.md, "The contract").
    write_conductor_files "$mac"
    ip netns exec "$NAME" "$PYTHON" "$HERE/httpd.py" --bind "$HOST_IP" \
        --port "$SELFTEST_HTTP_PORT" --root "$DIR/http" --log "$DIR/http.log" \
        >"$DIR/http.out" 2>&1 &
    SELFTEST_PIDS+=("$!")
    ip netns exec "$NAME" "$clients/bin/python" "$HERE/standin_conductor.py" \
        --bind "$HOST_IP" --port "$SELFTEST_API_PORT" --mac "$mac" \
        --image "$DIR/images/instance.qcow2" --hostname "$SELFTEST_HOSTNAME" \
        --log "$DIR/api.log" --inspection "$DIR/inspection.json" >"$DIR/conductor.out" 2>&1 &
    SELFTEST_PIDS+=("$!")
    step "HTTP servers on $HOST_IP:$SELFTEST_HTTP_PORT and :$SELFTEST_API_PORT" \
        wait_for 30 "HTTP servers" http_servers_up

    step "IPMI: chassis bootdev pxe" \
        expect_output "Set Boot Device to pxe" "${bmc[@]}" chassis bootdev pxe
    local on
    on="$(clock)"
    step "IPMI: chassis power on" \
        expect_output "Chassis Power Control: Up/On" "${bmc[@]}" chassis power on
    step "IPMI: chassis power status is on" \
        expect_output "Chassis Power is on" "${bmc[@]}" chassis power status
    echo "  times since power on:"
    milestone "$on" 300 "DHCP lease for $mac" grep -qi "DHCPACK.* $mac" "$DIR/dnsmasq.log"
    milestone "$on" 300 "iPXE fetched boot.ipxe" grep -q " GET /boot.ipxe" "$DIR/http.log"
    milestone "$on" 300 "iPXE fetched the node's config" \
        grep -q " GET /pxelinux.cfg/${mac//:/-}" "$DIR/http.log"
    milestone "$on" 300 "iPXE fetched the ramdisk" \
        grep -q " GET /$SELFTEST_NODE/deploy_ramdisk" "$DIR/http.log"
    milestone "$on" 300 "the ramdisk's /init runs" \
        grep -q "ferrum-lab-ramdisk: init at" "$vmdir/serial.log"
    milestone "$on" 300 "the ramdisk's DHCP lease" \
        grep -q "ferrum-lab-ramdisk: lease" "$vmdir/serial.log"
    milestone "$on" 300 "9p mounted, agent starting" \
        grep -q "ferrum-lab-ramdisk: root ready" "$vmdir/serial.log"
    milestone "$on" 300 "the ramdisk read its BMC's address (KCS)" \
        grep -q "ferrum-lab-ramdisk: bmc address $bmc_ip " "$vmdir/serial.log"
    milestone "$on" 600 "the agent's first request" test -s "$DIR/api.log"
    milestone "$on" 600 "the agent's inspection data" \
        grep -q " POST /v1/continue_inspection" "$DIR/api.log"
    step "the inventory's bmc_address is $bmc_ip" \
        expect_output "bmc_address=$bmc_ip;" "$PYTHON" -c '
import json, sys
print("bmc_address=%s;" % json.load(open(sys.argv[1]))["inventory"].get("bmc_address"))' \
        "$DIR/inspection.json"
    milestone "$on" 600 "the agent's lookup (GET /v1/lookup)" \
        grep -q " GET /v1/lookup?addresses=.*${mac//:/%3A}" "$DIR/api.log"
    milestone "$on" 600 "the agent's first heartbeat" \
        grep -q " POST /v1/heartbeat/" "$DIR/api.log"
    milestone "$on" 900 "the agent wrote the image and config drive" \
        grep -q "^ok   write_image" "$DIR/conductor.out"
    milestone "$on" 300 "the agent powered the VM off" \
        expect_output "Chassis Power is off" "${bmc[@]}" chassis power status
    sed 's/^/       conductor: /' "$DIR/conductor.out"
    step "IPMI: chassis bootdev disk" \
        expect_output "Set Boot Device to disk" "${bmc[@]}" chassis bootdev disk
    on="$(clock)"
    step "IPMI: chassis power on" \
        expect_output "Chassis Power Control: Up/On" "${bmc[@]}" chassis power on
    echo "  times since power on:"
    milestone "$on" 300 "the instance image booted from the disk" \
        grep -q "FERRUM-LAB-INSTANCE-BOOTED" "$vmdir/serial.log"
    milestone "$on" 300 "it read its host name from the config drive" \
        grep -q "FERRUM-LAB-INSTANCE-HOSTNAME=$SELFTEST_HOSTNAME" "$vmdir/serial.log"
    echo "  $(grep -a -o "FERRUM-LAB-INSTANCE-CONFIG-DRIVE=[^[:space:]]*" "$vmdir/serial.log" | tail -n 1)"

    local soft
    soft="$(clock)"
    step "IPMI: chassis power soft" \
        expect_output "Chassis Power Control: Soft" "${bmc[@]}" chassis power soft
    milestone "$soft" 120 "the VM powered itself off (ACPI button)" \
        expect_output "Chassis Power is off" "${bmc[@]}" chassis power status
    step "IPMI: chassis power off (already off)" \
        expect_output "Chassis Power Control: Down/Off" "${bmc[@]}" chassis power off
    step "IPMI: chassis power status is off, QEMU gone" \
        expect_output "Chassis Power is off" "${bmc[@]}" chassis power status
    SELFTEST_OK=1
    echo "lab selftest: PASS in $(since "$t0") s"
}

# The files Ironic's dnsmasq provider and ipxe boot interface write for a node being deployed
# (ironic/dhcp/dnsmasq.py, ironic/common/pxe_utils.py, boot.ipxe, ipxe_config.template).
write_conductor_files() { # MAC
    local mac="$1" tag=9c1f4b7e-ironic-node-tag
    echo "$mac,set:$tag,set:ironic" >"$DIR/dhcp-hosts/ironic-$mac.conf"
    cat >"$DIR/dhcp-opts/ironic-$SELFTEST_NODE.conf" <<EOF
tag:$tag,tag:!ipxe,67,snponly.efi
tag:$tag,tag:ipxe,67,http://$HOST_IP:$SELFTEST_HTTP_PORT/boot.ipxe
tag:$tag,66,$HOST_IP
tag:$tag,150,$HOST_IP
tag:$tag,255,$HOST_IP
EOF
    mkdir -p "$DIR/http/pxelinux.cfg" "$DIR/http/$SELFTEST_NODE"
    cat >"$DIR/http/boot.ipxe" <<'EOF'
#!ipxe
# As Ironic's boot.ipxe: the first NIC whose MAC has a config boots it.
set netid:int32 -1
:loop
inc netid || chain pxelinux.cfg/${mac:hexhyp} || goto old_rom
isset ${net${netid}/mac} || goto loop_done
echo Attempting to boot from MAC ${net${netid}/mac:hexhyp}
chain pxelinux.cfg/${net${netid}/mac:hexhyp} || goto loop
exit 0
:loop_done
echo PXE boot failed! No configuration found for any of the present NICs.
poweroff
:old_rom
echo PXE boot failed! No configuration found for NIC ${mac:hexhyp}.
poweroff
EOF
    local base="http://$HOST_IP:$SELFTEST_HTTP_PORT/$SELFTEST_NODE"
    cat >"$DIR/http/pxelinux.cfg/${mac//:/-}" <<EOF
#!ipxe
set attempts:int32 10
set i:int32 0
goto deploy
:deploy
imgfree
kernel $base/deploy_kernel selinux=0 troubleshoot=0 text nofb nomodeset console=ttyS0 ipa-api-url=http://$HOST_IP:$SELFTEST_API_PORT ipa-inspection-callback-url=http://$HOST_IP:$SELFTEST_API_PORT/v1/continue_inspection ipa-inspection-collectors=default ipa-debug=1 BOOTIF=\${mac} initrd=deploy_ramdisk || goto retry
initrd $base/deploy_ramdisk || goto retry
boot
:retry
iseq \${i} \${attempts} && goto fail ||
inc i
sleep \${i}
goto deploy
:fail
poweroff
EOF
    cp "$DIR/ramdisk/vmlinuz" "$DIR/http/$SELFTEST_NODE/deploy_kernel"
    cp "$DIR/ramdisk/initramfs" "$DIR/http/$SELFTEST_NODE/deploy_ramdisk"
}

http_servers_up() {
    ip netns exec "$NAME" "$PYTHON" -c '
import socket, sys
for port in sys.argv[2:]:
    socket.create_connection((sys.argv[1], int(port)), timeout=1).close()' \
        "$HOST_IP" "$SELFTEST_HTTP_PORT" "$SELFTEST_API_PORT" 2>/dev/null
}

# Runs COMMAND; prints "ok"/"FAIL", the step and its time; a failure ends the selftest.
step() { # WHAT COMMAND...
    local what="$1" t out
    shift
    t="$(clock)"
    if out="$("$@" 2>&1)"; then
        printf '  ok   %-48s %6s s\n' "$what" "$(since "$t")"
    else
        printf '  FAIL %-48s %6s s\n' "$what" "$(since "$t")"
        echo "$out" | tail -n 20 | sed 's/^/       /'
        exit 1
    fi
}

# Runs COMMAND and fails unless a line of its output matches the extended regex PATTERN.
expect_output_line() { # PATTERN COMMAND...
    local pattern="$1" out
    shift
    out="$("$@" 2>&1)" || { echo "$out"; return 1; }
    echo "$out"
    grep -Eq -- "$pattern" <<<"$out"
}

# Runs COMMAND and fails unless its output holds TEXT (ipmitool exits 0 on some refusals).
expect_output() { # TEXT COMMAND...
    local text="$1" out
    shift
    out="$("$@" 2>&1)" || { echo "$out"; return 1; }
    echo "$out"
    [[ "$out" == *"$text"* ]]
}

wait_for() { # SECONDS WHAT COMMAND...
    local deadline what="$2"
    deadline=$(( $(date +%s) + $1 ))
    shift 2
    until "$@" 2>/dev/null; do
        [ "$(date +%s)" -lt "$deadline" ] || { echo "timed out waiting for $what"; return 1; }
        sleep 0.2
    done
}

# Waits for COMMAND to succeed; prints the time since START (power on).
milestone() { # START SECONDS WHAT COMMAND...
    local start="$1" seconds="$2" what="$3"
    shift 3
    if wait_for "$seconds" "$what" "$@" >/dev/null; then
        printf '  ok   %-48s %6s s\n' "$what" "$(since "$start")"
    else
        printf '  FAIL %-48s (not within %s s)\n' "$what" "$seconds"
        echo "       the serial console's last lines:"
        tail -n 15 "$DIR/vms/vm1/serial.log" 2>/dev/null | cut -c1-200 | sed 's/^/       /'
        if [ -s "$DIR/conductor.out" ]; then
            echo "       the stand-in conductor's output:"
            sed 's/^/       /' "$DIR/conductor.out"
        fi
        exit 1
    fi
}

selftest_cleanup() {
    local status=$? pid
    trap '' INT TERM
    [ "$SELFTEST_OK" = 1 ] || echo "lab selftest: FAIL (exit $status); taking the lab down" >&3
    for pid in "${SELFTEST_PIDS[@]+"${SELFTEST_PIDS[@]}"}"; do
        kill "$pid" 2>/dev/null || true
    done
    if [ "$SELFTEST_KEEP" = 1 ]; then
        cmd_down --name "$NAME" --dir "$DIR" 2>/dev/null || true
        say "kept $DIR"
    else
        cmd_down --name "$NAME" --dir "$DIR" --rm 2>/dev/null || true
        rm -rf "$DIR"
    fi
}
