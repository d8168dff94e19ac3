"""The bridge adapter for Prefect 3 (`prefect`): a real `@flow` of `@task(persist_result=True)`
calls against a real local Prefect API server (uvicorn, the app `prefect server start` serves)
on a SQLite database, with typed human input through `suspend_flow_run` (configuration
`suspend`) or `pause_flow_run` (configuration `pause`) and `resume_flow_run(id, run_input=...)`.

The fuzzing workflow is one flow, `fuzz-workflow`, one flow run per bridge thread, created from
a deployment of the flow (suspend needs one: Prefect refuses "Cannot suspend flows without a
deployment"). The flow runs the model's stages in order, each one call of the task
`fuzz-stage(run, stage, state, value)`, whose persisted result (`{"run", "stage", "state"}`) is
the model's state after the stage; a consuming stage first waits for its value with
`suspend_flow_run(wait_for_input=Answer, key="s<stage>")` or `pause_flow_run(...)`, where
`Answer` is a `RunInput` whose one field is `value: int = Field(ge=0)`: the pausing call saves
its schema "so the UI can display the form and we can validate the input when the flow is
resumed" (flow_runs.py), and the server's resume endpoint validates `run_input` against it
before it changes the run's state. The model's checkpoint chain is the task results Prefect persisted in
the example's result storage (a local folder), the recorded inputs are the flow run's stored
inputs (`<state>-s<stage>-response`, what `resume_flow_run` records).

Prefect's docs (https://docs.prefect.io/v3/develop/pause-resume): "When a flow run is paused,
code execution is stopped and the process continues to run. When a flow run is suspended, code
execution is stopped and so is the process." The suspend_flow_run docstring: "When resumed, the
flow run will be rescheduled to finish execution. In order suspend a flow run in this way, the
flow needs to have an associated deployment and results need to be configured with the
`persist_result` option." A rescheduled run runs the flow function again from its first line;
what keeps it from re-running completed tasks is the task cache (docs/v3/concepts/caching, the
default policy: the task's inputs, its code and the flow run id): "When a task run begins,
Prefect first computes its cache key and uses this key to look up a record in the task's result
store. If an unexpired record is found, this result is returned and the task does not run".
The interactive-workflows guide (https://docs.prefect.io/v3/advanced/interactive): "To receive
input while paused or suspended use the wait_for_input parameter in the pause_flow_run or
suspend_flow_run functions", with a `RunInput` subclass among the accepted types.

How the contract's operations map (docs/prefect.md says more):

- start: `fuzz_workflow.to_deployment(name).apply()`, `run_deployment(id, timeout=0)` (a
  scheduled flow run), then the run is executed in a fresh process the way a runner's engine
  process executes a scheduled run (`prefect.flow_engine.run_flow(flow, flow_run=...)`), until
  it suspends (the process exits: `Pause`) or pauses (the store shows it PAUSED with its input
  schema saved; the process, blocked in `pause_flow_run`, is then ended) or completes;
- resume(v): `resume_flow_run(flow_run_id, run_input={"value": v})` from a client process, then
  the resumed run is executed as above (suspend: the run is rescheduled "Resuming"; pause: the
  run is set RUNNING, and since the paused process was ended, a fresh process continues it);
- recover: the run executed as above in a fresh process, from whatever the server shows;
- fork, update: not expressible (see `unsupported`).

The API server runs once per host template (started by the adapter's `preload`, shared by the
hosts the template forks) or, where no template preloaded it (a session in a test), once per
adapter. It is owned by a keeper process that starts uvicorn with a SQLite file in a directory
of its own, and removes both when the process that started it ends (SIGKILL included: the keeper
is no descendant of its owner, so the bridge's kill of a host template's process tree does not
take it along before it cleaned up) or tells it to stop. Every example uses deployments and
result storage of its own.

Effects carry no key: Prefect hands task code no identity it documents as an idempotency key
(the task's cache key is computed from its inputs, but is not handed to the task).
"""

from __future__ import annotations

import ctypes
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

from pymc_resume.bridge.adapter import Observation, Outcome, ThreadView, Variant
from pymc_resume.bridge.kit import ChildProcessAdapter, Refusal
from pymc_resume.bridge.kit.process import die_with_parent
from pymc_resume.model.state import INITIAL, Checkpoint

