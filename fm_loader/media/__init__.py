"""``fm_loader.media``: image-text and audio-text shards (writer and reader); ``fm_loader.Loader`` reads them.

Writing (what the pipeline's media shard stage calls)::

    from fm_loader.media.format import MediaSample, encode_media_shard
    from fm_loader.media.manifest import MediaManifest, MediaShardEntry
    enc = encode_media_shard(samples, shard_name="shard-000000")
    for name, data in enc.files.items(): ...            # write atomically side by side
    manifest = MediaManifest(name="cc", version="v1", modality="image-text", code_version="...",
                             shards=[MediaShardEntry.from_info(enc.info)])
    manifest.save("datasets/cc/v1/manifest.json")

Training::

    loader = fm_loader.Loader("datasets/cc/v1/manifest.json", global_batch_size=256, rank=r, world_size=W)
    for batch in loader: ...        # image-text: one aspect-ratio bucket per global batch; audio: padded + mask
    state = loader.state_dict()     # restore under any world size with load_state_dict

Decoding needs the ``media`` extra (Pillow for images, soundfile for audio). The batch builders are in
:mod:`fm_loader.builders.media`; ``MediaLoader`` (``loader``) is a deprecated alias of ``fm_loader.Loader``.
Modules: ``format`` + ``index`` (tar + sample index), ``manifest``, ``buckets`` (aspect-ratio buckets), ``sources`` (verified indexes, open shards),
``plan`` (which samples form each global batch), ``decode`` (bytes -> arrays), ``verify`` (every byte of a
release), ``errors``; ``loader``, ``mixture`` and ``prefetch`` re-export the shared ``fm_loader`` modules.
"""
