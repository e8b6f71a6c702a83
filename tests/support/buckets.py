"""Object-storage emulators for the gs:// and s3:// tests, on 127.0.0.1.

    python3 tests/support/buckets.py DIR [DIR ...]

Starts, each on a free port:
  - gcp-storage-emulator (PyPI), in memory: a Cloud Storage JSON API;
  - moto in server mode (PyPI `moto[server]`): S3, any credentials accepted;
  - a second moto that accepts no credentials (every request denied);
  - a TCP listener that accepts connections and never answers (a stalled endpoint).
Creates the bucket `prof` in both emulators and uploads each DIR (a folder of the
repository, e.g. tests/fixtures/gpu-nocb) under the key prefix `logs/<folder name>/`,
every file as it is. Prints one line of JSON: the ports and the uploaded keys with
their sizes. Runs until its standard input closes, then stops everything.
"""
import json
import os
import socket
import subprocess
import sys
import threading
import time
import urllib.parse
import urllib.request


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_http(url, timeout=120):
    end = time.time() + timeout
    while time.time() < end:
        try:
            urllib.request.urlopen(url, timeout=2).read()
            return
        except Exception:
            time.sleep(0.1)
    raise SystemExit(f"buckets.py: {url} did not come up in {timeout} s")


def request(method, url, data=None, headers=None):
    req = urllib.request.Request(url, data=data, method=method, headers=headers or {})
    with urllib.request.urlopen(req, timeout=30) as r:
        return r.read()


def stall(sock):
    held = []
    while True:
        try:
            conn, _ = sock.accept()
            held.append(conn)
        except OSError:
            return


def main():
    dirs = sys.argv[1:]
    procs = []
    gcs_port, s3_port, deny_port = free_port(), free_port(), free_port()
    env = dict(os.environ)
    procs.append(subprocess.Popen(
        [sys.executable, "-m", "gcp_storage_emulator", "start", "--host", "127.0.0.1", "--port", str(gcs_port), "--in-memory"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env))
    procs.append(subprocess.Popen(
        [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(s3_port)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env))
    procs.append(subprocess.Popen(
        [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(deny_port)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env={**env, "INITIAL_NO_AUTH_ACTION_COUNT": "0"}))
    stall_sock = socket.socket()
    stall_sock.bind(("127.0.0.1", 0))
    stall_sock.listen(64)
    threading.Thread(target=stall, args=(stall_sock,), daemon=True).start()
    try:
        gcs = f"http://127.0.0.1:{gcs_port}"
        s3 = f"http://127.0.0.1:{s3_port}"
        wait_http(gcs + "/")
        wait_http(s3 + "/moto-api/")
        request("POST", gcs + "/storage/v1/b", json.dumps({"name": "prof"}).encode(), {"Content-Type": "application/json"})
        import boto3  # moto's own dependency
        s3c = boto3.client("s3", endpoint_url=s3, aws_access_key_id="test", aws_secret_access_key="test",
                           region_name="us-east-1")
        s3c.create_bucket(Bucket="prof")
        uploaded = {}
        for d in dirs:
            base = os.path.basename(os.path.normpath(d))
            for root, _, files in os.walk(d):
                for f in sorted(files):
                    path = os.path.join(root, f)
                    key = "logs/" + base + "/" + os.path.relpath(path, d).replace(os.sep, "/")
                    with open(path, "rb") as fh:
                        body = fh.read()
                    q = urllib.parse.urlencode({"uploadType": "media", "name": key})
                    request("POST", f"{gcs}/upload/storage/v1/b/prof/o?{q}", body, {"Content-Type": "application/octet-stream"})
                    s3c.put_object(Bucket="prof", Key=key, Body=body)
                    uploaded[key] = len(body)
        print(json.dumps({"gcs_port": gcs_port, "s3_port": s3_port, "deny_port": deny_port,
                          "stall_port": stall_sock.getsockname()[1], "uploaded": uploaded}), flush=True)
        sys.stdin.read()
    finally:
        stall_sock.close()
        for p in procs:
            p.terminate()
        for p in procs:
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()


if __name__ == "__main__":
    main()
