"""Pure analysis functions: statistics, latency, repetitions."""
