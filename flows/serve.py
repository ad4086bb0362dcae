"""`researchflow serve`: the nightly batch and ad-hoc topics, served from this process.

Two deployments, named apart from the work-pool ones of deployments/prefect.yaml
(`nightly-pool`, `adhoc-pool`) so serving never silently replaces a deployed pair:

- `research-batch/nightly-served`: the topics CSV on a cron, in a named time zone;
- `research-topic/adhoc-served`: one topic, its parameters editable per run.

Both carry the DuckDB file as their `db_path` parameter (absolute), so reports land in one known
place whatever directory a run starts in, and both load their flow by module path (the installed
package), not by a file path relative to where serving started.

Serving needs a Prefect server the UI reads from: without PREFECT_API_URL the command refuses,
because Prefect would otherwise start a temporary server that dies with this process and that
no UI ever shows. There is no flag to serve on one anyway: Ctrl-C reaches that server too (it
is a child in the same process group), and Prefect 3.9.1's runner then hangs in its shutdown,
deaf to further signals (measured). It does not deploy to a work pool: that is `prefect
deploy` with deployments/prefect.yaml.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Optional

import typer

from flows.console import check_store, db_path, fail, out, plain

if TYPE_CHECKING:
    from prefect.deployments.runner import RunnerDeployment

BATCH_DEPLOYMENT = "nightly-served"
TOPIC_DEPLOYMENT = "adhoc-served"
# The checkout's examples (flows/ is installed in place: `pip install -e .`).
DEFAULT_CSV = Path(__file__).resolve().parent.parent / "examples" / "topics.csv"
START_SERVER = ("start one with `make ui` (or `prefect server start`) in another terminal, then "
                "`export PREFECT_API_URL=http://127.0.0.1:4200/api` here")

CsvOpt = typer.Option(None, "--csv", envvar="RESEARCHFLOW_BATCH_CSV", show_default=False,
                      help="Topics CSV of the nightly batch (default: examples/topics.csv of "
                      "this checkout).")
CronOpt = typer.Option("0 6 * * *", "--cron", envvar="RESEARCHFLOW_BATCH_CRON",
                       help="When the nightly batch runs (cron, read in --timezone).")
ZoneOpt = typer.Option("UTC", "--timezone", envvar="RESEARCHFLOW_BATCH_TIMEZONE",
                       help="IANA time zone of the cron, e.g. Europe/Berlin.")
ServeDbOpt = typer.Option(None, "--db", show_default=False,
                          help="DuckDB file every served run writes (default: "
                          "RESEARCHFLOW_DB_PATH, else ./researchflow.duckdb), made absolute.")


def serve(csv: Optional[Path] = CsvOpt, cron: str = CronOpt, timezone: str = ZoneOpt,
          db: Optional[str] = ServeDbOpt) -> None:
    """Serve the nightly batch and ad-hoc topics as Prefect deployments until Ctrl-C."""
    csv_path = _checked_csv(csv or DEFAULT_CSV)
    _check_zone(timezone)
    from core.store.backend import lake_target

    target = db_path(db)
    check_store(target)  # a lake's password would travel in every run's parameters
    # A lake is named, not a path: resolving would glue it to the current directory.
    store = Path(lake_target(target) or target.expanduser().resolve())
    os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
    try:
        deployments = served_deployments(csv_path, cron, timezone, store)
    except ValueError as exc:  # Prefect's own check of the cron string
        fail(f"--cron: {exc}")
    for line in (f"serving to {_api_url()}",
                 f"  research-batch/{BATCH_DEPLOYMENT}: {csv_path}, cron '{cron}' ({timezone})",
                 f"  research-topic/{TOPIC_DEPLOYMENT}: one topic per run",
                 f"reports go to {store}",
                 f"run the batch now: prefect deployment run 'research-batch/{BATCH_DEPLOYMENT}'"):
        out.print(plain(line), soft_wrap=True)
    from prefect import serve as prefect_serve

    prefect_serve(*deployments)


def served_deployments(csv_path: Path, cron: str, timezone: str,
                       store: Path) -> list[RunnerDeployment]:
    """The two deployments `serve` runs; nothing is registered until they are served."""
    from prefect.deployments.runner import EntrypointType
    from prefect.schedules import Cron

    from flows.batch import research_batch
    from flows.topic import research_topic

    # Module entrypoints: a served run imports the installed flows, so the directory serving
    # started in matters for nothing (a file entrypoint would be relative to it).
    by_module = EntrypointType.MODULE_PATH
    nightly = research_batch.to_deployment(
        name=BATCH_DEPLOYMENT, schedule=Cron(cron, timezone=timezone),
        # The zone names each run's edition: the date it was scheduled for, in the cron's zone.
        parameters={"csv_path": str(csv_path), "db_path": str(store), "timezone": timezone},
        entrypoint_type=by_module,
        description=f"The topics CSV on a cron ({timezone}), an edition per scheduled date; "
                    f"reports land in {store}.")
    adhoc = research_topic.to_deployment(
        name=TOPIC_DEPLOYMENT, parameters={"db_path": str(store)}, entrypoint_type=by_module,
        description=f"Research one topic; override model, search or corpus per run. Reports "
                    f"land in {store}.")
    return [nightly, adhoc]


def _checked_csv(path: Path) -> Path:
    """Read the CSV once now, so a bad file fails here and not at 6 in the morning."""
    from core.topics.rows import BatchFileError, read_topics_csv

    path = path.expanduser().resolve()
    try:
        read_topics_csv(path, batch_id=path.stem)
    except BatchFileError as exc:
        fail(f"--csv: {exc}")
    return path


def _check_zone(name: str) -> None:
    # Prefect accepts any string as a schedule's time zone; a typo would surface at run time.
    from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

    try:
        ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        fail(f"--timezone: unknown time zone {name!r}; give an IANA name such as UTC or "
             "Europe/Berlin")


def _api_url() -> str:
    """The Prefect API to serve to, checked reachable."""
    from prefect.client.orchestration import get_client
    from prefect.settings import get_current_settings

    url = get_current_settings().api.url
    if not url:
        fail(f"no Prefect server to serve to (PREFECT_API_URL is not set): {START_SERVER}")
    with get_client(sync_client=True) as client:
        problem = client.api_healthcheck()
    if problem is not None:
        fail(f"cannot reach the Prefect API at {url} ({type(problem).__name__}); {START_SERVER}")
    return url


HostOpt = typer.Option("127.0.0.1", "--host", help="Address to listen on (0.0.0.0: other "
                       "machines' workers, see README 'Past one machine').")
PortOpt = typer.Option(4200, "--port", help="Port of the API and the UI.")


def ui(host: str = HostOpt, port: int = PortOpt) -> None:
    """Start the Prefect server and UI (`prefect server start`) with researchflow's settings."""
    # Its task-run recorder writes in batches (flows.local_api.SERVER_SETTINGS), which spares
    # big batches most of SQLite's "database is locked" back-offs. Settings already in the
    # environment win, e.g. PREFECT_API_DATABASE_CONNECTION_URL for a server on PostgreSQL.
    import shutil
    import sys

    from flows.local_api import server_env

    prefect = shutil.which("prefect", path=str(Path(sys.executable).parent)) or "prefect"
    env = server_env()
    # The UI asks the API at PREFECT_SERVER_API_PORT (4200 unless set), whatever --port says:
    # on another port it showed nothing but "Can't connect to Server API at ...:4200".
    # PREFECT_UI_API_URL or PREFECT_API_URL, when set, still name the UI's API.
    env["PREFECT_SERVER_API_PORT"] = str(port)
    os.execvpe(prefect, [prefect, "server", "start", "--host", host, "--port", str(port)], env)
