#!/usr/bin/python3
"""
render_dashboard.py -- draw monitoring/tms-dashboard.json as an SVG from the
data of a real Prometheus, for the picture in doc/operations.md (Grafana is
not packaged in Debian).  Standard library only.

It lays the panels out as the dashboard's gridPos does, asks Prometheus'
/api/v1/query_range for every target of every panel (variables at "All",
$__rate_interval a quarter of the time range, at least 15 s) and draws each
series as a line, with the panel's title, unit and a legend.  It is a
picture of the dashboard's queries, not Grafana: no thresholds, no
overrides.

  render_dashboard.py --prometheus http://127.0.0.1:9090 --start UNIX --end UNIX \\
      [--dashboard monitoring/tms-dashboard.json] --out doc/img/tms-dashboard.svg

test/integration/test_prometheus.py substitutes the panels' variables with
substitute() (one rule for the test and the picture) and calls render() at
the end of its run when TMS_DASHBOARD_SVG names a file: that is how
doc/img/tms-dashboard.svg was made.
"""

import argparse
import json
import math
import re
import urllib.parse
import urllib.request
from xml.sax.saxutils import escape

COLUMN = 50            # pixels per grid column (24 columns)
ROW = 30               # pixels per grid row
PAD = 8
COLORS = ["#7eb26d", "#eab839", "#6ed0e0", "#ef843c", "#e24d42", "#1f78c1",
          "#ba43a9", "#705da0", "#508642", "#cca300", "#447ebc", "#c15c17"]
BG, PANEL_BG, TEXT, GRID = "#111217", "#181b1f", "#ccccdc", "#2c3235"


class _Api:
    """query_range against a Prometheus URL (test/world.py's Prometheus
    has the same method)."""

    def __init__(self, url):
        self.url = url.rstrip("/")

    def query_range(self, expr, start, end, step):
        q = urllib.parse.urlencode({"query": expr, "start": start, "end": end, "step": step})
        with urllib.request.urlopen("%s/api/v1/query_range?%s" % (self.url, q), timeout=30) as r:
            body = json.loads(r.read().decode("utf-8"))
        if body.get("status") != "success":
            raise RuntimeError("%s: %s" % (expr, body.get("error")))
        return body["data"]["result"]


def substitute(expr, dash, window):
    """expr with the dashboard's variables as Grafana substitutes them with
    every variable at "All" (its allValue), and $__rate_interval, $__interval
    and $__range as `window` ("5m"); an unknown variable is a ValueError."""
    values = {v["name"]: v.get("allValue") or ".*" for v in dash["templating"]["list"]}
    values.update({"__rate_interval": window, "__interval": window, "__range": window})

    def repl(m):
        name = m.group(1) or m.group(2)
        if name not in values:
            raise ValueError("unknown variable $%s in %r" % (name, expr))
        return values[name]
    return re.sub(r"\$\{(\w+)\}|\$(\w+)", repl, expr)


def _legend(fmt, labels):
    return re.sub(r"\{\{\s*(\w+)\s*\}\}", lambda m: labels.get(m.group(1), ""), fmt) \
        or json.dumps(labels)


def _human(v, unit):
    if unit == "bytes":
        for suffix in ("B", "KiB", "MiB", "GiB", "TiB"):
            if abs(v) < 1024 or suffix == "TiB":
                return ("%.0f %s" if suffix == "B" else "%.1f %s") % (v, suffix)
            v /= 1024.0
    suffix = {"s": " s", "ops": "/s", "reqps": " req/s"}.get(unit, "")
    if v != 0 and abs(v) < 0.01:
        return "%.1e%s" % (v, suffix)
    if abs(v) >= 1000:
        return "%.1fk%s" % (v / 1000, suffix)
    return ("%.0f%s" if v == int(v) else "%.2f%s") % (v, suffix)


