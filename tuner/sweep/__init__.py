"""``tuner sweep``: an Optuna search over strategy sets, screened then confirmed.

One module per job: ``run`` (the command: study, trials, confirmation, outputs), ``trials`` (one trial measured on
the engine), ``study`` (storage, sampler, queued points), ``space`` (a trial's params and its configuration),
``trial_attrs`` (what a trial records), ``watchdog`` (a trial's time limit), ``confirmation`` (fresh pairs for the
screened candidates), ``decisions`` (which trials are candidates, and which candidate is confirmed), ``plans`` (each
candidate's own confirmation plan), ``power`` (what a budget can detect), ``noise`` (the power statement before
screening, from the noise of each way of measuring), ``summary`` (plain data from a study, no engine) and ``worker``
(one of many processes sharing a study).
"""
