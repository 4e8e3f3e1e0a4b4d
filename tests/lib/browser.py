"""Open the collection's HTML reports in headless Chromium and measure what it drew.

Chromium and its driver are Debian's (`make browser` installs them); Selenium drives them
through /usr/bin/chromedriver, so nothing is downloaded at test time. Without them the
caller gets a clear failure, never a skip: the charts are part of what the reports promise.
"""
import os
import pathlib
import shutil
import struct
import zlib

CHROMIUM = os.environ.get("GPUPOOL_CHROMIUM", "/usr/bin/chromium")
CHROMEDRIVER = os.environ.get("GPUPOOL_CHROMEDRIVER", "/usr/bin/chromedriver")
MISSING = ("headless Chromium is needed to check that the HTML reports draw their charts, and %s is "
           "missing: run `make browser` (it installs Debian's chromium and chromium-driver), or point "
           "GPUPOOL_CHROMIUM and GPUPOOL_CHROMEDRIVER at a Chromium and its matching driver")

# what the page reports about every chart: its box, and each bar's, line's and step path's box and data
MEASURE = """
const box = (e) => { const r = e.getBoundingClientRect(); return {x: r.x, y: r.y, w: r.width, h: r.height}; };
return Array.from(document.querySelectorAll('svg.chart')).map((svg) => ({
  id: svg.id,
  box: box(svg),
  bars: Array.from(svg.querySelectorAll('rect.bar')).map((r) => ({
    box: box(r), value: parseFloat(r.getAttribute('data-value')), group: r.getAttribute('data-group'),
    segment: r.getAttribute('data-segment'), fill: r.getAttribute('fill')})),
  lines: Array.from(svg.querySelectorAll('polyline.line')).map((p) => ({
    box: box(p), points: p.points.numberOfItems, length: p.getTotalLength(),
    stroke: p.getAttribute('stroke')})),
  paths: Array.from(svg.querySelectorAll('path.line')).map((p) => ({
    box: box(p), length: p.getTotalLength(), stroke: p.getAttribute('stroke'),
    design: p.getAttribute('data-design'), max: parseFloat(p.getAttribute('data-max'))})),
}));
"""


class Page(object):
    """One report opened in Chromium: its charts as measured, the rows of its tables, the text it
    shows, and a screenshot (RGBA pixels) to look at."""

    def __init__(self, driver, path):
        driver.get(pathlib.Path(path).resolve().as_uri())
        self.title = driver.title
        # the window as tall as the page, so that the screenshot holds it all at the measured places
        height = driver.execute_script("return document.documentElement.scrollHeight;")
        driver.set_window_size(1000, max(600, int(height) + 120))
        self.charts = dict((c["id"], c) for c in driver.execute_script(MEASURE))
        self.table_rows = driver.execute_script(
            "return Array.from(document.querySelectorAll('table')).map((t) => t.tBodies.length ? "
            "t.tBodies[0].rows.length : t.rows.length);")
        self.text = driver.execute_script("return document.body.innerText;")
        self.device_pixel_ratio = driver.execute_script("return window.devicePixelRatio;")
        self.png = driver.get_screenshot_as_png()

    def screenshot(self):
        """The whole page as (width, height, rows of RGB tuples)."""
        return decode_png(self.png)


def driver():
    """A headless Chromium session (the caller quits it)."""
    for path in (CHROMIUM, CHROMEDRIVER):
        if not (os.path.isfile(path) and os.access(path, os.X_OK)) and not shutil.which(path):
            raise AssertionError(MISSING % path)
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service
    except ImportError as exc:
        raise AssertionError("Selenium is needed to drive Chromium (requirements-dev.txt; `make venv`): %s" % exc)
    opts = webdriver.ChromeOptions()
    opts.binary_location = CHROMIUM
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                "--window-size=1000,1400", "--force-device-scale-factor=1", "--hide-scrollbars"):
        opts.add_argument(arg)
    return webdriver.Chrome(service=Service(executable_path=CHROMEDRIVER), options=opts)


def open_reports(paths):
    """{path: Page} of each report, opened in one Chromium session."""
    d = driver()
    try:
        return dict((str(p), Page(d, p)) for p in paths)
    finally:
        d.quit()


def decode_png(data):
    """(width, height, pixel rows) of an 8-bit RGB or RGBA, non-interlaced PNG (what Chromium writes)."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    pos, idat, width = 8, b"", None
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + length]
        if kind == b"IHDR":
            width, height, depth, color, _, _, interlace = struct.unpack(">IIBBBBB", body)
            assert depth == 8 and color in (2, 6) and interlace == 0, (depth, color, interlace)
            channels = 4 if color == 6 else 3
        elif kind == b"IDAT":
            idat += body
        pos += 12 + length
    raw = zlib.decompress(idat)
    stride = width * channels
    rows, prev = [], bytearray(stride)
    for y in range(height):
        line = raw[y * (stride + 1):(y + 1) * (stride + 1)]
        ftype, cur = line[0], bytearray(line[1:])
        for i in range(stride):
            a = cur[i - channels] if i >= channels else 0
            b = prev[i]
            c = prev[i - channels] if i >= channels else 0
            if ftype == 1:
                cur[i] = (cur[i] + a) & 0xFF
            elif ftype == 2:
                cur[i] = (cur[i] + b) & 0xFF
            elif ftype == 3:
                cur[i] = (cur[i] + (a + b) // 2) & 0xFF
            elif ftype == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                cur[i] = (cur[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 0xFF
        rows.append([tuple(cur[x * channels:x * channels + 3]) for x in range(width)])
        prev = cur
    return width, height, rows


def hex_rgb(color):
    color = color.lstrip("#")
    return tuple(int(color[i:i + 2], 16) for i in (0, 2, 4))


def assert_bars_drawn(page, chart_id, rows):
    """The chart is on the page with a box, one bar per data row (``rows``: (group, segment,
    value) with value > 0), each bar's width proportional to its value and its stack on one line."""
    chart = page.charts.get(chart_id)
    assert chart, "chart %s is not in the page (charts: %s)" % (chart_id, sorted(page.charts))
    assert chart["box"]["w"] > 0 and chart["box"]["h"] > 0, chart["box"]
    want = sorted((g, s, round(v, 4)) for g, s, v in rows if v > 0)
    got = sorted((b["group"], b["segment"], round(b["value"], 4)) for b in chart["bars"])
    assert got == want, (chart_id, got, want)
    per_unit = [b["box"]["w"] / b["value"] for b in chart["bars"]]
    for b, ratio in zip(chart["bars"], per_unit):
        assert b["box"]["h"] > 0 and b["box"]["w"] > 0, b
        assert abs(ratio - per_unit[0]) <= 1.0 / b["value"] + 1e-6 * per_unit[0], (b, per_unit)  # within a pixel
        assert chart["box"]["x"] <= b["box"]["x"] and b["box"]["x"] + b["box"]["w"] <= chart["box"]["x"] + chart["box"]["w"] + 0.5
    return chart


def assert_pixels(page, chart):
    """A screenshot shows each bar's colour at the bar's centre (it was painted, not only laid out)."""
    width, height, pixels = page.screenshot()
    scale = page.device_pixel_ratio or 1
    for b in chart["bars"]:
        x = int((b["box"]["x"] + b["box"]["w"] / 2) * scale)
        y = int((b["box"]["y"] + b["box"]["h"] / 2) * scale)
        assert 0 <= x < width and 0 <= y < height, (x, y, width, height)
        got, want = pixels[y][x], hex_rgb(b["fill"])
        assert max(abs(g - w) for g, w in zip(got, want)) <= 8, (b, got, want)
