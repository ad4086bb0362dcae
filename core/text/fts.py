"""DuckDB's `fts` extension, loaded offline.

The extension comes from the file the pinned `duckdb-extension-fts` package ships: plain
`INSTALL fts` downloads, which fails offline, and `LOAD '<path>'` also avoids writing to
~/.duckdb. Shared by the corpus index (core.search.corpus) and the store's full-text search
(core.store.fulltext); neither builds its own loader.
"""

from __future__ import annotations

from pathlib import Path

import duckdb


def fts_extension_path() -> Path:
    """The fts extension file shipped by the pinned duckdb-extension-fts package."""
    import duckdb_extension_fts  # a data-only package; imported lazily like everything else

    version = duckdb.__version__
    path = Path(duckdb_extension_fts.__file__).parent / "extensions" / f"v{version}" / (
        "fts.duckdb_extension")
    if not path.is_file():
        raise RuntimeError(f"duckdb-extension-fts has no extension for duckdb {version} at "
                           f"{path}; pin duckdb-extension-fts to the duckdb version")
    return path


def load_fts(con: duckdb.DuckDBPyConnection) -> None:
    """Load the extension into an open connection (BM25 indexes, `stem`)."""
    con.execute(f"LOAD '{fts_extension_path().as_posix()}'")
