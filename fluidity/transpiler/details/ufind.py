"""A union-find over hashable elements (Fluid's transpilers group connected ops with it)."""

__all__ = ["UnionFind"]


class UnionFind:
    """`UnionFind(elements)`: `union(x, y)`, `find(x)` (the root index, -1 for an unknown
    element), `is_connected(x, y)`. Path halving keeps lookups short."""

    def __init__(self, elementes=None):
        self._parents = []
        self._index = {}
        for e in elementes or []:
            self._index[e] = len(self._parents)
            self._parents.append(len(self._parents))

    def find(self, x):
        if x not in self._index:
            return -1
        i = self._index[x]
        while self._parents[i] != i:
            self._parents[i] = self._parents[self._parents[i]]
            i = self._parents[i]
        return i

    def union(self, x, y):
        rx, ry = self.find(x), self.find(y)
        if rx < 0 or ry < 0:
            raise KeyError(f"UnionFind.union: {x if rx < 0 else y!r} is not an element")
        self._parents[rx] = ry

    def is_connected(self, x, y):
        rx = self.find(x)
        return rx >= 0 and rx == self.find(y)
