"""The local Dagster instance config: installs ``deploy/local/dagster.yaml`` (run queue, pools, SQLite under
``$DAGSTER_HOME``, telemetry off) into a ``DAGSTER_HOME`` that has none, and creates its SQLite storage (a
daemon and a webserver started together on an empty folder would both run the schema migration and can
leave two alembic heads behind).

``python -m fm_assets.defs.instance [DAGSTER_HOME]`` is what ``make ui`` runs before ``dagster dev``.
"""

from __future__ import annotations

import logging
import os
import sys
from pathlib import Path

log = logging.getLogger(__name__)

LOCAL_INSTANCE_TEMPLATE = Path(__file__).resolve().parents[2] / "deploy" / "local" / "dagster.yaml"
# what `fm run` used to write into a fresh DAGSTER_HOME; it carries no choice of the user's, so it is replaced
LEGACY_MINIMAL_CONFIG = "telemetry:\n  enabled: false\n"


HOME_PLACEHOLDER = "__DAGSTER_HOME__"
# what `fm run` writes into a DAGSTER_HOME that has no config: no run queue or pools (an in-process run needs
# neither, and a pool slot held by a killed run would block the next one until a daemon frees it), the fast
# local event log
RUNNER_CONFIG = f"""telemetry:
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


def runner_instance_config(home: str | Path) -> Path:
    """``home/dagster.yaml`` for `fm run` unless one exists (a user's, or the UI's from ``make ui``)."""
    home = Path(home).expanduser().resolve()
    home.mkdir(parents=True, exist_ok=True)
    config = home / "dagster.yaml"
    if not config.exists() or config.read_text() == LEGACY_MINIMAL_CONFIG:
        config.write_text(render_instance_config(RUNNER_CONFIG, home))
    return config


def ensure_instance_config(home: str | Path, template: Path = LOCAL_INSTANCE_TEMPLATE) -> Path:
    """``home/dagster.yaml`` from ``template`` unless the user already has their own, and the instance's
    storage created; returns the config's path."""
    from dagster import DagsterInstance

    home = Path(home).expanduser().resolve()
    home.mkdir(parents=True, exist_ok=True)
    config = home / "dagster.yaml"
    if config.exists() and config.read_text() != LEGACY_MINIMAL_CONFIG:
        log.info("keeping the existing instance config %s", config)
    else:
        config.write_text(render_instance_config(template, home))
        log.info("installed the local instance config %s from %s", config, template)
    with DagsterInstance.from_config(str(home)):  # creates the SQLite storage before any daemon or webserver
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
