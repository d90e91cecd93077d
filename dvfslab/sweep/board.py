"""Which board a run ran on: its identity (recorded with every run) and its kind (what a plan needs).

* :func:`board_identity`: ``board_id`` (the ``runs.csv`` column), hostname, module, serial,
  JetPack, power mode and, on the twin, the noise seed. ``board_id`` is the backend's own
  ``board_id`` / ``serial`` / ``uuid`` when it reports one, else the hostname (one board per
  host, as on a Jetson), with the GPU index for NVML.
* :func:`board_kind`: module, backend, power mode and frequency table. Two boards of one kind
  give comparable runs; a fleet sweep runs only on the boards of the plan's kind (see
  docs/fleet.md). :func:`kind_id` names a kind in one file- and resource-safe token.
"""

from __future__ import annotations

import hashlib
import json
import re
import socket
from collections.abc import Mapping

from dvfslab.core.files import jsonable
from dvfslab.hw.base import Backend

#: description keys that name one board, not its kind (dropped from a fleet's ``meta.json`` device)
PER_BOARD_KEYS = ("board_id", "seed", "serial", "uuid", "hostname", "devfreq", "index", "device_index",
                  "pci_bus_id", "sysfs_root", "clock_writable")


def board_identity(backend: Backend) -> dict:
    """What ``runs/<run_id>.json`` records as ``extras["board"]`` (``board_id`` also goes to runs.csv)."""
    desc = backend.description
    host = socket.gethostname()
    index = desc.get("index")
    board_id = (desc.get("board_id") or desc.get("serial") or desc.get("uuid")
                or (f"{host}/gpu{index}" if index is not None else host))
    ident = {"board_id": str(board_id), "hostname": host, "backend": backend.name,
             "module": desc.get("board") or desc.get("gpu"), "serial": desc.get("serial"),
             "jetpack": desc.get("jetpack"), "power_mode": desc.get("power_mode"),
             "simulated": bool(backend.simulated)}
    if desc.get("seed") is not None:
        ident["seed"] = desc["seed"]
    return jsonable(ident)


def board_kind(backend: Backend) -> dict:
    """Module, backend, power mode and GPU levels: boards of one kind can share a plan."""
    desc = backend.description
    levels = backend.clocks.levels_mhz() if backend.clocks is not None else []
    return jsonable({"backend": backend.name, "module": desc.get("board") or desc.get("gpu"),
                     "power_mode": desc.get("power_mode"), "levels_mhz": [float(f) for f in levels]})


def kind_id(kind: Mapping) -> str:
    """``agx-orin-64gb-3f2a9c1d``-like token: a slug of the module and a digest of the whole kind."""
    slug = re.sub(r"[^a-z0-9]+", "-", str(kind.get("module") or kind.get("backend")).lower()).strip("-")[:40]
    digest = hashlib.sha1(json.dumps(dict(kind), sort_keys=True).encode()).hexdigest()[:8]
    return f"{slug}-{digest}"


def kind_description(description: Mapping) -> dict:
    """A board's description without what names that one board (a fleet's ``meta.json`` device)."""
    return {k: v for k, v in jsonable(dict(description)).items() if k not in PER_BOARD_KEYS}
