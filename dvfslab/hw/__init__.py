"""Backend registry: ``get_backend("auto" | "jetson" | "nvml" | "sim" | "none")``.

Backends are imported lazily so that ``import dvfslab`` never needs pynvml, jtop or torch.
Each backend module exposes ``open_backend(**kwargs) -> Backend`` and raises
:class:`BackendUnavailableError` (with the reason) when the machine does not have it.
"""

from __future__ import annotations

import importlib

from dvfslab.hw.base import (
    Backend,
    BackendUnavailableError,
    ClockControl,
    ClockPermissionError,
    ClockState,
    CounterReading,
    FrequencyCappedError,
    LockCheck,
    PowerReader,
    PowerReadError,
    PowerSample,
    Telemetry,
    UnsupportedFrequencyError,
)

__all__ = [
    "Backend",
    "BackendUnavailableError",
    "ClockControl",
    "ClockPermissionError",
    "ClockState",
    "CounterReading",
    "FrequencyCappedError",
    "LockCheck",
    "PowerReadError",
    "PowerReader",
    "PowerSample",
    "Telemetry",
    "UnsupportedFrequencyError",
    "BACKENDS",
    "get_backend",
]

#: name -> module implementing ``open_backend(**kwargs)``
BACKENDS = {
    "jetson": "dvfslab.hw.jetson.backend",
    "nvml": "dvfslab.hw.nvml",
    "sim": "dvfslab.sim.backend",
    "jtop": "dvfslab.hw.jtop",
}
AUTO_ORDER = ("jetson", "nvml")


def get_backend(name: str = "auto", **kwargs) -> Backend:
    """Open a backend by name.

    ``auto`` tries the Jetson sysfs backend, then NVML; ``sim`` is the simulated AGX Orin and
    is never picked automatically; ``none`` gives a backend with no clock control and no power
    reader (time is still measured).
    """
    if name == "none":
        return Backend(name="none")
    if name == "auto":
        reasons = []
        for candidate in AUTO_ORDER:
            try:
                return get_backend(candidate, **kwargs)
            except BackendUnavailableError as err:
                reasons.append(f"{candidate}: {err}")
        raise BackendUnavailableError(
            "no GPU backend found (" + "; ".join(reasons) + "). "
            "Use --backend sim for the simulated board or --backend none to measure time only."
        )
    if name not in BACKENDS:
        raise BackendUnavailableError(
            f"unknown backend {name!r}; choose one of: auto, {', '.join(BACKENDS)}, none"
        )
    module = importlib.import_module(BACKENDS[name])
    return module.open_backend(**kwargs)
