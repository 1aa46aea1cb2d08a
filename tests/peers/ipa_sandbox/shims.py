"""The commands the agent finds first in its PATH inside the sandbox.

Every command the sandbox shims is a two-line script in the agent's DIR/bin that runs
`python -I -m ipa_sandbox.shims NAME ARGS...`; this module decides what happens and writes one
line per call to $IPA_SANDBOX_SHIM_LOG ("faked", "ran" or "ran, rewritten", then the command).

  SWALLOWED   power, modules, RAID, multipath, iSCSI, firmware, clock, udev, discard: nothing
              runs, exit 0. The agent calls several of them on every start (and `poweroff` at
              the end of a deploy); none has any business on a test machine.
  ip          queries run the real `ip`; anything that would change a link, an address or a
              route is swallowed (the agent also lacks the capability to do it).
  lsblk       answers about the disk file only, as if it were the machine's only disk; every
              other device is "not a block device". The host's disks are never listed.
  blockdev    answers the size questions about the disk file; refuses any other device.
  dd          runs the real `dd`, with conv=notrunc added when it writes the disk file (dd
              would truncate a file, never a device).
  qemu-img    runs the real `qemu-img`; a conversion onto the disk file writes raw into the
              existing file (-O raw -n) instead of asking for a block device.
"""
import json
import os
import shlex
import shutil
import subprocess
import sys
import time

SWALLOWED = (
    'poweroff', 'reboot', 'shutdown', 'halt', 'kexec', 'systemctl',
    'modprobe', 'mdadm', 'multipath', 'multipathd', 'iscsistart',
    'hwclock', 'efibootmgr', 'partprobe', 'udevadm', 'blkdiscard', 'shred', 'hdparm',
    'ipmitool',
)
SMART = ('ip', 'lsblk', 'blockdev', 'dd', 'qemu-img')
ALL = SWALLOWED + SMART


def note(what, argv):
    path = os.environ.get('IPA_SANDBOX_SHIM_LOG')
    if not path:
        return
    line = '%s uid=%d %s %s\n' % (time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime()),
                                  os.getuid(), what, shlex.join(argv))
    try:
        with open(path, 'a') as log:
            log.write(line)
    except OSError:
        pass


def real_program(name):
    """Where `name` is in PATH once the shim directory is left out."""
    shims = os.path.realpath(os.environ.get('IPA_SANDBOX_SHIM_DIR', '/nonexistent'))
    path = [d for d in os.environ.get('PATH', '').split(os.pathsep)
            if d and os.path.realpath(d) != shims]
    return shutil.which(name, path=os.pathsep.join(path))


def run_real(argv, rewritten):
    note('ran, rewritten' if rewritten else 'ran', argv)
    program = real_program(argv[0])
    if program is None:
        sys.stderr.write('ipa-sandbox: %s is not installed\n' % argv[0])
        return 127
    os.execv(program, [program] + argv[1:])


def disk_file():
    disk = os.environ.get('IPA_SANDBOX_DISK')
    return os.path.realpath(disk) if disk else None


def is_disk_file(path):
    disk = disk_file()
    return disk is not None and os.path.realpath(path) == disk and os.path.isfile(disk)


def disk_size():
    return int(os.environ.get('IPA_SANDBOX_DISK_SIZE') or os.path.getsize(disk_file()))


# ---- ip ---------------------------------------------------------------------------------
CHANGES = {'set', 'add', 'a', 'del', 'delete', 'd', 'change', 'replace', 'append',
           'prepend', 'flush', 'f', 'up', 'down', 'save', 'restore'}


def ip(args):
    # `ip [options] OBJECT VERB ...`: the verb is the second word that is not an option.
    words = [a for a in args if not a.startswith('-')]
    if CHANGES.intersection(words[1:3]):
        note('faked', ['ip'] + args)
        return 0
    return run_real(['ip'] + args, False)


# ---- lsblk ------------------------------------------------------------------------------
DEFAULT_COLUMNS = ['NAME', 'MAJ:MIN', 'RM', 'SIZE', 'RO', 'TYPE', 'MOUNTPOINTS']
EVERY_COLUMN = ['NAME', 'KNAME', 'PATH', 'MAJ:MIN', 'FSTYPE', 'MOUNTPOINT', 'LABEL', 'UUID',
                'PTUUID', 'PTTYPE', 'PARTTYPE', 'PARTLABEL', 'PARTUUID', 'RO', 'RM', 'MODEL',
                'SERIAL', 'SIZE', 'TYPE', 'ROTA', 'WWN', 'HCTL', 'TRAN', 'VENDOR', 'LOG-SEC',
                'PHY-SEC']


def parse_lsblk(args):
    """(columns, style, heading, bytes, devices) of an lsblk command line."""
    columns, style, heading, in_bytes, devices = DEFAULT_COLUMNS, 'table', True, False, []
    rest = list(args)
    while rest:
        arg = rest.pop(0)
        if arg.startswith('--'):
            name, _, value = arg.partition('=')
            if name == '--output':
                columns = (value or (rest.pop(0) if rest else '')).split(',')
            elif name == '--output-all':
                columns = EVERY_COLUMN
            elif name == '--pairs':
                style = 'pairs'
            elif name == '--json':
                style = 'json'
            elif name == '--noheadings':
                heading = False
            elif name == '--bytes':
                in_bytes = True
        elif arg.startswith('-') and len(arg) > 1:
            letters = arg[1:]
            for at, letter in enumerate(letters):
                if letter == 'o':  # the columns: the rest of this word, or the next word
                    columns = (letters[at + 1:] or (rest.pop(0) if rest else '')).split(',')
                    break
                style = {'P': 'pairs', 'J': 'json'}.get(letter, style)
                heading = heading and letter != 'n'
                in_bytes = in_bytes or letter == 'b'
                if letter == 'O':
                    columns = EVERY_COLUMN
        else:
            devices.append(arg)
    return [c.upper() for c in columns if c], style, heading, in_bytes, devices


