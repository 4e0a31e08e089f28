"""The colocation audit (``kind: colocation``): egress under full load, and who shares a NIC."""
