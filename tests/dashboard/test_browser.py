"""The rendered site in a real headless Chromium: charts are drawn, the regression banner shows,
the machine filter script runs, and a screenshot is taken (saved under pytest's tmp dir)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from dashboard import render_site
from dashboard.model import series_slug
from tests.conftest import requires
from tools.fixtures import synthetic_store

pytestmark = pytest.mark.browser

CHROMIUM_FLAGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
    "--window-size=1400,1000",
]


def _chromium(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    exe = shutil.which("chromium")
    requires(exe is not None, "chromium (Debian package `chromium`)")
    profile = tmp_path / "chromium-profile"
    proc = subprocess.run([exe, *CHROMIUM_FLAGS, f"--user-data-dir={profile}", *args],
                          capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("browser-site")
    render_site(synthetic_store(n_commits=40, n_series=8, machines=2), out)
    return out


def test_overview_in_chromium(site: Path, tmp_path: Path) -> None:
    dom = _chromium(tmp_path, "--dump-dom", (site / "index.html").as_uri()).stdout
    assert dom.count('<svg class="spark') == 16
    assert dom.count("<polyline points=") == 16
    banner = dom[dom.index('id="open-regressions"'):]
    banner = banner[:banner.index("</section>")]
    assert "open regressions" in banner and "regressed" in banner and "failed" in banner


def test_machine_filter_runs(site: Path, tmp_path: Path) -> None:
    dom = _chromium(tmp_path, "--dump-dom", (site / "index.html").as_uri() + "#filter=m:runner-1").stdout
    rows = [line for line in dom.splitlines() if line.startswith("<tr data-machine=")]
    assert len(rows) == 16
    hidden = [r for r in rows if " hidden" in r.split(">", 1)[0]]
    assert len(hidden) == 8 and all('data-machine="runner-0"' in r for r in hidden)


def test_series_chart_in_chromium(site: Path, tmp_path: Path) -> None:
    store = synthetic_store(n_commits=40, n_series=8, machines=2)
    page = site / "series" / f"{series_slug(store.benchmark_list[2].key, 'runner-1')}.html"
    dom = _chromium(tmp_path, "--dump-dom", page.as_uri()).stdout
    chart = dom[dom.index('<svg class="chart"'):]
    chart = chart[:chart.index("</svg>")]
    assert chart.count('<circle class="pt"') == 40
    assert 'class="mark reg"' in chart  # the open regression at commit 20


def test_screenshot_shows_charts_and_banner(site: Path, tmp_path: Path) -> None:
    from PIL import Image

    shot = tmp_path / "dashboard.png"
    _chromium(tmp_path, f"--screenshot={shot}", (site / "index.html").as_uri())
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    img = Image.open(shot).convert("RGB")
    assert img.size == (1400, 1000)
    colors = img.getcolors(maxcolors=1 << 24)  # [(count, (r, g, b)), ...]

    def count_near(want: tuple[int, int, int]) -> int:
        return sum(n for n, rgb in colors if sum(abs(a - b) for a, b in zip(rgb, want, strict=True)) < 60)

    red = count_near((0xCF, 0x22, 0x2E))  # banner border, badges, regressed sparklines
    blue = count_near((0x09, 0x69, 0xDA))  # links and sparklines
    assert red > 2000, red
    assert blue > 500, blue
    print(f"screenshot: {shot}")
