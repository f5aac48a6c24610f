"""Which periods the service calls complete: one rule, on every path, at the time of asking.

Exports that run up to now (events until two hours ago) never make today's day complete, nor the
current week on a Sunday nor the current month on its last day. The service's clock is set by the
tests: ``METRICS_KIT_NOW`` for a real ``metrics-kit serve`` child and the embedded default in a
child Python, the ``clock`` argument in this process. A period turning complete changes the ETag
of its answers and never the data version.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from support import ServerProcess, live_exports, utc

from metrics_kit.server.building import build
from metrics_kit.server.dataset import open_service
from metrics_kit.server.http.app import App
from metrics_kit.spec.catalogue import default_catalogue

KEY = "completeness-test-key-0123456789"
DATA = Path(__file__).parents[1] / "http_data"
SUNDAY = dt.datetime(2025, 6, 29, 14, tzinfo=dt.UTC)  # the last day of ISO week 2025-06-23..06-29
MONTH_END = dt.datetime(2025, 6, 30, 14, tzinfo=dt.UTC)  # a Monday, the last day of June
TWO_HOURS = dt.timedelta(hours=2)


def query(granularity: str, date: dt.date) -> dict[str, str]:
    return {"metric_name": "swap_transaction_count", "project": "swapx", "granularity": granularity, "date": str(date)}


# The questions and their flags for an export run until two hours before each clock.
ON_A_SUNDAY = [
    (("1_day", dt.date(2025, 6, 29)), False),  # today
    (("1_day", dt.date(2025, 6, 28)), True),
    (("1_week", dt.date(2025, 6, 29)), False),  # the current week, on its last day
    (("1_week", dt.date(2025, 6, 22)), True),
    (("1_month", dt.date(2025, 6, 29)), False),
    (("1_month", dt.date(2025, 5, 31)), True),
]
ON_A_MONTHS_LAST_DAY = [
    (("1_day", dt.date(2025, 6, 30)), False),  # today
    (("1_day", dt.date(2025, 6, 29)), True),
    (("1_week", dt.date(2025, 6, 30)), False),
    (("1_week", dt.date(2025, 6, 29)), True),  # ended at midnight
    (("1_month", dt.date(2025, 6, 30)), False),  # the current month, on its last day
    (("1_month", dt.date(2025, 5, 1)), True),
]


@pytest.mark.parametrize(("now", "expected"), [(SUNDAY, ON_A_SUNDAY), (MONTH_END, ON_A_MONTHS_LAST_DAY)])
def test_exports_up_to_now_never_make_the_current_period_complete(tmp_path, now, expected):
    folder = live_exports(tmp_path / "data", now - TWO_HOURS)
    with ServerProcess(folder, cache_dir=tmp_path / "cache", env={"METRICS_KIT_NOW": utc(now)}) as server:
        for (granularity, date), complete in expected:
            body = server.get(params=query(granularity, date)).json()
            assert body["complete"] is complete, (granularity, date, body)
            explained = server.get("/explain", params=query(granularity, date)).json()
            assert explained["complete"] is complete, (granularity, date)
        projects = server.get("/projects").json()
    assert projects["last_event"] == (now - TWO_HOURS).strftime("%Y-%m-%dT%H:%M:%S.000000Z")


def test_a_period_turning_complete_changes_the_etag_not_the_data_version(tmp_path):
    """Two starts of the service on the same files, before and after midnight of the last day."""
    folder = live_exports(tmp_path / "data", MONTH_END - TWO_HOURS)
    today = query("1_day", MONTH_END.date())
    seen = []
    for now in (MONTH_END, MONTH_END.replace(hour=0) + dt.timedelta(days=1)):
        with ServerProcess(folder, cache_dir=tmp_path / "cache", env={"METRICS_KIT_NOW": utc(now)}) as server:
            answer = server.get(params=today)
            earlier = [tag for tag, _ in seen]
            if earlier:  # the tag of the incomplete answer no longer matches: the full answer
                assert server.get(params=today, headers={"If-None-Match": earlier[0]}).status_code == 200
            again = server.get(params=today, headers={"If-None-Match": answer.headers["ETag"]})
            assert again.status_code == 304 and again.headers["ETag"] == answer.headers["ETag"]
            seen.append((answer.headers["ETag"], answer.headers["X-Data-Version"]))
            assert answer.json()["complete"] is (len(seen) == 2)
    (before, version_before), (after, version_after) = seen
    assert before != after and version_before == version_after
    assert before == f'"{version_before}-incomplete"' and after == f'"{version_after}"'


async def _ask(app, path: str, params: dict[str, str], headers: dict[str, str] | None = None):
    """One GET to the ASGI application: (status, headers, body)."""
    sent: list[dict] = []
    scope = {
        "type": "http",
        "method": "GET",
        "path": path,
        "query_string": "&".join(f"{k}={v}" for k, v in params.items()).encode(),
        "headers": [(b"x-api-key", KEY.encode())]
        + [(name.lower().encode(), value.encode()) for name, value in (headers or {}).items()],
    }

    async def receive():
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message):
        sent.append(message)

    await app(scope, receive, send)
    start, body = sent[0], b"".join(m.get("body", b"") for m in sent[1:])
    return start["status"], {k.decode(): v.decode() for k, v in start["headers"]}, body


class Clock:
    def __init__(self, when: dt.datetime):
        self.now = when.timestamp()

    def __call__(self) -> float:
        return self.now


def test_a_period_turns_complete_as_time_passes_without_a_rebuild(tmp_path):
    folder = live_exports(tmp_path / "data", MONTH_END - TWO_HOURS)
    clock = Clock(MONTH_END)
    app = App(open_service(folder, log=lambda line: None, clock=clock), [KEY])
    june = query("1_month", MONTH_END.date())

    status, headers, body = asyncio.run(_ask(app, "/metrics", june))
    assert status == 200 and json.loads(body)["complete"] is False
    clock.now = dt.datetime(2025, 6, 30, 23, 59, 59, 999_999, tzinfo=dt.UTC).timestamp()
    assert asyncio.run(_ask(app, "/metrics", june, {"If-None-Match": headers["etag"]}))[0] == 304
    clock.now = dt.datetime(2025, 7, 1, tzinfo=dt.UTC).timestamp()
    status, later, body = asyncio.run(_ask(app, "/metrics", june, {"If-None-Match": headers["etag"]}))
    assert status == 200 and json.loads(body)["complete"] is True
    assert later["etag"] != headers["etag"] and later["x-data-version"] == headers["x-data-version"]
    status, _, body = asyncio.run(_ask(app, "/explain", june))
    assert status == 200 and json.loads(body)["complete"] is True


def test_a_lag_holds_the_last_day_back(tmp_path):
    folder = live_exports(tmp_path / "data", MONTH_END - TWO_HOURS)
    just_after = {"METRICS_KIT_NOW": "2025-07-01T01:00:00Z"}
    for args, complete in ((("--lag", "2h"), False), ((), True)):
        with ServerProcess(folder, *args, cache_dir=tmp_path / "cache", env=just_after) as server:
            assert server.get(params=query("1_day", MONTH_END.date())).json()["complete"] is complete


def test_a_lag_with_a_declared_watermark_is_said_not_to_apply(tmp_path):
    """A lag holds back only a derived watermark: given while the data declares one (watermark.json,
    or the one recorded in --aggregates), serve says in one line that it does not apply."""
    folder = live_exports(tmp_path / "data", MONTH_END - TWO_HOURS)
    (folder / "watermark.json").write_text(json.dumps({"watermark": "2025-06-29T00:00:00Z"}))
    said = "Note: the lag of 2d does not apply: a watermark is declared"
    with ServerProcess(folder, "--lag", "2d", cache_dir=tmp_path / "cache") as server:
        notes = [line for line in server.output if line.startswith("Note: the lag")]
    where = "(watermark.json of the data folder: 2025-06-29T00:00"
    assert len(notes) == 1 and notes[0].startswith(f"{said} {where}"), notes
    built = build.build_on_engine(folder, default_catalogue(), log=lambda line: None)
    built.save(tmp_path / "agg.parquet")
    env = {"METRICS_KIT_LAG": "2d"}
    with ServerProcess(None, "--aggregates", str(tmp_path / "agg.parquet"), cache_dir=tmp_path / "c", env=env) as s:
        notes = [line.strip() for line in s.output if line.startswith("Note: the lag")]
    assert len(notes) == 1 and notes[0].startswith("Note: the lag of 2d (METRICS_KIT_LAG) does not apply"), notes
    # From the environment, with --watermark (given with --lag, serve refuses the two).
    with ServerProcess(folder, "--watermark", "2025-06-28T00:00:00Z", cache_dir=tmp_path / "cache", env=env) as s:
        notes = [line.strip() for line in s.output if line.startswith("Note: the lag")]
    assert notes == [
        "Note: the lag of 2d (METRICS_KIT_LAG) does not apply: a watermark is declared (the one given: "
        "2025-06-28T00:00:00.000000Z), which says itself what is in; the lag holds back only a watermark derived "
        "from the last event (docs/service.md, Complete periods)"
    ], notes
    # Without a declaration the lag applies, and nothing is said.
    (folder / "watermark.json").unlink()
    with ServerProcess(folder, "--lag", "2d", cache_dir=tmp_path / "cache") as server:
        assert not [line for line in server.output if "does not apply" in line], server.output


def test_a_declared_watermark_wins(tmp_path):
    """Declared in the data folder: every event before 06-29 is in (the rest may still come)."""
    folder = live_exports(tmp_path / "data", MONTH_END - TWO_HOURS)
    (folder / "watermark.json").write_text(json.dumps({"watermark": "2025-06-29T00:00:00Z"}))
    later = {"METRICS_KIT_NOW": "2025-07-05T00:00:00Z"}  # the derived watermark would make June complete
    with ServerProcess(folder, cache_dir=tmp_path / "cache", env=later) as server:
        flags = [server.get(params=query("1_day", d)).json()["complete"] for d in ("2025-06-28", "2025-06-29")]
        assert flags == [True, False]
        assert server.get(params=query("1_month", "2025-06-01")).json()["complete"] is False
    # --watermark wins over the folder's declaration.
    with ServerProcess(folder, "--watermark", "2025-07-01T00:00:00Z", cache_dir=tmp_path / "cache", env=later) as s:
        assert s.get(params=query("1_month", "2025-06-01")).json()["complete"] is True


def test_prebuilt_aggregates_give_the_same_flags(tmp_path):
    """build --out records the last event and the folder's declaration; serve --aggregates answers alike."""
    folder = live_exports(tmp_path / "data", SUNDAY - TWO_HOURS)
    built = build.build_on_engine(folder, default_catalogue(), log=lambda line: None)
    built.save(tmp_path / "agg.parquet")
    assert build.Aggregates.read(tmp_path / "agg.parquet").meta["last_event"] == "2025-06-29T12:00:00.000000Z"
    env = {"METRICS_KIT_NOW": utc(SUNDAY)}
    with ServerProcess(None, "--aggregates", str(tmp_path / "agg.parquet"), cache_dir=tmp_path / "c", env=env) as s:
        for (granularity, date), complete in ON_A_SUNDAY:
            assert s.get(params=query(granularity, date)).json()["complete"] is complete, (granularity, date)


