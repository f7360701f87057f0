"""Tests of report.py, the end-to-end bench's table and chart: the figures it publishes are
worked out here by hand from a small results.tsv, chosen so that each shortcut the report
must not take (the ratio of medians instead of the median of ratios, the fastest floor
instead of the server's own stack's, the median round's neighbours) gives another answer.

    python3 -m unittest discover -s benches/e2e -p 'test_*.py'
"""

import csv
import io
import os
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import report  # noqa: E402

COLUMNS = ("round transport server stack mode connections requests duration_us p50_us p99_us "
           "bad socket_errors cpu_ms idle_rss_kb rss_kb session_rss_b sessions_open "
           "sessions_requests sessions_duration_us driver_cpu_ms sessions_base_requests "
           "sessions_base_duration_us").split()


def row(rnd, server, stack, requests, cpu_ms=1000, p99_us=500, driver_cpu_ms="", transport="http",
        connections=32, **extra):
    """One load of one second (so req/s is the request count)."""
    r = {c: "" for c in COLUMNS}
    r.update(round=str(rnd), transport=transport, server=server, stack=stack, mode="stateless",
             connections=str(connections), requests=str(requests), duration_us="1000000",
             p50_us="100", p99_us=str(p99_us), bad="0", socket_errors="0", cpu_ms=str(cpu_ms),
             idle_rss_kb="4096", rss_kb="5000", driver_cpu_ms=str(driver_cpu_ms))
    r.update({k: str(v) for k, v in extra.items()})
    return r


def write_tsv(path, rows, columns=COLUMNS):
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=columns, delimiter="\t", lineterminator="\n")
        w.writeheader()
        for r in rows:
            w.writerow({c: r.get(c, "") for c in columns})


# Three rounds over HTTP at 32 connections. Per round, the host against its floor (hyper) is
# 0.90, 0.70 and 0.95 (median 0.90; the ratio of the medians would be 84/100); against the
# fastest peer 2.00, 2.00 and 1.90; by CPU 1.00, 0.70 and 0.95. rmcp runs on axum, so its
# floor is hyper's (45%), not the faster net/http floor's. The host's median round is the
# second (84 k), whose p99 (300 us) is above rmcp's and whose load generator was busy 95% of
# the window.
ROWS = [
    row(1, "floor hyper", "hyper", 100_000, driver_cpu_ms=500),
    row(2, "floor hyper", "hyper", 120_000, driver_cpu_ms=500),
    row(3, "floor hyper", "hyper", 80_000, driver_cpu_ms=500),
    row(1, "floor net/http", "Go net/http", 200_000),
    row(2, "floor net/http", "Go net/http", 200_000),
    row(3, "floor net/http", "Go net/http", 200_000),
    row(1, "mcpwire Rust", "hyper", 90_000, cpu_ms=900, p99_us=250, driver_cpu_ms=400,
        session_rss_b=2048, sessions_open=1000, sessions_requests=60_000,
        sessions_duration_us=1_000_000, sessions_base_requests=80_000,
        sessions_base_duration_us=1_000_000),
    row(2, "mcpwire Rust", "hyper", 84_000, p99_us=300, driver_cpu_ms=950),
    row(3, "mcpwire Rust", "hyper", 76_000, p99_us=280, driver_cpu_ms=400),
    row(1, "rmcp", "axum", 45_000, p99_us=200),
    row(2, "rmcp", "axum", 42_000, p99_us=200),
    row(3, "rmcp", "axum", 40_000, p99_us=200),
    row(1, "TS <1.x>", "Node & co", 10_000, p99_us=900),
    row(2, "TS <1.x>", "Node & co", 10_000, p99_us=900),
    row(3, "TS <1.x>", "Node & co", 10_000, p99_us=900),
]


def cells(text, server):
    """The table row of `server`, as a list of its cells."""
    for line in text.splitlines():
        parts = [p.strip() for p in line.split("|")]
        if len(parts) > 4 and parts[3] == server:
            return parts[1:-1]
    raise AssertionError(f"no row for {server} in:\n{text}")


HEADER = ["transport", "in flight", "server", "on", "mode", "req/s", "rounds", "p50", "p99",
          "cpu", "rss idle", "rss session", "driver", "x peer", "% floor", "% floor cpu"]


