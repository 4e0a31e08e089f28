"""Echo observations from a run's Parquet files, as arrays labelled with latency groups."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from cloudbench.analysis.latency import EchoData
from cloudbench.core.topology import GROUP_ORDER, HostSpec, classify_pair
from cloudbench.errors import ResultError
from cloudbench.store.manifest import Manifest
from cloudbench.store.parquet import read_parquet
from cloudbench.store.rundir import RunDir, iter_observation_files


def load_echo(run: RunDir, manifest: Manifest, workload: str = "echo") -> EchoData:
    """Read a run's echo Parquet files and label every row with its latency group."""
    labels = {(rep, name): HostSpec(name, lab["provider"], lab["region"], lab["zone"], lab["subnet"],
                                    lab["vm_type"])
              for (rep, name), lab in manifest.labels().items()}
    host_names = sorted({n for _, n in labels})
    host_idx = {n: i for i, n in enumerate(host_names)}
    cols: dict[str, list[np.ndarray]] = {k: [] for k in
                                         ("repetition", "trial", "round", "src", "dst", "send_us",
                                          "rtt_us", "timeout", "warmup", "group")}
    trials: list[str] = []
    for path in iter_observation_files(run, workload):
        t = read_parquet(path, kind="echo")
        trials.append(path.stem)
        n = t.num_rows
        rep = t.column("repetition").to_numpy().astype(np.int64)
        src_names = _strings(t.column("src"))
        dst_names = _strings(t.column("dst"))
        src = np.array([host_idx.get(s, -1) for s in src_names], dtype=np.int64)
        dst = np.array([host_idx.get(s, -1) for s in dst_names], dtype=np.int64)
        if (src < 0).any() or (dst < 0).any():
            raise ResultError(str(path), "names hosts that the manifest does not list")
        # Classify each distinct (repetition, src, dst) once, then broadcast to rows.
        keys, inv = np.unique(np.stack([rep, src, dst]), axis=1, return_inverse=True)
        codes = np.array([
            GROUP_ORDER.index(classify_pair(labels[(int(r), host_names[int(a)])],
                                            labels[(int(r), host_names[int(b)])]))
            for r, a, b in keys.T
        ], dtype=np.int64)
        grp = codes[inv.reshape(-1)] if n else np.empty(0, dtype=np.int64)
        rtt = t.column("rtt_ns")
        cols["repetition"].append(rep)
        cols["trial"].append(np.full(n, len(trials) - 1, dtype=np.int64))
        cols["round"].append(t.column("round").to_numpy().astype(np.int64))
        cols["src"].append(src)
        cols["dst"].append(dst)
        cols["send_us"].append(t.column("send_us").to_numpy().astype(np.int64))
        cols["rtt_us"].append(pc.divide(pc.cast(rtt, pa.float64()), 1000.0).to_numpy(zero_copy_only=False)
                              .astype(float))
        cols["timeout"].append(t.column("timeout").to_numpy(zero_copy_only=False).astype(bool))
        cols["warmup"].append(t.column("warmup").to_numpy(zero_copy_only=False).astype(bool))
        cols["group"].append(grp)
    arrays = {k: (np.concatenate(v) if v else np.empty(0)) for k, v in cols.items()}
    return EchoData(
        repetition=arrays["repetition"].astype(np.int64),
        trial=arrays["trial"].astype(np.int64),
        round=arrays["round"].astype(np.int64),
        src=arrays["src"].astype(np.int64),
        dst=arrays["dst"].astype(np.int64),
        send_us=arrays["send_us"].astype(np.int64),
        rtt_us=arrays["rtt_us"].astype(float),
        timeout=arrays["timeout"].astype(bool),
        warmup=arrays["warmup"].astype(bool),
        group=arrays["group"].astype(np.int64),
        hosts=host_names,
        trials=trials,
    )


def _strings(col: pa.ChunkedArray) -> list[str]:
    if pa.types.is_dictionary(col.type):
        col = col.cast(pa.string())
    return [str(x) for x in col.to_pylist()]
