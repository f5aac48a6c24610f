"""What every transport shares: the Reply it returns, the Transport protocol, the Answers of a batch,
the clock, the pacer."""

from __future__ import annotations

import concurrent.futures
import email.utils
import math
import queue
import secrets
import threading
import time
import weakref
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar, runtime_checkable

from metrics_kit.client.transports._budget import stated
from metrics_kit.errors import ClientClosedError, ConfigurationError, RateLimitError, TransportError

Clock = Callable[[], float]  # seconds, monotonic for pacing and retries, epoch for expiry
Sleep = Callable[[float], None]


def _as_is(text: str) -> str:
    return text


@dataclass(frozen=True)
class Reply:
    """One HTTP answer, from whichever transport. ``url`` is the full URL with its query string; it
    never holds the key. ``headers``: names in any case.

    ``mask`` hides the key the request was sent with in a text of the answer (``Secret.mask``): a
    service's message may repeat it, so every text of the answer that goes into a message goes through
    it first (metrics_kit.client.fetching). A transport that holds a key sets it. The body and the
    headers are left out of the repr (a traceback's locals): they are the service's text, unmasked."""

    status: int
    headers: Mapping[str, str] = field(repr=False)
    body: bytes = field(repr=False)
    url: str
    mask: Callable[[str], str] = field(default=_as_is, repr=False, compare=False)

    def header(self, name: str) -> str | None:
        """A header's value, whatever the case of its name."""
        name = name.lower()
        return next((value for key, value in self.headers.items() if key.lower() == name), None)


@runtime_checkable
class Transport(Protocol):
    """Carries GET requests to a metrics service and brings back its answers.

    ``get`` returns a :class:`Reply` for every HTTP status (errors included) and raises
    :class:`~metrics_kit.errors.TransportError` when no answer came. ``get_many`` answers several
    requests, in order, each a Reply or the TransportError of that request. ``base_url`` is shown
    in messages (and in results' ``attrs``); ``cache_identity`` files the cache: it names the service
    and the key (a one-way fingerprint of it, never the key), so that two services, two keys or two
    test handlers never share a cached value (``settings.cache_identity`` makes one). A closed
    transport refuses to send (ClientClosedError).

    A transport may also offer ``answers(requests) -> Answers``: the same answers, taken as they
    come, so that a pull that is interrupted keeps every answer that had come (see :class:`Answers`).
    The transports of this package do; for one without it, the client takes ``get_many``'s list
    (:func:`answers_of`), and an interrupt while that list is being made loses its answers. And it
    may say whether its service's data is made up (``synthetic``, see :class:`SaysSynthetic`).
    """

    @property
    def base_url(self) -> str: ...

    @property
    def cache_identity(self) -> str: ...

    def get(self, path: str, params: Mapping[str, str]) -> Reply: ...

    def get_many(self, requests: Sequence[tuple[str, Mapping[str, str]]]) -> list[Reply | TransportError]: ...

    def close(self) -> None: ...


@runtime_checkable
class SaysSynthetic(Protocol):
    """A transport that says whether its service answers from synthetic data (the embedded demo
    does): a result's ``attrs["synthetic"]``. Optional: a transport without it is taken as not
    synthetic (:func:`is_synthetic`). The transports of this package have it."""

    @property
    def synthetic(self) -> bool: ...


def is_synthetic(transport: Transport) -> bool:
    """Whether ``transport``'s service answers from synthetic data (False when it does not say)."""
    return isinstance(transport, SaysSynthetic) and bool(transport.synthetic)


Request = tuple[str, Mapping[str, str]]  # a path and its query parameters
Answer = Reply | TransportError


class Answers:
    """The answers to a batch of requests, taken as they come.

    Iterating gives ``(index, answer)`` pairs: the request's place in the batch and its Reply, or the
    TransportError of that request; every request once, waiting for each. ``received()`` gives,
    without waiting for any other, the answers that have come and were not yet taken (the one being
    taken when it is called may be given again), and stops the batch: a request not yet sent is
    never sent. A pull that is interrupted (KeyboardInterrupt) calls it, so that it keeps every
    answer that had come. Nothing is sent before the iteration starts: an interrupt that comes while
    the requests are sent then finds the Answers in the caller's hands.

    This class holds answers that have all come (what ``get_many`` returns); the transports that
    send several requests at once return a subclass whose answers come while they are taken.
    """

    def __init__(self, answers: Iterable[Answer] = ()) -> None:
        self._answers: list[Any] = list(answers)
        self._taken = 0  # the answers before this one were taken

    def __iter__(self) -> Iterator[tuple[int, Answer]]:
        for index, answer in enumerate(self._answers):
            yield index, answer
            self._taken = index + 1

    def received(self) -> list[tuple[int, Answer]]:
        return list(enumerate(self._answers))[self._taken :]

    def add(self, answer: Answer) -> None:
        """One more answer, after those held: a transport whose answers come while they are taken
        adds each as it comes, from its own thread (a list's append is atomic: no lock is needed)."""
        self._answers.append(answer)


