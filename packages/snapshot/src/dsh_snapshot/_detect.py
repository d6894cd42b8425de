"""The key scan's detectors, each linear in the text it reads.

`detect-secrets`' patterns are written for short source lines; on one long crafted line several
backtrack from every start position (its OpenAI pattern ``sk-[…]*[…]{20}T3BlbkFJ`` over
``-sk-sk-sk…``, its JWT pattern, its keyword patterns over ``passwordpassword…``), so a 375 KiB
fixture took minutes. Here:

- every regex detector's patterns run through RE2 (``google-re2``: a DFA, linear in the text
  whatever the pattern); the few that RE2 cannot parse (GitLab's ``(?!\\w)`` look-aheads) are a
  literal prefix plus a bounded repetition, linear in Python's engine too — the test pins
  which ones, so an upgrade that adds an unbounded one is seen;
- the keyword detector keeps its own patterns (they need back-references) but each is tried
  only where it can start — the first denylisted word of each run of word characters — over
  that run plus ``_REACH`` characters, so each character is read a bounded number of times.

The values found are those `detect-secrets` finds on any line shorter than ``_REACH``: allow-list
hashes stay valid.
"""

from __future__ import annotations

import contextlib
import importlib.util
import re
import sys
import types
from collections.abc import Callable, Generator, Iterator
from functools import cache
from importlib import import_module
from typing import Any, cast

from dsh_snapshot._expect import linear_regex

__all__ = ["Detector", "detectors", "python_fallbacks", "screened"]

# How far past its keyword a keyword-assigned value may end: a password or token longer than
# this is still found by the sk-/bearer/assignment patterns, which have no such reach.
_REACH = 512

Detector = tuple[str, Callable[[str], Iterator[str]]]

# detect-secrets plugins used: every regex detector of version 1.5 except the entropy ones
# (they flag every id and hash a fixture holds), the public-IP one (not a secret) and four
# vendor-context ones the keyword detector covers at a quarter of the cost.
_PLUGINS = (
    "artifactory.ArtifactoryDetector",
    "aws.AWSKeyDetector",
    "azure_storage_key.AzureStorageKeyDetector",
    "basic_auth.BasicAuthDetector",
    "discord.DiscordBotTokenDetector",
    "github_token.GitHubTokenDetector",
    "gitlab_token.GitLabTokenDetector",
    "jwt.JwtTokenDetector",
    "keyword.KeywordDetector",
    "mailchimp.MailchimpDetector",
    "npm.NpmDetector",
    "openai.OpenAIDetector",
    "private_key.PrivateKeyDetector",
    "pypi_token.PypiTokenDetector",
    "sendgrid.SendGridDetector",
    "slack.SlackDetector",
    "square_oauth.SquareOAuthDetector",
    "stripe.StripeDetector",
    "telegram_token.TelegramBotTokenDetector",
    "twilio.TwilioKeyDetector",
)

_fallbacks: list[str] = []


def _linear(pattern: re.Pattern[str]) -> Any:
    """``pattern`` compiled by RE2, or the Python pattern when RE2 cannot parse it."""
    flags = "(?i)" if pattern.flags & re.IGNORECASE else ""
    try:
        return linear_regex(flags + pattern.pattern)
    except ValueError:
        _fallbacks.append(pattern.pattern)
        return pattern


def _always(_value: str) -> bool:
    return True


Find = Callable[[str], Iterator[str]]
# A look-ahead or look-behind holding no group: removed, it leaves a pattern that matches
# wherever the original did (and more).
_LOOKAROUND = re.compile(r"\(\?<?[=!][^()]*\)")
_BIG_REPEAT = re.compile(r"\{(\d+),\d{4,}\}")


def _nothing(_text: str) -> Iterator[str]:
    return iter(())


def _finder(patterns: list[Any], valid: Callable[[str], bool]) -> Find:
    def find(text: str) -> Iterator[str]:
        # RegexBasedDetector.analyze_string: findall, a tuple's non-empty groups each a value.
        for regex in patterns:
            for match in cast(list[str | tuple[str, ...]], regex.findall(text)):
                values = match if isinstance(match, tuple) else (match,)
                yield from (v for v in values if v and valid(v))

    return find


