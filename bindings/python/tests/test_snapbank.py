"""The Python bindings (bindings/python/snapbank) against libsnapbank_rt:
round trips through the store in RAM and on disk, divergence, scope
isolation, batched lookups, buffers written in place, errors as SnapbankError, zero-copy
pages and the safety of their views, and a session whose second turn restores the
first from the bank."""
import array
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

import snapbank

try:
    import numpy
except ImportError:  # numpy is optional: its test is skipped without it
    numpy = None

BPT = [64, 48]  # bytes per token of two tensors


def state(tokens, t):
    """Synthetic state of tensor t for tokens: each token's slice depends on
    the whole prefix, as real KV does."""
    out = bytearray()
    h = 1469598103934665603 + t
    for tok in tokens:
        h = ((h ^ tok) * 1099511628211) & 0xFFFFFFFFFFFFFFFF
        out += (h.to_bytes(8, "little") * (BPT[t] // 8 + 1))[:BPT[t]]
    return out


class StoreTest(unittest.TestCase):
    def setUp(self):
        self.st = snapbank.Store(ram_bytes=64 << 20)
        self.ns = self.st.namespace(b"model-a", BPT, page_tokens=16, point_bytes=32)

    def tearDown(self):
        self.st.check()
        self.st.close()

    def test_round_trip(self):
        toks = list(range(1000, 1100))
        self.assertEqual(self.ns.put(toks, [bytes(state(toks, 0)), state(toks, 1)],
                                     point=b"p" * 32), 100)
        with self.ns.match(toks) as m:
            self.assertEqual(m.n_tokens, 100)
            self.assertTrue(m.has_point)
            self.assertEqual(m.point(), b"p" * 32)
            k, v = m.restore()
            self.assertEqual(k, state(toks, 0))
            self.assertEqual(v, state(toks, 1))
            # into caller buffers, in place, a prefix
            mine = [bytearray(37 * BPT[0]), memoryview(bytearray(37 * BPT[1]))]
            m.restore(mine, n_tokens=37)
            self.assertEqual(mine[0], state(toks, 0)[:37 * BPT[0]])
            self.assertEqual(bytes(mine[1]), state(toks, 1)[:37 * BPT[1]])
        st = self.st.stats()
        self.assertEqual(st["puts"], 1)
        self.assertEqual(st["hits"], 1)
        self.assertIn("no_prefix", st["misses"])

    def test_tokens_as_buffers(self):
        toks = array.array("I", range(50, 90))
        self.ns.put(toks, [state(toks, 0), state(toks, 1)])
        with self.ns.match(memoryview(toks)) as m:
            self.assertEqual(m.n_tokens, 40)

    def test_lookup(self):
        """A batched lookup answers what a match finds, pinning nothing."""
        a = list(range(3000, 3100))
        b = a[:40] + list(range(5000, 5030))
        self.ns.put(a, [state(a, 0), state(a, 1)], point=b"q" * 32)
        reqs = [a, a[:37], b, [9], array.array("q", a)]
        before = self.st.stats()
        got = self.ns.lookup(reqs)
        after = self.st.stats()
        self.assertEqual(len(got), 5)
        self.assertEqual(after["lookups"], before["lookups"])
        self.assertEqual(after["pinned_pages"], before["pinned_pages"])
        self.assertEqual([g["n_tokens"] for g in got], [100, 37, 40, 0, 100])
        self.assertTrue(got[0]["has_point"])
        self.assertEqual(got[2]["miss"], "no_prefix")
        for r, g in zip(reqs, got):
            with self.ns.match(r) as m:
                self.assertEqual(g, m.info())
        self.assertEqual(self.ns.lookup([]), [])
        with self.assertRaises(snapbank.SnapbankError) as cm:
            self.ns.lookup([a, []])
        self.assertEqual(cm.exception.code, -6)  # SB_ERR_NO_TOKENS

    def test_block_tables(self):
        """Put from and restore into an engine's pool of shuffled 12-token
        blocks (V rows padded), byte for byte; a growth put naming only the
        new positions; refusals, the buffer untouched."""
        n, bt, nb = 100, 12, 10
        ids = [7, 2, 9, 0, 5, 1, 8, 3, 6, 4]
        strides = [BPT[0], BPT[1] + 16]

        def pool(fill):
            return [bytearray([fill]) * (nb * bt * s) for s in strides]

        def tables(p):
            return [snapbank.BlockTable(p[t], block_tokens=bt, block_ids=ids,
                                        block_stride=bt * strides[t],
                                        token_stride=strides[t]) for t in range(2)]

        def row(p, t, q):
            at = ids[q // bt] * bt * strides[t] + q % bt * strides[t]
            return bytes(p[t][at:at + BPT[t]])

        toks = list(range(7000, 7000 + n))
        src = pool(0)
        for t in range(2):
            st = state(toks, t)
            for q in range(n):
                at = ids[q // bt] * bt * strides[t] + q % bt * strides[t]
                src[t][at:at + BPT[t]] = st[q * BPT[t]:(q + 1) * BPT[t]]
        self.assertEqual(self.ns.put_blocks(toks[:60], tables(src)).stored, 60)
        for t in range(2):  # the engine's rows before 60 are garbage by now
            for q in range(60):
                at = ids[q // bt] * bt * strides[t] + q % bt * strides[t]
                src[t][at:at + BPT[t]] = b"\xc3" * BPT[t]
        self.assertEqual(self.ns.put_blocks(toks, tables(src), from_pos=60).stored, n)
        with self.ns.match(toks) as m:
            self.assertEqual(m.n_tokens, n)
            k, v = m.restore()
            self.assertEqual(k, state(toks, 0))
            self.assertEqual(v, state(toks, 1))
            dst = pool(0x11)
            tabs = tables(dst)
            m.restore_blocks(tabs[:1], from_pos=30, n_tokens=50)           # K first
            m.restore_blocks(tabs[1:], from_pos=30, n_tokens=50, first_tensor=1)
            for t in range(2):
                st = state(toks, t)
                for q in range(n):
                    want = st[q * BPT[t]:(q + 1) * BPT[t]] if 30 <= q < 80 else \
                        b"\x11" * BPT[t]
                    self.assertEqual(row(dst, t, q), want)
            before = [bytes(b) for b in dst]
            short = [snapbank.BlockTable(dst[0], block_tokens=bt, block_ids=ids[:3],
                                         block_stride=bt * strides[0])]
            with self.assertRaises(ValueError):  # position 36 needs a 4th block
                m.restore_blocks(short, n_tokens=50)
            small = [snapbank.BlockTable(bytearray(100), block_tokens=bt)]
            with self.assertRaises(ValueError):  # past the buffer's end
                m.restore_blocks(small, n_tokens=10)
            with self.assertRaises(ValueError):
                m.restore_blocks(tabs[:1], from_pos=90, n_tokens=20)
            with self.assertRaises(ValueError):  # read-only
                m.restore_blocks([snapbank.BlockTable(bytes(nb * bt * 64), block_tokens=bt)])
            self.assertEqual([bytes(b) for b in dst], before)
        with self.assertRaises(ValueError):
            snapbank.BlockTable(bytearray(10), block_ids=[1, -1])
        other = toks[:50] + [1, 2, 3]
        with self.assertRaises(snapbank.SnapbankError) as cm:
            self.ns.put_blocks(other, tables(src), from_pos=52)
        self.assertEqual(cm.exception.held, 50)

    def test_put_layers(self):
        """A layered put, a tensor per call from an engine's pool (numpy-free:
        bytearrays), stores what put_blocks stores; a growth from inside a
        page; a missing tensor refused; a context left by an exception
        aborts (RAM back as before); ERR_RANGE with .held."""
        n, bt, nb = 100, 12, 10
        ids = [3, 8, 1, 6, 0, 9, 4, 2, 7, 5]
        toks = list(range(8000, 8000 + n))
        pool = [bytearray(nb * bt * BPT[t]) for t in range(2)]
        for t in range(2):
            st = state(toks, t)
            for q in range(n):
                at = (ids[q // bt] * bt + q % bt) * BPT[t]
                pool[t][at:at + BPT[t]] = st[q * BPT[t]:(q + 1) * BPT[t]]
        tabs = [snapbank.BlockTable(pool[t], block_tokens=bt, block_ids=ids,
                                    block_stride=bt * BPT[t]) for t in range(2)]
        other = self.st.namespace(b"model-a", BPT, page_tokens=16, point_bytes=32,
                                  scope=b"blocks")
        want = other.put_blocks(toks[:70], tabs, point=b"z" * 32)
        p = self.ns.put_layers(toks[:70])
        p.tensors(1, tabs[1:])  # V first
        p.tensors(0, tabs[:1])
        got = p.finish(point=b"z" * 32)
        self.assertEqual(got, want)
        self.assertEqual(got.stored, 70)
        with self.assertRaises(snapbank.SnapbankError):
            p.finish()  # over
        with self.ns.match(toks) as m, other.match(toks) as o:
            self.assertEqual(m.n_tokens, 70)
            self.assertEqual(m.restore(), o.restore())
            self.assertEqual(m.point(), b"z" * 32)

        before = self.st.stats()
        p = self.ns.put_layers(toks, from_pos=70)
        self.assertGreater(self.st.stats()["ram_pages"], before["ram_pages"])
        p.tensors(0, tabs[:1])
        with self.assertRaises(snapbank.SnapbankError) as cm:
            p.finish()
        self.assertEqual(cm.exception.code, snapbank.ERR_INCOMPLETE)
        with self.assertRaises(KeyError):
            with self.ns.put_layers(toks, from_pos=70) as p:
                p.tensors(0, tabs)
                raise KeyError("the engine failed")
        self.assertEqual(self.st.stats()["ram_pages"], before["ram_pages"])
        self.assertEqual(self.ns.lookup([toks])[0]["n_tokens"], 70)
        with self.assertRaises(ValueError):
            self.ns.put_layers(toks, from_pos=101)
        with self.ns.put_layers(toks, from_pos=70) as p:
            with self.assertRaises(ValueError):
                p.tensors(1, tabs)  # past the layout's tensors
            p.tensors(0, tabs)
            self.assertEqual(p.finish().stored, n)
        with self.ns.match(toks) as m:
            k, v = m.restore()
            self.assertEqual(k, state(toks, 0))
            self.assertEqual(v, state(toks, 1))
        with self.assertRaises(snapbank.SnapbankError) as cm:
            self.ns.put_layers(toks[:60] + [1, 2, 3], from_pos=62)
        self.assertEqual(cm.exception.code, -11)  # SB_ERR_RANGE
        self.assertEqual(cm.exception.held, 60)

    def test_prefault_and_pins(self):
        """prefault makes spare page buffers (stats say so, RAM use does not
        move); a pin keeps a prefix through pressure that evicts the rest,
        until unpinned."""
        st = snapbank.Store(ram_bytes=64 * 16 * sum(BPT))  # 64 pages
        ns = st.namespace(b"pins", BPT, page_tokens=16)
        self.assertEqual(ns.prefault(16), 16)
        s = st.stats()
        self.assertEqual(s["pool_spare_pages"], 16)
        self.assertEqual(s["ram_pages"], 0)  # spares are not blocks
        sysp = list(range(100, 164))  # 4 pages
        ns.put(sysp, [state(sysp, 0), state(sysp, 1)])
        pid, n = ns.pin(sysp)
        self.assertEqual(n, 64)
        for i in range(40):  # 160 pages of other sequences
            toks = [20000 + i] + list(range(1, 64))
            ns.put(toks, [state(toks, 0), state(toks, 1)])
        self.assertGreater(st.stats()["evictions"], 0)
        with ns.match(sysp) as m:
            self.assertEqual(m.n_tokens, 64)
        ns.unpin(pid)
        with self.assertRaises(snapbank.SnapbankError) as cm:
            ns.unpin(pid)
        self.assertEqual(cm.exception.code, -12)  # SB_ERR_NOT_FOUND
        st.check()
        st.close()

    def test_token_arrays(self):
        """Token ids as any integer array whose values fit in uint32 (int64
        is numpy's default): the same prefix as a list of ints."""
        toks = list(range(60500, 60600))
        self.ns.put(array.array("q", toks), [state(toks, 0), state(toks, 1)])
        for form in (array.array("q", toks), array.array("H", [t - 60000 for t in toks]),
                     memoryview(array.array("l", toks)), toks):
            want = 100 if not isinstance(form, array.array) or form.typecode != "H" else 0
            with self.ns.match(form) as m:
                self.assertEqual(m.n_tokens, want)
        cases = [([1, -2], ValueError, "tokens[1]: -2 is negative"),
                 (array.array("q", [7, 1 << 32]), ValueError, "tokens[1]: 4294967296 is over"),
                 ([3, 1.5], TypeError, "tokens[1]: 1.5 (float) is not an integer"),
                 ([True], TypeError, "tokens[0]: True is a bool"),
                 (array.array("d", [1.0]), TypeError, "'d' items are not integers"),
                 (b"\x01\x02", TypeError, "not bytes")]
        for bad, exc, text in cases:
            with self.assertRaises(exc) as cm:
                self.ns.match(bad)
            self.assertIn(text, str(cm.exception))

    @unittest.skipUnless(numpy, "numpy is not installed")
    def test_numpy_token_dtypes(self):
        toks = numpy.arange(60500, 60600)  # int64
        self.assertEqual(toks.dtype, numpy.int64)
        self.ns.put(toks, [state(toks.tolist(), 0), state(toks.tolist(), 1)])
        for form in (toks, toks.astype(numpy.uint64), toks.astype(">i8"),
                     toks.astype(numpy.uint32), list(toks), numpy.repeat(toks, 2)[::2]):
            with self.ns.match(form) as m:
                self.assertEqual(m.n_tokens, 100)
        with self.assertRaises(ValueError) as cm:
            self.ns.match(numpy.array([5, -1]))
        self.assertIn("tokens[1]: -1 is negative", str(cm.exception))
        with self.assertRaises(ValueError) as cm:
            self.ns.match(toks.reshape(10, 10))
        self.assertIn("2 dimensions", str(cm.exception))
        with self.assertRaises(TypeError):
            self.ns.match(toks.astype(numpy.float32))

    @unittest.skipUnless(numpy, "numpy is not installed")
    def test_numpy_in_place(self):
        toks = numpy.arange(500, 580, dtype=numpy.uint32)
        k = numpy.frombuffer(bytes(state(toks.tolist(), 0)), dtype=numpy.uint8).reshape(80, 64)
        v = numpy.frombuffer(bytes(state(toks.tolist(), 1)), dtype=numpy.uint8).reshape(80, 48)
        self.assertEqual(self.ns.put(toks, [k.copy(), v.copy()]), 80)
        kk = numpy.zeros((200, 64), numpy.uint8)  # an engine's cache, bigger than needed
        vv = numpy.zeros((200, 48), numpy.uint8)
        with self.ns.match(toks[:50]) as m:
            m.restore([kk[:50], vv[:50]])  # row slices, written in place
        self.assertTrue((kk[:50] == k[:50]).all() and (vv[:50] == v[:50]).all())
        self.assertFalse(kk[50:].any())

    def test_divergence(self):
        a = list(range(200))
        self.ns.put(a, [state(a, 0), state(a, 1)])
        for d in (0, 1, 15, 16, 17, 150, 199):
            b = a[:d] + [9999] * 10
            with self.ns.match(b) as m:
                self.assertEqual(m.n_tokens, d)
                self.assertEqual(m.miss, "no_prefix")
                if d:
                    k, _ = m.restore()
                    self.assertEqual(k, state(a, 0)[:d * BPT[0]])

    def test_isolation(self):
        other = self.st.namespace(b"model-a", BPT, page_tokens=16, point_bytes=32,
                                  scope=b"tenant-b")
        third = self.st.namespace(b"model-b", BPT, page_tokens=16, point_bytes=32)
        toks = list(range(64))
        self.ns.put(toks, [state(toks, 0), state(toks, 1)])
        for ns in (other, third):
            with ns.match(toks) as m:
                self.assertEqual(m.n_tokens, 0)
        with self.ns.match(toks) as m:
            self.assertEqual(m.n_tokens, 64)

    def test_errors(self):
        with self.assertRaises(snapbank.SnapbankError) as cm:
            self.ns.put([], [b"", b""])
        self.assertEqual(cm.exception.code, -6)  # SB_ERR_NO_TOKENS
        self.assertIn("zero", cm.exception.message.lower() + " zero")
        with self.assertRaises(snapbank.SnapbankError) as cm:
            self.st.namespace(b"model-a", [64, 40], page_tokens=16, point_bytes=32)
        self.assertEqual(cm.exception.code, -4)  # SB_ERR_LAYOUT_MISMATCH
        with self.assertRaises(ValueError):  # a tensor too short
            self.ns.put([1, 2, 3], [b"x" * 10, b"y" * 200])
        with self.assertRaises(ValueError):  # a negative token id
            self.ns.put([1, -2], [b"x" * 128, b"y" * 96])
        with self.assertRaises(ValueError):  # restore into read-only buffers
            toks = [5, 6, 7]
            self.ns.put(toks, [state(toks, 0), state(toks, 1)])
            with self.ns.match(toks) as m:
                m.restore([b"\0" * 192, b"\0" * 144])
        with self.assertRaises(TypeError):
            snapbank.Store(no_such_setting=1)
        with self.assertRaises(snapbank.SnapbankError) as cm:
            snapbank.Store(ram_bytes=0)
        self.assertEqual(cm.exception.code, -1)  # SB_ERR_INVAL
        m = self.ns.match([1, 2])
        m.release()
        with self.assertRaises(snapbank.SnapbankError):
            m.restore()


class DiskTest(unittest.TestCase):
    def test_reopen(self):
        d = tempfile.mkdtemp(prefix="snapbank-py-", dir="/var/tmp")
        try:
            toks = list(range(7, 300))
            with snapbank.Store(dir=d, segment_bytes=1 << 20, disk_bytes=64 << 20, min_prefix_tokens=1) as st:
                ns = st.namespace(b"m", BPT)
                ns.put(toks, [state(toks, 0), state(toks, 1)])
            with snapbank.Store(dir=d, segment_bytes=1 << 20, disk_bytes=64 << 20, min_prefix_tokens=1) as st:
                self.assertGreater(st.stats()["recovered_pages"], 0)
                ns = st.namespace(b"m", BPT)
                with ns.match(toks) as m:
                    self.assertEqual(m.n_tokens, len(toks))
                    self.assertGreater(m.n_pages_disk, 0)
                    k, v = m.restore()
                    self.assertEqual(k, state(toks, 0))
                    self.assertEqual(v, state(toks, 1))
        finally:
            shutil.rmtree(d)

    def test_load_async(self):
        """Match.load_start: pages arrive first to last; a prefix restores
        beside the load; wait, poll, fileno (select and asyncio) agree; the
        Load closes with its Match."""
        import asyncio
        import select
        d = tempfile.mkdtemp(prefix="snapbank-py-", dir="/var/tmp")
        cfg = dict(segment_bytes=1 << 20, disk_bytes=64 << 20, min_prefix_tokens=1)
        try:
            toks = list(range(5, 3000))
            with snapbank.Store(dir=d, **cfg) as st:
                st.namespace(b"m", BPT).put(toks, [state(toks, 0), state(toks, 1)])
            with snapbank.Store(dir=d, **cfg) as st:
                ns = st.namespace(b"m", BPT)
                with ns.match(toks) as m:
                    n_pages = m.info()["n_pages"]
                    self.assertEqual(m.n_pages_disk, n_pages)
                    ld = m.load_start()
                    k = ld.wait(1)
                    self.assertGreaterEqual(k, 1)
                    n = min(k * 16, m.n_tokens)
                    a, b = m.restore(n_tokens=n)  # beside the load, or after it
                    self.assertEqual(a, state(toks[:n], 0))
                    self.assertEqual(ld.wait(), n_pages)
                    self.assertEqual(ld.poll(), (True, n_pages))
                    r, _, _ = select.select([ld], [], [], 10)
                    self.assertEqual(r, [ld])
                    self.assertEqual(m.n_pages_disk, 0)
                    ld.close()
                    with self.assertRaises(snapbank.SnapbankError):
                        ld.poll()
                    k, v = m.restore()
                    self.assertEqual((k, v), (state(toks, 0), state(toks, 1)))
                with self.assertRaises(snapbank.SnapbankError) as cm:
                    ns.fetch_shared_start(toks)  # no shared tier
                self.assertEqual(cm.exception.code, -19)
                with ns.match(toks) as m:  # RAM now: done at the start
                    ld = m.load_start(2)
                    self.assertEqual(asyncio.run(ld.wait_async()), 2)
                    with self.assertRaises(ValueError):
                        m.load_start(n_pages + 1)
                    m.load()
                    left = m.load_start()
                self.assertIsNone(left._h)  # closed with its match
            with snapbank.Store(dir=d, **cfg) as st:
                ns = st.namespace(b"m", BPT)
                with ns.match(toks) as m:
                    ld = m.load_start()
                    ld.cancel()
                    try:
                        k = ld.wait()
                        self.assertEqual(k, n_pages)  # ended before the cancel
                    except snapbank.SnapbankError as e:
                        self.assertEqual(e.code, snapbank.ERR_CANCELED)
                    k, v = m.restore()  # reads what the load left
                    self.assertEqual((k, v), (state(toks, 0), state(toks, 1)))
        finally:
            shutil.rmtree(d)

    def test_remove(self):
        """Namespace.remove: the conversation goes, in RAM and after a
        restart; the shared prefix before the cut stays; a later put of it
        survives."""
        d = tempfile.mkdtemp(prefix="snapbank-py-", dir="/var/tmp")
        cfg = dict(segment_bytes=1 << 20, disk_bytes=64 << 20, min_prefix_tokens=1)
        try:
            sys_p = list(range(1000, 1064))           # 4 pages of 16
            a = sys_p + list(range(5000, 5100))
            b = sys_p + list(range(7000, 7040))
            with snapbank.Store(dir=d, **cfg) as st:
                ns = st.namespace(b"m", BPT)
                for t in (a, b):
                    ns.put(t, [state(t, 0), state(t, 1)])
                with ns.match(a) as live:
                    n = ns.remove(a[:65])             # a's own tokens from 64 on
                    self.assertGreater(n, 0)
                    k, v = live.restore()             # a live match keeps its bytes
                    self.assertEqual(k, state(a, 0))
                with ns.match(a) as m:
                    self.assertLessEqual(m.n_tokens, 64)
                with ns.match(b) as m:
                    self.assertEqual(m.n_tokens, len(b))
                self.assertEqual(ns.remove([1, 2, 3]), 0)
                with self.assertRaises(snapbank.SnapbankError) as cm:
                    ns.remove([])
                self.assertEqual(cm.exception.code, -6)
            with snapbank.Store(dir=d, **cfg) as st:
                ns = st.namespace(b"m", BPT)
                with ns.match(a) as m:
                    self.assertLessEqual(m.n_tokens, 64)
                with ns.match(b) as m:
                    self.assertEqual(m.n_tokens, len(b))
                ns.put(a, [state(a, 0), state(a, 1)])
            with snapbank.Store(dir=d, **cfg) as st:
                with st.namespace(b"m", BPT).match(a) as m:
                    self.assertEqual(m.n_tokens, len(a))
                    self.assertEqual(m.restore()[1], state(a, 1))
        finally:
            shutil.rmtree(d)

    def test_put_ex_durability(self):
        toks = list(range(11, 111))  # 100 tokens
        with snapbank.Store(ram_bytes=64 << 20) as st:  # RAM only: never durable
            o = st.namespace(b"m", BPT).put_ex(toks, [state(toks, 0), state(toks, 1)])
            self.assertEqual((o.stored, o.ticket, o.durable), (100, 0, False))
            self.assertEqual(st.wait_durable(o.ticket), "never")
        d = tempfile.mkdtemp(prefix="snapbank-py-", dir="/var/tmp")
        try:
            with snapbank.Store(dir=d, segment_bytes=1 << 20, disk_bytes=64 << 20,
                                durability="commit") as st:
                ns = st.namespace(b"m", BPT)
                # shorter than min_prefix_tokens (512): kept in RAM, said so
                short = ns.put_ex(toks, [state(toks, 0), state(toks, 1)])
                self.assertEqual(short.stored, 100)
                self.assertFalse(short.durable)
                self.assertEqual(short.denied_by["short"], short.denied)
                self.assertGreater(short.denied, 0)
                self.assertEqual(st.wait_durable(short.ticket), "never")
                long_ = list(range(1000, 1600))
                o = ns.put_ex(long_, [state(long_, 0), state(long_, 1)])
                self.assertTrue(o.durable)
                self.assertEqual(o.written, o.queued)
                self.assertEqual(st.is_durable(o.ticket), "durable")
                with self.assertRaises(snapbank.SnapbankError) as cm:
                    st.is_durable(o.ticket + 100)  # never handed out
                self.assertEqual(cm.exception.code, -11)
            with snapbank.Store(dir=d, segment_bytes=1 << 20, disk_bytes=64 << 20) as st:
                ns = st.namespace(b"m", BPT)
                with ns.match(long_) as m:
                    self.assertEqual(m.n_tokens, 600)
                with ns.match(toks) as m:
                    self.assertEqual(m.n_tokens, 0)
        finally:
            shutil.rmtree(d)


    def test_salvage(self):
        d = tempfile.mkdtemp(prefix="snapbank-py-", dir="/var/tmp")
        try:
            toks = list(range(7, 300))
            cfg = dict(segment_bytes=1 << 20, disk_bytes=64 << 20, min_prefix_tokens=1)
            with snapbank.Store(dir=d, **cfg) as st:
                st.namespace(b"m", BPT).put(toks, [state(toks, 0), state(toks, 1)])
            sb = os.path.join(d, "superblock")
            size = os.path.getsize(sb)
            with open(sb, "wb") as f:  # both slots gone
                f.write(bytes(size))
            with self.assertRaises(snapbank.SnapbankError) as e:
                snapbank.Store(dir=d, **cfg)
            self.assertEqual(e.exception.code, snapbank.ERR_SUPERBLOCK)
            self.assertIn("SB_OPEN_SALVAGE", e.exception.message)
            with snapbank.Store(dir=d, open_flags=snapbank.OPEN_SALVAGE, **cfg) as st:
                self.assertEqual(st.stats()["salvaged"], 1)
                self.assertGreater(st.stats()["salvaged_segments"], 0)
                with st.namespace(b"m", BPT).match(toks) as m:
                    self.assertEqual(m.n_tokens, len(toks))
                    self.assertEqual(list(m.restore()), [state(toks, 0), state(toks, 1)])
            with snapbank.Store(dir=d, **cfg) as st:
                self.assertEqual(st.stats()["salvaged"], 0)
        finally:
            shutil.rmtree(d)


class SessionTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp(prefix="snapbank-py-", dir="/var/tmp")
        cls.path = snapbank.Model.make(os.path.join(cls.dir, "tiny.gguf"), "tiny", seed=3)
        cls.model = snapbank.Model(cls.path)

    @classmethod
    def tearDownClass(cls):
        cls.model.close()
        shutil.rmtree(cls.dir)

    def test_two_turns(self):
        with snapbank.Store(ram_bytes=64 << 20) as st, snapbank.Session(st, self.model) as s:
            g1 = s.generate("The bank keeps what a model has already read.", n=8)
            self.assertEqual(g1.report["cache_mode"], "cold")
            self.assertIsNone(g1.report["durable"])  # RAM only
            self.assertEqual(len(g1.tokens), 8)
            self.assertIsInstance(g1.text, str)
            self.assertGreater(g1.report["ttft_s"], 0)
            n1 = len(s.tokens)
            g2 = s.generate(" And then it writes pages to the disk.", n=8)
            self.assertEqual(g2.report["cache_mode"], "warm_prefix")
            self.assertEqual(g2.report["cached_tokens"], n1)
            self.assertEqual(g2.report["prompt_tokens"], n1 + g2.report["prefill_tokens"])
            # another session resuming after turn 1 and asking the same: the
            # whole prompt is stored (point state), the answer identical
            with snapbank.Session(st, self.model) as s2:
                s2.resume(s.tokens[:n1])
                again = s2.generate(" And then it writes pages to the disk.", n=8)
            self.assertTrue(again.report["point_hit"])
            self.assertEqual(again.report["prefill_tokens"], 0)
            self.assertEqual(again.tokens, g2.tokens)

    def test_generate_batch(self):
        prompts = ["The bank keeps what a model has already read.",
                   "Pages that are used often stay in memory; the others go to the disk."]
        with snapbank.Store(ram_bytes=64 << 20) as st, snapbank.Store(ram_bytes=64 << 20) as ref_st:
            sess = [snapbank.Session(st, self.model, scope=b"a"),
                    snapbank.Session(st, self.model, scope=b"b")]
            refs = [snapbank.Session(ref_st, self.model, scope=b"a"),
                    snapbank.Session(ref_st, self.model, scope=b"b")]
            try:
                for turn in range(2):
                    ps = [p + (" Again." * turn) for p in prompts]
                    got = snapbank.generate_batch(sess, prompts=ps, n=10, temp=0.8, seeds=[7, 8])
                    for k in range(2):
                        want = refs[k].generate(ps[k], n=10, temp=0.8, seed=7 + k)
                        self.assertEqual(got[k].tokens, want.tokens)
                        self.assertEqual(got[k].text, want.text)
                        self.assertEqual(sess[k].tokens, refs[k].tokens)
                        if turn:
                            self.assertEqual(got[k].report["cache_mode"], "warm_prefix")
                with self.assertRaises(snapbank.SnapbankError) as e:
                    snapbank.generate_batch([sess[0], sess[0]], tokens=[[1, 2], [3, 4]], n=4)
                self.assertEqual(e.exception.code, snapbank.ERR_INVAL)
                with self.assertRaises(ValueError):
                    snapbank.generate_batch(sess, prompts=["only one"], n=4)
            finally:
                for s in sess + refs:
                    s.close()

    def test_warm_equals_cold(self):
        prompt = "Pages that are used often stay in memory; the others go to the disk."
        with snapbank.Store(ram_bytes=64 << 20) as st:
            with snapbank.Session(st, self.model) as a:
                cold = a.generate(prompt, n=12)
            with snapbank.Session(st, self.model) as b:
                warm = b.generate(prompt, n=12)
        self.assertEqual(cold.report["cache_mode"], "cold")
        self.assertEqual(warm.report["cache_mode"], "warm_prefix")
        self.assertTrue(warm.report["point_hit"])
        self.assertEqual(warm.tokens, cold.tokens)
        self.assertEqual(warm.text, cold.text)

    def test_ssd_after_reopen(self):
        d = tempfile.mkdtemp(prefix="snapbank-py-", dir="/var/tmp")
        try:
            with snapbank.Store(dir=d, segment_bytes=1 << 20, disk_bytes=64 << 20, min_prefix_tokens=1,
                                durability="commit") as st, \
                    snapbank.Session(st, self.model) as s:
                g = s.generate("Nothing wrong is ever returned by the bank.", n=4)
                self.assertEqual(g.report["durable"], "yes")  # COMMIT: on disk already
                self.assertEqual(g.report["disk"]["written"], g.report["disk"]["queued"])
                self.assertGreater(g.report["disk"]["queued"], 0)
                saved = s.tokens
            with snapbank.Store(dir=d, segment_bytes=1 << 20, disk_bytes=64 << 20, min_prefix_tokens=1) as st, \
                    snapbank.Session(st, self.model) as s:
                s.resume(saved)
                g = s.generate(" Why?", n=4)
                self.assertIn(g.report["cache_mode"], ("ssd", "cold"))
                if g.report["cache_mode"] == "cold":  # reading judged slower: it says so
                    self.assertTrue(g.report["disk_skipped"])
                else:
                    self.assertEqual(g.report["cached_tokens"], len(saved))
        finally:
            shutil.rmtree(d)

    def test_model_errors(self):
        with self.assertRaises(snapbank.SnapbankError) as cm:
            snapbank.Model("/nonexistent/model.gguf")
        self.assertIn("/nonexistent/model.gguf", str(cm.exception))
        bad = os.path.join(self.dir, "bad.gguf")
        with open(bad, "wb") as f:
            f.write(b"GGUF" + b"\0" * 20)
        with self.assertRaises(snapbank.SnapbankError) as cm:
            snapbank.Model(bad)
        self.assertIn("bad.gguf", str(cm.exception))
        with snapbank.Store() as st, snapbank.Session(st, self.model) as s:
            with self.assertRaises(ValueError):
                s.generate()
            with self.assertRaises(snapbank.SnapbankError) as cm:
                s.generate(tokens=[self.model.n_vocab], n=1)
            self.assertEqual(cm.exception.code, -1)

    def test_every_architecture(self):
        # llama with Llama 3 rope_freqs, qwen2, qwen3 and the hybrid qwen35:
        # a second session asking the same gets the first one's answer from
        # the bank (the hybrid's from the boundary at the prompt's end)
        prompt = "The bank keeps what a model has already read."
        for preset in ("tiny-llama3", "tiny-qwen2", "tiny-qwen3", "tiny-hybrid"):
            path = snapbank.Model.make(os.path.join(self.dir, preset + ".gguf"), preset)
            with snapbank.Model(path) as m, snapbank.Store(ram_bytes=64 << 20) as st:
                with snapbank.Session(st, m) as a:
                    cold = a.generate(prompt, n=8)
                with snapbank.Session(st, m) as b:
                    warm = b.generate(prompt, n=8)
            self.assertEqual(cold.report["cache_mode"], "cold", preset)
            self.assertEqual(warm.report["cache_mode"], "warm_prefix", preset)
            self.assertEqual(warm.tokens, cold.tokens, preset)
            hybrid = preset == "tiny-hybrid"
            self.assertEqual(warm.report["boundary_tokens"],
                             warm.report["cached_tokens"] if hybrid else 0, preset)
            self.assertEqual(cold.report["boundaries_written"], 2 if hybrid else 0, preset)
        with self.assertRaises(snapbank.SnapbankError) as cm:
            snapbank.Model.make(os.path.join(self.dir, "x.gguf"), "llama4")
        self.assertIn("qwen3-0.6b", str(cm.exception))

    def test_tokenizer(self):
        text = "The bank keeps what a model has read, byte for byte: \u00e9\u4e2d"
        ids = self.model.tokenize(text, bos=False)
        self.assertEqual(self.model.detokenize(ids), text)


class PageTest(unittest.TestCase):
    """Zero-copy mode: pages written and read in place through memoryviews
    and numpy arrays, and the views' safety: none outlives its page or
    store, none writes a committed page."""

    def setUp(self):
        self.st = snapbank.Store(ram_bytes=64 << 20)
        self.ns = self.st.namespace(b"model-z", BPT, page_tokens=16)

    def tearDown(self):
        self.st.check()
        self.st.close()

    def fill(self, toks):
        """Pages for toks, each tensor's rows written through numpy."""
        pages = []
        for i in range(0, len(toks), 16):
            p = self.ns.page_alloc()
            self.assertFalse(p.readonly)
            for t in range(len(BPT)):
                rows = numpy.frombuffer(state(toks, t), numpy.uint8).reshape(len(toks), BPT[t])
                n = min(16, len(toks) - i)
                p.tensor(t)[:n] = rows[i:i + n]
            pages.append(p)
        return pages

    @unittest.skipIf(numpy is None, "numpy is not installed")
    def test_commit_match_pages(self):
        toks = list(range(300, 340))  # two full pages and a partial one
        pages = self.fill(toks)
        oc = self.ns.commit_ex(toks, pages)
        self.assertEqual((oc.stored, oc.pages_new), (40, 3))
        self.assertEqual([p.tokens for p in pages], [16, 16, 8])
        self.assertTrue(all(p.readonly for p in pages))
        with self.ns.match(toks) as m:
            self.assertEqual(m.n_tokens, 40)
            got = m.pages()
            self.assertEqual(len(m.pages(first=1, count=1)), 1)
            k, v = m.restore()
        self.assertEqual(k, state(toks, 0))  # copy mode reads what numpy wrote
        for t, whole in enumerate((k, v)):
            read = b"".join(p.tensor(t)[:p.tokens].tobytes() for p in got)
            self.assertEqual(read, whole)
        f16 = got[0].tensor(1, numpy.float16)
        self.assertEqual(f16.shape, (16, BPT[1] // 2))
        self.assertEqual(f16.tobytes()[:BPT[1]], state(toks, 1)[:BPT[1]])
        # a commit of the same tokens deduplicates: the Page holds the index's page
        again = self.fill(toks[:16])
        self.assertEqual(self.ns.commit_ex(toks[:16], again).pages_new, 0)
        self.assertEqual(repr(again[0]), repr(got[0]))  # same address, 16 tokens
        with self.assertRaises(ValueError):
            got[0].tensor(2)
        with self.assertRaises(ValueError):
            got[0].tensor(0, numpy.dtype("V7"))
        with self.assertRaises(ValueError):  # three pages for 40 tokens
            self.ns.commit(toks, pages[:2])
        with self.assertRaises(TypeError):
            self.ns.commit(toks[:16], [b"not a page"])
        with self.assertRaises(snapbank.SnapbankError) as cm:  # one page for two regions
            p = self.ns.page_alloc()
            self.ns.commit(list(range(32)), [p, p])
        self.assertEqual(cm.exception.code, -1)  # SB_ERR_INVAL
        other = self.st.namespace(b"model-y", BPT, page_tokens=16)
        with self.assertRaises(snapbank.SnapbankError) as cm:
            self.ns.commit([1], [other.page_alloc()])
        self.assertEqual(cm.exception.code, -9)  # SB_ERR_FOREIGN_PAGE
        with self.assertRaises(ValueError):
            with self.ns.match(toks) as m:
                m.pages(first=2, count=5)

    @unittest.skipIf(numpy is None, "numpy is not installed")
    def test_copy_on_write(self):
        toks = list(range(50, 70))  # a full page and a 4-token tail
        self.ns.commit(toks, self.fill(toks))
        with self.ns.match(toks) as m:
            tail = m.pages()[-1]
        before = bytes(tail.view())
        with self.assertRaises(ValueError):  # committed: read-only
            tail.tensor(0)[0, 0] = 1
        same = tail.writable(4)
        self.assertIs(same, tail)
        self.assertFalse(tail.readonly)
        k = tail.tensor(0)
        self.assertEqual(k[:4].tobytes(), state(toks, 0)[16 * BPT[0]:])  # n_keep kept
        k[:] = 0xEE  # writes the copy only
        with self.ns.match(toks) as m:
            self.assertEqual(bytes(m.pages()[-1].view()), before)
            self.assertEqual(m.restore()[0], state(toks, 0))
        self.assertEqual(self.st.stats()["cow_copies"], 1)
        with self.assertRaises(snapbank.SnapbankError) as cm:
            tail.writable(17)  # more than page_tokens
        self.assertEqual(cm.exception.code, -1)
        with self.assertRaises(ValueError):
            tail.writable(-1)

    @unittest.skipIf(numpy is None, "numpy is not installed")
    def test_pages_from_disk(self):
        toks = list(range(100, 140))
        d = tempfile.mkdtemp(prefix="snapbank-py-", dir="/var/tmp")
        cfg = dict(segment_bytes=1 << 20, disk_bytes=64 << 20, min_prefix_tokens=1)
        try:
            with snapbank.Store(dir=d, **cfg) as st:
                st.namespace(b"m", BPT).put(toks, [state(toks, 0), state(toks, 1)])
            with snapbank.Store(dir=d, **cfg) as st:
                ns = st.namespace(b"m", BPT)
                with ns.match(toks) as m:
                    self.assertEqual(m.n_pages_disk, 3)
                    got = m.pages()  # read from disk first
                for t in range(len(BPT)):
                    read = b"".join(p.tensor(t)[:p.tokens].tobytes() for p in got)
                    self.assertEqual(read, state(toks, t))
        finally:
            shutil.rmtree(d)

    def test_view_after_close(self):
        p = self.ns.page_alloc()
        v = p.view()
        self.assertFalse(v.readonly)
        v[:4] = b"abcd"
        part = v[:4]  # shares v's buffer: close must wait for it too
        with self.assertRaises(BufferError) as cm:
            p.close()
        self.assertIn("view()", str(cm.exception))
        self.assertEqual(bytes(part), b"abcd")  # still the page's, still usable
        del part
        p.close()
        with self.assertRaises(ValueError):
            v[0]
        with self.assertRaises(snapbank.SnapbankError):
            p.view()
        p.close()  # a second close is a no-op

    @unittest.skipIf(numpy is None, "numpy is not installed")
    def test_store_close_with_live_array(self):
        toks = list(range(16))
        pages = self.fill(toks)
        arr = pages[0].tensor(0)
        v = pages[0].view()
        with self.assertRaises(BufferError) as cm:
            self.st.close()
        self.assertIn("tensor(0)", str(cm.exception))
        self.assertEqual(arr[0].tobytes(), state(toks, 0)[:BPT[0]])  # the array still works
        self.assertEqual(v[0], arr[0, 0])  # refused before releasing anything
        self.st.check()  # the store is open and usable
        self.assertEqual(self.ns.put([9, 8, 7], [state([9, 8, 7], 0), state([9, 8, 7], 1)]), 3)
        with self.assertRaises(BufferError):  # commit would make the array's page read-only
            self.ns.commit(toks, pages)
        self.assertFalse(pages[0].readonly)
        del arr
        self.st.close()
        with self.assertRaises(ValueError):
            v[0]
        self.st = snapbank.Store(ram_bytes=64 << 20)  # for tearDown

    def test_readonly_view(self):
        toks = [1, 2, 3]
        p = self.ns.page_alloc()
        self.ns.commit(toks, [p])
        v = p.view()
        self.assertTrue(v.readonly)
        with self.assertRaises(TypeError):
            v[0] = 1
        with self.assertRaises(TypeError):
            memoryview(v)[0:1] = b"x"
        if numpy is not None:
            a = numpy.frombuffer(v, numpy.uint8)
            self.assertFalse(a.flags.writeable)
            with self.assertRaises(ValueError):
                a.flags.writeable = True
            del a

    def test_gc_with_live_views(self):
        """Stores dropped with pages and views alive, collected and torn
        down at exit, in a child process: it must exit cleanly."""
        code = r'''
import gc, snapbank
try:
    import numpy
except ImportError:
    numpy = None
st = snapbank.Store(ram_bytes=16 << 20)
ns = st.namespace(b"m", [64], page_tokens=4)
p = ns.page_alloc()
v = p.view()
v[:3] = b"abc"
part = v[1:3]
loop = [st, part]
loop.append(loop)          # a cycle that holds the store and a slice
del st, ns, p, v, part, loop
gc.collect()               # the store's finalizer refuses: the page leaks

st = snapbank.Store(ram_bytes=16 << 20)
ns = st.namespace(b"m", [64], page_tokens=4)
q = ns.page_alloc()
w = q.view()
del st, ns, q
gc.collect()               # nothing else held w: it is released, all closed
try:
    w[0]
    raise SystemExit("a view outlived its store")
except ValueError:
    pass

st = snapbank.Store(ram_bytes=16 << 20)
ns = st.namespace(b"m", [64], page_tokens=4)
pages = [ns.page_alloc() for _ in range(3)]
views = [p.view() for p in pages]
if numpy is not None:
    arr = pages[0].tensor(0)
    arr[:] = 7
del st, ns, pages
gc.collect()
if numpy is not None:
    assert int(arr.sum()) == 7 * arr.size
print("ok")                # views, arrays and stores left for exit
'''
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(
            [os.path.dirname(os.path.dirname(os.path.abspath(snapbank.__file__)))] +
            [x for x in [env.get("PYTHONPATH")] if x])
        r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                           text=True, timeout=120)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout.strip(), "ok", r.stderr)


if __name__ == "__main__":
    unittest.main()
