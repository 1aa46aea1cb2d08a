#!/usr/bin/env python3
"""A small HTTP server for the lab's selftest: serves files from --root (if given) and writes
one line per request to --log: `<unix time> <client ip> <method> <path>`. Anything it cannot
serve is a 404 (so, pointed at as the agent's ipa-api-url, it records the agent's requests).

    httpd.py --bind 198.51.100.1 --port 8080 [--root DIR] --log FILE
"""
import argparse
import http.server
import os
import socketserver
import time


class Handler(http.server.SimpleHTTPRequestHandler):
    def record(self):
        with open(self.server.request_log, "a") as f:
            f.write("%.3f %s %s %s\n" % (time.time(), self.client_address[0], self.command,
                                         self.path))

    def do_GET(self):
        self.record()
        if self.server.root is None:
            self.send_error(404)
        else:
            super().do_GET()

    def do_HEAD(self):
        self.record()
        if self.server.root is None:
            self.send_error(404)
        else:
            super().do_HEAD()

    def do_POST(self):
        self.record()
        self.send_error(404)

    do_PUT = do_POST

    def translate_path(self, path):
        # Serve from --root, whatever the working directory.
        relative = super().translate_path(path)[len(os.getcwd()):]
        return self.server.root + relative

    def log_message(self, fmt, *args):
        pass


class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True
    allow_reuse_address = True


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--bind", required=True)
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--root")
    p.add_argument("--log", required=True)
    a = p.parse_args()
    server = Server((a.bind, a.port), Handler)
    server.root = os.path.abspath(a.root) if a.root else None
    server.request_log = a.log
    server.serve_forever()


if __name__ == "__main__":
    main()
