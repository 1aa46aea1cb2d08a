"""Drives Ferrum with the real OpenStack clients: the `baremetal` CLI (python-ironicclient) and
openstacksdk's baremetal proxy, with no auth. Each step asserts states and fields; the first
failure raises with the step's name. Run by tests/it/clients.rs against a fresh all-in-one, one
test per group of suites (each on its own all-in-one), so that the groups run in parallel.

    python compat.py http://127.0.0.1:6385 [SUITE ...]    (all suites when none is named)

The `baremetal` command runs in this process: the console script's own `main` (what
`bin/baremetal` calls) with its argv, its output and error streams and its exit status, once per
command. A new Python process per command cost ~0.8 s of CPU in imports alone, over 300 commands.
"""

import contextlib
import io
import json
import logging
import sys
import time

from ironicclient import shell as baremetal_shell

ENDPOINT = sys.argv[1]
CLI = ["--os-auth-type", "none", "--os-endpoint", ENDPOINT]


def baremetal(argv):
    """Runs `baremetal <argv>` as its console script does, in this process: returns its exit
    status, stdout and stderr. cliff and openstacksdk add logging handlers on the streams of
    each run; they are taken off again so that one run's handlers never see the next run's
    messages."""
    out, err = io.StringIO(), io.StringIO()
    loggers = [logging.getLogger(name) for name in ("", "openstack", "keystoneauth", "ironicclient")]
    saved = [(lg, list(lg.handlers), lg.level, lg.propagate) for lg in loggers]
    saved_argv = sys.argv
    # The CLI reads sys.argv itself (openstacksdk's cloud options), as in its own process.
    sys.argv = ["baremetal", *argv]
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                status = baremetal_shell.main(argv)
            except SystemExit as e:  # argparse's usage errors
                status = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    finally:
        sys.argv = saved_argv
        for lg, handlers, level, propagate in saved:
            lg.handlers[:] = handlers
            lg.setLevel(level)
            lg.propagate = propagate
    return status, out.getvalue(), err.getvalue()


# A command refused with 409 Conflict by design (a duplicate, a state that forbids it) is tried
# once: ironicclient retries every 409 five times, 2 s apart, and gets the same answer.
ONCE = ("--max-retries", "0")

# `--wait` polls every 10 s after an undeploy, clean or service (2 s after the others), so a
# node that was not there at the first poll costs 10 s: the tests use it once for each of those
# verbs, and elsewhere poll with wait_for, every 0.1 s.


def cli(*args, ok=True):
    """Runs `baremetal <args>`; returns parsed JSON output when `-f json` is among the args."""
    status, stdout, stderr = baremetal(CLI + list(args))
    step = "baremetal " + " ".join(args)
    if ok and status != 0:
        raise AssertionError(f"{step} failed ({status}): {stderr.strip()}")
    if not ok:
        if status == 0:
            raise AssertionError(f"{step} should have failed: {stdout.strip()}")
        return stderr
    print(f"ok: {step}", flush=True)
    if "json" in args:
        return json.loads(stdout)
    return stdout


def show(node):
    return cli("node", "show", node, "-f", "json")


def wait_for(node, state, timeout=30):
    deadline = time.time() + timeout
    while True:
        n = show(node)
        if n["provision_state"] == state and n["reservation"] is None:
            return n
        if time.time() > deadline:
            raise AssertionError(f"{node} never reached {state}: {n['provision_state']}")
        time.sleep(0.1)


def expect(actual, wanted, what):
    if actual != wanted:
        raise AssertionError(f"{what}: expected {wanted!r}, got {actual!r}")


