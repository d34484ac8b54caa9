#!/usr/bin/env python3
"""Plot predicted allreduce time against the number of ranks for every family.

Runs `collc cost --csv` for P = 2, 4, ..., 65536 at a few message sizes and
draws one panel per size, log-log, one line per family (docs/cost_model.md
shows the result). Needs matplotlib (Debian: python3-matplotlib).

  python3 tools/plot_cost.py --collc build/tools/collc --out docs/img/cost_vs_ranks.png
"""
import argparse
import csv
import io
import subprocess
import sys

try:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
except ImportError:
    sys.exit("plot_cost.py needs matplotlib (Debian: apt-get install python3-matplotlib)")

# Families in a fixed order so colours match across panels.
FAMILIES = [
    "recursive doubling",
    "Rabenseifner",
    "ring",
    "binomial tree",
    "copy-in",
    "best recursive exchange",
    "best cyclic shift",
    "default",
]


def run_cost(collc, ranks, size, per_node, collective, extra):
    cmd = [collc, "cost", "--csv", "--ranks", str(ranks), "--bytes", str(size),
           "--collective", collective]
    if per_node > 0:
        cmd += ["--ranks-per-node", str(per_node)]
    cmd += extra
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    return list(csv.DictReader(io.StringIO(out)))


def human_bytes(n):
    for unit in ["B", "KiB", "MiB", "GiB"]:
        if n < 1024 or unit == "GiB":
            return f"{n:g} {unit}"
        n /= 1024
    return str(n)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--collc", default="build/tools/collc", help="the collc tool")
    ap.add_argument("--out", default="docs/img/cost_vs_ranks.png")
    ap.add_argument("--csv-out", help="also write all rows to this CSV file")
    ap.add_argument("--sizes", default="8,65536,16777216", help="message sizes in bytes, comma separated")
    ap.add_argument("--ranks-per-node", type=int, default=32,
                    help="ranks per node (min(P, this) on one node for small P)")
    ap.add_argument("--max-ranks", type=int, default=65536)
    ap.add_argument("--collective", default="allreduce")
    # Anything else (e.g. --alpha 2e-6 --shm-bandwidth 2e11) goes to collc cost.
    args, model = ap.parse_known_args()

    sizes = [int(s) for s in args.sizes.split(",")]
    ranks = []
    p = 2
    while p <= args.max_ranks:
        ranks.append(p)
        p *= 2

    rows = []
    for size in sizes:
        for P in ranks:
            rows += run_cost(args.collc, P, size, args.ranks_per_node, args.collective, model)

    if args.csv_out:
        with open(args.csv_out, "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=list(rows[0].keys()))
            w.writeheader()
            w.writerows(rows)

    fig, axes = plt.subplots(1, len(sizes), figsize=(5.2 * len(sizes), 4.6), squeeze=False)
    colours = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for ax, size in zip(axes[0], sizes):
        for i, fam in enumerate(FAMILIES):
            pts = sorted((int(r["ranks"]), float(r["seconds"])) for r in rows
                         if r["family"] == fam and int(r["bytes"]) == size)
            if not pts:
                continue
            style = "--" if fam == "default" else "-"
            marker = "o" if fam.startswith("best") else None
            ax.plot([x for x, _ in pts], [y * 1e6 for _, y in pts], style, marker=marker, markersize=3,
                    color=colours[i % len(colours)], label=fam)
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("ranks P")
        ax.set_title(f"{args.collective}, {human_bytes(size)} per rank")
        ax.grid(True, which="both", alpha=0.3)
    axes[0][0].set_ylabel("predicted time (us)")
    axes[0][-1].legend(fontsize=8, loc="upper left")
    fig.suptitle(f"collc cost model, {args.ranks_per_node} ranks per node "
                 f"(defaults: 100 Gb/s network, x86 node)", fontsize=10)
    fig.tight_layout()
    fig.savefig(args.out, dpi=110)
    print(f"wrote {args.out} ({len(rows)} predictions)")


if __name__ == "__main__":
    main()
