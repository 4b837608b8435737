"""The course's home: the one repository every launch link and install line points at.

It is set in one place, the ``repository`` section of ``_config.yml`` (``url`` and ``branch``),
which also drives the book's Binder, Colab, repository and issue buttons. ``python -m
autograder release`` rewrites every course link in the sources to follow it: each chapter's
Binder and Colab links, its Colab install cell, and the clone and install lines of README.md and
book/. An instructor who forks the course changes ``_config.yml``, runs the release, and is
done. Only links of these shapes are rewritten; a link to any other project is left alone.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import yaml

from . import course

NAME = r"[A-Za-z0-9_.-]+"
BRANCH = r"[A-Za-z0-9_./-]+"
NOTEBOOK = r"notebooks/[A-Za-z0-9_./-]+\.ipynb"
#: The files whose course links follow the home (relative to the repository).
SOURCES = ("README.md", "book/*.md", "solutions/*/*.ipynb")


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


def point_at(text: str, home: CourseHome) -> str:
    """``text`` with every course link (Binder, Colab, pip install, git clone) at ``home``."""
    gh = rf"https://github\.com/{NAME}/{NAME}?"
    rules = [
        (rf"https://mybinder\.org/v2/gh/{NAME}/{NAME}/{BRANCH}\?urlpath=lab/tree/({NOTEBOOK})",
         lambda m: home.binder(m.group(1))),
        (rf"https://colab\.research\.google\.com/github/{NAME}/{NAME}/blob/{BRANCH}?/({NOTEBOOK})",
         lambda m: home.colab(m.group(1))),
        (rf"git\+{gh}@{BRANCH}", lambda m: f"git+{home.url}@{home.branch}"),
        (rf"git\+{gh}\.git", lambda m: f"git+{home.url}.git"),
        (rf"git clone {gh}\.git(\s+cd {NAME})?",
         lambda m: f"git clone {home.url}.git" + (f"\ncd {home.name}" if m.group(1) else "")),
    ]
    for pattern, replacement in rules:
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
