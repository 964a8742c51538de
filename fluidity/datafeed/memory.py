"""The records of an InMemoryDataset: MultiSlot lines held in memory, with where each came
from, so they can be shuffled, merged and handed to the workers without a file.

A record is one instance's line without its newline (bytes, the slots' part: an instance
id and content given with `parse_ins_id` / `parse_content` are kept beside it), plus its
origin (source index, line), so that a bad value found while training names the file and
line it was loaded from. The parser (multislot.py) reads the records through
`MemorySource`s (sources.py), one per worker, each a slice of the list: shuffling makes a
new list, so a run never sees the records move under it.

Loading reads the sources (files, pipe commands) with up to `threads` threads at once (a
pipe or file read releases the GIL) and keeps the records in the order of the file list.
Blank lines are skipped, as the parser does.
"""
import logging
import random
import threading
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from .errors import DataError
from .sources import MemorySource, as_source

logger = logging.getLogger("fluidity")

__all__ = ["MemoryStore", "SlotLayout"]

READ_SIZE = 4 << 20


class SlotLayout:
    """What line surgery needs to know of the declared slots: names, dense or not, uint64 or
    float, in line order (a DataFeedDesc's slots)."""

    def __init__(self, slots):
        self.names = [s.name for s in slots]
        self.dense = [bool(s.is_dense) for s in slots]
        self.is_float = [s.type[:1] == "f" for s in slots]

    def split(self, record, where):
        """The token lists of each slot of a record ([[b"1926", b"8"], ...])."""
        toks = record.split()
        out, j = [], 0
        for name in self.names:
            if j >= len(toks) or not toks[j].isdigit():
                raise DataError(f"slot '{name}': count missing or not an integer", *where)
            n = int(toks[j])
            if j + 1 + n > len(toks):
                raise DataError(f"slot '{name}': count {n} but only {len(toks) - j - 1} "
                                f"value(s) follow", *where)
            out.append(toks[j + 1:j + 1 + n])
            j += 1 + n
        if j != len(toks):
            raise DataError(f"{len(toks) - j} extra token(s) after the last slot", *where)
        return out

    @staticmethod
    def join(slots):
        parts = []
        for vals in slots:
            parts.append(str(len(vals)).encode())
            parts.extend(vals)
        return b" ".join(parts)

    def present(self, i, vals):
        """Whether slot i holds a value Paddle keeps (its in-memory reader drops sparse ids 0
        and floats below 1e-6 in magnitude): what "empty" means when records merge."""
        if self.is_float[i]:
            return any(abs(float(v)) >= 1e-6 for v in vals)
        return any(int(v) != 0 for v in vals)


def _read_records(source, parse_ins_id, parse_content):
    """(records, line numbers, ins ids, contents) of one source, blank lines skipped."""
    recs, nums = [], []
    ids = [] if parse_ins_id else None
    contents = [] if parse_content else None
    base, carry = 0, b""
    heads = int(parse_ins_id) + int(parse_content)
    for data in source.chunks(READ_SIZE):
        buf = carry + data if carry else data
        cut = buf.rfind(b"\n") + 1
        buf, carry = buf[:cut], buf[cut:]
        base = _take_lines(buf.split(b"\n")[:-1] if buf else [], base, recs, nums, ids,
                           contents, heads, source)
    if carry:
        _take_lines([carry], base, recs, nums, ids, contents, heads, source)
    return recs, nums, ids, contents


def _take_lines(lines, base, recs, nums, ids, contents, heads, source):
    if not heads and not any(not ln.strip() for ln in lines):   # the common case
        recs.extend(lines)
        nums.extend(range(base + 1, base + 1 + len(lines)))
        return base + len(lines)
    for k, ln in enumerate(lines, base + 1):
        if not ln.strip():
            continue
        if heads:
            parts = ln.split(None, 2 * heads)
            for h, store in enumerate(x for x in (ids, contents) if x is not None):
                count, value = parts[2 * h:2 * h + 2] if len(parts) >= 2 * h + 2 else (b"", b"")
                if count != b"1":
                    what = "instance id" if store is ids else "content"
                    raise DataError(f"expected the {what} as '1 <{what}>' at the start of the "
                                    f"line (parse_ins_id / parse_content), got "
                                    f"{b' '.join(parts[2 * h:2 * h + 2])[:40]!r}",
                                    *source.locate(k))
                store.append(value.decode("utf-8", "replace"))
            ln = parts[2 * heads] if len(parts) > 2 * heads else b""
        recs.append(ln)
        nums.append(k)
    return base + len(lines)


