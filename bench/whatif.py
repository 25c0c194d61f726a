"""The what-if over many sessions, on the demo graph: is a replay of 200 logged sessions under 3 s?

    make bench-whatif                                     # builds the demo graph once, then times
    .venv/bin/python -m bench.whatif --iterations 3       # fewer runs

The demo graph (``make run``'s: the demo vault, embedded by the configured model, and weeks of simulated sessions,
``feedback.harness.demo``) is built in its own database, ``graphadmin_bench_whatif`` (kept between runs: building
it takes a few minutes; ``--rebuild`` drops it first). Then ``ranking.whatif.whatif`` over the last 200 sessions is
timed for three drafts: one that only rescores the frozen candidates, one that re-runs retrieval (``max_hops``),
one that re-runs retrieval with another fusion (``rrf_k``). Each after one warm-up run; median and maximum.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

os.environ.setdefault("BENCH_DATABASE", "graphadmin_bench_whatif")

from bench.common import BENCH_DATABASE, configure_environment, setup_django  # noqa: E402

TARGET_S = 3.0
SESSIONS = 200


def drafts(current: dict) -> dict[str, dict]:
    """The drafts timed: name -> policy changes."""
    return {
        "rescore (coef_vector +0.1)": {"coef_vector": round(current["coef_vector"] + 0.1, 3)},
        "retrieve (max_hops 1)": {"max_hops": 1 if current["max_hops"] != 1 else 2},
        "retrieve (rrf_k 60)": {"rrf_k": 60 if current["rrf_k"] != 60 else 0},
    }


def main(argv=None) -> list[dict]:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--iterations", type=int, default=5, help="Timed runs per draft (default 5).")
    parser.add_argument("--rebuild", action="store_true", help="Drop the demo database first.")
    args = parser.parse_args(argv)
    configure_environment()
    if args.rebuild:
        from bench.generate import _drop_database

        setup_django()
        _drop_database()
    setup_django()
    from feedback.harness.demo import ensure_demo, fill_demo_history
    from ranking.whatif import whatif

    t = time.perf_counter()
    graph, _password = ensure_demo()
    filled = fill_demo_history()
    print(f"demo graph in {BENCH_DATABASE}: {filled.get('status')} in {time.perf_counter() - t:.1f} s", flush=True)
    rows = []
    for name, changes in drafts(graph.current_policy().numbers()).items():
        answer = whatif(graph, changes=changes, n=SESSIONS)  # warm-up (and the figures shown)
        times = []
        for _ in range(args.iterations):
            started = time.perf_counter()
            whatif(graph, changes=changes, n=SESSIONS)
            times.append(time.perf_counter() - started)
        sel, agg = answer["selection"], answer["aggregate"]
        rows.append(
            {
                "draft": name,
                "method": answer["method"],
                "retrievals": answer["retrievals"],
                "sessions": sel["sessions"],
                "injections": sel["injections"],
                "median_s": statistics.median(times),
                "max_s": max(times),
                "moved": agg["candidates_moved"],
                "found_or_lost": agg["candidates_found_or_lost"],
                "flips": agg["top1_flips"],
                "first_used_rank": answer["first_used_rank"],
            }
        )
    load = os.getloadavg()
    print(
        f"\nwhat-if over the last {SESSIONS} sessions of the demo graph, {args.iterations} runs each (target < 3 s); "
        f"{os.cpu_count()} cores, load average {load[0]:.1f} {load[1]:.1f} {load[2]:.1f}"
    )
    print(
        "| draft | method | sessions | logged retrievals | retrieval runs | median s | max s | met | moved | "
        "found or lost | top-1 flips |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        met = "yes" if r["max_s"] < TARGET_S else "no"
        print(
            f"| {r['draft']} | {r['method']} | {r['sessions']} | {r['injections']} | {r['retrievals']} | "
            f"{r['median_s']:.2f} | "
            f"{r['max_s']:.2f} | {met} | {r['moved']} | {r['found_or_lost']} | {r['flips']} |"
        )
    return rows


if __name__ == "__main__":
    main()
