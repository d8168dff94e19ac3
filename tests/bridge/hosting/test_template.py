"""Host templates: a process that preloads once and forks hosts, each a child of the template
that the bridge drives as it drives a host forked from itself; a preload that leaves threads
running is dropped; a host's death never touches the template; the template dies with the
bridge, and its hosts with it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from pymc_resume.bridge.hosting.host import DIED, HostedAdapter, HostProblem
from pymc_resume.bridge.hosting.loading import AdapterBuilder, AdapterRef
from pymc_resume.bridge.hosting.template import HostTemplate, HostTemplates

PRELOADED: list[int] = []  # the pid of the process whose preload ran, in that process


class Probe:
    """An adapter that tells where it runs and what its process inherited."""

    name = "probe"
    version = "1"
    capabilities = frozenset()

    @staticmethod
    def preload() -> None:
        PRELOADED.append(os.getpid())

    def options(self) -> dict:
        return {}

    def observe(self) -> dict:
        return {
            "pid": os.getpid(),
            "ppid": os.getppid(),
            "preloaded": list(PRELOADED),
            "variable": os.environ.get("PYMC_RESUME_TEMPLATE_TEST"),
            "cwd": os.getcwd(),
            "threads": len(os.listdir("/proc/self/task")),
        }

    def exit_now(self) -> None:
        os._exit(3)

    # The rest of the adapter protocol, which a host checks before it builds an adapter.
    open = close = start = recover = resume = resume_together = fork = update = exit_now


class Threaded(Probe):
    @staticmethod
    def preload() -> None:
        PRELOADED.append(os.getpid())
        threading.Thread(target=time.sleep, args=(60,), daemon=True).start()


class Raising(Probe):
    @staticmethod
    def preload() -> None:
        raise ImportError("no such framework")


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def _host(templates: HostTemplates, adapter_class: type) -> HostedAdapter:
    template = templates.template_for(AdapterRef.of_class(adapter_class), 30.0)
    return HostedAdapter(_builder(adapter_class), 30.0, template, templates.stats)


def _builder(adapter_class: type) -> AdapterBuilder:
    return AdapterBuilder("probe", AdapterRef.of_class(adapter_class), {})


def test_hosts_are_forked_from_the_template_with_its_preload():
    with HostTemplates() as templates:
        first, second = _host(templates, Probe), _host(templates, Probe)
        template = templates.template_for(AdapterRef.of_class(Probe), 30.0)
        try:
            seen = [first.observe(), second.observe()]
        finally:
            first.stop(), second.stop()
        assert template.preloaded and template.fallback is None
        for where in seen:
            assert where["ppid"] == template.pid != os.getpid()
            assert where["preloaded"] == [template.pid]  # imported once, in the template
            assert where["threads"] == 1
        assert PRELOADED == []  # never in the bridge
        assert templates.stats.hosts == 2 and templates.stats.templates == 1


@pytest.mark.parametrize(
    "adapter_class, reason",
    [(Threaded, "left 2 threads running"), (Raising, "raised ImportError: no such framework")],
)
def test_a_preload_that_cannot_be_kept_is_dropped_and_said_once(adapter_class, reason):
    said = []
    with HostTemplates(said.append) as templates:
        host = _host(templates, adapter_class)
        try:
            where = host.observe()
        finally:
            host.stop()
        template = templates.template_for(AdapterRef.of_class(adapter_class), 30.0)
        templates.tell_fallback(template)
        templates.tell_fallback(template)
    assert not template.preloaded and reason in template.fallback
    assert where["preloaded"] == [] and where["threads"] == 1  # a host of the plain template
    assert len(said) == 1 and reason in said[0] and "each host imports the framework itself" in said[0]


def test_a_host_that_dies_or_is_stopped_leaves_the_template_serving():
    with HostTemplates() as templates:
        template = templates.template_for(AdapterRef.of_class(Probe), 30.0)
        dying = _host(templates, Probe)
        with pytest.raises(HostProblem) as problem:
            dying._request("exit_now", ())
        assert problem.value.kind == DIED and "exited with status 3" in problem.value.reason
        stopped = _host(templates, Probe)
        stopped.stop()
        assert not _alive(dying.pid) and not _alive(stopped.pid)
        assert _alive(template.pid)
        again = _host(templates, Probe)
        assert again.observe()["ppid"] == template.pid
        again.stop()
    assert not _alive(template.pid)


def test_a_host_takes_on_the_bridges_environment_and_folder_of_the_moment(monkeypatch, tmp_path):
    with HostTemplates() as templates:
        templates.template_for(AdapterRef.of_class(Probe), 30.0)
        monkeypatch.setenv("PYMC_RESUME_TEMPLATE_TEST", "set after the template started")
        monkeypatch.chdir(tmp_path)
        host = _host(templates, Probe)
        try:
            where = host.observe()
        finally:
            host.stop()
    assert where["variable"] == "set after the template started"
    assert where["cwd"] == str(tmp_path)


def test_the_template_and_its_hosts_die_with_a_killed_bridge(tmp_path):
    script = textwrap.dedent(
        f"""
        import sys, time
        sys.path.insert(0, {str(Path(__file__).parent)!r})
        from test_template import Probe, _host
        from pymc_resume.bridge.hosting.loading import AdapterRef
        from pymc_resume.bridge.hosting.template import HostTemplates
        templates = HostTemplates()
        host = _host(templates, Probe)
        print(templates.template_for(AdapterRef.of_class(Probe), 30.0).pid, host.pid, flush=True)
        time.sleep(60)
        """
    )
    bridge = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    try:
        template, host = map(int, bridge.stdout.readline().split())
        assert _alive(template) and _alive(host)
    finally:
        bridge.send_signal(signal.SIGKILL)
        bridge.wait()
    deadline = time.monotonic() + 10
    while (_alive(template) or _alive(host)) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(template) and not _alive(host)


def test_at_most_keep_templates_live_at_once():
    with HostTemplates(keep=1) as templates:
        first = templates.template_for(AdapterRef.of_class(Probe), 30.0)
        second = templates.template_for(AdapterRef.of_class(Threaded), 30.0)
        assert not first.alive and second.alive
        assert templates.template_for(AdapterRef.of_class(Probe), 30.0) is not first


def test_a_stopped_template_refuses_to_fork_in_one_line():
    template = HostTemplate(None, "a template")
    template.stop()
    with pytest.raises(HostProblem, match="was stopped"):
        HostedAdapter(_builder(Probe), 30.0, template)