def cli_suite():
    # The no-* interfaces where fake-hardware's defaults are the fake ones, to see them refuse.
    n = cli("node", "create", "--driver", "fake-hardware", "--name", "cli-1",
            "--raid-interface", "no-raid", "--inspect-interface", "no-inspect",
            "--rescue-interface", "no-rescue", "--property", "cpus=8", "-f", "json")
    expect(n["provision_state"], "enroll", "new node")
    uuid = n["uuid"]

    listed = cli("node", "list", "-f", "json")
    expect([x["uuid"] for x in listed], [uuid], "node list")
    listed = cli("node", "list", "--fields", "uuid", "name", "--provision-state", "enroll", "-f", "json")
    expect(listed, [{"uuid": uuid, "name": "cli-1"}], "node list with fields and filter")
    expect(cli("node", "list", "--provision-state", "active", "-f", "json"), [], "filter excludes")
    expect(show("cli-1")["uuid"], uuid, "show by name")
    expect([x["uuid"] for x in cli("node", "list", "--sort", "name:desc", "--limit", "1", "-f", "json")],
           [uuid], "node list sorted by name")

    cli("node", "set", "cli-1", "--property", "ram=1024", "--extra", "rack=r1",
        "--instance-info", "image_source=http://images.example/img.qcow2")
    n = show("cli-1")
    expect(n["properties"], {"cpus": 8, "ram": 1024}, "properties set")
    expect(n["extra"], {"rack": "r1"}, "extra set")
    expect(n["instance_info"]["image_source"], "http://images.example/img.qcow2", "instance_info set")
    cli("node", "unset", "cli-1", "--property", "ram", "--extra", "rack")
    n = show("cli-1")
    expect(n["properties"], {"cpus": 8}, "properties unset")
    expect(n["extra"], {}, "extra unset")

    raid = {"logical_disks": [{"size_gb": 100, "raid_level": "1", "is_root_volume": True}]}
    err = cli("node", "set", "cli-1", "--target-raid-config", json.dumps(raid), ok=False)
    expect("does not support raid" in err, True, f"no-raid refuses a RAID config: {err}")
    cli("node", "set", "cli-1", "--raid-interface", "fake")
    cli("node", "set", "cli-1", "--target-raid-config", json.dumps(raid))
    expect(show("cli-1")["target_raid_config"], raid, "target RAID config set")
    err = cli("node", "set", "cli-1", "--target-raid-config",
              '{"logical_disks": [{"size_gb": 100}]}', ok=False)
    expect("raid_level" in err, True, f"invalid RAID config refused: {err}")
    cli("node", "unset", "cli-1", "--target-raid-config")
    expect(show("cli-1")["target_raid_config"], {}, "target RAID config unset")

    cli("node", "manage", "cli-1", "--wait", "30")
    expect(wait_for("cli-1", "manageable")["power_state"], "power off", "verified power state")
    cli("node", "provide", "cli-1", "--wait", "30")
    wait_for("cli-1", "available")
    cli("node", "set", "cli-1", "--owner", "team-a", "--description", "rack 4")
    n = show("cli-1")
    expect((n["owner"], n["description"]), ("team-a", "rack 4"), "owner and description set")
    expect([x["uuid"] for x in cli("node", "list", "--owner", "team-a", "-f", "json")], [uuid],
           "node list --owner")
    cli("node", "unset", "cli-1", "--owner", "--description")
    n = show("cli-1")
    expect((n["owner"], n["description"]), (None, None), "owner and description unset")

    cli("node", "deploy", "cli-1", "--wait", "30")
    n = wait_for("cli-1", "active")
    expect(n["power_state"], "power on", "deployed node powered on")
    expect(n["target_provision_state"], None, "no target once active")

    cli("node", "power", "off", "cli-1")
    expect(show("cli-1")["power_state"], "power off", "power off")
    cli("node", "power", "on", "cli-1")
    expect(show("cli-1")["power_state"], "power on", "power on")
    cli("node", "reboot", "cli-1")
    expect(show("cli-1")["power_state"], "power on", "reboot")

    cli("node", "maintenance", "set", "cli-1", "--reason", "swap a disk")
    n = show("cli-1")
    expect((n["maintenance"], n["maintenance_reason"]), (True, "swap a disk"), "maintenance set")
    cli("node", "maintenance", "unset", "cli-1")
    n = show("cli-1")
    expect((n["maintenance"], n["maintenance_reason"]), (False, None), "maintenance unset")

    results = {r["Interface"]: r["Result"] for r in cli("node", "validate", "cli-1", "-f", "json")}
    expect((results["power"], results["deploy"], results["management"]), (True, True, True), "validate")

    cli("node", "rebuild", "cli-1", "--wait", "30")
    wait_for("cli-1", "active")
    cli("node", "undeploy", "cli-1", "--wait", "30")
    n = wait_for("cli-1", "available")
    expect(n["instance_info"], {}, "instance_info cleared by undeploy")

    drivers = cli("driver", "list", "-f", "json")
    expect([d["name"] for d in drivers], ["fake-hardware", "ipmi", "redfish"], "driver list")
    d = cli("driver", "show", "fake-hardware", "-f", "json")
    expect(d["name"], "fake-hardware", "driver show")
    expect(len(d["hosts"]) >= 1, True, "driver has hosts")
    # The CLI shows a list as its items joined by ", ".
    expect((d["default_deploy_interface"], d["enabled_deploy_interfaces"]),
           ("fake", "fake, direct"), "driver show: deploy interfaces")
    expect((d["default_raid_interface"], d["default_bios_interface"]), ("fake", "fake"),
           "driver show: raid and bios interfaces")
    drivers = cli("driver", "list", "--long", "-f", "json")
    expect([(x["name"], x["type"], x["default_inspect_interface"]) for x in drivers],
           [("fake-hardware", "dynamic", "fake"), ("ipmi", "dynamic", "no-inspect"),
            ("redfish", "dynamic", "no-inspect")],
           "driver list --long")
    expect(drivers[0]["enabled_rescue_interfaces"], "fake, no-rescue",
           "driver list --long: rescue interfaces")
    d = cli("driver", "show", "redfish", "-f", "json")
    expect((d["default_power_interface"], d["default_management_interface"],
            d["enabled_boot_interfaces"]),
           ("redfish", "redfish", "ipxe, pxe, redfish-virtual-media"), "driver show redfish")
    rf = cli("node", "create", "--driver", "redfish", "--name", "rf-cli",
             "--driver-info", "redfish_address=http://127.0.0.1:9",
             "--driver-info", "redfish_password=not-shown", "-f", "json")
    expect(rf["driver_info"]["redfish_password"], "******", "redfish password masked")
    cli("node", "delete", "rf-cli")
    props = cli("driver", "property", "list", "fake-hardware", "-f", "json")
    expect([p["property"] for p in props], ["fake_deploy_block", "fake_deploy_delay", "fake_deploy_panic"],
           "driver property list")
    props = {p["property"]: p["description"]
             for p in cli("driver", "raid", "property", "list", "fake-hardware", "-f", "json")}
    expect(("raid_level" in props, "size_gb" in props, len(props)), (True, True, 10),
           "driver raid property list")

    conductors = cli("conductor", "list", "-f", "json")
    expect(len(conductors), 1, "conductor list")
    expect((conductors[0]["conductor_group"], conductors[0]["alive"]), ("", True), "conductor list")
    host = conductors[0]["hostname"]
    c = cli("conductor", "show", host, "-f", "json")
    expect((c["hostname"], c["drivers"], c["alive"]), (host, ["fake-hardware", "ipmi", "redfish"], True),
           "conductor show")
    expect(show("cli-1")["conductor"], host, "node conductor field")
    expect([x["uuid"] for x in cli("node", "list", "--conductor", host, "-f", "json")], [uuid],
           "node list --conductor")
    expect(len(cli("conductor", "list", "--long", "-f", "json")), 1, "conductor list --long")
    n = cli("node", "show", "cli-1", "--fields", "uuid", "name", "-f", "json")
    expect(sorted(n), ["name", "uuid"], "node show --fields")
    err = cli("conductor", "show", "no-such-host", ok=False)
    expect("could not be found" in err, True, f"unknown conductor: {err}")

    cli("node", "add", "trait", "cli-1", "CUSTOM_GPU", "HW_CPU_X86_VMX")
    expect(sorted(t["traits"] for t in cli("node", "trait", "list", "cli-1", "-f", "json")),
           ["CUSTOM_GPU", "HW_CPU_X86_VMX"], "trait list")
    expect(show("cli-1")["traits"], ["CUSTOM_GPU", "HW_CPU_X86_VMX"], "traits field")
    cli("node", "remove", "trait", "cli-1", "CUSTOM_GPU")
    expect(show("cli-1")["traits"], ["HW_CPU_X86_VMX"], "trait removed")
    cli("node", "remove", "trait", "cli-1", "--all")
    expect(show("cli-1")["traits"], [], "all traits removed")

    cli("node", "deploy", "cli-1", "--wait", "30")
    wait_for("cli-1", "active")
    cli("node", "set", "cli-1", "--protected", "--protected-reason", "production")
    n = show("cli-1")
    expect((n["protected"], n["protected_reason"]), (True, "production"), "protected set")
    err = cli("node", "undeploy", "cli-1", ok=False)
    expect("is protected" in err, True, f"protected node not undeployed: {err}")
    cli("node", "unset", "cli-1", "--protected")
    n = show("cli-1")
    expect((n["protected"], n["protected_reason"]), (False, None), "protected unset")
    cli(*ONCE, "node", "set", "cli-1", "--rescue-interface", "fake", ok=False)  # not while active
    cli("node", "maintenance", "set", "cli-1")
    cli("node", "set", "cli-1", "--rescue-interface", "fake")
    cli("node", "maintenance", "unset", "cli-1")
    cli("node", "rescue", "cli-1", "--rescue-password", "s3cret", "--wait", "30")
    n = wait_for("cli-1", "rescue")
    expect(n["instance_info"].get("rescue_password"), "******", "rescue password masked")
    cli("node", "unrescue", "cli-1", "--wait", "30")
    wait_for("cli-1", "active")
    expect(cli("node", "bios", "setting", "list", "cli-1", "-f", "json"), [], "no BIOS settings")
    cli("node", "undeploy", "cli-1")
    wait_for("cli-1", "available")

    cli("node", "manage", "cli-1", "--wait", "30")
    wait_for("cli-1", "manageable")
    err = cli("node", "inspect", "cli-1", ok=False)
    expect("does not support inspect" in err, True, f"no-inspect refuses: {err}")
    cli("node", "set", "cli-1", "--inspect-interface", "fake")
    cli("node", "inspect", "cli-1", "--wait", "30")
    wait_for("cli-1", "manageable")
    cli("node", "clean", "cli-1", "--wait", "30", "--clean-steps",
        '[{"interface": "deploy", "step": "erase_devices_metadata"}]')
    wait_for("cli-1", "manageable")
    cli("node", "adopt", "cli-1", "--wait", "30")
    wait_for("cli-1", "active")
    cli("node", "undeploy", "cli-1")
    wait_for("cli-1", "available")

    cli("node", "delete", "cli-1")
    err = cli("node", "show", "cli-1", ok=False)
    expect("could not be found" in err, True, "deleted node is gone")

    cli("node", "create", "--driver", "fake-hardware", "--name", "cli-console",
        "--console-interface", "fake", "--network-interface", "flat")
    expect(show("cli-console")["network_interface"], "flat", "network interface at create")
    cli("node", "console", "enable", "cli-console")
    expect(cli("node", "console", "show", "cli-console", "-f", "json")["console_enabled"], True,
           "console enabled")
    cli("node", "console", "disable", "cli-console")
    expect(cli("node", "console", "show", "cli-console", "-f", "json")["console_enabled"], False,
           "console disabled")
    cli("node", "delete", "cli-console")
    err = cli("node", "show", "cli-console", ok=False)
    expect("could not be found" in err, True, "deleted node is gone")


