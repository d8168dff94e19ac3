"""LangGraph, as the gate reads it: the thread's head read raw from the checkpointer
(`get_state` would validate the state, and raise on a bad one), the parked interrupts and
recorded resume values in its pending writes, and a copy of a graph whose checkpoint writes
are fenced by a claim.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from contextlib import AbstractContextManager

import attrs

from pymc_resume.gate._refusals import InterruptAlreadyConsumed, NotCovered

INTERRUPT = "__interrupt__"  # LangGraph's pending-write channels (langgraph._internal._constants)
RESUME = "__resume__"


@attrs.frozen
class Parked:
    """What a client saw when it read the thread: the parked checkpoint and its interrupt(s).

    Pass it back as `seen=` to `resume` so that the answer goes to the interrupt that was shown
    (a resume whose head moved on since is refused instead of landing on a later interrupt).
    """

    thread_id: str
    checkpoint_ns: str
    checkpoint_id: str
    interrupts: tuple  # LangGraph `Interrupt`s (with `.id` and `.value`)


def thread_of(config) -> tuple[str, str]:
    configurable = config.get("configurable", {})
    if "thread_id" not in configurable:
        raise ValueError("config['configurable'] has no thread_id")
    return str(configurable["thread_id"]), configurable.get("checkpoint_ns", "")


def head_of(graph, config):
    """The head the client addresses: the checkpoint `config` names (a branch of the thread,
    in LangGraph's time travel), else the thread's newest checkpoint tuple (None for a thread
    without one). An async checkpointer answers this from another thread than its event
    loop's (the gate calls it through `asyncio.to_thread`)."""
    return graph.checkpointer.get_tuple(config)


def branch_of(graph, config) -> tuple[str, ...] | None:
    """The checkpoint ids from the checkpoint `config` names back to the thread's first: the
    branch a client addresses by time travel (None when it names none: the newest)."""
    if not config.get("configurable", {}).get("checkpoint_id"):
        return None
    ids, entry = [], graph.checkpointer.get_tuple(config)
    while entry is not None:
        ids.append(entry.checkpoint["id"])
        parent = entry.parent_config
        entry = graph.checkpointer.get_tuple(parent) if parent else None
    return tuple(ids)


def interrupts(head) -> tuple:
    found = []
    for _, channel, value in head.pending_writes or ():
        if channel == INTERRUPT:
            found.extend(value if isinstance(value, (list, tuple)) else [value])
    return tuple(found)


def has_resume(head) -> bool:
    return any(channel == RESUME for _, channel, _ in head.pending_writes or ())


def nothing_to_run(graph, config, head) -> bool:
    """The thread is parked at an interrupt with no value recorded, or complete (or empty)."""
    if head is None or (interrupts(head) and not has_resume(head)):
        return True
    try:
        return not graph.get_state(config).next
    except Exception:
        return False


def refuse_subgraph_interrupts(graph, config, thread_id: str, head=None) -> None:
    """An interrupt raised inside a subgraph is resumed through the parent's task, from state
    the subgraph keeps in checkpoints of its own namespace: the gate's claim and fence do not
    cover that, so such a resume is refused rather than run ungated. (`head`: the thread's
    head when the caller has read it; read here only for a graph that has subgraphs.)"""
    subgraphs = {name.split("|")[0] for name, _ in graph.get_subgraphs()}
    if not subgraphs:
        return
    head = head if head is not None else head_of(graph, config)
    if head is None:
        return
    raising = {task_id for task_id, channel, _ in head.pending_writes or () if channel == INTERRUPT}
    try:
        names = {task.name for task in graph.get_state(config).tasks if task.id in raising}
    except Exception:
        names = subgraphs
    inside = sorted(names & subgraphs)
    if inside:
        raise NotCovered(
            f"thread {thread_id!r}: the parked interrupt was raised inside subgraph {', '.join(inside)}; "
            "the consume-once gate covers interrupts of the root graph only, so this resume is refused "
            "(nothing ran). Raise the interrupt in a node of the root graph to gate it.",
            thread_id,
        )


def interrupt_id(interrupt) -> str:
    return str(interrupt["id"] if isinstance(interrupt, dict) else interrupt.id)


def pick(target: Parked, wanted: str | None) -> str:
    ids = [interrupt_id(i) for i in target.interrupts]
    if wanted is None:
        if len(ids) != 1:
            raise ValueError(
                f"thread {target.thread_id!r} has {len(ids)} parked interrupts: pass interrupt_id"
            )
        return ids[0]
    if wanted not in ids:
        raise InterruptAlreadyConsumed(
            f"thread {target.thread_id!r}: interrupt {wanted} is not parked "
            f"at checkpoint {target.checkpoint_id}",
            target.thread_id,
        )
    return wanted


def command(target: Parked, wanted: str, value):
    from langgraph.types import Command

    if len(target.interrupts) > 1:
        return Command(resume={wanted: value})
    return Command(resume=value)


def default_serde():
    from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

    return JsonPlusSerializer()


_WRITES = ("put", "put_writes")
_ASYNC_WRITES = ("aput", "aput_writes")


def fenced(graph, fence: Callable[[], AbstractContextManager], afence=None):
    """A copy of `graph` whose checkpointer runs every write inside `fence()` (sync writes) or
    `afence()` (an async context manager, for the async writes of `ainvoke`): a write the
    fence refuses raises, and the run stops there. The checkpointer is a shallow copy that
    shares the original's connection and lock."""
    saver = graph.checkpointer
    shadow = copy.copy(saver)
    for name in _WRITES:
        setattr(shadow, name, _fenced_call(getattr(saver, name), fence))
    for name in _ASYNC_WRITES:
        if afence is not None and hasattr(saver, name):
            setattr(shadow, name, _fenced_async_call(getattr(saver, name), afence))
    return graph.copy(update={"checkpointer": shadow})


def _fenced_call(write, fence):
    def call(*args, **kwargs):
        with fence():
            return write(*args, **kwargs)

    return call


def _fenced_async_call(write, afence):
    async def call(*args, **kwargs):
        async with afence():
            return await write(*args, **kwargs)

    return call
