"""The docs' code blocks as tests: README.md, docs/*.md, firmware_ref/README.md
(tests/doc_examples.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.doc_examples import documents_sybil, is_document

_collect = documents_sybil().pytest()


def pytest_collect_file(file_path: Path, parent: Any) -> Any:
    return _collect(file_path, parent) if is_document(file_path) else None
