"""The local Dagster instance config: installs ``deploy/local/dagster.yaml`` (run queue, pools, run
monitoring, SQLite under ``$DAGSTER_HOME``, telemetry off) into a ``DAGSTER_HOME`` that has none, and creates
its SQLite storage (a daemon and a webserver started together on an empty folder would both run the schema
migration and can leave two alembic heads behind).

``python -m fm_assets.defs.instance [DAGSTER_HOME]`` is what ``make ui`` runs before ``dagster dev``; `fm run`
(and so `make demo`) installs the same file, so whichever command runs first the instance is the same.
"""

from __future__ import annotations

import logging
import os
import sys
from pathlib import Path

log = logging.getLogger(__name__)

LOCAL_INSTANCE_TEMPLATE = Path(__file__).resolve().parents[2] / "deploy" / "local" / "dagster.yaml"
HOME_PLACEHOLDER = "__DAGSTER_HOME__"
# what older `fm run`s wrote into a fresh DAGSTER_HOME (no run queue, no pools, no run monitoring): they carry
# no choice of the user's, so the full config replaces them whichever command comes next
LEGACY_MINIMAL_CONFIG = "telemetry:\n  enabled: false\n"
LEGACY_RUNNER_CONFIG = f"""telemetry:
  enabled: false
event_log_storage:
  module: fm_assets.defs.event_log
  class: LocalSqliteEventLogStorage
  config:
    base_dir: {HOME_PLACEHOLDER}/history/runs
"""


def render_instance_config(template: Path | str, home: Path) -> str:
    text = template.read_text() if isinstance(template, Path) else template
    return text.replace(HOME_PLACEHOLDER, str(home))


def is_replaceable(config: Path, home: Path) -> bool:
    """Whether ``config`` is missing or one of the configs older `fm run`s generated (never a user's file)."""
    if not config.exists():
        return True
    text = config.read_text()
    return text in (LEGACY_MINIMAL_CONFIG, render_instance_config(LEGACY_RUNNER_CONFIG, home))


def install_instance_config(home: str | Path, template: Path = LOCAL_INSTANCE_TEMPLATE) -> Path:
    """``home/dagster.yaml`` from ``template`` unless the user already has their own; returns its path.
    Every command that opens the local instance calls this (`make ui`, `fm run`, `make demo`), so the
    instance has the same run queue, pools and run monitoring whichever of them runs first."""
    home = Path(home).expanduser().resolve()
    home.mkdir(parents=True, exist_ok=True)
    config = home / "dagster.yaml"
    if is_replaceable(config, home):
        config.write_text(render_instance_config(template, home))
        log.info("installed the local instance config %s from %s", config, template)
    else:
        log.info("keeping the existing instance config %s", config)
    return config


def ensure_instance_config(home: str | Path, template: Path = LOCAL_INSTANCE_TEMPLATE) -> Path:
    """``install_instance_config`` and the instance's storage created (what `make ui` runs before starting a
    daemon and a webserver together). A command that goes on to use the instance (`fm run`) installs the
    config and opens the instance once instead: opening it creates the storage."""
    from dagster import DagsterInstance

    config = install_instance_config(home, template)
    with DagsterInstance.from_config(str(config.parent)):  # the SQLite storage before any daemon or webserver
        pass
    return config


def main(argv: list[str] | None = None) -> int:
    logging.basicConfig(level=logging.WARNING, format="%(message)s")  # alembic's INFO chatter stays out
    log.setLevel(logging.INFO)
    args = sys.argv[1:] if argv is None else argv
    home = args[0] if args else os.environ.get("DAGSTER_HOME")
    if not home:
        log.error("usage: python -m fm_assets.defs.instance DAGSTER_HOME (or set DAGSTER_HOME)")
        return 2
    ensure_instance_config(home)
    return 0


if __name__ == "__main__":
    sys.exit(main())
