"""Batch builders, one per sample kind (:mod:`fm_loader.kinds` names them): rows in, one fixed-shape batch out.

The :class:`fm_loader.loader.Loader` core owns the stream position, the state, workers, prefetch, metrics and
closing; a builder says how the global stream is cut into batches (:meth:`BatchBuilder.steps`) and builds one
(:meth:`BatchBuilder.build`). ``tokens`` builds packed-token batches, ``media`` image-text and audio-text ones.
"""
