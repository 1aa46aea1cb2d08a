"""An agent hardware manager for a machine that has one NIC and one disk, the disk a plain file.

The agent asks every hardware manager for each thing it needs and takes the answer of the one
with the highest support level. This one claims SERVICE_PROVIDER (above the generic manager's
GENERIC) and answers everything that would otherwise make the generic manager read or write the
host's own devices: the inventory, the install device, erasing, RAID and firmware clean-up.
What the generic manager still runs (its start-up probes, write_image's tools) goes through the
PATH shims and the disk file.
"""
import os
import platform

from ironic_python_agent import errors
from ironic_python_agent import hardware

MIB = 1 << 20
NIC_NAME = 'sandbox0'


def setting(name, default=None):
    return os.environ.get(name) or default


class SandboxHardwareManager(hardware.HardwareManager):
    HARDWARE_MANAGER_NAME = 'ipa_sandbox_hardware_manager'
    HARDWARE_MANAGER_VERSION = '1.0'

    def __init__(self):
        self.disk = setting('IPA_SANDBOX_DISK')
        self.disk_size = int(setting('IPA_SANDBOX_DISK_SIZE', 64 * MIB))
        self.mac = setting('IPA_SANDBOX_MAC', '52:54:00:00:00:01').lower()
        self.ip = setting('IPA_SANDBOX_IP', '127.0.0.1')

    def evaluate_hardware_support(self):
        if setting('IPA_SANDBOX') != '1' or not self.disk:
            return hardware.HardwareSupport.NONE
        # The disk must be a plain file, never a device (nor a link to one): stop the agent
        # here rather than let it write anything else.
        if os.path.islink(self.disk) or not os.path.isfile(self.disk):
            raise RuntimeError('ipa-sandbox: the disk %r is not a plain file' % self.disk)
        return hardware.HardwareSupport.SERVICE_PROVIDER

    # The disk file is there from the start: nothing to wait for.
    def wait_for_disks(self):
        return None

    # ---- the machine's inventory -------------------------------------------------------
    def nic(self):
        return hardware.NetworkInterface(
            NIC_NAME, self.mac, ipv4_address=self.ip, has_carrier=True,
            vendor='0x1af4', product='0x1000', speed_mbps=1000, driver='ipa-sandbox')

    def list_network_interfaces(self):
        return [self.nic()]

    def get_interface_info(self, interface_name):
        if interface_name != NIC_NAME:
            raise errors.IncompatibleHardwareMethodError()
        return self.nic()

    def get_ipv4_addr(self, interface_id):
        return self.ip

    def collect_lldp_data(self, interface_names=None):
        return {}

    def get_cpus(self):
        return hardware.CPU(model_name='ipa-sandbox CPU', frequency='2000', count=2,
                            architecture=platform.machine() or 'x86_64', flags=[],
                            socket_count=1)

    def get_memory(self):
        return hardware.Memory(total=2048 * MIB, physical_mb=2048)

    def get_bmc_address(self):
        return '0.0.0.0'

    def get_bmc_v6address(self):
        return '::/0'

    def get_bmc_mac(self):
        raise errors.IncompatibleHardwareMethodError()

    def get_system_vendor_info(self):
        firmware = hardware.SystemFirmware(vendor='ipa-sandbox', version='1.0',
                                           build_date='2026-01-01')
        return hardware.SystemVendorInfo(product_name='ipa-sandbox',
                                         serial_number=self.mac.replace(':', ''),
                                         manufacturer='ipa-sandbox', firmware=firmware)

    def get_boot_info(self):
        return hardware.BootInfo(current_boot_mode='uefi', pxe_interface=self.mac)

    def get_usb_devices(self):
        return []

    # ---- the one disk ------------------------------------------------------------------
    def block_device(self):
        return hardware.BlockDevice(
            name=self.disk, model='ipa-sandbox disk file', size=self.disk_size,
            rotational=False, vendor='ipa-sandbox', serial='sandbox-' + self.mac.replace(':', ''),
            logical_sectors=512, physical_sectors=512)

    def list_block_devices(self, include_partitions=False, all_serial_and_wwn=False):
        return [self.block_device()]

    def list_block_devices_check_skip_list(self, node, include_partitions=False,
                                           all_serial_and_wwn=False):
        return [self.block_device()]

    def get_skip_list_from_node_for_disks(self, node, block_devices=None):
        return None

    def get_skip_list_from_node_for_raids(self, node):
        return None

    def get_os_install_device(self, permit_refresh=False):
        return self.disk

    def full_sync(self):
        with open(self.disk, 'rb') as disk:
            os.fsync(disk.fileno())

    # ---- cleaning: erasing is zeroing the file; the rest has nothing to do ----------------
    def zero_disk(self):
        # Cut the file to nothing and give it its size back: it reads as zeros, at once.
        with open(self.disk, 'r+b') as disk:
            disk.truncate(0)
            disk.truncate(self.disk_size)
            os.fsync(disk.fileno())

    def erase_block_device(self, node, block_device):
        if block_device.name != self.disk:
            raise errors.IncompatibleHardwareMethodError()
        self.zero_disk()

    def erase_devices(self, node, ports):
        self.zero_disk()
        return {self.disk: 'zeroed by ipa-sandbox'}

    def erase_devices_metadata(self, node, ports):
        self.zero_disk()

    def erase_devices_express(self, node, ports):
        self.zero_disk()

    def erase_pstore(self, node, ports):
        return None

    def clean_uefi_nvram(self, node, ports, match_patterns=None):
        return None

    def create_configuration(self, node, ports):
        return None

    def delete_configuration(self, node, ports):
        return None
