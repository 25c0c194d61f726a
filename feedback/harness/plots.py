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
