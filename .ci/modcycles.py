#!/usr/bin/env python3
"""Import circles between the files of each crate, and between crates.

A circle of files (A uses B, B uses C, C uses A) means none of them can be read, tested or moved
without the others: the room has more than one job. This lists every strongly connected set of
files per crate and fails when one is larger than the limit (--max, 4 files by default).

An edge A -> B is a path that names an item of B from A's non-test code: `crate::b::Item`,
`super::b`, `use crate::{b::Item, ..}`. A name re-exported by a `pub use` in lib.rs or a mod.rs
is followed to the file that defines it, so `crate::Error` counts against error.rs and not
against lib.rs. Test code (`#[cfg(test)] mod ..` blocks and files named *_tests.rs or tests.rs)
is left out: tests may reach anything. Declaring a module (`mod b;`) is not a use of it.

Usage: modcycles.py [--max N] [--crate NAME ...] [--verbose]
"""

import argparse
import pathlib
import re
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent


def strip_comments_and_strings(text):
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    text = re.sub(r"//[^\n]*", " ", text)
    text = re.sub(r'r#*"(?:.|\n)*?"#*', '""', text)
    text = re.sub(r'"(?:\\.|[^"\\])*"', '""', text)
    text = re.sub(r"'(?:\\.|[^'\\])'", "' '", text)
    return text


def drop_test_blocks(text):
    """Remove `#[cfg(test)] mod name { ... }` blocks (balanced braces)."""
    out = []
    i = 0
    pattern = re.compile(r"#\[cfg\(test\)\]\s*(?:#\[[^\]]*\]\s*)*(?:pub(?:\([^)]*\))?\s+)?mod\s+\w+\s*\{")
    while True:
        m = pattern.search(text, i)
        if not m:
            out.append(text[i:])
            break
        out.append(text[i:m.start()])
        depth = 1
        j = m.end()
        while j < len(text) and depth:
            if text[j] == "{":
                depth += 1
            elif text[j] == "}":
                depth -= 1
            j += 1
        i = j
    return "".join(out)


def module_files(src):
    """Map module path tuples to files: () is lib.rs/main.rs, ("a","b") is a/b.rs or a/b/mod.rs."""
    mods = {}
    for f in src.rglob("*.rs"):
        rel = f.relative_to(src)
        parts = list(rel.with_suffix("").parts)
        if parts == ["lib"] or parts == ["main"]:
            key = ()
        elif parts[-1] == "mod":
            key = tuple(parts[:-1])
        else:
            key = tuple(parts)
        if parts[0] == "bin":
            continue
        mods[key] = f
    return mods


def is_test_file(path):
    return path.name.endswith("_tests.rs") or path.name == "tests.rs" or "tests" in path.parts[:-1]


def expand_use_tree(tree):
    """`a::{b::{c, d}, e}` -> ["a::b::c", "a::b::d", "a::e"]."""
    tree = tree.strip()
    m = re.match(r"^(.*?)\{(.*)\}$", tree, flags=re.S)
    if not m:
        return [re.sub(r"\s+as\s+\w+$", "", tree).strip()]
    prefix, inner = m.group(1), m.group(2)
    parts, depth, cur = [], 0, ""
    for ch in inner:
        if ch == "," and depth == 0:
            parts.append(cur)
            cur = ""
            continue
        if ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
        cur += ch
    parts.append(cur)
    out = []
    for p in parts:
        if p.strip():
            for e in expand_use_tree(p):
                out.append(prefix + e if e != "self" else prefix.rstrip(":"))
    return out


