"""The Grafana dashboard and the Prometheus alert rules in deploy/.

Every query must name only metrics (and labels, and label values) that a running service
really exports: they are checked against a live /metrics scrape of a service process that
was made to do a bit of everything (appends, an eviction, a fenced append, each verdict, a
retention pass). The live-read metrics are the one exception, listed below: that feature
is being built now, under these names. `promtool` (Debian's `prometheus` package, see `make
test-tools`) checks the rules, runs their unit tests, and parses every dashboard query.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import time
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from tests.support.needs import missing
from tests.support.processes import REPO, running_server

DASHBOARD = REPO / "deploy" / "grafana" / "mcp-eventlog.json"
ALERTS = REPO / "deploy" / "prometheus" / "alerts.yml"
ALERT_TESTS = REPO / "deploy" / "prometheus" / "alerts.test.yml"
DOCS = REPO / "docs" / "dashboard.md"

# Live reads are being built now; these are the names they will export.
LIVE_READ_METRICS = {
    "eventlog_live_readers": {"instance", "job"},
    "eventlog_live_events_delivered_total": {"instance", "job"},
    "eventlog_live_notify_lag_seconds_bucket": {"instance", "job", "le"},
    "eventlog_live_notify_lag_seconds_sum": {"instance", "job"},
    "eventlog_live_notify_lag_seconds_count": {"instance", "job"},
}
# Prometheus adds these to every scraped series.
TARGET_LABELS = {"job", "instance"}

PROMQL_WORDS = {
    "sum", "max", "min", "avg", "count", "rate", "irate", "increase", "histogram_quantile",
    "time", "by", "without", "and", "or", "unless", "on", "ignoring", "bool", "offset",
    "label_values", "group_left", "group_right", "abs", "clamp_min",
}  # fmt: skip


@dataclass
class Scrape:
    """What a live /metrics answer holds: series names, their labels and label values."""

    names: set[str] = field(default_factory=set)
    labels: dict[str, set[str]] = field(default_factory=lambda: defaultdict(set))
    values: dict[tuple[str, str], set[str]] = field(default_factory=lambda: defaultdict(set))
    samples: dict[str, float] = field(default_factory=dict)


def parse_scrape(text: str) -> Scrape:
    scrape = Scrape()
    suffixes = {
        "counter": ("_total", "_created"),
        "histogram": ("_bucket", "_count", "_sum", "_created"),
        "gauge": ("",),
    }
    for family in text_string_to_metric_families(text):
        # A family with labels but no child yet still exports its HELP and TYPE.
        scrape.names.update(family.name + s for s in suffixes.get(family.type, ("",)))
        for sample in family.samples:
            scrape.names.add(sample.name)
            scrape.labels[sample.name].update(sample.labels)
            for label, value in sample.labels.items():
                scrape.values[(sample.name, label)].add(value)
            if not sample.labels:
                scrape.samples[sample.name] = sample.value
    return scrape


@pytest.fixture(scope="module")
def scrape(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Scrape]:
    """A service process that did a bit of everything, and its /metrics."""
    path = tmp_path_factory.mktemp("metrics") / "eventlog.db"
    env = {
        "EVENTLOG_DATABASE_URL": f"sqlite+aiosqlite:///{path}",
        "EVENTLOG_RETENTION_INTERVAL_SECONDS": "0.2",
        "EVENTLOG_LOG_LEVEL": "warning",
    }
    with running_server(env) as base, httpx.Client(base_url=base, timeout=30) as http:
        exercise(http)
        deadline = time.monotonic() + 60
        while True:
            found = parse_scrape(http.get("/metrics").text)
            if found.samples.get("eventlog_retention_last_run_timestamp_seconds", 0) > 0:
                break
            assert time.monotonic() < deadline, "no retention pass was recorded in 60 s"
            time.sleep(0.1)  # the pass runs in the server process: poll for its result
        yield found


def exercise(http: httpx.Client) -> None:
    def ok(response: httpx.Response, status: int) -> Any:
        assert response.status_code == status, response.text
        return response.json()

    old = ok(http.post("/v1/streams/s1/generations", json={"max_events": 2}), 201)["generation"]
    events = {"events": [{"data": "a"}, {"data": "b"}, {"data": "c"}], "first_seq": 1}
    ok(http.post(f"/v1/generations/{old}/events", json=events), 201)  # evicts one
    new = ok(http.post("/v1/streams/s1/generations", json={"reason": "failover"}), 201)
    retry = {"events": [{"data": "x"}], "first_seq": 1}
    ok(http.post(f"/v1/generations/{new['generation']}/events", json=retry), 201)
    ok(http.post(f"/v1/generations/{new['generation']}/events", json=retry), 200)  # duplicate
    fenced = http.post(f"/v1/generations/{old}/events", json={"events": [{"data": "d"}]})
    assert fenced.json()["code"] == "superseded"
    for claim in (f"{new['generation']}:0", f"{old}:3", f"{old}:9", "nope"):
        ok(http.post("/v1/streams/s1/resume", json={"last_event_id": claim}), 200)
    ok(http.post("/v1/resume", json={"last_event_id": f"{old}:1"}), 200)


def dashboard() -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(DASHBOARD.read_text())
    return loaded


def panel_queries() -> list[tuple[str, str]]:
    """(panel title, PromQL) of every target, and the template variables' queries."""
    queries = [
        (panel["title"], target["expr"])
        for panel in dashboard()["panels"]
        for target in panel.get("targets", [])
    ]
    for variable in dashboard()["templating"]["list"]:
        if variable["type"] == "query":
            queries.append((f"variable {variable['name']}", variable["query"]["query"]))
    return queries


