"""``alpharl slots``: the ISV slot map."""
from __future__ import annotations

from typing import Annotated

import typer

from alpharl import isv, jsontext
from alpharl.cli.errors import UserError


def slots(
    group: Annotated[str | None, typer.Option("--group", "-g", help="Only slots of this group, or matching this name pattern (e.g. 'lr_*').")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the map as JSON for scripts.")] = False,
) -> None:
    """Print the ISV slot map: index, name, group, bootstrap, unit, range, description."""
    chosen = isv.slots_matching(group) if group else list(isv.SLOTS)
    if group and not chosen:
        raise UserError(f"--group {group!r}: no slot or group matches (groups: {', '.join(isv.GROUPS)})")
    if as_json:
        rows = [{"index": s.index, "name": s.name, "group": s.group, "bootstrap": s.bootstrap, "unit": s.unit,
                 "lo": s.lo, "hi": s.hi, "description": s.description} for s in chosen]
        typer.echo(jsontext.dumps({"RL_SLOTS_END": isv.RL_SLOTS_END, "slots": rows}, indent=1))
        return
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"ISV slots (RL_SLOTS_END = {isv.RL_SLOTS_END})")
    for col, kw in (("idx", {"justify": "right"}), ("name", {"no_wrap": True}), ("group", {}), ("bootstrap", {"justify": "right"}),
                    ("unit", {}), ("range", {}), ("description", {})):
        table.add_column(col, **kw)
    for s in chosen:
        table.add_row(str(s.index), s.name, s.group, f"{s.bootstrap:g}", s.unit, f"[{s.lo:g}, {s.hi:g}]", s.description)
    Console().print(table)