MODES = ("suspend", "pause")
FLOW, TASK = "fuzz-workflow", "fuzz-stage"
API_URL_VARIABLE = "PYMC_RESUME_PREFECT_API_URL"  # set by the preload in the template: its server
SERVER_TIMEOUT = 180.0  # a server's start (its migrations) under load
SETTLE_POLLING = 0.05
SETTLE_TIMEOUT = 180.0
PAUSE_POLL_SECONDS = 1  # pause_flow_run's poll_interval (an int): the paused process is ended anyway
PR_SET_PDEATHSIG = 1
EXECUTING = b"#executing\n"  # a flow process's word to its child: the run's execution began
TERMINAL = ("COMPLETED", "FAILED", "CRASHED", "CANCELLED")
FAILED_STATES = ("FAILED", "CRASHED", "CANCELLED")

DOCS = "https://docs.prefect.io/v3"
INTERACTIVE_DOCS = f"{DOCS}/advanced/interactive"
PAUSE_DOCS = f"{DOCS}/develop/pause-resume"
FORK_UNSUPPORTED = (
    "Prefect has no call that starts a flow run from another flow run's position or persisted "
    "results: a flow run is created from a flow or a deployment with parameters, and its task "
    "cache is keyed by its own run id (RUN_ID)"
)
UPDATE_UNSUPPORTED = (
    "Prefect has no client call that writes a flow run's application state: its state is its "
    "tasks' persisted results, written only by the task runs; set_flow_run_state writes the "
    "orchestration state (Running, Paused, ...), not results"
)
FRAMEWORK_CALLS = {
    "crash": "SIGKILL of the process executing the flow run (around a task's code, or right "
    "after the task call returned: its result is persisted)",
}
VARIANTS = (
    Variant(
        "start",
        "run-deployment",
        "fuzz_workflow.to_deployment(name).apply(); run_deployment(id, timeout=0); the run executed "
        "as a runner does (prefect.flow_engine.run_flow(fuzz_workflow, flow_run))",
        f"{DOCS}/deploy/index; {DOCS}/api-ref/python/prefect-deployments-flow_runs#run_deployment",
    ),
    Variant(
        "resume",
        "resume-flow-run",
        "resume_flow_run(flow_run_id, run_input={'value': v}); the resumed run executed",
        f"{PAUSE_DOCS}; {INTERACTIVE_DOCS}; {DOCS}/api-ref/python/prefect-flow_runs#resume_flow_run",
    ),
    Variant(
        "resume-together",
        "resume-flow-run",
        "k processes, each resume_flow_run(flow_run_id, run_input={'value': v})",
        f"{PAUSE_DOCS}; {INTERACTIVE_DOCS}",
    ),
    Variant(
        "recover",
        "execute",
        "the flow run executed in a fresh process (prefect.flow_engine.run_flow(fuzz_workflow, flow_run))",
        f"{DOCS}/api-ref/python/prefect-flow_engine#run_flow",
    ),
)


class PrefectRefusal(Exception):
    """An error Prefect raised to its client (its type and message)."""


def _prefect_version() -> str:
    from importlib.metadata import version

    return version("prefect")


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _server_environment(folder: Path) -> dict[str, str]:
    """The environment of a Prefect process that keeps its files in `folder` (never ~/.prefect),
    with analytics off and the server's background services this workflow does not use off."""
    environment = {
        "PREFECT_HOME": str(folder / "home"),
        "PREFECT_API_DATABASE_CONNECTION_URL": f"sqlite+aiosqlite:///{folder / 'prefect.db'}",
        "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
        "PREFECT_UI_ENABLED": "false",
        "DO_NOT_TRACK": "1",
        "PREFECT_LOGGING_LEVEL": "ERROR",
        "PREFECT_SERVER_LOGGING_LEVEL": "ERROR",
    }
    for service in ("SCHEDULER", "LATE_RUNS", "FOREMAN", "PAUSE_EXPIRATIONS", "CANCELLATION_CLEANUP"):
        environment[f"PREFECT_SERVER_SERVICES_{service}_ENABLED"] = "false"
    return environment


def start_server(folder: Path) -> tuple[str, int]:
    """Start a keeper process that serves the Prefect API on a SQLite file in `folder` and, when
    this process ends or it is told to stop (`stop_server`), ends the server and removes the
    folder; returns the API's URL and the keeper's pid."""
    port = _free_port()
    folder.mkdir(parents=True, exist_ok=True)
    owner = os.getpid()
    launcher = subprocess.Popen(
        [sys.executable, "-c", f"from {__name__} import keep_server; keep_server()"]
        + [str(folder), str(port), str(owner), str(_start_time(owner))],
        env={**os.environ, **_server_environment(folder)},
        start_new_session=True,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
    )
    assert launcher.stdout is not None
    keeper = int(launcher.stdout.readline())
    launcher.stdout.close()
    launcher.wait()
    return f"http://127.0.0.1:{port}/api", keeper


