"""Pacing by the budget a service states in its answers' headers, and learnt where it states none:
on an injected clock, no sleeping, no wall-clock thresholds (but for the test that a wait on the
real clock ends when its batch is stopped)."""

from __future__ import annotations

import threading
import time

import pytest
from client_fakes import FakeClock

from metrics_kit.client.transports import Pacer
from metrics_kit.client.transports._base import STATED_SHARE, BudgetError, OverBudget, Stopped
from metrics_kit.client.transports._budget import stated
from metrics_kit.errors import ClientClosedError, RateLimitError, TransportError

WALL = 1_800_000_000.0  # the wall clock of these tests (an epoch time)


def headers(**fields: str):
    named = {name.replace("_", "-").lower(): value for name, value in fields.items()}
    return lambda name: named.get(name.lower())


def pacer(rate: float | None = None, workers: int = 16) -> tuple[Pacer, FakeClock]:
    clock = FakeClock(100.0)
    return Pacer(rate, clock, clock.sleep, workers=workers, wall=lambda: WALL), clock


@pytest.mark.parametrize(
    "fields, rate, remaining, reset",
    [
        # the IETF draft's fields (up to -06): reset in seconds, the policy's quota and window
        ({"RateLimit_Limit": "20", "RateLimit_Remaining": "7", "RateLimit_Reset": "1", "RateLimit_Policy": "20;w=1"},
         20.0, 7, 1.0),
        # its later structured fields
        ({"RateLimit": '"default";r=3;t=5', "RateLimit_Policy": '"default";q=100;w=60'}, 100 / 60, 3, 5.0),
        # the older X- fields, reset in seconds (no quota: what is left over the time to the reset), and
        # as an epoch time (a value larger than a year)
        ({"X_RateLimit_Limit": "60", "X_RateLimit_Remaining": "10", "X_RateLimit_Reset": "30"}, 10 / 30, 10, 30.0),
        ({"X_RateLimit_Limit": "5000", "X_RateLimit_Remaining": "0", "X_RateLimit_Reset": str(int(WALL) + 90)},
         None, 0, 90.0),
    ],
)  # fmt: skip
def test_each_family_of_rate_limit_headers_is_read(fields, rate, remaining, reset):
    budget = stated(headers(**fields), WALL)
    assert budget is not None
    assert (budget.rate, budget.remaining, budget.reset) == (pytest.approx(rate) if rate else None, remaining, reset)


def test_an_epoch_reset_is_counted_from_the_answers_date_when_it_has_one():
    budget = stated(headers(X_RateLimit_Remaining="0", X_RateLimit_Reset=str(int(WALL) + 90)), WALL, date=WALL + 60)
    assert budget is not None and budget.reset == 30.0


@pytest.mark.parametrize(
    "fields",
    [
        # an epoch time in the IETF field, whose reset the draft says is seconds (read as 57 years)
        {"RateLimit_Remaining": "0", "RateLimit_Reset": str(int(WALL) + 90)},
        {"RateLimit": f'"default";r=0;t={int(WALL) + 90}'},
        # an epoch time in milliseconds (read as seconds: 57,000 years)
        {"X_RateLimit_Remaining": "0", "X_RateLimit_Reset": str((int(WALL) + 90) * 1000)},
        {"RateLimit_Remaining": "0", "RateLimit_Reset": str((int(WALL) + 90) * 1000)},
    ],
)
def test_a_reset_that_can_only_be_an_epoch_time_is_read_as_one_in_any_field(fields):
    budget = stated(headers(**fields), WALL)
    assert budget is not None and (budget.remaining, budget.reset) == (0, 90.0)
    assert stated(headers(**fields), WALL, date=WALL + 60).reset == 30.0  # counted from the answer's Date
    assert stated(headers(**fields), WALL + 100).reset == 0.0  # passed: no wait


