#!/usr/bin/env python3
"""The house drawn from the code's imports: which files of `src/` use which (through `use`
paths and `crate::`/`super::` paths in the code, test modules left out), and every import
loop (strongly connected component of more than one file). Exits 1 when a loop other than the
allowed ones exists.

A folder's `mod.rs` is its index: it declares and re-exports its children, and (in `hpu/`,
`source/`, `loader/`) holds the folder's shared vocabulary (`Hpu`, `Source`, `Shared`) that
the children use. Those parent-child edges are left out by default (a child using its index
is the folder's vocabulary, not a loop between concepts); `--strict` counts them too.

    python3 scripts/import-cycles.py [--all] [--strict]    # --all: print every file's imports
"""
import os
import re
import sys

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src")
# One concept in two files: a batch and the engine jobs it submits and is completed by.
ALLOWED = [{"loader/batch.rs", "loader/engine.rs"}]


def module_of(path):
    rel = os.path.relpath(path, ROOT)[:-3]
    parts = rel.split(os.sep)
    if parts[-1] in ("mod", "lib", "main"):
        parts = parts[:-1]
    return parts


def file_of(parts, files):
    """The file that defines module `parts`, or of its longest prefix that is a file."""
    for n in range(len(parts), 0, -1):
        cand = "/".join(parts[:n])
        for f in (cand + ".rs", cand + "/mod.rs"):
            if f in files:
                return f
    return None


def strip_tests(text):
    i = text.find("#[cfg(test)]\nmod tests")
    return text if i < 0 else text[:i]


def main():
    files = {}
    for d, _, names in os.walk(ROOT):
        for n in names:
            if n.endswith(".rs"):
                p = os.path.join(d, n)
                files[os.path.relpath(p, ROOT).replace(os.sep, "/")] = p
    edges = {f: set() for f in files}
    path_re = re.compile(r"\b(crate|super|self)((?:::\w+)+)")
    brace_re = re.compile(r"\buse\s+(crate|super|self)((?:::\w+)*)::\{([^;]*)\};", re.S)
    for f, p in files.items():
        if f in ("lib.rs", "main.rs"):
            continue
        text = strip_tests(open(p).read())
        here = module_of(p)
        is_mod = os.path.basename(p) == "mod.rs"
        refs = []
        for m in brace_re.finditer(text):
            base = [m.group(1)] + [x for x in m.group(2).split("::") if x]
            for item in re.split(r",", m.group(3)):
                item = item.strip().split(" as ")[0]
                item = re.sub(r"[{}\s]", "", item)
                if item:
                    refs.append(base + item.split("::"))
        for m in path_re.finditer(text):
            refs.append([m.group(1)] + [x for x in m.group(2).split("::") if x])
        # A folder's index uses its children by bare relative paths (`use batch::BatchWork;`).
        if is_mod and "--strict" in sys.argv:
            children = {os.path.splitext(n)[0] for n in os.listdir(os.path.dirname(p))} - {"mod"}
            for m in re.finditer(r"\buse\s+(\w+)::", text):
                if m.group(1) in children:
                    refs.append(["self", m.group(1)])
        for r in refs:
            if r[0] == "crate":
                parts = r[1:]
            else:
                base = list(here) if is_mod else list(here[:-1]) if r[0] == "super" else list(here)
                if r[0] == "super" and is_mod:
                    base = base[:-1]
                if r[0] == "self" and not is_mod:
                    base = list(here)
                parts = base + r[1:]
                while parts and parts[0] == "super":
                    parts = parts[1:]
            target = file_of(parts, files)
            if target and target != f and target not in ("lib.rs",):
                # A `mod.rs` that only re-exports is its folder's index: follow it no further.
                edges[f].add(target)
    if "--all" in sys.argv:
        for f in sorted(edges):
            print(f, "->", ", ".join(sorted(edges[f])))
    # Tarjan's strongly connected components.
    index, low, stack, on, sccs, counter = {}, {}, [], set(), [], [0]
    sys.setrecursionlimit(10000)

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in edges[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = set()
            while True:
                w = stack.pop()
                on.discard(w)
                comp.add(w)
                if w == v:
                    break
            if len(comp) > 1:
                sccs.append(comp)

    for v in sorted(edges):
        if v not in index:
            visit(v)
    bad = [c for c in sccs if c not in ALLOWED]
    for c in sccs:
        print(("allowed loop: " if c in ALLOWED else "import loop: ") + " <-> ".join(sorted(c)))
    if not sccs:
        print("no import loops")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
