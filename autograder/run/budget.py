"""What one cell may keep of what it prints and displays while the grader runs it.

A cell printing megabytes in a loop would bloat the grader's memory and the instructor's copy
of the notebook; OutputBudget admits each output message as it arrives, cuts it short at the
budget, and says afterwards what it cut.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

from nbformat import NotebookNode

from ..cells import DROPPED_MARK


@dataclass
class OutputBudget:
    """What one cell may keep: ``text`` characters printed (stdout and stderr together) and
    ``rich`` characters of displays (images, HTML). stderr text matching ``ignore`` is dropped at
    once, exactly as nbgrader's IgnorePattern would remove it after the run; when other stderr
    text is cut, a short stderr line stands in for it, so the cell is scored as it would be."""

    text: int
    rich: int
    ignore: str = ""
    printed: int = 0
    shown: int = 0
    cut_text: int = 0
    cut_rich: int = 0
    cut_stderr: bool = False

    def admit(self, msg: dict) -> dict | None:
        """The message to keep, possibly cut short, or None."""
        content = msg["content"]
        if msg["msg_type"] == "stream":
            text = content.get("text", "")
            stderr = content.get("name") == "stderr"
            if stderr and self.ignore and re.search(self.ignore, text):
                return None
            room = max(self.text - self.printed, 0)
            if len(text) > room:
                self.cut_text += len(text) - room
                self.cut_stderr |= stderr
                if room == 0:
                    return None
                msg = {**msg, "content": {**content, "text": text[:room]}}
            self.printed += min(len(text), room)
        elif msg["msg_type"] in ("display_data", "execute_result"):
            size = _size(content)
            if size > self.rich - self.shown:
                self.cut_rich += size
                return None
            self.shown += size
        return msg

    def markers(self) -> list[NotebookNode]:
        """Outputs saying what was cut (the stderr one keeps nbgrader's scoring unchanged)."""
        said = []
        if self.cut_text:
            said.append(f"this cell printed {self.printed + self.cut_text:,} characters; only "
                        f"the first {self.text:,} were kept")
        if self.cut_rich:
            said.append(f"this cell displayed {self.shown + self.cut_rich:,} characters of "
                        f"images and HTML; only the first {self.rich:,} were kept")
        outputs = [NotebookNode(output_type="stream", name="stdout",
                                text=f"\n{DROPPED_MARK}{line}]\n") for line in said]
        if self.cut_stderr:
            outputs.append(NotebookNode(output_type="stream", name="stderr",
                                        text="[stderr output cut short by the grader]\n"))
        return outputs


def _size(content: dict) -> int:
    return sum(len(v) if isinstance(v, str) else len(json.dumps(v))
               for v in content.get("data", {}).values())


__all__ = ["OutputBudget"]
