"""Text: what the other quarters need to know about text, whatever it says.

    language      which language to write in: detected from the topic, or named
    cjk           Chinese, Japanese and Korean text split into words an index can match
    fts           DuckDB's full-text extension, loaded offline
    embedding     meaning, offline: a small word-embedding model shipped in its wheel
    escaping      untrusted text made safe for a terminal or for markdown
    ui_markdown   report markdown as Prefect's UI can show it

Each module is a leaf: it imports nothing else of core.
"""
