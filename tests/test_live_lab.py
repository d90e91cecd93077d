"""notebooks/00_live_lab.ipynb: committed clean, executes headless on the twin, and renders in
JupyterLab (headless Chromium screenshot, where Debian's chromium package is installed)."""

from __future__ import annotations

import ast
import base64
import io
import json
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import numpy as np
import pytest

nbformat = pytest.importorskip("nbformat")
papermill = pytest.importorskip("papermill")
pytest.importorskip("ipywidgets")

from PIL import Image  # noqa: E402

from dvfslab.data.contract import load_dataset  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
NOTEBOOK = REPO / "notebooks" / "00_live_lab.ipynb"
# Debian's chromium package (what .ci/install-chromium installs), or DVFSLAB_CHROMIUM
CHROMIUM = Path(os.environ.get("DVFSLAB_CHROMIUM", "/usr/bin/chromium"))
WIDGET_STATE = "application/vnd.jupyter.widget-state+json"
# small but complete: 3 levels + MAXN, a few refreshes of each live phase
PARAMS = {"LIVE_SECONDS": 1.0, "SWEEP_FREQS_MHZ": [306.0, 714.0, 1300.5], "SWEEP_STEPS": 8,
          "SWEEP_WARMUP_STEPS": 2}
SCREEN = (1400, 1000)
LIVE_HEADER = "<b>Live power: SIMULATED board (digital twin)</b>"


def code_cells(nb) -> list:
    return [c for c in nb.cells if c.cell_type == "code"]


def test_notebook_is_committed_thin_and_clean():
    nb = nbformat.read(NOTEBOOK, as_version=4)
    cells = code_cells(nb)
    assert all(not c.get("outputs") and c.get("execution_count") is None for c in cells)
    tagged = [c for c in nb.cells if "parameters" in c.metadata.get("tags", [])]
    assert len(tagged) == 1 and tagged[0] is cells[0]
    for c in cells:
        tree = ast.parse("\n".join(line for line in c.source.splitlines() if not line.startswith("%")))
        assert not [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.ClassDef, ast.Lambda))]
    params = {}
    for node in ast.parse(tagged[0].source).body:  # literals only, nothing derived
        assert isinstance(node, ast.AnnAssign), ast.unparse(node)
        params[node.target.id] = ast.literal_eval(node.value)
    assert params["BACKEND"] == "sim"
    assert set(PARAMS) <= set(params)
    assert "simulated" in nb.cells[0].source.lower()


@pytest.fixture(scope="module")
def executed(tmp_path_factory):
    """The notebook executed by papermill on the twin (widget state stored by nbclient)."""
    tmp = tmp_path_factory.mktemp("live_lab")
    out_nb, out_dir = tmp / "00_live_lab.ipynb", tmp / "out"
    papermill.execute_notebook(str(NOTEBOOK), str(out_nb), parameters={**PARAMS, "OUTPUT_DIR": str(out_dir)},
                               cwd=str(NOTEBOOK.parent), kernel_name="python3", progress_bar=False,
                               store_widget_state=True)
    return out_nb, out_dir


def widget_models(nb) -> dict:
    return nb.metadata["widgets"][WIDGET_STATE]["state"]


def image_pngs(nb) -> list[bytes]:
    """The PNG bytes of every saved Image widget."""
    return [base64.b64decode(m["buffers"][0]["data"]) for m in widget_models(nb).values()
            if m["model_name"] == "ImageModel" and m.get("buffers")]


def panel_png(nb, header: str) -> bytes:
    """The saved PNG of the Image widget in the box whose HTML header is ``header``."""
    models = widget_models(nb)

    def child(ref: str) -> dict:
        return models[ref.removeprefix("IPY_MODEL_")]

    for m in models.values():
        kids = [child(r) for r in m["state"].get("children", [])]
        if any(k["model_name"] == "HTMLModel" and k["state"].get("value") == header for k in kids):
            image = next(k for k in kids if k["model_name"] == "ImageModel")
            return base64.b64decode(image["buffers"][0]["data"])
    raise AssertionError(f"no saved panel with header {header!r}")


