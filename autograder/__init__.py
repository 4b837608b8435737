"""Instructor tooling for the tinyprof course: release student notebooks, grade submissions.

Grading treats every submission as written by the cleverest student in the class. Each defence
sits at one stage, in one module, against named threats; a new defence goes where its threat
can first be seen.

Layers, lowest first: a module imports only modules of its own layer and of the layers listed
before it (tests/test_autograder_layers.py holds the code to this table):

    shared     cells, course, records      what every stage reads: cell kinds, the course's
                                           folders and specs, the records a worker sends back
    release    release/                    student notebooks, the student repository, home
    intake     intake/                     submissions to students, repaired, reviewed
    kernel     kernel/                     a student's kernel in its sandbox
    run        run/                        one notebook run, its verdicts and speed tests
    results    results/                    gradebook, flags, feedback, grades.csv, LMS export
    dispatch   dispatch/                   who grades: local processes, or Dask workers
    cohort     grade                       the whole cohort, in the grading parent
    commands   __main__, demo, samples,    the command line, its sample cohort, nbgrader's
               nbgrader_config             configuration of the course

Each stage below names where it runs: the grading parent (``grade``, the one process that
writes DIR), a grading worker (``dispatch.worker``, a process of ``--jobs``, here or on a Dask
worker) or the sandbox around a student's kernel. Student code runs only in the sandbox.

``intake/``, in the grading parent, before any run:

- ``collect``: every file is mapped to a student and chapter or reported; zip members that are
  unsafe (absolute, ``..``, links, long names), damaged or oversized are skipped one by one; a
  notebook that is corrupt, huge, or nested deeper than ``MAX_DEPTH`` is one unreadable row.
  *Threat*: one poisoned file aborting or corrupting a cohort's grading.

``intake/`` again, in the grading worker, before the notebook runs, once per notebook:

- ``repair``: test cells edited or deleted are restored from the release and the gradebook; the
  worker grades the repaired copy (``submitted/`` of its work folder). *Threat*: a student
  rewriting or removing the tests.

``kernel/``, the sandbox around each kernel (started by the grading worker):

- ``isolation`` (bubblewrap): no network, no host file but the environment read-only, a private
  scratch folder, its own process tree; a private, size-limited ``/dev/shm`` whose pages count
  in the kernel's memory, so the course's own process workers run; the machine's own host name
  and no variable naming the grader's folders. *Threat*: reading solutions or other students'
  work, writing grades, reaching a neighbour's kernel, leaving processes behind; an honest
  student's process workers failing only when graded; a submission that behaves differently
  when it sees it is graded.
- ``launcher`` (runs inside the sandbox): per-process rlimits, an unprivileged uid, a seccomp
  filter refusing user namespaces, setns, kernel interfaces no chapter needs and the socket
  kinds no kernel uses (all but Unix sockets, TCP over IPv4 and routing netlink). *Threat*:
  fork bombs, huge files, mounting file systems outside every limit; memory kept in UDP,
  IPv6 or netlink buffers, which no control group charges.
- ``resources``: a control group per kernel (memory, processes, equal CPU weight, CPU time);
  its memory counts the kernel's TCP buffers too (cgroup v1's own counter, made to count).
  *Threat*: a kernel whose children exceed ``--memory`` or slow its neighbour past its limit;
  memory kept in TCP buffers over the sandbox's loopback.
- ``sandbox``: the kernel manager; no descriptor of the grader's is inherited; the socket folder
  is a small tmpfs. *Threat*: writing into the grader's log, filling the host's disk.
- ``caches`` (font caches made once, mounted read-only) and ``zmqpoll`` (the worker's poll of
  the kernels' sockets) serve the others.

``run/``, in the grading worker, while the notebook runs:

- ``channel``: the one place that talks to a kernel: the grader's requests by execute request
  or on its comm, a lost answer read back, the CPU watchdog, and its own errors (gone, timed
  out, over its CPU time). *Threat*: a kernel that dies, stalls, garbles or drops a message
  mid-request.
- ``execute``: the policy over the channel: CPU-time limits per cell with a wall-clock
  backstop; a lost kernel costs only its cell; the chapter's own cells are never dropped; an
  output budget per cell (``budget``); a cell whose code raised is recorded (``raised``: the
  exception's name) and said in the notes (``results.report``), the score left to the tests.
  *Threat*: endless loops, crashes, a busy machine zeroing an honest student; a cell that
  failed only when graded passing in silence behind a full score.
- ``judge``: each test cell runs here; the kernel only runs the student's functions on the
  test's inputs and hands back plain values (``tinyprof.wire``: JSON and ``.npy``, never a
  pickle), each call a message on a comm (``tinyprof.remote``); ``records`` types the
  worker's own pipe. *Threat*: a kernel that patches ``math.isclose``, fakes its execution,
  or lies about values.
- ``speed``: a speed test's baseline runs in a clean sandboxed kernel of its own, on fresh inputs
  made here; each side is timed by its kernel's control-group CPU time over whole rounds, read
  here; every output is read back at positions, and projected whole on random signs, both
  drawn after both sides ran, and an output that is not plain data is refused here from what
  the kernel hands back; calls per block come from the baseline alone, a block is charged
  less the clean kernel's request cost, and each other part of a round its own excess.
  *Threat*: a patched clock, a slowed-down baseline, work hidden in the background,
  remembered outputs, work put off until an output is read (lazy arrays, a thread that fills
  them late, a replaced reader in the kernel), a kernel that handles the grader's requests
  more cheaply, a candidate choosing its own block.
- ``memory_check``: a leak test's loop runs in the student's kernel while a thread here reads
  the kernel's control-group memory at random times; the growth per step and its interval are
  fitted here, and the loop's losses checked at every step against a clean loop run here.
  *Threat*: memory freed around the reads, kept by a child process or in a tmpfs file, a loop
  that returns early or skips steps.
- ``pipeline_check``: an input loop's test writes a fresh data set in the kernel for a seed drawn
  here, times the loop's call from here (the round trip), checks every step's value against
  values computed here and holds the wall to its physical floor (the device's steps one at a
  time). *Threat*: a patched clock or sleep, batches dropped, skipped or reordered, data read
  by earlier cells.

``dispatch/``: who grades each submission, behind one protocol (``Dispatcher`` in ``contract``:
``run`` the tasks, ``done`` called in the grading parent for each). ``pool`` keeps ``--jobs``
``worker`` processes on this machine; with ``--scheduler``, ``cluster`` (in the grading parent)
sends each submission to a Dask worker, where ``dask_worker`` hands it to a ``worker`` process
of its own. Either way a grader lost mid-notebook is replaced and its submission tried once
more, then reported (``contract.after_loss``):

- ``cluster`` and ``dask_worker``: each worker is probed before it gets work and refuses,
  naming the reason, when its sandbox cannot start or its grader and chapters differ from the
  instructor's (a fingerprint of both); each task carries its files and brings back the shard
  and pages as size-capped bytes, which land only in that submission's folders; a submission
  merges once however often a result for it arrives. *Threat*: rows graded without a sandbox
  or by other tests on a misconfigured machine, a worker lost mid-notebook costing or doubling
  a grade, a returned path escaping DIR.

``results/``, partly in the grading worker (the submission's feedback page and notes), then in
the grading parent as each result merges (flags, gradebook, ``grades.csv``):

- ``intake.review``, in the grading parent when the result merges (``results.flags``): a
  static review of every cell the student wrote, in the copy the worker repaired (rebinding
  test helpers, patching modules, computed attribute names, history, the kernel object,
  written modules, tinyprof's private names); ``intake.tells`` lists what reads the process's
  identity or machine (a fork's process id, the call stack, /proc, the environment, the user),
  flagged as unsure. *Threat*: tampering that the run itself could hide; a submission that
  behaves differently when it sees it is graded, where the sandbox cannot hide it.
- ``flags``: the review's findings, then what the hidden tests' runtime check and the grader's
  own run left in the graded notebook; a flag is only ever added.
- ``feedback`` (worker): the page shows the notebook as handed in and the grader's verdicts,
  never what the kernel printed while graded, hidden tests removed, HTML sanitised; the
  summary messages beside each exercise (``exercises``) pass the page's redaction. *Threat*:
  hidden tests carried out through output, script in the page.
- ``report``: the notes (each hardening case met, the cells that raised when graded: in the
  page's note box, ``grades.csv`` and the summary; an exception's name only if it is Python's
  own, never text the kernel chose); spreadsheet formulas neutralised in ``grades.csv``;
  ``gradebook``: only the parent writes the cohort's gradebook. *Threat*: CSV injection, a
  forged gradebook, an error when graded behind a full score, what the kernel saw while graded
  carried out through a note.
- ``cohort_report`` (``python -m autograder report DIR``, a command of its own, after grading;
  read by the instructor alone): ``statistics`` per exercise (mean, SD, difficulty,
  discrimination, quintiles), ``mistakes`` (the hints that fired, by frequency), ``measured``
  (what the speed, busy-device and leak tests measured, from the verdict records), ``similarity``
  (copydetect over the answer cells, the release as boilerplate: pairs to look at), drawn by
  ``figures`` and written by ``page`` and ``build`` from what ``graded`` reads in DIR, into
  DIR/report. *Threat*: grades and students' code published or committed (every page carries
  the mark ``publish`` refuses, the folder its own ``.gitignore``), a similarity score taken for
  a verdict, a student's code run as HTML in the instructor's browser (escaped).
- ``export`` (a command of its own, after grading): a row not graded, timed out, unreadable or
  flagged never reaches the LMS as a number; ``lms`` fills only the chapter's cells of the LMS's
  own file, every other byte kept. *Threat*: a score nobody reviewed landing in the gradebook,
  a corrupted gradebook import, hidden tests carried out through a message.

``release/``, course tooling before any submission: ``notebooks`` makes the student notebooks
from the solutions (no solution or hidden test leaks), ``publish`` writes the student
repository, ``home`` reads the course's home from ``_config.yml``.
"""
