"""The Python half of redfish-emulator.sh, run with the emulator's venv:

    redfish_emulator.py config DIR HOST PORT SYSTEMS POWER [USER PASSWORD]
        write DIR/emulator.conf: SYSTEMS fake systems, each in POWER state with one NIC;
        with USER, basic authentication from DIR/htpasswd
    redfish_emulator.py serve DIR
        run sushy-tools' emulator on DIR/emulator.conf, in the foreground; with
        REDFISH_EMU_POWER_DELAY=D, a power change lands D-1..D s after it is asked for
    redfish_emulator.py ready HOST PORT PID SECONDS [USER PASSWORD]
        wait until the emulator answers, then print its systems' ids, one a line
"""
import base64
import json
import os
import sys
import time
import urllib.request


def config(directory, host, port, systems, power, user=None, password=None):
    port, systems = int(port), int(systems)
    fake_systems = [{
        # Stable and different per port: the port in the first group, the index in the last.
        'uuid': '%08x-0000-4000-8000-%012x' % (port, i),
        'name': 'fake-node-%d' % i,
        'power_state': power,
        'external_notifier': False,
        'nics': [{'mac': '52:54:00:%02x:%02x:%02x' % (port >> 8 & 255, port & 255, i & 255),
                  'ip': '127.0.1.%d' % (i % 250 + 1)}],
    } for i in range(1, systems + 1)]
    lines = [
        'SUSHY_EMULATOR_LISTEN_IP = %r' % host,
        'SUSHY_EMULATOR_LISTEN_PORT = %d' % port,
        'SUSHY_EMULATOR_FAKE_DRIVER = True',
        # The fake driver keeps its systems in a database: a state dir per start makes every
        # start begin with the systems of this file, as they are written here.
        'SUSHY_EMULATOR_STATE_DIR = %r' % os.path.join(directory, 'state'),
        'SUSHY_EMULATOR_FAKE_SYSTEMS = %r' % fake_systems,
    ]
    if user:
        import bcrypt
        # Cost 4: the emulator checks the password on every request (the default, 12, costs
        # about a quarter of a second each time).
        digest = bcrypt.hashpw(password.encode(), bcrypt.gensalt(rounds=4)).decode()
        with open(os.path.join(directory, 'htpasswd'), 'w') as f:
            f.write('%s:%s\n' % (user, digest))
        lines.append('SUSHY_EMULATOR_AUTH_FILE = %r' % os.path.join(directory, 'htpasswd'))
    with open(os.path.join(directory, 'emulator.conf'), 'w') as f:
        f.write('\n'.join(lines) + '\n')


def serve(directory):
    delay = os.environ.get('REDFISH_EMU_POWER_DELAY', '')
    if delay:
        # The fake driver applies a power change at int(now) + randint(1, 11): answer D instead
        # (there is no setting for it).
        from sushy_tools.emulator.resources.systems import fakedriver

        class Fixed:
            @staticmethod
            def randint(low, high):
                return int(delay)

        fakedriver.random = Fixed
    from sushy_tools.emulator import main
    sys.argv = ['sushy-emulator', '--config', os.path.join(directory, 'emulator.conf')]
    return main.main()


def listens(pid, port):
    """Whether process `pid` holds the listening TCP socket of `port`: another emulator started
    at the same moment on the same free port would otherwise answer in its place."""
    inodes = set()
    fds = '/proc/%s/fd' % pid
    for fd in os.listdir(fds):
        try:
            target = os.readlink(os.path.join(fds, fd))
        except OSError:
            continue
        if target.startswith('socket:['):
            inodes.add(target[len('socket:['):-1])
    for table in ('tcp', 'tcp6'):
        try:
            with open('/proc/%s/net/%s' % (pid, table)) as f:
                rows = f.read().splitlines()[1:]
        except OSError:
            continue
        for row in rows:
            fields = row.split()
            local, state, inode = fields[1], fields[3], fields[9]
            # 0A: LISTEN.
            if state == '0A' and int(local.rsplit(':', 1)[1], 16) == int(port) and inode in inodes:
                return True
    return False


def ready(host, port, pid, seconds, user=None, password=None):
    base = 'http://%s:%s/redfish/v1' % ('[%s]' % host if ':' in host else host, port)
    deadline = time.monotonic() + float(seconds)
    while True:
        try:
            os.kill(int(pid), 0)
            ours = listens(pid, port)
        except OSError:
            return 'the emulator exited (is the port taken?)'
        try:
            if ours:
                urllib.request.urlopen(base + '/', timeout=2).read()
                break
        except OSError:
            pass
        if time.monotonic() > deadline:
            return 'no answer in %s s' % seconds
        time.sleep(0.1)
    request = urllib.request.Request(base + '/Systems')
    if user:
        secret = base64.b64encode(('%s:%s' % (user, password)).encode()).decode()
        request.add_header('Authorization', 'Basic ' + secret)
    for member in json.load(urllib.request.urlopen(request, timeout=5))['Members']:
        print(member['@odata.id'].rsplit('/', 1)[-1])
    return 0


if __name__ == '__main__':
    command, args = sys.argv[1], sys.argv[2:]
    sys.exit({'config': config, 'serve': serve, 'ready': ready}[command](*args))
