"""The frequency dial: a slider over the board's GPU levels that locks the clock, and Restore."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Mapping

from dvfslab.core.errors import DvfsError
from dvfslab.hw.base import ClockControl, format_mhz, snap_mhz
from dvfslab.lab.common import ipywidgets, message_html


class FrequencyDial:
    """A slider over the board's GPU levels that locks the clock, and a Restore button.

    Errors a user can hit (no permission, a level capped by the power mode) are shown in the
    widget as the backend's one-line message, not as a traceback; the slider then goes back to
    the level the board is really at.
    """

    def __init__(self, clocks: ClockControl | None, *, simulated: bool = False,
                 on_change: Callable[[float | None], None] | None = None, guard=None):
        self.clocks = clocks
        self.simulated = simulated
        self.on_change = on_change
        self.guard = guard if guard is not None else contextlib.nullcontext()
        self.levels_mhz: list[float] = list(clocks.levels_mhz()) if clocks is not None else []
        self.locked_mhz: float | None = None
        self.message = ""
        self._quiet = False
        self._build()

    def _build(self) -> None:
        w = ipywidgets()
        options = [(f"{format_mhz(f)} MHz", f) for f in self.levels_mhz] or ["no clock control"]
        self.slider = w.SelectionSlider(options=options, description="GPU clock",
                                        continuous_update=False,
                                        layout=w.Layout(width="640px"),
                                        style={"description_width": "80px"})
        self.restore_button = w.Button(description="Restore", icon="undo",
                                       tooltip="give the clocks back to the board's governor")
        self.status = w.HTML()
        self.restore_button.on_click(lambda _b: self.restore())
        self.slider.observe(self._on_slider, names="value")
        self.widget = w.VBox([w.HBox([self.slider, self.restore_button]), self.status])
        if self.clocks is None:
            self.slider.disabled = self.restore_button.disabled = True
            self._show("this backend has no clock control", "note")
        else:
            self._sync_slider()
            self._show(self.describe_state(), "note")

    def _show(self, text: str, kind: str = "info") -> None:
        self.message = ("[simulated] " if self.simulated else "") + text
        self.status.value = message_html(self.message, kind)

    def _on_slider(self, change: Mapping) -> None:
        if not self._quiet and self.clocks is not None:
            self.lock(change["new"])

    def _sync_slider(self) -> None:
        """Put the slider on the level the board runs at, without locking anything."""
        try:
            cur = self.clocks.state().cur_freq_mhz
        except (OSError, DvfsError) as err:
            self._show(f"cannot read the clock state: {err}", "error")
            return
        self._quiet = True
        try:
            self.slider.value = snap_mhz(cur, self.levels_mhz)
        finally:
            self._quiet = False

    def describe_state(self) -> str:
        """``'GPU at 612 MHz (min 612, max 612, governor nvhost_podgov): locked'``."""
        st = self.clocks.state()
        how = "locked" if st.locked else "free (the governor picks the clock)"
        return (f"GPU at {format_mhz(st.cur_freq_mhz)} MHz (min {format_mhz(st.min_freq_mhz)}, "
                f"max {format_mhz(st.max_freq_mhz)}, governor {st.governor or '?'}): {how}")

    def lock(self, freq_mhz: float) -> bool:
        """Lock the GPU at ``freq_mhz``; True on success, else the reason is shown in the widget."""
        if self.clocks is None:
            self._show("this backend has no clock control", "error")
            return False
        try:
            with self.guard:
                st = self.clocks.lock(freq_mhz)
        except DvfsError as err:
            self._show(f"could not lock {format_mhz(freq_mhz)} MHz: {err}", "error")
            self._sync_slider()
            return False
        self.locked_mhz = float(freq_mhz)
        self._show(f"locked: GPU at {format_mhz(st.cur_freq_mhz)} MHz "
                   f"(min {format_mhz(st.min_freq_mhz)}, max {format_mhz(st.max_freq_mhz)})")
        if self.slider.value != float(freq_mhz):
            self._quiet = True
            try:
                self.slider.value = float(freq_mhz)
            finally:
                self._quiet = False
        if self.on_change:
            self.on_change(self.locked_mhz)
        return True

    def restore(self) -> bool:
        """Give the clocks back (what the board had before the first lock)."""
        if self.clocks is None:
            return False
        try:
            with self.guard:
                self.clocks.reset()
        except DvfsError as err:
            self._show(f"could not restore the clocks: {err}", "error")
            return False
        self.locked_mhz = None
        self._sync_slider()
        self._show("restored: " + self.describe_state())
        if self.on_change:
            self.on_change(None)
        return True

    def _ipython_display_(self) -> None:  # pragma: no cover - notebook display hook
        from IPython.display import display

        display(self.widget)
