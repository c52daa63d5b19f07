"""Traffic from files: request traces and prompt datasets, read streaming, selected and turned into requests.

``dataset`` is the experiment file's ``workload.dataset`` section, ``formats`` the one reader per file format,
``selection`` what of a file is used, ``tokens`` the prompt token ids, ``shape`` what the traffic looks like and
``replay`` puts them together for an engine.

The face lists what the rest of the tuner uses of request files; ``inspect`` is the module of the
``tuner workload inspect`` command. Nothing here reads the experiment file: its workload becomes requests in
:mod:`tuner.measure.workload`.
"""

from tuner.traffic.dataset import Dataset, Format
from tuner.traffic.replay import (
    DatasetRequests,
    TokenizerMissing,
    dataset_shape,
    engine_requests,
    model_max_len,
    read_dataset,
    trace_offsets,
)
from tuner.traffic.requests import RequestSpec
from tuner.traffic.shape import ShapeBuilder, WorkloadShape
from tuner.traffic.tokens import FIRST_ORDINARY_TOKEN
from tuner.traffic.workload_record import DatasetRecord, WorkloadRecord

__all__ = [
    "FIRST_ORDINARY_TOKEN",
    "Dataset",
    "DatasetRecord",
    "DatasetRequests",
    "Format",
    "RequestSpec",
    "ShapeBuilder",
    "TokenizerMissing",
    "WorkloadRecord",
    "WorkloadShape",
    "dataset_shape",
    "engine_requests",
    "model_max_len",
    "read_dataset",
    "trace_offsets",
]
