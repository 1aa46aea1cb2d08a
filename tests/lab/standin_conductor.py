#!/usr/bin/env python3
"""A stand-in for Ironic's API and conductor for the lab's selftest: just enough of a deploy to
prove that the agent inside a lab VM writes a whole-disk image and a config drive to the VM's
own disk. Standard library, plus pycdlib for the config drive (the clients venv has it).

It answers the agent's inspection data (POST /v1/continue_inspection; written to --inspection
as the agent sent it, the inventory with its bmc_address), its lookup (handing out a token) and
heartbeats on --bind:--port, serves the image at /images/<name>, writes one line per request to
--log (`<time> <client> <method> <path>`, as httpd.py does), and once the agent has
heartbeated, plays the conductor over the agent's HTTPS API: get_deploy_steps, write_image (the
image, its sha256, a config drive whose meta_data.json names --hostname), then power_off. One
line per step on stdout; exit 0 if all passed.

    standin_conductor.py --bind 198.51.100.1 --port 6385 --mac MAC --image FILE
                         --hostname NAME --log FILE --inspection FILE [--timeout 600]
"""
import argparse
import base64
import gzip
import hashlib
import http.server
import io
import json
import os
import random
import ssl
import sys
import threading
import time
import urllib.error
import urllib.request

NODE = '5d3b1d2e-7c4f-4e0a-9b7d-3f1e2c4a6b80'
TOKEN = 'lab-selftest-' + '%032x' % random.getrandbits(128)
heartbeats = []
heartbeat_seen = threading.Event()


def config_drive(hostname):
    """The config drive Ironic passes to the agent: an ISO 9660 labelled config-2 holding
    openstack/latest/meta_data.json, gzipped, base64."""
    import pycdlib
    meta = json.dumps({'uuid': NODE, 'name': hostname, 'hostname': hostname}).encode()
    iso = pycdlib.PyCdlib()
    iso.new(interchange_level=3, joliet=3, rock_ridge='1.09', vol_ident='config-2')
    iso.add_directory('/OPENSTACK', rr_name='openstack', joliet_path='/openstack')
    iso.add_directory('/OPENSTACK/LATEST', rr_name='latest', joliet_path='/openstack/latest')
    iso.add_fp(io.BytesIO(meta), len(meta), '/OPENSTACK/LATEST/META_DAT.JSO;1',
               rr_name='meta_data.json', joliet_path='/openstack/latest/meta_data.json')
    out = io.BytesIO()
    iso.write_fp(out)
    iso.close()
    return base64.b64encode(gzip.compress(out.getvalue())).decode()


