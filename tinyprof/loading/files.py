"""The data set as files: one small PNG per sample in class folders, as image data sets ship.

:func:`write_image_folder` writes tinyprof's digits (``tinyprof/data/digits.npz``, 1,797 8×8
images of pixel counts 0–16) as ``folder/<label>/<index>.png``: 8-bit grayscale, each pixel
stored as count × :data:`PIXEL_SCALE` (0–240, so the files look like digits in an image viewer)
and decoded back exactly by :func:`decode_png` (stored value / 15). Pillow (``PIL.Image``, which
matplotlib already depends on) encodes and decodes; decoding a file is mostly Python (opening,
identifying the format, parsing the PNG chunks), which is why threads do not speed it up.
"""

from __future__ import annotations

import io
import os
from pathlib import Path

import numpy as np

from ..models.datasets import digits_arrays

#: Pixel counts 0–16 are stored as 0–240 (× 15): exact both ways, and visible in a viewer.
PIXEL_SCALE = 15
#: Side of a digit image, in pixels.
SIDE = 8


def encode_png(image: np.ndarray) -> bytes:
    """The PNG bytes of an 8×8 image of pixel counts 0–16 (stored as count × 15)."""
    from PIL import Image

    pixels = np.asarray(image, dtype=np.uint8).reshape(SIDE, SIDE) * np.uint8(PIXEL_SCALE)
    buffer = io.BytesIO()
    Image.fromarray(pixels, mode="L").save(buffer, format="PNG")
    return buffer.getvalue()


def decode_png(data: bytes) -> np.ndarray:
    """The (8, 8) uint8 pixel counts of PNG ``data`` written by :func:`encode_png`."""
    from PIL import Image

    with Image.open(io.BytesIO(data)) as image:
        pixels = np.asarray(image.convert("L"), dtype=np.uint8)
    if pixels.shape != (SIDE, SIDE):
        raise ValueError(f"expected an {SIDE}×{SIDE} digit, got an image of {pixels.shape}")
    return pixels // np.uint8(PIXEL_SCALE)


def sample_path(folder: str | os.PathLike, label: int, index: int) -> Path:
    """Where sample ``index`` of class ``label`` lives: ``folder/<label>/<index>.png`` (the index
    zero-padded to 4 digits, so a sorted listing is in index order within a class)."""
    return Path(folder) / str(int(label)) / f"{int(index):04d}.png"


def write_image_folder(folder: str | os.PathLike, count: int | None = None) -> list[Path]:
    """Write the first ``count`` digits (all 1,797 by default) as one PNG per sample in class
    folders under ``folder``; return the paths in sample order. Existing files are overwritten,
    nothing outside ``folder`` is written."""
    images, labels = digits_arrays()
    count = len(labels) if count is None else int(count)
    if not 0 < count <= len(labels):
        raise ValueError(f"count must be between 1 and {len(labels)}, got {count}")
    return write_images(folder, images[:count], labels[:count])


def write_images(folder: str | os.PathLike, images: np.ndarray,
                 labels: np.ndarray) -> list[Path]:
    """Write ``images`` (pixel counts 0–16, 64 each) as ``folder/<label>/<index>.png``, index
    = position in ``images``; return the paths in that order."""
    paths = []
    for index, (image, label) in enumerate(zip(images, labels)):
        path = sample_path(folder, label, index)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(encode_png(image))
        paths.append(path)
    return paths


def list_image_folder(folder: str | os.PathLike) -> list[tuple[Path, int]]:
    """Every ``(path, label)`` under ``folder``, ordered by the sample index in the file name
    (the order :func:`write_image_folder` wrote them in)."""
    found = [(path, int(path.parent.name)) for path in Path(folder).glob("*/*.png")
             if path.parent.name.isdigit()]
    if not found:
        raise FileNotFoundError(f"no <label>/<index>.png files under {folder} "
                                "(write them with write_image_folder)")
    return sorted(found, key=lambda item: int(item[0].stem))
