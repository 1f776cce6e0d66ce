"""Sensor: every new complete landing batch becomes a partition and a run (idempotent run keys)."""


from dagster import RunRequest, SensorEvaluationContext, SensorResult, sensor

from fm_assets.defs.jobs import preprocess_job
from fm_assets.defs.partitions import BATCH_PARTITIONS_NAME, batch_partitions
from fm_assets.engine.landing import list_complete_batches
from fm_resources.object_store import ObjectStoreResource


@sensor(job=preprocess_job, minimum_interval_seconds=30, description="Registers and runs new landing batches.")
def landing_batch_sensor(context: SensorEvaluationContext, store: ObjectStoreResource) -> SensorResult:
    landed = list_complete_batches(store.store())
    known = set(context.instance.get_dynamic_partitions(BATCH_PARTITIONS_NAME))
    new = [batch for batch in landed if batch not in known]
    if new:
        context.log.info(f"new landing batches: {new}")
    return SensorResult(
        run_requests=[RunRequest(partition_key=batch, run_key=f"landing-batch:{batch}") for batch in new],
        dynamic_partitions_requests=[batch_partitions.build_add_request(new)] if new else [],
    )
