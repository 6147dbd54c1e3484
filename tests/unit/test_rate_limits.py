"""Provider rate limits as configuration: the spec format, its errors, which limit a model meets."""

from __future__ import annotations

import asyncio

import pytest

from helix_dbos import HelixError, ProviderRateLimit
from helix_dbos.runtime.rate_limits import (
    CONCURRENCY_QUEUE_PREFIX,
    QUEUE_PREFIX,
    RateLimitCapability,
    check_rate_limits,
    limit_for,
    parse_rate_limits,
)
from helix_dbos.runtime.send_gate import RESTAMPS, ClaimTry, LocalSendGate, SendWindow, claim_fresh, wait_before_claim
from helix_dbos.settings import HelixSettings


def test_a_spec_names_requests_per_period_concurrency_and_mode() -> None:
    limit = ProviderRateLimit.parse("openai/:requests=500/60,concurrency=20,name=oai,mode=rolling,poll=0.05")
    assert limit == ProviderRateLimit(
        match="openai/", requests=500, period_s=60, concurrency=20, name="oai", mode="rolling", polling_interval_s=0.05
    )
    assert limit.queue_name == QUEUE_PREFIX + "oai"
    assert [a.kind for a in limit.admissions()] == ["rate", "conc"]
    assert limit.admissions()[1].queue_name == CONCURRENCY_QUEUE_PREFIX + "oai"


def test_a_match_may_hold_a_colon_and_the_name_defaults_to_it() -> None:
    limit = ProviderRateLimit.parse("bedrock/anthropic.claude-3:0:concurrency=2")
    assert limit.match == "bedrock/anthropic.claude-3:0"
    assert limit.limit_name == "bedrock-anthropic.claude-3-0"
    assert ProviderRateLimit.parse("openai/:requests=5").period_s == 1.0


@pytest.mark.parametrize(
    ("spec", "says"),
    [
        ("openai/", "needs requests"),
        ("openai/:requests=0", "requests"),
        ("openai/:requests=five", "requests"),
        ("openai/:burst=3", "unknown option 'burst'"),
        ("openai/:requests=3,concurrency", "key=value"),
        ("openai/:concurrency=2,mode=eager", "mode"),
        (":requests=3", "match"),
    ],
)
def test_a_bad_spec_is_a_validation_error_naming_it(spec: str, says: str) -> None:
    with pytest.raises(HelixError) as raised:
        ProviderRateLimit.parse(spec)
    assert raised.value.code == "validation_error"
    assert spec in raised.value.message and says in raised.value.message


def test_several_limits_and_the_longest_match_wins() -> None:
    limits = parse_rate_limits("openai/:requests=100/60; openai/gpt-4o:concurrency=2 ;")
    assert limit_for(limits, "openai/gpt-4o-mini") is limits[1]
    assert limit_for(limits, "openai/o3") is limits[0]
    assert limit_for(limits, "anthropic/claude") is None


def test_two_limits_with_one_name_or_one_match_are_refused() -> None:
    with pytest.raises(HelixError, match="share the name 'x'"):
        check_rate_limits(
            [ProviderRateLimit(match="a/", requests=1, name="x"), ProviderRateLimit(match="b/", requests=1, name="x")]
        )
    with pytest.raises(HelixError, match="share the match 'a/'"):
        RateLimitCapability(
            [ProviderRateLimit(match="a/", requests=1), ProviderRateLimit(match="a/", concurrency=1, name="b")]
        )


def test_helix_rate_limits_is_read_and_checked_once_at_the_edge() -> None:
    settings = HelixSettings.from_env({"HELIX_RATE_LIMITS": "openai/:requests=10/1"})
    assert settings.rate_limits == "openai/:requests=10/1"
    with pytest.raises(HelixError) as raised:
        HelixSettings.from_env({"HELIX_RATE_LIMITS": "openai/:requests=-1"})
    assert raised.value.code == "validation_error" and "HELIX_RATE_LIMITS" in raised.value.message


def test_each_run_gets_its_own_held_slots() -> None:
    capability = RateLimitCapability([ProviderRateLimit(match="a/", requests=1)])
    one, two = capability.for_run(), capability.for_run()
    assert isinstance(one, RateLimitCapability) and isinstance(two, RateLimitCapability)
    one._held.append("x")
    assert two._held == [] and one.limits == two.limits


def test_exact_mode_and_its_margin_are_spelled_in_a_spec() -> None:
    limit = ProviderRateLimit.parse("openai/:requests=10/1,mode=exact,margin=0.1")
    assert limit.mode == "exact" and limit.send_margin_s == 0.1 and limit.gated_at_send
    assert limit.send_window_s == pytest.approx(1.1)
    (admission,) = limit.admissions()
    assert admission.rolling and admission.slots == 20 and admission.after_release_s == pytest.approx(2.2)  # 2 windows
    assert limit.admissions(held=True)[0].held  # a run recorded before the exact patch keeps its held slot


def test_a_claim_waits_for_the_oldest_claim_of_a_full_window_to_leave_it() -> None:
    window = SendWindow("x", 2, 1.0)
    assert wait_before_claim([], 10.0, window) == 0.0
    assert wait_before_claim([8.5, 9.5], 10.0, window) == 0.0  # 8.5 is out of (9, 10]
    assert wait_before_claim([9.2, 9.5], 10.0, window) == pytest.approx(0.2)
    assert wait_before_claim([9.2, 9.5, 9.9], 10.0, window) == pytest.approx(0.5)


def test_a_claim_that_took_longer_than_its_freshness_is_stamped_again() -> None:
    window = SendWindow("x", 5, 1.0, fresh_s=0.02)
    tries: list[float | None] = []

    async def try_claim(w: SendWindow, replacing: float | None) -> ClaimTry:
        tries.append(replacing)
        if len(tries) == 1:
            await asyncio.sleep(0.05)  # a slow round trip: the stamp may be 50 ms old at the send
        return ClaimTry(0.0, stamp=float(len(tries)))

    asyncio.run(claim_fresh(try_claim, window))
    assert tries == [None, 1.0]  # the second try gives the first slot back


def test_a_machine_too_slow_for_any_fresh_claim_sends_after_a_few_stamps() -> None:
    window = SendWindow("x", 5, 1.0, fresh_s=0.001)
    tries: list[float | None] = []

    async def try_claim(w: SendWindow, replacing: float | None) -> ClaimTry:
        tries.append(replacing)
        await asyncio.sleep(0.005)
        return ClaimTry(0.0, stamp=float(len(tries)))

    asyncio.run(claim_fresh(try_claim, window))
    assert len(tries) == 1 + RESTAMPS


def test_a_restamp_gives_its_own_slot_back_and_so_never_waits() -> None:
    gate = LocalSendGate()
    window = SendWindow("restamp", 2, 10.0)
    first = gate.try_claim(window)
    second = gate.try_claim(window)
    assert first.stamp is not None and second.stamp is not None
    assert gate.try_claim(window).wait_s > 0  # full
    again = gate.try_claim(window, replacing=first.stamp)
    assert again.wait_s == 0.0 and again.stamp is not None and again.stamp > first.stamp