class OneByOne(Answers):
    """Answers made one at a time, each when it is taken, by ``get_one`` (which returns the
    TransportError of a request rather than raising it): every answer that came was taken."""

    def __init__(self, requests: Sequence[Request], get_one: Callable[[Request], Answer]) -> None:
        super().__init__()
        self._requests, self._get_one = requests, get_one
        self._stopped = False

    def __iter__(self) -> Iterator[tuple[int, Answer]]:
        for index, request in enumerate(self._requests):
            if self._stopped:
                return
            yield index, self._get_one(request)

    def received(self) -> list[tuple[int, Answer]]:
        self._stopped = True
        return []


# How often a thread waiting for an answer wakes up. A signal (Ctrl-C) may be taken by another
# thread of the process, and Python runs its handler in the main thread only when that thread runs:
# a wait that never woke would hold a KeyboardInterrupt until the answer came.
WAKE = 0.2


def result_of(future: concurrent.futures.Future[T], within: float | None = None) -> T:
    """``future.result(within)``, waking every WAKE seconds so that an interrupt is never held.

    The wait is on a SimpleQueue the future's completion puts into, never in ``future.result`` with
    a timeout: that waits in ``threading.Condition.wait``, Python code that an interrupt landing
    between two of its lines leaves with the future's lock released under its ``with`` block, which
    then raises a RuntimeError in the KeyboardInterrupt's place (a pull would lose its answers, and a
    script would wait, on leaving, for the requests still out). A SimpleQueue waits in C: an
    interrupt there is a KeyboardInterrupt and nothing else. ``future.result()`` is asked only once
    the future is done, when it does not wait."""
    if not future.done():
        came: queue.SimpleQueue[None] = queue.SimpleQueue()
        future.add_done_callback(lambda _: came.put(None))
        until = None if within is None else time.monotonic() + within
        while not future.done():
            wait = WAKE if until is None else min(WAKE, until - time.monotonic())
            if wait <= 0:
                raise TimeoutError(f"no answer within {within:g} s")
            try:
                came.get(timeout=wait)
            except queue.Empty:
                pass
    return future.result()


def answers_of(transport: Transport, requests: Sequence[Request]) -> Answers:
    """The answers to ``requests``: the transport's own ``answers`` where it has one, else its
    ``get_many`` list (which comes whole)."""
    answers = getattr(transport, "answers", None)
    if answers is not None:
        found: Answers = answers(requests)
        return found
    return Answers(transport.get_many(requests))


def one_at_a_time(get: Callable[[str, Mapping[str, str]], Reply]) -> Callable[[Request], Answer]:
    """``get`` as a function of one request that returns its TransportError rather than raising it."""

    def get_one(request: Request) -> Answer:
        try:
            return get(*request)
        except TransportError as error:
            return error

    return get_one


class BudgetError(RateLimitError, TransportError):
    """A request not sent, as the key's rate limit (the budget the service states, or a Retry-After)
    allows it only after the pull's deadline: a RateLimitError (what a 429 would have been, with
    ``retry_after``) that is also a TransportError (no answer came), raised at once rather than
    after waiting for nothing."""


class Stopped(Exception):
    """A request of a batch that was stopped (``Answers.received``: the pull was interrupted) before it
    was sent: it never is. A worker's future ends with it, so it is no answer."""

    def __init__(self) -> None:
        super().__init__("not sent: the pull was interrupted")


def check_stop(stop: threading.Event | None) -> None:
    """Stopped, once the batch ``stop`` belongs to was stopped."""
    if stop is not None and stop.is_set():
        raise Stopped


class OverBudget(Exception):
    """The next first attempt could start only after the pull's deadline, or (``longest``, without
    one) only after a stated wait longer than the pacer waits (``wait``: seconds from now)."""

    def __init__(self, wait: float, longest: float | None = None):
        super().__init__(f"the next request may start in {wait:.1f} s")
        self.wait = wait
        self.longest = longest


