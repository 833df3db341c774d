"""``cloudzones report --html``: one self-contained page with a picture of the zones.

Workloads are rows and zones columns; each cell holds the workload's pods in that zone and is
coloured by what losing the zone does to it. Plain HTML and inline CSS: no script, no font, no
image, no link to anything, so it opens offline and reads the same with JavaScript off. The facts
are those of the text report (the same `ClusterReport`), every colour also written as a word.
"""

from __future__ import annotations

import html
from collections.abc import Iterable

from cloudzones.workloads import zonereport

_COLOURS = {"ok": "#d8f0d8", "degraded": "#fff3b0", "stranded": "#ffd3a6", "unavailable": "#f7a8a8",
            "quorum-lost": "#e06c6c"}
_STYLE = """
body{font-family:system-ui,sans-serif;margin:2em;color:#222}
table{border-collapse:collapse;margin:1em 0}
th,td{border:1px solid #999;padding:.3em .6em;text-align:left;vertical-align:top}
th{background:#eee}
td.cell{text-align:center;min-width:7em}
.legend span{display:inline-block;padding:.2em .6em;margin-right:.4em;border:1px solid #999}
.verdict{display:block;font-size:.8em}
"""


def render(report: zonereport.ClusterReport, *, title: str = "cloudzones: zones of the cluster") -> str:
    """The page, as a string."""
    zones = [z.zone for z in report.zones if z.zone != zonereport.NO_ZONE]
    parts = [f"<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>{_e(title)}</title>",
             f"<style>{_STYLE}</style></head><body><h1>{_e(title)}</h1>",
             f"<p>{sum(1 for z in report.zones if z.kind == 'zone')} zone(s), "
             f"{sum(1 for z in report.zones if z.kind == 'faultDomain')} fault domain(s), "
             f"{len(report.workloads)} workload(s), "
             f"{sum(1 for f in report.findings if f.severity.value == 'error')} error finding(s).</p>",
             "<h2>What losing each zone does</h2>" if all(z.kind != "faultDomain" for z in report.zones) else
             "<h2>What losing each zone or fault domain does</h2>", '<p class="legend">',
             "".join(f'<span style="background:{c}">{_e(v)}</span>' for v, c in _COLOURS.items()), "</p>",
             '<table id="zones-picture"><thead><tr><th>workload</th>',
             "".join(f'<th scope="col">{_e(zonereport.column_name(z))}</th>' for z in zones), "</tr></thead><tbody>"]
    for row in report.workloads:
        parts.append(f'<tr><th scope="row">{_e(row.workload)}</th>')
        for zone in zones:
            verdict = row.loss.get(zone, "ok")
            parts.append(f'<td class="cell" style="background:{_COLOURS.get(verdict, "#fff")}">'
                         f'{row.pods.get(zone, 0)} pod(s)<span class="verdict">{_e(verdict)}</span></td>')
        parts.append("</tr>")
    parts.append("</tbody></table><h2>Zones</h2>")
    parts.append(_table(["zone", "nodes", "ready", "CPU allocatable", "CPU requested", "memory allocatable",
                         "memory requested", "pods", "pinned volumes"],
                        ([zonereport.column_name(z.zone), z.nodes, z.ready, f"{z.cpu_allocatable}m",
                          f"{z.cpu_requested}m",
                          _bytes(z.memory_allocatable), _bytes(z.memory_requested), z.pods,
                          ", ".join(z.volumes) or "-"] for z in report.zones), table_id="zones"))
    parts.append("<h2>Findings</h2>")
    parts.append(_table(["severity", "rule", "subject", "message"],
                        ([f.severity.value, f.rule, f.subject, f.message] for f in report.findings),
                        table_id="findings") if report.findings else "<p>None.</p>")
    parts.append("</body></html>\n")
    return "".join(parts)


def _table(head: list[str], rows: Iterable[list[object]], *, table_id: str) -> str:
    out = [f'<table id="{table_id}"><thead><tr>', "".join(f"<th>{_e(h)}</th>" for h in head), "</tr></thead><tbody>"]
    out += ["<tr>" + "".join(f"<td>{_e(str(c))}</td>" for c in row) + "</tr>" for row in rows]
    out.append("</tbody></table>")
    return "".join(out)


def _bytes(value: int) -> str:
    for unit, size in (("Gi", 2**30), ("Mi", 2**20), ("Ki", 2**10)):
        if value >= size:
            return f"{value / size:.1f}{unit}"
    return str(value)


def _e(text: str) -> str:
    return html.escape(text, quote=True)
