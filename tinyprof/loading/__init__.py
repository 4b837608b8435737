"""Chapter 09's wing: the input pipeline, a device that waits for data, and the fixes.

* :mod:`.files` — the digits written as one PNG per sample in class folders, and Pillow's
  decoder (:func:`~.files.write_image_folder`, :func:`~.files.decode_png`);
* :mod:`.storage` — a storage with a first-byte latency and a bandwidth, simulated with sleeps
  (:class:`~.storage.Storage`, :data:`~.storage.LOCAL_DISK`, :data:`~.storage.NETWORK_FS`,
  :data:`~.storage.OBJECT_STORE`);
* :mod:`.dataset` — list, read, decode, augment and batch (:class:`~.dataset.ImageFolder`);
* :mod:`.timeline` — every host and device event with its thread, the device's utilization, the
  input-wait fraction, throughput, and the Chrome trace (:class:`~.timeline.Timeline`);
* :mod:`.device` — an asynchronous device: a worker thread with a queue (:class:`~.device.Device`);
* :mod:`.cache` — decoded samples kept in memory, and what they cost
  (:class:`~.cache.CachedImageFolder`, :func:`~.cache.cache_bytes`);
* :mod:`.prefetch` — loading ahead into a bounded queue (:class:`~.prefetch.Prefetcher`);
* :mod:`.workers` — loading with worker processes or threads (:class:`~.workers.Workers`);
* :mod:`.model` — step time and utilization predicted from stage times (:func:`~.model.predict`);
* :mod:`.loop` — the loop that ties them together on one timeline (:func:`~.loop.run`).
"""

from .cache import CachedImageFolder, cache_bytes
from .dataset import Batch, ImageFolder, augment, batch_plan
from .device import Device
from .files import decode_png, encode_png, list_image_folder, write_image_folder
from .loop import Run, run
from .model import Check, Prediction, check, predict
from .prefetch import Prefetcher
from .storage import LOCAL_DISK, NETWORK_FS, OBJECT_STORE, Storage
from .timeline import (
    Event,
    Timeline,
    busy_seconds,
    device_utilization,
    input_wait_fraction,
    throughput,
    wall_seconds,
)
from .workers import Workers, loading_seconds

__all__ = ["LOCAL_DISK", "NETWORK_FS", "OBJECT_STORE", "Batch", "CachedImageFolder", "Check",
           "Device", "Event", "ImageFolder", "Prediction", "Prefetcher", "Run", "Storage",
           "Timeline", "Workers", "augment", "batch_plan", "busy_seconds", "cache_bytes",
           "check", "decode_png", "device_utilization", "encode_png", "input_wait_fraction",
           "list_image_folder", "loading_seconds", "predict", "run", "throughput",
           "wall_seconds", "write_image_folder"]