def alert_rules() -> list[dict[str, Any]]:
    loaded = yaml.safe_load(ALERTS.read_text())
    return [rule for group in loaded["groups"] for rule in group["rules"]]


def concrete(expr: str) -> str:
    """A dashboard query with Grafana's variables replaced, as Prometheus would receive it."""
    return expr.replace("$__rate_interval", "5m").replace("$job", ".*")


SELECTOR_START = re.compile(r"([a-zA-Z_:][a-zA-Z0-9_:]*)\s*\{")
STRING = re.compile(r'"(?:[^"\\]|\\.)*"')
MATCHER = re.compile(r'([a-zA-Z_]\w*)\s*(=~|!~|!=|=)\s*"((?:[^"\\]|\\.)*)"')


def metric_names(expr: str) -> set[str]:
    """Every identifier of a PromQL expression that is not a function, keyword or label."""
    text = re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)  # strings
    text = re.sub(r"\{[^}]*\}", "", text)  # label matchers
    text = re.sub(r"\b(by|without|on|ignoring)\s*\([^)]*\)", "", text)  # grouping labels
    text = re.sub(r"\[[^\]]*\]", "", text)  # ranges
    text = re.sub(r"label_values\(([^,]+),[^)]*\)", r"\1", text)
    names = set(re.findall(r"\b[a-zA-Z_:][a-zA-Z0-9_:]*\b", text))
    return {n for n in names if n not in PROMQL_WORDS and not re.fullmatch(r"\d+[smhd]?", n)}


def matchers(expr: str) -> list[tuple[str, str, str, str]]:
    """(metric, label, operator, value) of every label matcher on a named metric."""
    found = []
    strings = [m.span() for m in STRING.finditer(expr)]
    for start in SELECTOR_START.finditer(expr):
        if any(a <= start.start() < b for a, b in strings):
            continue
        # The matchers run to the first `}` outside a string (route values hold braces).
        inside, position = [], start.end()
        while expr[position] != "}":
            string = STRING.match(expr, position)
            inside.append(string.group() if string else expr[position])
            position = string.end() if string else position + 1
        for label, op, value in MATCHER.findall("".join(inside)):
            found.append((start[1], label, op, value.encode().decode("unicode_escape")))
    return found


def check_against_scrape(where: str, expr: str, scrape: Scrape) -> list[str]:
    problems = []
    for name in metric_names(expr):
        if name not in scrape.names and name not in LIVE_READ_METRICS:
            problems.append(f"{where}: {name} is not exported")
    for metric, label, op, value in matchers(expr):
        if metric in LIVE_READ_METRICS:
            if label not in LIVE_READ_METRICS[metric]:
                problems.append(f"{where}: {metric} has no label {label}")
            continue
        if label in TARGET_LABELS:
            continue
        if label not in scrape.labels[metric]:
            problems.append(f"{where}: {metric} has no label {label}")
            continue
        seen = scrape.values[(metric, label)]
        if op == "=" and value not in seen:
            problems.append(f"{where}: {metric}{{{label}={value!r}}} never seen in {seen}")
        # A regex of status codes may match only failures, which the scrape has none of.
        if op == "=~" and label != "status" and not any(re.fullmatch(value, v) for v in seen):
            problems.append(f"{where}: {metric}{{{label}=~{value!r}}} matches none of {seen}")
    return problems


def test_the_retention_pass_sets_its_timestamp(scrape: Scrape) -> None:
    ran_at = scrape.samples["eventlog_retention_last_run_timestamp_seconds"]
    assert time.time() - 120 < ran_at <= time.time()


