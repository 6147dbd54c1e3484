"""``HelixSettings``: the one configuration object, and the one place ``HELIX_*`` is read.

Library constructors take explicit values: a store built without a retry policy gets the documented
default whatever the environment says; the environment reaches it only through ``from_env`` and an
entry point (``launch``, the CLI) that passes the settings' policy on.
"""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path

import pytest

from helix_dbos import HelixSettings
from helix_dbos.errors import HelixError
from helix_dbos.runtime.hitl import DEFAULT_HOT_WINDOW_SECONDS
from helix_dbos.settings import DEFAULT_DATABASE_URL, ENV
from helix_dbos.store import SqlSessionStore
from helix_dbos.store.migrate import upgrade
from helix_dbos.store.retry import DEFAULT_RETRY_SECONDS, RetryPolicy


def test_the_defaults_are_the_documented_ones() -> None:
    settings = HelixSettings()
    assert settings == HelixSettings.from_env({})
    assert settings.database_url == DEFAULT_DATABASE_URL == "sqlite:///.helix/helix.sqlite"
    assert settings.executor_id is None and settings.run_queue is None and settings.otlp_endpoint is None
    assert settings.retry_seconds == DEFAULT_RETRY_SECONDS == 120.0
    assert settings.retry_policy == RetryPolicy()
    assert settings.hot_window_seconds == DEFAULT_HOT_WINDOW_SECONDS
    assert (settings.log_level, settings.log_format, settings.api_tokens) == ("INFO", "text", ())


def test_every_variable_is_read() -> None:
    environ = {
        "HELIX_DATABASE_URL": "postgresql://u:pw@db/helix",
        "HELIX_EXECUTOR_ID": "worker-7",
        "HELIX_DB_RETRY_SECONDS": "300",
        "HELIX_HOT_WINDOW_SECONDS": "5",
        "HELIX_RUN_QUEUE": "runs:concurrency=4",
        "HELIX_RATE_LIMITS": "openai/:requests=500/60",
        "HELIX_LOG_LEVEL": "debug",
        "HELIX_LOG_FORMAT": "JSON",
        "HELIX_OTLP_ENDPOINT": "http://localhost:4318",
        "HELIX_API_TOKENS": " a, b ,,c ",
        "HELIX_TENANT_TOKENS": "acme=tok-1, globex=tok=2==",
    }
    assert set(environ) == set(ENV.values())
    settings = HelixSettings.from_env(environ)
    assert settings == HelixSettings(
        database_url="postgresql://u:pw@db/helix",
        executor_id="worker-7",
        retry_seconds=300.0,
        hot_window_seconds=5.0,
        run_queue="runs:concurrency=4",
        rate_limits="openai/:requests=500/60",
        log_level="DEBUG",
        log_format="json",
        otlp_endpoint="http://localhost:4318",
        api_tokens=("a", "b", "c"),
        tenant_tokens=("acme=tok-1", "globex=tok=2=="),
    )
    # The tenant first, split at the first "=": a token may hold "=" (base64), a tenant never does.
    assert settings.bearer_tokens() == {
        "a": "default",
        "b": "default",
        "c": "default",
        "tok-1": "acme",
        "tok=2==": "globex",
    }
    assert "tok-1" not in repr(settings)
    assert settings.retry_policy.max_seconds == 300.0
    assert "pw" not in repr(settings) and "a" not in repr(settings).split("api_tokens=")[1]


def test_empty_is_unset_and_dbos_vmid_is_the_fallback_executor_id() -> None:
    assert HelixSettings.from_env({"HELIX_DATABASE_URL": "", "HELIX_DB_RETRY_SECONDS": " "}) == HelixSettings()
    assert HelixSettings.from_env({"DBOS__VMID": "vm-1"}).executor_id == "vm-1"
    both = {"DBOS__VMID": "vm-1", "HELIX_EXECUTOR_ID": "mine"}
    assert HelixSettings.from_env(both).executor_id == "mine"


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("HELIX_DB_RETRY_SECONDS", "soon"),
        ("HELIX_DB_RETRY_SECONDS", "-1"),
        ("HELIX_DB_RETRY_SECONDS", "nan"),
        ("HELIX_HOT_WINDOW_SECONDS", "inf"),
        ("HELIX_LOG_LEVEL", "LOUD"),
        ("HELIX_LOG_FORMAT", "xml"),
        ("HELIX_TENANT_TOKENS", "just-a-token"),
        ("HELIX_TENANT_TOKENS", "acme="),
        ("HELIX_TENANT_TOKENS", "bad tenant=tok"),
    ],
)
def test_a_bad_value_names_its_variable(name: str, value: str) -> None:
    with pytest.raises(HelixError, match=name) as caught:
        HelixSettings.from_env({name: value})
    assert caught.value.code == "validation_error"


def test_zero_disables_retries_and_infinity_waits_forever() -> None:
    assert HelixSettings.from_env({"HELIX_DB_RETRY_SECONDS": "0"}).retry_policy.max_seconds == 0.0
    assert HelixSettings(retry_seconds=math.inf).retry_policy.max_seconds == math.inf


def test_override_applies_what_was_given_and_keeps_the_rest() -> None:
    base = HelixSettings.from_env({"HELIX_EXECUTOR_ID": "env-id", "HELIX_DATABASE_URL": "sqlite:///env.sqlite"})
    flags = base.override(executor_id="flag-id", database_url=None, run_queue=None)
    assert (flags.executor_id, flags.database_url) == ("flag-id", "sqlite:///env.sqlite")
    assert base.override() is base
    with pytest.raises(dataclasses.FrozenInstanceError):
        base.executor_id = "x"  # type: ignore[misc]
    with pytest.raises(HelixError, match="HELIX_LOG_FORMAT"):
        base.override(log_format="xml")


def test_a_store_does_not_read_the_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """The constructor default is ``RetryPolicy()``; only an entry point passes ``HELIX_DB_RETRY_SECONDS``."""
    url = f"sqlite:///{tmp_path / 'helix.sqlite'}"
    upgrade(url)
    monkeypatch.setenv("HELIX_DB_RETRY_SECONDS", "7")
    with SqlSessionStore(url) as store:
        assert store.retry_policy == RetryPolicy()
        assert store.workers.retry_policy == RetryPolicy()
    policy = HelixSettings.from_env().retry_policy
    with SqlSessionStore(url, retry=policy) as store:
        assert store.retry_policy.max_seconds == 7.0
        assert store.workers.retry_policy.max_seconds == 7.0
