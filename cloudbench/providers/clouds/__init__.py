"""Fresh VMs on AWS, GCP and Azure through Pulumi.

:mod:`.automation` adapts Pulumi's Automation API (stacks, leases, the reaper);
:mod:`.common` holds what the three programs share (names, firewall rules,
cloud-init, outputs); :mod:`.programs` holds one Pulumi program per cloud.
"""