def _embedded_flags(env: dict[str, str]) -> list[bool]:
    """The embedded default's flags for the demo data's last day and the day before, in a child Python."""
    script = """
import json, warnings
import metrics_kit as mk
warnings.simplefilter("ignore")
with mk.Client(cache=False, progress=False) as client:
    assert client.embedded
    frame = client.frame("swap_transaction_count", "demoswap", "2025-12-30", "2025-12-31", "1_day", shape="long")
print(json.dumps(frame["complete"].tolist()))
"""
    environment = {k: v for k, v in os.environ.items() if not k.startswith("METRICS_KIT_")}
    environment |= {"METRICS_KIT_CACHE_DIR": os.environ["METRICS_KIT_CACHE_DIR"], **env}
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=environment, timeout=300)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_the_embedded_default_follows_the_rule_and_its_lag():
    # The demo's last event is on 2025-12-31: that day is complete only once it has ended.
    assert _embedded_flags({"METRICS_KIT_NOW": "2025-12-31T18:00:00Z"}) == [True, False]
    assert _embedded_flags({"METRICS_KIT_NOW": "2026-01-01T01:00:00Z"}) == [True, True]
    assert _embedded_flags({"METRICS_KIT_NOW": "2026-01-01T01:00:00Z", "METRICS_KIT_LAG": "2h"}) == [True, False]