def pixels(data: bytes | Path) -> np.ndarray:
    src = io.BytesIO(data) if isinstance(data, bytes) else data
    return np.asarray(Image.open(src).convert("RGB"))


def test_live_lab_executes_headless_on_the_twin(executed):
    out_nb, out_dir = executed
    summary = json.loads((out_dir / "summary.json").read_text())
    assert summary["backend"] == "sim" and summary["simulated"] is True
    assert summary["board"].startswith("SIMULATED")
    live = summary["live"]
    n_ticks = 2 * 4 + 2  # ceil(1.0 / 0.25) per phase: before, during and after the lock (half)
    assert live["n_refreshes"] == n_ticks
    assert live["n_samples"] >= n_ticks * 5  # every 0.05 s of virtual time, >= 0.25 s per refresh
    assert live["total_rails"] == ["VDD_GPU_SOC", "VDD_CPU_CV"]
    assert 3.0 < live["mean_total_w"] < 60.0  # a training AGX Orin, not zeros (twin)
    assert len(summary["dial"]["levels_mhz"]) == 11
    assert summary["dial"]["message"].startswith("[simulated] restored:")
    sweep = summary["sweep"]
    assert sweep["runs"] == sweep["runs_ok"] == 4
    assert set(sweep["least_energy_mhz"].values()) <= set(PARAMS["SWEEP_FREQS_MHZ"])

    ds = load_dataset(out_dir / "sweep")  # the dataset contract the pipeline takes
    assert ds.meta["source"] == "simulated"
    assert sorted(ds.runs["gpu_freq_mhz"].dropna()) == PARAMS["SWEEP_FREQS_MHZ"]
    trace_meta = json.loads((out_dir / "live_power.meta.json").read_text())
    assert trace_meta["meta"]["source"] == "simulated"
    for name in ("live_power.png", "energy_curve.png"):
        assert pixels(out_dir / name).std() > 20

    nb = nbformat.read(out_nb, as_version=4)
    htmls = [m["state"].get("value", "") for m in widget_models(nb).values() if m["model_name"] == "HTMLModel"]
    assert LIVE_HEADER in htmls
    assert "<b>Energy per run vs GPU clock: SIMULATED board (digital twin)</b>" in htmls
    assert any("[simulated] GPU" in h and "CPU+GPU" in h for h in htmls)  # the live readout
    pngs = image_pngs(nb)
    assert len(pngs) == 2 and all(pixels(p).std() > 20 for p in pngs)
    assert pixels(panel_png(nb, LIVE_HEADER)).shape == (320, 720, 3)
    static = [o for c in code_cells(nb) for o in c.outputs if "image/png" in o.get("data", {})]
    assert len(static) == 2  # the live trace and the energy curve, also as plain outputs


# --------------------------------------------------------------------------------------------
# JupyterLab in headless Chromium
# --------------------------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def http(url: str, data: dict | None = None, timeout: float = 5.0) -> dict:
    req = urllib.request.Request(url, data=None if data is None else json.dumps(data).encode(),
                                 headers={"Content-Type": "application/json"},
                                 method="GET" if data is None else "POST")
    with urllib.request.urlopen(req, timeout=timeout) as resp:
        return json.loads(resp.read() or b"{}")


def wait_for(what: str, check, timeout_s: float, log: Path):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            value = check()
            if value:
                return value
        except OSError:
            pass
        time.sleep(0.25)
    pytest.fail(f"{what} not ready within {timeout_s:.0f} s; JupyterLab log:\n{log.read_text()[-3000:]}")


def wait_kernel_ready(connection_file: Path, log: Path, timeout_s: float = 90) -> None:
    """Wait until the kernel answers kernel_info (the server reports "starting" until a client
    connects, so ask the kernel itself through its connection file)."""
    from jupyter_client import BlockingKernelClient

    wait_for("the kernel's connection file", connection_file.exists, 30, log)
    client = BlockingKernelClient(connection_file=str(connection_file))
    client.load_connection_file()
    client.start_channels()
    try:
        client.wait_for_ready(timeout=timeout_s)
    finally:
        client.stop_channels()


