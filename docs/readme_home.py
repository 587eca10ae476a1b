"""The site's home page is the README: one text for GitHub and the site.

An mkdocs hook (``hooks`` in ``mkdocs.yml``): the README links the pages as
``docs/<page>.md`` (right on GitHub, where it sits at the root), and the
site serves them from its root, so the home page drops that prefix.
"""

from __future__ import annotations

from pathlib import Path

from mkdocs.config.defaults import MkDocsConfig
from mkdocs.structure.files import File, Files

README = Path(__file__).resolve().parent.parent / "README.md"


def on_files(files: Files, config: MkDocsConfig) -> Files:
    """Add ``index.md``, the README with its links made relative to ``docs/``."""
    text = README.read_text(encoding="utf-8").replace("](docs/", "](")
    files.append(File.generated(config, "index.md", content=text))
    return files
