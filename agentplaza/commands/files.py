"""The file store's commands (see ``domain.files``): a file shared, a file deleted, a file loaded for a reader."""

from __future__ import annotations

from ..domain.base import Context, Refusal
from ..domain.files import FILE_PREFIX, SharedFile, file_id, file_number
from ..domain.tasks import Sequence
from .unit import Commands, Done, Unit


def load(cmds: Commands, number: str) -> SharedFile:
    n = file_number(number)
    f = Unit(cmds.store).get(file_id(n))
    if not isinstance(f, SharedFile) or f.deleted:
        raise Refusal("no_shared_file", f"no shared file {n}")
    return f


def readable(cmds: Commands, number: str, cid: int) -> SharedFile:
    """The shared file, if this agent may read it (``SharedFile.may_read``)."""
    f = load(cmds, number)
    f.check_readable(cid)
    return f


def share(cmds: Commands, ctx: Context, **fields) -> Done[str]:
    def decide(unit: Unit) -> str:
        seq = unit.get(Sequence.id_for(FILE_PREFIX)) or Sequence.open(ctx, FILE_PREFIX)
        number = seq.issue(ctx)
        unit.add(seq, SharedFile.share(ctx, number, **fields))
        return number

    return cmds.run(decide)


def delete(cmds: Commands, ctx: Context, number: str) -> Done[SharedFile]:
    def decide(unit: Unit) -> SharedFile:
        n = file_number(number)
        f = unit.get(file_id(n))
        if not isinstance(f, SharedFile):
            raise Refusal("no_shared_file", f"no shared file {n}")
        f.delete(ctx)
        unit.add(f)
        return f

    return cmds.run(decide)
