#!/usr/bin/env python3
"""Turns collc-bench CSV files into merged tables and PNG plots.

  plot.py merge  CSV... -o merged.csv     best library per size (and rounds combined)
  plot.py table  CSV... [--coll allreduce] [--rotate 0|1] [--column ratio_best]
                                           markdown table: one row per size, one column per P
                                           (o / m: Open MPI / MPICH was better; *: an MPI side
                                           of that size went wrong and was left out)
  plot.py bars   CSV...                    the allreduce bars of docs/benchmarks.md, met or not
  plot.py plot   CSV... -o DIR             PNGs: time vs size for each side, and the ratio curve
  plot.py handoff CSV... [--check FILE]    the rows of src/pmpi/measured.hpp: the sizes where a
                                           library beat collc (printed, or compared with FILE)

Every subcommand accepts raw collc-bench CSVs (any mix of libraries, rank
counts and rounds); they are combined the same way:
  - rows of the same (coll, type, op, rotate, P, bytes, library) from several
    rounds: the median of each median column and of each ratio;
  - across libraries: the better library at a size is the one with the lower
    MPI median (blocking or persistent, whichever is faster); collc's ratio
    against it is a paired ratio (collc and a library timed in alternation in
    the same run): that of the run where collc did best, rescaled from that
    run's library to the better one (see merge()).
Only `plot` needs matplotlib (Agg backend; Debian's python3-matplotlib is in
/usr/bin/python3).
"""
import argparse
import csv
import math
import os
import statistics
import sys


def library_key(name):
    n = name.lower()
    if "open mpi" in n:
        return "openmpi"
    if "mpich" in n:
        return "mpich"
    return n.split()[0] if n else "mpi"


def number(text):
    try:
        v = float(text)
    except (TypeError, ValueError):
        return math.nan
    return v


def read_rows(paths):
    rows = []
    for p in paths:
        with open(p, newline="") as f:
            reader = csv.DictReader(f)
            if "library" not in (reader.fieldnames or []):
                print(f"plot.py: skipping {p} (not a collc-bench CSV)", file=sys.stderr)
                continue
            for r in reader:
                r["lib"] = library_key(r["library"])
                if not r.get("offset"):
                    r["offset"] = "0"  # CSVs written before --offset
                rows.append(r)
    # Rounds are merged by KEY, which has no offset: runs at different
    # --offset values are different experiments, not rounds of one.
    offsets = sorted({r["offset"] for r in rows}, key=int)
    if len(offsets) > 1:
        sys.exit(f"plot.py: the CSVs mix collc-bench --offset values ({', '.join(offsets)}); "
                 "give the runs of each offset separately")
    return rows


def median(values):
    v = [x for x in values if not math.isnan(x)]
    return statistics.median(v) if v else math.nan


KEY = ("coll", "type", "op", "rotate", "P", "bytes")
MEDIAN_COLUMNS = ("collc_med_us", "mpi_med_us", "mpip_med_us", "ratio_med", "ratio_p_med", "ratio_best_med",
                  "collc_busbw_GBs", "mpi_busbw_GBs", "memcpy_GBs", "setup_us", "setup_first_us",
                  "setup_second_us", "load1")


def combine_rounds(rows):
    """One entry per (KEY, lib): medians over rounds, min of mins, max of maxes."""
    groups = {}
    for r in rows:
        groups.setdefault(tuple(r[k] for k in KEY) + (r["lib"],), []).append(r)
    out = {}
    for key, rs in groups.items():
        e = {k: v for k, v in zip(KEY + ("lib",), key)}
        for c in MEDIAN_COLUMNS:
            e[c] = median([number(r.get(c)) for r in rs])
        for side in ("collc", "mpi", "mpip"):
            e[side + "_min_us"] = min((number(r[side + "_min_us"]) for r in rs), default=math.nan)
            e[side + "_max_us"] = max((number(r[side + "_max_us"]) for r in rs), default=math.nan)
        bad = [r["check"] for r in rs if r["check"] != "ok"]
        e["check"] = bad[0] if bad else "ok"
        e["rounds"] = len(rs)
        e["schedule"] = rs[0]["schedule"]
        e["library"] = rs[0]["library"]
        out[key] = e
    return out


