"""Three-way merge of keyed maps, the rule every mirrored index follows: what this replica changed
since it last agreed with Redis (`base`) is pushed key by key, so changes to different keys made on
different replicas at the same time all survive; then Redis' map is what everyone holds."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class MapChanges:
    """Keys to set (with their new values) and keys to delete in the shared map."""

    set: dict[str, str] = field(default_factory=dict)
    deleted: list[str] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.set or self.deleted)


def local_changes(local: dict[str, str], base: dict[str, str]) -> MapChanges:
    """What `local` changed since `base`: keys added or altered, and keys removed."""
    return MapChanges(
        set={key: value for key, value in local.items() if base.get(key) != value},
        deleted=sorted(key for key in base if key not in local),
    )
