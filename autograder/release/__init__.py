"""Course tooling apart from grading: the student notebooks made from the solutions
(``notebooks``), the student repository (``publish``) and the course's home (``home``)."""
