#!/usr/bin/env python3
"""Fills docs/BENCHMARKS.md's generated tables from the benchmark scripts' JSON results.

Each generated table sits between two marker lines:

    <!-- generated from benches/results/NAME.json by benches/render.py -->
    ...
    <!-- end of generated table -->

and is rewritten from that file by the renderer registered for NAME below (the files' layout:
benches/results_lib.py). Run it after a benchmark script wrote its JSON: `python3
benches/render.py` (or `--check` to fail when the page is out of date with the results, without
writing). `--page FILE` and `--results DIR` render another copy of the page, or from results
written elsewhere (a script run with RESULTS_DIR=DIR; files not there are taken from
benches/results).
"""
import argparse
import json
import pathlib
import re
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
MARK = re.compile(
    r"(<!-- generated from benches/results/(?P<name>[a-z0-9_]+)\.json by benches/render\.py -->\n)"
    r"(?P<body>.*?)"
    r"(<!-- end of generated table -->)",
    re.S,
)


def num(v, unit=""):
    """A figure at the precision its size deserves, without trailing zeros."""
    if v is None:
        return "—"
    if isinstance(v, bool):
        return "yes" if v else "no"
    if not isinstance(v, (int, float)):
        return str(v)
    if unit == "x":
        return f"{v:.3f}"
    if isinstance(v, int) or abs(v) >= 1000:
        return f"{v:,.0f}"
    a = abs(v)
    text = f"{v:.{3 if a < 10 else 2 if a < 100 else 1}f}"
    return text.rstrip("0").rstrip(".") if "." in text else text


def with_unit(text, unit):
    if not unit:
        return text
    return f"{text}x" if unit == "x" else f"{text} {unit}"


def figure(side, unit="", rounds=True):
    """median [min-max], or median (p90 X), or count of N: what the side carries."""
    if not side:
        return "—"
    if "count" in side:
        return f"{side['count']} of {side['of']}"
    med = side.get("median")
    lo, hi, n = side.get("min"), side.get("max"), side.get("n")
    if med is None and lo is not None and hi is not None and lo != hi:
        text = with_unit(f"{num(lo, unit)}-{num(hi, unit)}", unit)
    elif med is None:
        text = with_unit(num(lo if lo is not None else hi, unit), unit)
    else:
        text = with_unit(num(med, unit), unit)
        if lo is not None and hi is not None and n and n > 1 and lo != hi:
            text += f" [{num(lo, unit)}-{num(hi, unit)}]"
        elif side.get("p90") is not None:
            text += f" (p90 {num(side['p90'], unit)})"
    if rounds and n and n > 1:
        text += f", N={n}"
    return text


def ratio_cell(g):
    r = g.get("ratio") or {}
    if "median" in r and r.get("n", 0) > 1:
        return f"{r['median']:.3f}x [{r['min']:.3f}-{r['max']:.3f}]"
    if "of_medians" in r:
        return f"{r['of_medians']:.3f}x"
    return "—"


def caption(d, extra=""):
    """Where the table's figures come from: date, commit, command, machine, and whether they
    were transcribed from an older text output rather than written by the script."""
    m = d.get("machine") or {}
    facts = []
    if m.get("nproc"):
        facts.append(f"{m['nproc']} CPUs")
    if m.get("kernel"):
        facts.append(f"kernel {m['kernel']}")
    ls, le = m.get("load_start"), m.get("load_end")
    if ls or le:
        facts.append(f"load average {ls[0] if ls else '?'} at the start, {le[0] if le else '?'} at the end")
    commit = f"`{d['commit']}`" if d.get("commit") else (
        f"commit not recorded (figures first on the page in `{d['recorded_in']}`)"
        if d.get("recorded_in") else "commit not recorded")
    text = f"{d['date']} UTC, {commit}, `{d['command']}`"
    if facts:
        text += "; " + ", ".join(facts)
    text += "."
    if extra:
        text = extra + " " + text
    if d.get("source"):
        source = re.sub(r"^transcribed ", "", d["source"])
        text += f" **Transcribed** {source}."
    return "\n" + text + "\n"


def goals(d, prefix=""):
    return [g for g in d["goals"] if g["id"].startswith(prefix)]


