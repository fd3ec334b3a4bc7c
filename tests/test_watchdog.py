"""Watch: the watchdog's count (no I/O); the real frontends and a misbehaving server drive the contexts in
contract_tests/test_watchdog.py."""

from __future__ import annotations

import pytest

from vllm_devclient import APIConnectionError, InvalidParameterError, ServerUnhealthyError
from vllm_devclient.watchdog import Watch


def down(n: int) -> APIConnectionError:
    return APIConnectionError(f"refused {n}", method="GET", url="http://b/health")


def test_failures_in_a_row_trip_it_once_naming_the_target_and_its_last_error() -> None:
    tripped: list[ServerUnhealthyError] = []
    watch = Watch(["http://a", "http://b"], interval=1, failures=3, on_trip=tripped.append)
    assert not watch.failed("http://b", down(1)) and not watch.failed("http://b", down(2))
    watch.passed("http://a")
    assert watch.failed("http://b", down(3))
    assert watch.failed("http://b", down(4))  # still tripped; the error and the callback stay the first
    assert watch.error is not None and tripped == [watch.error]
    assert (watch.error.url, watch.error.failures, str(watch.error.last)) == ("http://b", 3, "refused 3")
    with pytest.raises(ServerUnhealthyError, match="http://b failed 3 health checks in a row"):
        watch.check()


def test_a_pass_starts_the_count_again_and_targets_count_apart() -> None:
    watch = Watch(["http://a", "http://b"], interval=1, failures=2)
    for _ in range(5):
        watch.failed("http://a", down(0))
        watch.passed("http://a")
        watch.failed("http://b", down(0))
        watch.passed("http://b")
    assert not watch.tripped and watch.checks == 20
    watch.check()  # nothing to raise


@pytest.mark.parametrize(
    "kwargs", [{"interval": 0}, {"interval": -1}, {"failures": 0}, {"failures": 1.5}, {"request_timeout": 0}]
)
def test_bad_settings_are_refused(kwargs: dict[str, object]) -> None:
    settings: dict[str, object] = {"interval": 1, "failures": 2, **kwargs}
    with pytest.raises(InvalidParameterError):
        Watch(["http://a"], **settings)  # type: ignore[arg-type]


def test_the_check_timeout_defaults_to_the_interval() -> None:
    assert Watch(["http://a"], interval=4, failures=1).request_timeout == 4
    assert Watch(["http://a"], interval=4, failures=1, request_timeout=1).request_timeout == 1