@pytest.mark.parametrize(
    "fields, rate, remaining, reset",
    [
        # the draft's own example lists the burst policy first: the longer one is the tighter
        ({"RateLimit_Policy": '"burst";q=5;w=1, "long";q=10;w=5'}, 2.0, None, None),
        ({"RateLimit_Policy": "10;w=1, 100;w=60"}, 100 / 60, None, None),
        ({"RateLimit_Policy": "100;w=60, 10;w=1"}, 100 / 60, None, None),
        # none left on the second policy: held until its reset, whatever the first has left
        (
            {"RateLimit": '"burst";r=3;t=1, "long";r=0;t=4', "RateLimit_Policy": '"burst";q=5;w=1, "long";q=10;w=5'},
            2.0, 0, 4.0,
        ),
        # two with none left: the later reset
        ({"RateLimit": '"a";r=0;t=1, "b";r=0;t=7, "c";r=9;t=2'}, 4.5, 0, 7.0),
        # the fewest left is the one that binds
        ({"RateLimit": '"a";r=8;t=1, "b";r=2;t=40'}, 0.05, 2, 40.0),
        # a policy over a day counts what is left, it does not pace: the burst policy's pace
        (
            {
                "RateLimit": '"burst";r=90;t=1, "day";r=99000;t=80000',
                "RateLimit_Policy": '"burst";q=100;w=1, "day";q=100000;w=86400',
            },
            100.0, 90, 1.0,
        ),
        # an hour's budget (GitHub's fields, an epoch reset): no pace, what is left and when it resets
        ({"X_RateLimit_Limit": "5000", "X_RateLimit_Remaining": "4990", "X_RateLimit_Reset": str(int(WALL) + 3600)},
         None, 4990, 3600.0),
    ],
)  # fmt: skip
def test_every_policy_is_read_and_the_tightest_kept(fields, rate, remaining, reset):
    budget = stated(headers(**fields), WALL)
    assert budget is not None
    assert (budget.rate, budget.remaining, budget.reset) == (
        rate if rate is None else pytest.approx(rate),
        remaining,
        reset,
    )


def test_no_headers_or_unreadable_ones_state_nothing():
    assert stated(headers(), WALL) is None
    assert stated(headers(RateLimit_Remaining="many", RateLimit_Reset="-1"), WALL) is None


def test_requests_are_paced_at_the_lower_of_rate_limit_and_the_stated_budget():
    paced, _ = pacer()
    paced.observe(200, headers(RateLimit_Remaining="19", RateLimit_Reset="1", RateLimit_Policy="20;w=1"), 100.0)
    assert paced.interval == pytest.approx(1 / (20 * STATED_SHARE))
    slow, _ = pacer(rate=5.0)
    slow.observe(200, headers(RateLimit_Remaining="19", RateLimit_Reset="1", RateLimit_Policy="20;w=1"), 100.0)
    assert slow.interval == pytest.approx(1 / 5)
    # Without a window, what is left over the time to the reset
    spread, _ = pacer()
    spread.observe(200, headers(X_RateLimit_Remaining="100", X_RateLimit_Reset="50"), 100.0)
    assert spread.interval == pytest.approx(1 / (2 * STATED_SHARE))


def test_none_left_holds_every_first_attempt_until_the_reset():
    paced, clock = pacer()
    paced.observe(200, headers(RateLimit_Remaining="0", RateLimit_Reset="3"), 100.0)
    paced.wait()
    assert clock() == 103.0 and clock.slept == [3.0]
    # None left on the second of two policies holds too; an epoch reset is the time until it
    paced.observe(200, headers(RateLimit='"burst";r=4;t=1, "long";r=0;t=5'), 103.0)
    paced.wait()
    assert clock() == 108.0
    paced.observe(200, headers(RateLimit_Remaining="0", RateLimit_Reset=str(int(WALL) + 2)), 108.0)
    paced.wait()
    assert clock() == 110.0


def test_a_reset_after_the_pulls_deadline_fails_at_once():
    paced, clock = pacer()
    paced.observe(429, headers(RateLimit_Remaining="0", RateLimit_Reset="60"), 100.0)
    with pytest.raises(OverBudget) as raised:
        paced.wait(until=130.0)
    assert raised.value.wait == 60.0 and clock.slept == []  # nothing waited for
    paced.wait(until=200.0)  # a deadline after the reset: it waits
    assert clock() == 160.0
    # What the transport raises for it: a RateLimitError, and a TransportError (no answer came)
    assert issubclass(BudgetError, RateLimitError) and issubclass(BudgetError, TransportError)


