"""Imported last by the unit workers' fork server: what its preload built is frozen out of the collector's reach.

The fork server imports every stage module and the libraries their units use, then forks each worker from
that state. Frozen (``gc.freeze``), those objects are skipped by the cyclic collector: a worker's own
collections do not walk the inherited heap again and again, the collector does not write to the pages that
hold it (they stay shared between the workers), and the fork server's exit does not end with a full collection
of it: 0.19 s that every ``fm run`` with workers waited for at its exit, 0.04 s frozen. Module objects live as
long as the process anyway, so nothing that could be freed is kept.
"""

from __future__ import annotations

import gc

gc.freeze()
