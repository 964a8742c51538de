"""Beam search for sequence generation, with Fluid's LoD conventions.

Every step's candidates carry a 2-level LoD: level 0 groups the prefixes (rows) by source
sentence, level 1 gives each prefix's rows. beam_search keeps, per source sentence, the
beam_size best (prefix, id) extensions; a prefix that ended (its id is end_id) competes with
its score unchanged as one candidate; a source all of whose kept extensions are end_ids of
ended prefixes is pruned (no rows). beam_search_decode walks the steps' selections back
from the last step into whole sentences, best first.
"""
import numpy as np

from ..core.tensor import LoDTensor
from ..errors import ExecutionError
from .registry import In, OpDef, Out


def _abs_lod(lod):
    """LoD with every level given as offsets into rows (Paddle's ToAbsOffset)."""
    out = [np.asarray(level, np.int64) for level in lod]
    for i in range(len(out) - 2, -1, -1):
        out[i] = out[i + 1][out[i]]
    return out


def _select(pre_ids, pre_scores, ids, scores, starts, ends, beam_size, end_id, accumulated):
    """Per source [start, end) of rows, its best beam_size (row, id, score), best first (ties:
    the later row first, then the earlier candidate, as Paddle's insertion order)."""
    width = scores.shape[1] if scores.ndim > 1 else 1
    s2 = scores.reshape(len(scores), width).astype(np.float64)
    i2 = ids.reshape(len(scores), width) if ids is not None else \
        np.broadcast_to(np.arange(width, dtype=np.int64), s2.shape)
    out = []
    for start, end in zip(starts, ends):
        parts = []     # (rows, ids, scores) of each prefix's candidates
        for r in range(start, end):
            if pre_ids[r] == end_id:   # an ended prefix: one candidate, its score unchanged
                parts.append(([r], [end_id], [pre_scores[r]]))
            else:
                parts.append((np.full(width, r), i2[r],
                              s2[r] if accumulated else pre_scores[r] + np.log(s2[r])))
        if not parts:
            out.append([])
            continue
        rows, cid, csc = (np.concatenate([np.asarray(p[k]) for p in parts]) for k in range(3))
        order = np.lexsort((np.arange(len(rows)), -rows, -csc))[:beam_size]
        out.append([(int(rows[k]), int(cid[k]), float(csc[k])) for k in order])
    return out


class BeamSearch(OpDef):
    type = "beam_search"
    inputs = (In("pre_ids", no_grad=True), In("pre_scores", no_grad=True),
              In("ids", dispensable=True, no_grad=True), In("scores", no_grad=True))
    outputs = (Out("selected_ids"), Out("selected_scores"),
               Out("parent_idx", dispensable=True))
    attrs = {"level": 0, "beam_size": 1, "end_id": 0, "is_accumulated": True}
    kind = "value"
    share_lod = None
    doc = ("One step of beam search: per source sentence (level `level` of scores' LoD) the "
           "beam_size best extensions of its prefixes; 2-level LoD out (sources -> prefixes "
           "-> selected rows), parent_idx the prefix row of each.")

    @staticmethod
    def infer_shape(ctx):
        ctx.set_output("selected_ids", [-1, 1], ctx.input_dtype("pre_ids"), 2)
        ctx.set_output("selected_scores", [-1, 1], ctx.input_dtype("scores"), 2)
        if ctx.has_output("parent_idx"):
            ctx.set_output("parent_idx", [-1], "int32", 0)

    @classmethod
    def prepare(cls, attrs, outputs):
        level, beam, end_id = attrs["level"], attrs["beam_size"], attrs["end_id"]
        accumulated = attrs["is_accumulated"]

        def kernel(pre_ids, pre_scores, ids, scores):
            if not scores._lod or len(scores._lod) <= level:
                raise ExecutionError(f"beam_search: scores needs a LoD with level {level} "
                                     f"(sources -> prefixes); got LoD {scores._lod}")
            pid = np.asarray(pre_ids._array).reshape(-1).astype(np.int64)
            psc = np.asarray(pre_scores._array, np.float64).reshape(-1)
            sc = np.asarray(scores._array)
            if not (len(pid) == len(psc) == len(sc)):
                raise ExecutionError(f"beam_search: pre_ids ({len(pid)}), pre_scores "
                                     f"({len(psc)}) and scores ({len(sc)}) need one row per "
                                     f"prefix")
            idv = None
            if ids is not None:
                idv = np.asarray(ids._array).astype(np.int64)
                if idv.size != sc.size:
                    raise ExecutionError(f"beam_search: ids {list(idv.shape)} and scores "
                                         f"{list(sc.shape)} must have the same shape")
            high = _abs_lod(scores._lod)[level]
            chosen = _select(pid, psc, idv, sc, high[:-1], high[1:], beam, end_id, accumulated)
            per_row = [[] for _ in range(int(high[-1]))]
            for items in chosen:
                for r, i, s in items:
                    per_row[r].append((i, s))
            for start, end in zip(high[:-1], high[1:]):   # prune sources that all ended
                if all(i == end_id and pid[r] == end_id
                       for r in range(start, end) for i, _ in per_row[r]):
                    for r in range(start, end):
                        per_row[r] = []
            low = np.cumsum([0] + [len(p) for p in per_row]).tolist()
            flat = [item for p in per_row for item in p]
            lod = [high.tolist(), low]
            sel_ids = np.array([i for i, _ in flat], np.int64).reshape(-1, 1)
            sel_sc = np.array([s for _, s in flat], sc.dtype).reshape(-1, 1)
            parent = np.repeat(np.arange(len(per_row)), [len(p) for p in per_row])
            return (LoDTensor(sel_ids, lod), LoDTensor(sel_sc, lod),
                    LoDTensor(parent.astype(np.int32)))
        return kernel