def goal(d, gid):
    for g in d["goals"]:
        if g["id"] == gid:
            return g
    return None


def pairs_table(d, first="measure", ids=None, show_target=True):
    """One row per goal: tcplab against its peer, the ratio of the medians, the goal."""
    rows = [f"| {first} | tcplab | peer | ratio | goal |" if show_target
            else f"| {first} | tcplab | peer | ratio |",
            "|---|---|---|---|---|" if show_target else "|---|---|---|---|"]
    for g in d["goals"]:
        if ids is not None and g["id"] not in ids:
            continue
        unit = g.get("unit", "")
        t, p = g.get("tcplab") or {}, g.get("peer")
        tcell = figure(t, unit)
        pcell = f"{p.get('name', '')}: {figure(p, unit)}" if p else "—"
        cells = [g.get("label", g["id"]), tcell, pcell, ratio_cell(g)]
        if show_target:
            cells.append(g.get("target", ""))
        rows.append("| " + " | ".join(cells) + " |")
    return "\n".join(rows) + "\n"


def lab_updown(d):
    """Lab build and teardown: tcplab against the same lab built with ip(8)."""
    rows = ["| lab | tcplab, median [min-max] | ip(8) commands | ratio |", "|---|---|---|---|"]
    for g in d["goals"]:
        p = g.get("peer")
        rows.append(f"| {g['label']} | {figure(g['tcplab'], 'ms')} | "
                    f"{figure(p, 'ms') if p else '—'} | {ratio_cell(g) if p else '—'} |")
    n = (goal(d, "path_up") or {}).get("tcplab", {}).get("n")
    return "\n".join(rows) + "\n" + caption(d, f"{n} cycles of each.")


def emu(d):
    """The emulator against the kernel bridge, one row per goal, then the delay rows."""
    rows = ["| goal | emulator | peer | ratio or excess | target | met? |", "|---|---|---|---|---|---|"]

    def row(label, t, p, r, target, met):
        rows.append(f"| {label} | {t} | {p} | {r} | {target} | {met} |")

    g = goal(d, "throughput")
    if g:
        r = g.get("ratio", {})
        met = "yes" if r.get("median", 0) >= 0.9 else "no"
        row(g["label"], figure(g['tcplab'], "Gbit/s"), f"kernel bridge {figure(g['peer'], 'Gbit/s')}",
            ratio_cell(g) + (f", {r['at_least_0_9']} rounds ≥ 0.9x" if r.get("at_least_0_9") else ""),
            "≥ 0.9x by the median", met)
    g = goal(d, "udp64")
    if g:
        row(g["label"], f"{figure(g['tcplab'], 'kpps')} forwarded (its receiver read "
            f"{num(g.get('emulator_received_kpps'))})", f"kernel bridge {figure(g['peer'], 'kpps')} received",
            ratio_cell(g), "reported", "—")
    g = goal(d, "offloads")
    if g:
        row(g["label"], figure(g['tcplab'], "Gbit/s"), f"kernel bridge {figure(g['peer'], 'Gbit/s')}",
            ratio_cell(g), "reported", "—")
    for rate in ("100mbit", "1gbit"):
        g = goal(d, f"rate_{rate}")
        if g:
            conf = g.get("configured_mbit")
            t = g["tcplab"].get("median")
            off = f"{100 * (t - conf) / conf:+.2f} %" if t is not None and conf else "—"
            met = "yes" if t is not None and conf and abs(t - conf) <= conf / 100 else "no"
            row(g["label"], figure(g['tcplab'], "Mbit/s"), f"{g['peer']['name']}: {figure(g['peer'], 'Mbit/s')}",
                off, "within 1 %", met)
    g = goal(d, "loss")
    if g:
        lo, hi = (int(x) for x in str(g.get("interval", "920-1082")).split("-"))
        drops = [x for x in g["tcplab"].get("rounds", []) if x is not None]
        inside = sum(lo <= x <= hi for x in drops)
        p = g.get("peer")
        row(g["label"], f"{', '.join(str(x) for x in drops)} dropped",
            f"{p['name']}: {', '.join(str(x) for x in p.get('rounds', []))}" if p and p.get("rounds")
            else (p or {}).get("note", "—"),
            f"{inside} of {len(drops)} inside", f"inside [{lo}, {hi}]", "yes" if inside == len(drops) else "no")
    g = goal(d, "jitter")
    if g:
        t = g["tcplab"].get("median")
        target = g.get("target_ms", 2.0)
        off = f"{100 * (t - target) / target:+.1f} %" if t is not None else "—"
        row(g["label"], f"sd {figure(g['tcplab'], 'ms')}", "—", off, "sd 2 ms within 10 %",
            "yes" if t is not None and abs(t - target) <= target / 10 else "no")
    out = "\n".join(rows) + "\n"
    delay = goals(d, "delay.")
    if delay:
        out += ("\nDelay, `--delay 10ms` each way: excess over 20 ms + the unimpaired base under the same "
                "load, ms (ping median, p99; rr median, p99; the bulk flow's rate; bold: all within 0.1 ms):\n\n"
                "| probes | idle | bulk, unpaced | bulk, paced at 1 Gbit/s |\n|---|---|---|---|\n")
        by_row = {}
        for g in delay:
            by_row.setdefault(g["id"].split(".")[1], {})[g.get("load")] = g
        for key, loads in by_row.items():
            label = next(iter(loads.values()))["label"].split(", ")[1:-1]
            cells = []
            for load in ("idle", "unpaced", "paced"):
                g = loads.get(load)
                if not g:
                    cells.append("—")
                    continue
                e = g.get("excess_ms", {})
                parts = []
                if "ping_median" in e:
                    parts.append(f"ping {e['ping_median']:+.3f}, {e['ping_p99']:+.3f}")
                elif g.get("ping_within") is not None:
                    parts.append("ping within" if g["ping_within"] else "ping over")
                if "rr_median" in e:
                    parts.append(f"rr {e['rr_median']:+.3f}, {e['rr_p99']:+.3f}")
                cell = "; ".join(parts)
                if g.get("bulk_gbit"):
                    cell += f" ({g['bulk_gbit']} Gbit/s)"
                cells.append(("**" + cell + "**") if g.get("within") else cell)
            rows_label = ", ".join(label) or key
            out += f"| {rows_label} | " + " | ".join(cells) + " |\n"
    sections = (d.get("parameters") or {}).get("sections")
    extra = f"Sections run: {sections}." if sections else ""
    return out + caption(d, extra)


