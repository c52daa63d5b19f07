"""``tuner sweep``: an Optuna search over strategy sets, screened then confirmed.

One module per job: ``run`` (the command: study, trials, confirmation, outputs), ``trials`` (the study loop: a
trial's configuration recorded, measured, its record written), ``engines`` (the running engine reused or restarted,
a trial's time limit), ``measuring`` (a trial's arms: restart pairs, run-level pairs, step blocks; a confirmation
look's fresh pairs), ``trial_record`` (a trial's record made in one call from its configuration and arms), ``study``
(storage, sampler, queued points), ``space`` (a trial's params and its configuration), ``trial_attrs`` and
``study_attrs`` (what a trial and a study record), ``screening`` (which trials are candidates), ``slo_checks`` (SLOs
and non-inferiority on a CI), ``confirmation`` (fresh pairs for the screened candidates), ``decisions`` (which
candidate is confirmed), ``plans`` (each candidate's own confirmation plan), ``power_statements`` (what a budget can
detect), ``noise`` (the power statement before screening, from the noise of each way of measuring), ``summary``
(plain data from a study, no engine) and ``worker`` (one of many processes sharing a study). The package face lists
what the command line and the other wings use.
"""

from tuner.sweep.run import run_sweep
from tuner.sweep.summary import summarize_shared_study, summarize_study
from tuner.sweep.worker import run_worker

__all__ = [
    "run_sweep",
    "run_worker",
    "summarize_shared_study",
    "summarize_study",
]
