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
        config.write_text(template.read_text())
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
