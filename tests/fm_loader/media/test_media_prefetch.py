"""The prefetch thread: same items in the same order, errors at the item that failed, stops when dropped."""

from __future__ import annotations

import threading
import time

import pytest

from fm_loader.media.prefetch import prefetched


def test_items_come_in_order_and_errors_where_they_happened():
    def items():
        yield from range(5)
        raise KeyError("item 5")

    got = []
    with pytest.raises(KeyError, match="item 5"):
        for item in prefetched(items(), 2):
            got.append(item)
    assert got == [0, 1, 2, 3, 4]


def test_closing_stops_the_producer():
    produced = []

    def items():
        for i in range(1000):
            produced.append(i)
            yield i

    gen = prefetched(items(), 2, name="test-prefetch")
    assert [next(gen) for _ in range(3)] == [0, 1, 2]
    gen.close()
    time.sleep(0.3)
    assert len(produced) <= 3 + 2 + 2  # what was handed out, queued, and in hand when it stopped
    assert not any(t.name == "test-prefetch" for t in threading.enumerate())
