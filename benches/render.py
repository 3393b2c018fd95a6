#!/usr/bin/env python3
"""Fills docs/BENCHMARKS.md's generated tables from the benchmark scripts' JSON results.

Each generated table sits between two marker lines:

    <!-- generated from benches/results/NAME.json by benches/render.py -->
    ...
    <!-- end of generated table -->

and is rewritten from that file by the renderer registered for NAME below. Run it after a
benchmark script wrote its JSON: `python3 benches/render.py` (or `--check` to fail when the page
is out of date with the results, without writing).
"""
import json
import pathlib
import re
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
PAGE = ROOT / "docs" / "BENCHMARKS.md"
MARK = re.compile(
    r"(<!-- generated from benches/results/(?P<name>[a-z0-9_]+)\.json by benches/render\.py -->\n)"
    r"(?P<body>.*?)"
    r"(<!-- end of generated table -->)",
    re.S,
)


def ratio(q):
    return f"{q['median']:.3f}x [{q['min']:.3f}-{q['max']:.3f}]"


def emu_ab(d):
    """Two builds of the emulator against the kernel bridge, round by round."""
    n = len(d["rounds"])
    old, new = d["summary"]["old"], d["summary"]["new"]
    rows = [
        "| build | throughput / kernel bridge, median [min-max] over "
        f"{n} rounds | geometric mean |",
        "|---|---|---|",
        f"| before (`{d['old']}`) | {ratio(old)} | {old['geometric_mean']:.3f}x |",
        f"| this commit (`{d['commit']}`) | {ratio(new)} | {new['geometric_mean']:.3f}x |",
        "",
        f"This commit ahead in {d['new_above_old']} of {n} rounds. {d['what']}. "
        f"{d['date']} UTC, `{d['command']}`.",
    ]
    return "\n".join(rows) + "\n"


RENDERERS = {"emu_ab": emu_ab}


def render(page):
    def one(m):
        name = m.group("name")
        path = ROOT / "benches" / "results" / f"{name}.json"
        if name not in RENDERERS:
            sys.exit(f"render.py: no renderer for {name}: add one to RENDERERS")
        if not path.exists():
            sys.exit(f"render.py: {path} is missing: run the benchmark that writes it")
        body = RENDERERS[name](json.loads(path.read_text()))
        return m.group(1) + body + m.group(4)

    return MARK.sub(one, page)


def main():
    page = PAGE.read_text()
    new = render(page)
    if "--check" in sys.argv[1:]:
        if new != page:
            sys.exit("docs/BENCHMARKS.md is out of date with benches/results: run benches/render.py")
        return
    if new != page:
        PAGE.write_text(new)
        print("docs/BENCHMARKS.md: tables rewritten")


if __name__ == "__main__":
    main()
