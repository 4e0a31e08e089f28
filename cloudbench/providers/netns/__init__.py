"""The network-namespace testbed: hosts as namespaces with their own sshd, routers, shaping, WAN.

:mod:`.provider` builds and removes it; :mod:`.shaping` turns VM types into tc
rules; :mod:`.wan` emulates links between regions with the delay lines of
:mod:`.forwarder`.
"""

from cloudbench.providers.netns.provider import NetnsProvider

__all__ = ["NetnsProvider"]
