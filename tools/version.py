"""One version for the whole workspace: read it, check it, bump it.

Every distribution under ``packages/`` is released together at one version, and each pins the
dsh-* siblings it depends on to exactly that version (``dsh-core==0.2.0``), so a set of wheels
from one release always installs together and never mixes with another release's.

Usage::

    python tools/version.py                 # print the workspace version (exit 1 if it diverges)
    python tools/version.py check [--tag T] # versions, sibling pins, uv sources, CHANGELOG entry;
                                            # with --tag, also that T is "v" + the version
    python tools/version.py bump X.Y.Z      # set every package to X.Y.Z and re-pin the siblings

Packages are found by globbing ``packages/*/pyproject.toml``: a package added later is covered
without editing this file. The files are edited as text, not re-serialised, so comments and
layout survive a bump.
"""

from __future__ import annotations

import pathlib
import re
import sys
import tomllib
from dataclasses import dataclass
from typing import Any

ROOT = pathlib.Path(__file__).resolve().parent.parent

# PEP 440 release versions with optional pre/post/dev parts: what we are willing to tag.
VERSION_PATTERN = re.compile(r"^\d+\.\d+\.\d+(?:(?:a|b|rc)\d+)?(?:\.post\d+)?(?:\.dev\d+)?$")
_REQUIREMENT_NAME = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)")
_VERSION_LINE = re.compile(r'^version\s*=\s*"([^"]*)"\s*$', re.MULTILINE)


class VersionError(Exception):
    """The workspace's versions or pins are not one consistent release."""


@dataclass(frozen=True)
class Package:
    """One workspace member as its pyproject.toml declares it."""

    folder: pathlib.Path
    name: str
    version: str
    project: dict[str, Any]

    @property
    def pyproject(self) -> pathlib.Path:
        """The member's pyproject.toml."""
        return self.folder / "pyproject.toml"


def packages(root: pathlib.Path = ROOT) -> list[Package]:
    """Every workspace member under ``root/packages``, sorted by folder name."""
    found: list[Package] = []
    for pyproject in sorted((root / "packages").glob("*/pyproject.toml")):
        project: dict[str, Any] = tomllib.loads(pyproject.read_text())["project"]
        found.append(Package(pyproject.parent, project["name"], project["version"], project))
    return found


def requirement_name(requirement: str) -> str:
    """The normalised distribution name a PEP 508 requirement string starts with."""
    match = _REQUIREMENT_NAME.match(requirement)
    if match is None:
        raise VersionError(f"cannot read a distribution name from requirement {requirement!r}")
    return re.sub(r"[-_.]+", "-", match.group(1)).lower()


def requirements(project: dict[str, Any]) -> list[str]:
    """The runtime and optional requirement strings of one [project] table."""
    found = list(project.get("dependencies", []))
    for extra in project.get("optional-dependencies", {}).values():
        found += extra
    return found


def workspace_version(root: pathlib.Path = ROOT) -> str:
    """The one version every package carries; VersionError if they differ."""
    members = packages(root)
    if not members:
        raise VersionError(f"no packages under {root / 'packages'}")
    versions = {member.version for member in members}
    if len(versions) != 1:
        listing = ", ".join(f"{m.name} {m.version}" for m in members)
        raise VersionError(f"packages carry different versions: {listing}")
    return versions.pop()


def problems(root: pathlib.Path = ROOT) -> list[str]:
    """Everything that keeps the workspace from being one release; empty when it is."""
    found: list[str] = []
    members = packages(root)
    names = {member.name for member in members}
    try:
        version = workspace_version(root)
    except VersionError as exc:
        return [str(exc)]
    if not VERSION_PATTERN.match(version):
        found.append(f"workspace version {version!r} is not a X.Y.Z release version")
    for member in members:
        for requirement in requirements(member.project):
            sibling = requirement_name(requirement)
            if sibling not in names:
                continue
            expected = f"{sibling}=={version}"
            if requirement.split(";", 1)[0].replace(" ", "") != expected:
                found.append(
                    f"{member.pyproject.relative_to(root)}: requirement {requirement!r} "
                    f"must pin the sibling exactly: {expected!r}"
                )
    root_toml: dict[str, Any] = tomllib.loads((root / "pyproject.toml").read_text())
    sources: dict[str, Any] = root_toml.get("tool", {}).get("uv", {}).get("sources", {})
    for name in sorted(names):
        if sources.get(name) != {"workspace": True}:
            found.append(
                f"pyproject.toml: [tool.uv.sources] needs {name} = {{ workspace = true }} "
                "so uv resolves the sibling from the checkout"
            )
    changelog = root / "CHANGELOG.md"
    heading = re.compile(rf"^## \[{re.escape(version)}\]", re.MULTILINE)
    if not changelog.is_file() or not heading.search(changelog.read_text()):
        found.append(f"CHANGELOG.md has no '## [{version}]' section")
    return found