# Below the budget a service states, by this much: its clock and ours, and the requests in flight
# when an answer states it, differ a little, and going over it costs a 429 and a wait.
STATED_SHARE = 0.95
# Without a stated budget: after a 429 or a 503, the pace is this share of the answers of the last
# second (what the key's limit let through), and it grows by LEARN_STEP requests a second for every
# second of clean answers; requests in flight are halved, and grow by one for every window of them.
LEARNED_SHARE = 0.9
LEARN_STEP = 0.2
# Requests in flight before the first answers: then one more for every clean answer (doubling with
# each round of answers) until the first strain, so that a limit is met by a few requests, not all.
START_WINDOW = 2


@dataclass
class Pacer:
    """When first attempts may start: spaced ``1 / rate`` seconds apart across threads (if a rate is
    set), within the budget the service states, and never while the server's Retry-After holds.

    The budget a service states in its answers' headers (``_budget.stated``: the IETF draft's
    ``RateLimit-*`` fields, its structured ``RateLimit``, or ``X-RateLimit-*``) is kept: requests
    are spaced at the lower of ``rate`` and STATED_SHARE of the rate it states, and none starts
    while it says none are left, until its reset (:meth:`observe`). A service that states none is
    learnt from: after a 429 or a 503 (or a timeout, :meth:`strained`) the requests in flight are
    halved and the pace set to what the key's limit let through in the last second, and both grow
    again while answers come clean (additive increase, multiplicative decrease), within ``workers``;
    before the first strain, START_WINDOW requests are in flight, one more for every clean answer.
    Every thread of a transport shares its one Pacer, and so one budget.

    A Retry-After holds in two ways: until a time (:meth:`hold`), and until the retries that were told
    to wait have had their answer (:meth:`retry_pending`, :meth:`retry_answered`). The second makes the
    order certain: a retry waking at the end of its wait could otherwise lose the race to a first
    attempt waking at the same moment, on a loaded machine.

    Each caller reserves the next free slot under the lock, then waits outside it (no spinning); a
    slot after the pull's deadline is refused at once (:class:`OverBudget`), and so is, without a
    deadline, a hold (a stated reset, a Retry-After) longer than ``longest`` seconds from now: a
    service saying "none left for an hour" (or a reset misread by the service) is a RateLimitError
    now, not a pull that hangs for an hour.

    Every wait (a pace, a hold, a retry's Retry-After or backoff: :meth:`pause`) of a request of a
    batch ends at once when its batch is stopped (an interrupt: ``Answers.received``) or the pacer
    closed (the transport's ``close``): the request is never sent. ``clock`` is ``time.monotonic``
    and ``sleep`` None (the real clock, whose waits a stop wakes) unless a test gives a clock and a
    sleep of its own, which is then called for every wait, whole. ``wall`` is the wall clock (an
    epoch reset is counted on it).
    """

    rate: float | None = None
    clock: Clock = time.monotonic
    sleep: Sleep | None = None
    workers: int = 1 << 20  # the most requests in flight (the transport's pool holds them to its size too)
    wall: Clock = time.time
    longest: float | None = None  # the longest hold waited without a deadline (None: any)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    _next: float = 0.0  # the next free slot
    _hold: float = 0.0  # no first attempt before this
    _pending: int = 0  # retries told to wait by a Retry-After and not yet answered
    _stated: float | None = None  # requests a second the service's budget allows, as last stated
    _says: bool = False  # whether the service states its budget (then nothing is learnt)
    _learned: float | None = None  # requests a second learnt from 429s, where none is stated
    _window: float = 0.0  # requests in flight allowed now (set from workers)
    _in_flight: int = 0
    _slow_start: bool = True  # no strain yet: the window doubles with each round of clean answers
    _cut_at: float = -math.inf  # when the pace was last cut: a strain of a request sent before is not counted again
    _clean: deque[float] = field(default_factory=deque, repr=False)  # when the last second's clean answers came

    def __post_init__(self) -> None:
        self._answered = threading.Condition(self._lock)
        self._window = float(min(self.workers, START_WINDOW))
        self._closed = False
        self._batches: weakref.WeakSet[threading.Event] = weakref.WeakSet()  # the stop of every batch

    def batch(self) -> threading.Event:
        """The ``stop`` of a new batch of requests: set to stop it (``Answers.received``), and by
        :meth:`close`, which ends every wait of its requests."""
        stop = threading.Event()
        with self._lock:
            self._batches.add(stop)
            if self._closed:
                stop.set()
        return stop

    def close(self) -> None:
        """No request waiting for its turn is sent, nor any after: every wait ends at once."""
        with self._answered:
            self._closed = True
            batches = list(self._batches)
            self._answered.notify_all()
        for stop in batches:
            stop.set()

    def pause(self, seconds: float, stop: threading.Event | None = None) -> None:
        """Wait ``seconds``, ended at once when ``stop`` is set or the pacer closed (then Stopped, or
        ClientClosedError: the request is not sent). On the real clock a request of a batch waits on
        its ``stop``; a request of the caller's own thread (no ``stop``) sleeps, which Ctrl-C ends."""
        self.check(stop)
        if self.sleep is not None:
            self.sleep(seconds)
        elif stop is not None:
            stop.wait(seconds)
        else:
            time.sleep(seconds)
        self.check(stop)

    def check(self, stop: threading.Event | None) -> None:
        """ClientClosedError once the pacer is closed; Stopped once ``stop`` is set."""
        if self._closed:
            raise ClientClosedError("not sent: the transport was closed while the request waited for its turn")
        check_stop(stop)

    @property
    def interval(self) -> float:
        rates = [r for r in (self.rate, self._learned) if r]
        if self._stated:
            rates.append(self._stated * STATED_SHARE)
        return 1.0 / min(rates) if rates else 0.0

    @property
    def in_flight_limit(self) -> int:
        """Requests in flight allowed now (all ``workers`` unless a strain cut it)."""
        return max(1, int(self._window))

    def wait(self, until: float | None = None, stop: threading.Event | None = None) -> None:
        """Until this first attempt may start; OverBudget at once when that is after ``until`` (or,
        without ``until``, a hold ends more than ``longest`` from now); Stopped once ``stop`` is set
        (the batch was stopped: the request is never sent), ClientClosedError once the pacer is closed."""
        with self._lock:
            now = self.clock()
            slot = max(now, self._next, self._hold)
            self._refuse(now, slot, until)
            if self.interval:
                self._next = slot + self.interval
        while True:  # a hold may come while we wait: wait on until the slot and the hold are past
            self.check(stop)
            with self._lock:
                later, now = max(slot, self._hold), self.clock()
                self._refuse(now, later, until)
            delay = later - now
            if delay > 0:
                self.pause(delay, stop)
                continue
            with self._answered:
                if not self._pending:
                    return
                # Woken when a held retry is answered; then the time hold is read again (that retry
                # may have been told to wait once more). Waking every WAKE to see ``stop``.
                self._answered.wait(WAKE)

    def _refuse(self, now: float, slot: float, until: float | None) -> None:
        """OverBudget when ``slot`` is after the pull's deadline ``until`` (one already passed is the
        caller's to say), or, without a deadline, when the hold ends more than ``longest`` from now."""
        if until is not None:
            if now < until < slot:
                raise OverBudget(slot - now)
        elif self.longest is not None and self._hold - now > self.longest:
            raise OverBudget(self._hold - now, self.longest)

    def enter(self, stop: threading.Event | None = None) -> None:
        """A request goes out: once fewer than :attr:`in_flight_limit` are in flight. Stopped once
        ``stop`` is set while it waits (its batch was stopped: the request is never sent),
        ClientClosedError once the pacer is closed."""
        with self._answered:
            while self._in_flight >= self.in_flight_limit:
                self.check(stop)
                self._answered.wait(WAKE)
            self._in_flight += 1

    def leave(self) -> None:
        with self._answered:
            self._in_flight -= 1
            self._answered.notify_all()

    def observe(self, status: int, header: Callable[[str], str | None], sent: float) -> None:
        """An answer came to an attempt sent at ``sent``: its stated budget kept, or what its status
        says of a budget not stated (a 429 or 503 a strain, anything else clean)."""
        date = header("date")
        budget = stated(header, self.wall(), _epoch(date) if date else None)
        with self._lock:
            now = self.clock()
            if budget is not None:
                self._says, self._learned, self._window = True, None, float(self.workers)
                if budget.rate:  # the tightest policy's (_budget.stated)
                    self._stated = budget.rate
                if budget.remaining == 0 and budget.reset:  # none left: none starts before the reset
                    self._hold = max(self._hold, now + budget.reset)
                    self._next = max(self._next, self._hold)
            if status in (429, 503):
                self._strain(sent, now)
            else:
                self._went_clean(now)

    def strained(self, sent: float) -> None:
        """An attempt sent at ``sent`` timed out: a strain, as a 429 is."""
        with self._lock:
            self._strain(sent, self.clock())

    def _strain(self, sent: float, now: float) -> None:
        if self._says or sent < self._cut_at:
            return  # a stated budget is kept instead; a strain of the burst already cut for is not cut again
        while self._clean and self._clean[0] < now - 1.0:
            self._clean.popleft()
        let_through = len(self._clean)
        if let_through:
            self._learned = max(1.0, LEARNED_SHARE * let_through)
        elif self._learned:
            self._learned = max(0.1, self._learned / 2)
        self._window = max(1.0, self._window / 2)
        self._cut_at, self._slow_start = now, False

    def _went_clean(self, now: float) -> None:
        self._clean.append(now)
        while self._clean[0] < now - 1.0:
            self._clean.popleft()
        if self._says:
            return
        grown = 1.0 if self._slow_start else 1.0 / self._window
        self._window = min(float(self.workers), self._window + grown)
        if self._learned:
            self._learned += LEARN_STEP / self._learned

    def hold(self, until: float) -> None:
        with self._lock:
            self._hold = max(self._hold, until)
            self._next = max(self._next, until)

    def retry_pending(self) -> None:
        """A retry was told to wait: first attempts wait for its answer (:meth:`retry_answered`)."""
        with self._lock:
            self._pending += 1

    def retry_answered(self) -> None:
        """The retry counted by :meth:`retry_pending` was answered, failed or given up."""
        with self._answered:
            self._pending -= 1
            self._answered.notify_all()