def stop_server(keeper: int, timeout: float = 30.0) -> None:
    """Tell the keeper `keeper` to end its server and remove its folder; wait until it is gone."""
    try:
        os.kill(keeper, signal.SIGTERM)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and _start_time(keeper) is not None:
        time.sleep(0.05)


def keep_server() -> None:
    """The keeper: leave the launcher (so that it is no descendant of its owner, whose process
    tree the bridge may SIGKILL at once), run uvicorn with Prefect's API app until the owner
    process is gone or SIGTERM comes, then kill the server and remove its folder."""
    folder, port, owner, owner_start = Path(sys.argv[1]), sys.argv[2], int(sys.argv[3]), sys.argv[4]
    if os.fork():
        os._exit(0)
    print(os.getpid(), flush=True)
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)  # the launcher's reader has its line: nothing more goes to its pipe
    ending: list[bool] = []
    signal.signal(signal.SIGTERM, lambda *_: ending.append(True))
    server = subprocess.Popen(
        [sys.executable, "-m", "uvicorn", "--factory", "prefect.server.api.server:create_app"]
        + ["--host", "127.0.0.1", "--port", port, "--log-level", "error", "--lifespan", "on"],
        preexec_fn=lambda: ctypes.CDLL(None).prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,  # the server logs what it refuses; its clients are told
    )
    try:
        while not ending and str(_start_time(owner)) == owner_start and server.poll() is None:
            time.sleep(0.2)
    finally:
        server.kill()
        server.wait()
        shutil.rmtree(folder, ignore_errors=True)


