"""``python -m autograder report DIR``: what a graded cohort got wrong, and what deserves a look.

Read after ``grade`` wrote DIR, never re-running anything: ``graded`` reads grades.csv and the
graded, handed-in and released notebooks; ``statistics`` gives each exercise its mean, SD,
difficulty, discrimination and quintile scores; ``mistakes`` counts the named mistakes (the
hints the hidden tests printed) and groups the other failures by message; ``measured`` reads
what the speed, busy-device and leak tests measured (the judge's verdict record);
``similarity`` lists pairs of submissions whose answer cells are unusually alike (copydetect,
the release's code as boilerplate); ``figures`` draws them; ``assemble`` gathers one
assignment's parts, ``page`` renders its HTML, and ``build`` writes a page per assignment and
an index into DIR/report, kept out of git and out of every publish.
"""