class MemoryStore:
    """An InMemoryDataset's records (see the module's docstring)."""

    def __init__(self):
        self.records = []
        self.paths = []                       # source names, by source index
        self.src = np.zeros(0, np.int32)      # per record: its source's index
        self.line = np.zeros(0, np.int64)     # per record: its line in that source
        self.ins_ids = None                   # per record, with parse_ins_id
        self.contents = None                  # per record, with parse_content
        self.version = 0                      # bumped by every change

    def __len__(self):
        return len(self.records)

    # -- loading ------------------------------------------------------------------------------
    def load(self, sources, threads=1, parse_ins_id=False, parse_content=False):
        """Append the records of `sources` (paths or sources.py sources) read by up to
        `threads` threads, in the order given."""
        sources = [as_source(s) for s in sources]
        with ThreadPoolExecutor(max(1, min(int(threads), len(sources) or 1))) as pool:
            parts = list(pool.map(lambda s: _read_records(s, parse_ins_id, parse_content),
                                  sources))
        first = len(self.paths)
        self.paths.extend(str(s) for s in sources)
        recs, srcs, lines = list(self.records), [self.src], [self.line]
        ids = self.ins_ids if parse_ins_id else None
        contents = self.contents if parse_content else None
        if parse_ins_id and ids is None:
            ids = [""] * len(self.records)
        if parse_content and contents is None:
            contents = [""] * len(self.records)
        for k, (r, n, i, c) in enumerate(parts):
            recs.extend(r)
            srcs.append(np.full(len(r), first + k, np.int32))
            lines.append(np.asarray(n, np.int64))
            if ids is not None:
                ids.extend(i)
            if contents is not None:
                contents.extend(c)
        self._set(recs, np.concatenate(srcs), np.concatenate(lines), ids, contents)

    def _set(self, records, src, line, ins_ids, contents):
        self.records, self.src, self.line = records, src, line
        self.ins_ids, self.contents = ins_ids, contents
        self.version += 1

    def release(self):
        self.__init__()

    def origin(self, i):
        """(path, line) record i was loaded from."""
        return self.paths[int(self.src[i])], int(self.line[i])

    # -- rearranging --------------------------------------------------------------------------
    def _permuted(self, order):
        order = np.asarray(order, np.int64)
        pick = order.tolist()
        recs = [self.records[i] for i in pick]
        ids = None if self.ins_ids is None else [self.ins_ids[i] for i in pick]
        contents = None if self.contents is None else [self.contents[i] for i in pick]
        self._set(recs, self.src[order], self.line[order], ids, contents)

    def shuffle(self, rng=random):
        """Shuffle the records (Python's `random`, or the Random given)."""
        order = list(range(len(self.records)))
        rng.shuffle(order)
        self._permuted(order)

    def merge_by_ins_id(self, layout, merge_size):
        """Paddle's merge_by_lineid: the records that share an instance id become one. A
        group whose size is not `merge_size` (when > 0) is dropped, as is one in which two
        records both hold values of one sparse slot; a dense slot takes the last record's
        values that are not all zero. Returns the number of records dropped."""
        if self.ins_ids is None:     # loaded without ids: all share the empty id (Paddle)
            logger.warning("merge_by_lineid: the records were loaded without instance ids "
                           "(set_parse_ins_id(False)): they all share the empty id")
            self.ins_ids = [""] * len(self.records)
        order = sorted(range(len(self.records)), key=self.ins_ids.__getitem__)
        recs, src, line, ids, contents, dropped = [], [], [], [], [], 0
        i = 0
        while i < len(order):
            j = i
            while j < len(order) and self.ins_ids[order[j]] == self.ins_ids[order[i]]:
                j += 1
            group = order[i:j]
            merged = None
            if merge_size <= 0 or len(group) == merge_size:
                merged = self._merge(layout, group)
            if merged is None:
                dropped += len(group)
            else:
                recs.append(merged)
                src.append(self.src[group[0]])
                line.append(self.line[group[0]])
                ids.append(self.ins_ids[group[0]])
                if self.contents is not None:
                    contents.append(self.contents[group[0]])
            i = j
        self._set(recs, np.asarray(src, np.int32), np.asarray(line, np.int64), ids,
                  contents if self.contents is not None else None)
        return dropped

    def _merge(self, layout, group):
        rows = [layout.split(self.records[k], self.origin(k)) for k in group]
        out = [list(v) for v in rows[0]]
        taken = [False] * len(layout.names)
        for row in rows:
            for s, vals in enumerate(row):
                if not layout.present(s, vals):
                    continue
                if layout.dense[s]:
                    out[s] = list(vals)            # the last non-empty one
                elif taken[s]:
                    return None                   # a conflict: the group is dropped
                else:
                    out[s], taken[s] = list(vals), True
        return SlotLayout.join(out)

    def shuffle_slots(self, layout, names, candidates, rng=random):
        """Paddle's slots_shuffle (feature evaluation): the values of the slots `names` of
        every record are replaced by those of a record drawn at random from a pool of
        `candidates` records, breaking the slots' link to the rest of the instance."""
        idx = [layout.names.index(n) for n in names if n in layout.names]
        unknown = [n for n in names if n not in layout.names]
        if unknown:
            raise DataError(f"slots_shuffle: unknown slot(s) {sorted(unknown)}; the slots are "
                            f"{layout.names}")
        n = len(self.records)
        if not idx or not n:
            return
        pool = rng.sample(range(n), min(n, max(1, int(candidates))))
        pool_rows = {k: layout.split(self.records[k], self.origin(k)) for k in pool}
        recs = []
        for k, rec in enumerate(self.records):
            row = layout.split(rec, self.origin(k))
            donor = pool_rows[pool[rng.randrange(len(pool))]]
            for s in idx:
                row[s] = donor[s]
            recs.append(SlotLayout.join(row))
        self._set(recs, self.src, self.line, self.ins_ids, self.contents)

    def unique_feasigns(self, layout, shard_num):
        """The distinct ids of the sparse uint64 slots, split into `shard_num` shards by
        id modulo shard_num (sorted arrays)."""
        ids = set()
        sparse = [i for i in range(len(layout.names))
                  if not layout.dense[i] and not layout.is_float[i]]
        for k, rec in enumerate(self.records):
            row = layout.split(rec, self.origin(k))
            for s in sparse:
                ids.update(int(v) for v in row[s])
        arr = np.array(sorted(ids), np.uint64)
        shard_num = max(1, int(shard_num))
        return [arr[arr % shard_num == s] for s in range(shard_num)]

    # -- global shuffle: records as bytes between trainers -----------------------------------
    def partition(self, n, rng=random):
        """The records dealt at random into `n` packs, one per trainer, each a list of bytes
        blobs [records, instance ids, contents] (newline-joined; ids and contents b"" when
        not parsed): what a global shuffle sends."""
        owner = [rng.randrange(n) for _ in range(len(self.records))]
        packs = []
        for k in range(n):
            pick = [i for i, o in enumerate(owner) if o == k]
            packs.append([b"\n".join(self.records[i] for i in pick),
                          _blob(self.ins_ids, pick), _blob(self.contents, pick)])
        return packs

    def replace(self, packs):
        """Make the records those of the packs received from each trainer (partition's)."""
        recs, src, line, ids, contents = [], [], [], [], []
        has_ids = has_contents = False
        paths = []
        for k, (blob, id_blob, c_blob) in enumerate(packs):
            r = blob.split(b"\n") if blob else []
            recs.extend(r)
            paths.append(f"<records from trainer {k}>")
            src.append(np.full(len(r), k, np.int32))
            line.append(np.arange(1, len(r) + 1, dtype=np.int64))
            has_ids |= bool(id_blob)
            has_contents |= bool(c_blob)
            ids.extend(id_blob.decode().split("\n") if id_blob else [""] * len(r))
            contents.extend(c_blob.decode().split("\n") if c_blob else [""] * len(r))
        self.paths = paths
        self._set(recs, np.concatenate(src) if src else np.zeros(0, np.int32),
                  np.concatenate(line) if line else np.zeros(0, np.int64),
                  ids if has_ids or self.ins_ids is not None else None,
                  contents if has_contents or self.contents is not None else None)

    # -- reading ------------------------------------------------------------------------------
    def sources(self, n):
        """`n` (or fewer, never an empty one) MemorySources over consecutive shares of the
        records: one per worker."""
        total = len(self.records)
        n = max(1, min(int(n), total))
        paths, src, line = list(self.paths), self.src, self.line

        def origin(i):          # of these records, even after the store changes
            return paths[int(src[i])], int(line[i])
        out = []
        for k in range(n):
            a, b = total * k // n, total * (k + 1) // n
            if b > a:
                out.append(MemorySource(self.records, a, b,
                                        f"<in-memory records {a + 1}-{b} of {total}>",
                                        origin))
        return out


def _blob(values, pick):
    return b"" if values is None else "\n".join(values[i] for i in pick).encode()


class Preload:
    """A load running in a thread (preload_into_memory); `wait()` joins it and raises what
    it raised."""

    def __init__(self, fn):
        self.error = None

        def run():
            try:
                fn()
            except BaseException as e:  # noqa: BLE001 - raised again by wait()
                self.error = e
        self.thread = threading.Thread(target=run, name="fluidity-preload", daemon=True)
        self.thread.start()

    def wait(self):
        self.thread.join()
        if self.error is not None:
            raise self.error
