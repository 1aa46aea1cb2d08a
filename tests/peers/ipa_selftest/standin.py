"""A stand-in for Ironic's API and conductor, for `ipa-sandbox.sh selftest` (stdlib only).

It answers the agent's lookup and heartbeats on 127.0.0.1:PORT and serves two whole-disk raw
images; once the agent has heartbeated it plays the conductor over the agent's own HTTPS API:
a wrong token is refused, get_deploy_steps lists write_image, write_image writes each image
(downloaded then dd'd, then streamed) and the disk file then starts with its bytes, and
get_partition_uuids, sync and power_off (shimmed) succeed. One line per step; exit 0 if all
passed.
"""
import argparse
import hashlib
import http.server
import json
import random
import ssl
import struct
import sys
import threading
import time
import urllib.error
import urllib.request

NODE = '8b1f6c3e-5a4d-4c2b-9e1f-0a9d8c7b6e5f'
TOKEN = 'selftest-token-' + '%032x' % random.getrandbits(128)
heartbeats = []
heartbeat_seen = threading.Event()
images = {}


def raw_image(mib, seed):
    """A whole-disk image: an MBR with one partition from 1 MiB (the agent checks that a
    written disk has a partition table), then bytes that differ from seed to seed."""
    size = mib << 20
    body = random.Random(seed).randbytes(size - (1 << 20))
    mbr = bytearray(512)
    mbr[440:444] = struct.pack('<I', 0x5e1f0000 + seed)
    mbr[446:462] = struct.pack('<B3sB3sII', 0, b'\0\2\0', 0x83, b'\xfe\xff\xff', 2048,
                               size // 512 - 2048)
    mbr[510:512] = b'\x55\xaa'
    return bytes(mbr) + bytes((1 << 20) - 512) + body


class Api(http.server.BaseHTTPRequestHandler):
    protocol_version = 'HTTP/1.1'

    def log_message(self, *args):
        pass

    def reply(self, status, body=None, raw=None):
        data = raw if raw is not None else (b'' if body is None else json.dumps(body).encode())
        self.send_response(status)
        self.send_header('Content-Type', 'application/octet-stream' if raw else 'application/json')
        self.send_header('Content-Length', str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        path, _, query = self.path.partition('?')
        if path.startswith('/images/') and path[8:] in images:
            return self.reply(200, raw=images[path[8:]])
        if path == '/':
            version = {'id': 'v1', 'version': '1.68', 'min_version': '1.1', 'status': 'CURRENT'}
            return self.reply(200, {'name': 'OpenStack Ironic API', 'versions': [version],
                                    'default_version': version})
        if path.rstrip('/') == '/v1/lookup' and ARGS.mac in query.lower().replace('%3a', ':'):
            # Ironic hands the token out once; a later lookup gets it masked.
            token = TOKEN if not heartbeats else '******'
            return self.reply(200, {
                'node': {'uuid': NODE, 'properties': {}, 'instance_info': {},
                         'driver_internal_info': {}},
                'config': {'heartbeat_timeout': 300, 'agent_token': token,
                           'agent_token_required': True}})
        self.reply(404, {'error_message': 'not found'})

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers.get('Content-Length') or 0)) or b'{}')
        if self.path.rstrip('/') != '/v1/heartbeat/' + NODE:
            return self.reply(404, {'error_message': 'not found'})
        if body.get('agent_token') != TOKEN:
            return self.reply(401, {'error_message': 'bad token'})
        heartbeats.append(body)
        heartbeat_seen.set()
        self.reply(202)