def _epoch(date: str) -> float | None:
    """An HTTP-date as seconds since the epoch; None when it cannot be read."""
    try:
        when = email.utils.parsedate_to_datetime(date)
    except (TypeError, ValueError, IndexError):
        return None
    return when.timestamp() if when.tzinfo is not None else None


class Deadline:
    """A bound on a whole pull: no request of it is sent, and no answer waited for, after ``seconds``
    from its first request. It starts on the clock of the transport that first asks (:meth:`at`)."""

    def __init__(self, seconds: float):
        self.seconds = seconds
        self._at: float | None = None
        self._lock = threading.Lock()

    def at(self, clock: Clock) -> float:
        with self._lock:
            if self._at is None:
                self._at = clock() + self.seconds
            return self._at


# The deadline of the pull under way in this context. A context variable, not a transport setting:
# a pull spans many calls of a transport, and the transport cannot tell where one pull ends.
_pull: ContextVar[Deadline | None] = ContextVar("metrics_kit_pull_deadline", default=None)
T = TypeVar("T")


def current_deadline() -> Deadline | None:
    """The deadline of the pull under way, if any (transports that honour one read it here)."""
    return _pull.get()


@contextmanager
def pull_deadline(seconds: float | None) -> Iterator[Deadline | None]:
    """Bound every request made inside the block by one deadline of ``seconds`` (None: no new bound)."""
    if seconds is None:
        yield _pull.get()
        return
    deadline = Deadline(seconds)
    token = _pull.set(deadline)
    try:
        yield deadline
    finally:
        _pull.reset(token)