class BeamSearchDecode(OpDef):
    type = "beam_search_decode"
    inputs = (In("Ids", no_grad=True), In("Scores", no_grad=True))
    outputs = (Out("SentenceIds"), Out("SentenceScores"))
    attrs = {"beam_size": 1, "end_id": 0}
    kind = "value"
    share_lod = None
    doc = ("Back-trace the beam_search selections of every step (tensor arrays Ids and "
           "Scores) into sentences: 2-level LoD (sources -> sentences -> words), each "
           "source's sentences by final score, best first.")

    @staticmethod
    def infer_shape(ctx):
        ctx.set_output("SentenceIds", [-1], "int64", 2)
        ctx.set_output("SentenceScores", [-1], ctx.input_dtype("Scores"), 2)

    @classmethod
    def prepare(cls, attrs, outputs):
        end_id = attrs["end_id"]

        def kernel(ids, scores):
            steps = [(i, s) for i, s in zip(ids, scores)
                     if i is not None and i._array is not None]
            if not steps or len(ids) != len(scores):
                raise ExecutionError(f"beam_search_decode: Ids ({len(ids)} steps) and Scores "
                                     f"({len(scores)} steps) must be non-empty arrays of the "
                                     f"same length")
            for t, (i, _) in enumerate(steps):
                if len(i._lod) != 2:
                    raise ExecutionError(f"beam_search_decode: step {t} of Ids has LoD "
                                         f"{i._lod}; beam_search's outputs have 2 levels")
            sentences = cls.backtrace(steps, end_id)
            src_lod, sent_lod, words, word_scores = [0], [0], [], []
            dt = np.asarray(steps[0][1]._array).dtype
            for sents in sentences:
                sents = [s for s in sents if s[0]]
                sents.sort(key=lambda s: -s[1][-1])    # by the final (accumulated) score
                for w, sc in sents:
                    words += w
                    word_scores += sc
                    sent_lod.append(sent_lod[-1] + len(w))
                src_lod.append(src_lod[-1] + len(sents))
            lod = [src_lod, sent_lod]
            return (LoDTensor(np.array(words, np.int64), lod),
                    LoDTensor(np.array(word_scores, dt), lod))
        return kernel

    @staticmethod
    def backtrace(steps, end_id):
        """[[(word ids, scores) per sentence] per source], each in time order."""
        n_src = len(steps[0][0]._lod[0]) - 1
        sents = [[] for _ in range(n_src)]    # per source: [reversed ids, reversed scores]
        prefix = [[] for _ in range(n_src)]   # per source: each sentence's row at this step
        for ids, scores in reversed(steps):
            src, sent = ids._lod
            iv = np.asarray(ids._array).reshape(-1)
            sv = np.asarray(scores._array).reshape(-1)
            for k in range(min(n_src, len(src) - 1)):
                if not prefix[k]:    # the source's last step (it ended or the loop did)
                    for p in range(src[k], src[k + 1]):
                        for c in range(sent[p], sent[p + 1]):
                            prefix[k].append(p)
                            sents[k].append(([int(iv[c])], [float(sv[c])]))
                    continue
                for j, c in enumerate(prefix[k]):
                    w, s = sents[k][j]
                    if iv[c] != end_id or not w:   # skip the repeated end_ids of ended ones
                        w.append(int(iv[c]))
                        s.append(float(sv[c]))
                    prefix[k][j] = int(np.searchsorted(sent, c, side="right") - 1)
        return [[(w[::-1], s[::-1]) for w, s in per] for per in sents]


class GatherTree(OpDef):
    type = "gather_tree"
    inputs = (In("Ids", no_grad=True), In("Parents", no_grad=True))
    outputs = (Out("Out"),)
    attrs = {}
    share_lod = None
    doc = ("Back-trace fixed-width beam search: Ids and Parents [max_time, batch, beam] "
           "(the step's chosen ids and the beam each came from); Out[t, b, k] is the id at "
           "step t of the beam that ends at k of the last step.")

    @staticmethod
    def infer_shape(ctx):
        ids, parents = ctx.input_shape("Ids"), ctx.input_shape("Parents")
        if len(ids) != 3 or list(ids) != list(parents):
            ctx.fail(f"Ids {list(ids)} and Parents {list(parents)} must both be "
                     f"[max_time, batch, beam]")
        ctx.share("Ids", "Out")

    @staticmethod
    def kernel(ids, parents):
        if ids.shape != parents.shape or ids.ndim != 3:
            raise ExecutionError(f"gather_tree: Ids {list(ids.shape)} and Parents "
                                 f"{list(parents.shape)} must both be [max_time, batch, beam]")
        steps, batch, beam = ids.shape
        if parents.size and (parents.min() < 0 or parents.max() >= beam):
            raise ExecutionError(f"gather_tree: Parents must be beam indices in [0, {beam}), "
                                 f"got values in [{parents.min()}, {parents.max()}]")
        out = np.empty_like(ids)
        if steps == 0:
            return out
        rows = np.arange(batch)[:, None]
        out[-1] = ids[-1]
        parent = parents[-1]
        for t in range(steps - 2, -1, -1):
            out[t] = ids[t][rows, parent]
            parent = parents[t][rows, parent]
        return out