def collc_failed(check):
    """collc's own failures (as opposed to an MPI side that went wrong)."""
    return "WRONG" in check or "setup error" in check


def best_mpi_us(e):
    """The faster of the library's blocking and persistent medians, and which."""
    b, p = e["mpi_med_us"], e["mpip_med_us"]
    if not math.isnan(p) and (math.isnan(b) or p < b):
        return p, "persistent"
    return b, "blocking"


def merge(rows):
    """One entry per KEY: the better library, collc's paired ratio against it."""
    per_lib = combine_rounds(rows)
    merged = {}
    for (*key, lib), e in per_lib.items():
        merged.setdefault(tuple(key), []).append(e)
    out = []
    for key, es in merged.items():
        usable = [e for e in es if not math.isnan(best_mpi_us(e)[0])]
        best = min(usable, key=lambda e: best_mpi_us(e)[0]) if usable else es[0]
        t, side = best_mpi_us(best)
        # collc's time also depends on the library it ran beside (an
        # oversubscribed rank that polls inside MPI steals the core from
        # collc's ranks), so collc's best run is compared with the best
        # library: each run's paired ratio, rescaled from its own library to
        # the best one; the smallest wins. In the common case (collc best in
        # the best library's run) this is that run's paired ratio unchanged.
        def rescaled(e):
            return e["ratio_best_med"] * best_mpi_us(e)[0] / t
        mine = min(usable, key=rescaled) if usable else es[0]
        m = {k: v for k, v in zip(KEY, key)}
        m.update(best_library=best["lib"], best_side=side, best_mpi_us=t, collc_library=mine["lib"],
                 collc_med_us=mine["collc_med_us"], ratio_best=rescaled(mine) if usable else math.nan,
                 schedule=mine["schedule"], memcpy_GBs=mine["memcpy_GBs"],
                 collc_busbw_GBs=mine["collc_busbw_GBs"], setup_us=mine["setup_us"], load1=mine["load1"],
                 check="ok" if all(e["check"] == "ok" for e in es) else "; ".join(
                     e["lib"] + ": " + e["check"] for e in es if e["check"] != "ok"))
        for e in es:
            m[e["lib"] + "_mpi_us"] = best_mpi_us(e)[0]
            m[e["lib"] + "_collc_us"] = e["collc_med_us"]
            m[e["lib"] + "_ratio"] = e["ratio_best_med"]
        out.append(m)
    out.sort(key=lambda m: (m["coll"], m["type"], m["op"], m["rotate"], int(m["P"]), int(m["bytes"])))
    return out


def size_label(b):
    b = int(b)
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if b >= 1 << shift and b % (1 << shift) == 0:
            return f"{b >> shift} {unit}"
    return f"{b} B"


def cmd_merge(args):
    out = merge(read_rows(args.csv))
    cols = []
    for m in out:
        cols += [c for c in m if c not in cols]
    with open(args.output, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=cols)
        w.writeheader()
        for m in out:
            w.writerow({k: (f"{v:.4g}" if isinstance(v, float) else v) for k, v in m.items()})
    print(f"wrote {args.output} ({len(out)} rows)")


def cmd_table(args):
    out = [m for m in merge(read_rows(args.csv)) if m["coll"] == args.coll and m["rotate"] == args.rotate]
    Ps = sorted({int(m["P"]) for m in out})
    sizes = sorted({int(m["bytes"]) for m in out})
    cell = {(int(m["P"]), int(m["bytes"])): m for m in out}
    print("| bytes | " + " | ".join(f"P={p}" for p in Ps) + " |")
    print("|---:|" + "---:|" * len(Ps))
    for b in sizes:
        vals = []
        for p in Ps:
            m = cell.get((p, b))
            if m is None:
                vals.append("")
            elif collc_failed(m["check"]):
                vals.append("WRONG" if "WRONG" in m["check"] else "err")
            else:
                v = m[args.column]
                mark = {"openmpi": "o", "mpich": "m"}.get(m["best_library"], "?") if args.column == "ratio_best" else ""
                mark += "*" if m["check"] != "ok" else ""  # an MPI side went wrong and was left out
                vals.append(f"{v:.2f}{mark}" if isinstance(v, float) else str(v))
        print(f"| {size_label(b)} | " + " | ".join(vals) + " |")


