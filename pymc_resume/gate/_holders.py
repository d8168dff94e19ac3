"""Who holds a claim: the host and the process, and whether the gate can see it alive.

A holder is `host/pid:start-time/nonce`. The host is the machine's name plus the kernel's
network and pid namespaces of the process: two processes are on the same host for the gate
exactly when one can see the other's process id (same pid namespace) on the same network
identity. Two containers on one machine, or two network namespaces of a race, are different
hosts, as two machines are.

On the same host, a holder is alive when its process is (the start time guards against a
recycled pid; a zombie is dead). On another host the gate cannot look: the holder's lease
(`_gate._Lease`), renewed while it runs, says it is alive.
"""

from __future__ import annotations

import os
import socket
import uuid

from pymc_resume.runtime.holders import holder_alive, holder_token


def _namespace(kind: str) -> str:
    """The calling thread's namespace of `kind` (a thread can enter a network namespace alone)."""
    for path in (f"/proc/thread-self/ns/{kind}", f"/proc/self/ns/{kind}"):
        try:
            link = os.readlink(path)  # "net:[4026531840]"
            break
        except OSError:
            continue
    else:
        return "-"
    return link[link.find("[") + 1 : link.rfind("]")] or "-"


def this_host() -> str:
    """This process's host: `name@net-namespace.pid-namespace` (no "/" in it)."""
    name = socket.gethostname().replace("/", "_")
    return f"{name}@{_namespace('net')}.{_namespace('pid')}"


def new_holder() -> str:
    """A fresh holder id for this process (the nonce tells two claims of one process apart)."""
    return f"{this_host()}/{holder_token()}/{uuid.uuid4().hex[:8]}"


def host_of(holder: str) -> str:
    return holder.split("/", 1)[0]


def on_this_host(holder: str) -> bool:
    return host_of(holder) == this_host()


def alive_here(holder: str) -> bool:
    """Whether a holder on this host is a live process (a holder id the gate cannot read is
    taken for dead: its lease decides)."""
    parts = holder.split("/")
    if len(parts) != 3 or ":" not in parts[1]:
        return False
    try:
        return holder_alive(parts[1])
    except ValueError:
        return False
