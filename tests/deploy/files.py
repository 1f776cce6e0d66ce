"""Paths and a YAML loader for the deployment files (deploy/, dagster_cloud.yaml)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[2]
DEPLOY = REPO / "deploy"
DOCKERFILE = DEPLOY / "Dockerfile"


def load_yaml(path: Path) -> Any:
    return yaml.safe_load(path.read_text())


def literal_env(entries: list[dict[str, Any]]) -> dict[str, str]:
    """name -> value of the Kubernetes env entries that carry a literal value (not valueFrom)."""
    return {entry["name"]: str(entry["value"]) for entry in entries if "value" in entry}


SECRET_NAME_PARTS = ("PASSWORD", "SECRET", "TOKEN", "CREDENTIAL", "ACCESS_KEY", "PRIVATE_KEY")


def looks_secret(name: str) -> bool:
    """Whether an environment variable's name says it holds a secret (then it must come from a Secret)."""
    return any(part in name.upper() for part in SECRET_NAME_PARTS)


def dockerfile_cmd() -> list[str]:
    """The exec-form CMD of deploy/Dockerfile, as BuildKit's parser reads it."""
    import dockerfile

    cmds = [c for c in dockerfile.parse_file(str(DOCKERFILE)) if c.cmd.upper() == "CMD"]
    assert len(cmds) == 1 and cmds[0].json, "deploy/Dockerfile needs exactly one exec-form CMD"
    return list(cmds[0].value)


def dockerfile_env() -> dict[str, str]:
    """Every ENV of deploy/Dockerfile (later ones win)."""
    import dockerfile

    env: dict[str, str] = {}
    for command in dockerfile.parse_file(str(DOCKERFILE)):
        if command.cmd.upper() == "ENV":
            pairs = list(command.value)
            env.update(zip(pairs[0::2], pairs[1::2], strict=True))
    return env


def dockerfile_user() -> str:
    """The user (``uid[:gid]`` or name) the image runs as: its last USER."""
    import dockerfile

    users = [c.value[0] for c in dockerfile.parse_file(str(DOCKERFILE)) if c.cmd.upper() == "USER"]
    assert users, "deploy/Dockerfile has no USER"
    return users[-1]


def option(args: list[str], *names: str) -> str:
    """The value after the first of ``names`` in a command line."""
    for index, arg in enumerate(args):
        if arg in names:
            return args[index + 1]
    raise AssertionError(f"none of {names} in {args}")
