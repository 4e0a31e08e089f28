"""Scheduled campaigns: many runs of one spec over days, journaled, exactly once.

``campaign start`` plans the slots (:mod:`.planner`) and writes the journal
(:mod:`.journal`) into the campaign directory (:mod:`.setup`); ``campaign run`` is
the long-running process (:mod:`.daemon`) that starts each slot's run with
:class:`cloudbench.runner.CampaignRunner`, one at a time, and after a crash resumes
where the journal and the runs' manifests say it stopped.
"""
