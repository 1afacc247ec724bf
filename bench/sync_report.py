"""The sync bench's report: markdown tables of medians over the repeats and their ratios.

Every ratio is tillage's median over the other tool's median (the repeats are paired: each
runs every lane in turn). The targets of issue 22 come first, each marked PASS or MISS.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable
from typing import Any

from sync_base import MIB

BUSY_LOAD = 0.5  # 1-minute load average above which the machine was not quiet
PHASE_TITLES = {
    "cold_push": "cold push",
    "clone": "cold clone",
    "incr_push": "incremental push",
    "incr_pull": "incremental pull",
}
TRANSPORT_LANES = {
    "dir": ("tillage-dir", "rsync-local", "restic-dir"),
    "ssh": ("tillage-ssh", "rsync-ssh", "restic-sftp"),
    "s3": ("tillage-s3", "restic-s3"),
}
TRANSPORT_TITLES = {
    "dir": "Folder (a directory remote on the same disk; rsync into a local folder; a local "
    "restic repository)",
    "ssh": "SSH on loopback (our sshd on 127.0.0.1; rsync over the same ssh; restic's sftp "
    "backend through the same client)",
    "s3": "S3 (moto on 127.0.0.1, through the counting proxy)",
}
# Issue 22: (what, numerator lane, denominator lane, phase, target).
RATIO_TARGETS = (
    ("cold push, tillage-ssh / rsync-ssh", "tillage-ssh", "rsync-ssh", "cold_push", 1.5),
    ("cold push, tillage-dir / restic-dir", "tillage-dir", "restic-dir", "cold_push", 1.0),
    ("cold push, tillage-s3 / restic-s3", "tillage-s3", "restic-s3", "cold_push", 1.0),
    ("clone, tillage-s3 / restic-s3", "tillage-s3", "restic-s3", "clone", 1.5),
)
REQUESTS_TARGET = 1.0  # requests per MiB sent, tillage-s3's cold push
METHODS = ("GET", "HEAD", "PUT", "POST", "DELETE")


def med(values: list[float]) -> float | None:
    return statistics.median(values) if values else None


def ratio(a: float | None, b: float | None) -> str:
    return f"{a / b:.2f}x" if a is not None and b else ""


def mib(v: float | None) -> str:
    return "" if v is None else f"{v / MIB:.2f}"


def num(v: float | None, fmt: str = ".2f") -> str:
    return "" if v is None else f"{v:{fmt}}"


def markdown(header: list[str], rows: list[list[str]]) -> str:
    out = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    out += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(out)


class Medians:
    """Medians over the repeats of what the lanes' steps recorded."""

    def __init__(self, repeats: list[dict[str, Any]]) -> None:
        self.repeats = repeats

    def ran(self, lane: str) -> bool:
        return any(lane in r["steps"] for r in self.repeats)

    def steps(self, lane: str, label: str) -> list[dict[str, Any]]:
        return [
            r["steps"][lane][label]
            for r in self.repeats
            if lane in r["steps"] and label in r["steps"][lane]
        ]

    def step(self, lane: str, label: str, key: str) -> float | None:
        return med([s[key] for s in self.steps(lane, label) if s.get(key) is not None])

    def fact(self, lane: str, label: str, key: str) -> float | None:
        vals = [s["facts"].get(key) for s in self.steps(lane, label)]
        return med([v for v in vals if v is not None])

    def counted(self, lane: str, label: str) -> list[dict[str, Any]]:
        """The S3 proxy's counts of the step, per repeat (none off S3)."""
        return [s["facts"]["requests"] for s in self.steps(lane, label) if "requests" in s["facts"]]

    def requests(self, lane: str, label: str) -> float | None:
        return med([c["requests"] for c in self.counted(lane, label)])

    def method(self, lane: str, label: str, method: str) -> float | None:
        return med([c["methods"].get(method, 0) for c in self.counted(lane, label)])

    def per_mib(self, lane: str, label: str) -> float | None:
        """Requests per MiB of request bodies (a push) or of answers (a clone, a pull)."""
        out = []
        for req in self.counted(lane, label):
            moved = req["body_up_bytes"] if "push" in label else req["body_down_bytes"]
            if moved:
                out.append(req["requests"] / (moved / MIB))
        return med(out)

    def remote(self, lane: str) -> float | None:
        return med([r["remote_bytes"][lane] for r in self.repeats if lane in r["remote_bytes"]])

    def peak_rss(self, lane: str) -> float | None:
        peaks = [
            max(s["max_rss_kib"] for s in r["steps"][lane].values())
            for r in self.repeats
            if r["steps"].get(lane)
        ]
        return max(peaks) * 1024 if peaks else None


