"""Before the run, in the grading parent: files to students (``collect``), test cells put back
(``repair``), and the static review of what the student wrote (``review``)."""
