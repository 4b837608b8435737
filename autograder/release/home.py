"""The course's home: the one repository every launch link and install line points at.

It is set in one place, the ``repository`` section of ``_config.yml`` (``url`` and ``branch``),
which also drives the book's Binder, Colab, repository and issue buttons. ``python -m
autograder release`` rewrites every course link in the sources to follow it: each chapter's
Binder and Colab links, its Colab install cell, and the clone and install lines of README.md and
book/. An instructor who forks the course changes ``_config.yml``, runs the release, and is
done. Only links of these shapes are rewritten; a link to any other project is left alone.

Out of the box the home is ``tinyprof/tinyprof``, the repository that holds ``solutions/``.
:func:`home_warning` says so (and names a placeholder or this checkout's own repository just as
plainly), and ``make book``, ``python -m autograder release`` and ``publish`` print it.
"""

from __future__ import annotations

import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

import yaml

from .. import course

NAME = r"[A-Za-z0-9_.-]+"
BRANCH = r"[A-Za-z0-9_./-]+"
NOTEBOOK = r"notebooks/[A-Za-z0-9_./-]+\.ipynb"
#: The files whose course links follow the home (relative to the repository).
SOURCES = ("README.md", "book/*.md", "solutions/*/*.ipynb")
#: The course's upstream repository (owner, name): it holds solutions/ and hidden tests.
UPSTREAM = ("tinyprof", "tinyprof")
#: What each course link is, as the home warning counts them.
LAUNCH, INSTALL_CELL, CLONE = ("Binder and Colab links", "Colab install cells",
                               "clone or install lines")
#: Owner or repository names that stand for "put yours here" rather than a real repository.
PLACEHOLDER = re.compile(r"(?i)(your|my)[-_]?\w*|owner|user(name)?|org(anization)?|example|"
                         r"placeholder|change[-_]?me|todo|name|repo(sitory)?|x+")


@dataclass(frozen=True)
class CourseHome:
    """A GitHub repository and branch, and the links into it."""

    owner: str
    name: str
    branch: str

    @property
    def url(self) -> str:
        return f"https://github.com/{self.owner}/{self.name}"

    def binder(self, notebook: str) -> str:
        """Binder link that opens ``notebook`` in JupyterLab."""
        return (f"https://mybinder.org/v2/gh/{self.owner}/{self.name}/{self.branch}"
                f"?urlpath=lab/tree/{notebook}")

    def colab(self, notebook: str) -> str:
        """Colab link that opens ``notebook`` from the repository."""
        return (f"https://colab.research.google.com/github/{self.owner}/{self.name}/blob/"
                f"{self.branch}/{notebook}")


def read_home(root: Path = course.REPO_ROOT) -> CourseHome:
    """The home set in ``root/_config.yml``; a clear error if it is missing or not GitHub."""
    config_file = root / "_config.yml"
    repository = (yaml.safe_load(config_file.read_text(encoding="utf-8")) or {}).get(
        "repository") or {}
    url, branch = str(repository.get("url", "")), str(repository.get("branch", "main"))
    found = re.fullmatch(rf"https://github\.com/({NAME})/({NAME}?)(\.git)?/?", url)
    if not found or not re.fullmatch(BRANCH, branch):
        raise ValueError(f"{config_file}: repository.url must be https://github.com/OWNER/NAME "
                         f"and repository.branch a branch name, got url={url!r}, "
                         f"branch={branch!r}")
    return CourseHome(found.group(1), found.group(2), branch)