def title(lane: str) -> str:
    return {"rsync-local": "rsync -a", "rsync-ssh": "rsync -a", "restic-sftp": "restic sftp"}.get(
        lane, lane.split("-", maxsplit=1)[0]
    )


def comparison_table(m: Medians, lanes: list[str], transport: str, floor_kib: int) -> str:
    """One transport's rows: tillage against the other tools, medians over the repeats."""
    till, refs = lanes[0], lanes[1:]
    rows: list[list[str]] = []

    def row(
        label: str,
        get: Callable[[str], float | None],
        fmt: str = ".2f",
        note: str = "",
        ratios: bool = True,
        cell: Callable[[str], str] | None = None,
    ) -> None:
        values = {lane: get(lane) for lane in lanes}
        shown = [
            cell(lane) if cell else (mib(values[lane]) if fmt == "mib" else num(values[lane], fmt))
            for lane in lanes
        ]
        ratios = ratios and till.startswith("tillage")
        rs = [ratio(values[till], values[r]) if ratios else "" for r in refs]
        rows.append([label, *shown, *rs, note])

    def cpu(label: str) -> Callable[[str], str]:
        def show(lane: str) -> str:
            u, s = m.step(lane, label, "user_s"), m.step(lane, label, "sys_s")
            return "" if u is None or s is None else f"{u:.2f} / {s:.2f}"

        return show

    new = med([r["new_data"]["files_bytes"] for r in m.repeats if r.get("new_data")])
    for label, phase in PHASE_TITLES.items():
        up = "push" in label
        row(f"{phase} (s)", lambda lane, lb=label: m.step(lane, lb, "seconds"), note=NOTES[label])
        row("↳ user / sys CPU, this side (s)", lambda _l: None, ratios=False, cell=cpu(label))
        key = "bytes_sent" if up else "bytes_received"
        row(
            f"↳ {'sent' if up else 'received'} (MiB)",
            lambda lane, lb=label, k=key: m.fact(lane, lb, k),
            "mib",
            BYTES_NOTES[label],
        )
        if up:
            row(
                "↳ objects sent / already there",
                lambda _l: None,
                ratios=False,
                cell=lambda lane, lb=label: (
                    f"{m.fact(lane, lb, 'objects_sent'):.0f} / "
                    f"{m.fact(lane, lb, 'objects_reused') or 0:.0f}"
                    if m.fact(lane, lb, "objects_sent") is not None
                    else ""
                ),
                note="tillage's uploaded_objects / reused_objects",
            )
        if label == "incr_push" and new:
            row(
                "↳ sent / new data",
                lambda lane: per_new(m.fact(lane, "incr_push", "bytes_sent"), new),
                ".3f",
                f"new data = {mib(new)} MiB (whole changed and added files + the appended log)",
            )
        if transport == "ssh":
            wire = "wire_sent" if up else "wire_received"
            row(
                f"↳ on the wire, ssh {'sent' if up else 'received'} (MiB)",
                lambda lane, lb=label, w=wire: m.fact(lane, lb, w),
                "mib",
                "the ssh client's own count (its sessions' Transferred: lines)",
            )
        if transport == "s3":
            row(
                "↳ requests",
                lambda lane, lb=label: m.requests(lane, lb),
                ".0f",
                "through the counting proxy, medians",
            )
            row(
                "↳ by method",
                lambda _l: None,
                ratios=False,
                cell=lambda lane, lb=label: ", ".join(
                    f"{meth} {v:.0f}"
                    for meth in METHODS
                    if (v := m.method(lane, lb, meth) or 0) > 0
                ),
            )
            row(
                f"↳ requests per MiB {'sent' if up else 'received'}",
                lambda lane, lb=label: m.per_mib(lane, lb),
                ".2f",
                "requests / MiB of request bodies"
                if up
                else "requests / MiB of the answers' bodies",
            )
    row(
        "remote after the cold push (MiB)",
        m.remote,
        "mib",
        "du -sb of the remote folder; S3: the bucket's objects (listed)",
    )
    row(
        "remote set up (s)",
        lambda lane: m.step(lane, "remote_add", "seconds"),
        note="`till remote add URL` (writes the key check there); `restic init`",
    )
    row(
        "from an unsealed folder (s)",
        lambda lane: sum_or_none(
            [m.step(lane, s, "seconds") for s in ("seal", "remote_add", "cold_push")]
            if lane.startswith("tillage")
            else [m.step(lane, s, "seconds") for s in ("remote_add", "cold_push")]
            if lane.startswith("restic")
            else [m.step(lane, "cold_push", "seconds")]
        ),
        note=f"tillage: `till watch --no-daemon` {num(m.step(till, 'seal', 'seconds'))} + remote "
        "add + push; restic: init + backup; rsync: the push",
    )
    row(
        "peak RSS, this side (MiB)",
        m.peak_rss,
        "mib",
        "the largest ru_maxrss of the lane's processes here (the far side's is not counted); "
        f"a child's starts at the bench's own RSS at the fork, {floor_kib / 1024:.1f} MiB, so a "
        "figure at that floor means at most that",
    )
    header = ["measure", *[title(lane) for lane in lanes]]
    header += [f"tillage/{title(r)}" for r in refs] + ["note"]
    return markdown(header, rows)


