"""Traffic from files: request traces and prompt datasets, read streaming, selected and turned into requests.

``dataset`` is the experiment file's ``workload.dataset`` section, ``formats`` the one reader per file format,
``selection`` what of a file is used, ``tokens`` the prompt token ids, ``shape`` what the traffic looks like and
``replay`` puts them together for an engine.
"""
