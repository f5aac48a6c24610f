"""An interrupt (Ctrl-C) that lands anywhere in the client's wait for an answer is a KeyboardInterrupt,
and leaves the answer's future as it was: what lets a pull keep every answer received (fetching.run).

Python runs a signal's handler between two lines of Python code; the wait is run line by line under
a tracer that raises KeyboardInterrupt at one line after another, as a signal landing there would."""

from __future__ import annotations

import concurrent.futures
import sys
from types import FrameType
from typing import Any

from metrics_kit.client.transports._base import result_of

MOST_LINES = 500  # a bound on the lines one wait runs (it runs far fewer)


class InterruptAt:
    """A tracer that raises KeyboardInterrupt at the ``line``-th line run under it."""

    def __init__(self, line: int):
        self.line, self.seen, self.fired = line, 0, False

    def __call__(self, frame: FrameType, event: str, arg: Any) -> Any:
        if event == "line":
            self.seen += 1
            if self.seen == self.line:
                self.fired = True
                raise KeyboardInterrupt
        return self


def test_an_interrupt_at_any_line_of_the_wait_for_an_answer_is_a_keyboard_interrupt():
    future: concurrent.futures.Future[str] = concurrent.futures.Future()
    future.set_running_or_notify_cancel()  # a request under way: its answer has not come
    landed = []
    for line in range(1, MOST_LINES):
        tracer = InterruptAt(line)
        sys.settrace(tracer)
        try:
            result_of(future, within=0.0)  # one round of the wait, that does not block
        except BaseException as error:  # noqa: BLE001 - which exception it is, is the point
            outcome: BaseException = error
        finally:
            sys.settrace(None)
        if not tracer.fired:
            assert isinstance(outcome, TimeoutError)  # the wait ran to its end: every line was tried
            break
        landed.append(line)
        # Was a RuntimeError ("cannot release un-acquired lock") where the interrupt landed between
        # the lines of threading.Condition.wait that release the future's lock and those that take it back.
        assert isinstance(outcome, KeyboardInterrupt), f"an interrupt at line {line} of the wait: {outcome!r}"
    else:
        raise AssertionError(f"the wait ran more than {MOST_LINES} lines")
    assert landed  # the interrupt landed in the wait at least once
    future.set_result("the answer")  # the future's lock was left as it was: its answer is still taken
    assert result_of(future) == "the answer"
