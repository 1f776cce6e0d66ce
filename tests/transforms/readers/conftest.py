"""Shared fixtures for the reader tests: the generated bad-input folder."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

_GENERATOR = Path(__file__).resolve().parents[2] / "fixtures" / "bad_input" / "generate.py"


def _load_generator():
    spec = importlib.util.spec_from_file_location("bad_input_generate", _GENERATOR)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the class is built
    spec.loader.exec_module(module)
    return module


bad_input_generator = _load_generator()


@pytest.fixture(scope="session")
def bad_inputs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    folder = tmp_path_factory.mktemp("bad_input")
    return folder, bad_input_generator.write_bad_inputs(folder)
