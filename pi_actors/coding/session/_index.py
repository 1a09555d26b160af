"""The session writer's index: where each entry is and how the entries link up, in a few
bytes per entry, because it lives as long as the session (a long session in one process
holds thousands of entries; issue 15, budget (g) memory).

Per entry, in append order (its *position*), three 64-bit integers in arrays, no Python
object per entry:

* its *place* — ``offset << 32 | length`` of its line in the file, or :data:`IN_MEMORY` when
  ``_kept`` holds the line itself (buffered, or 4 GiB and more) or a place too large for 63
  bits (a file past 2 GiB);
* its parent's position at the time it was added (:data:`_NO_PARENT`; :data:`_LATE` for a
  parent named before it was present — possible only in a loaded file or with an explicit
  ``parentId`` — whose id ``_late`` keeps and which is looked up when the tree is walked);
* its id as a number when it has pi's form (8 lowercase hex digits: every id pi and this
  writer make) — else :data:`_ODD` with the string in ``_odd``, or :data:`_NO_ID`.

An ``id -> position`` lookup is an open-addressing hash table of positions (``array('i')``,
at most two thirds full, CPython's probe sequence), compared against the ids above: about
8 bytes per entry instead of a dict's key string, int and slot (the index took ~110 bytes
per entry that way, ~30 now). An id seen twice resolves to its latest entry, as a dict
would (a loaded file may repeat one); parents are resolved by id then, too.

``in`` / ``position`` / ``add`` cost O(1); ``path_to`` O(1) per step; nothing here grows with
the length of the lines. Not thread-safe: the writer calls it from one thread at a time.
"""

from __future__ import annotations

import re
from array import array

__all__ = ["EntryIndex", "IN_MEMORY"]

#: A place that means "the line is in ``_kept``" (a real place is never negative).
IN_MEMORY = -1
_NO_PARENT = -1
_LATE = -2
#: ``_keys`` markers: the id is kept in ``_odd``; the entry has no id.
_ODD = -1
_NO_ID = -2
_MAX_PLACE = 2**63 - 1
_HASH_BITS = 2**64 - 1

_is_short = re.compile(r"[0-9a-f]{8}").fullmatch


class EntryIndex:
    """Positions, places and the parent links of a session's entries (see the module doc)."""

    def __init__(self) -> None:
        self._places = array("q")  # per position: offset << 32 | length, or IN_MEMORY
        self._parents = array("q")  # per position: the parent's position, _NO_PARENT or _LATE
        self._keys = array("q")  # per position: the id as a number, _ODD or _NO_ID
        self._odd: dict[int, str] = {}  # position -> id not of pi's short form
        self._kept: dict[int, bytes | int] = {}  # position -> line (or a place past 63 bits)
        self._late: dict[int, str] = {}  # position -> parent id not present when added
        self._table = array("i", bytes(4 * 8))  # slots: 1 + the latest position of an id; 0 free
        self._ids = 0  # distinct ids in the table
        self._repeated = False  # some id was added twice (its latest entry wins)

    def __len__(self) -> int:
        return len(self._places)

    def __contains__(self, entry_id: object) -> bool:
        return isinstance(entry_id, str) and self._table[self._slot(entry_id)] != 0

    def position(self, entry_id: str | None) -> int | None:
        """The latest position of ``entry_id``, or None (also for None or a non-string)."""
        if not isinstance(entry_id, str):
            return None
        held = self._table[self._slot(entry_id)]
        return held - 1 if held else None

    def add(self, entry_id: str | None, parent_id: str | None, line: bytes | int) -> None:
        """Append an entry: ``line`` is its encoded line (kept) or its place in the file."""
        position = len(self._places)
        if isinstance(line, bytes) or line > _MAX_PLACE:
            self._kept[position] = line
            self._places.append(IN_MEMORY)
        else:
            self._places.append(line)
        parent = None if entry_id is None or parent_id is None else self.position(parent_id)
        if parent is not None:
            self._parents.append(parent)
        elif entry_id is not None and parent_id is not None:
            self._late[position] = parent_id
            self._parents.append(_LATE)
        else:
            self._parents.append(_NO_PARENT)
        if entry_id is None:
            self._keys.append(_NO_ID)
            return
        if len(entry_id) == 8 and _is_short(entry_id):
            self._keys.append(int(entry_id, 16))
        else:
            self._keys.append(_ODD)
            self._odd[position] = entry_id
        slot = self._slot(entry_id)
        if self._table[slot]:
            self._repeated = True
        else:
            self._ids += 1
        self._table[slot] = position + 1
        if self._ids * 3 > len(self._table) * 2:
            self._grow()

    def place(self, position: int) -> bytes | int:
        """The kept line of the entry at ``position``, or its place in the file."""
        place = self._places[position]
        return self._kept[position] if place == IN_MEMORY else place

    def spill(self, first_offset: int) -> None:
        """Every line is now in the file, back to back from ``first_offset``: keep the lines'
        places instead of the kept lines."""
        offset = first_offset
        for position, place in enumerate(self._places):
            held = self._kept.get(position) if place == IN_MEMORY else place
            if isinstance(held, bytes):
                new = (offset << 32) | len(held)
                if len(held) < 2**32 and new <= _MAX_PLACE:
                    del self._kept[position]
                    self._places[position] = new
                offset += len(held)
            else:
                assert held is not None
                offset += held & 0xFFFFFFFF

    def path_to(self, entry_id: str | None) -> list[int]:
        """Positions from the root down to ``entry_id`` (inclusive); [] for None or an
        unknown id. A parent that is not present ends the path there; so does a cycle."""
        path: list[int] = []
        seen: set[int] = set()
        current = self.position(entry_id)
        while current is not None and current not in seen:
            seen.add(current)
            path.append(current)
            current = self._parent(current)
        path.reverse()
        return path

    # -- the table ----------------------------------------------------------------------

    def _parent(self, position: int) -> int | None:
        """The latest position of the parent's id of the entry at ``position``, or None."""
        parent = self._parents[position]
        if parent == _NO_PARENT:
            return None
        if parent == _LATE:
            return self.position(self._late[position])
        if self._repeated:
            # The parent's id may have a later entry, which is the one its children follow.
            held = self._table[self._slot_of(parent)]
            return held - 1
        return parent

    def _slot(self, entry_id: str) -> int:
        """The slot that holds ``entry_id``, or the free slot where it would go."""
        if len(entry_id) == 8 and _is_short(entry_id):
            key = int(entry_id, 16)
            return self._probe(key, key, None)
        return self._probe(_ODD, hash(entry_id) & _HASH_BITS, entry_id)

    def _slot_of(self, position: int) -> int:
        """The slot that holds the id of the entry at ``position`` (which has one)."""
        key = self._keys[position]
        if key == _ODD:
            odd = self._odd[position]
            return self._probe(_ODD, hash(odd) & _HASH_BITS, odd)
        return self._probe(key, key, None)

    def _probe(self, key: int, hashed: int, odd: str | None) -> int:
        table, keys = self._table, self._keys
        mask = len(table) - 1
        slot, perturb = hashed & mask, hashed
        while True:
            held = table[slot]
            if held == 0:
                return slot
            if keys[held - 1] == key and (odd is None or self._odd[held - 1] == odd):
                return slot
            perturb >>= 5
            slot = (5 * slot + perturb + 1) & mask

    def _grow(self) -> None:
        old = self._table
        self._table = array("i", bytes(8 * len(old)))
        for held in old:
            if held:
                self._table[self._slot_of(held - 1)] = held
