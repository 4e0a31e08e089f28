"""Names vulture reports as unused that are used where it cannot see (tests/test_house_rules.py).

Each entry says who uses it. A definition that nothing uses is deleted, not listed here.
"""
# ruff: noqa: B018, F821

# The module protocol (PEP 562): Python calls these for `cloudbench.X` and `dir(cloudbench)`.
__getattr__
__dir__

# Dataclass fields written to JSON (asdict, to_dict) or read by users of the results, not by code.
separated  # analysis/colocation.py ColocationAudit: component pairs known apart
ar_rho  # analysis/diurnal.py DiurnalResult, in the report JSON
mw_u  # analysis/diurnal.py
mw_rank_biserial  # analysis/diurnal.py
residual_sd  # analysis/diurnal.py
phase_at_period_s  # analysis/diurnal.py DiurnalSeries: the fitted sinusoid's phase, in diurnal.json
points  # analysis/stats.py: the number of points of a fitted slope
sd_bps  # analysis/throughput.py SeriesStats
min_bps  # analysis/throughput.py SeriesStats
max_bps  # analysis/throughput.py SeriesStats
last_high  # analysis/throughput.py LevelShift
base_utc  # campaign/journal.py SlotRow: a column of the journal's slots table
ssh  # store/manifest.py host entry: the ssh user@address a user may log in with
position  # workloads/base.py Trial: its place in the repetition's random order (manifest)
median_a_ci  # analysis/compare.py Comparison and report/compare.py Row: in compare.json
median_b_ci  # same
more_per_side  # same
unit_of_analysis_a  # report/compare.py Row: in compare.json
unit_of_analysis_b  # same
threshold_value  # report/compare.py: in compare.json
threshold_relative  # same
min_n  # report/compare.py: in compare.json
comparisons  # report/compare.py CompareByResult: in compare.json
ci_note  # analysis/confirm.py Target: in confirm.json
n_required_for_ci  # same
fit_sizes  # analysis/prediction.py Prediction: in confirm.json
free_slope  # same
free_slope_sd  # same
free_slope_interval  # same
reliable_band  # same
slope_fit_sizes  # same
mixed_metadata  # report/confirm.py ConfirmDoc (TypedDict): a key of confirm.json

# Typer commands: registered by decorator, called by the CLI.
run_  # cli/campaign.py `cloudbench campaign run`
systemd  # cli/campaign.py `cloudbench campaign systemd`
validate  # cli/spec.py `cloudbench spec validate`

# Arguments that a protocol fixes (__exit__, requests' send, a Protocol method).
exc  # __exit__(self, exc_type, exc, tb)
cert  # requests.adapters.BaseAdapter.send
proxies  # requests.adapters.BaseAdapter.send
demand  # testing/pulumi.py: the Preflight protocol's check(demand)

# Pydantic: model_config is its configuration; field and model validators are registered by decorator.
model_config
_._until  # spec/schedule.py
_._tz  # spec/schedule.py
_._consistent  # spec/schedule.py
_._fields_match_shaping  # spec/vmtypes.py
_._without_empty_sweep  # store/manifest.py
_._without_unset_keys  # store/manifest.py
_._old_kind  # workloads/tbdrain/params.py

# Public API of the fan-out (remote.Remote): the fakes keep it real (tests/testing/test_fakes.py).
_.connect_all

# The fakes for users (cloudbench.testing): what the real libraries they stand in for read.
REPETITION_KINDS  # testing/adversarial.py: the kinds of repetitions, for users of the generator
_._content  # testing/cloudapis.py: requests.Response's body
_.get_token_info  # testing/cloudapis.py: google-auth credentials' method

# nox reads its options and sessions (noxfile.py).
_.sessions
_.default_venv_backend
lint
typecheck

# rich's Console reads it at every print (cli/app.py sets it after asking is_terminal).
_.soft_wrap
