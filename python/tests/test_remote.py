"""`stepscope.load` of gs:// and s3:// URLs, against the emulators the Rust tests use
(tests/support/buckets.py: gcp-storage-emulator and moto): the same numbers as the
local copy, the files cached under $XDG_CACHE_HOME."""
import json
import subprocess
import sys

import pytest

import stepscope
from conftest import FIXTURES, REPO

NOCB = FIXTURES / "gpu-nocb"

pytest.importorskip("moto", reason="moto[server] (tests/support/requirements.txt) is needed for the emulators")
pytest.importorskip("gcp_storage_emulator", reason="gcp-storage-emulator (tests/support/requirements.txt) is needed")


@pytest.fixture(scope="module")
def buckets():
    p = subprocess.Popen([sys.executable, str(REPO / "tests/support/buckets.py"), str(NOCB)],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    info = json.loads(p.stdout.readline())
    yield info
    p.stdin.close()
    p.wait(timeout=30)


@pytest.mark.parametrize("scheme", ["gs", "s3"])
def test_load_of_a_bucket_equals_the_local_copy(buckets, scheme, monkeypatch, tmp_path):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    if scheme == "gs":
        monkeypatch.setenv("STORAGE_EMULATOR_HOST", f"http://127.0.0.1:{buckets['gcs_port']}")
    else:
        for k, v in {"AWS_ENDPOINT_URL": f"http://127.0.0.1:{buckets['s3_port']}", "AWS_ALLOW_HTTP": "true",
                     "AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test", "AWS_REGION": "us-east-1"}.items():
            monkeypatch.setenv(k, v)
    remote = stepscope.load(f"{scheme}://prof/logs/gpu-nocb")
    local = stepscope.load(NOCB)
    assert remote.summary() == local.summary()
    assert remote.ops(top=None).raw == local.ops(top=None).raw
    assert (tmp_path / "stepscope/remote" / scheme / "prof/logs/gpu-nocb").is_dir()


def test_a_missing_bucket_is_one_clear_error(buckets, monkeypatch, tmp_path):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.setenv("STORAGE_EMULATOR_HOST", f"http://127.0.0.1:{buckets['gcs_port']}")
    with pytest.raises(Exception, match='no bucket named "nobucket"'):
        stepscope.load("gs://nobucket/logs")