# The bars of the issue "Benchmarks against the MPI library" (allreduce,
# double, sum, ratio collc / best library, median): (P set, lo, hi, bound).
BARS = [
    ((2,), 8, 64 << 20, 1.0),
    ((2,), 512, 4 << 10, 0.6),
    ((2,), 32 << 10, 32 << 10, 0.3),
    ((2,), 256 << 10, 256 << 10, 0.5),
    ((2,), 1 << 20, 64 << 20, 0.8),
    ((4, 8), 8, 64 << 20, 1.0),
    ((3, 7), 8, 64 << 20, 1.0),
]


def cmd_bars(args):
    out = [m for m in merge(read_rows(args.csv))
           if m["coll"] == "allreduce" and m["type"] == "double" and m["op"] == "sum"]
    status = 0
    for rotate in sorted({m["rotate"] for m in out}):
        slack = 1.10 if rotate == "1" else 1.0  # --rotate: the same bars within 10 %
        for Ps, lo, hi, bound in BARS:
            sel = [m for m in out if m["rotate"] == rotate and int(m["P"]) in Ps and lo <= int(m["bytes"]) <= hi]
            if not sel:
                continue
            worst = max(sel, key=lambda m: m["ratio_best"] if not collc_failed(m["check"]) else math.inf)
            bad = [m for m in sel if collc_failed(m["check"]) or not m["ratio_best"] <= bound * slack]
            verdict = "met" if not bad else "NOT met"
            status |= bool(bad)
            where = ", ".join(f"P={m['P']} {size_label(m['bytes'])}: {m['ratio_best']:.3f}" for m in bad[:8])
            print(f"rotate={rotate} P={'/'.join(map(str, Ps))} {size_label(lo)}..{size_label(hi)} <= "
                  f"{bound * slack:.2f}: {verdict} (worst {worst['ratio_best']:.3f} at P={worst['P']} "
                  f"{size_label(worst['bytes'])}){'; ' + where if bad else ''}")
    return status


# collc-bench's collective names, as src/pmpi/interpose.hpp's `coll` spells
# them, and the library keys as measured.hpp's `library`.
PMPI_COLL = {"allreduce": "allreduce", "reduce_scatter": "reduce_scatter_block", "allgather": "allgather",
             "bcast": "bcast", "reduce": "reduce"}
PMPI_LIBRARY = {"openmpi": "open_mpi", "mpich": "mpich"}
HANDOFF_BEGIN = "// BEGIN rows made by benchmarks/plot.py handoff"
HANDOFF_END = "// END rows made by benchmarks/plot.py handoff"


def cxx_bytes(b):
    for shift in (20, 10):
        if b >= 1 << shift and b % (1 << shift) == 0:
            return f"{b >> shift} << {shift}"
    return str(b)