def test_without_headers_a_429_halves_the_requests_in_flight_and_paces_at_what_got_through():
    paced, clock = pacer(workers=16)
    for _ in range(20):  # twenty clean answers within the last second, then a 429
        clock.advance(0.01)
        paced.observe(200, headers(), clock())
    sent = clock()
    paced.observe(429, headers(), sent)
    assert paced.in_flight_limit == 8
    assert paced.interval == pytest.approx(1 / (0.9 * 20))
    paced.observe(429, headers(), sent - 0.5)  # a 429 of a request sent before the cut: not cut again
    assert paced.in_flight_limit == 8
    for _ in range(9):  # a window of clean answers: one more in flight
        clock.advance(0.1)
        paced.observe(200, headers(), clock())
    assert paced.in_flight_limit == 9
    assert paced.interval < 1 / (0.9 * 20)  # and the pace grows
    clock.advance(1)
    paced.strained(clock())  # a timeout cuts as a 429 does
    assert paced.in_flight_limit == 4


def test_a_stated_budget_is_kept_rather_than_learnt_from():
    paced, _ = pacer(workers=16)
    paced.observe(429, headers(RateLimit_Remaining="0", RateLimit_Reset="1", RateLimit_Policy="20;w=1"), 100.0)
    assert paced.in_flight_limit == 16
    assert paced.interval == pytest.approx(1 / (20 * STATED_SHARE))


def test_without_a_deadline_a_hold_longer_than_longest_fails_at_once():
    # A stated "none left for 600 s" (or an epoch time misread as seconds) was waited in full.
    paced, clock = pacer()
    paced.longest = 120.0
    paced.observe(200, headers(RateLimit_Remaining="0", RateLimit_Reset="600"), 100.0)
    with pytest.raises(OverBudget) as raised:
        paced.wait()
    assert (raised.value.wait, raised.value.longest, clock.slept) == (600.0, 120.0, [])
    paced.wait(until=800.0)  # a deadline after the reset: it is waited for
    assert clock() == 700.0
    paced.observe(200, headers(RateLimit_Remaining="0", RateLimit_Reset="100"), 700.0)
    paced.wait()  # within longest: waited
    assert clock() == 800.0


class Watched(threading.Event):
    """A batch's stop that says when a request starts waiting on it."""

    def __init__(self) -> None:
        super().__init__()
        self.waited = threading.Event()

    def wait(self, timeout: float | None = None) -> bool:
        self.waited.set()
        return super().wait(timeout)


def _waits(paced: Pacer, stop: threading.Event, ended: list[BaseException]) -> threading.Thread:
    def run() -> None:
        try:
            paced.wait(stop=stop)
        except BaseException as error:  # what ended the wait
            ended.append(error)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


def test_a_request_waiting_out_a_stated_hold_stops_at_once_when_its_batch_is_stopped():
    # On the real clock: the wait is on the batch's stop, not one long sleep that an interrupt (which
    # stops the batch) or close() could not end, leaving the process and close() hanging for the hold.
    paced = Pacer(workers=16)
    paced.observe(200, headers(RateLimit_Remaining="0", RateLimit_Reset="600"), time.monotonic())
    stop, ended = Watched(), []
    waiting = _waits(paced, stop, ended)
    assert stop.waited.wait(10), "the request did not wait on its batch's stop"
    stop.set()
    waiting.join(10)
    assert not waiting.is_alive() and len(ended) == 1 and isinstance(ended[0], Stopped)
    # Closed (the transport's close()), every batch's waits end, and no later request waits
    batch, ended = paced.batch(), []
    waiting = _waits(paced, batch, ended)
    paced.close()
    waiting.join(10)
    assert not waiting.is_alive() and isinstance(ended[0], (Stopped, ClientClosedError))
    with pytest.raises(ClientClosedError):
        paced.wait(stop=paced.batch())