def management_suite():
    """The boot device, NMIs and vendor passthru as a CLI user drives them."""
    cli("node", "create", "--driver", "fake-hardware", "--name", "mgmt-1",
        "--vendor-interface", "fake")
    expect(cli("node", "boot", "device", "show", "mgmt-1", "-f", "json"),
           {"boot_device": "pxe", "persistent": False}, "boot device before any set")
    expect(cli("node", "boot", "device", "show", "mgmt-1", "--supported", "-f", "json"),
           {"supported_boot_devices": "pxe, disk, cdrom, bios, safe"},
           "supported boot devices")
    cli("node", "boot", "device", "set", "mgmt-1", "disk", "--persistent")
    expect(cli("node", "boot", "device", "show", "mgmt-1", "-f", "json"),
           {"boot_device": "disk", "persistent": True}, "boot device read back")
    # The CLI offers wanboot; the fake machine cannot boot from it.
    err = cli("node", "boot", "device", "set", "mgmt-1", "wanboot", ok=False)
    expect("Invalid boot device wanboot specified." in err, True, f"bad boot device: {err}")
    cli("node", "inject", "nmi", "mgmt-1")
    expect(show("mgmt-1")["reservation"], None, "no lock left by management")

    methods = cli("node", "passthru", "list", "mgmt-1", "-f", "json")
    expect(sorted(m["Name"] for m in methods),
           ["fourth_method_shared_lock", "log_passthrough", "second_method", "third_method_sync"],
           "vendor methods")
    # A synchronous method's bare `true` is more than the CLI can print (it reads every answer
    # as a node); openstacksdk reads it below.
    out = cli("node", "passthru", "call", "mgmt-1", "second_method", "--arg", "bar=kazoo")
    expect(out, "", "an asynchronous vendor method answers nothing")
    wait_for("mgmt-1", "enroll")
    err = cli("node", "passthru", "call", "mgmt-1", "third_method_sync", ok=False)
    expect("Parameter 'bar' not passed to method 'third_method_sync'." in err, True,
           f"missing vendor argument: {err}")
    err = cli("node", "passthru", "call", "mgmt-1", "third_method_sync", "--arg", "bar=meow",
              "--http-method", "GET", ok=False)
    expect("does not support HTTP GET" in err, True, f"wrong HTTP method: {err}")
    expect(cli("driver", "passthru", "list", "fake-hardware", "-f", "json"), [],
           "driver vendor methods")
    err = cli("driver", "passthru", "call", "fake-hardware", "anything", ok=False)
    expect("No handler for method anything" in err, True, f"driver passthru: {err}")
    cli("node", "delete", "mgmt-1")


