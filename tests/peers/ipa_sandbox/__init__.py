"""The Ironic Python Agent's view of a machine, for the test sandbox of ../ipa-sandbox.sh.

`hardware` is an agent hardware manager that reports one NIC and one disk, the disk being a
plain file; `shims` answers for the commands the sandbox puts first in the agent's PATH.
Both read their settings from the environment the sandbox script gives the agent:

    IPA_SANDBOX=1            the manager takes part only when this is set
    IPA_SANDBOX_DISK         absolute path of the disk file
    IPA_SANDBOX_DISK_SIZE    the disk's size in bytes, as reported
    IPA_SANDBOX_MAC          the NIC's MAC (the agent looks itself up with it)
    IPA_SANDBOX_IP           the NIC's IPv4 address (a loopback one)
    IPA_SANDBOX_SHIM_DIR     the directory of the shims (left out when a shim runs the real tool)
    IPA_SANDBOX_SHIM_LOG     the file every shim call is written to, one line each
"""
