"""Persisted task results that load as data, never as code.

Prefect writes each persisted result as a JSON record whose `metadata.serializer` says how to
load its payload, and it loads a record with whatever serializer the record names: "pickle"
(cloudpickle, the default) runs any code a payload carries, and "json" imports any class the
payload names (`__class__`) and even takes its JSON library (`jsonlib`) and decoder by dotted
name from the record. So choosing a serializer is not enough: whoever can write to the results
folder (`PREFECT_HOME/storage`, or a shared `PREFECT_RESULTS_LOCAL_STORAGE_PATH`) chooses how it
is loaded. Two parts close that:

- `DataSerializer` ("researchflow-data") writes plain JSON: our own pydantic models (the classes
  of `core.models`, looked up in that fixed table, never imported by name), lists, tuples,
  string-keyed dicts and scalars. An exception (a failed task's record) is stored as its type's
  name and its masked message and comes back as a `StoredError`, never as the class it names.
- `ResultMetadata` keeps the cached results' metadata apart from their payloads (a cache
  policy's key storage) and hands Prefect only metadata naming DataSerializer, with no options,
  whose payload loads as data: the serializer Prefect then uses is always ours. Anything else is
  refused with a warning before Prefect parses it, so Prefect finds no cached result, computes
  the task again and overwrites both files.

tasks.caching uses both for every cached task (`CACHED`): `DATA` as the result serializer and
`METADATA` as its cache policy's key storage.
What it does not do: sign records (anyone who may write the folder can still plant wrong data:
a wrong plan or page text, never code), or manage a remote storage block.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field
from prefect.filesystems import LocalFileSystem
from prefect.serializers import Serializer

import core.models
from core.secrets import mask

log = logging.getLogger("researchflow.results")

SERIALIZER_TYPE = "researchflow-data"
# The only classes a record may name: the pydantic models of core.models, by class name.
MODELS: dict[str, type[BaseModel]] = {
    name: cls for name, cls in vars(core.models).items()
    if isinstance(cls, type) and issubclass(cls, BaseModel) and cls.__module__ == "core.models"}


class StoredError(Exception):
    """An exception as a result record keeps it: its type's name and message, nothing else."""

    def __init__(self, type_name: str, message: str) -> None:
        super().__init__(f"{type_name}: {message}")
        self.type_name = type_name
        self.message = message


class DataSerializer(Serializer):
    """JSON of our models and plain data; loads only what it could have written."""

    type: Literal["researchflow-data"] = Field(default=SERIALIZER_TYPE, frozen=True)

    def dumps(self, obj: Any) -> bytes:
        return json.dumps(encode(obj), ensure_ascii=False, separators=(",", ":")).encode()

    def loads(self, blob: bytes) -> Any:
        return decode(json.loads(blob.decode("utf-8")))


def encode(obj: Any) -> Any:
    """A result as JSON values, tagged where JSON alone would lose what it was."""
    if obj is None or isinstance(obj, (bool, int, float, str)):
        return obj
    if isinstance(obj, BaseModel):
        name = type(obj).__name__
        if MODELS.get(name) is not type(obj):
            raise TypeError(f"{type(obj).__qualname__} is not a model of core.models; a "
                            "persisted result may only hold those")
        return {"__model__": name, "data": obj.model_dump(mode="json")}
    if isinstance(obj, list):
        return [encode(item) for item in obj]
    if isinstance(obj, tuple):
        return {"__tuple__": [encode(item) for item in obj]}
    if isinstance(obj, dict):
        if not all(isinstance(key, str) for key in obj):
            raise TypeError("a persisted dict must have string keys")
        return {"__dict__": {key: encode(value) for key, value in obj.items()}}
    if isinstance(obj, BaseException):
        shown = obj.message if isinstance(obj, StoredError) else str(obj)
        name = obj.type_name if isinstance(obj, StoredError) else type(obj).__name__
        return {"__error__": name, "message": mask(shown)}
    raise TypeError(f"cannot persist a {type(obj).__qualname__} as data")


def decode(value: Any) -> Any:
    """The inverse of encode; anything it would not have written is a ValueError."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, list):
        return [decode(item) for item in value]
    if isinstance(value, dict):
        keys = set(value)
        if keys == {"__model__", "data"} and value["__model__"] in MODELS:
            return MODELS[value["__model__"]].model_validate(value["data"])
        if keys == {"__tuple__"} and isinstance(value["__tuple__"], list):
            return tuple(decode(item) for item in value["__tuple__"])
        if keys == {"__dict__"} and isinstance(value["__dict__"], dict):
            return {key: decode(item) for key, item in value["__dict__"].items()}
        if keys == {"__error__", "message"}:
            return StoredError(str(value["__error__"]), str(value["message"]))
    raise ValueError(f"not a researchflow result: {str(value)[:80]!r}")


_OURS = DataSerializer().model_dump()  # {"type": "researchflow-data"}, exactly
METADATA_FOLDER = "researchflow-metadata"


def results_folder() -> Path:
    """Prefect's local results folder, as its settings say now (PREFECT_RESULTS_LOCAL_STORAGE_PATH,
    by default PREFECT_HOME/storage)."""
    from prefect.settings import get_current_settings

    return Path(get_current_settings().results.local_storage_path).expanduser().resolve()


def refusal(metadata: bytes) -> str | None:
    """Why a record's metadata may not be handed to Prefect, or None when it may: it must name
    DataSerializer exactly, and the payload it points to must load as data."""
    try:
        record = json.loads(metadata)
        serializer, key = record["serializer"], record["storage_key"]
    except (ValueError, TypeError, KeyError):
        return "not a result record's metadata"
    if serializer != _OURS:
        kind = serializer.get("type") if isinstance(serializer, dict) else None
        return f"written by another serializer ({kind!r})"
    folder = results_folder()
    payload = (folder / str(key)).resolve()
    if folder not in payload.parents:
        return "its result lies outside the results folder"
    try:
        DATA.loads(payload.read_bytes())
    except (OSError, ValueError, TypeError) as exc:
        return f"its result does not load as data ({type(exc).__name__})"
    return None


class ResultMetadata(LocalFileSystem):
    """Where cached results' metadata is kept (`<results folder>/researchflow-metadata`), handing
    Prefect only metadata that names DataSerializer and whose payload loads as data.

    Prefect reads a cached result in two steps when a cache policy has its own key storage:
    the metadata from here (which serializer, where the payload is), then the payload from the
    results folder, loaded by the serializer the metadata named. Refused metadata reads as
    "no cached result": Prefect computes the task again and writes both files anew.
    """

    _block_type_name = "researchflow result metadata"

    def _resolve_path(self, path: str) -> Path:
        if not self.basepath:
            folder = results_folder() / METADATA_FOLDER
            return self.model_copy(update={"basepath": str(folder)})._resolve_path(path)
        return super()._resolve_path(path)

    async def aread_path(self, path: str) -> bytes:
        return self._checked(path)

    def read_path(self, path: str, _sync: bool | None = None) -> bytes:
        # Prefect calls it with _sync=True (its sync/async dispatch); reading is sync either way.
        return self._checked(path)

    def _checked(self, path: str) -> bytes:
        resolved = self._resolve_path(path)
        if not resolved.is_file():
            raise ValueError(f"Path {resolved} does not exist.")
        content = resolved.read_bytes()
        why = refusal(content)
        if why is not None:
            log.warning("ignoring the cached result %s: %s; it is computed again", resolved, why)
            raise ValueError(f"refused result record {path}: {why}")
        return content


DATA = DataSerializer()
METADATA = ResultMetadata()
