"""``tuner sweep``: an Optuna search over strategy sets, screened then confirmed.

One module per job: ``run`` (the command: study, trials, confirmation, outputs), ``trials`` (one trial measured on
the engine), ``study`` (storage, sampler, queued points), ``space`` (a trial's params and its configuration),
``trial_attrs`` (what a trial records), ``confirmation`` (fresh pairs for the screened candidates), ``decisions``
(the statistics that nominate, confirm and state power), ``summary`` (plain data from a study, no engine) and
``worker`` (one of many processes sharing a study).
"""
