"""Traffic from files: request traces and prompt datasets, read streaming, selected and turned into requests.

``dataset`` is the experiment file's ``workload.dataset`` section, ``formats`` the one reader per file format,
``selection`` what of a file is used, ``tokens`` the prompt token ids, ``shape`` what the traffic looks like and
``replay`` puts them together for an engine.

The face lists what the rest of the tuner uses of request files. Two modules are imported by name instead:
``workload``, which turns an experiment's ``workload`` section into requests (it reads the experiment's config),
and ``inspect``, the module of the ``tuner workload inspect`` command.
"""

from tuner.traffic.dataset import Dataset, Format
from tuner.traffic.replay import TokenizerMissing, model_max_len, read_dataset
from tuner.traffic.requests import RequestSpec
from tuner.traffic.shape import WorkloadShape
from tuner.traffic.workload_record import WorkloadRecord

__all__ = [
    "Dataset",
    "Format",
    "RequestSpec",
    "TokenizerMissing",
    "WorkloadRecord",
    "WorkloadShape",
    "model_max_len",
    "read_dataset",
]
