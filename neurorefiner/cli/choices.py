"""A Hydra entry point's config-group choices checked against ``conf/`` before Hydra composes anything.

Why: ``python evaluate.py dataset=diadm`` ended in Hydra's 17-line message and exit code 1, and an ``optional``
group took a typo silently: ``experiment=table_diadm`` ran the default evaluation instead of the table asked for.
Here every ``group=choice`` of the command line (sweeps and ``+``/``++`` forms included) must name a file of
``conf/<group>/``; one that does not is one line naming the option and what there is, and exit code 2, as the
``neurorefiner`` commands answer a bad option. Hydra's own groups (``hydra/launcher=...``) are left to Hydra.
"""

from __future__ import annotations

import difflib
import sys
from collections.abc import Sequence
from pathlib import Path

#: at most this many choices are listed in full; a longer list gives the closest names and the folder
LISTED = 12


def check_choices(argv: Sequence[str], conf: str | Path) -> list[str]:
    """``argv`` unchanged when each config-group choice in it exists under ``conf``; otherwise the first that
    does not is printed as one line (``error: ...``) and the process exits with code 2."""
    problem = first_bad_choice(argv[1:], Path(conf))
    if problem is not None:
        print(f"error: {problem}", file=sys.stderr)
        sys.exit(2)
    return list(argv)


def first_bad_choice(args: Sequence[str], conf: Path) -> str | None:
    """What is wrong with the first override of ``args`` that names a config-group choice missing from ``conf``,
    or one Hydra cannot parse; None when there is none."""
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.errors import HydraException

    parser = OverridesParser.create()
    for arg in args:
        if arg.startswith("-") or "=" not in arg:  # flags and their values (--cfg job, -cn NAME)
            continue
        try:
            override = parser.parse_override(arg)
        except HydraException as exc:  # Hydra's grammar: its message, on one line
            return f"cannot read the override {arg!r}: {' '.join(str(exc).split())}"
        group = override.key_or_group
        if override.is_delete() or group.split("/")[0] == "hydra" or not (conf / group).is_dir():
            continue
        for choice in _choices(override):
            if not _exists(conf / group, choice):
                return f"{group}={choice}: no such {group}; {_offer(conf / group, choice)}"
    return None


def _choices(override: object) -> list[str]:
    """The option names one override gives (each value of a sweep), interpolations and null left out."""
    try:
        if override.is_sweep_override():  # type: ignore[attr-defined]
            values: list = list(override.sweep_string_iterator())  # type: ignore[attr-defined]
        else:
            value = override.value()  # type: ignore[attr-defined]
            values = value if isinstance(value, list) else [value]
    except Exception:  # noqa: BLE001 - a sweep Hydra expands itself (glob, range): Hydra checks it
        return []
    return [str(v) for v in values if v is not None and "${" not in str(v)]


def _exists(folder: Path, choice: str) -> bool:
    return any((folder / f"{choice}{suffix}").is_file() for suffix in (".yaml", ".yml"))


def _offer(folder: Path, choice: str) -> str:
    """The choices there are, or for a long list the closest ones and where to look. A subfolder may be a group of
    its own (``agent/vlm_model``) or hold choices (``experiment=table_6/adaln``): only the closest names reach
    into them."""
    names = sorted(p.stem for p in folder.glob("*.y*ml"))
    close = difflib.get_close_matches(choice, sorted(str(p.relative_to(folder).with_suffix(""))
                                                     for p in folder.rglob("*.y*ml")), n=3, cutoff=0.6)
    if len(names) <= LISTED:
        return f"choose from {', '.join(names)}" + (f" (closest: {', '.join(close)})" if close and len(close) < 3
                                                     else "")
    hint = f"closest: {', '.join(close)}; " if close else ""
    return f"{hint}{len(names)} choices in {folder}"
