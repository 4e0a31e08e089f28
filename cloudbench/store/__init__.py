"""The result store: :mod:`.rundir` (a run on disk), :mod:`.manifest` (typed manifest),
:mod:`.parquet` (versioned Parquet), :mod:`.summaries` (one value per repetition, metric
and group) and :mod:`.formats` (every file's version and history, in one place)."""
