"""A student's kernel in its sandbox: bubblewrap (``isolation``), a control group per kernel
(``resources``), rlimits and seccomp inside (``launcher``, run there by ``python -S``), the
kernel manager that starts it all (``sandbox``), the caches kernels share read-only
(``caches``) and the grader's zmq poll (``zmqpoll``)."""