def test_every_dashboard_query_names_only_exported_metrics(scrape: Scrape) -> None:
    problems = [
        p for title, expr in panel_queries() for p in check_against_scrape(title, expr, scrape)
    ]
    assert not problems, "\n".join(problems)
    used = set().union(*(metric_names(expr) for _, expr in panel_queries()))
    # The dashboard covers what the issue asks for.
    for needed in (
        "eventlog_resume_verdicts_total",
        "eventlog_appended_events_total",
        "eventlog_http_request_duration_seconds_bucket",
        "eventlog_evicted_events_total",
        "eventlog_fenced_appends_total",
        "eventlog_retention_runs_total",
        "eventlog_live_readers",
        "eventlog_live_events_delivered_total",
        "eventlog_live_notify_lag_seconds_bucket",
    ):
        assert needed in used, f"no panel shows {needed}"


def test_every_alert_names_only_exported_metrics(scrape: Scrape) -> None:
    problems = [
        p
        for rule in alert_rules()
        for p in check_against_scrape(rule["alert"], rule["expr"], scrape)
    ]
    assert not problems, "\n".join(problems)


def test_the_checker_catches_what_it_is_for(scrape: Scrape) -> None:
    assert check_against_scrape("x", "rate(eventlog_appends_totl[5m])", scrape)
    assert check_against_scrape("x", 'rate(eventlog_appends_total{dup="true"}[5m])', scrape)
    assert check_against_scrape("x", 'rate(eventlog_appends_total{duplicate="yes"}[5m])', scrape)
    assert check_against_scrape(
        "x", 'rate(eventlog_http_requests_total{route="/v1/generation/{generation}"}[5m])', scrape
    )
    assert not check_against_scrape(
        "x", 'sum by (le) (rate(eventlog_live_notify_lag_seconds_bucket{job=~".*"}[5m]))', scrape
    )


def test_the_dashboard_is_well_formed() -> None:
    board = dashboard()
    assert board["uid"] == "mcp-eventlog"
    assert board["schemaVersion"] >= 36
    variables = {v["name"]: v for v in board["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource"
    assert variables["datasource"]["query"] == "prometheus"
    ids = [panel["id"] for panel in board["panels"]]
    assert len(ids) == len(set(ids))
    occupied: set[tuple[int, int]] = set()
    for panel in board["panels"]:
        pos = panel["gridPos"]
        assert pos["x"] >= 0, panel["title"]
        assert pos["x"] + pos["w"] <= 24, panel["title"]
        cells = {
            (x, y)
            for x in range(pos["x"], pos["x"] + pos["w"])
            for y in range(pos["y"], pos["y"] + pos["h"])
        }
        assert not cells & occupied, f"{panel['title']} overlaps another panel"
        occupied |= cells
        if panel["type"] == "row":
            continue
        assert panel["datasource"] == {"type": "prometheus", "uid": "${datasource}"}
        assert panel["description"], panel["title"]
        refs = [t["refId"] for t in panel["targets"]]
        assert len(refs) == len(set(refs)), panel["title"]
        for target in panel["targets"]:
            assert 'job=~"$job"' in target["expr"], f"{panel['title']} ignores the job variable"


def test_every_alert_is_documented_and_labelled() -> None:
    headings = {
        re.sub(r"[^a-z0-9 -]", "", line.lstrip("#").strip().lower()).replace(" ", "-")
        for line in DOCS.read_text().splitlines()
        if line.startswith("#")
    }
    rules = alert_rules()
    assert {r["alert"] for r in rules} == {
        "EventlogInvalidVerdictSpike",
        "EventlogHighErrorRate",
        "EventlogRetentionStopped",
        "EventlogDecisionLogDropping",
    }
    for rule in rules:
        assert rule["labels"]["severity"] in {"warning", "critical"}
        assert {"summary", "description", "runbook"} <= set(rule["annotations"])
        anchor = rule["annotations"]["runbook"].split("#")[1]
        assert anchor in headings, f"docs/dashboard.md has no section #{anchor}"


def promtool() -> str:
    found = shutil.which("promtool") or str(REPO / ".venv" / "tools" / "usr" / "bin" / "promtool")
    if not os.access(found, os.X_OK):
        missing("promtool for the alert-rule tests", "it is not installed (run `make test-tools`)")
    return found


def run_promtool(*args: str) -> str:
    done = subprocess.run([promtool(), *args], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def test_promtool_checks_the_alert_rules_and_runs_their_tests() -> None:
    assert "SUCCESS: 4 rules found" in run_promtool("check", "rules", str(ALERTS))
    assert "SUCCESS" in run_promtool("test", "rules", str(ALERT_TESTS))


def test_promtool_parses_every_dashboard_query(tmp_path: Path) -> None:
    rules = [
        {"record": f"dashboard:query_{i}", "expr": concrete(expr)}
        for i, (title, expr) in enumerate(panel_queries())
        if not title.startswith("variable ")  # label_values() is Grafana's, not PromQL
    ]
    path = tmp_path / "dashboard-queries.yml"
    path.write_text(yaml.safe_dump({"groups": [{"name": "dashboard", "rules": rules}]}))
    assert f"SUCCESS: {len(rules)} rules found" in run_promtool("check", "rules", str(path))