def _panel_svg(p, series, step, x0, y0, w, h):
    unit = p.get("fieldConfig", {}).get("defaults", {}).get("unit", "short")
    out = ['<rect x="%d" y="%d" width="%d" height="%d" rx="3" fill="%s" stroke="%s"/>'
           % (x0, y0, w, h, PANEL_BG, GRID),
           '<text x="%d" y="%d" fill="%s" font-size="13" font-weight="bold">%s</text>'
           % (x0 + 8, y0 + 18, TEXT, escape(p["title"]))]
    legend_rows = min(len(series), 4)
    px0, py0 = x0 + 62, y0 + 28
    pw, ph = w - 72, h - 40 - 14 * legend_rows
    points = [(t, v) for _, vals in series for t, v in vals if math.isfinite(v)]
    if not points or ph < 20:
        out.append('<text x="%d" y="%d" fill="%s" font-size="12">No data</text>'
                   % (x0 + w // 2 - 25, y0 + h // 2, TEXT))
        return out
    t0 = min(t for t, _ in points)
    t1 = max(max(t for t, _ in points), t0 + 1)
    vmax = max(max(v for _, v in points), 0)
    vmax = vmax * 1.1 if vmax > 0 else 1.0
    for i in range(5):                       # grid and y axis
        gy = py0 + ph - ph * i / 4.0
        out.append('<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="%s"/>'
                   % (px0, gy, px0 + pw, gy, GRID))
        out.append('<text x="%d" y="%.1f" fill="%s" font-size="10" text-anchor="end">%s</text>'
                   % (px0 - 4, gy + 3, TEXT, escape(_human(vmax * i / 4.0, unit))))
    for i, (name, vals) in enumerate(series):
        color = COLORS[i % len(COLORS)]
        # a line per run of samples: a series absent for a while has a gap
        runs, last = [], None
        for t, v in vals:
            if not math.isfinite(v):
                last = None
                continue
            if last is None or t - last > 1.5 * step:
                runs.append([])
            runs[-1].append("%.1f,%.1f" % (px0 + pw * (t - t0) / (t1 - t0),
                                           py0 + ph - ph * v / vmax))
            last = t
        for pts in runs:
            if len(pts) == 1:
                out.append('<circle cx="%s" cy="%s" r="2" fill="%s"/>'
                           % (*pts[0].split(","), color))
            else:
                out.append('<polyline fill="none" stroke="%s" stroke-width="1.5" points="%s"/>'
                           % (color, " ".join(pts)))
    seconds = t1 - t0
    out.append('<text x="%d" y="%d" fill="%s" font-size="10">%s</text>'
               % (px0, py0 + ph + 12, TEXT, "last %d s" % round(seconds)))
    for i, (name, _) in enumerate(series[:legend_rows]):
        ly = py0 + ph + 26 + 14 * i
        more = " (+%d more)" % (len(series) - legend_rows) \
            if i == legend_rows - 1 and len(series) > legend_rows else ""
        out.append('<rect x="%d" y="%d" width="10" height="3" fill="%s"/>'
                   % (px0, ly - 5, COLORS[i % len(COLORS)]))
        out.append('<text x="%d" y="%d" fill="%s" font-size="10">%s</text>'
                   % (px0 + 14, ly, TEXT, escape((name + more)[:90])))
    return out


def render(prom, dash, start, end, out_path):
    """Write the SVG of dashboard `dash` over [start, end] (Unix times) from
    `prom` (anything with query_range(expr, start, end, step))."""
    step = max(1.0, (end - start) / 200.0)
    rate_interval = "%ds" % max(15, int((end - start) / 4))
    rows = max(p["gridPos"]["y"] + p["gridPos"]["h"] for p in dash["panels"])
    width, height = 24 * COLUMN + 2 * PAD, rows * ROW + 2 * PAD + 30
    svg = ['<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" '
           'font-family="Inter, Helvetica, Arial, sans-serif">' % (width, height),
           '<rect width="100%%" height="100%%" fill="%s"/>' % BG,
           '<text x="%d" y="%d" fill="%s" font-size="16" font-weight="bold">%s</text>'
           % (PAD, PAD + 16, TEXT, escape(dash["title"]))]
    for p in dash["panels"]:
        g = p["gridPos"]
        x0, y0 = PAD + g["x"] * COLUMN, PAD + 30 + g["y"] * ROW
        w, h = g["w"] * COLUMN - 4, g["h"] * ROW - 4
        if p["type"] == "row":
            svg.append('<text x="%d" y="%d" fill="%s" font-size="14" font-weight="bold">%s</text>'
                       % (x0, y0 + 20, TEXT, escape(p["title"])))
            continue
        series = []
        for t in p.get("targets", []):
            expr = substitute(t["expr"], dash, rate_interval)
            for s in prom.query_range(expr, start, end, step):
                vals = [(float(ts), float(v)) for ts, v in s["values"]]
                series.append((_legend(t.get("legendFormat", ""), s["metric"]), vals))
        series.sort(key=lambda s: (s[0].startswith("(other)"), s[0]))
        svg.extend(_panel_svg(p, series, step, x0, y0, w, h))
    svg.append("</svg>")
    with open(out_path, "w") as f:
        f.write("\n".join(svg) + "\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--prometheus", required=True)
    ap.add_argument("--dashboard", default="monitoring/tms-dashboard.json")
    ap.add_argument("--start", type=float, required=True)
    ap.add_argument("--end", type=float, required=True)
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    with open(a.dashboard) as f:
        dash = json.load(f)
    render(_Api(a.prometheus), dash, a.start, a.end, a.out)


if __name__ == "__main__":
    main()