def screenshot_copy(executed_nb: Path, nb_dir: Path, data_dir: Path) -> Path:
    """The executed notebook with code inputs collapsed (as View > Collapse All Code does), so
    that the live panel is in the first screen; signed as trusted, like a notebook one ran oneself."""
    from nbformat.sign import NotebookNotary

    nb = nbformat.read(executed_nb, as_version=4)
    for c in code_cells(nb):
        c.metadata.setdefault("jupyter", {})["source_hidden"] = True
    NotebookNotary(data_dir=str(data_dir)).sign(nb)
    path = nb_dir / "live_lab.ipynb"
    nbformat.write(nb, path)
    return path


def chromium(url: str, out_png: Path, profile: Path, budget_ms: int) -> None:
    cmd = [str(CHROMIUM), "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
           "--no-first-run", "--disable-background-networking", "--disable-component-update",
           "--disable-sync", f"--user-data-dir={profile}", f"--window-size={SCREEN[0]},{SCREEN[1]}",
           f"--virtual-time-budget={budget_ms}", f"--screenshot={out_png}", url]
    subprocess.run(cmd, capture_output=True, timeout=180, check=False)


def find_image(screen: np.ndarray, img: np.ndarray) -> tuple[int, int, int, float] | None:
    """Where ``img`` is drawn 1:1 in ``screen``: (top, left, visible rows, mean |difference|).

    Finds an exact run of 64 pixels from the image's busiest row in the screenshot's rows, then
    compares the whole visible part of the image there.
    """
    r0 = int(np.argmax(img.reshape(img.shape[0], -1).std(axis=1)[: img.shape[0] // 2]))
    c0 = 8 * int(np.argmax([img[r0, c:c + 64].std() for c in range(0, img.shape[1] - 64, 8)]))
    pattern = img[r0, c0:c0 + 64].tobytes()
    for y in range(screen.shape[0]):
        row, k = screen[y].tobytes(), -1
        while (k := row.find(pattern, k + 1)) >= 0:
            if k % 3:
                continue
            top, left = y - r0, k // 3 - c0
            if top < 0 or left < 0 or left + img.shape[1] > screen.shape[1]:
                continue
            rows = min(img.shape[0], screen.shape[0] - top)
            diff = np.abs(screen[top:top + rows, left:left + img.shape[1]].astype(int)
                          - img[:rows].astype(int)).mean()
            return top, left, rows, float(diff)
    return None


def start_button_pixels(screen: np.ndarray, top: int) -> int:
    """Pixels of the panel's green Start button (ipywidgets "success" style) in the 150 rows
    above ``top``: the rendered panel draws it just above its plot, the plain PNG copy does not."""
    above = screen[max(0, top - 150):top].astype(int)
    return int((np.abs(above - (56, 142, 60)).sum(axis=2) < 12).sum())


@pytest.mark.slow
def test_jupyterlab_screenshot_shows_the_live_panel_with_its_trace(executed, tmp_path):
    if not CHROMIUM.exists():
        pytest.skip(f"{CHROMIUM} is missing: install Debian's chromium package (apt-get install -y "
                    "chromium, as .ci/install-chromium does) or set DVFSLAB_CHROMIUM to take the JupyterLab "
                    "screenshot")
    if shutil.which("jupyter-lab", path=str(Path(sys.executable).parent)) is None:
        pytest.skip("JupyterLab is not installed in this environment (pip install 'dvfslab[lab]')")
    out_nb, _ = executed
    dirs = {k: tmp_path / k for k in ("data", "config", "runtime", "settings", "ws", "chrome", "nb")}
    for d in dirs.values():
        d.mkdir()
    notif = dirs["settings"] / "@jupyterlab" / "apputils-extension" / "notification.jupyterlab-settings"
    notif.parent.mkdir(parents=True)
    notif.write_text('{"fetchNews": "false", "checkForUpdates": false}')  # no news pop-up over the page
    nb_path = screenshot_copy(out_nb, dirs["nb"], dirs["data"])
    env = {**os.environ, "JUPYTER_DATA_DIR": str(dirs["data"]), "JUPYTER_CONFIG_DIR": str(dirs["config"]),
           "JUPYTER_RUNTIME_DIR": str(dirs["runtime"])}
    port, log = free_port(), tmp_path / "jupyterlab.log"
    base = f"http://127.0.0.1:{port}"
    cmd = [sys.executable, "-m", "jupyterlab", "--no-browser", "--ip=127.0.0.1", f"--port={port}",
           "--IdentityProvider.token=", "--ServerApp.password=", "--ServerApp.disable_check_xsrf=True",
           f"--ServerApp.root_dir={dirs['nb']}", "--LabApp.news_url=None",
           "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
           f"--LabApp.user_settings_dir={dirs['settings']}", f"--LabApp.workspaces_dir={dirs['ws']}"]
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        cmd.append("--allow-root")
    with open(log, "w") as log_fh:
        lab = subprocess.Popen(cmd, env=env, stdout=log_fh, stderr=subprocess.STDOUT, cwd=tmp_path)
    try:
        wait_for("JupyterLab", lambda: http(f"{base}/api/status"), 90, log)
        # the widget manager renders saved state once the notebook's kernel is connected:
        # start that kernel before the browser comes, so it is idle when the page loads
        session = http(f"{base}/api/sessions", {"path": nb_path.name, "name": nb_path.name,
                                                "type": "notebook", "kernel": {"name": "python3"}})
        wait_kernel_ready(dirs["runtime"] / f"kernel-{session['kernel']['id']}.json", log)
        live_png = pixels(panel_png(nbformat.read(out_nb, as_version=4), LIVE_HEADER))
        shot = tmp_path / "live_lab.png"
        for budget_ms in (30_000, 60_000, 90_000):  # a slow or busy machine gets longer tries
            chromium(f"{base}/doc/tree/{nb_path.name}", shot, dirs["chrome"], budget_ms)
            found = find_image(pixels(shot), live_png) if shot.exists() else None
            # done once the widgets rendered: the plot is there with the panel's Start button above
            # (else the image found is the notebook's plain PNG copy further down)
            if found and found[2] >= 150 and start_button_pixels(pixels(shot), found[0]) > 1000:
                break
    finally:
        lab.terminate()
        try:
            lab.wait(timeout=20)
        except subprocess.TimeoutExpired:
            lab.kill()
    assert shot.exists(), f"chromium wrote no screenshot; JupyterLab log:\n{log.read_text()[-3000:]}"
    if os.environ.get("DVFSLAB_SCREENSHOT_OUT"):
        shutil.copyfile(shot, os.environ["DVFSLAB_SCREENSHOT_OUT"])
    screen = pixels(shot)
    assert screen.shape == (SCREEN[1], SCREEN[0], 3)
    assert screen.std() > 20, "blank screenshot"
    assert found is not None, "the live panel's plot is not in the screenshot (widget not rendered?)"
    top, left, rows, diff = found
    assert rows >= 150, f"only {rows} rows of the live plot are on screen (at y={top})"
    assert diff < 8.0, f"the plot on screen differs from the saved widget image (mean |d| = {diff:.1f})"
    # the plot belongs to the rendered panel (not to the plain PNG copy further down): the
    # panel's green Start button (ipywidgets "success" style) is drawn just above it
    start_green = start_button_pixels(screen, top)
    assert start_green > 1000, "no rendered Start button above the plot: the widgets did not render"
    shown = screen[top:top + rows, left:left + live_png.shape[1]].astype(int)

    def rail_blue(px: np.ndarray) -> int:  # the VDD_GPU_SOC trace (matplotlib C0) and its legend key
        return int((np.abs(px.astype(int) - (31, 119, 180)).sum(axis=2) < 40).sum())

    saved = rail_blue(live_png[:rows])
    assert saved > 60, f"the saved live plot has no rail trace in its top {rows} rows"
    assert rail_blue(shown) >= 0.9 * saved, "the rail trace is not on screen"
