"""``ImageBatchIter``: mini-batches of images loaded and augmented in the background."""

from __future__ import annotations

import multiprocessing
import os
import queue
import random
import threading
import traceback

import numpy as np

__all__ = ["ImageBatchIter"]


def _read_list(path: str, delimiter: str):
    """Entries ``(image path, meta or None)`` and whether every meta is a class index."""
    entries = []
    with open(path, encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, 1):
            line = line.rstrip("\r\n")
            if not line.strip():
                continue
            parts = line.split(delimiter, 1) if delimiter else line.split(None, 1)
            img = parts[0].strip()
            if not img:
                raise ValueError(f"{path}:{lineno}: empty image path")
            meta = parts[1].strip() if len(parts) > 1 else None
            entries.append((img, meta))
    if not entries:
        raise ValueError(f"{path} lists no images")
    is_index = all(m is not None and m.isdigit() for _, m in entries)
    return entries, is_index


def _to_chw(img) -> np.ndarray:
    """A PIL image (converted to RGB) or an array (C, H, W) as float32 (C, H, W)."""
    if isinstance(img, np.ndarray):
        if img.ndim != 3:
            raise ValueError(f"image_transform returned an array of shape {img.shape}; "
                             "expected (C, H, W)")
        return img.astype(np.float32, copy=False)
    return np.asarray(img.convert("RGB"), dtype=np.float32).transpose(2, 0, 1)


def _produce(entries, is_index, batch_size, transform, shuffle, folder, out, stop):
    """Worker loop: put ``("batch", x, y)`` into ``out`` until ``stop`` is set."""
    try:
        rng = random.Random()
        order = list(entries)
        if shuffle:
            rng.shuffle(order)
        k = 0
        while not stop.is_set():
            xs, ys = [], []
            while len(xs) < batch_size:
                path, meta = order[k]
                full = os.path.join(folder, path) if folder else path
                images = transform(full)
                if len(xs) + len(images) > batch_size:
                    raise ValueError(f"image_transform gave {len(images)} images for {full}; "
                                     f"they do not fit in the {batch_size - len(xs)} places "
                                     f"left in the batch of {batch_size}")
                for img in images:
                    xs.append(_to_chw(img))
                    ys.append(int(meta) if is_index else meta)
                k += 1
                if k == len(order):
                    k = 0
                    if shuffle:
                        rng.shuffle(order)
            item = ("batch", np.stack(xs),
                    np.asarray(ys, dtype=np.int32) if is_index else ys)
            while not stop.is_set():
                try:
                    out.put(item, timeout=0.1)
                    break
                except queue.Full:
                    continue
    except BaseException:
        try:
            out.put(("error", traceback.format_exc()), timeout=5)
        except Exception:
            pass


class ImageBatchIter:
    """Iterate over mini-batches of images listed in a text file, loading in the background.

    Each line of ``img_list_file`` is ``<image path><delimiter><meta>``; the meta is usually
    the class index. ``image_transform(path)`` returns a list of images (PIL images, converted
    to RGB, or (C, H, W) arrays) made from one file, e.g. its augmented crops. ``next(it)``
    returns ``(x, y)``: x float32 (batch_size, C, H, W); y int32 when every meta is an integer,
    else the list of meta strings. The list is cycled forever (reshuffled each pass when
    ``shuffle``); at most ``capacity`` batches wait in the queue.

    Call :meth:`start` before the first ``next`` and :meth:`end` when done (or use ``with``).
    ``worker="process"`` (SINGA's choice) loads in a separate process; ``worker="thread"``
    uses a thread, for transforms that cannot be sent to a process.
    """

    def __init__(self, img_list_file, batch_size, image_transform, shuffle=True, delimiter=" ",
                 image_folder=None, capacity=10, *, worker="process"):
        if int(batch_size) < 1:
            raise ValueError(f"batch_size must be positive, got {batch_size}")
        if worker not in ("process", "thread"):
            raise ValueError(f"worker must be 'process' or 'thread', got {worker!r}")
        self.img_list_file = img_list_file
        self.batch_size = int(batch_size)
        self.image_transform = image_transform
        self.shuffle = bool(shuffle)
        self.delimiter = delimiter
        self.image_folder = image_folder
        self.capacity = int(capacity)
        self.worker = worker
        self.entries, self.is_label_index = _read_list(img_list_file, delimiter)
        self.num_samples = len(self.entries)
        self.p = None
        self._queue = None
        self._stop = None

    def start(self):
        """Start the background loader."""
        if self.p is not None:
            raise RuntimeError("ImageBatchIter.start() called twice; call end() first")
        if self.worker == "process":
            ctx = multiprocessing.get_context()
            self._queue, self._stop = ctx.Queue(self.capacity), ctx.Event()
            runner = ctx.Process
        else:
            self._queue, self._stop = queue.Queue(self.capacity), threading.Event()
            runner = threading.Thread
        self.p = runner(target=_produce, daemon=True,
                        args=(self.entries, self.is_label_index, self.batch_size,
                              self.image_transform, self.shuffle, self.image_folder,
                              self._queue, self._stop))
        self.p.start()

    def __iter__(self):
        return self

    def __next__(self):
        if self.p is None:
            raise RuntimeError("call ImageBatchIter.start() before next()")
        while True:
            try:
                item = self._queue.get(timeout=0.5)
                break
            except queue.Empty:
                if not self.p.is_alive():
                    raise RuntimeError("the ImageBatchIter loader stopped without a "
                                       "reason (killed?)") from None
        if item[0] == "error":
            self.end()
            raise RuntimeError(f"the ImageBatchIter loader failed:\n{item[1]}")
        return item[1], item[2]

    def end(self):
        """Stop the background loader and wait for it."""
        if self.p is None:
            return
        self._stop.set()
        try:  # drain so that a process blocked on put() can see the stop flag
            while True:
                self._queue.get_nowait()
        except (queue.Empty, OSError, ValueError):
            pass
        self.p.join(timeout=5)
        if isinstance(self.p, multiprocessing.process.BaseProcess):
            if self.p.is_alive():
                self.p.terminate()
                self.p.join()
            self._queue.close()
            self._queue.cancel_join_thread()
        self.p = None

    def __enter__(self):
        self.start()
        return self

    def __exit__(self, *exc):
        self.end()

    def __del__(self):
        try:
            self.end()
        except Exception:
            pass
