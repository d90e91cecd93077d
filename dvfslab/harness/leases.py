"""What a fine-tuning run holds and must give back: the GPU clocks and the power sampler.

Both are context managers, entered in one :class:`contextlib.ExitStack` by
:class:`~dvfslab.harness.callback.DvfsCallback`, so whatever happens (a failed lock, an
exception in training, Ctrl-C) the stack unwinds in reverse order: the sampler it started is
stopped, then the clocks are reset.
"""

from __future__ import annotations

from dvfslab.core.levels import check_level, format_mhz
from dvfslab.harness.types import FinetuneError
from dvfslab.hw.base import Backend


def lockable_level(backend: Backend, freq_mhz: float, *, nearest: bool = False) -> float:
    """The level ``backend`` would lock for ``freq_mhz``, without locking it; refused (one line)
    when the backend has no clock control or ``freq_mhz`` is not a level (unless ``nearest``)."""
    if backend.clocks is None:
        raise FinetuneError(f"backend {backend.name!r} has no GPU clock control, so "
                            f"{format_mhz(freq_mhz)} MHz cannot be locked; use --backend jetson or "
                            "nvml, or drop --freq")
    return check_level(freq_mhz, backend.clocks.levels_mhz(), nearest=nearest)


class ClockLease:
    """The backend's GPU clocks for one run: :meth:`lock` levels, :meth:`release` once.

    ``release`` (also on ``__exit__``) resets the clocks only if this lease locked them, and
    only once; a later :meth:`lock` takes them again.
    """

    def __init__(self, backend: Backend):
        self.backend = backend
        self.level_mhz: float | None = None
        self._locked = False

    @property
    def locked(self) -> bool:
        return self._locked

    def lock(self, freq_mhz: float, *, nearest: bool = False) -> float:
        """Lock the level for ``freq_mhz`` (exact, or snapped if ``nearest``); return it."""
        level = lockable_level(self.backend, freq_mhz, nearest=nearest)
        if self._locked and level == self.level_mhz:
            return level
        self._locked = True  # reset() even if lock() fails half-way
        self.backend.clocks.lock(level)
        self.level_mhz = level
        return level

    def release(self) -> None:
        """Give the clocks back to the board (reset), if this lease locked them."""
        if self._locked:
            self._locked, self.level_mhz = False, None
            self.backend.clocks.reset()

    def __enter__(self) -> ClockLease:
        return self

    def __exit__(self, *exc) -> None:
        self.release()
