"""Side inputs as assets, so the UI shows why a stage is stale: the tokenizer (trained or registered once,
pinned by sha256) and the blocklists and eval registry (observable sources: their version is their content).

The tokenizer trains on the text of the earliest landed batch that kept any (its curated documents, else its
captions and transcripts); until that exists it waits and retries like a stage waiting for earlier batches
(``stage_assets.retry_when_pending``). Both stages it may read are its upstream, so in a batch's run it goes
after them."""

import warnings
from collections.abc import Callable

from dagster import (
    AssetExecutionContext,
    AssetsDefinition,
    AssetSpec,
    BetaWarning,
    DataVersion,
    MaterializeResult,
    MetadataValue,
    ObserveResult,
    asset,
    multi_observable_source_asset,
)

from fm_assets.defs.resources.object_store import ObjectStoreResource
from fm_assets.defs.resources.side_inputs import (
    BlocklistsResource,
    EvalRegistryResource,
    QualityModelResource,
)
from fm_assets.defs.resources.tokenizer_registry import TokenizerRegistryResource
from fm_assets.defs.stage_assets import retry_when_pending
from fm_assets.engine.refs import EarlierBatchPending
from fm_assets.side_inputs.quality_model import pinned_quality_model
from fm_assets.side_inputs.tokenizer import CAPTION_STAGE, TRAINING_STAGE, ensure_pinned

PARTITION_TAG = "dagster/partition"  # the tag Dagster puts on a partitioned run (no public constant)


@asset(
    group_name="side_inputs",
    deps=[TRAINING_STAGE, CAPTION_STAGE],
    code_version="tokenizer-v2",
    kinds={"python"},
    pool="tokenizer",
    description="The pinned tokenizer: FM_TOKENIZER_FILE registered, else a byte-level BPE trained once on "
    "the text of the earliest landed batch that kept any (curated documents, else captions and transcripts). "
    "Its sha256 is an input of tokenize's key.",
)
def tokenizer(
    context: AssetExecutionContext, store: ObjectStoreResource, tokenizers: TokenizerRegistryResource
) -> MaterializeResult:
    try:
        # the batch this run is for (none when the asset is materialized by itself): never wait on a later one
        run_batch = context.run.tags.get(PARTITION_TAG)
        pinned, action = ensure_pinned(store.store(), tokenizers.spec(), for_batch=run_batch)
    except EarlierBatchPending as pending:
        retry_when_pending(context, pending)
    context.log.info(f"tokenizer {pinned.sha256[:12]}: {action}")
    return MaterializeResult(
        data_version=DataVersion(pinned.sha256),
        metadata={
            "sha256": pinned.sha256,
            "vocab_size": pinned.vocab_size,
            "eos_id": pinned.eos_id if pinned.eos_id is not None else MetadataValue.text("none"),
            "action": action,
        },
    )


def observable_source(spec: AssetSpec) -> Callable[[Callable[..., ObserveResult]], AssetsDefinition]:
    """An observable source asset from a full ``AssetSpec`` (owners, kinds, tags like every other asset; a
    ``SourceAsset`` has no owners or kinds). Dagster marks the decorator beta: its warning is silenced here,
    where the decorator is applied once at import, so it does not reach every command's stderr."""

    def decorate(fn: Callable[..., ObserveResult]) -> AssetsDefinition:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", BetaWarning)
            return multi_observable_source_asset(specs=[spec])(fn)

    return decorate


@observable_source(
    AssetSpec(
        "blocklists",
        group_name="side_inputs",
        description="Blocklists (FM_BLOCKLIST_FILE); version = content.",
        kinds={"json"},
    )
)
def blocklists(blocklists: BlocklistsResource) -> ObserveResult:
    lists = blocklists.load()
    return ObserveResult(
        data_version=DataVersion(lists.fingerprint()),
        metadata={
            "file": blocklists.path or "none",
            "url_domains": len(lists.url_domains),
            "doc_hashes": len(lists.doc_hashes),
            "revoked": len(lists.revoked),
        },
    )


@observable_source(
    AssetSpec(
        "eval_registry",
        group_name="side_inputs",
        description="Benchmarks decontaminate guards against (HumanEval, lm-eval few-shot sets, bundled and "
        "user passages), each hashed; version = the n-gram index fingerprint.",
        kinds={"json"},
    )
)
def eval_registry(eval_registry: EvalRegistryResource, store: ObjectStoreResource) -> ObserveResult:
    index = eval_registry.index(store.store())  # read from the root's stored index when it has one
    entries = eval_registry.spec(store.store())["entries"]
    return ObserveResult(
        data_version=DataVersion(index.fingerprint()),
        metadata={
            "source": eval_registry.describe(),
            "ngrams": len(index),
            "n": index.n,
            "benchmarks": MetadataValue.json(entries),
        },
    )


@asset(
    group_name="side_inputs",
    code_version="quality-model-v1",
    kinds={"python"},
    description="The pinned quality model (weights + thresholds in one file, pinned by sha256): "
    "FM_QUALITY_MODEL_FILE registered, else trained on FM_QUALITY_TRAIN_DIR (`fm sample-data` pages vs damaged "
    "copies), else whatever `fm quality-model` pinned. Its sha256 is an input of filter's key.",
)
def quality_model(
    context: AssetExecutionContext,
    store: ObjectStoreResource,
    quality_model_source: QualityModelResource,
) -> MaterializeResult:
    root = store.store()
    registered = quality_model_source.register(root)
    if registered is not None:
        pinned, action = registered
    else:
        found = pinned_quality_model(root)
        if found is None:
            context.log.info("no quality model configured or pinned: filter uses its heuristic rules only")
            return MaterializeResult(data_version=DataVersion("none"), metadata={"action": "none pinned"})
        pinned, action = found, "unchanged"
    context.log.info(f"quality model {pinned.sha256[:12]}: {action}")
    return MaterializeResult(
        data_version=DataVersion(pinned.sha256),
        metadata={
            "sha256": pinned.sha256,
            "origin": pinned.origin,
            "action": action,
            "min_score": pinned.model.min_score,
            "trained_on": MetadataValue.json(pinned.model.trained_on),
        },
    )


SIDE_INPUT_ASSETS = [tokenizer, blocklists, eval_registry, quality_model]