def paths_in(text, here):
    """Absolute module paths (tuples of names, maybe ending in an item) that `here` names."""
    found = []
    for m in re.finditer(r"\buse\s+((?:crate|super|self)::[^;]*);", text, flags=re.S):
        for p in expand_use_tree(m.group(1)):
            found.append(p)
    for m in re.finditer(r"\b((?:crate|super|self)(?:::\w+)+)", text):
        found.append(m.group(1))
    out = []
    for p in found:
        parts = [x for x in re.split(r"::", p.replace(" ", "").replace("\n", "")) if x]
        base = list(here)
        if parts and parts[0] == "crate":
            base, parts = [], parts[1:]
        else:
            while parts and parts[0] in ("super", "self"):
                if parts[0] == "super":
                    base = base[:-1]
                parts = parts[1:]
        out.append(tuple(base + parts))
    return out


def reexports(mods, texts):
    """`pub use a::B;` in a module file: (module, "B") -> absolute path of what it names."""
    alias = {}
    for key, text in texts.items():
        for m in re.finditer(r"\bpub(?:\([^)]*\))?\s+use\s+([^;]*);", text, flags=re.S):
            for p in expand_use_tree(m.group(1)):
                p = p.replace(" ", "").replace("\n", "")
                name = p.split("::")[-1]
                parts = p.split("::")
                if parts[0] == "crate":
                    target = tuple(parts[1:])
                elif parts[0] in ("super", "self"):
                    base = list(key)
                    while parts and parts[0] in ("super", "self"):
                        if parts[0] == "super":
                            base = base[:-1]
                        parts = parts[1:]
                    target = tuple(base + parts)
                elif parts[0] in [k[len(key)] for k in mods if len(k) > len(key) and k[: len(key)] == key]:
                    target = tuple(list(key) + parts)
                else:
                    continue
                alias[key + (name,)] = target
    return alias


def resolve(path, mods, alias, depth=0):
    """The file (module key) that defines what `path` names."""
    if depth > 8:
        return None
    for n in range(len(path), -1, -1):
        prefix = path[:n]
        if prefix in mods:
            if n < len(path) and prefix + (path[n],) in alias:
                return resolve(alias[prefix + (path[n],)] + path[n + 1:], mods, alias, depth + 1)
            return prefix
    return None


def tarjan(graph):
    index, low, stack, on, out = {}, {}, [], set(), []
    counter = [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            out.append(comp)

    sys.setrecursionlimit(10000)
    for v in list(graph):
        if v not in index:
            visit(v)
    return out


def crate_graph(crate_dir):
    src = crate_dir / "src"
    mods = module_files(src)
    texts = {k: drop_test_blocks(strip_comments_and_strings(f.read_text())) for k, f in mods.items()}
    alias = reexports(mods, texts)
    graph = {}
    for key, text in texts.items():
        if is_test_file(mods[key].relative_to(src)):
            continue
        edges = set()
        for p in paths_in(text, key):
            t = resolve(p, mods, alias)
            if t is not None and t != key and not is_test_file(mods[t].relative_to(src)):
                edges.add(t)
        graph[key] = edges
    return mods, graph


def name_of(key):
    return "/".join(key) if key else "lib"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--max", type=int, default=4, help="largest circle allowed, in files")
    ap.add_argument("--crate", action="append", help="only these crates (folder names)")
    ap.add_argument("--verbose", action="store_true", help="list every circle, not only the large")
    args = ap.parse_args()
    crates = sorted(p for p in (ROOT / "crates").iterdir() if (p / "src").is_dir())
    if args.crate:
        crates = [c for c in crates if c.name in args.crate]
    failed = False
    for crate in crates:
        mods, graph = crate_graph(crate)
        circles = sorted((c for c in tarjan(graph) if len(c) > 1), key=len, reverse=True)
        largest = len(circles[0]) if circles else 1
        print(f"{crate.name}: {len(mods)} files, largest import circle {largest}")
        for c in circles:
            if len(c) > args.max or args.verbose:
                print("  circle of %d: %s" % (len(c), ", ".join(sorted(name_of(k) for k in c))))
            if len(c) > args.max:
                failed = True
    if failed:
        print(f"an import circle has more than {args.max} files: break it (move the shared part "
              "down into a module both use, or pass it in)", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
