"""The provider settings a live recording was made with, handed back to the agent on replay.

The replay client checks each request's header against the recorded one, asking the live
provider what it would send from its own settings (``OPENAI_MODEL``…). The runner strips
those variables from the agent's environment, so without this module the live config would
always be the provider's defaults and a scenario recorded with another model would fail
replay forever, though nothing in the code changed. ``provenance:`` of ``snapshot.yml`` says
what the recording was made with; this module turns it back into the provider's variables,
found through its ``dsh.models`` plugin (its settings' ``env_prefix`` and fields), so nothing
here knows a provider by name. The drift check then catches only what the code now sends
differently (system prompt, tools, how defaults resolve); ``agent_env`` still overrides.
"""

from __future__ import annotations

import json
from typing import Any

from pydantic import TypeAdapter, ValidationError

from dsh_core.plugins import PluginError, env_prefix, model_provider, model_provider_names
from dsh_llm_replay import LIVE_PROVIDER_ENV
from dsh_snapshot._fsafe import read_file_text
from dsh_snapshot._scenario import Scenario

__all__ = ["PROVENANCE_SETTINGS", "recorded_provider_env"]

PROVENANCE_SETTINGS = {
    "model": "model",
    "thinking": "thinking",
    "reasoningEffort": "reasoning_effort",
}
"""``provenance:`` field → the provider settings field it was read from (``live_provenance``)."""


def recorded_provider_env(scenario: Scenario) -> dict[str, str]:
    """The agent's variables that make the live provider of a replay the recording's (for a
    scenario without ``provenance:``, a scripted or authored one, only the provider its
    recorded request header names, when that one is installed: its defaults made it):
    ``DSH_REPLAY_LIVE_PROVIDER`` and, for each recorded setting the provider's settings have,
    ``<env_prefix><FIELD>`` (``OPENAI_MODEL=gpt-4o``). A provider that is not
    installed here gets only its name: replay then compares prompt and tools, not the config.
    Never a key: only the settings ``provenance:`` holds (``PROVENANCE_SETTINGS``).

    Raises:
        ValueError: a recorded value is not valid for the provider's setting.
    """
    provenance = scenario.meta.provenance if scenario.meta is not None else None
    if provenance is None:
        return _scripted_provider_env(scenario)
    env = {LIVE_PROVIDER_ENV: provenance.provider}
    try:
        provider = model_provider(provenance.provider)
    except PluginError:
        return env
    settings_model = provider.settings_model
    prefix = env_prefix(provider)
    if settings_model is None or not prefix:
        return env  # no variables to set: it is configured some other way
    fields = settings_model.model_fields
    recorded = provenance.model_dump()
    for key, name in PROVENANCE_SETTINGS.items():
        value = recorded.get(key)
        field = fields.get(name)
        annotation = field.annotation if field is not None else None
        variable = f"{prefix}{name}".upper()
        if value is None or annotation is None:
            continue
        try:
            TypeAdapter(annotation).validate_python(value)
        except ValidationError as exc:
            reason = exc.errors()[0]["msg"]
            raise ValueError(
                f"{scenario.files.meta}: provenance.{key}: {value!r} is not a valid "
                f"{provenance.provider} {name} ({variable}): {reason}"
            ) from None
        env[variable] = str(value)
    return env


def _scripted_provider_env(scenario: Scenario) -> dict[str, str]:
    # A scripted recording is made with the record provider's defaults (DSH_RECORD_PROVIDER),
    # which its first request header names: replay asks that provider, not the default one.
    primary = scenario.primary_file
    if not primary.is_file():
        return {}
    for line in read_file_text(primary).splitlines():
        if '"request/header"' not in line:
            continue
        try:
            event: Any = json.loads(line)
            name: Any = event["data"]["header"]["config"]["provider"]
        except (ValueError, KeyError, TypeError):
            return {}  # the replay's own reading of the log names what is wrong
        if isinstance(name, str) and name in model_provider_names():
            return {LIVE_PROVIDER_ENV: name}
        return {}
    return {}
