"""Pacing and retry backoff on an injected clock: exact waits, no sleeping, no wall-clock thresholds."""

from __future__ import annotations

import threading

import pytest
from client_fakes import FakeClock, ThreadClock

from metrics_kit.client.transports import Pacer
from metrics_kit.client.transports._http import _DeadlineRetry, _GaveUp


def test_first_attempts_are_spaced_one_interval_apart():
    clock = FakeClock(100.0)
    pacer = Pacer(4.0, clock, clock.sleep)  # 4 a second: 0.25 s apart
    starts = []
    for _ in range(4):
        pacer.wait()
        starts.append(clock())
    assert starts == [100.0, 100.25, 100.5, 100.75]
    assert clock.slept == [0.25, 0.25, 0.25]


def test_no_rate_means_no_waiting():
    clock = FakeClock()
    pacer = Pacer(None, clock, clock.sleep)
    for _ in range(10):
        pacer.wait()
    assert clock.slept == []


def test_a_hold_delays_the_next_first_attempt_until_it_is_past():
    clock = FakeClock(10.0)
    pacer = Pacer(None, clock, clock.sleep)
    pacer.hold(13.0)
    pacer.wait()
    assert clock() == 13.0 and clock.slept == [3.0]


def test_a_hold_that_comes_while_waiting_is_honoured():
    clock = FakeClock(0.0)
    pacer = Pacer(1.0, clock, lambda seconds: None)
    pacer.wait()  # the slot at 0; the next is at 1
    holds = iter([5.0])
    waits = []

    def sleep(seconds: float) -> None:
        waits.append(seconds)
        for until in holds:  # another thread's Retry-After arrives during the first sleep
            pacer.hold(until)
        clock.advance(seconds)

    pacer.sleep = sleep
    pacer.wait()
    assert waits == [1.0, 4.0] and clock() == 5.0


def test_threads_share_one_schedule():
    clock = ThreadClock()
    pacer = Pacer(10.0, clock, clock.sleep)
    threads = [threading.Thread(target=lambda: [pacer.wait() for _ in range(3)]) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(5)
    assert not any(thread.is_alive() for thread in threads)
    # 24 first attempts in 24 slots 0.1 s apart, whichever thread got which
    assert sorted(round(t, 6) for t in clock.woke) == [round(0.1 * i, 6) for i in range(1, 24)]
    assert pacer._next == pytest.approx(2.4)


def retry(clock: FakeClock, **options) -> _DeadlineRetry:
    settings = dict(
        total=5,
        other=0,
        redirect=0,
        status_forcelist={429, 503},
        backoff_factor=0.5,
        backoff_jitter=0.5,
        backoff_max=20.0,
        respect_retry_after_header=True,
        raise_on_status=False,
        retry_deadline=10.0,
        started=clock(),
        clock=clock,
        pause=clock.sleep,
        jitter=lambda low, high: high,  # the largest jitter, so the waits are exact
    )
    settings.update(options)
    return _DeadlineRetry(**settings)


class _Answer:
    """The little of a urllib3 response that Retry reads."""

    def __init__(self, status: int, retry_after: str | None = None):
        self.status = status
        self.headers = {"Retry-After": retry_after} if retry_after else {}

    def get_redirect_location(self):
        return None


def test_backoff_doubles_from_the_second_retry_plus_jitter():
    clock = FakeClock(0.0)
    state = retry(clock)
    waits = []
    for _ in range(4):
        state = state.increment("GET", "/metrics", response=_Answer(503))
        before = clock()
        state.sleep()
        waits.append(clock() - before)
    # urllib3 retries the first failure at once; then factor * 2 ** (n - 1) + jitter
    assert waits == [0.0, 1.0 + 0.5, 2.0 + 0.5, 4.0 + 0.5]


def test_retry_after_is_honoured_in_full_and_holds_the_pacer():
    clock = FakeClock(0.0)
    pacer = Pacer(None, clock, clock.sleep)
    state = retry(clock, pacer=pacer).increment("GET", "/metrics", response=_Answer(429, "3"))
    state.sleep(_Answer(429, "3"))
    assert clock.slept == [3.5]  # Retry-After plus jitter
    assert pacer._hold == 3.5


def test_a_retry_whose_wait_would_cross_the_deadline_is_not_made():
    clock = FakeClock(0.0)
    state = retry(clock, retry_deadline=2.0)
    clock.advance(1.0)
    with pytest.raises(_GaveUp) as caught:
        state.increment("GET", "/metrics", response=_Answer(429, "5"))
    assert "retry_deadline=2 s" in caught.value.why
    assert clock.slept == []  # given up without sleeping


def test_a_pending_retry_holds_first_attempts_until_it_is_answered():
    clock = FakeClock(0.0)
    pacer = Pacer(None, clock, clock.sleep)
    pacer.retry_pending()
    started = threading.Event()
    passed = threading.Event()

    def first_attempt() -> None:
        started.set()
        pacer.wait()
        passed.set()

    thread = threading.Thread(target=first_attempt)
    thread.start()
    assert started.wait(5)
    # The time hold is long past (there is none); only the pending retry keeps the attempt back.
    assert not passed.wait(0.2)
    pacer.retry_answered()
    assert passed.wait(5)
    thread.join(5)
    assert pacer._pending == 0