def handoff_rows(rows):
    """measured.hpp's rows: per library, collective and P (double sum, root
    fixed), each run of measured sizes whose paired ratio against that
    library (median over rounds) is above 1. A run from the smallest measured
    size starts at 0 bytes, one to the largest ends at any_size; sizes
    between two measured points belong to a run only when both ends lost.
    collc-bench counts all P blocks of reduce_scatter and allgather, the
    interposition library one block (a rank's message), so those sizes are
    divided by P."""
    cells = {}
    for (coll, typ, op, rotate, P, b, lib), e in combine_rounds(rows).items():
        if typ != "double" or rotate != "0" or coll not in PMPI_COLL or lib not in PMPI_LIBRARY:
            continue
        if op != "sum" and coll in ("allreduce", "reduce_scatter", "reduce"):
            continue
        cells.setdefault((lib, coll, int(P)), []).append((int(b), e))
    out = []
    for (lib, coll, P), sizes in sorted(cells.items(), key=lambda kv: (kv[0][0], PMPI_COLL[kv[0][1]], kv[0][2])):
        sizes.sort(key=lambda x: x[0])
        if any(collc_failed(e["check"]) for _, e in sizes):
            raise SystemExit(f"plot.py handoff: collc failed in {lib} {coll} P={P}: no table from a wrong run")
        lost = [not math.isnan(e["ratio_best_med"]) and e["ratio_best_med"] > 1.0 for _, e in sizes]
        per_rank = P if coll in ("reduce_scatter", "allgather") else 1
        i = 0
        while i < len(sizes):
            if not lost[i]:
                i += 1
                continue
            j = i
            while j + 1 < len(sizes) and lost[j + 1]:
                j += 1
            lo = "0" if i == 0 else cxx_bytes(sizes[i][0] // per_rank)
            hi = "any_size" if j == len(sizes) - 1 else cxx_bytes(sizes[j][0] // per_rank)
            what = ", ".join(f"{e['ratio_best_med']:.2f} at {size_label(b)}" for b, e in sizes[i:j + 1])
            if per_rank > 1:
                what += f" (all {P} blocks)"
            out.append(f'    {{library::{PMPI_LIBRARY[lib]}, coll::{PMPI_COLL[coll]}, {P}, {lo}, {hi}, "{what}"}},')
            i = j + 1
    return out


def cmd_handoff(args):
    made = handoff_rows(read_rows(args.csv))
    if not args.check:
        print("\n".join([HANDOFF_BEGIN] + made + [HANDOFF_END]))
        return 0
    with open(args.check) as f:
        text = f.read().splitlines()
    try:
        first, last = text.index(HANDOFF_BEGIN), text.index(HANDOFF_END)
    except ValueError:
        print(f"plot.py handoff: {args.check} has no '{HANDOFF_BEGIN}' ... '{HANDOFF_END}' block", file=sys.stderr)
        return 2
    held = text[first + 1:last]
    if held == made:
        print(f"{args.check}: its {len(made)} rows are those of the {len(args.csv)} CSV files")
        return 0
    import difflib
    print(f"{args.check} differs from what plot.py handoff makes of the CSV files (- held, + made):")
    for line in difflib.unified_diff(held, made, "held", "made", lineterm="", n=0):
        print(line)
    return 1


def cmd_plot(args):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        sys.exit("plot.py plot needs matplotlib (Debian: python3-matplotlib, run with /usr/bin/python3)")
    rows = read_rows(args.csv)
    per_lib = combine_rounds(rows)
    merged = merge(rows)
    os.makedirs(args.output, exist_ok=True)
    figures = {}
    for (coll, typ, op, rotate, P, b, lib), e in per_lib.items():
        figures.setdefault((coll, typ, op, rotate, P), {}).setdefault(lib, []).append(e)
    for (coll, typ, op, rotate, P), libs in sorted(figures.items()):
        fig, (ax, rx) = plt.subplots(2, 1, figsize=(8, 7.5), sharex=True, gridspec_kw={"height_ratios": [3, 2]})
        colors = {"openmpi": "tab:orange", "mpich": "tab:green"}
        collc_drawn = False
        for lib, es in sorted(libs.items()):
            es = sorted(es, key=lambda e: int(e["bytes"]))
            x = [int(e["bytes"]) for e in es]
            name = es[0]["library"]
            c = colors.get(lib, "tab:gray")
            for side, style, label in (("mpi", "-", name), ("mpip", ":", name + " persistent")):
                y = [e[side + "_med_us"] for e in es]
                if all(math.isnan(v) for v in y):
                    continue
                ax.plot(x, y, style, color=c, marker=".", label=label)
            y = [e["collc_med_us"] for e in es]
            lo = [e["collc_min_us"] for e in es]
            hi = [e["collc_max_us"] for e in es]
            ax.plot(x, y, "-", color="tab:blue", alpha=1.0 if not collc_drawn else 0.5, marker="o", markersize=3,
                    label="collc" + ("" if len(libs) == 1 else f" (run with {name})"))
            ax.fill_between(x, lo, hi, color="tab:blue", alpha=0.08)
            collc_drawn = True
            rx.plot(x, [e["ratio_best_med"] for e in es], "--", color=c, alpha=0.6, label=f"vs {name}")
        ms = sorted((m for m in merged if (m["coll"], m["type"], m["op"], m["rotate"], m["P"]) ==
                     (coll, typ, op, rotate, P)), key=lambda m: int(m["bytes"]))
        rx.plot([int(m["bytes"]) for m in ms], [m["ratio_best"] for m in ms], "-", color="black", marker="o",
                markersize=3, label="vs the better library")
        rx.axhline(1.0, color="red", linewidth=0.8)
        if coll == "allreduce" and typ == "double" and op == "sum":
            slack = 1.10 if rotate == "1" else 1.0
            for Ps, lo_b, hi_b, bound in BARS:
                if int(P) in Ps and bound < 1.0:
                    if lo_b == hi_b:  # a bar at one size: a short tick
                        rx.plot([lo_b], [bound * slack], marker="_", markersize=18, color="red")
                    else:
                        rx.hlines(bound * slack, lo_b, hi_b, colors="red", linestyles="dotted", linewidth=1.5)
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_ylabel("time per call, median over repetitions [us]")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8)
        ax.set_title(f"{coll} {typ} {op}, P = {P}{', --rotate' if rotate == '1' else ''}")
        rx.set_xscale("log", base=2)
        rx.set_yscale("log")
        rx.set_ylabel("collc / MPI (paired median)")
        rx.set_xlabel("message size [bytes]")
        rx.grid(True, which="both", alpha=0.3)
        rx.legend(fontsize=8)
        fig.tight_layout()
        path = os.path.join(args.output, f"{coll}_{typ}_{op}_p{P}{'_rotate' if rotate == '1' else ''}.png")
        fig.savefig(path, dpi=90)
        plt.close(fig)
        print("wrote", path)
    # Overview: the ratio against the better library, one curve per P.
    groups = {}
    for m in merged:
        groups.setdefault((m["coll"], m["type"], m["op"], m["rotate"]), {}).setdefault(int(m["P"]), []).append(m)
    for (coll, typ, op, rotate), byP in sorted(groups.items()):
        fig, ax = plt.subplots(figsize=(8, 4.5))
        for P, ms in sorted(byP.items()):
            ms.sort(key=lambda m: int(m["bytes"]))
            ax.plot([int(m["bytes"]) for m in ms], [m["ratio_best"] for m in ms], marker="o", markersize=3,
                    label=f"P = {P}")
        ax.axhline(1.0, color="red", linewidth=0.8)
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("message size [bytes]")
        ax.set_ylabel("collc / better MPI library (paired median)")
        ax.set_title(f"{coll} {typ} {op}: collc against the better of the MPI libraries"
                     f"{', --rotate' if rotate == '1' else ''}")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8)
        fig.tight_layout()
        path = os.path.join(args.output, f"{coll}_{typ}_{op}_ratio{'_rotate' if rotate == '1' else ''}.png")
        fig.savefig(path, dpi=90)
        plt.close(fig)
        print("wrote", path)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("merge")
    p.add_argument("csv", nargs="+")
    p.add_argument("-o", "--output", required=True)
    p = sub.add_parser("table")
    p.add_argument("csv", nargs="+")
    p.add_argument("--coll", default="allreduce")
    p.add_argument("--rotate", default="0", choices=("0", "1"))
    p.add_argument("--column", default="ratio_best",
                   help="merged column to show (ratio_best, collc_med_us, best_mpi_us, collc_busbw_GBs, ...)")
    p = sub.add_parser("bars")
    p.add_argument("csv", nargs="+")
    p = sub.add_parser("handoff")
    p.add_argument("csv", nargs="+")
    p.add_argument("--check", metavar="FILE", help="compare with the rows of FILE (src/pmpi/measured.hpp)")
    p = sub.add_parser("plot")
    p.add_argument("csv", nargs="+")
    p.add_argument("-o", "--output", required=True, help="directory for the PNGs")
    args = ap.parse_args()
    return {"merge": cmd_merge, "table": cmd_table, "bars": cmd_bars, "plot": cmd_plot,
            "handoff": cmd_handoff}[args.cmd](args) or 0


if __name__ == "__main__":
    sys.exit(main())