def per_new(sent: float | None, new: float) -> float | None:
    return None if sent is None else sent / new


def sum_or_none(values: list[float | None]) -> float | None:
    return None if any(v is None for v in values) else sum(v for v in values if v is not None)


NOTES = {
    "cold_push": "tillage: `till sync --push` (folder sealed, remote added before); rsync into "
    "an empty folder; restic: `backup .` (init before)",
    "clone": "`till clone URL DEST --key K`; rsync back into a new folder; "
    "`restic restore latest --target DEST`",
    "incr_push": "after the standard mutate: `till sync --push` (it seals the change first); "
    "rsync of the folder again; `restic backup .` again",
    "incr_pull": "`till sync --pull` (fast-forward) on the clone; rsync back again; restic has "
    "no comparable step",
}
BYTES_NOTES = {
    "cold_push": "tillage: uploaded_bytes; rsync: --stats bytes sent; restic: what the "
    "repository grew by",
    "clone": "tillage's clone reports no byte count; rsync: the --stats bytes that carried "
    "the files",
    "incr_push": "as for the cold push",
    "incr_pull": "tillage: fetched_bytes; rsync as for the clone",
}


def summary_table(m: Medians) -> str:
    """Cold push, clone and the push after the mutate, per transport: every lane's median
    seconds and tillage's ratios."""
    rows = []
    for transport, lanes in TRANSPORT_LANES.items():
        ran = [lane for lane in lanes if m.ran(lane)]
        if not ran:
            continue
        for label in ("cold_push", "clone", "incr_push"):
            secs = {lane: m.step(lane, label, "seconds") for lane in lanes}
            till = secs[lanes[0]]
            rsync = secs.get(lanes[1]) if transport != "s3" else None
            restic = secs[lanes[-1]]
            rows.append(
                [
                    PHASE_TITLES[label],
                    transport,
                    num(till),
                    num(rsync) if transport != "s3" else "—",
                    num(restic),
                    ratio(till, rsync) if transport != "s3" else "—",
                    ratio(till, restic),
                ]
            )
    header = ["step", "transport", "tillage (s)", "rsync -a (s)", "restic (s)"]
    return markdown([*header, "tillage/rsync", "tillage/restic"], rows)


def targets_table(m: Medians, scale: float) -> tuple[str, list[str]]:
    """Issue 22's targets, each PASS or MISS (or not measured); the verdicts too."""
    rows = []
    verdicts = []
    smoke = f" (scale {scale:g}: not the standard workload)" if scale != 1.0 else ""
    for what, num_lane, den_lane, label, target in RATIO_TARGETS:
        a = m.step(num_lane, label, "seconds")
        b = m.step(den_lane, label, "seconds")
        if a is None or b is None or not b:
            rows.append([what, num(a), num(b), "", f"≤ {target:g}x", "not measured"])
            verdicts.append("not measured")
            continue
        verdict = ("PASS" if a / b <= target else "MISS") + smoke
        verdicts.append(verdict)
        rows.append([what, f"{a:.2f} s", f"{b:.2f} s", f"{a / b:.2f}x", f"≤ {target:g}x", verdict])
    per = m.per_mib("tillage-s3", "cold_push")
    reqs = m.requests("tillage-s3", "cold_push")
    if per is None:
        rows.append(
            ["requests per MiB sent, tillage-s3 cold push", "", "", "", "≤ 1", "not measured"]
        )
        verdicts.append("not measured")
    else:
        sent = m.fact("tillage-s3", "cold_push", "bytes_sent")
        verdict = ("PASS" if per <= REQUESTS_TARGET else "MISS") + smoke
        verdicts.append(verdict)
        rows.append(
            [
                "requests per MiB sent, tillage-s3 cold push",
                f"{reqs:.0f} requests",
                f"{mib(sent)} MiB",
                f"{per:.2f} / MiB",
                f"≤ {REQUESTS_TARGET:g} / MiB",
                verdict,
            ]
        )
    header = ["target (issue 22)", "tillage", "reference", "measured", "target", "verdict"]
    return markdown(header, rows), verdicts