class Api(http.server.BaseHTTPRequestHandler):
    protocol_version = 'HTTP/1.1'

    def log_message(self, *args):
        pass

    def record(self):
        with open(ARGS.log, 'a') as f:
            f.write('%.3f %s %s %s\n' % (time.time(), self.client_address[0], self.command,
                                         self.path))

    def reply(self, status, body=None, raw=None):
        data = raw if raw is not None else (b'' if body is None else json.dumps(body).encode())
        self.send_response(status)
        self.send_header('Content-Type', 'application/octet-stream' if raw else 'application/json')
        self.send_header('Content-Length', str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        self.record()
        path, _, query = self.path.partition('?')
        if path == '/images/' + os.path.basename(ARGS.image):
            with open(ARGS.image, 'rb') as f:
                return self.reply(200, raw=f.read())
        if path == '/':
            version = {'id': 'v1', 'version': '1.68', 'min_version': '1.1', 'status': 'CURRENT'}
            return self.reply(200, {'name': 'OpenStack Ironic API', 'versions': [version],
                                    'default_version': version})
        if path.rstrip('/') == '/v1/lookup' and ARGS.mac in query.lower().replace('%3a', ':'):
            token = TOKEN if not heartbeats else '******'
            return self.reply(200, {
                'node': {'uuid': NODE, 'properties': {}, 'instance_info': {},
                         'driver_internal_info': {}},
                'config': {'heartbeat_timeout': 300, 'agent_token': token,
                           'agent_token_required': True}})
        self.reply(404, {'error_message': 'not found'})

    def do_POST(self):
        self.record()
        body = json.loads(self.rfile.read(int(self.headers.get('Content-Length') or 0)) or b'{}')
        if self.path.rstrip('/') == '/v1/continue_inspection':
            # As Ironic's API does for a node it knows: the agent then looks it up by UUID.
            with open(ARGS.inspection + '.tmp', 'w') as f:
                json.dump(body, f, indent=1)
            os.replace(ARGS.inspection + '.tmp', ARGS.inspection)
            return self.reply(200, {'uuid': NODE})
        if self.path.rstrip('/') != '/v1/heartbeat/' + NODE:
            return self.reply(404, {'error_message': 'not found'})
        if body.get('agent_token') != TOKEN:
            return self.reply(401, {'error_message': 'bad token'})
        heartbeats.append(body)
        heartbeat_seen.set()
        self.reply(202)


class Agent:
    def __init__(self, heartbeat):
        self.url = heartbeat['callback_url'].rstrip('/')
        self.tls = ssl.create_default_context(cadata=heartbeat.get('agent_verify_ca'))

    def call(self, method, path, body=None, **query):
        query['agent_token'] = TOKEN
        url = '%s%s?%s' % (self.url, path, '&'.join('%s=%s' % kv for kv in query.items()))
        request = urllib.request.Request(
            url, method=method, data=None if body is None else json.dumps(body).encode(),
            headers={'Content-Type': 'application/json'})
        try:
            with urllib.request.urlopen(request, context=self.tls, timeout=30) as r:
                return r.status, json.loads(r.read() or b'null')
        except urllib.error.HTTPError as e:
            return e.code, None
        except OSError as e:  # power_off: the agent may vanish before it answers
            return 0, {'command_status': 'SUCCEEDED', 'command_error': str(e)}

    def command(self, name, params, timeout=600):
        status, result = self.call('POST', '/v1/commands/', {'name': name, 'params': params},
                                   wait='false')
        deadline = time.monotonic() + timeout
        while result and result.get('command_status') == 'RUNNING' \
                and time.monotonic() < deadline:
            time.sleep(1)
            status, result = self.call('GET', '/v1/commands/%s' % result['id'])
        return result or {}


def step(what, ok, detail=''):
    print('%s %s%s' % ('ok  ' if ok else 'FAIL', what, ' (%s)' % detail if detail else ''),
          flush=True)
    if not ok:
        sys.exit(1)


def conduct():
    started = time.monotonic()
    step('lookup and first heartbeat', heartbeat_seen.wait(ARGS.timeout),
         '%.1f s' % (time.monotonic() - started))
    agent = Agent(heartbeats[0])
    node = {'uuid': NODE, 'properties': {}, 'instance_info': {}, 'driver_internal_info': {}}
    ports = [{'address': ARGS.mac}]
    result = agent.command('deploy.get_deploy_steps', {'node': node, 'ports': ports})
    found = result.get('command_result') or {}
    names = {s['step'] for steps in (found.get('deploy_steps') or {}).values() for s in steps}
    versions = found.get('hardware_manager_version') or {}
    step('get_deploy_steps lists write_image', 'write_image' in names, sorted(versions))
    with open(ARGS.image, 'rb') as f:
        digest = hashlib.sha256(f.read()).hexdigest()
    info = {'id': 'lab-instance', 'urls': ['http://%s:%d/images/%s' % (
                ARGS.bind, ARGS.port, os.path.basename(ARGS.image))],
            'disk_format': 'qcow2', 'container_format': 'bare', 'image_type': 'whole-disk',
            'os_hash_algo': 'sha256', 'os_hash_value': digest, 'node_uuid': NODE}
    t = time.monotonic()
    result = agent.command('deploy.execute_deploy_step', {
        'step': {'interface': 'deploy', 'step': 'write_image', 'priority': 80,
                 'reboot_requested': False,
                 'args': {'image_info': info, 'configdrive': config_drive(ARGS.hostname)}},
        'node': node, 'ports': ports, 'deploy_version': versions})
    step('write_image (qcow2, sha256, config drive) to /dev/vda',
         result.get('command_status') == 'SUCCEEDED',
         '%.1f s' % (time.monotonic() - t) if result.get('command_status') == 'SUCCEEDED'
         else json.dumps(result)[:600])
    result = agent.command('standby.power_off', {}, timeout=60)
    step('standby.power_off', result.get('command_status') == 'SUCCEEDED',
         result.get('command_error') or '')


def main():
    global ARGS
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--bind', required=True)
    parser.add_argument('--port', type=int, required=True)
    parser.add_argument('--mac', required=True)
    parser.add_argument('--image', required=True)
    parser.add_argument('--hostname', required=True)
    parser.add_argument('--log', required=True)
    parser.add_argument('--inspection', required=True)
    parser.add_argument('--timeout', type=float, default=600)
    ARGS = parser.parse_args()
    ARGS.mac = ARGS.mac.lower()
    config_drive(ARGS.hostname)  # fail now, not after the boot, if pycdlib is missing
    server = http.server.ThreadingHTTPServer((ARGS.bind, ARGS.port), Api)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    conduct()


if __name__ == '__main__':
    main()
