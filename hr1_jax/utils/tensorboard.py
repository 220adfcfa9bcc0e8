"""One TensorBoard writer for every stage (process 0 only, no TensorFlow needed).

Writes event files with TensorBoard's own protos: scalars as `simple_value`, text through the
text plugin (a string tensor), so both show up in `tensorboard --logdir`.
"""
from __future__ import annotations

import os
import time
from typing import Mapping

import numpy as np


def is_process_zero() -> bool:
    # Launchers may say so explicitly; otherwise ask jax only if it is already imported.
    for var in ("HR1_PROCESS_INDEX", "JAX_PROCESS_INDEX"):
        if var in os.environ:
            return os.environ[var] == "0"
    import sys
    if "jax" in sys.modules:
        try:
            return sys.modules["jax"].process_index() == 0
        except Exception:  # backend not initialised: single process
            return True
    return True


class TensorBoardWriter:
    """Scalars and text summaries under `logdir`; a no-op on processes other than 0."""

    def __init__(self, logdir: str, *, enabled: bool | None = None):
        self.logdir = logdir
        self.enabled = is_process_zero() if enabled is None else enabled
        self._writer = None
        if self.enabled:
            from tensorboard.summary.writer.event_file_writer import EventFileWriter
            os.makedirs(logdir, exist_ok=True)
            self._writer = EventFileWriter(logdir)

    def _emit(self, step: int, value) -> None:
        from tensorboard.compat.proto import event_pb2, summary_pb2
        event = event_pb2.Event(wall_time=time.time(), step=int(step),
                                summary=summary_pb2.Summary(value=[value]))
        self._writer.add_event(event)

    def scalars(self, step: int, values: Mapping[str, float]) -> None:
        if not self._writer:
            return
        from tensorboard.compat.proto import summary_pb2
        for tag, value in values.items():
            if value is None:
                continue
            value = float(np.asarray(value))
            if np.isfinite(value):
                self._emit(step, summary_pb2.Summary.Value(tag=tag, simple_value=value))

    def text(self, step: int, tag: str, text: str) -> None:
        if not self._writer:
            return
        from tensorboard.compat.proto import summary_pb2, tensor_pb2, tensor_shape_pb2, types_pb2
        tensor = tensor_pb2.TensorProto(dtype=types_pb2.DT_STRING,
                                        tensor_shape=tensor_shape_pb2.TensorShapeProto(),
                                        string_val=[text.encode("utf-8")])
        metadata = summary_pb2.SummaryMetadata(
            plugin_data=summary_pb2.SummaryMetadata.PluginData(plugin_name="text"))
        self._emit(step, summary_pb2.Summary.Value(tag=tag, metadata=metadata, tensor=tensor))

    def flush(self) -> None:
        if self._writer:
            self._writer.flush()

    def close(self) -> None:
        if self._writer:
            self._writer.flush()
            self._writer.close()
            self._writer = None

    def __enter__(self) -> "TensorBoardWriter":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def read_events(logdir: str) -> dict[str, list[tuple[int, object]]]:
    """Read back every scalar/text in `logdir` as {tag: [(step, value)]} (for tests and reports)."""
    from tensorboard.backend.event_processing.event_file_loader import EventFileLoader
    out: dict[str, list[tuple[int, object]]] = {}
    for root, _, files in os.walk(logdir):
        for name in sorted(files):
            if "tfevents" not in name:
                continue
            for event in EventFileLoader(os.path.join(root, name)).Load():
                for value in event.summary.value:
                    if value.HasField("simple_value"):
                        item = value.simple_value
                    elif value.tensor.string_val:
                        item = value.tensor.string_val[0].decode("utf-8")
                    elif value.tensor.float_val:
                        item = value.tensor.float_val[0]
                    else:
                        continue
                    out.setdefault(value.tag, []).append((event.step, item))
    return out
