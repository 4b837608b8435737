"""Who grades each submission, behind one protocol (``contract``): worker processes on this
machine (``pool``, each running ``worker``), or Dask workers (``cluster`` in the parent,
``dask_worker`` on each Dask worker)."""
