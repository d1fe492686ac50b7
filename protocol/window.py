"""A bounded set of recently seen tokens that forgets the oldest first."""

from __future__ import annotations

from collections import OrderedDict


class RecentTokens:
    """Remembers up to `capacity` tokens (with an optional value); oldest evicted first."""

    def __init__(self, capacity: int) -> None:
        if capacity < 1:
            raise ValueError("capacity must be >= 1")
        self.capacity = capacity
        self._items: OrderedDict[str, object] = OrderedDict()
        self.evicted = 0

    def add(self, token: str, value: object = None) -> None:
        self._items[token] = value
        self._items.move_to_end(token)
        if len(self._items) > self.capacity:
            self._items.popitem(last=False)
            self.evicted += 1

    def get(self, token: str) -> object:
        return self._items.get(token)

    def __contains__(self, token: object) -> bool:
        return token in self._items

    def __len__(self) -> int:
        return len(self._items)