_SERIES = """
import warnings
import metrics_kit as mk
warnings.simplefilter("ignore")
try:
    mk.series("swap_transaction_count", "demoswap", "2025-06-01", "2025-06-03", "1_day")
except Exception as error:
    print(f"{type(error).__name__}|{error}")
"""


@pytest.mark.parametrize(("variable", "value"), [("METRICS_KIT_LAG", "2hours"), ("METRICS_KIT_NOW", "2025-07-01")])
def test_a_bad_setting_of_the_embedded_default_is_refused_once_in_serves_words(tmp_path, variable, value):
    """A bad METRICS_KIT_LAG or METRICS_KIT_NOW on the embedded default: one ConfigurationError naming
    the variable and what it allows, the line serve says, before any request; not a TransportError
    per point, and not values answered from the cache as if nothing were wrong."""
    environment = {k: v for k, v in os.environ.items() if not k.startswith("METRICS_KIT_")}
    environment["METRICS_KIT_CACHE_DIR"] = os.environ["METRICS_KIT_CACHE_DIR"]

    def child(*command: str, **env: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(command, capture_output=True, text=True, env=environment | env, timeout=300)

    cached = child(sys.executable, "-c", _SERIES)  # the points cached under a good setting
    assert (cached.returncode, cached.stdout) == (0, ""), cached.stderr
    refused = child(sys.executable, "-c", _SERIES, **{variable: value})
    serve = (sys.executable, "-m", "metrics_kit", "serve", "--data", str(DATA))
    served = child(*serve, **{variable: value, "METRICS_KIT_API_KEYS": KEY})
    assert served.returncode == 2 and served.stderr.startswith("metrics-kit: error: "), served.stderr
    said = served.stderr.removeprefix("metrics-kit: error: ").strip()
    assert said.startswith(f"{variable} must be ") and repr(value) in said, said
    assert refused.stdout == f"ConfigurationError|{said}\n", refused.stdout
