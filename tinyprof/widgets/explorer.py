"""The explorer every tinyprof widget is: controls over a figure that redraws as they move.

Why not ``ipywidgets.interactive``: ``interactive`` draws into an Output widget by capturing
what the callback prints and displays. A client that executes the notebook (nbclient, and with
it the book build, nbval and the grader) mirrors every captured output back to the kernel as a
``comm_msg`` on the shell channel while it waits on that same channel for the cell's
``execute_reply``. jupyter_client sends it through a plain (synchronous) shadow of the asyncio
socket; the send makes libzmq process the socket's pending commands, which can consume the
wake-up of an ``execute_reply`` that has just arrived, so the client's asyncio poll sleeps
until its timeout although the reply is waiting (issue 13; ``tests/test_execution_stall.py``
reproduces it deterministically). An :class:`Explorer` never captures output: it runs ``draw``
itself and sets the Output widget's ``outputs`` from the kernel, which needs no message from
the client at all.

Each explorer also carries a static view (the text and figures of its initial state as HTML),
which the book shows and which stays readable where the widget library cannot load. Every figure
in it, and in the live output area, carries its description (:mod:`tinyprof.plots.describe`) as
its alt text.
"""

from __future__ import annotations

import contextlib
import html
import io
from contextvars import ContextVar
from typing import Any, Callable

import ipywidgets as widgets
import matplotlib.pyplot as plt
from IPython.display import display, publish_display_data

from ..plots.describe import display_bundle, figure_description, figure_png, image_html

LAYOUT = {"width": "480px"}
STYLE = {"description_width": "150px"}
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"

_FIGURES: ContextVar[list | None] = ContextVar("tinyprof_explorer_figures", default=None)


def show(fig) -> None:
    """Show ``fig`` and free it: inside an explorer's ``draw`` it becomes one of the explorer's
    figures; anywhere else it is displayed in the current output. Either way its description
    (:func:`~tinyprof.plots.describe.figure_description`) goes with it as alt text."""
    png, description = figure_png(fig), figure_description(fig)
    plt.close(fig)
    figures = _FIGURES.get()
    if figures is None:
        publish_display_data(*display_bundle(png, description))
    else:
        figures.append((fig, png, description))


class Explorer(widgets.VBox):
    """Controls above an output area; ``draw(**values)`` renders the state for the controls'
    values by printing text and calling :func:`show` for figures, and returns a result.

    Attributes after each draw: ``result`` (what ``draw`` returned), ``text`` (what it
    printed), ``figures`` (the matplotlib Figures it showed, already closed), ``images``
    (the same as PNG bytes) and ``descriptions`` (their alt texts), ``draws`` (how many draws
    have run); ``controls`` maps each keyword of ``draw`` to its control and ``kwargs`` holds
    their current values. A failing redraw
    shows its error in the output area (and in ``text``) instead of leaving a stale figure.
    """

    def __init__(self, draw: Callable[..., Any], **controls: widgets.ValueWidget):
        self._draw = draw
        self.controls = dict(controls)
        for control in self.controls.values():
            if hasattr(control, "layout"):
                control.layout = widgets.Layout(**LAYOUT)
                control.style = STYLE
        self.out = widgets.Output()
        super().__init__(children=[*self.controls.values(), self.out])
        self.result: Any = None
        self.text = ""
        self.figures: list = []
        self.images: list[bytes] = []
        self.descriptions: list[str] = []
        self.draws = 0
        self.update()
        for control in self.controls.values():
            control.observe(self._redraw, names="value")

    @property
    def kwargs(self) -> dict[str, Any]:
        """The controls' current values, by ``draw`` keyword."""
        return {name: control.value for name, control in self.controls.items()}

    def update(self) -> None:
        """Run ``draw`` for the current values and put its text and figures on show."""
        printed, shown = io.StringIO(), []
        token = _FIGURES.set(shown)
        try:
            with contextlib.redirect_stdout(printed):
                self.result = self._draw(**self.kwargs)
        finally:
            _FIGURES.reset(token)
        self.text = printed.getvalue()
        self.figures = [fig for fig, _, _ in shown]
        self.images = [png for _, png, _ in shown]
        self.descriptions = [description for _, _, description in shown]
        self.draws += 1
        self.out.outputs = tuple(self._outputs())

    def _redraw(self, change: dict) -> None:
        try:
            self.update()
        except Exception as error:  # noqa: BLE001 - shown to the reader, not swallowed
            self.result, self.figures, self.images, self.descriptions = None, [], [], []
            self.text = f"{type(error).__name__}: {error}\n"
            self.out.outputs = ({"output_type": "stream", "name": "stderr", "text": self.text},)

    def _outputs(self) -> list[dict]:
        outputs = []
        if self.text:
            outputs.append({"output_type": "stream", "name": "stdout", "text": self.text})
        for png, description in zip(self.images, self.descriptions):
            data, metadata = display_bundle(png, description)
            outputs.append({"output_type": "display_data", "metadata": metadata, "data": data})
        return outputs

    # -- display: the live widget, with its static view beside it ---------------------------
    def static_html(self) -> str:
        """The current state as plain HTML: the settings, the printed text and the figures."""
        settings = ", ".join(f"{getattr(c, 'description', name) or name} = {_shown(c.value)}"
                             for name, c in self.controls.items())
        figures = "".join(image_html(png, description)
                          for png, description in zip(self.images, self.descriptions))
        text = f"<pre>{html.escape(self.text)}</pre>" if self.text else ""
        note = (f"Static view at {html.escape(settings)}. Run the notebook (Binder, Colab or "
                "locally) to move the controls.")
        return (f'<div class="tinyprof-explorer-static"><p><em>{note}</em></p>{text}{figures}'
                "</div>")

    def _repr_mimebundle_(self, include=None, exclude=None, **kwargs) -> dict:
        bundle = {"text/plain": f"Explorer({self.kwargs})",
                  "text/html": self.static_html()}
        if self.model_id:
            bundle[WIDGET_VIEW] = {"version_major": 2, "version_minor": 0,
                                   "model_id": self.model_id}
        return bundle

    def _ipython_display_(self, **kwargs) -> None:
        display(self._repr_mimebundle_(), raw=True)


def _shown(value: Any) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)


__all__ = ["Explorer", "figure_png", "show"]
