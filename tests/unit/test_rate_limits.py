"""Provider rate limits as configuration: the spec format, its errors, which limit a model meets."""

from __future__ import annotations

import asyncio
import bisect
import heapq
import random
from collections.abc import Callable

import pytest

from helix_dbos import HelixError, ProviderRateLimit
from helix_dbos.llm.litellm import LiteLLMAdapter
from helix_dbos.llm.mock import MockLLMAdapter
from helix_dbos.llm.router import ModelRouter
from helix_dbos.llm.send_slot import counted_call, send_slots
from helix_dbos.runtime.rate_limits import (
    CONCURRENCY_QUEUE_PREFIX,
    QUEUE_PREFIX,
    RateLimitCapability,
    check_rate_limits,
    limit_for,
    parse_rate_limits,
)
from helix_dbos.runtime.send_gate import (
    REPORT_POLL_S,
    UNSENT_BOUND_S,
    Claim,
    ClaimedSlot,
    LocalSendGate,
    SendWindow,
    sent_by,
    wait_before_claim,
)
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


def test_on_time_claims_keep_the_rolling_window_over_their_stamps() -> None:
    window = SendWindow("x", 2, 1.0, 0.05)

    def on_time(*stamps: float) -> list[Claim]:
        return [(t, t + 0.05) for t in stamps]  # each reported within the margin

    assert wait_before_claim([], 10.0, window) == 0.0
    assert wait_before_claim(on_time(8.9, 9.5), 10.0, window) == 0.0  # 8.95 is not after 9
    assert wait_before_claim(on_time(9.2, 9.5), 10.0, window) == pytest.approx(0.25)
    assert wait_before_claim(on_time(9.2, 9.5, 9.9), 10.0, window) == pytest.approx(0.55)


def test_a_late_send_counts_from_when_it_left_not_from_its_stamp() -> None:
    """Counted from its stamp (9.0 + margin), the claim at 9.0 would be gone by 10.1; it left at 9.8."""
    window = SendWindow("x", 2, 1.0, 0.05)
    claims: list[Claim] = [(9.0, sent_by(9.0, 0.8, window)), (9.5, 9.55)]
    assert claims[0][1] == pytest.approx(9.805)  # elapsed plus the slack, past the margin
    assert wait_before_claim(claims, 10.1, window) == pytest.approx(0.45)  # until 9.55 + 1
    assert wait_before_claim([claims[0], (9.5, 9.9)], 10.1, window) == pytest.approx(0.705)  # until 9.805 + 1


def test_a_claim_not_yet_reported_counts_as_still_able_to_arrive() -> None:
    window = SendWindow("x", 1, 1.0, 0.05)
    assert wait_before_claim([(9.9, None)], 10.0, window) == pytest.approx(0.95)  # no earlier than its margin
    assert wait_before_claim([(5.0, None)], 10.0, window) == pytest.approx(REPORT_POLL_S)  # look again soon
    assert wait_before_claim([(10.0 - UNSENT_BOUND_S - 1.0, None)], 10.0, window) == 0.0  # a dead sender's
    assert wait_before_claim([(5.0, 5.05)], 10.0, window) == 0.0


def max_in_window(times: list[float], window: float) -> int:
    """The most times in any half-open window ``[t, t + window)``."""
    ordered = sorted(times)
    return max((bisect.bisect_left(ordered, t + window) - i for i, t in enumerate(ordered)), default=0)


def _simulate(rule: Callable[[list[Claim], float], float], seed: int, late_s: list[float]) -> list[float]:
    """Six senders of a 3-per-second limit, each claiming at once again after its last send; returns the arrivals.

    Each send leaves some time after its claim (``late_s``, drawn) and is reported some time after
    it left; ``rule`` is the gate's: seconds to wait before a claim at ``now`` given the claims.
    """
    rng = random.Random(seed)
    window = SendWindow("sim", 3, 1.0, 0.05)
    claims: dict[int, Claim] = {}
    arrivals: list[float] = []
    events: list[tuple[float, int, str, int]] = [(rng.uniform(0, 0.2), n, "try", n) for n in range(6)]
    while events and len(arrivals) < 120:
        now, order, what, who = heapq.heappop(events)
        if what == "try":
            wait = rule(list(claims.values()), now)
            if wait > 0:
                heapq.heappush(events, (now + wait, order, "try", who))
                continue
            key = len(claims)
            claims[key] = (now, None)
            left = now + rng.choice(late_s)
            arrivals.append(left)
            reported = left + rng.uniform(0.0, 0.3)
            heapq.heappush(events, (reported, order, f"report:{key}:{left - now}", who))
            heapq.heappush(events, (left + 0.001, order, "try", who))
        else:
            _, key, elapsed = what.split(":")
            stamp = claims[int(key)][0]
            claims[int(key)] = (stamp, sent_by(stamp, float(elapsed), window))
    return arrivals


@pytest.mark.parametrize("seed", range(5))
def test_no_period_ever_holds_more_arrivals_than_the_limit_however_late_the_sends(seed: int) -> None:
    """The docstring's argument of :mod:`helix_dbos.runtime.send_gate`, checked on random schedules."""
    window = SendWindow("sim", 3, 1.0, 0.05)
    late = [0.0, 0.01, 0.04, 0.3, 0.9, 1.6]

    def gate(claims: list[Claim], now: float) -> float:
        return wait_before_claim(claims, now, window)

    def stamps_only(claims: list[Claim], now: float) -> float:  # the rule before: a window over the stamps
        return wait_before_claim([(t, t + window.margin_s) for t, _ in claims], now, window)

    assert max_in_window(_simulate(gate, seed, late), 1.0) <= 3
    assert max_in_window(_simulate(stamps_only, seed, late), 1.0) > 3  # the same schedule, counted at the stamps
    assert max_in_window(_simulate(stamps_only, seed, [0.0, 0.01, 0.04]), 1.0) <= 3  # which held for on-time sends


def test_the_local_gate_counts_a_reported_send_from_when_it_left() -> None:
    gate = LocalSendGate()
    window = SendWindow("local-late", 1, 0.2, 0.01)

    async def claims() -> tuple[ClaimedSlot, ClaimedSlot]:
        first = await gate.claim(window)
        await asyncio.sleep(0.15)  # the send leaves late
        first.sent()
        first.sent()  # a second report changes nothing
        return first, await gate.claim(window)

    first, second = asyncio.run(claims())
    assert first.reported is not None and first.reported - first.stamp >= 0.15
    assert second.stamp >= first.reported + window.period_s  # not first.stamp + margin + period


def test_an_adapter_that_does_not_claim_at_the_send_is_claimed_around_its_whole_call() -> None:
    """``exact`` is the default, so it must gate every adapter, not only the LiteLLM one's transports."""
    made: list[str] = []

    class Slot:
        def sent(self) -> None:
            made.append("reported")

    async def claim(model: str) -> Slot:
        made.append(f"claimed {model}")
        return Slot()

    async def call(adapter: object, model: str) -> list[str]:
        made.clear()
        with send_slots(claim):
            async with counted_call(adapter, model):
                made.append("called")
        return list(made)

    scripted, litellm = MockLLMAdapter([]), LiteLLMAdapter()
    assert asyncio.run(call(scripted, "openai/x")) == ["claimed openai/x", "called", "reported"]
    assert asyncio.run(call(litellm, "openai/x")) == ["called"]  # its transport claims each request
    router = ModelRouter({"openai/": litellm}, default=scripted)
    assert asyncio.run(call(router, "openai/x")) == ["called"]
    assert asyncio.run(call(router, "anthropic/y")) == ["claimed anthropic/y", "called", "reported"]
