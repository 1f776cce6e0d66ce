"""The layers of docs/architecture.md hold: each package imports only from the layers below it, the layers
below the Dagster wiring never import Dagster, and fm_loader never imports the pipeline."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

# lowest first; a module may import from its own layer and the layers before it
LAYERS = [
    ("fm_assets.settings",),
    ("fm_assets.engine",),
    ("fm_assets.transforms",),
    ("fm_assets.compliance",),
    ("fm_assets.side_inputs",),
    ("fm_assets.stages",),
    ("fm_assets.reports",),  # read-only views over stored records: cost, audit, verify
    ("fm_assets.datasets", "fm_assets.sample_data", "fm_assets.data"),  # releases (their cards cite reports)
    ("fm_assets.defs",),
    ("fm_assets.cli",),
    ("fm_assets.definitions", "fm_assets"),
]
NO_DAGSTER_BELOW = "fm_assets.defs"  # every layer before this one is plain Python
HEAVY = ("dagster", "dagster_k8s", "dagster_aws")


def layer_of(module: str) -> int | None:
    for rank, prefixes in enumerate(LAYERS):
        if any(module == p or (p != "fm_assets" and module.startswith(p + ".")) for p in prefixes):
            return rank
    return None


def module_name(path: Path) -> str:
    parts = list(path.relative_to(REPO).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def imports_of(path: Path) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            found += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.append(node.module)
    return found


def sources(package: str) -> list[Path]:
    return sorted((REPO / package).rglob("*.py"))


PIPELINE_FILES = sources("fm_assets")


@pytest.mark.parametrize("path", PIPELINE_FILES, ids=lambda p: str(p.relative_to(REPO)))
def test_imports_point_down_only(path: Path) -> None:
    own = layer_of(module_name(path))
    assert own is not None, (
        f"{module_name(path)} belongs to no layer; add it to LAYERS and docs/architecture.md"
    )
    for imported in imports_of(path):
        rank = layer_of(imported)
        if rank is not None:
            assert rank <= own, (
                f"{module_name(path)} (layer {own}) imports {imported} (layer {rank}): points up"
            )
        if own < layer_of(NO_DAGSTER_BELOW):  # type: ignore[operator]
            assert imported.split(".")[0] not in HEAVY, (
                f"{module_name(path)} imports {imported} below the Dagster layer"
            )


@pytest.mark.parametrize("path", sources("fm_loader"), ids=lambda p: str(p.relative_to(REPO)))
def test_fm_loader_stands_alone(path: Path) -> None:
    for imported in imports_of(path):
        top = imported.split(".")[0]
        assert top not in (
            "fm_assets",
            "pyspark",
            "great_expectations",
            "pyiceberg",
            *HEAVY,
        ), f"{path.name} imports {imported}: fm_loader must install and import without the pipeline"


def test_stage_modules_are_named_like_their_assets() -> None:
    from fm_assets.stages.registry import ALL_STAGES

    for stage in ALL_STAGES:
        assert type(stage).__module__ == f"fm_assets.stages.{stage.name}", stage.name