def _links(home: CourseHome) -> list[tuple[str, str, object]]:
    """(kind, pattern, replacement) for every shape of course link ``point_at`` rewrites."""
    gh = rf"https://github\.com/{NAME}/{NAME}?"
    return [
        (LAUNCH, rf"https://mybinder\.org/v2/gh/{NAME}/{NAME}/{BRANCH}\?urlpath=lab/tree/"
                 rf"({NOTEBOOK})", lambda m: home.binder(m.group(1))),
        (LAUNCH, rf"https://colab\.research\.google\.com/github/{NAME}/{NAME}/blob/{BRANCH}?/"
                 rf"({NOTEBOOK})", lambda m: home.colab(m.group(1))),
        (INSTALL_CELL, rf"git\+{gh}@{BRANCH}", lambda m: f"git+{home.url}@{home.branch}"),
        (CLONE, rf"git\+{gh}\.git", lambda m: f"git+{home.url}.git"),
        (CLONE, rf"git clone {gh}\.git(\s+cd {NAME})?",
         lambda m: f"git clone {home.url}.git" + (f"\ncd {home.name}" if m.group(1) else "")),
    ]


def point_at(text: str, home: CourseHome) -> str:
    """``text`` with every course link (Binder, Colab, pip install, git clone) at ``home``."""
    for _, pattern, replacement in _links(home):
        text = re.sub(pattern, replacement, text)
    return text


def apply_home(root: Path = course.REPO_ROOT) -> list[Path]:
    """Rewrite the course links of every source file under ``root``; returns the files that
    changed."""
    home = read_home(root)
    changed = []
    for pattern in SOURCES:
        for path in sorted(root.glob(pattern)):
            text = path.read_text(encoding="utf-8")
            pointed = point_at(text, home)
            if pointed != text:
                path.write_text(pointed, encoding="utf-8")
                changed.append(path)
    return changed


def home_warning(root: Path = course.REPO_ROOT) -> str | None:
    """Why students must not be sent to the home set in ``root/_config.yml``, or None.

    The home is wrong while it is the course's upstream ``tinyprof/tinyprof`` or this checkout's
    own GitHub repository (a ``git remote``) and ``root`` holds ``solutions/``: students would
    launch from, and clone, the repository with the solutions and hidden tests. It is unfinished
    while its owner or name is a placeholder such as ``your-university``. The message counts the
    links students would follow there and says how to fix it."""
    home = read_home(root)
    has_solutions = (root / "solutions").is_dir()
    if (home.owner.lower(), home.name.lower()) == UPSTREAM and has_solutions:
        what = "the course's upstream repository, which holds solutions/"
    elif any(PLACEHOLDER.fullmatch(part) or part.isupper() for part in (home.owner, home.name)):
        what = "a placeholder"
    elif has_solutions and (remote := _remote_named(root, home)):
        what = f"this checkout's own repository (git remote {remote}), which holds solutions/"
    else:
        return None
    counted = "".join(f", {n} {kind}" for kind, n in count_links(root, home).items() if n)
    return (f"the course's home is github.com/{home.owner}/{home.name} (repository.url in "
            f"_config.yml), {what}. These point there: the book's launch buttons"
            f"{counted}. Students must launch from the student repository: publish it "
            "(python -m autograder publish ../students) and push it, set repository.url in "
            "_config.yml to it, and run python -m autograder release.")


def count_links(root: Path, home: CourseHome) -> dict[str, int]:
    """How many course links of each kind that students see in ``root`` (the student notebooks,
    README.md, the book's pages) point at ``home``."""
    counts = {kind: 0 for kind, _, _ in _links(home)}
    for pattern in ("notebooks/*/*.ipynb", "README.md", "book/*.md"):
        for path in sorted(root.glob(pattern)):
            text = path.read_text(encoding="utf-8")
            for kind, link, at_home in _links(home):
                counts[kind] += sum(at_home(m) == m.group(0) for m in re.finditer(link, text))
    return counts


def _remote_named(root: Path, home: CourseHome) -> str | None:
    """The name of a git remote of ``root`` that is the GitHub repository ``home``, or None."""
    try:
        listed = subprocess.run(["git", "-C", str(root), "remote", "-v"], capture_output=True,
                                text=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return None
    for line in listed.stdout.splitlines():
        name, _, url = line.partition("\t")
        found = re.search(rf"github\.com[:/]({NAME}?)/({NAME}?)(\.git)?(\s|/?$)", url)
        if found and (found.group(1).lower(), found.group(2).lower()) == (
                home.owner.lower(), home.name.lower()):
            return name
    return None
