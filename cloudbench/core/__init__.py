"""Vocabulary every layer shares, with no I/O beyond small helpers: topology and host
labels, units, geodesy, the cloud catalogue and prices, clusters, pair selection,
files, tables, processes and network namespaces."""