def within_deadline(seconds: float | None, steps: Iterator[T]) -> Iterator[T]:
    """The items of ``steps`` (a generator making requests), each made under one deadline of
    ``seconds`` for them all. The deadline is in effect only while ``steps`` runs, not between items."""
    if seconds is None:
        yield from steps
        return
    deadline = Deadline(seconds)
    while True:
        token = _pull.set(deadline)
        try:
            item = next(steps)
        except StopIteration:
            return
        finally:
            _pull.reset(token)
        yield item


_names: weakref.WeakKeyDictionary[Any, str] = weakref.WeakKeyDictionary()
_names_lock = threading.Lock()


def object_name(thing: object) -> str:
    """A random name for ``thing`` (an application, a handler), the same while it lives and never
    another's: what tells two in-process services apart in a cache identity."""
    try:
        with _names_lock:
            return _names.setdefault(thing, secrets.token_hex(8))
    except TypeError:  # not weakly referable, or unhashable: a name of its own each time
        return secrets.token_hex(8)


def get_each(transport: Transport, requests: Sequence[tuple[str, Mapping[str, str]]]) -> list[Reply | TransportError]:
    """``get_many`` for a transport that answers one request at a time."""
    return list(map(one_at_a_time(transport.get), requests))


# The transport of a client given no base URL. The client layer never imports the server, so the
# package root registers the embedded reference service here (see metrics_kit/embedded.py).
DefaultFactory = Callable[..., Transport]
_default_factory: DefaultFactory | None = None


def set_default_transport(factory: DefaultFactory | None) -> None:
    """Make ``factory(rate_limit=...)`` the transport of every client given no base URL."""
    global _default_factory
    _default_factory = factory


def default_transport(*, rate_limit: float | None = None) -> Transport:
    if _default_factory is None:
        raise ConfigurationError(
            "no base URL given and no default service registered; give base_url= "
            "(or set METRICS_KIT_BASE_URL), or import metrics_kit for the embedded default",
            argument="base_url",
        )
    return _default_factory(rate_limit=rate_limit)
