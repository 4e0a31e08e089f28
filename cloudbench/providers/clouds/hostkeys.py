"""``host_keys: generated``: read the host key each VM made itself, before connecting to it.

The VM's cloud-init prints its ed25519 public key to the console between
``-----BEGIN SSH HOST KEY KEYS-----`` lines (GCP: serial port 1); GCP's guest agent
publishes the keys it makes as the guest attribute ``hostkeys/ssh-ed25519``, but
cloudbench tells it to make none (see :func:`gcp_fetcher`). Both come from the cloud's API (over TLS,
authenticated), not from the VM's SSH port, so the key is trusted before the first
connection, as an injected one is. A :data:`Fetcher` returns the key once it is
published (None until then); :func:`wait_for_host_keys` polls all VMs.

The real fetchers use the clouds' SDKs (boto3; google-cloud-compute; azure-mgmt-compute +
azure-identity), imported on use; tests pass fakes.
"""

from __future__ import annotations

import time
import urllib.request
from collections.abc import Callable, Mapping
from typing import Any

from cloudbench.errors import ProvisionError
from cloudbench.providers.clouds.common import host_key_from_console, import_sdk

Fetcher = Callable[[Mapping[str, Any]], "str | None"]
"""A host's output record (``id``, ``zone``, ``region``) -> its published ed25519 key, or None yet."""


def wait_for_host_keys(cloud: str, stack: str, records: Mapping[str, Mapping[str, Any]], fetch: Fetcher,
                       timeout: float, poll: float = 10.0,
                       clock: Callable[[], float] = time.monotonic,
                       sleep: Callable[[float], None] = time.sleep) -> dict[str, str]:
    """Every host's published key; a :class:`ProvisionError` naming the hosts still silent at ``timeout``."""
    keys: dict[str, str] = {}
    deadline = clock() + timeout
    while True:
        for name, rec in records.items():
            if name in keys:
                continue
            try:
                key = fetch(rec)
            except Exception as e:  # the SDK's errors: say which VM and why
                raise ProvisionError(cloud, stack, f"cannot read the host key of {name}: "
                                     f"{type(e).__name__}: {e}") from e
            if key:
                if not key.startswith("ssh-ed25519 "):
                    raise ProvisionError(cloud, stack, f"{name} published {key[:40]!r}, not an ed25519 key")
                keys[name] = " ".join(key.split()[:2])
        if len(keys) == len(records):
            return keys
        if clock() >= deadline:
            silent = sorted(set(records) - set(keys))
            raise ProvisionError(cloud, stack, f"no host key published after {timeout:.0f} s by "
                                 f"{', '.join(silent)} (console output; GCP also guest attributes); "
                                 "use host_keys: injected, or look at the VM's serial console")
        sleep(poll)


def _sdk(module: str, package: str, cloud: str) -> Any:
    return import_sdk(module, package, cloud, "-", "host_keys: generated")


def aws_fetcher(session: Any = None) -> Fetcher:
    """The key from the EC2 instance's console output (``GetConsoleOutput``, latest), where
    cloud-init prints it; a boto3 session is made when none is given."""
    session = session or _sdk("boto3", "boto3", "aws").session.Session()

    def fetch(rec: Mapping[str, Any]) -> str | None:
        ec2 = session.client("ec2", region_name=rec["region"])
        out = ec2.get_console_output(InstanceId=rec["id"], Latest=True).get("Output") or ""
        return host_key_from_console(out)

    return fetch


def gcp_fetcher(project: str, client: Any = None) -> Fetcher:
    """The key from the VM's guest attribute ``hostkeys/ssh-ed25519``, else its serial console.

    cloudbench tells the guest agent not to make host keys (``set_host_keys = false``,
    :data:`~cloudbench.providers.clouds.common.GCE_AGENT_CONFIG`), so cloud-init's key is the
    one sshd presents and cloud-init's ``keys_to_console`` prints it to serial port 1. The
    agent publishes the guest attribute only when it made the keys itself (an image that
    ignores the setting); its keys are then the final ones, so the attribute wins.
    """
    client = client or _sdk("google.cloud.compute_v1", "google-cloud-compute", "gcp").InstancesClient()

    def fetch(rec: Mapping[str, Any]) -> str | None:
        instance = str(rec["id"]).split("/")[-1]
        try:
            attrs = client.get_guest_attributes(request={"project": project, "zone": rec["zone"],
                                                         "instance": instance, "query_path": "hostkeys/"})
        except Exception as e:
            if "NotFound" not in type(e).__name__ and "404" not in str(e):
                raise
            attrs = None  # none published (the agent made no key), or not yet
        for item in getattr(getattr(attrs, "query_value", None), "items", []) or []:
            if item.key == "ssh-ed25519":
                return f"ssh-ed25519 {item.value.split()[-1] if ' ' in item.value else item.value}"
        out = client.get_serial_port_output(request={"project": project, "zone": rec["zone"],
                                                     "instance": instance, "port": 1})
        return host_key_from_console(getattr(out, "contents", "") or "")

    return fetch


def azure_fetcher(subscription: str, client: Any = None,
                  get: Callable[[str], str] | None = None) -> Fetcher:
    """The key from the VM's serial console log (boot diagnostics, downloaded from the SAS URL
    Azure hands out), where cloud-init prints it; ``get`` replaces the download in tests."""
    if client is None:
        identity = _sdk("azure.identity", "azure-identity", "azure")
        compute = _sdk("azure.mgmt.compute", "azure-mgmt-compute", "azure")
        client = compute.ComputeManagementClient(identity.DefaultAzureCredential(), subscription)

    def download(url: str) -> str:
        with urllib.request.urlopen(url, timeout=60) as r:  # a SAS URL of the serial log
            return str(r.read().decode(errors="replace"))

    get = get or download

    def fetch(rec: Mapping[str, Any]) -> str | None:
        parts = str(rec["id"]).split("/")  # /subscriptions/…/resourceGroups/RG/providers/…/virtualMachines/VM
        group, vm = parts[parts.index("resourceGroups") + 1], parts[-1]
        data = client.virtual_machines.retrieve_boot_diagnostics_data(group, vm)
        url = getattr(data, "serial_console_log_blob_uri", None)
        return host_key_from_console(get(url)) if url else None

    return fetch