def emu_ab(d):
    """Two builds of the emulator against the kernel bridge, round by round."""
    g = goal(d, "throughput_ratio")
    new, old = g["tcplab"], g["peer"]
    n = new["n"]
    rows = [
        "| build | throughput / kernel bridge, median [min-max] over "
        f"{n} rounds | geometric mean |",
        "|---|---|---|",
        f"| {old['name'].replace('(', '(`').replace(')', '`)')} | {figure(old, 'x', False)} | "
        f"{old['geometric_mean']:.3f}x |",
        f"| this commit (`{d['commit']}`) | {figure(new, 'x', False)} | {new['geometric_mean']:.3f}x |",
    ]
    return "\n".join(rows) + "\n" + caption(d, f"This commit ahead in {g['tcplab_ahead']} of {n} rounds. {d['what']}.")


def emu_delay_ab(d):
    """Delay accuracy of two builds (or settings), alternating, per load."""
    p = d.get("parameters") or {}
    rows = ["| load: figure (ms) | before | this build | rounds |", "|---|---|---|---|"]
    for g in d["goals"]:
        if g.get("kind") == "delay":
            # a "rows" run: each row set's excess over 20 ms + its base, per build
            e = g.get("excess_ms", {})
            rows.append(f"| {g['label']}: excess ping median, p99; rr median, p99 | | "
                        + ", ".join(f"{e[k]:+.3f}" for k in ("ping_median", "ping_p99", "rr_median", "rr_p99") if k in e)
                        + " | 1 |")
            continue

        def cell(side):
            r = [x for x in side.get("rounds", []) if x is not None]
            if r and len(r) <= 3:
                return ", ".join(f"{x:.3f}" for x in r)
            return f"{side['median']:.3f}" + (f" [{side['min']:.3f}-{side['max']:.3f}]" if "min" in side else "")
        rows.append(f"| {g['label']} | {cell(g['peer'])} | {cell(g['tcplab'])} | {g['tcplab'].get('n', '—')} |")
    extra = f"Probes at {p['probes']}." if p.get("probes") else ""
    return "\n".join(rows) + "\n" + caption(d, extra)


