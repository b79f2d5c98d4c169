"""A step's block tables as one padded host array `[B, width]`, kept from step to step: a step writes
only the rows that gained a block or are new, not every row's table; rows that carry on from the last
step, in whatever order now, are one gather.

A sequence's block table is a list that only grows in place while it holds its blocks; freeing or
preempting it gives the sequence a new list. So a list object seen in the last step is the same table,
with blocks appended, and its length says whether to write its row again.
"""

from __future__ import annotations

import itertools

import numpy as np


class BlockTableArray:
    def __init__(self, pad: int = 0) -> None:
        self.pad = pad  # the block id past each table's end
        self.tables = np.zeros((0, 0), dtype=np.int64)
        self.lens = np.zeros(0, dtype=np.int64)
        self._lists: list[list[int]] = []  # held, so that no new list can take one's id()
        self._ids: list[int] = []

    def update(self, tables: list[list[int]]) -> tuple[np.ndarray, np.ndarray]:
        """`tables` as `([B, width]` padded, `[B]` lengths); the arrays are this object's, valid until
        the next call."""
        lens = np.fromiter(map(len, tables), dtype=np.int64, count=len(tables))
        ids = list(map(id, tables))
        if ids == self._ids:  # steady decode: the same rows
            stale = np.flatnonzero(lens != self.lens)
            if len(stale) and int(lens.max()) > self.tables.shape[1]:
                self.tables = self._padded(self.tables, slice(None), len(tables), int(lens.max()))
        else:
            stale = self._carry_over(ids, lens)
            self._lists, self._ids = tables, ids
        if len(stale):
            self._write(tables, stale, lens)
        self.lens = lens
        return self.tables, lens

    def _carry_over(self, ids: list[int], lens: np.ndarray) -> np.ndarray:
        """Rows now as the last call's rows for the same tables, in the new order; the rows to write."""
        last_row = dict(zip(self._ids, range(len(self._ids)), strict=True))
        source = np.fromiter(map(last_row.get, ids, itertools.repeat(-1)), dtype=np.int64, count=len(ids))
        kept = np.flatnonzero(source >= 0)
        width = int(lens.max()) if len(lens) else 0
        self.tables = self._padded(self.tables[source[kept]], kept, len(ids), width)
        stale = np.ones(len(ids), dtype=bool)
        stale[kept] = lens[kept] != self.lens[source[kept]]
        return np.flatnonzero(stale)

    def _write(self, tables: list[list[int]], rows: np.ndarray, lens: np.ndarray) -> None:
        """Rows `rows` written whole from their lists (numpy, not a row at a time)."""
        width = self.tables.shape[1]
        row_lens = lens[rows]
        flat = itertools.chain.from_iterable([tables[r] for r in rows.tolist()])
        fresh = np.full((len(rows), width), self.pad, dtype=np.int64)
        fresh[np.arange(width) < row_lens[:, None]] = np.fromiter(flat, np.int64, int(row_lens.sum()))
        self.tables[rows] = fresh

    def _padded(self, rows: np.ndarray, at: np.ndarray | slice, count: int, width: int) -> np.ndarray:
        """`[count, width]` of padding with `rows` (cut or padded to `width`) put at rows `at`."""
        out = np.full((count, width), self.pad, dtype=np.int64)
        keep = min(width, rows.shape[1])
        out[at, :keep] = rows[:, :keep]
        return out