def _regex_detector(plugin: Any) -> tuple[Find, list[str], Find]:
    """The detector's ``find``; the sources of its RE2 patterns, each a group with its own
    flags (what :func:`screened`'s screen stands for); a ``find`` over its Python-engine
    patterns alone (they run whatever the screen says)."""
    denylist = cast(list[re.Pattern[str]], plugin.denylist)
    compiled = [_linear(p) for p in denylist]
    valid = cast(Callable[[str], bool], getattr(plugin, "is_formally_valid", _always))
    sources: list[str] = []
    python: list[Any] = []
    for pattern, engine in zip(denylist, compiled, strict=True):
        source = pattern.pattern
        if isinstance(engine, re.Pattern):
            # A look-around only narrows a match, and so does a repetition's upper bound (RE2
            # takes none above 1000): without them the pattern matches wherever it did, so
            # that relaxed form screens for it (when RE2 takes it).
            source = _BIG_REPEAT.sub(r"{\1,}", _LOOKAROUND.sub("", source))
            try:
                linear_regex(source)
            except ValueError:
                python.append(engine)
                continue
        sources.append(f"(?i:{source})" if pattern.flags & re.IGNORECASE else f"(?:{source})")
    return _finder(compiled, valid), sources, _finder(python, valid) if python else _nothing


_COMPARED = re.compile(r"""(['"`])\s*[!=]{2,3}\s*$""")
_OPENING = {q: re.compile(re.escape(q) + r"(?=\w)") for q in "'\"`"}


def _preceded_start(text: str, run: int) -> int | None:
    """Where ``'"value" == password'`` can start when the keyword's word run begins at ``run``.

    That pattern ends ``(quote)(value)(same quote) [!=]{2,3} password``; the closing quote is
    fixed by the comparison before the run, the value holds no quote or vertical tab, so the
    one opening quote a leftmost search would take is found without trying every position.
    """
    compared = _COMPARED.search(text, max(0, run - _REACH), run)
    if compared is None:
        return None
    close = compared.start()
    lo = max(0, close - _REACH)
    stop = max(text.rfind("'", lo, close), text.rfind('"', lo, close), text.rfind("\v", lo, close))
    quote = text[close]
    if quote != "`":
        return stop if stop >= 0 and text[stop] == quote else None
    opening = _OPENING[quote].search(text, max(lo, stop + 1), close)
    return None if opening is None else opening.start()


def _keyword_words() -> tuple[str, ...]:
    """The keyword detector's denylisted words (regular expressions)."""
    keyword = import_module("detect_secrets.plugins.keyword")
    return cast(tuple[str, ...], keyword.DENYLIST)


def _keyword_detector() -> Callable[[str], Iterator[str]]:
    keyword = import_module("detect_secrets.plugins.keyword")
    table = cast(dict[re.Pattern[str], int], keyword.QUOTES_REQUIRED_DENYLIST_REGEX_TO_GROUP)
    word = re.compile(r"(?i)(?:" + "|".join(_keyword_words()) + ")")
    run_end = re.compile(r"\w*")
    preceded = keyword.PRECEDED_BY_EQUAL_COMPARISON_SIGNS_QUOTES_REQUIRED_REGEX

    def runs(text: str) -> Iterator[tuple[int, int, int]]:
        """``(start, first keyword, end)`` of each word run holding a keyword, once per run."""
        pos = 0
        while (hit := word.search(text, pos)) is not None:
            end = cast(re.Match[str], run_end.match(text, hit.end())).end()
            start = hit.start()
            while start > pos and (text[start - 1].isalnum() or text[start - 1] == "_"):
                start -= 1
            yield start, hit.start(), end
            pos = end

    def find(text: str) -> Iterator[str]:
        # KeywordDetector.analyze_string with no file type: the first match of each pattern.
        # The word runs are the same for every pattern: found once (most texts have none).
        found = list(runs(text))
        if not found:
            return
        for regex, group in table.items():
            for start, first, end in found:
                if regex is preceded:
                    at = _preceded_start(text, start)
                    match = None if at is None else regex.match(text, at, end)
                else:
                    match = regex.match(text, first, min(len(text), end + _REACH))
                if match is not None:
                    yield match.group(group)
                    break

    return find


Screened = tuple[Any, tuple[tuple[str, Find], ...], tuple[tuple[str, Find], ...]]


def _relaxed(pattern: re.Pattern[str]) -> str:
    """``pattern`` without look-arounds or repetition bounds over 999, as a group with its
    flags: it matches wherever ``pattern`` does (and more), and RE2 may take it."""
    source = _BIG_REPEAT.sub(r"{\1,}", _LOOKAROUND.sub("", pattern.pattern))
    return f"(?i:{source})" if pattern.flags & re.IGNORECASE else f"(?:{source})"


