#!/usr/bin/env python3
"""Turns the end-to-end bench's results.tsv into table.md and chart.svg (see .ci/bench-e2e).

    python3 benches/e2e/report.py RESULTS.tsv OUT_DIR "how the load was run"

The table gives, per transport and server: req/s, p50 and p99 latency, CPU ms per 1,000
requests, RSS when idle and per idle HTTP session, the load generator's own CPU over the
window, and the ratios the targets are stated in (each mcpwire host against the fastest
peer, and against its HTTP stack's floor: the median over the rounds of each round's ratio,
so that a host is only ever divided by a server loaded minutes from it). A second
table gives each HTTP server's req/s with its idle sessions still open, and a third each
mcpwire HTTP host's with listen streams open (streams.tsv, beside RESULTS.tsv). The chart
draws req/s as bars and writes the p99 beside each, one panel per transport.
"""

import csv
import html
import os
import sys

MCPWIRE = "mcpwire"
# A load generator busy this share of the window or more had a core of its own and no time
# to spare: the row may measure the generator, not the server.
DRIVER_BOUND = 0.9


def load(path):
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f, delimiter="\t"))
    for r in rows:
        n, d = int(r["requests"]), int(r["duration_us"])
        r["rps"] = n / (d / 1e6) if d else 0.0
        r["p50"] = int(r["p50_us"]) / 1000
        r["p99"] = int(r["p99_us"]) / 1000
        r["cpu_per_k"] = int(r["cpu_ms"]) * 1000 / n if n else 0.0
        driver = r.get("driver_cpu_ms") or ""
        r["driver"] = int(driver) / (d / 1e3) if driver and d else None
        # The same load with sessions open and idle (HTTP, first round, highest level).
        on, od = r.get("sessions_requests") or "", r.get("sessions_duration_us") or ""
        r["open_rps"] = int(on) / (int(od) / 1e6) if on and od and int(od) else None
        # Its baseline: the same load on the same server just before the sessions were opened.
        bn, bd = r.get("sessions_base_requests") or "", r.get("sessions_base_duration_us") or ""
        r["base_rps"] = int(bn) / (int(bd) / 1e6) if bn and bd and int(bd) else None
        r["kind"] = ("floor" if r["server"].startswith("floor")
                     else "ours" if r["server"].startswith(MCPWIRE) else "peer")
    return medians(rows)