def simple(d, first="measure"):
    return pairs_table(d, first) + caption(d)


def study(d):
    g = goal(d, "sweep")
    rows = ["| measure | tcplab | peer | goal |", "|---|---|---|---|",
            f"| {g['label']}: wall time | {figure(g['tcplab'], 's')} | workloads' own time "
            f"{figure(g['peer'], 's')} | |"]
    o = goal(d, "overhead_pct")
    if o:
        rows.append(f"| overhead, (wall - workloads) / wall | {figure(o['tcplab'], '%')} | — | {o.get('target', '')} |")
    split = [f"{k[6:]} {figure(goal(d, k)['tcplab'], 's', rounds=False)}" for k in
             ("split_labs", "split_harness", "split_packing", "split_storing", "split_statistics")
             if goal(d, k)]
    if split:
        rows.append(f"| the overhead's split (per sweep) | {'; '.join(split)} | | |")
    r = goal(d, "runs")
    if r:
        rows.append(f"| runs per sweep | {figure(r['tcplab'])} | | |")
    return "\n".join(rows) + "\n" + caption(d)


def mesh(d):
    rows = ["| mesh | wall | longest test per step, summed (peer) | workloads' own times, summed "
            "| harness per test | coordinator peak RSS | failed |",
            "|---|---|---|---|---|---|---|"]
    for g in d["goals"]:
        rows.append(f"| {g['label']} | {figure(g['tcplab'], 's')} | {figure(g['peer'], 's')} | "
                    f"{num(g.get('workload_s'))} s | {num(g.get('harness_per_test_ms'))} ms | "
                    f"{num(g.get('coordinator_rss_mib'))} MiB | {g.get('failed', '—')} |")
    stalls = [f"{g['label'].split(',')[0]} {g['label'].split(', ')[-1]}: "
              f"{100 * g['stall_chance']['probability']:.3g} % "
              f"({100 * g['stall_chance']['low']:.3g}-{100 * g['stall_chance']['high']:.3g} %)"
              for g in d["goals"] if g.get("stall_chance")]
    extra = ("The chance that one all-to-all meets a stall: " + "; ".join(stalls) + ".") if stalls else ""
    return "\n".join(rows) + "\n" + caption(d, extra)


def doctor(d):
    """The corpus on labs, blind, as against real hosts, and a fresh draw: a column each."""
    columns = [("tcplab", "the doctor on the emulated corpus"),
               ("blind", "as if against a real host (`--blind`)"),
               ("remote", "the corpus as against real hosts (`--remote`)"),
               ("draw", "a fresh draw, held out (`--remote`)")]
    shown = [c for c in columns if any(g.get(c[0]) for g in d["goals"])]
    rows = ["| goal | " + " | ".join(name for _, name in shown) + " |",
            "|---|" + "---|" * len(shown)]

    def cell(side):
        if not side:
            return "—"
        if "count" in side:
            pct = 100 * side["count"] / side["of"] if side["of"] else 0
            return f"{side['count']} of {side['of']} ({pct:.1f} %)"
        if "min" in side:
            return f"lowest {side['min']:.2f}" + (f" (`{side['finding']}`)" if side.get("finding") else "")
        return "—"
    for g in d["goals"]:
        cells = " | ".join(cell(g.get(key)) for key, _ in shown)
        rows.append(f"| {g['label']} ({g.get('target', '')}) | {cells} |")
    p = d.get("parameters") or {}
    extra = ""
    if p.get("draw_seed"):
        extra = (f"The draw: seed {p['draw_seed']}, {p.get('draw_count', '?')} cases "
                 f"(`tcplab corpus draw --seed {p['draw_seed']} --count {p.get('draw_count', '?')}`).")
    for key, name in (("remote", "`--remote`"), ("draw", "draw")):
        if p.get(f"{key}_scored"):
            extra += f" The {name} column: {p[f'{key}_scored']}."
    return "\n".join(rows) + "\n" + caption(d, extra)