def failure_suite():
    """Ironic bug 1405420, entirely through the CLI: a deploy that fails in the driver leaves
    the node in `deploy failed`, unlocked, with last_error, and every follow-up works."""
    # --no-automated-clean: a direct node's cleaning would boot the ramdisk and wait for an agent.
    cli("node", "create", "--driver", "fake-hardware", "--name", "bad-1",
        "--deploy-interface", "direct", "--no-automated-clean")
    cli("node", "set", "bad-1", "--instance-info", "image_source=file:///home/user/aaa")
    cli("node", "manage", "bad-1", "--wait", "30")
    cli("node", "provide", "bad-1", "--wait", "30")
    cli("node", "deploy", "bad-1")
    n = wait_for("bad-1", "deploy failed")
    expect(n["target_provision_state"], "active", "failure keeps its target")
    expect(n["last_error"].startswith(
        "Failed to prepare to deploy: Image file:///home/user/aaa is unacceptable: "), True,
        f"last_error {n['last_error']!r}")
    cli("node", "set", "bad-1", "--extra", "ticket=OPS-1")
    expect(show("bad-1")["extra"], {"ticket": "OPS-1"}, "PATCH in deploy failed")
    err = cli("node", "provide", "bad-1", ok=False)
    expect("deploy failed" in err and "provide" in err, True, f"provide refused: {err}")
    cli("node", "deploy", "bad-1")
    wait_for("bad-1", "deploy failed")
    cli("node", "rebuild", "bad-1")
    wait_for("bad-1", "deploy failed")
    cli("node", "undeploy", "bad-1")
    n = wait_for("bad-1", "available")
    expect(n["last_error"], None, "undeploy clears last_error")
    cli("node", "delete", "bad-1")


def network_suite():
    """Chassis, ports, portgroups and VIFs through the CLI, as Bifrost and Nova use them."""
    ch = cli("chassis", "create", "--description", "rack 7", "-f", "json")
    cli("node", "create", "--driver", "fake-hardware", "--name", "net-1",
        "--chassis-uuid", ch["uuid"])
    node = show("net-1")
    expect(node["chassis_uuid"], ch["uuid"], "node in chassis")
    listed = cli("node", "list", "--chassis", ch["uuid"], "--fields", "name", "-f", "json")
    expect(listed, [{"name": "net-1"}], "node list --chassis")
    cli("chassis", "set", ch["uuid"], "--description", "rack 8")
    expect(cli("chassis", "show", ch["uuid"], "-f", "json")["description"], "rack 8", "chassis set")

    # As in Ironic, a port or portgroup names its node by UUID.
    pg = cli("port", "group", "create", "--node", node["uuid"], "--name", "bond0",
             "--address", "52:54:00:12:34:10", "-f", "json")
    expect(pg["mode"], "active-backup", "portgroup default mode")
    p = cli("port", "create", "52:54:00:12:34:56", "--node", node["uuid"],
            "--local-link-connection", "switch_id=aa:bb:cc:dd:ee:ff",
            "--local-link-connection", "port_id=Eth1/7", "--physical-network", "physnet1",
            "-f", "json")
    expect(p["address"], "52:54:00:12:34:56", "port create")
    cli("port", "create", "52:54:00:12:34:57", "--node", node["uuid"], "--port-group", pg["uuid"])
    listed = cli("port", "list", "--address", "52:54:00:12:34:56", "--fields", "uuid", "-f", "json")
    expect(listed, [{"uuid": p["uuid"]}], "port list --address")
    listed = cli("port", "list", "--node", "net-1", "-f", "json")
    expect(len(listed), 2, "port list --node")
    listed = cli("port", "list", "--port-group", "bond0", "--fields", "address", "-f", "json")
    expect(listed, [{"address": "52:54:00:12:34:57"}], "port list --port-group")
    cli("port", "set", p["uuid"], "--extra", "nic=eth0", "--pxe-disabled")
    shown = cli("port", "show", p["uuid"], "-f", "json")
    expect((shown["extra"], shown["pxe_enabled"]), ({"nic": "eth0"}, False), "port set")
    err = cli(*ONCE, "port", "create", "52:54:00:12:34:56", "--node", node["uuid"], ok=False)
    expect("already exists" in err, True, f"duplicate MAC refused: {err}")

    cli("node", "vif", "attach", "net-1", "vif-a")
    cli("node", "vif", "attach", "net-1", "vif-b")
    vifs = sorted(next(iter(v.values())) for v in cli("node", "vif", "list", "net-1", "-f", "json"))
    expect(vifs, ["vif-a", "vif-b"], "vif list")
    cli("node", "vif", "detach", "net-1", "vif-a")
    cli("node", "vif", "detach", "net-1", "vif-b")
    expect(cli("node", "vif", "list", "net-1", "-f", "json"), [], "vifs detached")

    cli("port", "delete", p["uuid"])
    cli("node", "delete", "net-1")
    expect(cli("port", "list", "-f", "json"), [], "ports go with their node")
    expect(cli("port", "group", "list", "-f", "json"), [], "portgroups go with their node")
    cli("chassis", "delete", ch["uuid"])


