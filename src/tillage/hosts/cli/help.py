"""What `till --help` and `till COMMAND --help` say beyond each verb's contract: the commands
grouped (daily ones first, plumbing last), an example or two per command, the environment
variables tillage reads, and "did you mean" for a mistyped command.

Pure text from tables and the registry's command names: no verb module is imported to print the
top-level help (start-up matters). tests/cli/test_help.py keeps every registered command in a
group with an example whose flags parse.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping

# Commands by what a person reaches for, most often first; plumbing last. A command missing
# here is listed under "more" (tests/cli/test_help.py says so before it ships).
GROUPS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("Protect a folder", ("watch", "status", "snap", "forget")),
    (
        "Look back and go back",
        ("timeline", "show", "diff", "ls", "cat", "rewind", "undo", "op log", "pin", "unpin"),
    ),
    (
        "Forks and merges",
        (
            "fork",
            "forks",
            "merge",
            "fork-rm",
            "run",
            "exec",
            "try",
            "bisect",
            "radar",
            "watch-fork",
            "ui",
        ),
    ),
    (
        "Agents and sessions",
        (
            "hook",
            "mcp",
            "sessions",
            "session start",
            "session record",
            "session end",
            "session log",
            "session diff",
            "session revert",
            "session changelog",
            "session cleanup",
            "claim",
            "claims",
            "release",
            "coord write",
            "coord read",
            "coord list",
            "events",
        ),
    ),
    (
        "Sync between machines",
        (
            "remote add",
            "remote list",
            "sync",
            "clone",
            "work",
            "remote refs",
            "remote check",
            "remote repair",
            "remote repair-ref",
            "remote rekey",
        ),
    ),
    (
        "The store",
        ("verify", "gc", "retention", "budget", "estimate", "project hydrate", "project flush"),
    ),
    ("About tillage", ("version", "completion", "contracts")),
    ("Plumbing (for other programs)", ("agents-md", "remote-serve")),
)

# Each command's examples: (command line, what it does). Every line must parse (tested).
EXAMPLES: dict[str, tuple[tuple[str, str], ...]] = {
    "watch": (
        ("till watch", "attach this folder, seal it and keep sealing it in the background"),
        ("till watch --no-daemon", "attach and seal once, with no watcher"),
        ("till watch --stop", "stop the watcher"),
    ),
    "status": (
        ("till status", "is this folder protected, and what is its head"),
        ("till status --fidelity", "what could not be captured byte-exact, and why"),
    ),
    "snap": (("till snap -m 'before the refactor'", "seal the folder now, with a label"),),
    "forget": (
        ("till forget", "detach this folder; its timeline stays in the store"),
        ("till forget --purge --yes", "detach it and drop its timeline from the store"),
    ),
    "timeline": (
        ("till timeline", "the newest snapshots"),
        ("till timeline -n 200 --trigger manual", "up to 200 snapshots sealed by `till snap`"),
    ),
    "show": (("till show 80d3bc2a9f01", "one snapshot's fields and what changed from its parent"),),
    "diff": (
        ("till diff 80d3bc2a9f01", "what changed from that snapshot to the folder now"),
        ("till diff 80d3bc2a9f01 5e1f00aa3c42", "what changed between two snapshots"),
        ("till diff my-fork", "what a fork changed, compared with the folder"),
        ("till diff head~1 head --stat", "the last seal's changes, lines added and removed"),
    ),
    "cat": (("till cat 80d3bc2a9f01 src/app.py", "the file as it was in that snapshot"),),
    "ls": (
        ("till ls head", "the newest snapshot's files and folders"),
        ("till ls head~3 src -l", "what src/ held three snapshots back, in detail"),
    ),
    "op log": (("till op log", "the operations that changed this folder, newest first"),),
    "undo": (
        ("till undo", "preview undoing the newest operation that can be undone"),
        ("till undo 71ae2e --yes", "undo that operation (an undo can be undone in turn)"),
    ),
    "pin": (("till pin 80d3bc2a9f01", "keep that snapshot exact through every gc"),),
    "unpin": (("till unpin 80d3bc2a9f01", "let it be thinned again"),),
    "rewind": (
        ("till rewind 80d3bc2a9f01 --dry-run", "what a rewind would change, changing nothing"),
        ("till rewind 80d3bc2a9f01 --yes", "put the folder back as it was (the present is kept)"),
        ("till rewind 80d3bc2a9f01 --paths src --yes", "only the files under src/"),
    ),
    "verify": (
        ("till verify", "read and check every object in the store"),
        ("till verify --repair", "salvage what can be salvaged"),
    ),
    "events": (
        ("till events", "what happened here, one JSON document per line"),
        ("till events --follow", "keep printing new events as they happen"),
    ),
    "hook": (
        ("till hook install --agent claude-code", "seal at every turn of Claude Code"),
        ("till hook turn-end --agent me --turn 3", "seal an attributed restore point"),
    ),
    "fork": (
        ("till fork try-redis", "a full copy of this folder beside it, with its own timeline"),
        ("till fork try-redis -- make test", "make it and run a command in it"),
    ),
    "forks": (("till forks", "the live forks: what they changed and what collides"),),
    "fork-rm": (
        ("till fork-rm try-redis --dry-run", "what removing it would delete"),
        ("till fork-rm try-redis --yes", "seal its last state, then delete its folder"),
    ),
    "run": (("till run try-redis -- make test", "run a command in a fork (made if needed)"),),
    "exec": (
        ("till exec -n 3 -- make bench", "three forks from one base, each running the command"),
        ("till exec -n 3 --plan -- make bench", "what that would copy, creating nothing"),
    ),
    "watch-fork": (("till watch-fork try-redis", "each snapshot the fork seals, as it is sealed"),),
    "merge": (
        ("till merge try-redis --dry-run", "what landing the fork would change"),
        ("till merge try-redis --check 'make test'", "land it if the merged result passes"),
    ),
    "ui": (
        ("till ui", "Mission Control: every fork, its timeline and collisions, in a browser"),
        ("till ui --port 8765 --open", "on that port, and open the page"),
    ),
    "radar": (("till radar", "paths that more than one fork (or the folder) changed"),),
    "claim": (("till claim 'src/db/*' --owner me", "tell other agents you are editing these"),),
    "claims": (("till claims", "the claims held now"),),
    "release": (("till release 3f2a9c01 --owner me", "give a claim back"),),
    "try": (("till try -- ./migrate.sh", "seal, run a command here, seal again"),),
    "coord write": (("till coord write plan.md --value 'step 1'", "leave a note for agents"),),
    "coord read": (("till coord read plan.md", "read it back"),),
    "coord list": (("till coord list", "every note"),),
    "bisect": (
        ("till bisect -- make test", "the first snapshot where the command fails"),
        ("till bisect --good 5e1f00aa3c42 --bad 80d3bc2a9f01 -- make test", "between two"),
    ),
    "mcp": (
        ("till --repo ~/project mcp", "serve the folder's tools to an agent (a harness runs it)"),
        ("till mcp --list", "the tools it would offer"),
    ),
    "sessions": (("till sessions", "every agent session recorded here"),),
    "session start": (("till session start s1 -m 'fix login'", "start recording a session"),),
    "session record": (("till session record s1", "record what changed since the last commit"),),
    "session end": (("till session end s1", "record its last state"),),
    "session log": (("till session log s1", "its commits, oldest first"),),
    "session diff": (("till session diff 3f2a9c01", "what that commit changed"),),
    "session revert": (("till session revert 3f2a9c01 --yes", "put the folder back to it"),),
    "session cleanup": (("till session cleanup --dry-run", "which old sessions would go"),),
    "session changelog": (("till session changelog s1", "the session's changes as prose"),),
    "project hydrate": (
        ("till project hydrate --mount db/=sqlite:///tmp/app.db", "write a table's rows here"),
    ),
    "project flush": (
        ("till project flush --mount db/=sqlite:///tmp/app.db", "write the files back to it"),
    ),
    "gc": (
        ("till gc --dry-run", "what a garbage collection would remove"),
        ("till gc --yes", "thin old snapshots by the retention policy and reclaim space"),
    ),
    "retention": (
        ("till retention", "the retention policy"),
        ("till retention --hourly 2d --weekly forever", "change it"),
    ),
    "budget": (
        ("till budget", "the store's size and its limits"),
        ("till budget --max 20GiB", "cap the store"),
    ),
    "estimate": (("till estimate", "what sealing this folder would store, sealing nothing"),),
    "remote add": (
        ("till remote add /mnt/backup/project", "a remote in a folder (a disk, a mount)"),
        ("till remote add ssh://host/srv/tillage", "a remote over SSH"),
    ),
    "remote list": (("till remote list", "the remotes this workspace knows"),),
    "remote refs": (("till remote refs", "the refs on the remote and their heads"),),
    "remote check": (("till remote check --read-data", "read and check everything on it"),),
    "remote repair": (("till remote repair", "rewrite what the remote lost"),),
    "remote repair-ref": (("till remote repair-ref --ref main", "set a damaged ref again"),),
    "remote rekey": (("till remote rekey", "re-encrypt the remote's keys under a new key"),),
    "sync": (
        ("till sync --push", "send this timeline to the remote"),
        ("till sync --pull", "bring the remote's newer snapshots here"),
        ("till sync --follow", "keep pushing as the folder changes"),
    ),
    "clone": (("till clone /mnt/backup/project ~/project --key-file key.txt", "a copy elsewhere"),),
    "work": (
        (
            "till work --remote ssh://host/srv/tillage --result-ref tested -- make test",
            "run a command on the ref main there, and push its result as tested",
        ),
    ),
    "version": (("till version", "the version, protocol and format"),),
    "completion": (
        ('eval "$(till completion bash)"', "complete `till` commands in bash (in ~/.bashrc)"),
        ('eval "$(till completion zsh)"', "in zsh (in ~/.zshrc, after compinit)"),
        ("till completion fish > ~/.config/fish/completions/till.fish", "in fish"),
    ),
    "contracts": (("till contracts --json", "every verb's contract, as JSON"),),
    "agents-md": (("till agents-md > docs/agents.md", "the generated agent guide"),),
    "remote-serve": (("till remote-serve --stdio /srv/tillage", "what ssh runs on the far side"),),
}

# Every variable tillage reads, with what it does.
ENVIRONMENT: tuple[tuple[str, str], ...] = (
    ("TILLAGE_HOME", "where the store lives (default: $XDG_DATA_HOME/tillage, ~/.local/share/...)"),
    ("XDG_DATA_HOME", "the store's default parent folder"),
    ("TILLAGE_AGENT", "who is acting, recorded on each snapshot (also `hook`'s --agent)"),
    ("TILLAGE_TURN", "the agent's turn, read by the installed hook scripts"),
    ("TILLAGE_NOW", "pin the clock (epoch seconds or ISO-8601), for seals, retention and gc"),
    ("TILLAGE_RECOVERY_KEY", "a remote's key, as hex (prefer _FILE or _FD)"),
    ("TILLAGE_RECOVERY_KEY_FILE", "a file holding a remote's key"),
    ("TILLAGE_RECOVERY_KEY_FD", "an open descriptor to read a remote's key from"),
    ("TILLAGE_SSH", "the ssh command for ssh:// remotes (default: ssh)"),
    ("TILLAGE_REMOTE_TILL", "the `till` to run on an SSH remote's far side (or --remote-till)"),
    ("TILLAGE_S3_ENDPOINT", "an S3 remote's endpoint (also AWS_ENDPOINT_URL_S3, AWS_ENDPOINT_URL)"),
    ("TILLAGE_S3_ALLOW_HTTP", "1 allows plain http to an S3 endpoint"),
    ("AWS_ACCESS_KEY_ID", "S3 credentials, with AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN"),
    ("AWS_REGION", "an S3 remote's region (also AWS_DEFAULT_REGION)"),
    ("TILLAGE_SYNC_LEASE_SECONDS", "how long a `sync --push` holds the remote ref's lease"),
    ("PORT", "the base of the ports forks get (default: 3000)"),
    ("NO_COLOR", "set: no colour (--color always still colours)"),
    ("COLUMNS", "the width help text is wrapped to"),
    (
        "TILLAGE_WATCH_DEBUG",
        "1: the watcher logs what it does (tests: with TILLAGE_WATCH_MAX_WATCHES and "
        "TILLAGE_WATCH_SLOW_ADD_MS)",
    ),
)

# What tillage sets for the commands it runs (fork, run, exec, bisect, merge --check, work).
SET_FOR_COMMANDS = (
    "TILLAGE_FORK, TILLAGE_FORK_PATH, TILLAGE_FORK_INDEX, TILLAGE_FORK_COUNT, PORT (in a fork); "
    "TILLAGE_BISECT_SNAPSHOT (a bisect probe); TILLAGE_MERGE_CHECK=1 (a merge's --check); "
    "TILLAGE_WORK_INPUT, TILLAGE_WORK_REF, TILLAGE_WORK_RESULT_REF (till work)"
)


def group_of(commands: Iterable[str]) -> list[tuple[str, list[str]]]:
    """The registry's `commands` in GROUPS' order; those no group names come last, as "More"."""
    known = set(commands)
    placed: set[str] = set()
    out: list[tuple[str, list[str]]] = []
    for title, names in GROUPS:
        here = [n for n in names if n in known]
        placed.update(here)
        if here:
            out.append((title, here))
    rest = sorted(known - placed)
    if rest:
        out.insert(len(out) - 1, ("More", rest))
    return out


def _wrap(text: str, indent: int, width: int) -> list[str]:
    import textwrap

    return textwrap.wrap(text, width=max(width - indent, 30)) or [""]


def summary(doc: str, room: int) -> str:
    """A command's doc as one line of at most `room` characters: its first sentence, cut at a
    word with "…" when longer (the whole doc is its own --help)."""
    end = doc.find(". ")
    first = " ".join((doc if end < 0 else doc[: end + 1]).split())
    if len(first) <= room:
        return first
    cut = first[: room - 1].rsplit(" ", 1)[0].rstrip(",;:(")
    return cut + "…"


def top_help(docs: Mapping[str, str], *, width: int = 100) -> str:
    """The page `till --help` prints: usage, the global flags, the commands by group with each
    one's first sentence, an example or two, and the environment."""
    lines = [
        "usage: till [--repo PATH] [--json] [-q] [--color WHEN] [--debug] COMMAND ...",
        "       till --version | till COMMAND --help",
        "",
        "Seal, rewind and fork whole workspaces.",
        "",
        "Options:",
    ]
    for flag, text in GLOBAL_FLAGS:
        lines.append(f"  {flag:<22}{text}")
    for title, names in group_of(docs):
        lines += ["", f"{title}:"]
        for name in names:
            lines.append(f"  {name:<21} {summary(docs[name], max(width - 24, 30))}")
    lines += ["", "Examples (`till COMMAND --help` has more):"]
    for command in ("watch", "timeline", "rewind", "fork"):
        line, what = EXAMPLES[command][0 if command != "rewind" else 1]
        lines += [f"  {line}", f"      {what}"]
    lines += ["", *environment_lines(width)]
    return "\n".join(lines) + "\n"


