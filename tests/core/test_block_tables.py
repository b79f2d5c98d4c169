"""The step's padded block-table array kept across steps is always the sequences' tables as they are now:
after some gain blocks, when rows come, go and change order, and when a sequence is given a new table of
the same length (preempted and prefilled again), which only rewriting every row would otherwise catch."""

from __future__ import annotations

import numpy as np

from polyvox.core.block_tables import BlockTableArray


def padded(tables: list[list[int]], pad: int) -> np.ndarray:
    width = max(map(len, tables))
    return np.array([t + [pad] * (width - len(t)) for t in tables], dtype=np.int64)


def test_the_array_follows_tables_that_grow_change_rows_and_are_replaced():
    array = BlockTableArray(pad=-1)
    a, b, c = [3, 4], [7], [9, 10]

    def check(tables: list[list[int]]) -> None:
        got, lens = array.update(tables)
        np.testing.assert_array_equal(got, padded(tables, -1))
        np.testing.assert_array_equal(lens, [len(t) for t in tables])

    check([a, b, c])
    a.append(5)  # one row grows past the array's width
    check([a, b, c])
    b.append(8)
    check([a, b, c])
    check([c, [20], a])  # b left, a newcomer arrived, the rest in another order
    check([a, c])
    check([a, [11, 12]])  # c's sequence preempted and prefilled again: a new list, the same length
    a.append(6)
    check([a, [11, 12]])