def volume_suite():
    """Volume connectors and targets through the CLI: created, listed, shown, set while the
    node is powered off (Ironic's rule), deleted, and gone with their node."""
    node = cli("node", "create", "--driver", "fake-hardware", "--name", "vol-1", "-f", "json")
    c = cli("volume", "connector", "create", "--node", node["uuid"], "--type", "iqn",
            "--connector-id", "iqn.2017-05.org.example:vol-1", "-f", "json")
    expect((c["type"], c["node_uuid"]), ("iqn", node["uuid"]), "volume connector create")
    err = cli(*ONCE, "volume", "connector", "create", "--node", node["uuid"], "--type", "iqn",
              "--connector-id", "iqn.2017-05.org.example:vol-1", ok=False)
    expect("already exists" in err, True, f"duplicate connector refused: {err}")
    t = cli("volume", "target", "create", "--node", node["uuid"], "--type", "iscsi",
            "--boot-index", "0", "--volume-id", "vol-0001", "--property", "target_lun=0",
            "-f", "json")
    expect((t["boot_index"], t["properties"]), (0, {"target_lun": 0}), "volume target create")
    listed = cli("volume", "connector", "list", "--node", "vol-1", "-f", "json")
    expect([x["uuid"] for x in listed], [c["uuid"]], "volume connector list --node")
    listed = cli("volume", "target", "list", "--long", "-f", "json")
    expect([x["volume_id"] for x in listed], ["vol-0001"], "volume target list --long")
    shown = cli("volume", "connector", "show", c["uuid"], "-f", "json")
    expect(shown["connector_id"], "iqn.2017-05.org.example:vol-1", "volume connector show")
    err = cli("volume", "connector", "set", c["uuid"], "--extra", "a=b", ok=False)
    expect("volume connector update" in err, True, f"set refused unless powered off: {err}")
    cli("node", "power", "off", "vol-1")
    deadline = time.time() + 30
    while show("vol-1")["power_state"] != "power off" or show("vol-1")["reservation"]:
        if time.time() > deadline:
            raise AssertionError("vol-1 never powered off")
        time.sleep(0.1)
    cli("volume", "connector", "set", c["uuid"], "--extra", "a=b")
    expect(cli("volume", "connector", "show", c["uuid"], "-f", "json")["extra"], {"a": "b"},
           "volume connector set")
    cli("volume", "target", "set", t["uuid"], "--boot-index", "3", "--volume-id", "vol-0002")
    shown = cli("volume", "target", "show", t["uuid"], "-f", "json")
    expect((shown["boot_index"], shown["volume_id"]), (3, "vol-0002"), "volume target set")
    cli("volume", "connector", "delete", c["uuid"])
    expect(cli("volume", "connector", "list", "-f", "json"), [], "volume connector delete")
    cli("node", "delete", "vol-1")
    expect(cli("volume", "target", "list", "-f", "json"), [], "targets go with their node")


def lifecycle_suite():
    """The node fields of 1.61-1.66 through the CLI: retired (a retired node is not provided and
    cleans to manageable), lessee and network_data, and their list filters."""
    cli("node", "create", "--driver", "fake-hardware", "--name", "life-1")
    cli("node", "manage", "life-1", "--wait", "30")
    network_data = {"links": [{"id": "eth0", "type": "phy",
                               "ethernet_mac_address": "52:54:00:12:34:99"}],
                    "networks": [{"id": "n0", "type": "ipv4_dhcp", "link": "eth0",
                                  "network_id": "n0"}],
                    "services": []}
    cli("node", "set", "life-1", "--retired", "--retired-reason", "old", "--lessee", "tenant-x",
        "--network-data", json.dumps(network_data))
    n = show("life-1")
    expect((n["retired"], n["retired_reason"], n["lessee"], n["network_data"]),
           (True, "old", "tenant-x", network_data), "node set --retired --lessee --network-data")
    err = cli("node", "provide", "life-1", ok=False)
    expect("because it is retired" in err, True, f"a retired node is not provided: {err}")
    listed = cli("node", "list", "--retired", "--fields", "name", "-f", "json")
    expect(listed, [{"name": "life-1"}], "node list --retired")
    listed = cli("node", "list", "--lessee", "tenant-x", "--fields", "name", "-f", "json")
    expect(listed, [{"name": "life-1"}], "node list --lessee")
    err = cli("node", "set", "life-1", "--network-data", '{"links": []}', ok=False)
    expect("Invalid network_data" in err, True, f"bad network_data refused: {err}")
    cli("node", "unset", "life-1", "--retired", "--lessee", "--network-data")
    n = show("life-1")
    expect((n["retired"], n["retired_reason"], n["lessee"], n["network_data"]),
           (False, None, None, {}), "node unset")
    cli("node", "provide", "life-1", "--wait", "30")
    cli("node", "delete", "life-1")


def allocation_suite():
    """Allocations through the CLI and the SDK, as Metal3 and Nova's standalone users make them:
    a node of the class with the trait is reserved, the allocation shown, listed and deleted."""
    for name, trait in (("alloc-1", "CUSTOM_GPU"), ("alloc-2", "CUSTOM_CPU")):
        cli("node", "create", "--driver", "fake-hardware", "--name", name,
            "--resource-class", "baremetal-gold")
        cli("node", "add", "trait", name, trait)
        cli("node", "manage", name, "--wait", "30")
        cli("node", "provide", name, "--wait", "30")
    a = cli("allocation", "create", "--resource-class", "baremetal-gold", "--trait", "CUSTOM_GPU",
            "--name", "alloc-a", "--wait", "30", "-f", "json")
    node = show("alloc-1")
    expect((a["state"], a["node_uuid"]), ("active", node["uuid"]), "allocation create --wait")
    expect((node["allocation_uuid"], node["instance_uuid"]), (a["uuid"], a["uuid"]),
           "the node is reserved for the allocation")
    listed = cli("allocation", "list", "--node", "alloc-1", "--fields", "uuid", "-f", "json")
    expect(listed, [{"uuid": a["uuid"]}], "allocation list --node")
    cli("allocation", "set", "alloc-a", "--extra", "for=ci")
    expect(cli("allocation", "show", "alloc-a", "-f", "json")["extra"], {"for": "ci"},
           "allocation set")
    err = cli("allocation", "create", "--resource-class", "baremetal-gold", "--trait",
              "CUSTOM_GPU", "--wait", "30", ok=False)
    expect("no suitable nodes have the requested traits" in err or "no available nodes" in err,
           True, f"nothing left to allocate: {err}")
    cli("allocation", "delete", "alloc-a")
    expect(show("alloc-1")["instance_uuid"], None, "allocation delete frees the node")

    import openstack
    conn = openstack.connection.Connection(
        auth_type="none", baremetal_endpoint_override=ENDPOINT + "/", baremetal_api_version="1")
    bm = conn.baremetal
    a = bm.create_allocation(resource_class="baremetal-gold", traits=["CUSTOM_CPU"])
    # Answered before the conductor allocates, as Ironic's create_allocation is.
    expect((a.state, a.node_id), ("allocating", None), "sdk allocation create")
    a = bm.wait_for_allocation(a, timeout=30)
    expect((a.state, a.node_id), ("active", show("alloc-2")["uuid"]), "sdk allocation")
    bm.delete_allocation(a)
    for x in bm.allocations():
        bm.delete_allocation(x)
    cli("node", "delete", "alloc-1", "alloc-2")


