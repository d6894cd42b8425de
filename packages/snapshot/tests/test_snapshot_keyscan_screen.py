"""The key scan's whole-text screen (issue 24): skipping the line-by-line pass of a text in
which the screen finds nothing never changes what the scan reports.

Texts are built from key-shaped values in every form the scan decodes (raw, base64, hex,
percent-encoded, JSON-escaped once and twice) and from the characters those forms are made of,
cut at random places into lines, so values, escapes and runs meet line breaks in every way.
"""

from __future__ import annotations

import base64
import json
import random
import subprocess
import sys
from pathlib import Path
from urllib.parse import quote

import pytest

from dsh_snapshot import _keyscan as keyscan


def _values() -> list[str]:
    # Built at run time: no key-shaped string in a tracked file.
    key = "sk-" + "proj-" + "Ab1" * 8
    return [
        key,
        "Bearer " + "tok3n" * 5,
        "AKIA" + "Q" * 16,
        "ghp_" + "a1" * 18,
        "glpat-" + "x" * 20,
        "xoxb-1234-abcdef",
        'password = "hunter2hunter2"',
        "api_key: 'abcdefabcdef1234'",
        '"abcdefgh" == password',
        " AKC" + "a1b2c3" * 2 + " ",
        "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.abcdefgh",
        "https://user:pa55word@example.org/x",
        "the-live-value-1234",
    ]


def _forms(value: str) -> list[str]:
    raw = value.encode()
    escaped = json.dumps(value)[1:-1].replace("-", "\\u002d")
    return [
        value,
        base64.b64encode(raw).decode(),
        base64.urlsafe_b64encode(raw).decode().rstrip("="),
        raw.hex(),
        quote(value, safe=""),
        escaped,
        json.dumps(escaped)[1:-1],
    ]


_FILLERS = [
    "",
    " ",
    "\\",
    "\\\\",
    "%",
    "%2",
    "=",
    ":",
    '"',
    "'",
    "`",
    "{",
    '{"text":"',
    '"}',
    "abc",
    "0f" * 8,
    "QUJD",
    "\\u00",
    "\\n",
    "==",
    "password",
    "secret_",
    "Bearer",
    "sk-",
    "-",
    "_",
    "/",
    "+",
    "\t",
    "é",
    "\x00",
]


def _never_quiet(_text: str, _keys: object) -> bool:
    return False


_BREAKS = ["\n", "\r\n", "\r", "\x0b", "\x1c", "\u2028"]


def _texts(seed: int, count: int) -> list[str]:
    rng = random.Random(seed)
    pieces = [form for value in _values() for form in _forms(value)]
    texts: list[str] = []
    for _ in range(count):
        stream = "".join(
            rng.choice(pieces) if rng.random() < 0.3 else rng.choice(_FILLERS)
            for _ in range(rng.randint(1, 12))
        )
        # Cut anywhere, with any of the line breaks splitlines() knows.
        cuts = sorted(rng.sample(range(len(stream) + 1), min(len(stream), rng.randint(0, 4))))
        parts = [stream[a:b] for a, b in zip([0, *cuts], [*cuts, len(stream)], strict=True)]
        texts.append("".join(p + rng.choice(_BREAKS) for p in parts[:-1]) + parts[-1])
    return texts


@pytest.mark.parametrize("seed", range(3))
def test_the_screen_never_changes_a_finding(seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    keys = (("the value of the live API key", "the-live-value-1234"),)
    path = Path("f.txt")
    texts = _texts(seed, 120)
    screened = [keyscan._scan(text, path, "f.txt", keys) for text in texts]
    quiet = [keyscan._quiet("\n".join(text.splitlines()), keys) for text in texts]
    monkeypatch.setattr(keyscan, "_quiet", _never_quiet)
    for text, found in zip(texts, screened, strict=True):
        assert found == keyscan._scan(text, path, "f.txt", keys), repr(text)
    # Both ways were taken: texts with findings and texts the screen let through.
    assert any(quiet)
    assert any(screened)
    assert all(not found for found, q in zip(screened, quiet, strict=True) if q)


def test_every_value_beside_every_line_break_is_found_alike(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    keys = (("the value of the live API key", "the-live-value-1234"),)
    path = Path("f.txt")
    texts = [
        text
        for value in _values()
        for form in _forms(value)
        for br in ("\n", "\r\n", "\x1c")
        for text in (
            f"abc{br}{form}",
            f"{form}{br}abc",
            f"x={br}{form}{br}%41",
            f"a\\{br}{form}\\{br}\\",
            f"{form[: len(form) // 2]}{br}{form[len(form) // 2 :]}",
        )
    ]
    screened = [keyscan._scan(text, path, "f.txt", keys) for text in texts]
    monkeypatch.setattr(keyscan, "_quiet", _never_quiet)
    for text, found in zip(texts, screened, strict=True):
        assert found == keyscan._scan(text, path, "f.txt", keys), repr(text)
    assert sum(1 for found in screened if found) > len(texts) // 2


def test_ordinary_fixture_text_is_quiet() -> None:
    assert keyscan._quiet('{"text":"ask-me anything"}\n{"usage":{"inputTokens":878}}', ())


def test_building_the_detectors_does_not_import_requests() -> None:
    # detect-secrets imports requests for verify(), which the scan never calls (~50 ms).
    code = (
        "import sys\n"
        "from dsh_snapshot._detect import detectors\n"
        "detectors()\n"
        "assert 'urllib3' not in sys.modules and 'requests' not in sys.modules, 'loaded'\n"
        "import requests\n"
        "import detect_secrets.plugins.base as base\n"
        "assert type(requests).__name__ == 'module' and requests.Session\n"
        "assert base.requests.exceptions.RequestException is requests.RequestException\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
