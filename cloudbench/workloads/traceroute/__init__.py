"""MDA traceroute (scamper tracelb): params, controller, scamper-output reader, tables and
graphs, summaries and the report section."""