def _dependency_arrays(text: str) -> list[tuple[int, int]]:
    """(start, end) offsets of the bodies of [project] ``dependencies`` and of every extra."""
    spans: list[tuple[int, int]] = []
    for match in re.finditer(r"^([A-Za-z0-9_-]+)\s*=\s*\[", text, re.MULTILINE):
        headers = re.findall(r"^\[[^\]\n]*\]", text[: match.start()], re.MULTILINE)
        table = headers[-1] if headers else ""
        wanted = (table == "[project]" and match.group(1) == "dependencies") or (
            table == "[project.optional-dependencies]"
        )
        if not wanted:
            continue
        depth, index, quoted = 1, match.end(), False
        while depth:  # walk to the closing bracket, ignoring brackets inside strings
            char = text[index]
            if char == '"':
                quoted = not quoted
            elif not quoted:
                depth += {"[": 1, "]": -1}.get(char, 0)
            index += 1
        spans.append((match.end(), index - 1))
    return spans


def pin_text(text: str, version: str, siblings: set[str]) -> str:
    """``text`` (a pyproject.toml) with its version and its sibling pins set to ``version``."""
    text, count = _VERSION_LINE.subn(f'version = "{version}"', text, count=1)
    if count != 1:
        raise VersionError('no top-level `version = "..."` line to rewrite')

    def repin(match: re.Match[str]) -> str:
        requirement = match.group(1)
        if requirement_name(requirement) not in siblings:
            return match.group(0)
        pinned, marker = f"{requirement_name(requirement)}=={version}", ""
        if ";" in requirement:
            marker = " ;" + requirement.split(";", 1)[1]
        return f'"{pinned}{marker}"'

    pieces: list[str] = []
    last = 0
    for start, end in _dependency_arrays(text):
        pieces += [text[last:start], re.sub(r'"([^"]*)"', repin, text[start:end])]
        last = end
    pieces.append(text[last:])
    return "".join(pieces)


def bump(version: str, root: pathlib.Path = ROOT) -> list[pathlib.Path]:
    """Set every package to ``version`` and pin its siblings to it; return the files written."""
    if not VERSION_PATTERN.match(version):
        raise VersionError(f"{version!r} is not a X.Y.Z release version")
    members = packages(root)
    siblings = {member.name for member in members}
    written: list[pathlib.Path] = []
    for member in members:
        before = member.pyproject.read_text()
        after = pin_text(before, version, siblings)
        tomllib.loads(after)  # a bump never leaves a file TOML cannot read
        if after != before:
            member.pyproject.write_text(after)
            written.append(member.pyproject)
    return written


def main(argv: list[str]) -> int:
    """The command line described in the module docstring."""
    try:
        if not argv:
            print(workspace_version())
            return 0
        if argv[0] == "bump" and len(argv) == 2:
            for path in bump(argv[1]):
                print(f"wrote {path.relative_to(ROOT)}")
            print(f"every package is now {argv[1]}; run `uv lock` and add a CHANGELOG section")
            return 0
        if argv[0] == "check" and len(argv) in (1, 3) and argv[1:2] in ([], ["--tag"]):
            found = problems()
            if len(argv) == 3 and not found and argv[2] != f"v{workspace_version()}":
                found.append(f"tag {argv[2]!r} is not the workspace version v{workspace_version()}")
            for line in found:
                print(f"version: {line}", file=sys.stderr)
            if not found:
                print(f"version: every package is {workspace_version()}, siblings pinned")
            return 1 if found else 0
    except VersionError as exc:
        print(f"version: {exc}", file=sys.stderr)
        return 1
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
