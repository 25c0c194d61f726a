"""The learning harnesses' plots (matplotlib and plotly, from the test extra: imported when a plot is drawn)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from .report import EvaluationReport, WorldReport


def write_world_plots(report: WorldReport, png_path, html_path) -> None:
    """hit@5 and MRR per block, learning against frozen, as a PNG (matplotlib) and a static HTML (plotly).

    The HTML loads ``plotly.min.js`` from its own folder (copied there from the installed plotly package)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import plotly
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    x = [b.end for b in report.blocks]
    series = {
        "hit@5, learning": [b.hit5 for b in report.blocks],
        "hit@5, frozen": [b.frozen_hit5 for b in report.blocks],
        "MRR, learning": [b.mrr for b in report.blocks],
        "MRR, frozen": [b.frozen_mrr for b in report.blocks],
    }
    shift = report.config.get("shift_at")
    fig, axes = plt.subplots(1, 2, figsize=(11, 4), sharex=True)
    for ax, metric in zip(axes, ("hit@5", "MRR"), strict=True):
        for who, style in (("learning", "-o"), ("frozen", "--s")):
            ax.plot(x, series[f"{metric}, {who}"], style, label=who, markersize=3)
        if shift:
            ax.axvline(shift, color="grey", linestyle=":", label="ground truth shifts")
        ax.set_title(f"{metric} of useful notes in the assembled context")
        ax.set_xlabel("sessions (end of block)")
        ax.set_ylim(0, 1.02)
        ax.grid(alpha=0.3)
        ax.legend(loc="lower right")
    fig.tight_layout()
    fig.savefig(png_path, dpi=110)
    plt.close(fig)

    pfig = make_subplots(rows=1, cols=2, subplot_titles=("hit@5", "MRR"))
    for col, metric in ((1, "hit@5"), (2, "MRR")):
        for who, dash in (("learning", "solid"), ("frozen", "dash")):
            pfig.add_trace(
                go.Scatter(x=x, y=series[f"{metric}, {who}"], name=f"{metric}, {who}", line={"dash": dash}),
                row=1,
                col=col,
            )
        if shift:
            pfig.add_vline(x=shift, line_dash="dot", line_color="grey", row=1, col=col)
    pfig.update_yaxes(range=[0, 1.02])
    pfig.update_layout(
        title=(
            "Does the graph learn? Learning policy against frozen (no feedback); "
            "the ground truth shifts at the dotted line"
        ),
        height=450,
    )
    html_path = Path(html_path)
    pfig.write_html(html_path, include_plotlyjs="plotly.min.js", full_html=True)
    shutil.copyfile(Path(plotly.__file__).parent / "package_data" / "plotly.min.js", html_path.parent / "plotly.min.js")


def write_evaluation_plot(report: EvaluationReport, path: str | os.PathLike) -> None:
    """A small PNG of recall@5 per round: learning and frozen, train and test (matplotlib, from the test extra)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rounds = [r["round"] for r in report.rounds]
    fig, ax = plt.subplots(figsize=(6, 3.6), dpi=120)
    styles = {
        ("learning", "train"): ("tab:blue", "-"),
        ("frozen", "train"): ("tab:blue", "--"),
        ("learning", "test"): ("tab:orange", "-"),
        ("frozen", "test"): ("tab:orange", "--"),
    }
    for (name, side), (color, line) in styles.items():
        ax.plot(
            rounds,
            [r[name][side]["recall5"] for r in report.rounds],
            line,
            color=color,
            marker="o",
            label=f"{name}, {side}",
        )
    ax.set_xlabel("round (feedback rounds before the measurement)")
    ax.set_ylabel("recall@5")
    ax.set_ylim(0, 1.02)
    ax.set_xticks(rounds)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="lower right")
    ax.set_title(f"evaluate_learning: {report.config['vault']}, {len(report.questions)} questions", fontsize=9)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def write_learning_curves(runs: list[tuple[str, str, EvaluationReport]], path: str | os.PathLike) -> None:
    """The learning-curve figure of evaluate_all: one panel per set, recall@5 per round of the learning graph for
    every mode (train solid, test dashed; each the mean over the mode's seeds) and the frozen twin (grey, all
    modes' mean). ``runs``: (set, mode, report). Only our own figures: no question text, no note."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    sets = list(dict.fromkeys(r[0] for r in runs))
    cols = min(4, len(sets)) or 1
    rows = (len(sets) + cols - 1) // cols or 1
    fig, axes = plt.subplots(rows, cols, figsize=(4.2 * cols, 3.4 * rows), dpi=110, squeeze=False)
    colors = ["tab:blue", "tab:orange", "tab:green", "tab:red", "tab:purple", "tab:brown"]

    def mean_curve(reports, graph, side):
        n = min(len(r.rounds) for r in reports)
        return [sum(r.rounds[i][graph][side]["recall5"] for r in reports) / len(reports) for i in range(n)]

    for index, set_name in enumerate(sets):
        ax = axes[index // cols][index % cols]
        of_set = [r for r in runs if r[0] == set_name and r[2].rounds]
        for c, mode in enumerate(dict.fromkeys(r[1] for r in of_set)):
            reports = [r[2] for r in of_set if r[1] == mode]
            for side, line in (("train", "-"), ("test", "--")):
                curve = mean_curve(reports, "learning", side)
                ax.plot(
                    range(len(curve)),
                    curve,
                    line,
                    color=colors[c % len(colors)],
                    marker="o",
                    markersize=3,
                    label=f"{mode}, {side}",
                )
        if of_set:
            frozen = [r[2] for r in of_set]
            for side, line in (("train", "-"), ("test", "--")):
                curve = mean_curve(frozen, "frozen", side)
                ax.plot(range(len(curve)), curve, line, color="grey", linewidth=1, label=f"frozen, {side}")
        rounds = max((len(r[2].rounds) for r in of_set), default=1)
        ax.set_xticks(range(rounds))
        ax.set_title(set_name, fontsize=9)
        ax.set_xlabel("round", fontsize=8)
        ax.set_ylabel("recall@5", fontsize=8)
        ax.set_ylim(0, 1.02)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=6, loc="lower right")
    for index in range(len(sets), rows * cols):
        axes[index // cols][index % cols].axis("off")
    fig.suptitle(
        "evaluate_all: recall@5 per round, train (solid) and test (dashed);\n"
        "the learning graph by mode, the frozen twin in grey",
        fontsize=8,
    )
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
