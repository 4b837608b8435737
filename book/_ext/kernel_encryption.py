"""Sphinx extension: the book's notebook kernels talk to the build over CurveZMQ.

ipykernel 7 logs "Kernel is running over TCP without encryption" when a kernel is started over
TCP without CurveZMQ keys, and the build starts one kernel per chapter. The keys are the kernel
manager's to provision: jupyter_client 8.9+ does it when its ``transport_encryption`` setting is
``"auto"`` and the kernelspec declares ``"supported_encryption": ["curve"]`` (ipykernel's does).
myst-nb starts its kernels through jupyter-cache's ``single_nb_execution``, whose keyword
arguments go to nbclient's ``NotebookClient`` and on to the kernel manager as its ``config``, but
it passes no configuration of its own. This extension passes ``KernelManager.transport_encryption
= "auto"`` through that call, so the kernels and the build share keys and nothing is sent in
plain text. Where the installed jupyter_client has no such setting, or pyzmq lacks CurveZMQ,
nothing is changed (ipykernel before 7 does not warn either).
"""

from __future__ import annotations

from functools import wraps

MARK = "_tinyprof_transport_encryption"


def encryption_available() -> bool:
    """Whether this jupyter_client can provision CurveZMQ keys and pyzmq can use them."""
    import zmq
    from jupyter_client.manager import KernelManager

    return zmq.has("curve") and "transport_encryption" in KernelManager.class_trait_names()


def with_encryption(execute):
    """``execute`` (a ``single_nb_execution``) with ``KernelManager.transport_encryption =
    "auto"`` added to the configuration it hands to nbclient; a value already given is kept."""
    if getattr(execute, MARK, False):
        return execute

    @wraps(execute)
    def run(*args, **kwargs):
        from traitlets.config import Config

        config = Config(kwargs.pop("config", None) or {})
        if "transport_encryption" not in config.KernelManager:
            config.KernelManager.transport_encryption = "auto"
        return execute(*args, config=config, **kwargs)

    setattr(run, MARK, True)
    return run


def setup(app) -> dict:
    if encryption_available():
        from myst_nb.core.execute import cache, direct

        for module in (direct, cache):   # execution modes "force"/"auto" and "cache"
            module.single_nb_execution = with_encryption(module.single_nb_execution)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