def trust(d):
    """Counts of runs that kept their schedule; the doctor's per-workload verdicts in one row."""
    rows = ["| verdict | runs |", "|---|---|"]
    workloads = []
    for g in d["goals"]:
        w = g["id"][len("doctor_"):]
        if w in ("stream", "msgs", "msgs_sweep", "rrul", "rr", "crr"):
            workloads.append(f"{w} {figure(g['tcplab'])}")
            continue
        rows.append(f"| {g['label']} | {figure(g['tcplab'])} |")
    if workloads:
        after = max((i for i, r in enumerate(rows) if r.startswith("| doctor")), default=1)
        rows.insert(after + 1, f"| doctor: each workload's own verdict | {', '.join(workloads)} |")
    return "\n".join(rows) + "\n" + caption(d)


def rootless(d):
    """Rootless labs against root's: each side is named in the goal."""
    rows = ["| measure | an unprivileged user (rootless) | root | ratio |", "|---|---|---|---|"]
    for g in d["goals"]:
        unit = g.get("unit", "")
        p = g.get("peer") or {}
        rows.append(f"| {g['label']} | {figure(g['tcplab'], unit)} | "
                    f"{p.get('name', 'root')}: {figure(p, unit)} | {ratio_cell(g)} |")
    notes = " ".join(d.get("notes") or [])
    return "\n".join(rows) + "\n" + caption(d, notes)


def monitor(d):
    """The monitor's long run: counts of the injected regression's pairs, false alarms, memory
    over the run's two halves, the database, and runs lost across the restarts."""
    rows = ["| measure | tcplab | beside it | goal |", "|---|---|---|---|"]
    for g in d["goals"]:
        t = g["tcplab"]
        if "count" in t:
            value = f"{t['count']} of {t['of']}"
        else:
            value = figure(t, g.get("unit", ""))
        p = g.get("peer")
        beside = f"{p['name']}: {figure(p, g.get('unit', ''))}" if p else "—"
        rows.append(f"| {g['label']} | {value} | {beside} | {g.get('target', '')} |")
    params = d.get("parameters") or {}
    return "\n".join(rows) + "\n" + caption(d, params.get("events", ""))


RENDERERS = {
    "monitor": monitor,
    "rootless": rootless,
    "lab_updown": lab_updown,
    "emu": emu,
    "emu_ab": emu_ab,
    "emu_delay_ab": emu_delay_ab,
    "load": simple,
    "http": simple,
    "study": study,
    "agent": lambda d: simple(d, "what"),
    "mesh": mesh,
    "doctor": doctor,
    "trust": trust,
}


def render(page, results, fallback=None):
    """Every marker's table; a file missing from `results` is read from `fallback` (the
    repository's results, when a run wrote only some files elsewhere)."""
    def one(m):
        name = m.group("name")
        path = results / f"{name}.json"
        if not path.exists() and fallback is not None:
            path = fallback / f"{name}.json"
        if name not in RENDERERS:
            sys.exit(f"render.py: no renderer for {name}: add one to RENDERERS")
        if not path.exists():
            sys.exit(f"render.py: {path} is missing: run the benchmark that writes it")
        body = RENDERERS[name](json.loads(path.read_text()))
        return m.group(1) + body + m.group(4)

    return MARK.sub(one, page)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--check", action="store_true", help="fail when the page is out of date")
    ap.add_argument("--page", type=pathlib.Path, default=ROOT / "docs" / "BENCHMARKS.md")
    ap.add_argument("--results", type=pathlib.Path, default=ROOT / "benches" / "results")
    a = ap.parse_args()
    page = a.page.read_text()
    default = ROOT / "benches" / "results"
    new = render(page, a.results, None if a.results.resolve() == default else default)
    if a.check:
        if new != page:
            sys.exit(f"{a.page} is out of date with {a.results}: run benches/render.py")
        return
    if new != page:
        a.page.write_text(new)
        print(f"{a.page}: tables rewritten")


if __name__ == "__main__":
    main()
