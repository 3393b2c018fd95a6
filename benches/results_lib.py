#!/usr/bin/env python3
"""The benchmark scripts' JSON results, one file per script: benches/results/NAME.json.

The scripts call it through the shell functions of benches/results.sh; each call appends one
event to a log (JSON lines), and `finish` turns the log into the results file, so a script that
fails half-way writes no results at all rather than a partial file. benches/render.py makes
docs/BENCHMARKS.md's tables from these files.

A results file (schema 1):

    schema, benchmark, script, what      which script, and what it measures
    date, commit, command                UTC "YYYY-MM-DD HH:MM" at the start; `git rev-parse
                                         --short HEAD`, "-dirty" when tracked files changed;
                                         the command line, with the environment it reads
    machine                              nproc, kernel, cpu, load_start and load_end ([1, 5, 15])
    parameters                           the script's settings
    source                               only for figures not written by the script itself
                                         (transcribed from an older text output)
    goals                                a list, one per measured goal:
      id, label, unit, target, better    better: "higher" or "lower" (the ratio's direction)
      tcplab, peer                       the two sides: name, rounds (the raw per-round figures),
                                         and the summary median, min, max, n (p90 from 10
                                         rounds on); a side may carry the summary only, and
                                         peer is absent where no peer exists. A goal of kind
                                         "count" summarises 0/1 rounds as count and of.
      ratio                              tcplab's median over the peer's (of_medians) and, when
                                         the rounds pair up, the per-round ratios' summary
      tcplab_ahead                       rounds in which tcplab did better than the peer
      ...                                any field a script adds (excess_ms, within, ...)
    notes                                free text lines

CLI (the events; benches/results.sh wraps them):
    begin LOG NAME WHAT ROOT SCRIPT [ENV=VALUE ...] -- ARG ...
    param LOG KEY VALUE
    goal LOG ID [KEY=VALUE ...]          dotted keys reach into the goal (tcplab.median=3.1)
    round LOG ID SIDE VALUE ...          appends raw figures to a side's rounds
    goals LOG FILE                       merges a JSON list of goals ({"id": ..., ...})
    note LOG TEXT
    finish LOG OUT                       writes OUT (atomically) and removes LOG
"""
import json
import os
import platform
import re
import shlex
import statistics
import subprocess
import sys
import time


def number(v):
    """A figure from the shell: int, float, bool, or the text itself ("" and "-" are None)."""
    if isinstance(v, str):
        s = v.strip()
        if s in ("", "-", "null", "None"):
            return None
        if s in ("true", "false"):
            return s == "true"
        try:
            return int(s)
        except ValueError:
            pass
        try:
            f = float(s)
            return f if f == f else None
        except ValueError:
            return s
    return v


def loadavg():
    try:
        return [float(x) for x in open("/proc/loadavg").read().split()[:3]]
    except OSError:
        return None


def commit(root):
    """The short commit, "-dirty" when tracked files differ from it. The results and the page
    they fill are left out: a suite that writes them as it goes would otherwise call every later
    script's commit dirty."""
    try:
        c = subprocess.run(["git", "-C", root, "rev-parse", "--short", "HEAD"],
                           capture_output=True, text=True, check=True).stdout.strip()
        dirty = subprocess.run(
            ["git", "-C", root, "status", "--porcelain", "--untracked-files=no", "--", ".",
             ":!benches/results", ":!docs/BENCHMARKS.md"],
            capture_output=True, text=True, check=True).stdout.strip()
        return c + ("-dirty" if dirty else "")
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def cpu_model():
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.machine()


def append(log, event):
    with open(log, "a") as f:
        f.write(json.dumps(event) + "\n")


def put(d, dotted, value):
    keys = dotted.split(".")
    for k in keys[:-1]:
        d = d.setdefault(k, {})
    d[keys[-1]] = value


def summarize(values, count=False):
    v = [x for x in values if isinstance(x, (int, float)) and not isinstance(x, bool)]
    if count:
        return {"count": int(sum(1 for x in v if x)), "of": len(v)}
    if not v:
        return {"n": 0}
    s = {"median": round(statistics.median(v), 6), "min": min(v), "max": max(v), "n": len(v)}
    if len(v) >= 10:
        srt = sorted(v)
        s["p90"] = srt[min(len(srt) - 1, int(round(0.9 * (len(srt) - 1))))]
    if len(v) >= 2 and all(x > 0 for x in v):
        s["geometric_mean"] = round(statistics.geometric_mean(v), 6)
    return s


