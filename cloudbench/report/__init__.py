"""Reports from the result store: :mod:`.build` (report.json's content), :mod:`.render`
(terminal), :mod:`.files` (report.json, CSV, figures on disk), :mod:`.confirm` (the
repetition analysis on disk) and :mod:`.cost` (the plan's cost section)."""