def proxy_lines(repeats: list[dict[str, Any]]) -> list[str]:
    """The proxy's overhead, measured once: the same step direct to moto and through it."""
    check = next((r["proxy_check"] for r in repeats if r.get("proxy_check")), None)
    if not check:
        return []
    parts = []
    for lane, by_label in check.items():
        for label, c in by_label.items():
            direct, proxied, n = c["direct_s"], c["proxied_s"], c["requests"]
            per = (proxied - direct) / n * 1000 if n else 0.0
            parts.append(
                f"{lane} {PHASE_TITLES[label]} {proxied:.2f} s through it, {direct:.2f} s "
                f"direct ({(proxied / direct - 1) * 100:+.0f}%, {n} requests: "
                f"{per:+.2f} ms a request)"
            )
    return [
        "The counting proxy's overhead, measured once (repeat 1, the same step again straight "
        "to moto, right after the one through the proxy): " + "; ".join(parts) + "."
    ]


def kinds_lines(m: Medians) -> list[str]:
    """What the S3 requests of a cold push and a clone were for (the first repeat's)."""
    out = []
    for lane in TRANSPORT_LANES["s3"]:
        for label in ("cold_push", "clone", "incr_push"):
            steps = m.steps(lane, label)
            if not steps:
                continue
            if "requests" not in steps[0]["facts"]:
                continue
            kinds = steps[0]["facts"]["requests"]["kinds"]
            shown = ", ".join(f"{k} {n}" for k, n in sorted(kinds.items(), key=lambda kv: -kv[1]))
            out.append(f"{lane} {PHASE_TITLES[label]} requests by kind (repeat 1): {shown}")
    return out


def follow_table(repeats: list[dict[str, Any]], poll_s: float) -> str:
    rows: list[list[str]] = []
    for lane, name in FOLLOW_TITLES.items():
        found = [r["follow"][lane] for r in repeats if lane in r["follow"]]
        samples = [s for f in found for s in f["samples"]]
        if not samples:
            continue
        seal = [s["seal_to_visible_s"] for s in samples]
        write = [s["write_to_visible_s"] for s in samples]
        snap = [s["snap_s"] for s in samples]
        rows.append(
            [
                name,
                found[0]["mode"],
                str(len(samples)),
                f"{statistics.median(seal):.2f}",
                f"{min(seal):.2f} .. {max(seal):.2f}",
                f"{statistics.median(write):.2f}",
                f"{statistics.median(snap):.2f}",
            ]
        )
    header = [
        "transport",
        f"how (poll {poll_s:g} s)",
        "samples",
        "seal → visible on B, median (s)",
        "min .. max (s)",
        "write → visible, median (s)",
        "`till snap` on A (s)",
    ]
    return markdown(header, rows)


FOLLOW_TITLES = {
    "tillage-dir": "directory",
    "tillage-ssh": "ssh (loopback)",
    "tillage-s3": "s3 (moto, proxied)",
}


