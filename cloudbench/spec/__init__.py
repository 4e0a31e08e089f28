"""The campaign spec: line-located YAML (:mod:`.located`), field types (:mod:`.fields`),
section models (:mod:`.providers`, :mod:`.vmtypes`, :mod:`.wan`, :mod:`.workload`),
the whole spec (:mod:`.model`), checks across it (:mod:`.checks`, :mod:`.clouds`) and
the loader (:mod:`.loader`). Workload kinds bind their parameters through
:mod:`cloudbench.workloads`, so this layer imports none of them.
"""
