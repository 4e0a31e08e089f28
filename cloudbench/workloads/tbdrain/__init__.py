"""Token-bucket drain (Uta et al.): params, controller (the throughput worker), summaries and
the report section."""
