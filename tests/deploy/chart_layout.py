"""The key layout of Dagster's Helm chart (dagster/dagster, 1.13 line), reduced to the branches that
deploy/helm/values.yaml uses: data for tests/deploy/test_helm_values.py, no chart code.

Taken from the chart's default values.yaml (helm/dagster/values.yaml in dagster-io/dagster) and its pydantic
schema (helm/dagster/schema/schema/charts/...: dagster_user_deployments/subschema/user_deployments.py,
dagster/subschema/{run_launcher,daemon,compute_log_manager,postgresql,concurrency}.py). The top-level
``concurrency`` block is the chart's newest (dagster PR #33194, January 2026; 1.13 charts have it).

A mapping lists the keys the chart has at that level; ``OPEN`` marks a value the chart passes through
whole (Kubernetes objects, free-form config), which is not checked further; a one-element list describes
every item of a list value.
"""

from __future__ import annotations

from typing import Any

OPEN: None = None

_K8S_POD_KEYS: dict[str, Any] = {
    key: OPEN
    for key in (
        "annotations",
        "nodeSelector",
        "affinity",
        "tolerations",
        "podSecurityContext",
        "securityContext",
        "resources",
        "livenessProbe",
        "readinessProbe",
        "startupProbe",
        "labels",
        "volumes",
        "volumeMounts",
        "env",
        "envConfigMaps",
        "envSecrets",
        "schedulerName",
    )
}

_IMAGE: dict[str, Any] = {"repository": OPEN, "tag": OPEN, "pullPolicy": OPEN, "digest": OPEN}

CHART_LAYOUT: dict[str, Any] = {
    "global": {
        "postgresqlSecretName": OPEN,
        "dagsterHome": OPEN,
        "serviceAccountName": OPEN,
        "celeryConfigSecretName": OPEN,
    },
    "serviceAccount": {"create": OPEN, "name": OPEN, "annotations": OPEN},
    "imagePullSecrets": OPEN,
    "dagster-user-deployments": {
        "enabled": OPEN,
        "enableSubchart": OPEN,
        "imagePullSecrets": OPEN,
        "deployments": [
            {
                **_K8S_POD_KEYS,
                "name": OPEN,
                "image": _IMAGE,
                "dagsterApiGrpcArgs": OPEN,
                "codeServerArgs": OPEN,
                "includeConfigInLaunchedRuns": {"enabled": OPEN},
                "port": OPEN,
                "initContainers": OPEN,
                "sidecarContainers": OPEN,
                "deploymentStrategy": OPEN,
                "service": {"annotations": OPEN},
            }
        ],
    },
    "runLauncher": {
        "type": OPEN,
        "config": {
            "k8sRunLauncher": {
                "image": _IMAGE,
                "imagePullPolicy": OPEN,
                "jobNamespace": OPEN,
                "loadInclusterConfig": OPEN,
                "kubeconfigFile": OPEN,
                "envConfigMaps": OPEN,
                "envSecrets": OPEN,
                "envVars": OPEN,
                "volumes": OPEN,
                "volumeMounts": OPEN,
                "labels": OPEN,
                "resources": OPEN,
                "schedulerName": OPEN,
                "failPodOnRunFailure": OPEN,
                "securityContext": OPEN,
                "runK8sConfig": {
                    "containerConfig": OPEN,
                    "podSpecConfig": OPEN,
                    "podTemplateSpecMetadata": OPEN,
                    "jobSpecConfig": OPEN,
                    "jobMetadata": OPEN,
                },
            },
            "celeryK8sRunLauncher": OPEN,
            "customRunLauncher": OPEN,
        },
    },
    "postgresql": {
        "enabled": OPEN,
        "image": OPEN,
        "postgresqlHost": OPEN,
        "postgresqlUsername": OPEN,
        "postgresqlPassword": OPEN,
        "postgresqlDatabase": OPEN,
        "postgresqlParams": OPEN,
        "postgresqlScheme": OPEN,
        "service": {"port": OPEN},
    },
    "generatePostgresqlPasswordSecret": OPEN,
    "dagsterDaemon": {
        **_K8S_POD_KEYS,
        "enabled": OPEN,
        "image": _IMAGE,
        "heartbeatTolerance": OPEN,
        "deploymentLabels": OPEN,
        "runCoordinator": {
            "enabled": OPEN,
            "type": OPEN,
            "config": {
                "queuedRunCoordinator": {
                    "maxConcurrentRuns": OPEN,
                    "tagConcurrencyLimits": OPEN,
                    "dequeueIntervalSeconds": OPEN,
                    "dequeueUseThreads": OPEN,
                    "dequeueNumWorkers": OPEN,
                    "blockOpConcurrencyLimitedRuns": OPEN,
                },
                "customRunCoordinator": OPEN,
            },
        },
        "runMonitoring": {
            "enabled": OPEN,
            "startTimeoutSeconds": OPEN,
            "cancelTimeoutSeconds": OPEN,
            "pollIntervalSeconds": OPEN,
            "maxResumeRunAttempts": OPEN,
            "freeSlotsAfterRunEndSeconds": OPEN,
        },
        "runRetries": {"enabled": OPEN, "maxRetries": OPEN},
        "sensors": OPEN,
        "schedules": OPEN,
    },
    "concurrency": {
        "enabled": OPEN,
        "pools": {"defaultLimit": OPEN, "granularity": OPEN, "opGranularityRunBuffer": OPEN},
        "runs": {
            "maxConcurrentRuns": OPEN,
            "tagConcurrencyLimits": [{"key": OPEN, "value": OPEN, "limit": OPEN}],
        },
    },
    "computeLogManager": {
        "type": OPEN,
        "config": {
            "s3ComputeLogManager": {
                "bucket": OPEN,
                "localDir": OPEN,
                "prefix": OPEN,
                "useSsl": OPEN,
                "verify": OPEN,
                "verifyCertPath": OPEN,
                "endpointUrl": OPEN,
                "skipEmptyFiles": OPEN,
                "uploadInterval": OPEN,
                "uploadExtraArgs": OPEN,
                "showUrlOnly": OPEN,
                "region": OPEN,
            },
            "azureBlobComputeLogManager": OPEN,
            "gcsComputeLogManager": OPEN,
            "customComputeLogManager": OPEN,
        },
    },
    "telemetry": {"enabled": OPEN},
}

# Values the chart accepts for its enumerations (the schema's enums), for the keys whose value picks a branch.
CHART_CHOICES: dict[tuple[str, ...], frozenset[str]] = {
    ("runLauncher", "type"): frozenset({"K8sRunLauncher", "CeleryK8sRunLauncher", "CustomRunLauncher"}),
    ("dagsterDaemon", "runCoordinator", "type"): frozenset({"QueuedRunCoordinator", "CustomRunCoordinator"}),
    ("computeLogManager", "type"): frozenset(
        {
            "NoOpComputeLogManager",
            "AzureBlobComputeLogManager",
            "GCSComputeLogManager",
            "S3ComputeLogManager",
            "CustomComputeLogManager",
        }
    ),
    ("concurrency", "pools", "granularity"): frozenset({"op", "run"}),
}
# The branch of `config` each type value selects (the chart reads only that one).
CHART_CONFIG_BRANCH: dict[tuple[str, ...], dict[str, str]] = {
    ("runLauncher",): {"K8sRunLauncher": "k8sRunLauncher"},
    ("dagsterDaemon", "runCoordinator"): {"QueuedRunCoordinator": "queuedRunCoordinator"},
    ("computeLogManager",): {"S3ComputeLogManager": "s3ComputeLogManager"},
}
