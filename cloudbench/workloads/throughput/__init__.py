"""Bulk throughput between host pairs (nuttcp or iperf3): params, controller, tool-output
reader, series, summaries and the report section."""
