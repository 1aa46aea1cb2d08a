"""Run by `ipa-sandbox.sh selftest` inside a sandbox, exactly as the agent would be: checks from
the inside that each safety layer holds. Prints one line per check; exits 1 if any failed.
Nothing here writes outside the sandbox: files that must stay closed are only opened, and an
open that unexpectedly succeeds is closed at once and counted as a failure.
"""
import errno
import os
import shutil
import stat
import subprocess
import sys

failures = 0


def check(ok, what, detail=''):
    global failures
    failures += not ok
    print('  %s %s%s' % ('ok  ' if ok else 'FAIL', what, ' (%s)' % detail if detail else ''),
          flush=True)


def open_error(path, flags):
    """The errno name an open() fails with, or None if it opened."""
    try:
        os.close(os.open(path, flags))
    except OSError as e:
        return errno.errorcode.get(e.errno, str(e.errno))
    return None


def run(*argv):
    return subprocess.run(argv, capture_output=True, text=True)


# Layer 1: who the agent is.
status = dict(line.split(':', 1) for line in open('/proc/self/status') if ':' in line)
ids_ok = (os.getuid(), os.geteuid(), os.getgid(), os.getegid(), os.getgroups()) == \
    (65534, 65534, 65534, 65534, [])
check(ids_ok, 'uid and gid 65534, no groups', 'uid %d gid %d groups %s'
      % (os.getuid(), os.getgid(), os.getgroups()))
caps = {name: int(status[name], 16) for name in ('CapInh', 'CapPrm', 'CapEff', 'CapBnd', 'CapAmb')}
check(not any(caps.values()), 'no capabilities, none to gain (bounding set empty)',
      ' '.join('%s=%x' % item for item in caps.items()))
check(status['NoNewPrivs'].strip() == '1', 'no_new_privs: setuid programs do not elevate')
if not ids_ok or any(caps.values()):
    print('  privileges were not dropped: no further probe')
    sys.exit(1)
check(open_error('/proc/sys/vm/drop_caches', os.O_WRONLY) == 'EACCES',
      'a root-only file is closed (/proc/sys/vm/drop_caches)')
check(open_error('/proc/sysrq-trigger', os.O_WRONLY) in ('EACCES', 'ENOENT'),
      "the agent's last-resort power-off, /proc/sysrq-trigger, is closed",
      open_error('/proc/sysrq-trigger', os.O_WRONLY))
r = run('umount', '/run')
check(r.returncode != 0, 'umount /run is refused', r.stderr.strip()[:60])

# Layer 3: what the agent sees.
blocks = [n for n in os.listdir('/dev') if stat.S_ISBLK(os.lstat('/dev/' + n).st_mode)]
check(not blocks, 'no block device node in /dev', ' '.join(sorted(os.listdir('/dev'))))
host_disk = sys.argv[1] if len(sys.argv) > 1 else ''
if host_disk:
    check(open_error(host_disk, os.O_RDONLY) is not None, 'the host disk %s cannot be opened'
          % host_disk, open_error(host_disk, os.O_RDONLY))
mounts = [line.split() for line in open('/proc/self/mounts')]
check(any(m[1] == '/run' and m[2] == 'tmpfs' for m in mounts), '/run is a tmpfs of its own')
try:
    with open('/run/ironic-python-agent/probe', 'w') as f:
        f.write('probe')
    writable = True
except OSError:
    writable = False
check(writable, "/run/ironic-python-agent (the agent's TLS files) is writable")
check(open('/proc/cmdline').read().strip() == '', 'the kernel command line the agent reads is empty')

# Layer 2: the shims.
shim_dir = os.environ['IPA_SANDBOX_SHIM_DIR']
for name in ('poweroff', 'reboot', 'modprobe', 'mdadm', 'udevadm', 'partprobe', 'efibootmgr',
             'ip', 'lsblk', 'blockdev', 'dd'):
    found = shutil.which(name)
    check(found == os.path.join(shim_dir, name), '%s is the shim' % name, found)
if shutil.which('poweroff') == os.path.join(shim_dir, 'poweroff'):
    check(run('poweroff').returncode == 0, 'poweroff (the shim) exits 0')
if shutil.which('ip') == os.path.join(shim_dir, 'ip'):
    r = run('ip', 'link', 'set', 'lo', 'down')
    state = open('/sys/class/net/lo/operstate').read().strip()
    check(r.returncode == 0 and state != 'down', 'ip link set lo down is faked', 'lo ' + state)
real_ip = shutil.which('ip', path='/usr/sbin:/usr/bin:/sbin:/bin')
if real_ip:
    mtu = open('/sys/class/net/lo/mtu').read().strip()
    r = run(real_ip, 'link', 'set', 'dev', 'lo', 'mtu', mtu)
    check(r.returncode != 0, 'the real ip cannot change a link', r.stderr.strip()[:60])
disk = os.environ['IPA_SANDBOX_DISK']
r = run('lsblk', '-p', '-P', '-o', 'KNAME,TYPE')
check(r.stdout.strip() == 'KNAME="%s" TYPE="disk"' % disk, 'lsblk lists the disk file only',
      r.stdout.strip())
r = run('blockdev', '--getsize64', disk)
check(r.stdout.strip() == os.environ['IPA_SANDBOX_DISK_SIZE'], 'blockdev knows the disk size')
check(run('blockdev', '--getsize64', '/dev/null').returncode != 0,
      'blockdev refuses anything but the disk file')

# Layer 4's disk: a plain file the agent may write.
with open(disk, 'r+b') as f:
    f.write(b'probe')
    f.seek(0)
    wrote = f.read(5) == b'probe'
    f.seek(0)
    f.write(bytes(5))
check(wrote and stat.S_ISREG(os.lstat(disk).st_mode), 'the disk is a plain file the agent writes')
sys.exit(1 if failures else 0)
