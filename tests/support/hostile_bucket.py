#!/usr/bin/env python3
"""A real HTTP server that misbehaves as a Cloud Storage bucket, for `gs://` tests.

It speaks the few routes of the Cloud Storage JSON API that stepscope uses (object
metadata, listing with pages, media download with `Range`) for bucket `prof`, and
misbehaves as --mode says. Point stepscope at it with
STORAGE_EMULATOR_HOST=http://127.0.0.1:PORT. It prints the port alone on the first
line of stdout (flushed) and serves until killed.

Modes (--mode):
    repeat-token  every listing page holds one profile and the same nextPageToken
    endless-list  the listing's body never ends (JSON written without end)
    no-range      lists one profile; its download ignores Range and sends --mib MiB
    huge-size     lists one profile whose size is 2**62 bytes
    many          lists --count copies of --file, served honestly (Range kept)
    new-token     every listing page is empty, with a new nextPageToken
    huge-token    the listing's first page holds a 30 MB nextPageToken
    huge-plane    host a is --file; host b (199 GiB) starts with a plane named
                  "Task Environment" that claims 100 GiB (zeros, sent as asked)

Example:
    python3 tests/support/hostile_bucket.py --mode many --count 300 --file x.xplane.pb
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

UPDATED = "2026-01-01T00:00:00.000Z"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mode", required=True,
                    choices=["repeat-token", "endless-list", "no-range", "huge-size", "many",
                             "new-token", "huge-token", "huge-plane"])
    ap.add_argument("--mib", type=int, default=1024)
    ap.add_argument("--count", type=int, default=300)
    ap.add_argument("--file")
    a = ap.parse_args()
    body = open(a.file, "rb").read() if a.file else b""

    def objects():
        if a.mode == "many":
            return [(f"logs/plugins/profile/2026_01_01_00_00_00/h{i:04}.xplane.pb", len(body)) for i in range(a.count)]
        if a.mode == "huge-plane":
            run = "logs/plugins/profile/2026_01_01_00_00_00/"
            return [(run + "a.xplane.pb", len(body)), (run + "b.xplane.pb", 199 << 30)]
        if a.mode == "huge-size":
            return [("logs/plugins/profile/2026_01_01_00_00_00/h.xplane.pb", 2 ** 62)]
        return [("logs/plugins/profile/2026_01_01_00_00_00/h.xplane.pb", 16 << 20)]

    def varint(v):
        out = bytearray()
        while True:
            b, v = v & 0x7F, v >> 7
            out.append(b | (0x80 if v else 0))
            if not v:
                return bytes(out)

    name = b"Task Environment"
    # Host b: field 1 (a plane) of 100 GiB whose id and name come first.
    plane_head = b"\x0a" + varint(100 << 30) + b"\x08\x01\x12" + varint(len(name)) + name
    pages = [0]

    def resource(name, size):
        return {"kind": "storage#object", "name": name, "bucket": "prof", "size": str(size), "updated": UPDATED}

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args):
            pass

        def send_json(self, doc):
            data = json.dumps(doc).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self):
            url = urllib.parse.urlsplit(self.path)
            path = urllib.parse.unquote(url.path)
            try:
                if path == "/storage/v1/b/prof/o":
                    self.listing()
                elif path.startswith("/storage/v1/b/prof/o/"):
                    name = path[len("/storage/v1/b/prof/o/"):]
                    found = [resource(n, s) for n, s in objects() if n == name]
                    if found:
                        self.send_json(found[0])
                    else:
                        self.send_response(404)
                        self.send_header("Content-Length", "0")
                        self.end_headers()
                elif path.startswith("/download/storage/v1/b/prof/o/"):
                    self.download()
                else:
                    self.send_response(404)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
            except (BrokenPipeError, ConnectionResetError):
                pass

        def listing(self):
            if a.mode == "new-token":
                pages[0] += 1
                self.send_json({"items": [], "nextPageToken": f"page{pages[0]}"})
            elif a.mode == "huge-token":
                name, size = objects()[0]
                self.send_json({"items": [resource(name, size)], "nextPageToken": "t" * (30 << 20)})
            elif a.mode == "repeat-token":
                name, size = objects()[0]
                self.send_json({"items": [resource(name, size)], "nextPageToken": "again"})
            elif a.mode == "endless-list":
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.end_headers()
                self.wfile.write(b'{"items": [')
                item = json.dumps(resource("logs/x.xplane.pb", 1)).encode() + b","
                chunk = item * 4096
                while True:
                    self.wfile.write(chunk)
            else:
                self.send_json({"items": [resource(n, s) for n, s in objects()]})

        def download(self):
            if a.mode == "huge-plane" and self.path.split("?")[0].endswith("b.xplane.pb"):
                m = re.match(r"bytes=(\d+)-(\d+)", self.headers.get("Range", ""))
                start, end = (int(m.group(1)), int(m.group(2)) + 1) if m else (0, 199 << 30)
                self.send_response(206 if m else 200)
                self.send_header("Content-Length", str(end - start))
                self.end_headers()
                head = plane_head[start:end] if start < len(plane_head) else b""
                self.wfile.write(head)
                left = end - start - len(head)
                zeros = b"\0" * (1 << 20)
                while left > 0:
                    n = min(left, len(zeros))
                    self.wfile.write(zeros[:n])
                    left -= n
                return
            if a.mode == "no-range":
                total = a.mib << 20
                self.send_response(200)
                self.send_header("Content-Length", str(total))
                self.end_headers()
                chunk = b"\0" * (1 << 20)
                for _ in range(a.mib):
                    self.wfile.write(chunk)
                return
            m = re.match(r"bytes=(\d+)-(\d+)", self.headers.get("Range", ""))
            start, end = (int(m.group(1)), int(m.group(2)) + 1) if m else (0, len(body))
            part = body[start:end]
            self.send_response(206 if m else 200)
            self.send_header("Content-Length", str(len(part)))
            self.end_headers()
            self.wfile.write(part)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    print(server.server_address[1], flush=True)
    server.serve_forever()


if __name__ == "__main__":
    sys.exit(main())