GLOBAL_FLAGS = (
    ("--repo PATH", "the workspace folder (default: the current folder)"),
    ("--json", "print exactly one JSON document on stdout"),
    ("-q, --quiet", "print nothing on success but a command's content (errors still print)"),
    ("--color WHEN", "colour human output: auto (default), always or never"),
    ("--debug", "show tracebacks of internal errors"),
    ("--version", "print the version and exit"),
    ("-h, --help", "this help; `till COMMAND --help` for one command's"),
)


def environment_lines(width: int = 100) -> list[str]:
    """The ENVIRONMENT section: every variable tillage reads."""
    lines = ["Environment:"]
    for name, text in ENVIRONMENT:
        body = _wrap(text, 30, width)
        lines.append(f"  {name:<27} {body[0]}")
        lines += [" " * 30 + more for more in body[1:]]
    told = _wrap("Set for the commands tillage runs: " + SET_FOR_COMMANDS, 2, width)
    lines += ["", *(f"  {t}" for t in told)]
    return lines


def epilog(command: str) -> str | None:
    """The examples `till COMMAND --help` ends with (None when the command has none)."""
    examples = EXAMPLES.get(command)
    if not examples:
        return None
    lines = ["examples:"]
    for line, what in examples:
        lines.append(f"  {line}")
        lines.append(f"      {what}")
    lines.append("")
    lines.append("Environment variables: `till --help`.")
    return "\n".join(lines)


def flag_hint(message: str, flags: Iterable[str]) -> str:
    """argparse's "unrecognized arguments" with the flag most likely meant (`--limt` →
    `--limit`), when one is close; the message as it was otherwise."""
    import difflib

    marker = "unrecognized arguments: "
    if marker not in message:
        return message
    unknown = [w for w in message.split(marker, 1)[1].split() if w.startswith("--")]
    for word in unknown:
        close = difflib.get_close_matches(word.split("=")[0], sorted(set(flags)), n=1, cutoff=0.7)
        if close:
            return f"{message}; did you mean {close[0]}?"
    return message


def did_you_mean(word: str, commands: Iterable[str]) -> str | None:
    """The command `word` most likely meant (`statsu` → `status`), or None when none is close."""
    import difflib

    names = sorted({c.partition(" ")[0] for c in commands})
    close = difflib.get_close_matches(word, names, n=1, cutoff=0.6)
    return close[0] if close else None
