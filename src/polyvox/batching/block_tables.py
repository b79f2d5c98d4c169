"""A step's block tables as one padded host array `[B, width]`, kept from step to step while the rows
hold the same tables in the same order (steady decode): a step then writes only the rows that gained a
block, not every row's table.

A sequence's block table is a list that only grows in place while it holds its blocks; freeing or
preempting it gives the sequence a new list. So the same list objects in the same order mean the same
rows, each the same table with blocks appended, and their lengths say which rows to write.
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
        if ids != self._ids:
            self._rebuild(tables, lens)
            self._lists, self._ids = tables, ids
        else:
            grown = np.flatnonzero(lens != self.lens).tolist()
            if len(grown) and int(lens.max()) > self.tables.shape[1]:
                self._widen(int(lens.max()))
            for row in grown:
                self.tables[row, : lens[row]] = tables[row]
        self.lens = lens
        return self.tables, lens

    def _rebuild(self, tables: list[list[int]], lens: np.ndarray) -> None:
        width = int(lens.max()) if len(lens) else 0
        self.tables = np.full((len(tables), width), self.pad, dtype=np.int64)
        flat = np.fromiter(itertools.chain.from_iterable(tables), dtype=np.int64, count=int(lens.sum()))
        self.tables[np.arange(width) < lens[:, None]] = flat

    def _widen(self, width: int) -> None:
        wider = np.full((self.tables.shape[0], width), self.pad, dtype=np.int64)
        wider[:, : self.tables.shape[1]] = self.tables
        self.tables = wider
