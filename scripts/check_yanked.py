#!/usr/bin/env python3
"""Fails when a Cargo.lock pins a crate version that crates.io has yanked.

The advisory half of scripts/check_deps.sh where the RustSec database
(github.com/rustsec/advisory-db) cannot be fetched: crates.io's sparse index
(https://index.crates.io) says per version whether its authors yanked it, which
is how broken and vulnerable releases are usually withdrawn.

    python3 scripts/check_yanked.py Cargo.lock fuzz/Cargo.lock

Prints one line per yanked crate and a closing line; exit 1 when any is yanked,
2 when the index cannot be read.
"""

import concurrent.futures
import json
import sys
import time
import tomllib
import urllib.error
import urllib.request

INDEX = "https://index.crates.io"
CRATES_IO = "registry+https://github.com/rust-lang/crates.io-index"


def index_path(name: str) -> str:
    """The sparse index's file for a crate (its naming rule by name length)."""
    n = name.lower()
    if len(n) <= 2:
        return f"{len(n)}/{n}"
    if len(n) == 3:
        return f"3/{n[0]}/{n}"
    return f"{n[:2]}/{n[2:4]}/{n}"


def yanked_versions(name: str) -> set[str]:
    # Three tries, 1 s and 4 s apart: one failed name lookup among hundreds of requests
    # (seen once on CI) is not a reason to fail the check.
    for wait in (1, 4, None):
        try:
            with urllib.request.urlopen(f"{INDEX}/{index_path(name)}", timeout=30) as r:
                lines = r.read().decode().splitlines()
            break
        except urllib.error.HTTPError:
            raise
        except OSError:
            if wait is None:
                raise
            time.sleep(wait)
    return {e["vers"] for e in map(json.loads, filter(None, lines)) if e.get("yanked")}


def main(locks: list[str]) -> int:
    pinned: set[tuple[str, str]] = set()
    for lock in locks:
        with open(lock, "rb") as f:
            for p in tomllib.load(f).get("package", []):
                if p.get("source") == CRATES_IO:
                    pinned.add((p["name"], p["version"]))
    names = sorted({n for n, _ in pinned})
    try:
        with concurrent.futures.ThreadPoolExecutor(16) as pool:
            yanked = dict(zip(names, pool.map(yanked_versions, names)))
    except OSError as e:
        print(f"check_yanked: cannot read the crates.io index ({e}); check the network and run again")
        return 2
    bad = sorted((n, v) for n, v in pinned if v in yanked[n])
    for n, v in bad:
        print(f"yanked: {n} {v} — run `cargo update -p {n}` to move off it")
    print(f"yanked check: {len(pinned)} crate versions from {len(locks)} lock files, {len(bad)} yanked")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:] or ["Cargo.lock"]))
