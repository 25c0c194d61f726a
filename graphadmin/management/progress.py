"""Progress bars of the long-running commands (import_vault, reembed): one tqdm bar per phase, on stderr."""

from __future__ import annotations

import sys

from tqdm import tqdm

PHASES = {"read": "notes read", "link": "notes linked", "embed": "texts embedded", "vectors": "vectors written"}


class Progress:
    """One tqdm bar per phase (notes read, linked, embedded; vectors written, while an import waits for its
    embeddings task), on stderr; silent when not a terminal."""

    def __init__(self, enabled: bool | None):
        self.enabled = enabled
        self.bars: dict[str, tqdm] = {}

    def __call__(self, phase: str, done: int, total: int):
        bar = self.bars.get(phase)
        if bar is None:
            for other in self.bars.values():
                other.close()
            bar = self.bars[phase] = tqdm(
                total=total,
                desc=PHASES.get(phase, phase),
                unit="",
                file=sys.stderr,
                disable=self.enabled is False or (self.enabled is None and not sys.stderr.isatty()),
                leave=True,
                dynamic_ncols=True,
            )
        bar.total = total
        bar.update(done - bar.n)  # tqdm redraws at most every mininterval

    def close(self):
        for bar in self.bars.values():
            bar.close()
