"""What a dashboard's page says of a failed cell (metrics_kit.tools.dashboard_kernel.said): a line,
the error's class and message, never the key. On a real dashboard: tests/notebooks/test_dashboard.py
and tests/browser/test_dashboard_in_chromium.py."""

from __future__ import annotations

from metrics_kit.errors import AuthenticationError, FetchError, ValidationError
from metrics_kit.tools.dashboard_kernel import said

KEY = "the-key-0123456789"
URL = "http://127.0.0.1:8000/metrics?metric_name=swap_active_users&project=demoswap&granularity=1_day&date="


def refused(day: str) -> AuthenticationError:
    return AuthenticationError(401, "the API key in x-api-key is not valid", code="invalid_api_key", url=URL + day)


def test_a_library_error_is_its_class_and_message():
    assert said(refused("2025-01-02"), KEY) == (
        f"AuthenticationError: 401 invalid_api_key: the API key in x-api-key is not valid for {URL}2025-01-02"
    )
    assert said(ValidationError("granularity must be one of 1_day, 1_week, 1_month, not '1_year'"), KEY) == (
        "ValidationError: granularity must be one of 1_day, 1_week, 1_month, not '1_year'"
    )


def test_a_pull_whose_points_failed_alike_says_it_once():
    points = {("swap_active_users", "demoswap", "1_day", f"2025-01-0{d}"): refused(f"2025-01-0{d}") for d in (1, 2, 3)}
    assert said(FetchError(points, 10), KEY) == (
        "FetchError: 3 of 10 points failed, each with: 401 invalid_api_key: the API key in x-api-key is not valid"
    )


def test_any_other_error_is_its_first_line_and_never_the_key():
    assert said(ValueError(f"cannot read {KEY}\nsecond line"), KEY) == "ValueError: cannot read ***"
    assert said(RuntimeError(), KEY) == "RuntimeError"
    assert said(ZeroDivisionError("division by zero"), None) == "ZeroDivisionError: division by zero"