class Report(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.tsv = os.path.join(self.dir.name, "results.tsv")
        write_tsv(self.tsv, ROWS)
        self.rows = report.load(self.tsv)
        self.text = report.table(self.rows, "the test load")

    def tearDown(self):
        self.dir.cleanup()

    def cell(self, server, name):
        return cells(self.text, server)[HEADER.index(name)]

    def test_the_median_round_is_shown_with_its_own_figures_and_the_range(self):
        host = next(r for r in self.rows if r["server"] == "mcpwire Rust")
        self.assertEqual(host["round"], "2")
        self.assertEqual((host["lo"], host["hi"], host["rounds"]), (76_000, 90_000, 3))
        self.assertEqual(self.cell("mcpwire Rust", "req/s"), "84,000")
        self.assertEqual(self.cell("mcpwire Rust", "rounds"), "76.0–90.0")
        self.assertEqual(self.cell("mcpwire Rust", "p99"), "0.300")
        self.assertEqual(self.cell("mcpwire Rust", "cpu"), "11.90")  # 1,000 ms / 84 k requests

    def test_of_two_rounds_the_slower_is_shown(self):
        write_tsv(self.tsv, [row(1, "rmcp", "axum", 20_000), row(2, "rmcp", "axum", 10_000, p99_us=900)])
        text = report.table(report.load(self.tsv), "two")
        self.assertEqual(cells(text, "rmcp")[HEADER.index("req/s")], "10,000")
        self.assertEqual(cells(text, "rmcp")[HEADER.index("p99")], "0.900")

    def test_ratios_are_medians_of_per_round_ratios(self):
        self.assertEqual(self.cell("mcpwire Rust", "% floor"), "90%")
        self.assertEqual(self.cell("mcpwire Rust", "% floor cpu"), "95%")
        self.assertEqual(self.cell("mcpwire Rust", "x peer"), "2.0×")

    def test_a_server_is_compared_with_the_floor_of_its_own_stack(self):
        self.assertEqual(self.cell("rmcp", "% floor"), "45%")
        # A stack with no floor of its own gets the fastest floor: 10 k against 200 k.
        self.assertEqual(self.cell("TS <1.x>", "% floor"), "5%")
        # Peers are not compared with the peers, nor floors with floors.
        self.assertEqual(self.cell("rmcp", "x peer"), "")
        self.assertEqual(self.cell("floor hyper", "% floor"), "")

    def test_a_busy_load_generator_marks_the_row_by_its_busiest_round(self):
        self.assertEqual(self.cell("mcpwire Rust", "driver"), "95% ‡")
        self.assertEqual(self.cell("floor hyper", "driver"), "50%")
        self.assertEqual(self.cell("rmcp", "driver"), "")
        self.assertIn("‡ The load generator used 90% or more", self.text)
        self.assertIn("(the load generator was busy all the time against mcpwire Rust)", self.text)

    def test_no_footnote_when_the_generator_had_time_to_spare(self):
        calm = [dict(r, driver_cpu_ms="100" if r["driver_cpu_ms"] else "") for r in ROWS]
        write_tsv(self.tsv, calm)
        text = report.table(report.load(self.tsv), "calm")
        self.assertNotIn("‡", text)
        self.assertNotIn("busy all the time", text)

    def test_the_note_says_when_a_host_p99_is_not_lower_than_every_peer(self):
        note = next(line for line in self.text.splitlines()
                    if line.startswith("- http, 32 in flight, mcpwire Rust"))
        self.assertIn("2.0× the fastest peer (rmcp)", note)
        self.assertIn("90% of its floor (95% by CPU per request)", note)
        self.assertIn("p99 0.300 ms against the lowest peer p99 0.200 ms (NOT lower)", note)

    def test_the_idle_sessions_are_compared_with_the_same_server_just_before(self):
        self.assertEqual(self.cell("mcpwire Rust", "rss session"), "2.0")
        line = next(line for line in self.text.splitlines() if line.startswith("| mcpwire Rust | hyper | "))
        self.assertEqual([p.strip() for p in line.split("|")[3:6]], ["80,000", "60,000", "-25%"])

    def test_an_empty_round_gives_no_rate_and_no_division_by_zero(self):
        rows = [row(1, "floor hyper", "hyper", 100), row(1, "mcpwire Rust", "hyper", 0, cpu_ms=0)]
        write_tsv(self.tsv, rows)
        text = report.table(report.load(self.tsv), "empty")
        self.assertEqual(cells(text, "mcpwire Rust")[HEADER.index("% floor")], "0%")
        self.assertEqual(cells(text, "mcpwire Rust")[HEADER.index("% floor cpu")], "")

    def test_stdio_rows_come_first_and_use_the_stdio_floor(self):
        rows = ROWS + [row(1, "floor", "Go, no MCP", 1_000_000, transport="stdio", connections=128),
                       row(1, "mcpwire C", "C, poll()", 900_000, transport="stdio", connections=128),
                       row(1, "rmcp", "Rust, tokio", 90_000, transport="stdio", connections=128)]
        write_tsv(self.tsv, rows)
        text = report.table(report.load(self.tsv), "both")
        lines = [line for line in text.splitlines() if line.startswith("| stdio") or line.startswith("| http")]
        self.assertTrue(lines[0].startswith("| stdio | 128 | floor |"))
        c = cells(text, "mcpwire C")
        self.assertEqual((c[HEADER.index("x peer")], c[HEADER.index("% floor")]), ("10.0×", "90%"))

    def test_the_streams_table_compares_with_the_first_round(self):
        write_tsv(os.path.join(self.dir.name, "streams.tsv"),
                  [{"server": "mcpwire Rust", "stack": "hyper", "connections": "32", "streams": "1000",
                    "requests": "45000", "duration_us": "1000000", "p50_us": "100", "p99_us": "700",
                    "still_open": "1000"}],
                  "server stack connections streams requests duration_us p50_us p99_us still_open".split())
        text = report.streams_open(self.tsv)
        self.assertIn("With 1,000 2026-07-28 listen streams open", text)
        # Against round 1 (90 k, p99 0.250), not the median round.
        self.assertIn("| mcpwire Rust | hyper | 90,000 | 45,000 | -50% | 0.250 | 0.700 |", text)

    def test_the_chart_draws_every_server_of_the_highest_level_escaped(self):
        svg = report.chart(self.rows, "a <load>")
        self.assertTrue(svg.startswith("<svg"))
        self.assertIn("TS &lt;1.x&gt;", svg)
        self.assertIn("a &lt;load&gt;", svg)
        self.assertNotIn("TS <1.x>", svg)
        self.assertEqual(svg.count("<rect x=\"200\""), len({r["server"] for r in self.rows}))
        # The bars scale to the fastest: the net/http floor's is the full width.
        self.assertIn('width="520"', svg)

    def test_main_writes_the_table_and_the_chart_and_refuses_no_results(self):
        script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "report.py")
        done = subprocess.run([sys.executable, script, self.tsv, self.dir.name, "how"],
                              capture_output=True, text=True)
        self.assertEqual(done.returncode, 0, done.stderr)
        with open(os.path.join(self.dir.name, "table.md")) as f:
            self.assertEqual(f.read(), report.table(report.load(self.tsv), "how"))
        self.assertTrue(os.path.getsize(os.path.join(self.dir.name, "chart.svg")) > 0)
        write_tsv(self.tsv, [])
        done = subprocess.run([sys.executable, script, self.tsv, self.dir.name, "how"],
                              capture_output=True, text=True)
        self.assertNotEqual(done.returncode, 0)
        self.assertIn("no results", done.stderr)


class Helpers(unittest.TestCase):
    def test_median(self):
        self.assertIsNone(report.median([]))
        self.assertEqual(report.median([3, 1, 2]), 2)
        self.assertEqual(report.median([4, 1, 3, 2]), 2.5)

    def test_ratio_skips_rounds_the_others_did_not_run(self):
        host = {"by_round": {"1": 50.0, "2": 60.0, "3": 10.0}}
        others = [{"by_round": {"1": 100.0, "2": 100.0}}, {"by_round": {"1": 25.0}}]
        # Round 1: 50/100; round 2: 60/100; round 3 has no other: left out.
        self.assertAlmostEqual(report.ratio(host, others), 0.55)
        self.assertIsNone(report.ratio(host, [{"by_round": {}}]))


if __name__ == "__main__":
    unittest.main()
