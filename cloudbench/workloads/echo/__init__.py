"""All-pairs TCP echo RTT (StormCloud's design): params, controller, raw-file reader,
observations as arrays, summaries and the report section."""
