"""LoDRankTable: the value of a LOD_RANK_TABLE variable (Paddle's framework::LoDRankTable),
which loops over variable-length sequences (DynamicRNN, IfElse) are ordered by. It lives in
core because a scope's variable hands it to users (`Variable.get_lod_rank_table()`)."""


class LoDRankTable:
    """Sequences of one LoD level, longest first (stable sort): `items()` are (original
    index, length) pairs; `coarse_lod` keeps the LoD levels above that level."""
    __slots__ = ("_items", "coarse_lod")

    def __init__(self, items=(), coarse_lod=()):
        self._items = [(int(i), int(n)) for i, n in items]
        self.coarse_lod = [list(level) for level in coarse_lod]

    def items(self):
        """[(index, length)], longest first (Paddle's LoDRankTable.items())."""
        return list(self._items)

    def __len__(self):
        return len(self._items)

    def max_length(self):
        """The longest sequence's length (0 for an empty table)."""
        return self._items[0][1] if self._items else 0

    def indices(self):
        """The sequences' original indices, longest first."""
        return [i for i, _ in self._items]

    def count_longer_than(self, t):
        """How many sequences have more than `t` steps (the batch size at step t)."""
        return sum(1 for _, n in self._items if n > t)

    def __repr__(self):
        return f"LoDRankTable({self._items})"
