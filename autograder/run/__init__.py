"""One notebook run, in the grading worker: the hardened nbgrader Execute (``execute``), the
output budget per cell (``budget``), the test cells' verdicts (``judge``) and speed tests
(``speed``)."""
