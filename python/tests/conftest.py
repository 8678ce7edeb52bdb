"""pytest configuration of the attnmap module's tests (python/tests).

The package is imported from the build: env ATTNMAP_PYTHON_PATH (default <repo>/build/python) is put first on
sys.path (amtest.py); the CLI of the same build (env ATTNMAP_CLI, default <that folder>/../attnmap) gives the
reference outputs. Run:  ATTNMAP_PYTHON_PATH=build/python /usr/bin/python3 -m pytest -q python/tests
"""
import pathlib
import sys

import pytest

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import amtest  # noqa: E402  (puts PYTHON_PATH on sys.path)


def pytest_report_header(config):
    return [f"attnmap package: {amtest.PYTHON_PATH}", f"attnmap CLI: {amtest.CLI}",
            f"ATTNMAP_REQUIRE_ALL={int(amtest.REQUIRE_ALL)}"]


@pytest.fixture(scope="session")
def attnmap():
    """The attnmap package of the build under test."""
    return amtest.import_attnmap()


@pytest.fixture(scope="session")
def default_model(attnmap):
    """The bundled default weights, loaded once."""
    return attnmap.load()


@pytest.fixture(scope="session")
def torch():
    return amtest.need("torch")


@pytest.fixture(scope="session")
def PIL_Image():
    return amtest.need("PIL.Image")
