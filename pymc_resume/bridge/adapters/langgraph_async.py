"""The LangGraph adapter with async graphs: the operations that run nodes call `ainvoke` on an
`AsyncSqliteSaver` (or `AsyncPostgresSaver`) in their child process, the way an async API
server (FastAPI, say) resumes a thread; with `gate=True`, through the gate's `aresume` and
`arecover`.

Everything else is `LangGraphAdapter`'s: the same graph (its nodes are plain functions, which
LangGraph runs in its executor under `ainvoke`), the same store file or database, the same
observation through a sync saver in the bridge's own process, the same crash points (the
after-commit point through the async saver's `aput`), the same unkeyed effects (LangGraph
documents no key for a side effect: `langgraph.EFFECT_KEY` quotes its durable-execution page). The
race uses it for its `ainvoke` cells (`pymc-resume race langgraph --api invoke,ainvoke`).
"""

from __future__ import annotations

import asyncio
import contextlib
from contextlib import asynccontextmanager

from pymc_resume.bridge.adapters import langgraph as base

# DURABILITY: the race reads the modes an adapter's module declares (`race MODULE:CLASS`).
from pymc_resume.bridge.adapters.langgraph import DURABILITY, LangGraphAdapter, _valid_value  # noqa: F401
from pymc_resume.gate import ConsumeOnceGate


class LangGraphAsyncAdapter(LangGraphAdapter):
    """`LangGraphAdapter` whose child processes run the graph with `ainvoke`."""

    name = "langgraph-async"

    def open(self, setup) -> None:
        # Imported here, once: the forked children then start with the async saver loaded.
        if self.store == "sqlite":
            import langgraph.checkpoint.sqlite.aio
        else:
            import langgraph.checkpoint.postgres.aio  # noqa: F401
        super().open(setup)

    def _connect(self, setup: bool = False):
        """The sync saver the base adapter reads with; in a child process (`setup` False) also
        the async saver and gate its run uses, opened now, before the race window, as a server
        holds its connections before requests arrive."""
        saver = super()._connect(setup)
        if not setup:
            self._loop = asyncio.new_event_loop()
            self._opened = contextlib.AsyncExitStack()
            self._async_saver_open = self._loop.run_until_complete(
                self._opened.enter_async_context(self._async_saver())
            )
            self._async_gate_open = self._async_gate(self._async_saver_open) if self.gate else None
        return saver

    def _invoke(self, graph, gate, config, role: str, payload, seen) -> None:
        # `graph` and `gate` are the child's sync ones, which read the head at the race window;
        # the run itself is async, on the async saver of the same store.
        loop = self._loop
        try:
            loop.run_until_complete(self._ainvoke(config, role, payload, seen))
        finally:
            if self._async_gate_open is not None:
                self._async_gate_open.close()
            loop.run_until_complete(self._opened.aclose())
            loop.close()

    async def _ainvoke(self, config, role: str, payload, seen) -> None:
        graph, gate = self._build(self._async_saver_open), self._async_gate_open
        if gate is not None and role == "delivery":
            await gate.aresume(
                graph, config, payload.resume, seen=seen, validate=_valid_value, durability=self.durability
            )
        elif gate is not None and role == "recovery" and payload is None:
            await gate.arecover(graph, config, durability=self.durability)
        else:
            await graph.ainvoke(payload, config, durability=self.durability)

    def _async_gate(self, saver) -> ConsumeOnceGate:
        if self.store == "sqlite":
            return ConsumeOnceGate.for_sqlite(self.path)
        return ConsumeOnceGate.for_checkpointer(saver)

    @asynccontextmanager
    async def _async_saver(self):
        """This process's own async saver, with the after-commit crash point in its `aput`."""
        if self.store == "sqlite":
            import aiosqlite
            from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver as saver_class

            connection = aiosqlite.connect(str(self.path))
        else:
            from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver as saver_class
            from psycopg import AsyncConnection
            from psycopg.rows import dict_row

            connection = await AsyncConnection.connect(
                self.url, autocommit=True, prepare_threshold=0, row_factory=dict_row
            )

        adapter = self

        class Saver(saver_class):
            """The async checkpointer, with the after-commit crash point (it only watches)."""

            async def aput(self, config, checkpoint, metadata, new_versions):
                result = await super().aput(config, checkpoint, metadata, new_versions)
                adapter._stored_checkpoint(checkpoint, metadata)
                return result

            async def aput_writes(self, config, writes, task_id, task_path=""):
                result = await super().aput_writes(config, writes, task_id, task_path)
                if any(channel == base.INTERRUPT for channel, _ in writes):
                    adapter._stored_interrupt(await self.aget_tuple(config))
                return result

        async with connection as conn:
            saver = Saver(conn)
            if self.store == "sqlite":
                await saver.setup()
            yield saver