def medians(rows):
    """Per transport, server and level, in the order they first ran: the round with the median
    req/s (the lower middle one for an even count), with the range over the rounds in "lo" and
    "hi", and the session memory of the round that measured it."""
    runs = {}
    for r in rows:
        runs.setdefault((r["transport"], r["server"], r["connections"]), []).append(r)
    out = []
    for group in runs.values():
        by_rps = sorted(group, key=lambda r: r["rps"])
        m = dict(by_rps[(len(by_rps) - 1) // 2])
        m["lo"], m["hi"], m["rounds"] = by_rps[0]["rps"], by_rps[-1]["rps"], len(group)
        m["by_round"] = {r["round"]: r["rps"] for r in group}
        # Requests per CPU-second of the server at the load it got (a server given more load
        # may batch more and spend less per request).
        m["eff_by_round"] = {r["round"]: 1000 / r["cpu_per_k"] for r in group if r["cpu_per_k"]}
        # The load generator's busiest round (a ratio is a median over all of them).
        shares = [r["driver"] for r in group if r["driver"] is not None]
        m["driver"] = max(shares) if shares else None
        m["session_rss_b"] = next((r["session_rss_b"] for r in group if r["session_rss_b"]), "")
        # Measured once: kept with the round's own req/s, to compare like with like.
        m["open"] = next(((r.get("sessions_open"), r["open_rps"], r["base_rps"] or r["rps"])
                          for r in group if r["open_rps"] is not None), None)
        out.append(m)
    return out


def median(values):
    """The median (the mean of the middle two for an even count), None for none."""
    v = sorted(values)
    if not v:
        return None
    mid = len(v) // 2
    return v[mid] if len(v) % 2 else (v[mid - 1] + v[mid]) / 2


def ratio(row, others, key="by_round"):
    """The median over the rounds of row's req/s (key "eff_by_round": requests per CPU-second)
    over the highest of others' in that round (rounds where row or none of others ran are
    left out)."""
    per = []
    for rnd, value in row[key].items():
        best = max((o[key][rnd] for o in others if rnd in o[key]), default=0)
        if best:
            per.append(value / best)
    return median(per)


def floor_for(row, floors):
    """The floor on the same HTTP stack (hyper for axum, which runs on it), else the fastest
    floor of the transport."""
    if row["transport"] == "stdio":
        return floors[0] if floors else None
    same = {"hyper": "floor hyper", "axum": "floor hyper", "Go net/http": "floor net/http",
            "libmicrohttpd": "floor libmicrohttpd"}.get(row["stack"])
    for f in floors:
        if f["server"] == same:
            return f
    return max(floors, key=lambda f: f["rps"]) if floors else None


def groups(rows):
    """The rows by (transport, level), stdio first, in the order they ran."""
    keys = []
    for r in rows:
        key = (r["transport"], int(r["connections"]))
        if key not in keys:
            keys.append(key)
    keys.sort(key=lambda k: (k[0] != "stdio", k[1]))
    return [(k, [r for r in rows if (r["transport"], int(r["connections"])) == k]) for k in keys]


def table(rows, how):
    out = [f"Load: {how}.", ""]
    out.append("| transport | in flight | server | on | mode | req/s | rounds (k req/s) | p50 ms "
               "| p99 ms | CPU ms / 1k req | RSS idle MiB | RSS / idle session KiB "
               "| load gen CPU | × fastest peer | % of floor | % of floor by CPU |")
    out.append("|---|---:|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    notes = []
    bound = False
    for (transport, level), group in groups(rows):
        peers = [r for r in group if r["kind"] == "peer"]
        floors = [r for r in group if r["kind"] == "floor"]
        best = max(peers, key=lambda r: r["rps"]) if peers else None
        for r in group:
            x = ratio(r, peers) if peers and r["kind"] == "ours" else None
            fl = floor_for(r, floors)
            pct = ratio(r, [fl]) if fl and r["kind"] != "floor" else None
            by_cpu = ratio(r, [fl], "eff_by_round") if fl and r["kind"] != "floor" else None
            session = r["session_rss_b"]
            session = f"{int(session) / 1024:.1f}" if session not in ("", None) else ""
            driver = ""
            if r["driver"] is not None:
                driver = f"{100 * r['driver']:.0f}%"
                if r["driver"] >= DRIVER_BOUND:
                    driver += " ‡"
                    bound = True
            out.append(
                f"| {transport} | {level} | {r['server']} | {r['stack']} | {r['mode']} "
                f"| {r['rps']:,.0f} | {spread(r)} | {r['p50']:.3f} | {r['p99']:.3f} | {r['cpu_per_k']:.2f} "
                f"| {int(r['idle_rss_kb']) / 1024:.1f} | {session} | {driver} "
                f"| {f'{x:.1f}×' if x is not None else ''} | {f'{100 * pct:.0f}%' if pct is not None else ''} "
                f"| {f'{100 * by_cpu:.0f}%' if by_cpu is not None else ''} |")
        if best:
            lowest_p99 = min(p["p99"] for p in peers)
            for r in (r for r in group if r["kind"] == "ours"):
                fl = floor_for(r, floors)
                pct = ratio(r, [fl]) if fl else None
                by_cpu = ratio(r, [fl], "eff_by_round") if fl else None
                of_floor = f", {100 * pct:.0f}% of its floor" if pct is not None else ""
                if by_cpu is not None:
                    of_floor += f" ({100 * by_cpu:.0f}% by CPU per request)"
                limited = [w for w in (r, fl) if w and w["driver"] is not None and w["driver"] >= DRIVER_BOUND]
                if limited:
                    of_floor += (" (the load generator was busy all the time against "
                                 + " and ".join(w["server"] for w in limited) + ")")
                x = ratio(r, peers)
                notes.append(
                    f"- {transport}, {level} in flight, {r['server']}: "
                    f"{f'{x:.1f}×' if x is not None else 'no round shared with'} the fastest peer ({best['server']}){of_floor}; "
                    f"p99 {r['p99']:.3f} ms against the lowest peer p99 {lowest_p99:.3f} ms "
                    f"({'lower' if r['p99'] < lowest_p99 else 'NOT lower'})")
    out += ["", "\"% of floor by CPU\" is the server's requests per CPU-second against its floor's, "
            "round by round, each at the load it got: where the floor waited on the load generator, "
            "it ran less busy and may have spent more per request than it would with load to spare, "
            "so the figure is an upper bound."]
    if bound:
        out += ["", f"‡ The load generator used {100 * DRIVER_BOUND:.0f}% or more of a core over the window "
                "(in at least one round): it, not the server, may have set the pace, so the row's req/s "
                "is a lower bound on the server's. A ratio of req/s to such a floor overstates the host; "
                "one of such a host to its floor understates it."]
    out += ["", "Per mcpwire host:", ""] + notes
    out += sessions_open(rows)
    return "\n".join(out) + "\n"


def sessions_open(rows):
    """The HTTP servers' req/s with idle sessions open, against the same round without them."""
    measured = [r for r in rows if r["open"] is not None]
    if not measured:
        return []
    n, level = measured[0]["open"][0], measured[0]["connections"]
    out = ["", f"With {int(n):,} idle sessions open (HTTP, {level} connections, first round; "
           "the same load on the server started afresh for the memory figure, just before and "
           "after its sessions were opened):", "",
           "| server | on | req/s | req/s with the sessions open | change |",
           "|---|---|---:|---:|---:|"]
    for r in measured:
        _, with_open, without = r["open"]
        change = f"{100 * (with_open / without - 1):+.0f}%" if without else ""
        out.append(f"| {r['server']} | {r['stack']} | {without:,.0f} | {with_open:,.0f} | {change} |")
    return out


def streams_open(results):
    """mcpwire's HTTP hosts with listen streams held open, against their own first round
    at the same level without them."""
    path = os.path.join(os.path.dirname(results), "streams.tsv")
    if not os.path.exists(path):
        return ""
    with open(path, newline="") as f:
        measured = list(csv.DictReader(f, delimiter="\t"))
    if not measured:
        return ""
    with open(results, newline="") as f:
        first = {(r["server"], r["connections"]): r for r in csv.DictReader(f, delimiter="\t")
                 if r["round"] == "1" and r["transport"] == "http"}
    rps = lambda r: int(r["requests"]) / (int(r["duration_us"]) / 1e6)
    n, level = measured[0]["streams"], measured[0]["connections"]
    out = ["", f"With {int(n):,} 2026-07-28 listen streams open, each its own connection (HTTP, "
           f"{level} connections of load, first round; every stream still open afterwards):", "",
           "| server | on | req/s | req/s with the streams open | change | p99 ms | p99 ms with the streams |",
           "|---|---|---:|---:|---:|---:|---:|"]
    for r in measured:
        base = first.get((r["server"], r["connections"]))
        without = rps(base) if base else 0.0
        with_open = rps(r)
        change = f"{100 * (with_open / without - 1):+.0f}%" if without else ""
        p99 = f"{int(base['p99_us']) / 1000:.3f}" if base else ""
        out.append(f"| {r['server']} | {r['stack']} | {without:,.0f} | {with_open:,.0f} | {change} "
                   f"| {p99} | {int(r['p99_us']) / 1000:.3f} |")
    return "\n".join(out) + "\n"


def spread(r):
    """The range of req/s over the rounds, in thousands ("" for a single round)."""
    if r["rounds"] < 2:
        return ""
    return f"{r['lo'] / 1000:.1f}–{r['hi'] / 1000:.1f}"


def chart(rows, how):
    """Horizontal bars of req/s, one panel per transport, the p99 written after each bar."""
    colors = {"ours": "#1f6feb", "peer": "#d1842b", "floor": "#8b949e"}
    width, label_w, bar_w, row_h = 900, 200, 520, 22
    # One panel per transport, at its highest level.
    panels = []
    for transport in ("stdio", "http"):
        group = [r for r in rows if r["transport"] == transport]
        if group:
            top = max(int(r["connections"]) for r in group)
            panels.append((transport, [r for r in group if int(r["connections"]) == top], top))
    height = 60 + sum(40 + row_h * len(g) for _, g, _ in panels) + 30
    svg = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
           f'font-family="sans-serif" font-size="12">',
           f'<rect width="{width}" height="{height}" fill="white"/>',
           '<text x="10" y="22" font-size="16" font-weight="bold">MCP servers under the same load: '
           'requests per second (bars) and p99 latency</text>',
           f'<text x="10" y="42" fill="#555">{html.escape(how)}</text>']
    y = 60
    for transport, group, level in panels:
        top = max(r["rps"] for r in group) or 1
        title = (f"stdio (one session, {level} requests in flight)" if transport == "stdio"
                 else f"Streamable HTTP ({level} connections)")
        svg.append(f'<text x="10" y="{y + 20}" font-size="14" font-weight="bold">{title}</text>')
        y += 30
        for r in sorted(group, key=lambda r: -r["rps"]):
            w = max(1, int(bar_w * r["rps"] / top))
            svg.append(f'<text x="{label_w - 8}" y="{y + 15}" text-anchor="end">'
                       f'{html.escape(r["server"])}</text>')
            svg.append(f'<rect x="{label_w}" y="{y + 3}" width="{w}" height="{row_h - 6}" '
                       f'fill="{colors[r["kind"]]}"/>')
            svg.append(f'<text x="{label_w + w + 6}" y="{y + 15}">{r["rps"]:,.0f} req/s · '
                       f'p99 {r["p99"]:.2f} ms</text>')
            y += row_h
        y += 10
    legend = [("mcpwire", "ours"), ("other SDKs", "peer"), ("floor (no MCP)", "floor")]
    x = 10
    for text, kind in legend:
        svg.append(f'<rect x="{x}" y="{y + 4}" width="12" height="12" fill="{colors[kind]}"/>')
        svg.append(f'<text x="{x + 18}" y="{y + 14}">{text}</text>')
        x += 140
    svg.append("</svg>")
    return "\n".join(svg) + "\n"


def main():
    results, out, how = sys.argv[1], sys.argv[2], sys.argv[3]
    rows = load(results)
    if not rows:
        sys.exit("report: no results")
    text = table(rows, how) + streams_open(results)
    with open(os.path.join(out, "table.md"), "w") as f:
        f.write(text)
    with open(os.path.join(out, "chart.svg"), "w") as f:
        f.write(chart(rows, how))
    print()
    print(text)


if __name__ == "__main__":
    main()