class Agent:
    def __init__(self, heartbeat, token):
        self.url = heartbeat['callback_url'].rstrip('/')
        self.token = token
        self.tls = ssl.create_default_context(cadata=heartbeat.get('agent_verify_ca'))

    def call(self, method, path, body=None, **query):
        query['agent_token'] = self.token
        url = '%s%s?%s' % (self.url, path, '&'.join('%s=%s' % kv for kv in query.items()))
        request = urllib.request.Request(
            url, method=method, data=None if body is None else json.dumps(body).encode(),
            headers={'Content-Type': 'application/json'})
        try:
            with urllib.request.urlopen(request, context=self.tls, timeout=60) as r:
                return r.status, json.loads(r.read() or b'null')
        except urllib.error.HTTPError as e:
            return e.code, None

    def command(self, name, params, wait=True):
        status, result = self.call('POST', '/v1/commands/', {'name': name, 'params': params},
                                   wait='true' if wait else 'false')
        deadline = time.monotonic() + 60
        while result and result.get('command_status') == 'RUNNING' \
                and time.monotonic() < deadline:
            time.sleep(0.2)
            status, result = self.call('GET', '/v1/commands/%s' % result['id'])
        return status, result or {}


def step(what, ok, detail=''):
    print('%s %s%s' % ('ok  ' if ok else 'FAIL', what, ' (%s)' % detail if detail else ''),
          flush=True)
    if not ok:
        sys.exit(1)


def conduct():
    started = time.monotonic()
    step('lookup and first heartbeat', heartbeat_seen.wait(ARGS.timeout),
         '%.1f s' % (time.monotonic() - started))
    heartbeat = heartbeats[0]
    step('the agent serves TLS', heartbeat['callback_url'].startswith('https://'),
         heartbeat['callback_url'])
    status, _ = Agent(heartbeat, 'x' * 40).call('GET', '/v1/commands/')
    step('the agent refuses a wrong token', status == 401, status)
    agent = Agent(heartbeat, TOKEN)
    node = {'uuid': NODE, 'properties': {}, 'instance_info': {}, 'driver_internal_info': {}}
    ports = [{'address': ARGS.mac}]
    status, result = agent.command('deploy.get_deploy_steps', {'node': node, 'ports': ports})
    found = result.get('command_result') or {}
    names = {s['step'] for steps in (found.get('deploy_steps') or {}).values() for s in steps}
    versions = found.get('hardware_manager_version') or {}
    step('get_deploy_steps lists write_image', 'write_image' in names, sorted(versions))
    step('the sandbox hardware manager is loaded', 'ipa_sandbox_hardware_manager' in versions)
    for n, (name, streamed) in enumerate([('a.raw', False), ('b.raw', True)]):
        image = images[name]
        info = {'id': 'selftest-%d' % n, 'urls': ['http://127.0.0.1:%d/images/%s'
                                                  % (ARGS.port, name)],
                'disk_format': 'raw', 'container_format': 'bare', 'image_type': 'whole-disk',
                'stream_raw_images': streamed, 'os_hash_algo': 'sha256',
                'os_hash_value': hashlib.sha256(image).hexdigest(), 'node_uuid': NODE}
        t = time.monotonic()
        status, result = agent.command('deploy.execute_deploy_step', {
            'step': {'interface': 'deploy', 'step': 'write_image', 'priority': 80,
                     'reboot_requested': False, 'args': {'image_info': info}},
            'node': node, 'ports': ports, 'deploy_version': versions}, wait=False)
        with open(ARGS.disk, 'rb') as disk:
            written = disk.read(len(image)) == image
        step('write_image %s (%s)' % (name, 'streamed' if streamed else 'downloaded, then dd'),
             result.get('command_status') == 'SUCCEEDED' and written,
             '%.1f s' % (time.monotonic() - t) if written else json.dumps(result)[:400])
    for name in ('standby.get_partition_uuids', 'standby.sync', 'standby.power_off'):
        status, result = agent.command(name, {})
        step(name, result.get('command_status') == 'SUCCEEDED', result.get('command_error'))


def main():
    global ARGS
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--port', type=int, required=True)
    parser.add_argument('--mac', required=True)
    parser.add_argument('--disk', required=True, help="the agent's disk file")
    parser.add_argument('--seed', type=int, default=1)
    parser.add_argument('--timeout', type=float, default=120)
    ARGS = parser.parse_args()
    ARGS.mac = ARGS.mac.lower()
    images['a.raw'] = raw_image(4, ARGS.seed)
    images['b.raw'] = raw_image(3, ARGS.seed + 100)
    server = http.server.ThreadingHTTPServer(('127.0.0.1', ARGS.port), Api)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    conduct()


if __name__ == '__main__':
    main()
