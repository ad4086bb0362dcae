"""`python deployments/serve.py [OPTIONS]` is `researchflow serve [OPTIONS]`.

The served deployments are defined once, in flows/serve.py; this script stays only so the
layout's "serve script" and the old command keep working. It needs a Prefect server:
`make ui` in another terminal and `export PREFECT_API_URL=http://127.0.0.1:4200/api`.
"""

from __future__ import annotations

import sys

from flows.cli import app

if __name__ == "__main__":
    app(["serve", *sys.argv[1:]], prog_name="researchflow")
