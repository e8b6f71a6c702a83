#!/usr/bin/env python3
"""Checks the layering docs/architecture.md promises, reading the crates' sources as text:

1. no import circle among the files of a library crate: file A uses file B when A names
   a path `crate::b::…` or `super::…` that resolves to B's module (tests excluded);
2. no function under crates/ longer than 200 lines (`fn` line to closing brace);
3. each crate depends only on the crates below it (its Cargo.toml), in the order
   xspace < model < analysis < judge < report < the surfaces.

    scripts/check_layers.py [REPO]

Prints one line per breach and a closing `layers checks: N passed, M failed`; exits 1 on a
breach. The binary crate's commands (crates/cli/src/cmd) share what more than one needs
through `opts.rs` and the library crates, not by importing each other in a circle.
"""
import os
import re
import sys

MAX_FN_LINES = 200
# Lower first; a crate may depend on those before it in its own list.
LAYERS = ["xspace", "model", "analysis", "judge", "report"]


def code_only(text):
    """The text with comments, strings and char literals blanked (newlines kept) and any
    `#[cfg(test)]` module cut off, so only code is scanned."""
    out = []
    i, n = 0, len(text)
    while i < n:
        two = text[i:i + 2]
        c = text[i]
        if two == "//":
            j = text.find("\n", i)
            i = n if j < 0 else j
        elif two == "/*":
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append("\n" * text.count("\n", i, j))
            i = j
        elif c == "r" and re.match(r'r#*"', text[i:i + 8]) and (i == 0 or not re.match(r"\w", text[i - 1])):
            hashes = re.match(r'r(#*)"', text[i:]).group(1)
            j = text.find('"' + hashes, i + 2 + len(hashes))
            j = n if j < 0 else j + 1 + len(hashes)
            out.append('""' + "\n" * text.count("\n", i, j))
            i = j
        elif c == '"':
            j = i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            out.append('""' + "\n" * text.count("\n", i, j))
            i = j + 1
        elif c == "'" and re.match(r"'(\\.|\\u\{\w+\}|[^\\'])'", text[i:i + 12]):
            m = re.match(r"'(\\.|\\u\{\w+\}|[^\\'])'", text[i:i + 12])
            out.append("' '")
            i += len(m.group(0))
        else:
            out.append(c)
            i += 1
    code = "".join(out)
    cut = re.search(r"#\[cfg\(test\)\]\s*(pub\s+)?mod\s+\w+\s*\{", code)
    return code[:cut.start()] if cut else code


def module_files(src):
    """module path (tuple) -> file, for every .rs file under src."""
    mods = {}
    for root, _, files in os.walk(src):
        for f in files:
            if f.endswith(".rs"):
                path = os.path.join(root, f)
                parts = os.path.relpath(path, src)[:-3].split(os.sep)
                if parts[-1] in ("lib", "main", "mod"):
                    parts = parts[:-1]
                mods[tuple(parts)] = path
    return mods


def uses(code, me, mods):
    """The modules (of `mods`) other than `me` that `code` names."""
    found = set()
    paths = [(m.group(1), m.group(2)) for m in re.finditer(r"\b(crate|super)((?:\s*::\s*\w+)+)", code)]
    for group in re.finditer(r"\buse\s+crate\s*::\s*\{(.*?)\}\s*;", code, flags=re.S):
        for item in group.group(1).split(","):
            head = item.strip().split("::")[0].strip()
            if head:
                paths.append(("crate", "::" + head))
    for root, rest in paths:
        names = [p for p in re.split(r"\s*::\s*", rest) if p]
        base = () if root == "crate" else me[:-1]
        full = base + tuple(names)
        for k in range(len(full), 0, -1):
            if full[:k] in mods:
                if full[:k] != me:
                    found.add(full[:k])
                break
    return found


def circles(graph):
    """Strongly connected components of more than one node (iterative Tarjan)."""
    index, low, on, stack, out, counter = {}, {}, set(), [], [], [0]
    for start in graph:
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = counter[0]
        counter[0] += 1
        stack.append(start)
        on.add(start)
        while work:
            v, children = work[-1]
            advanced = False
            for w in children:
                if w not in index:
                    index[w] = low[w] = counter[0]
                    counter[0] += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(graph.get(w, ())))))
                    advanced = True
                    break
                if w in on:
                    low[v] = min(low[v], index[w])
            if advanced:
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    out.append(sorted(comp))
    return out


def long_functions(path, code):
    lines = code.split("\n")
    for i, line in enumerate(lines):
        m = re.match(r"\s*(?:pub(?:\([\w:]+\))?\s+)?(?:const\s+)?(?:async\s+)?(?:unsafe\s+)?fn\s+(\w+)", line)
        if not m:
            continue
        depth, opened = 0, False
        for j in range(i, len(lines)):
            if not opened and ";" in lines[j] and "{" not in lines[j]:
                break
            depth += lines[j].count("{") - lines[j].count("}")
            opened = opened or "{" in lines[j]
            if opened and depth <= 0:
                if j - i + 1 > MAX_FN_LINES:
                    yield f"{path}:{i + 1}: fn {m.group(1)} is {j - i + 1} lines (at most {MAX_FN_LINES})"
                break


def crate_deps(manifest):
    text = open(manifest, encoding="utf-8").read()
    return set(re.findall(r"^stepscope-(\w+)\s*(?:\.workspace|=)", text, flags=re.M))


def main():
    repo = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..")
    crates_dir = os.path.join(repo, "crates")
    passed, failures = 0, []
    for crate in sorted(os.listdir(crates_dir)):
        src = os.path.join(crates_dir, crate, "src")
        if not os.path.isdir(src):
            continue
        mods = module_files(src)
        graph = {}
        long = []
        for mod, path in mods.items():
            code = code_only(open(path, encoding="utf-8").read())
            graph[mod] = uses(code, mod, mods)
            long += list(long_functions(os.path.relpath(path, repo), code))
        failures += long
        passed += not long
        if os.path.exists(os.path.join(src, "lib.rs")):
            rings = circles(graph)
            for ring in rings:
                names = "  <->  ".join(os.path.relpath(mods[m], repo) for m in ring)
                failures.append(f"crates/{crate}: files import each other in a circle: {names}")
            passed += not rings
        if crate in LAYERS:
            above = set(LAYERS[LAYERS.index(crate):]) - {crate}
            wrong = crate_deps(os.path.join(crates_dir, crate, "Cargo.toml")) & (above | {"server", "cli", "export"})
            for w in sorted(wrong):
                failures.append(f"crates/{crate} depends on stepscope-{w}, a layer above it")
            passed += not wrong
    for f in failures:
        print(f)
    print(f"layers checks: {passed} passed, {len(failures)} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
