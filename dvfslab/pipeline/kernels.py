"""Kernels started ahead: while one notebook runs, the next one's kernel starts and imports
what the notebooks import.

Most of a pipeline run on a small dataset is start-up, not work: per notebook about 1 s to start
and stop a kernel and 1-2 s for the imports of its setup cell (pandas, matplotlib's inline
backend, seaborn, scikit-learn), five times (docs/method.md, *Performance*). :class:`KernelPool`
hands papermill a kernel that is already up (its ``km``), started and preloaded in a thread
while the notebook before it ran, and stops each one at once when its notebook is done.

Every notebook still runs in a fresh kernel of its own: the preload only fills ``sys.modules``
(it binds no name in the notebook's namespace, and the notebook imports what it uses itself),
so what a notebook computes does not change.
"""

from __future__ import annotations

import asyncio
import os
import threading
from collections.abc import Sequence

from jupyter_client.manager import AsyncKernelManager
from jupyter_core.utils import run_sync
from traitlets import List

#: modules the notebooks' setup cells import (the slow ones), loaded while the notebook before runs
PRELOAD: tuple[str, ...] = ("pandas", "matplotlib.pyplot", "seaborn", "sklearn.pipeline", "sklearn.tree",
                            "sklearn.ensemble", "sklearn.linear_model", "sklearn.neighbors", "IPython.display",
                            "dvfslab.analysis.plots", "dvfslab.analysis.training", "dvfslab.evaluation.selection",
                            "dvfslab.evaluation.replay", "dvfslab.pipeline")
_PRELOAD_CODE = ("import importlib as _importlib\n"
                 "for _module in {modules!r}:\n"
                 "    _importlib.import_module(_module)\n"
                 "get_ipython().run_line_magic('matplotlib', 'inline')\n"
                 "del _importlib, _module")


class _Manager(AsyncKernelManager):
    """A kernel manager that remembers the clients made of it, to close them when the kernel
    stops (papermill leaves open the client of a kernel it did not start)."""

    clients = List()

    def client(self, **kwargs):
        client = super().client(**kwargs)
        self.clients.append(client)
        return client


class KernelPool:
    """``count`` kernels, one per notebook, each started (and preloaded) while the one before runs.

    Use as a context manager; :meth:`take` the next kernel for ``papermill.execute_notebook(km=)``
    and :meth:`stop` it when its notebook is done. Leaving the block stops what is left.
    """

    def __init__(self, count: int, cwd: os.PathLike | str, kernel_name: str = "python3",
                 extra_arguments: Sequence[str] = (), preload: Sequence[str] = PRELOAD):
        self.count, self.cwd, self.kernel_name = count, str(cwd), kernel_name
        self.extra_arguments, self.preload = list(extra_arguments), tuple(preload)
        self._thread: threading.Thread | None = None
        self._ready: list[_Manager | BaseException] = []

    def __enter__(self) -> KernelPool:
        self._start_next()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        for km in self._ready:
            if isinstance(km, _Manager):
                self.stop(km)
        self._ready.clear()

    def take(self) -> _Manager:
        """The next kernel, started; the one after it starts now (in the background)."""
        if self._thread is None:
            raise RuntimeError("KernelPool: no kernel left (or the pool is not entered)")
        self._thread.join()
        km = self._ready.pop()
        self._thread = None
        if isinstance(km, BaseException):
            raise km
        self._start_next()
        return km

    def stop(self, km: _Manager) -> None:
        """Close the clients of ``km`` (papermill's) and stop its kernel at once."""
        for client in km.clients:
            client.stop_channels()
        km.clients.clear()
        if km.has_kernel:
            run_sync(km.shutdown_kernel)(now=True)

    def _start_next(self) -> None:
        if self.count <= 0:
            return
        self.count -= 1
        self._thread = threading.Thread(target=self._start, name="dvfslab-kernel", daemon=True)
        self._thread.start()

    def _start(self) -> None:
        km = _Manager(kernel_name=self.kernel_name)
        try:
            asyncio.run(self._boot(km))
            self._ready.append(km)
        except BaseException as err:  # handed to take(), which raises it in the main thread
            if km.has_kernel:
                run_sync(km.shutdown_kernel)(now=True)
            self._ready.append(err)

    async def _boot(self, km: _Manager) -> None:
        await km.start_kernel(cwd=self.cwd, extra_arguments=self.extra_arguments)
        if not self.preload:
            return
        client = km.client()
        client.start_channels()
        try:
            await client.wait_for_ready(timeout=60)
            await client.execute_interactive(_PRELOAD_CODE.format(modules=self.preload), silent=True,
                                             store_history=False, timeout=120, output_hook=lambda msg: None)
        finally:
            client.stop_channels()
            km.clients.remove(client)  # closed; papermill's comes next