def template_suite():
    """Deploy templates through the CLI: created, listed, set; a deploy whose instance names
    one applies it (here disabling the core step, so the deploy fails), and one naming a step the fake hardware
    lacks is refused."""
    steps = [{"interface": "deploy", "step": "deploy", "args": {}, "priority": 0}]
    t = cli("deploy", "template", "create", "CUSTOM_NO_IMAGE", "--steps", json.dumps(steps),
            "-f", "json")
    expect((t["name"], t["steps"]), ("CUSTOM_NO_IMAGE", steps), "deploy template create")
    bad = [{"interface": "raid", "step": "create_configuration", "args": {}, "priority": 10}]
    cli("deploy", "template", "create", "CUSTOM_RAID", "--steps", json.dumps(bad))
    listed = cli("deploy", "template", "list", "--fields", "name", "-f", "json")
    expect(sorted(x["name"] for x in listed), ["CUSTOM_NO_IMAGE", "CUSTOM_RAID"],
           "deploy template list")
    cli("deploy", "template", "set", "CUSTOM_NO_IMAGE", "--extra", "why=test")
    cli("node", "create", "--driver", "fake-hardware", "--name", "tmpl-1")
    cli("node", "manage", "tmpl-1", "--wait", "30")
    cli("node", "provide", "tmpl-1", "--wait", "30")
    cli("node", "set", "tmpl-1", "--instance-info", 'traits=["CUSTOM_RAID"]')
    err = cli("node", "deploy", "tmpl-1", ok=False)
    expect("does not support this deploy step" in err, True, f"bad template refused: {err}")
    cli("node", "set", "tmpl-1", "--instance-info", 'traits=["CUSTOM_NO_IMAGE"]')
    # Without its core step the deploy has nothing to run and fails, as in Ironic.
    err = cli("node", "deploy", "tmpl-1", "--wait", "30", ok=False)
    expect("No deploy steps returned by the driver" in err, True, f"no steps left: {err}")
    cli("node", "undeploy", "tmpl-1", "--wait", "30")
    cli("node", "delete", "tmpl-1")
    cli("deploy", "template", "delete", "CUSTOM_NO_IMAGE", "CUSTOM_RAID")


def metal3_suite():
    """What API 1.74-1.95 added, as the CLI drives it (Metal3 asks for 1.95): BIOS settings
    applied by manual cleaning, the firmware interface, disable_power_off refusing power off,
    servicing a deployed node, parent and child nodes, history and inventory."""
    n = cli("node", "create", "--driver", "fake-hardware", "--name", "m3-1",
            "--bios-interface", "fake", "--firmware-interface", "fake",
            "--vendor-interface", "fake", "-f", "json")
    expect((n["firmware_interface"], n["disable_power_off"], n["service_step"]),
           ("fake", False, {}), "the 1.86-1.95 fields of a new node")
    cli("node", "manage", "m3-1", "--wait", "30")
    steps = [{"interface": "bios", "step": "apply_configuration",
              "args": {"settings": [{"name": "ProcTurboMode", "value": "Disabled"}]}}]
    cli("node", "clean", "m3-1", "--clean-steps", json.dumps(steps))
    wait_for("m3-1", "manageable")
    expect(cli("node", "bios", "setting", "list", "m3-1", "-f", "json"),
           [{"name": "ProcTurboMode", "value": "Disabled"}], "BIOS settings after cleaning")
    setting = cli("node", "bios", "setting", "show", "m3-1", "ProcTurboMode", "-f", "json")
    expect((setting["value"], "allowable_values" in setting), ("Disabled", True),
           "a BIOS setting with its registry fields (1.74)")
    expect(cli("node", "firmware", "list", "m3-1", "-f", "json"), [], "no firmware components")
    cli("node", "set", "m3-1", "--firmware-interface", "no-firmware")
    expect(show("m3-1")["firmware_interface"], "no-firmware", "firmware interface set")

    cli("node", "power", "on", "m3-1")
    cli("node", "set", "m3-1", "--disable-power-off")
    expect(show("m3-1")["disable_power_off"], True, "disable_power_off set")
    err = cli(*ONCE, "node", "power", "off", "m3-1", ok=False)
    expect("Failed to set node power state to power off." in err, True, f"power off refused: {err}")
    cli("node", "set", "m3-1", "--enable-power-off")
    expect(show("m3-1")["disable_power_off"], False, "disable_power_off unset")

    cli("node", "provide", "m3-1", "--wait", "30")
    cli("node", "deploy", "m3-1", "--wait", "30")
    service = [{"interface": "vendor", "step": "log_passthrough", "args": {}}]
    cli("node", "service", "m3-1", "--service-steps", json.dumps(service), "--wait", "30")
    n = show("m3-1")
    expect((n["provision_state"], n["service_step"]), ("active", {}), "serviced, active again")

    child = cli("node", "create", "--driver", "fake-hardware", "--name", "m3-child",
                "--parent-node", "m3-1", "-f", "json")
    expect(child["parent_node"], n["uuid"], "parent node stored as its UUID")
    expect(cli("node", "children", "list", "m3-1", "-f", "json"), {"children": [child["uuid"]]},
           "children list")
    expect(cli("node", "history", "list", "m3-1", "-f", "json"), [], "no failures, no history")
    err = cli("node", "inventory", "save", "m3-1", ok=False)
    expect("Node inventory record for node" in err, True, f"no inventory before inspection: {err}")
    cli("node", "delete", "m3-child")
    cli("node", "undeploy", "m3-1")
    wait_for("m3-1", "available")
    cli("node", "delete", "m3-1")


