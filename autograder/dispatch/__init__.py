"""Who grades each submission: worker processes on this machine (``pool``, each running
``worker``), or Dask workers (``cluster``)."""