def _start_time(pid: int) -> int | None:
    """The process's start time in clock ticks since boot, or None when it is gone (a zombie is
    gone); as `bridge.hosting.workdirs` reads it (adapters may not import the hosting layer)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat.rsplit(")", 1)[1].split()
    return None if fields[0] in ("Z", "X") else int(fields[19])


def preload_prefect() -> None:
    """The host template's preload: one API server for every host it forks (their examples
    keep apart by deployment and result folder), Prefect's client settings in the environment
    (its home in the server's folder, never ~/.prefect), and Prefect's modules (importing them
    starts no thread)."""
    import importlib

    if API_URL_VARIABLE not in os.environ:  # else a server its caller runs (a test's)
        folder = _owned_folder()
        api, _ = start_server(folder)
        os.environ.update(_client_environment(folder, api))
        os.environ[API_URL_VARIABLE] = api
    for module in PREFECT_MODULES:
        importlib.import_module(module)


def _owned_folder() -> Path:
    """A fresh folder named as `bridge.hosting.workdirs.make_workdir` names an example's (this
    process's pid and start time: a killed run's is removed by the next run's sweep), where
    examples keep their stores. Built here because adapters may not import the hosting layer."""
    import tempfile

    start_time = _start_time(os.getpid())
    root = "/dev/shm" if os.access("/dev/shm", os.W_OK) else None
    return Path(tempfile.mkdtemp(prefix=f"pymc-resume-{os.getpid()}-{start_time}-", dir=root))


PREFECT_MODULES = (
    "prefect",
    "prefect.client.orchestration",
    "prefect.deployments",
    "prefect.flow_engine",
    "prefect.flow_runs",
    "prefect.input",
    "prefect.runtime",
    "prefect.settings",
)


def _client_environment(folder: Path, api: str) -> dict[str, str]:
    return {
        "PREFECT_HOME": str(folder / "client"),
        "PREFECT_API_URL": api,
        "PREFECT_LOGGING_LEVEL": "ERROR",
        "DO_NOT_TRACK": "1",
    }


def _wait_for_server(api: str, timeout: float = SERVER_TIMEOUT) -> None:
    import httpx

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"{api}/health", timeout=5).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.1)
    raise TimeoutError(f"the Prefect API server at {api} did not answer within {timeout:g}s")


class PrefectAdapter(ChildProcessAdapter):
    name = "prefect"
    preload = staticmethod(preload_prefect)
    framework = "Prefect"
    # Recorded inputs: the flow run's stored run inputs (a resume's value, recorded with the
    # state change that resumes the run). Leases: the flow run's state on the server (RUNNING,
    # PENDING or SCHEDULED with no process executing it between operations: see `_run_state`).
    capabilities = frozenset({"recorded-inputs", "leases", "executions"})
    refusals = (PrefectRefusal,)
    unsupported = {"fork": FORK_UNSUPPORTED, "update": UPDATE_UNSUPPORTED}
    variants = VARIANTS
    framework_calls = FRAMEWORK_CALLS
    effect_key = {
        "key": "None",
        "why": "Prefect hands task code no identity it documents as an idempotency key: every "
        "execution of a task's code is an application",
    }

    def __init__(self, mode: str = "suspend") -> None:
        super().__init__()
        if mode not in MODES:
            raise ValueError(f"mode must be one of {', '.join(MODES)}, not {mode!r}")
        self.mode = mode
        self.version = f"prefect {_prefect_version()}"
        self.keeper: int | None = None  # the keeper of a server of our own (no template's)
        self.report_fd: int | None = None  # in a flow process: where it reports to its child

    def options(self) -> dict:
        return {"mode": self.mode}

    # -- the example's server, deployment and result folder -----------------------------------

    def open(self, setup) -> None:
        super().open(setup)
        self.api = os.environ.get(API_URL_VARIABLE)
        if self.api is None:  # no template preloaded a server: one of our own
            self.api, self.keeper = start_server(setup.workdir / "server")
        self.results = setup.workdir / "results"
        self.results.mkdir()
        self.deployment = f"{setup.workdir.name}"
        _wait_for_server(self.api)

    def close(self) -> None:
        if self.keeper is not None:  # it kills the server and removes its folder
            stop_server(self.keeper)
            self.keeper = None
        super().close()

    def _settings(self):
        """Prefect's settings for this example's client calls: its server, its result folder."""
        from prefect.settings import (
            PREFECT_API_URL,
            PREFECT_HOME,
            PREFECT_LOGGING_LEVEL,
            PREFECT_RESULTS_LOCAL_STORAGE_PATH,
            PREFECT_RESULTS_PERSIST_BY_DEFAULT,
            temporary_settings,
        )

        return temporary_settings(
            updates={
                PREFECT_API_URL: self.api,
                PREFECT_HOME: str(self.setup.workdir / "client"),
                PREFECT_LOGGING_LEVEL: "ERROR",
                PREFECT_RESULTS_PERSIST_BY_DEFAULT: True,
                PREFECT_RESULTS_LOCAL_STORAGE_PATH: str(self.results),
            }
        )

    def _run_file(self, thread: int) -> Path:
        return self.setup.workdir / f"prefect-t{thread}.json"

    def _run_id(self, thread: int) -> str | None:
        try:
            return json.loads(self._run_file(thread).read_text())["flow_run_id"]
        except FileNotFoundError:
            return None

    # -- the flow, defined in the process that executes it ------------------------------------

    def _flow(self):
        """The fuzzing flow and its task, bound to this adapter (node code, crash points)."""
        from prefect import flow, task
        from prefect.flow_runs import pause_flow_run, suspend_flow_run
        from prefect.runtime import flow_run as current_run

        adapter, workflow = self, self.workflow
        answer = _answer_type()

        @task(name=TASK, persist_result=True)
        def fuzz_stage(run: str, stage: int, state: list, value: int | None) -> dict:
            after = adapter.execute(stage, tuple(state), value, None)
            return {"run": run, "stage": stage, "state": list(after)}

        def wait_for_value(stage: int) -> int:
            if adapter.mode == "suspend":
                return suspend_flow_run(wait_for_input=answer, key=f"s{stage}", timeout=None).value
            return pause_flow_run(
                wait_for_input=answer, key=f"s{stage}", timeout=24 * 3600, poll_interval=PAUSE_POLL_SECONDS
            ).value

        @flow(name=FLOW, persist_result=True)
        def fuzz_workflow() -> list:
            run, state = str(current_run.id), list(workflow.initial_state())
            for stage in range(len(workflow.stages)):
                value = wait_for_value(stage) if workflow.consumes[stage] else None
                state = fuzz_stage(run, stage, state, value)["state"]
                adapter.committed(stage)  # the task call returned: its result is persisted
            return state

        return fuzz_workflow

    def _execute(self, flow_run_id: str) -> str:
        """Execute the flow run in this process, as a runner's engine process does; returns its
        final state's type ("suspended" when it suspended: the process is done with it)."""
        from uuid import UUID

        from prefect.client.orchestration import get_client
        from prefect.exceptions import Pause
        from prefect.flow_engine import run_flow

        fuzz_workflow = self._flow()
        with get_client(sync_client=True) as client:
            flow_run = client.read_flow_run(UUID(flow_run_id))
        if self.report_fd is not None:  # the waiting child may now take a pause for this execution's
            os.write(self.report_fd, EXECUTING)
        try:
            state = run_flow(fuzz_workflow, flow_run=flow_run, return_type="state")
        except Pause:
            return "suspended"
        return str(state.type.value)

    # -- the process that executes the flow run ------------------------------------------------

    def _in_flow_process(self, thread: int, action) -> str:
        """Run `action` (Prefect's client calls, then the flow run's execution) in a process of
        its own, forked from this child, and return what the store shows once the run settled:
        suspended (the process exits), paused (the process, blocked in pause_flow_run, is
        ended here) or finished. A crash point kills the flow process; this child then dies by
        SIGKILL too, so the kit sees the operation's process killed."""
        read, write = os.pipe()
        child = os.getpid()
        pid = os.fork()
        if pid == 0:
            os.close(read)
            die_with_parent(child)
            self.report_fd = write
            try:
                with self._settings():
                    message = {"value": action()}
            except PrefectRefusal as refusal:
                message = {"refused": str(refusal)}
            except BaseException as error:  # reported to the child, which raises it
                message = {"error": f"{type(error).__name__}: {error}"}
            os.write(write, (json.dumps(message) + "\n").encode())
            os._exit(0)
        os.close(write)
        data = self._wait_for_flow_process(thread, pid, read)
        os.close(read)
        if data is None:  # paused: the blocked process was ended here
            return self._settled(thread) or "paused"
        if not data.strip():  # killed at a crash point: the operation's process is killed
            os.kill(os.getpid(), signal.SIGKILL)
        message = json.loads(data)
        if "refused" in message:
            raise PrefectRefusal(message["refused"])
        if "error" in message:
            raise RuntimeError(f"the Prefect flow process raised {message['error']}")
        return self._settled(thread) or message["value"]

    def _wait_for_flow_process(self, thread: int, pid: int, read: int) -> bytes | None:
        """The flow process's report (empty when it was killed), or None when the store shows
        the run paused with its input schema saved (the process, blocked, is ended then)."""
        import select

        data, deadline = b"", time.monotonic() + SETTLE_TIMEOUT
        while time.monotonic() < deadline:
            ready, _, _ = select.select([read], [], [], SETTLE_POLLING)
            if ready:
                chunk = os.read(read, 65536)
                if not chunk:
                    os.waitpid(pid, 0)
                    return data.replace(EXECUTING, b"")
                data += chunk
                continue
            if self.mode == "pause" and EXECUTING in data and self._paused_and_waiting(thread):
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
                return None
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        raise TimeoutError(f"the flow run of t{thread} did not settle within {SETTLE_TIMEOUT}s")

    def _paused_and_waiting(self, thread: int) -> bool:
        run = self._read_run(thread)
        if run is None or run["state_type"] != "PAUSED":
            return False
        details = (run.get("state") or {}).get("state_details") or {}
        keyset = details.get("run_input_keyset") or {}
        return "schema" in keyset and self._read_input(run["id"], keyset["schema"]) is not None

    # -- the client hooks, in the child process --------------------------------------------

    def client_start(self, thread: int) -> str:
        if self._run_id(thread) is not None:
            return self.client_recover(thread)

        def start() -> str:
            from prefect.deployments import run_deployment

            deployment_id = self._flow().to_deployment(name=self.deployment).apply()
            flow_run = run_deployment(deployment_id, timeout=0)
            self._run_file(thread).write_text(json.dumps({"flow_run_id": str(flow_run.id)}))
            return self._execute(str(flow_run.id))

        return self._in_flow_process(thread, start)

    def client_resume(self, thread: int, value: int) -> str:
        flow_run_id = self._run_id(thread)
        if flow_run_id is None:
            raise Refusal("the thread has no flow run to resume (not started)")

        def resume() -> str:
            from uuid import UUID

            from prefect.exceptions import FlowPauseTimeout, NotPausedError
            from prefect.flow_runs import resume_flow_run

            self.loaded()
            try:
                resume_flow_run(UUID(flow_run_id), run_input={"value": value})
            except (NotPausedError, FlowPauseTimeout, RuntimeError) as error:  # what it raises on a refusal
                raise PrefectRefusal(f"{type(error).__name__}: {error}") from None
            return self._execute(flow_run_id)

        return self._in_flow_process(thread, resume)

    def client_recover(self, thread: int) -> str:
        flow_run_id = self._run_id(thread)
        if flow_run_id is None:
            return self.client_start(thread)
        from pymc_resume.bridge.kit import NoOp

        run = self._read_run(thread)
        if run is not None and run["state_type"] in ("PAUSED", *TERMINAL):
            raise NoOp(f"the flow run is {run['state_type']}: nothing to execute")
        return self._in_flow_process(thread, lambda: self._execute(flow_run_id))

    def fork(self, thread: int, checkpoint: int, intent: str, value: int | None) -> Outcome:
        """Not expressible (`unsupported`)."""
        raise Refusal(FORK_UNSUPPORTED)

    def update(self, thread: int, note: int) -> Outcome:
        """Not expressible (`unsupported`)."""
        raise Refusal(UPDATE_UNSUPPORTED)

    # -- reading the store (the API server, read-only, and the result folder) -----------------

    def _read_run(self, thread: int) -> dict | None:
        import httpx

        flow_run_id = self._run_id(thread)
        if flow_run_id is None:
            return None
        response = httpx.get(f"{self.api}/flow_runs/{flow_run_id}", timeout=30)
        response.raise_for_status()
        return response.json()

    def _read_input(self, flow_run_id: str, key: str):
        import httpx

        response = httpx.get(f"{self.api}/flow_runs/{flow_run_id}/input/{key}", timeout=30)
        if response.status_code == 404:
            return None
        response.raise_for_status()
        return json.loads(response.json()) if isinstance(response.json(), str) else response.json()

    def _results(self, flow_run_id: str) -> dict[int, list]:
        """The persisted `fuzz-stage` results of one flow run: stage -> the model's state."""
        import base64
        import pickle

        stages: dict[int, list] = {}
        for path in self.results.iterdir() if self.results.exists() else ():
            try:
                record = json.loads(path.read_text())
                result = pickle.loads(base64.b64decode(record["result"]))
            except (ValueError, KeyError, TypeError, pickle.UnpicklingError):
                continue
            if isinstance(result, dict) and result.get("run") == flow_run_id:
                stages[result["stage"]] = result["state"]
        return stages

    def _chain(self, flow_run_id: str) -> list[Checkpoint]:
        chain = [Checkpoint(0, self.workflow.initial_state(), INITIAL)]
        for stage, state in sorted(self._results(flow_run_id).items()):
            chain.append(Checkpoint(stage + 1, tuple(state), stage))
        return chain

    def _inputs(self, flow_run_id: str) -> dict[int, int]:
        state_name = "suspended" if self.mode == "suspend" else "paused"
        inputs = {}
        for stage in self.workflow.consuming:
            recorded = self._read_input(flow_run_id, f"{state_name}-s{stage}-response")
            if recorded is not None:
                inputs[stage] = recorded["value"]
        return inputs

    def _settled(self, thread: int) -> str | None:
        run = self._read_run(thread)
        if run is None:
            return None
        if run["state_type"] == "COMPLETED":
            return "completed"
        if run["state_type"] in FAILED_STATES:
            return f"ended {run['state_type']}"
        if run["state_type"] == "PAUSED":
            return f"parked at stage {self._chain(run['id'])[-1].pc}"
        return None

    def _run_state(self, thread: int, run: dict | None) -> str:
        """`new` before the bridge ran the thread; `free` when paused or complete; `failed`;
        `dead` when the server shows the run RUNNING, PENDING or SCHEDULED (resumed, not yet
        executed): work a fresh execution takes over, since no process runs it between operations."""
        if run is None or self.threads[thread]["run"] == "new":
            return "new"
        if run["state_type"] in FAILED_STATES:
            return "failed"
        return "free" if run["state_type"] in ("PAUSED", "COMPLETED") else "dead"

    def observe(self) -> Observation:
        views = []
        for thread in range(len(self.threads)):
            run = self._read_run(thread)
            if run is None:
                chain, inputs = [Checkpoint(0, self.workflow.initial_state(), INITIAL)], {}
            else:
                chain, inputs = self._chain(run["id"]), self._inputs(run["id"])
            views.append(ThreadView(tuple(chain), self._run_state(thread, run), inputs))
        return Observation(tuple(views))


def _answer_type():
    """The typed input a consuming stage waits for: Prefect validates a resume's run_input
    against its schema (value >= 0, so the bridge's -1 is refused)."""
    from prefect.input import RunInput
    from pydantic import Field

    class Answer(RunInput):
        value: int = Field(ge=0)

    return Answer