def follower_lines(repeats: list[dict[str, Any]]) -> list[str]:
    """What the followers did over the run, per transport and side (summed over repeats)."""
    out: list[str] = []
    for lane in FOLLOW_TITLES:
        found = [r["follow"][lane] for r in repeats if r["follow"].get(lane, {}).get("followers")]
        if not found:
            continue
        parts = []
        for side, index in (("A", 0), ("B", 1)):
            runs = [f["followers"][index] for f in found]
            pulled: dict[str, int] = {}
            for run in runs:
                for key, n in run["pulled"].items():
                    pulled[key] = pulled.get(key, 0) + n
            shown = ", ".join(f"{k} {n}" for k, n in sorted(pulled.items()))
            took = {
                kind: [t for run in runs for t in run["cycle_seconds"][kind]]
                for kind in ("pushed", "fast_forwarded", "idle")
            }
            durations = ", ".join(
                f"{kind.replace('_', '-')} {statistics.median(ts):.2f} s"
                for kind, ts in took.items()
                if ts
            )
            parts.append(
                f"{side} {sum(r['cycles'] for r in runs)} cycles (pulled: {shown}; pushed "
                f"{sum(r['pushed'] for r in runs)}; paused {sum(r['paused'] for r in runs)}; "
                f"errors {sum(r['errors'] for r in runs)}; a cycle took, median: {durations})"
            )
        exits = [f.get("follow_exit") for f in found]
        out.append(f"{lane} followers: " + "; ".join(parts) + f"; exit statuses {exits}")
    return out


def new_data_line(nd: dict[str, int]) -> str:
    return (
        f"The standard mutate: {nd['edited']} files edited ({mib(nd['edited_whole_bytes'])} MiB "
        f"as whole files, {nd['edited_line_bytes'] / 1024:.1f} KiB of changed lines), "
        f"{nd['added']} added ({nd['added_bytes'] / 1024:.1f} KiB), {nd['deleted']} deleted, "
        f"{mib(nd['appended_bytes'])} MiB appended to the log. New data: "
        f"{mib(nd['files_bytes'])} MiB as whole files plus the append "
        f"({mib(nd['files_zstd3_bytes'])} MiB after zstd -3, file by file), "
        f"{mib(nd['lines_bytes'])} MiB as changed lines plus the added files and the append."
    )


def report(results: dict[str, Any]) -> str:
    machine = results["machine"]
    stats = results["workload"]
    repeats = results["repeats"]
    v = results["versions"]
    m = Medians(repeats)
    lines = [
        f"Command: `{results['command']}`",
        f"Machine: {machine['nproc']} CPUs ({machine['cpu']}), {machine['memory']}, "
        f"{machine['python']}, {machine['platform']}, scratch dir on {machine['workdir_fs']}, "
        f"load {machine['load_before']:.2f} at start, {machine.get('load_after', 0):.2f} at "
        "the end (1-minute averages)",
        f"Versions: {v['tillage']} at {v['tillage_commit']} (from {v['tillage_source']}), "
        f"bench/sync.py at {v['commit']}; {v['rsync']}; {v['restic']}; {v['ssh']}; "
        f"moto {v['moto']}",
        f"Workload: {stats['files']} files, {stats['bytes'] / MIB:.1f} MiB (seed {stats['seed']}, "
        f"scale {stats['scale']}); medians of {len(repeats)} repeats, lanes in rotated order: "
        + ", ".join(results["lanes"]),
    ]
    if stats["scale"] != 1.0:
        lines.append("NOTE: scale != 1.0 — a smoke run.")
    if machine["load_before"] > BUSY_LOAD:
        lines.append(
            f"WARNING: load average was {machine['load_before']:.2f} at the start: something "
            "else was using the CPU (the lanes of a repeat share the drift)."
        )
    targets, _verdicts = targets_table(m, stats["scale"])
    lines += ["", targets, "", summary_table(m)]
    for transport, lanes in TRANSPORT_LANES.items():
        ran = [lane for lane in lanes if m.ran(lane)]
        if not ran:
            continue
        lines += [
            "",
            TRANSPORT_TITLES[transport] + ":",
            "",
            comparison_table(m, ran, transport, machine.get("bench_rss_kib", 0)),
        ]
    extra = proxy_lines(repeats) + kinds_lines(m)
    if extra:
        lines += ["", *extra]
    nd = next((r["new_data"] for r in repeats if r.get("new_data")), None)
    if nd:
        lines += ["", new_data_line(nd)]
    if any(r["follow"] for r in repeats):
        lines += [
            "",
            "Seal on A to the file on B:",
            "",
            follow_table(repeats, results["poll_seconds"]),
            "",
            *follower_lines(repeats),
        ]
        if not results["follow_available"]:
            lines.append(
                "NOTE: this tillage has no `till sync --follow`: measured as `till sync --push` "
                "on A, then `till sync --pull` on B, right after the seal."
            )
    return "\n".join(lines)
