"""What the lab's panels share: the simulated label, lazy ipywidgets, PNG rendering."""

from __future__ import annotations

import html
import io

from dvfslab.core.errors import DvfsError
from dvfslab.hw.base import Backend

SIM_LABEL = "SIMULATED board (digital twin)"


def is_simulated(backend: Backend) -> bool:
    """True for the digital twin (its data must be labelled simulated everywhere)."""
    return backend.simulated


def board_label(backend: Backend) -> str:
    """``'SIMULATED board (digital twin)'`` on the twin, else the board's model or backend name."""
    if is_simulated(backend):
        return SIM_LABEL
    return str(backend.description.get("board") or backend.name)


def ipywidgets():
    """``ipywidgets``, imported lazily (the package works without the notebook extras)."""
    try:
        import ipywidgets
    except ImportError as err:  # pragma: no cover - depends on the environment
        raise DvfsError("the lab needs ipywidgets: pip install 'dvfslab[notebooks]'") from err
    return ipywidgets


def figure_png(fig) -> bytes:
    """Render a matplotlib Figure (Agg, no pyplot state) to PNG bytes."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    FigureCanvasAgg(fig)
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=fig.dpi)
    return buf.getvalue()


def message_html(text: str, kind: str = "info") -> str:
    colour = {"info": "#1b5e20", "error": "#b71c1c", "note": "#37474f"}[kind]
    return f'<div style="color:{colour};white-space:pre-wrap">{html.escape(text)}</div>'
