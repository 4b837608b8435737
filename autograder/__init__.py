"""Instructor tooling for the tinyprof course: release student notebooks, grade submissions.

Grading treats every submission as written by the cleverest student in the class. Each defence
sits at one stage, in one module, against named threats; a new defence goes where its threat
can first be seen.

Before the run, in the grading parent (never touched by student code):

- ``intake``: every file is mapped to a student and chapter or reported; zip members that are
  unsafe (absolute, ``..``, links, long names), damaged or oversized are skipped one by one; a
  notebook that is corrupt, huge, or nested deeper than ``MAX_DEPTH`` is one unreadable row.
  *Threat*: one poisoned file aborting or corrupting a cohort's grading.
- ``repair``: test cells edited or deleted are restored from the release and the gradebook.
  *Threat*: a student rewriting or removing the tests.
- ``integrity``: a static review of every cell the student wrote (rebinding test helpers,
  patching modules, computed attribute names, history, the kernel object, written modules,
  tinyprof's private names). *Threat*: tampering that the run itself could hide.

In the sandbox, around each kernel:

- ``isolation`` (bubblewrap): no network, no host file but the environment read-only, a private
  scratch folder, its own process tree. *Threat*: reading solutions or other students' work,
  writing grades, reaching a neighbour's kernel, leaving processes behind.
- ``launcher``: per-process rlimits, an unprivileged uid, a seccomp filter refusing user
  namespaces, setns and kernel interfaces no chapter needs. *Threat*: fork bombs, huge files,
  mounting file systems outside every limit.
- ``resources``: a control group per kernel (memory, processes, equal CPU weight, CPU time).
  *Threat*: a kernel whose children exceed ``--memory`` or slow its neighbour past its limit.
- ``sandbox``: no descriptor of the grader's is inherited; the socket folder is a small tmpfs.
  *Threat*: writing into the grader's log, filling the host's disk.

While the notebook runs, in the grading worker:

- ``execute``: CPU-time limits per cell with a wall-clock backstop; a lost kernel costs only
  its cell; the chapter's own cells are never dropped; an output budget per cell (``budget``).
  *Threat*: endless loops, crashes, a busy machine zeroing an honest student.
- ``judge``: each test cell runs here; the kernel only runs the student's functions on the
  test's inputs and hands back plain values (``records`` types the worker's own pipe).
  *Threat*: a kernel that patches ``math.isclose``, fakes its execution, or lies about values.
- ``speed``: a speed test's baseline runs in a clean sandboxed kernel of its own, on fresh inputs
  made here; each side is timed by its kernel's control-group CPU time over whole rounds, read
  here, and every output is read back at positions drawn after both sides ran. *Threat*: a
  patched clock, a slowed-down baseline, work hidden in the background, remembered outputs.

Across machines, with ``--scheduler`` (a Dask cluster):

- ``cluster``: each worker is probed before it gets work and refuses, naming the reason, when
  its sandbox cannot start or its grader and chapters differ from the instructor's (a
  fingerprint of both); each task carries its files and brings back the shard and pages as
  size-capped bytes, which land only in that submission's folders; a submission merges once
  however often a result for it arrives. *Threat*: rows graded without a sandbox or by other
  tests on a misconfigured machine, a worker lost mid-notebook costing or doubling a grade, a
  returned path escaping DIR.

After the run:

- ``feedback``: the page shows the notebook as handed in and the grader's verdicts, never what
  the kernel printed while graded, hidden tests removed, HTML sanitised. *Threat*: hidden tests
  carried out through output, script in the page.
- ``report``: spreadsheet formulas neutralised in ``grades.csv``; ``gradebook``: only the parent
  writes the cohort's gradebook. *Threat*: CSV injection, a forged gradebook.
- ``export`` (a command of its own, after grading): a row not graded, timed out, unreadable or
  flagged never reaches the LMS as a number; ``lms`` fills only the chapter's cells of the LMS's
  own file, every other byte kept; the summary messages beside each exercise (``exercises``)
  pass the page's redaction. *Threat*: a score nobody reviewed landing in the gradebook, a
  corrupted gradebook import, hidden tests carried out through a message.
"""