def latest_suite():
    """What API 1.96-1.115 added on the node side, as the CLI (which knows 1.115) drives it:
    instance_name, health, servicing without the ramdisk, abort from wait call-back, and the
    history's state fields."""
    n = cli("node", "create", "--driver", "fake-hardware", "--name", "new-1",
            "--instance-name", "web-1", "--vendor-interface", "fake", "-f", "json")
    expect((n["instance_name"], n["health"]), ("web-1", None), "1.104 and 1.109 fields of a new node")
    expect([x["name"] for x in cli("node", "list", "--long", "-f", "json")
            if x["instance_name"] == "web-1"], ["new-1"], "instance name in the long listing")
    cli("node", "unset", "new-1", "--instance-name")
    expect(show("new-1")["instance_name"], None, "instance name unset")
    cli("node", "set", "new-1", "--instance-info", "display_name=from-nova")
    expect(show("new-1")["instance_name"], "from-nova", "display_name names the instance")
    cli("node", "manage", "new-1", "--wait", "30")
    cli("node", "provide", "new-1", "--wait", "30")
    cli("node", "deploy", "new-1", "--wait", "30")
    service = [{"interface": "vendor", "step": "log_passthrough", "args": {}}]
    cli("node", "service", "new-1", "--service-steps", json.dumps(service),
        "--disable-ramdisk")
    expect(wait_for("new-1", "active")["service_step"], {}, "serviced without the ramdisk (1.108)")
    cli("node", "undeploy", "new-1")
    expect(wait_for("new-1", "available")["instance_name"], None,
           "the instance's name goes with it")

    # A direct deploy waits for an agent that never comes; abort stops it (1.110).
    # --no-automated-clean: its tear-down would otherwise boot the ramdisk and wait for an agent.
    cli("node", "set", "new-1", "--deploy-interface", "direct", "--no-automated-clean",
        "--instance-info", "image_source=http://127.0.0.1:9/i.raw",
        "--instance-info", "image_os_hash_algo=sha256",
        "--instance-info", "image_os_hash_value=" + "0" * 64)
    cli("node", "deploy", "new-1")
    wait_for("new-1", "wait call-back")
    cli("node", "abort", "new-1")
    n = wait_for("new-1", "deploy failed")
    expect(n["last_error"].startswith("By request, the deploy operation was aborted"), True,
           f"abort's last_error: {n['last_error']}")
    history = cli("node", "history", "list", "new-1", "--long", "-f", "json")
    expect([(h["state"], h["target_provision_state"], h["event_type"]) for h in history],
           [("wait call-back", "active", "deploying")], "history with state fields (1.115)")
    cli("node", "undeploy", "new-1")
    wait_for("new-1", "available")
    cli("node", "delete", "new-1")


def rules_ports_runbooks_suite():
    """What 1.96-1.112 added beside the node, as the CLI drives it: inspection rules (1.96), the
    port and portgroup fields of 1.97-1.111, and runbook traits (1.112)."""
    actions = json.dumps([{"op": "add-trait", "args": {"name": "CUSTOM_INSPECTED"}}])
    conditions = json.dumps([{"op": "is-true", "args": {"value": True}}])
    # No --priority: the CLI sends it as a string, which Ironic's schema (an integer) refuses too.
    rule = cli("inspection", "rule", "create", "--description", "tag it",
               "--conditions", conditions, "--actions", actions, "-f", "json")
    expect((rule["description"], rule["priority"], rule["phase"]), ("tag it", 0, "main"),
           "inspection rule created")
    listed = cli("inspection", "rule", "list", "-f", "json")
    expect([r["uuid"] for r in listed], [rule["uuid"]], "inspection rule listed")
    cli("inspection", "rule", "set", rule["uuid"], "--description", "tag it again")
    shown = cli("inspection", "rule", "show", rule["uuid"], "-f", "json")
    expect(shown["description"], "tag it again", "inspection rule patched")
    cli("inspection", "rule", "delete", rule["uuid"])

    node = cli("node", "create", "--driver", "fake-hardware", "--name", "pf-1", "-f", "json")["uuid"]
    cli("port", "group", "create", "--node", node, "--name", "pg-pf", "--address",
        "52:54:00:00:9f:00", "--physical-network", "physnet1", "--category", "storage")
    pg = cli("port", "group", "show", "pg-pf", "-f", "json")
    expect((pg["physical_network"], pg["category"]), ("physnet1", "storage"),
           "portgroup physical_network (1.102) and category (1.103)")
    port = cli("port", "create", "52:54:00:00:9f:01", "--node", node,
               "--description", "uplink", "--vendor", "acme", "--category", "data", "-f", "json")
    port = cli("port", "show", port["uuid"], "-f", "json")
    expect((port["description"], port["vendor"], port["category"]), ("uplink", "acme", "data"),
           "port description (1.97), vendor (1.100), category (1.101)")
    expect(port["available_for_dynamic_portgroup"], True, "a port is available to dynamic portgroups (1.111)")
    cli("port", "set", port["uuid"], "--description", "downlink")
    expect(cli("port", "show", port["uuid"], "-f", "json")["description"], "downlink", "port description set")
    cli("port", "delete", port["uuid"])
    cli("port", "group", "delete", "pg-pf")
    cli("node", "delete", "pf-1")

    steps = json.dumps([{"interface": "deploy", "step": "erase_devices_metadata", "args": {},
                         "order": 1}])
    rb = cli("runbook", "create", "--name", "wipe-metadata", "--steps", steps, "-f", "json")
    expect(rb["name"], "wipe-metadata", "a runbook named freely (1.112)")
    cli("runbook", "trait", "add", "wipe-metadata", "CUSTOM_WIPE", "CUSTOM_FAST")
    traits = cli("runbook", "trait", "list", "wipe-metadata", "-f", "json")
    expect(sorted(t["traits"] for t in traits), ["CUSTOM_FAST", "CUSTOM_WIPE"], "runbook traits (1.112)")
    cli("runbook", "trait", "remove", "wipe-metadata", "CUSTOM_FAST")
    traits = cli("runbook", "trait", "list", "wipe-metadata", "-f", "json")
    expect([t["traits"] for t in traits], ["CUSTOM_WIPE"], "runbook trait removed")
    cli("runbook", "delete", "wipe-metadata")
    print("ok: inspection rules, port fields and runbook traits through the CLI", flush=True)


