"""The one partitioning of the graph: a dynamic partition per landing batch."""

from dagster import DynamicPartitionsDefinition

BATCH_PARTITIONS_NAME = "landing_batches"
batch_partitions = DynamicPartitionsDefinition(name=BATCH_PARTITIONS_NAME)