class _RequestsOnFirstUse(types.ModuleType):
    """``requests`` as detect-secrets' plugin modules see it: imported on first use (their
    ``verify()``, which the scan never calls)."""

    def __getattr__(self, name: str) -> Any:
        if sys.modules.get("requests") is self:
            del sys.modules["requests"]
        return getattr(import_module("requests"), name)


@contextlib.contextmanager
def _requests_not_loaded() -> Generator[None]:
    """detect-secrets imports ``requests`` for its plugins' ``verify()``, which the scan never
    calls: ~50 ms of CPU (urllib3, charset_normalizer, http.cookiejar…), a third of a gate's
    key scan. While the plugins are imported, ``requests`` is a stand-in that imports it on
    first use; it leaves ``sys.modules`` afterwards, so the rest of the process imports the
    real one as usual. (The standard library's ``LazyLoader`` does not do: an ``import``
    statement reads the module's ``__spec__``, which loads it.)"""
    spec = None if "requests" in sys.modules else importlib.util.find_spec("requests")
    if spec is None:
        yield
        return
    stand_in = _RequestsOnFirstUse("requests")
    stand_in.__spec__ = spec  # what an import statement reads: present, not initialising
    sys.modules["requests"] = stand_in
    try:
        yield
    finally:
        if sys.modules.get("requests") is stand_in:
            del sys.modules["requests"]


@cache
def _built() -> tuple[tuple[Detector, ...], tuple[str, ...], tuple[tuple[str, Find], ...]]:
    """The detectors, the RE2 sources the screen is made of, and what the screen cannot
    stand for."""
    with _requests_not_loaded():
        plugins = [
            (name, getattr(import_module(f"detect_secrets.plugins.{module}"), name)())
            for module, name in (dotted.rsplit(".", 1) for dotted in _PLUGINS)
        ]
    out: list[Detector] = []
    table: list[tuple[str, Find, Find]] = []
    sources: list[str] = []
    for name, plugin in plugins:
        kind = f"{plugin.secret_type} (detect-secrets)"
        if name == "KeywordDetector":
            find = unscreened = _keyword_detector()
            # It yields nothing where no denylisted word occurs: the screen can stand for it
            # too, when RE2 takes the words.
            words = "(?i:" + "|".join(_keyword_words()) + ")"
            with contextlib.suppress(ValueError):
                linear_regex(words)
                sources.append(words)
                unscreened = _nothing
        else:
            find, screened_sources, unscreened = _regex_detector(plugin)
            sources += screened_sources
        out.append((kind, find))
        table.append((kind, find, unscreened))
    rest = tuple((kind, unscreened) for kind, _, unscreened in table if unscreened is not _nothing)
    return tuple(out), tuple(sources), rest


def detectors() -> tuple[Detector, ...]:
    """``(kind, find)`` per detect-secrets plugin, built once; ``find`` yields flagged values."""
    return _built()[0]


@cache
def screened(extra: tuple[re.Pattern[str], ...] = ()) -> Screened:
    """``(screen, every, rest)``: ``screen`` (one RE2 alternation of every regex detector's
    RE2 patterns and of ``extra``'s relaxed forms, or ``None``) matches somewhere in a text
    whenever any of those patterns does, or any word the keyword detector starts from;
    ``every`` is :func:`detectors`; ``rest`` is what must still run where the screen finds
    nothing, in the same order (the Python-engine patterns whose relaxed form RE2 does not
    take). One screen search instead of ~30 RE2 calls, the keyword search and ``extra``'s
    searches per text: most texts a scan reads hold no key-shaped value at all.

    The screen is multi-line (``^`` and ``$`` match at every "\n"): over lines joined by
    "\n" it matches wherever it matches in one of the lines (``_keyscan._quiet``).
    """
    every, sources, rest = _built()
    try:
        screen: Any = linear_regex("(?m)" + "|".join([*map(_relaxed, extra), *sources]))
    except ValueError:  # too big for RE2's budget: every detector runs on every text
        screen = None
    return screen, every, rest


def python_fallbacks() -> tuple[str, ...]:
    """The detect-secrets patterns RE2 could not take (kept in Python's engine)."""
    detectors()
    return tuple(_fallbacks)
