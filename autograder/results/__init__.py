"""What comes out of grading: the gradebook (``gradebook``), feedback pages (``feedback``,
``exercises``), runtime flags (``flags``), ``grades.csv`` and the summary (``report``), and the
export to an LMS (``export``, ``lms``)."""
