"""The replay report: what a replaying agent leaves behind for the runner that started it.

One model serves both ends of the hand-off: :class:`~dsh_llm_replay.ReplayModelClient`
builds it and writes it (once, at :meth:`~dsh_llm_replay.ReplayModelClient.aclose`), and the
snapshot runner reads it back with :meth:`ReplayReport.read`, so the file's shape is defined
in exactly one place. The JSON keys are camelCase, as the other files of a recording.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError
from pydantic.alias_generators import to_camel

from dsh_core import atomic_write
from dsh_llm_replay._errors import NotConsumedError, ReportFormatError

__all__ = [
    "REPORT_VERSION",
    "ReplayReport",
    "ReportError",
    "ReportScript",
    "ReportSession",
    "check_report",
]

REPORT_VERSION = 1


class _ReportPart(BaseModel):
    # Strict and closed: a report is machine-written, so anything unexpected is a wrong file.
    model_config = ConfigDict(
        strict=True, extra="forbid", frozen=True, alias_generator=to_camel, populate_by_name=True
    )


class ReportScript(_ReportPart):
    """One recorded script: where it came from, what it recorded, who consumed how much."""

    source: str
    recorded_session_id: str
    created_at: int
    seed_length: int
    recorded_calls: int
    bound_session: str | None
    replayed_calls: int


class ReportSession(_ReportPart):
    """One live session that called the model; ``script`` is None when it was unrecorded."""

    session_id: str
    script: str | None
    calls: int


class ReportError(_ReportPart):
    """A call the scripts could not answer (``script-exhausted``/``unrecorded-session``)."""

    kind: str
    session_id: str
    message: str


class ReplayReport(_ReportPart):
    """The JSON a replaying agent writes to ``DSH_REPLAY_REPORT`` when its client closes.

    ``problems`` is exactly what :meth:`ReplayModelClient.assert_consumed` would raise
    (call errors, unbound scripts, under-consumed sessions); ``ok`` is ``not problems``.
    """

    version: int
    ok: bool
    scripts: list[ReportScript]
    sessions: list[ReportSession]
    errors: list[ReportError]
    problems: list[str]

    @property
    def replayed_calls(self) -> int:
        """Model calls answered from the scripts, over every script."""
        return sum(s.replayed_calls for s in self.scripts)

    def as_json(self) -> dict[str, Any]:
        """The report as its JSON object (camelCase keys)."""
        return self.model_dump(mode="json", by_alias=True)

    def write(self, path: Path | str) -> None:
        """Write the report as JSON, atomically (a reader never sees half a report)."""
        atomic_write(path, json.dumps(self.as_json(), indent=2, ensure_ascii=False) + "\n")

    def assert_consumed(self) -> None:
        """Fail as the client's :meth:`~ReplayModelClient.assert_consumed` did.

        Raises:
            NotConsumedError: with the report's ``problems``.
        """
        if self.problems:
            raise NotConsumedError(self.problems)

    @classmethod
    def parse(cls, document: Any, where: str = "replay report") -> ReplayReport:
        """Validate a decoded report (``where`` names it in errors).

        Raises:
            ReportFormatError: naming ``where`` and the first offending field.
        """
        try:
            report = cls.model_validate(document)
        except ValidationError as exc:
            first = exc.errors()[0]
            loc = ".".join(str(part) for part in first["loc"]) or "document"
            raise ReportFormatError(where, loc, f"not a replay report: {first['msg']}") from None
        if report.version != REPORT_VERSION:
            raise ReportFormatError(
                where,
                "version",
                f"replay report version {report.version} is not {REPORT_VERSION}",
            )
        return report

    @classmethod
    def read(cls, path: Path | str) -> ReplayReport:
        """Read and validate the report file at ``path`` (without judging its problems).

        Raises:
            ReportFormatError: the file is missing, not JSON or not a report; the message
                names the file and the field.
        """
        where = str(path)
        try:
            document: Any = json.loads(Path(path).read_text(encoding="utf-8"))
        except OSError as exc:
            raise ReportFormatError(
                where,
                "document",
                f"cannot read the replay report ({exc}); did the agent exit before writing it?",
            ) from None
        except ValueError as exc:
            raise ReportFormatError(
                where, "document", f"the replay report is not valid JSON ({exc})"
            ) from None
        return cls.parse(document, where)


def check_report(report: Path | str | Mapping[str, Any]) -> ReplayReport:
    """Validate a replay report (a path or the decoded object) and fail as the client would.

    Returns:
        The validated report.

    Raises:
        ReportFormatError: the file is missing or not a valid report (a :class:`ReplayError`).
        NotConsumedError: the report lists problems (call errors, unbound scripts, short
            sessions), named as :meth:`ReplayModelClient.assert_consumed` names them.
    """
    if isinstance(report, Mapping):
        parsed = ReplayReport.parse(report)
    else:
        parsed = ReplayReport.read(report)
    parsed.assert_consumed()
    return parsed