def sdk_suite():
    import openstack

    conn = openstack.connection.Connection(
        auth_type="none", baremetal_endpoint_override=ENDPOINT + "/", baremetal_api_version="1")
    bm = conn.baremetal
    n = bm.create_node(driver="fake-hardware", name="sdk-1", properties={"cpus": 2})
    expect(n.provision_state, "enroll", "sdk create")
    n = bm.set_node_provision_state(n, "manage", wait=True, timeout=30)
    expect(n.provision_state, "manageable", "sdk manage")
    n = bm.set_node_provision_state(n, "provide", wait=True, timeout=30)
    expect(n.provision_state, "available", "sdk provide")
    n = bm.update_node(n, extra={"owner": "team-a"})
    expect(n.extra, {"owner": "team-a"}, "sdk update")
    n = bm.update_node(n, owner="team-b", description="sdk node")
    expect((n.owner, n.description), ("team-b", "sdk node"), "sdk owner and description")
    n = bm.set_node_provision_state(n, "active", wait=True, timeout=30)
    expect(n.provision_state, "active", "sdk deploy")
    bm.set_node_power_state(n, "power off", wait=True, timeout=30)
    expect(bm.get_node("sdk-1").power_state, "power off", "sdk power off")
    bm.set_node_maintenance(n, reason="sdk says so")
    expect(bm.get_node("sdk-1").is_maintenance, True, "sdk maintenance set")
    bm.unset_node_maintenance(n)
    expect(bm.get_node("sdk-1").is_maintenance, False, "sdk maintenance unset")
    bm.validate_node(n, required=("power", "deploy", "management"))
    n = bm.set_node_provision_state(n, "rebuild", config_drive={"meta_data": {"hostname": "sdk"}},
                                    wait=True, timeout=30)
    expect(n.provision_state, "active", "sdk rebuild")
    n = bm.set_node_provision_state(n, "deleted", wait=True, timeout=30)
    expect(n.provision_state, "available", "sdk undeploy")
    expect([x.name for x in bm.nodes(provision_state="available")], ["sdk-1"], "sdk list filter")
    expect([d.name for d in bm.drivers()], ["fake-hardware", "ipmi", "redfish"], "sdk drivers")
    conductors = list(bm.conductors(details=True))
    expect(len(conductors), 1, "sdk conductors")
    c = bm.get_conductor(conductors[0].hostname)
    expect((c.alive, c.conductor_group, c.drivers), (True, "", ["fake-hardware", "ipmi", "redfish"]),
           "sdk conductor")
    expect(bm.get_node("sdk-1").conductor, c.hostname, "sdk node conductor")
    bm.add_node_trait(n, "CUSTOM_SDK")
    bm.set_node_traits(n, ["CUSTOM_A", "CUSTOM_B"])
    expect(sorted(bm.get_node("sdk-1").traits), ["CUSTOM_A", "CUSTOM_B"], "sdk traits")
    bm.remove_node_trait(n, "CUSTOM_A")
    expect(bm.get_node("sdk-1").traits, ["CUSTOM_B"], "sdk trait removed")
    bm.set_node_boot_device(n, "cdrom", persistent=False)
    expect(bm.get_node_boot_device(n), {"boot_device": "cdrom", "persistent": False},
           "sdk boot device")
    expect(bm.get_node_supported_boot_devices(n)["supported_boot_devices"],
           ["pxe", "disk", "cdrom", "bios", "safe"], "sdk supported boot devices")
    bm.inject_nmi_to_node(n)
    n = bm.update_node(n.id, vendor_interface="fake")
    expect(sorted(bm.list_node_vendor_passthru(n)),
           ["fourth_method_shared_lock", "log_passthrough", "second_method", "third_method_sync"],
           "sdk vendor methods")
    r = bm.call_node_vendor_passthru(n, "POST", "third_method_sync", body={"bar": "meow"})
    expect((r.status_code, r.json()), (200, True), "sdk synchronous vendor method")
    port = bm.create_port(node_uuid=n.id, address="52:54:00:00:5d:01", pxe_enabled=True)
    expect([x.id for x in bm.ports(address="52:54:00:00:5d:01")], [port.id], "sdk port by address")
    expect([x.id for x in bm.ports(node="sdk-1")], [port.id], "sdk ports of node")
    bm.attach_vif_to_node(n, "sdk-vif")
    expect(bm.list_node_vifs(n), ["sdk-vif"], "sdk vif attached")
    bm.detach_vif_from_node(n, "sdk-vif")
    bm.delete_port(port)
    bm.delete_node(n)
    print("ok: openstacksdk baremetal proxy", flush=True)


SUITES = {
    "cli": cli_suite,
    "management": management_suite,
    "failure": failure_suite,
    "network": network_suite,
    "volume": volume_suite,
    "lifecycle": lifecycle_suite,
    "allocation": allocation_suite,
    "template": template_suite,
    "metal3": metal3_suite,
    "latest": latest_suite,
    "rules_ports_runbooks": rules_ports_runbooks_suite,
    "sdk": sdk_suite,
}


if __name__ == "__main__":
    names = sys.argv[2:] or list(SUITES)
    for name in names:
        SUITES[name]()
    print(f"clients: all steps passed ({' '.join(names)})")
