"""The plugin's state in one process: a second engine with a new spec must not inherit the first one's."""

from __future__ import annotations

import gc

import pytest

from strategies import Role
from tuner import plugin
from tuner.plugin import ENV_VAR, encode_spec


def test_a_new_spec_in_the_same_process_replaces_and_reverts_the_old(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(plugin, "_state", None)
    frozen_before = gc.get_freeze_count()
    monkeypatch.setenv(ENV_VAR, encode_spec({"gc_freeze": {"enabled": True}}))
    plugin.register()
    first = plugin.state()
    assert first is not None
    try:
        first.on_ready(Role.FRONTEND, None, None)
        assert first.active == {"gc_freeze": {"enabled": True}}
        assert gc.get_freeze_count() > 0

        plugin.register()  # vLLM calling again with the same spec changes nothing
        assert plugin.state() is first

        monkeypatch.setenv(ENV_VAR, encode_spec({}, ["gc_threshold"]))
        plugin.register()
        second = plugin.state()
        assert second is not None and second is not first
        assert second.installable == ["gc_threshold"]
        assert first.active == {}
        assert gc.get_freeze_count() == frozen_before  # the first engine's freeze is undone
        assert first.probe._callback not in gc.callbacks
        assert second.probe._callback in gc.callbacks

        second.on_ready(Role.FRONTEND, None, None)
        second.switch({"gc_freeze": {"enabled": True}})
        assert second.errors["gc_freeze"].startswith("not installed at engine start")
    finally:
        current = plugin.state()
        if current is not None:
            current.retire()