def probe(path):
    """What blkid finds on the disk file (partition table, file system), as a dict."""
    blkid = real_program('blkid')
    if blkid is None:
        return {}
    try:
        out = subprocess.run([blkid, '-p', '-o', 'export', path], capture_output=True,
                             text=True, timeout=10).stdout
    except (OSError, subprocess.SubprocessError):
        return {}
    return dict(line.split('=', 1) for line in out.splitlines() if '=' in line)


def human(size):
    for unit in 'BKMGT':
        if size < 1024 or unit == 'T':
            return '%g%s' % (round(size, 1), unit)
        size /= 1024


def lsblk(args):
    note('faked', ['lsblk'] + args)
    columns, style, heading, in_bytes, devices = parse_lsblk(args)
    others = [d for d in devices if not is_disk_file(d)]
    for device in others:
        sys.stderr.write('lsblk: %s: not a block device\n' % device)
    if others:
        return 32
    disk = disk_file()
    if disk is None or not os.path.isfile(disk):
        return 0
    found = probe(disk)
    size = disk_size()
    values = {
        'NAME': disk, 'KNAME': disk, 'PATH': disk, 'MAJ:MIN': '0:0', 'TYPE': 'disk',
        'SIZE': str(size) if in_bytes else human(size), 'RO': '0', 'RM': '0', 'ROTA': '0',
        'MODEL': 'ipa-sandbox disk file', 'VENDOR': 'ipa-sandbox', 'LOG-SEC': '512',
        'PHY-SEC': '512', 'FSTYPE': found.get('TYPE', ''), 'LABEL': found.get('LABEL', ''),
        'UUID': found.get('UUID', ''), 'PTUUID': found.get('PTUUID', ''),
        'PTTYPE': found.get('PTTYPE', ''),
    }
    row = [(column, values.get(column, '')) for column in columns]
    if style == 'pairs':
        print(' '.join('%s="%s"' % pair for pair in row))
    elif style == 'json':
        device = {column.lower(): value or None for column, value in row}
        print(json.dumps({'blockdevices': [device]}, indent=2))
    else:
        if heading:
            print(' '.join(columns))
        print(' '.join(value for _, value in row))
    return 0


# ---- blockdev ---------------------------------------------------------------------------
def blockdev(args):
    note('faked', ['blockdev'] + args)
    targets = [a for a in args if not a.startswith('-')]
    if not targets or not all(is_disk_file(t) for t in targets):
        sys.stderr.write('ipa-sandbox: blockdev only answers about the disk file, not %s\n'
                         % ' '.join(targets))
        return 1
    size = disk_size()
    answers = {'--getss': 512, '--getpbsz': 512, '--getbsz': 4096, '--getiomin': 512,
               '--getioopt': 0, '--getalignoff': 0, '--getro': 0, '--getsize64': size,
               '--getsz': size // 512, '--getsize': size // 512, '--getmaxsect': 256,
               '--getra': 256, '--getfra': 256, '--getdiscardzeroes': 0}
    for target in targets:
        for option in (a for a in args if a.startswith('-')):
            if option in answers:
                print(answers[option])
            elif option == '--flushbufs':
                with open(target, 'rb') as disk:
                    os.fsync(disk.fileno())
    return 0


# ---- dd, qemu-img -----------------------------------------------------------------------
def dd(args):
    target = next((a[len('of='):] for a in args if a.startswith('of=')), None)
    if target is None or not is_disk_file(target):
        return run_real(['dd'] + args, False)
    conv = [a for a in args if a.startswith('conv=')]
    if conv and 'notrunc' in conv[-1][len('conv='):].split(','):
        return run_real(['dd'] + args, False)
    if conv:
        args = [a + ',notrunc' if a is conv[-1] else a for a in args]
    else:
        args = args + ['conv=notrunc']
    return run_real(['dd'] + args, True)


def qemu_img(args):
    if len(args) < 3 or args[0] != 'convert' or not is_disk_file(args[-1]):
        return run_real(['qemu-img'] + args, False)
    new = ['convert', '-n'] + [a for a in args[1:] if a != '-n']
    new = ['raw' if a == 'host_device' and new[i - 1] == '-O' else a
           for i, a in enumerate(new)]
    return run_real(['qemu-img'] + new, True)


def main(argv):
    name, args = argv[0], argv[1:]
    if name in SWALLOWED:
        note('faked', argv)
        return 0
    handler = {'ip': ip, 'lsblk': lsblk, 'blockdev': blockdev, 'dd': dd,
               'qemu-img': qemu_img}.get(name)
    if handler is None:
        sys.stderr.write('ipa-sandbox: no shim for %s\n' % name)
        return 127
    return handler(args)


if __name__ == '__main__':
    if sys.argv[1:] == ['--names']:
        print(' '.join(ALL))
        sys.exit(0)
    sys.exit(main(sys.argv[1:]))