def finish_goal(g):
    count = g.get("kind") == "count"
    for side in ("tcplab", "peer"):
        s = g.get(side)
        if isinstance(s, dict) and s.get("rounds"):
            # figures the script gave explicitly win over the computed ones
            computed = summarize(s["rounds"], count)
            s.update({k: v for k, v in computed.items() if k not in s})
    t, p = g.get("tcplab"), g.get("peer")
    if count or not isinstance(t, dict) or not isinstance(p, dict):
        return g
    ratio = dict(g.get("ratio") or {})
    if t.get("median") and p.get("median"):
        ratio.setdefault("of_medians", round(t["median"] / p["median"], 4))
    tr, pr = t.get("rounds") or [], p.get("rounds") or []
    pairs = [(a, b) for a, b in zip(tr, pr)
             if isinstance(a, (int, float)) and isinstance(b, (int, float)) and b]
    if len(tr) == len(pr) and pairs:
        rs = [round(a / b, 4) for a, b in pairs]
        ratio.setdefault("rounds", rs)
        for k, v in summarize(rs).items():
            ratio.setdefault(k, v)
        better = g.get("better")
        if better in ("higher", "lower"):
            g.setdefault("tcplab_ahead", sum((a > b) if better == "higher" else (a < b)
                                             for a, b in pairs))
    if ratio:
        g["ratio"] = ratio
    return g


def build(log):
    doc, goals, order = {}, {}, []

    def goal(gid):
        if gid not in goals:
            goals[gid] = {"id": gid}
            order.append(gid)
        return goals[gid]

    for line in open(log):
        e = json.loads(line)
        kind = e.pop("event")
        if kind == "begin":
            doc.update(e)
        elif kind == "param":
            doc.setdefault("parameters", {})[e["key"]] = number(e["value"])
        elif kind == "goal":
            g = goal(e["id"])
            for k, v in e["fields"].items():
                put(g, k, number(v))
        elif kind == "round":
            side = goal(e["id"]).setdefault(e["side"], {})
            side.setdefault("rounds", []).extend(number(v) for v in e["values"])
        elif kind == "goals":
            for item in e["goals"]:
                g = goal(item["id"])
                for k, v in item.items():
                    if isinstance(v, dict) and isinstance(g.get(k), dict):
                        g[k].update(v)
                    else:
                        g[k] = v
        elif kind == "note":
            doc.setdefault("notes", []).append(e["text"])
    doc.setdefault("machine", {})["load_end"] = loadavg()
    doc["goals"] = [finish_goal(goals[i]) for i in order]
    return doc


def dumps(doc):
    """Indented JSON with each list of plain figures on one line, so a file of 300 rounds
    stays readable in a diff."""
    text = json.dumps(doc, indent=1, ensure_ascii=False)
    scalar = r'(?:-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?|true|false|null|"[^"\n]*")'
    return re.sub(r"\[\n\s*(" + scalar + r"(?:,\n\s*" + scalar + r")*)\n\s*\]",
                  lambda m: "[" + re.sub(r",\n\s*", ", ", m.group(1)) + "]", text) + "\n"


def main(argv):
    if len(argv) < 2:
        sys.exit(__doc__)
    cmd, log, rest = argv[0], argv[1], argv[2:]
    if cmd == "begin":
        name, what, root, script = rest[:4]
        sep = rest.index("--") if "--" in rest else len(rest)
        env, args = rest[4:sep], rest[sep + 1:]
        open(log, "w").close()
        append(log, {
            "event": "begin", "schema": 1, "benchmark": name, "script": script, "what": what,
            "date": time.strftime("%Y-%m-%d %H:%M", time.gmtime()),
            "commit": commit(root),
            "command": " ".join(["sudo"] + [k + "=" + shlex.quote(v) for k, _, v in
                                            (e.partition("=") for e in env)] + [script]
                                + [shlex.quote(a) for a in args]),
            "machine": {"nproc": len(os.sched_getaffinity(0)), "kernel": platform.release(),
                        "cpu": cpu_model(), "load_start": loadavg()},
        })
    elif cmd == "param":
        append(log, {"event": "param", "key": rest[0], "value": rest[1]})
    elif cmd == "goal":
        fields = {}
        for kv in rest[1:]:
            k, _, v = kv.partition("=")
            fields[k] = v
        append(log, {"event": "goal", "id": rest[0], "fields": fields})
    elif cmd == "round":
        append(log, {"event": "round", "id": rest[0], "side": rest[1], "values": rest[2:]})
    elif cmd == "goals":
        append(log, {"event": "goals", "goals": json.load(open(rest[0]))})
    elif cmd == "note":
        append(log, {"event": "note", "text": " ".join(rest)})
    elif cmd == "finish":
        out = rest[0]
        doc = build(log)
        os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
        tmp = out + ".tmp"
        with open(tmp, "w") as f:
            f.write(dumps(doc))
        os.replace(tmp, out)
        os.remove(log)
        print(f"# results: {out}")
    else:
        sys.exit(f"results_lib.py: unknown event {cmd}\n{__doc__}")


if __name__ == "__main__":
    main(sys.argv[1:])
