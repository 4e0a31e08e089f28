"""Fakes for fast tests of specs and extensions: no hosts, no SSH, no cloud, no root.

cloudbench's own tests use them, and so can yours (a workload kind, a provider,
an analysis over your results). Nothing in the package imports this one.

:mod:`cloudbench.testing.fakes` — :class:`~cloudbench.testing.fakes.FakeProvider`
    A provider that records ``provision``/``destroy`` and can be told to fail;
    its hosts are unreachable, so alone it drives the runner's failure paths::

        provider = FakeProvider()
        CampaignRunner(spec, "spec.yaml", tmp_path, provider_factory=lambda _name: provider).execute()
        assert provider.destroyed == provider.provisioned  # nothing left running

:mod:`cloudbench.testing.remote` — :class:`~cloudbench.testing.remote.FakeRemote`
    A :class:`~cloudbench.remote.Remote` that answers commands from rules
    (command regex, host glob → stdout, stderr, exit code, or a function that
    may write the host's files), keeps files in a dict and records every call;
    an unscripted command raises :class:`~cloudbench.testing.remote.UnscriptedCommandError`::

        fake = FakeRemote(cluster)
        fake.on(r"facts\\.py", stdout='{"kernel": "6.8"}')
        fake.on(r"echo\\.py run", host="s1-3", exit_code=1, stderr="boom")
        fake.on(r"echo\\.py run", reply=my_worker)  # a function writing the worker's output file
        outcome = await kind.run(TrialContext(trial, params, spec, cluster, fake, run, "token"))
        assert [f.host for f in outcome.failures] == ["s1-3"] and fake.commands("s1-1")

    Code that opens its own ``Remote(cluster)`` takes it through
    :meth:`~cloudbench.testing.remote.FakeRemote.factory`, e.g.
    ``CampaignRunner(..., remote_factory=fake.factory)``; with ``FakeProvider`` that
    runs a whole campaign offline (``wait_ready`` opens its own: monkeypatch
    ``cloudbench.providers.ready.Remote``).

:mod:`cloudbench.testing.pulumi` — :class:`~cloudbench.testing.pulumi.FakeAutomation`
    Pulumi's Automation API for the cloud provider, without the Pulumi CLI: records
    ``stack``/``up``/``destroy``/``remove``, answers ``up`` with outputs shaped
    like the programs', fails on request (``on_up``, ``fail_destroy``)::

        auto = FakeAutomation()
        cluster = fake_cloud_provider(auto, spec, tmp_path).provision(spec.topology(), tmp_path / spec.name / "r")
        assert ("up", cluster.stack) in auto.events and auto.config[cluster.stack]

:mod:`cloudbench.testing.fake_results` — synthetic result directories
    Campaigns of runs with known summary values and metadata (manifest schema 1
    and ``summaries.parquet``), for analyses and reports::

        root = make_campaign(tmp_path, "demo", [FakeRun({("rtt_p50_us", "same_zone"): [101.0, 99.5, 100.2]})])
        result = cloudbench.confirm(root)

    ``write_echo_run`` writes a run of the echo workload with synthetic observations
    in today's Parquet layout (every latency group, warm-up, timeouts, a slow tail,
    lost rows and a level shift), for reports, ``cloudbench.open`` and other engines::

        run = write_echo_run(tmp_path / "quickstart", repetitions=2, rounds=2000)
        groups = cloudbench.open(run.path).table("echo", "groups")
"""
