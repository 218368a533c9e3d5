"""snapbank: a key-value store for LLM tensor snapshots, keyed by token-ID
prefixes, and a CPU runtime whose sessions restore warm prefixes from it.

Python over libsnapbank_rt through ctypes (standard library only). The C
header store/include/snapbank.h is the manual; this module follows it:

    with snapbank.Store(ram_bytes=1 << 30) as st:
        ns = st.namespace(b"my-model-digest", bytes_per_token=[4096, 4096])
        ns.put(tokens, [k_bytes, v_bytes])            # any buffers, not copied here
        with ns.match(prompt) as m:                   # pins what it found
            k, v = m.restore()                        # bytearrays of m.n_tokens tokens

    model = snapbank.Model("small.gguf")
    with snapbank.Store(dir="/var/tmp/bank") as st, snapbank.Session(st, model) as s:
        g = s.generate("The bank keeps", n=16)
        g.text, g.tokens, g.report["cache_mode"], g.report["ttft_s"]

Zero-copy mode (sb_ns_page_alloc, sb_ns_commit, sb_match_pages) hands out
Page objects whose view() and tensor() are memoryviews and numpy arrays
over the page's own memory, with no copy:

        p = ns.page_alloc()                           # private: writable views
        p.tensor(0)[:n] = k_rows                      # (page_tokens, 4096) uint8
        ns.commit(tokens, [p])                        # committed: read-only now
        with ns.match(prompt) as m:
            q = m.pages()[0]                          # read-only Page
            k = q.tensor(0, numpy.float16)

A page's views stop working (ValueError) when the Page or its Store
closes; a close, commit or writable() that would take memory from under
something still using a view (a numpy array, a slice) raises BufferError
instead, closing or committing nothing.

Every failure raises SnapbankError, with .code (the negative sb_err code)
and .message (sb_strerror's text). Objects hold C resources: close them
(or use them as context managers); closing a Store closes what was opened
from it.
"""
import array
import gc
import operator
import ctypes
import json
import os
import sys
import weakref
from typing import NamedTuple

from . import _native
from ._native import lib

__all__ = ["SnapbankError", "Store", "Namespace", "Match", "Load", "Page", "BlockTable", "Model", "Session",
           "Generation", "PutOutcome", "LayeredPut", "generate_batch", "version"]

OK, ERR_INVAL, ERR_BUDGET, ERR_RANGE, ERR_SUPERBLOCK = 0, -1, -8, -11, -21
ERR_PENDING, ERR_NOT_DURABLE, ERR_CANCELED, ERR_BUSY = -22, -23, -24, -25
ERR_INCOMPLETE, ERR_WRITE_ONLY, ERR_RECLAIMED = -26, -27, -28
WAIT_FOREVER = 0xFFFFFFFF
OPEN_SALVAGE = 1  # open_flags: rebuild a superblock that cannot be used (sb_store_open)


class SnapbankError(Exception):
    """A call into libsnapbank failed: .code is the sb_err code, .message
    sb_strerror's description, .detail what the library said besides."""

    def __init__(self, code, what="", detail=""):
        self.code = code
        self.message = lib.sb_strerror(code).decode()
        self.detail = detail
        text = "%s: %s" % (what, self.message) if what else self.message
        if detail:
            text += " (%s)" % detail
        super().__init__(text)


def _check(rc, what, detail=""):
    if rc != OK:
        raise SnapbankError(rc, what, detail)


def version():
    """The library's version as "major.minor.patch"."""
    v = lib.sb_version()
    return "%d.%d.%d" % (v // 10000, v // 100 % 100, v % 100)


_INT_FORMATS = frozenset("bBhHiIlLqQnN")


def _token_id(i, t):
    """Token t (at index i) as a Python int in [0, 2**32), or an error
    naming the value and why it is not a token id."""
    if isinstance(t, bool):
        raise TypeError("tokens[%d]: %r is a bool, not a token id" % (i, t))
    try:
        v = operator.index(t)
    except TypeError:
        raise TypeError("tokens[%d]: %r (%s) is not an integer token id"
                        % (i, t, type(t).__name__)) from None
    if v < 0:
        raise ValueError("tokens[%d]: %d is negative; token ids are uint32" % (i, v))
    if v > 0xFFFFFFFF:
        raise ValueError("tokens[%d]: %d is over 4294967295; token ids are uint32" % (i, v))
    return v


def _tokens(tokens):
    """A ctypes uint32 array of the token ids, and its length. tokens is a
    sequence of integers (int, numpy integers: anything with __index__) or a
    one-dimensional buffer of integers of any width and sign (array('I'),
    array('q'), a numpy array of int64, the default): a contiguous native
    uint32 buffer is used as it is, any other is converted, each value
    checked to fit in uint32 (a ValueError or TypeError names the first
    value that does not, its index, and why)."""
    if isinstance(tokens, (bytes, bytearray, str)):
        raise TypeError("tokens: give a sequence of ints or a buffer of integers, not %s"
                        % type(tokens).__name__)
    try:
        mv = memoryview(tokens)
    except TypeError:
        mv = None
    if mv is not None:
        fmt = mv.format.lstrip("@=")
        if mv.ndim != 1:
            raise ValueError("tokens: a buffer of %d dimensions; give one dimension"
                             % mv.ndim)
        if fmt.lstrip("<>!") not in _INT_FORMATS:
            raise TypeError("tokens: the buffer's %r items are not integers" % mv.format)
        if fmt in ("I", "<I", "L", "<L") and mv.itemsize == 4 and mv.c_contiguous:
            n = mv.nbytes // 4
            if mv.readonly:
                arr = (_native.u32 * n).from_buffer_copy(mv)
            else:
                arr = (_native.u32 * n).from_buffer(mv.cast("B"))
            return arr, n
        try:
            seq = mv.tolist()
        except NotImplementedError:  # an explicit byte order: the items one by one
            seq = list(tokens)
    else:
        seq = list(tokens)
    ids = [_token_id(i, t) for i, t in enumerate(seq)]
    return (_native.u32 * len(ids))(*ids), len(ids)


def _buffer(obj, need, writable, what):
    """(address, keep-alive) of a contiguous buffer of at least need bytes,
    without copying (a read-only buffer other than bytes is copied once)."""
    mv = memoryview(obj)
    if not mv.c_contiguous:
        raise ValueError("%s: the buffer must be contiguous" % what)
    if mv.nbytes < need:
        raise ValueError("%s: %d bytes given, %d needed" % (what, mv.nbytes, need))
    if not mv.readonly:
        cbuf = (ctypes.c_char * mv.nbytes).from_buffer(mv.cast("B"))
        return ctypes.addressof(cbuf), cbuf
    if writable:
        raise ValueError("%s: the buffer is read-only" % what)
    if isinstance(obj, bytes):
        return ctypes.cast(ctypes.c_char_p(obj), ctypes.c_void_p).value, obj
    copy = ctypes.create_string_buffer(mv.tobytes(), mv.nbytes)
    return ctypes.addressof(copy), copy


class _Owned:
    """A C handle with children that must close before it."""

    def __init__(self):
        self._h = None
        self._children = []

    def _adopt(self, child):
        self._children = [c for c in self._children if c._h]
        self._children.append(child)
        return child

    def _view_records(self):
        """The page views handed out below this handle (see Page)."""
        for c in self._children:
            yield from c._view_records()

    def close(self):
        _unexport(self._view_records(), "%s.close" % type(self).__name__)
        for c in reversed(self._children):
            c.close()
        self._children = []
        if self._h:
            self._free(self._h)
            self._h = None

    def _live(self):
        if not self._h:
            raise SnapbankError(ERR_INVAL, "%s is closed" % type(self).__name__)
        return self._h

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):  # a close refused (a page view in use) leaks the handle
        try:
            self.close()
        except Exception:
            pass


_DURABILITY = {"none": 0, "periodic": 1, "commit": 2}
_WRITE_MODE = {"through": 0, "back": 1, "only": 2}
_CONFIG_KEYS = {name for name, _ in _native.Config._fields_} - {
    "dir", "reserved0", "clock_ns", "clock_ctx"}
_CONFIG_STRINGS = {"shared_seeds", "shared_user", "shared_password"}


class Store(_Owned):
    """A bank (sb_store). dir: a directory for the disk tier (None: RAM
    only). Keyword arguments are sb_config's fields (ram_bytes, ram_pages,
    ns_ram_bytes, max_seq_tokens, disk_bytes, segment_bytes, queue_depth,
    durability "none" | "periodic" | "commit", write_mode "through" |
    "back" | "only", sync_bytes, sync_interval_ms, foreground_hold_ms,
    disk_free_floor_bytes, min_prefix_tokens, compress_level, open_flags
    (OPEN_SALVAGE: a store whose superblock cannot be used, refused with
    ERR_SUPERBLOCK otherwise, is rebuilt from its segment files), the
    shared tier's shared_seeds "host:port[,...]", shared_user and
    shared_password (str), shared_timeout_ms, shared_ttl_s,
    shared_publish_bytes_per_s, ...); the rest keep sb_config_default's
    values."""

    def __init__(self, dir=None, **config):
        super().__init__()
        cfg = _native.Config()
        lib.sb_config_default(ctypes.byref(cfg))
        if dir is not None:
            cfg.dir = os.fsencode(dir)
        for key, value in config.items():
            if key not in _CONFIG_KEYS:
                raise TypeError("Store: unknown setting %r" % key)
            if key == "durability" and isinstance(value, str):
                value = _DURABILITY[value]
            if key == "write_mode" and isinstance(value, str):
                value = _WRITE_MODE[value]
            if key in _CONFIG_STRINGS:
                if not isinstance(value, str):
                    raise ValueError("Store: %s must be a str" % key)
                setattr(cfg, key, value.encode())
                continue
            if not isinstance(value, int) or value < 0:
                raise ValueError("Store: %s must be a non-negative int" % key)
            setattr(cfg, key, value)
        h = ctypes.c_void_p()
        _check(lib.sb_store_open(ctypes.byref(cfg), ctypes.byref(h)), "sb_store_open")
        self._h = h.value
        self._free = lib.sb_store_close

    def stats(self):
        """sb_store_stats as a dict (misses by reason as dicts)."""
        buf = ctypes.create_string_buffer(16384)
        _check(lib.sbrt_stats_json(self._live(), buf, len(buf)), "sb_store_stats")
        return json.loads(buf.value.decode())

    def flush(self):
        """Wait until everything committed is durable on the disk tier."""
        _check(lib.sb_store_flush(self._live()), "sb_store_flush")

    def wait_durable(self, ticket, timeout_ms=None):
        """Wait (at most timeout_ms milliseconds; None: no limit) until the
        state of a put's ticket (PutOutcome.ticket) is durable. Returns
        "durable", "pending" (the time ran out), "never" (a write it needs
        was denied or failed: the state is in RAM only; also ticket 0) or
        "write_only" (a write-only store: written and synced for a later
        open that reads the disk tier, never durable) or "reclaimed" (it
        was durable, then reclamation under the disk cap took records it
        needs). Raises
        SnapbankError for a ticket this store never handed out."""
        t = WAIT_FOREVER if timeout_ms is None else min(int(timeout_ms), WAIT_FOREVER - 1)
        return self._durable_word(lib.sb_store_wait_durable(self._live(), ticket, t))

    def is_durable(self, ticket):
        """The state of a ticket now: as wait_durable answers."""
        return self._durable_word(lib.sb_store_is_durable(self._live(), ticket))

    @staticmethod
    def _durable_word(rc):
        if rc == OK:
            return "durable"
        if rc == ERR_PENDING:
            return "pending"
        if rc == ERR_NOT_DURABLE:
            return "never"
        if rc == ERR_WRITE_ONLY:
            return "write_only"
        if rc == ERR_RECLAIMED:
            return "reclaimed"
        raise SnapbankError(rc, "sb_store_wait_durable")

    def close(self):
        """Close what was opened from the store, then the store: its disk
        tier writes and syncs what it holds. Raises SnapbankError when those
        last writes failed (the store is closed all the same). Raises
        BufferError, closing nothing, while a Page view is still in use
        (see Page); views nothing else used are released by then."""
        _unexport(self._view_records(), "Store.close")
        for c in reversed(self._children):
            c.close()
        self._children = []
        if self._h:
            h, self._h = self._h, None
            _check(lib.sb_store_close(h), "sb_store_close")

    def check(self):
        """Verify every invariant of the index and the RAM tier."""
        _check(lib.sb_store_check(self._live()), "sb_store_check")

    def namespace(self, model_id, bytes_per_token, page_tokens=16, point_bytes=0, scope=b"",
                  point_required=False):
        """The namespace of (model_id, scope) with this layout (sb_ns_open)."""
        return self._adopt(Namespace(self, model_id, bytes_per_token, page_tokens, point_bytes,
                                     scope, point_required))


def _bytes(x, what):
    if isinstance(x, str):
        return x.encode()
    if isinstance(x, (bytes, bytearray, memoryview)):
        return bytes(x)
    raise TypeError("%s: give bytes or str" % what)


class BlockTable:
    """Where one tensor's token slices are in an engine's own pool
    (sb_block_table): position p (p >= first_pos, q = p - first_pos) is at
    byte block_ids[q // block_tokens] * block_stride + (q % block_tokens) *
    token_stride of buffer (any buffer: bytearray, memoryview, numpy array;
    writable for a restore). block_ids None: block i is i; block_tokens 0:
    the buffer is one block; token_stride 0: the tensor's bytes per token.
    Every position a call touches is checked to lie inside the buffer (a
    ValueError otherwise), so a wrong table is an error, never a write
    outside it."""

    def __init__(self, buffer, block_tokens=0, block_ids=None, block_stride=0, token_stride=0,
                 first_pos=0):
        if block_tokens < 0 or block_stride < 0 or token_stride < 0 or first_pos < 0:
            raise ValueError("BlockTable: sizes must not be negative")
        self.buffer = buffer
        self.block_tokens = int(block_tokens)
        self.block_stride = int(block_stride)
        self.token_stride = int(token_stride)
        self.first_pos = int(first_pos)
        try:
            self.block_ids = None if block_ids is None else _tokens(block_ids)
        except (ValueError, TypeError) as e:
            raise type(e)(str(e).replace("tokens", "block_ids", 1)) from None

    def _native(self, bpt, lo, hi, writable, what):
        """The sb_block_table for positions [lo, hi) of a tensor of bpt bytes
        per token, every position's bytes checked to lie in the buffer; and
        what keeps the buffer alive."""
        stride = self.token_stride or bpt
        if stride < bpt:
            raise ValueError("%s: token_stride %d is below the tensor's %d bytes per token"
                             % (what, stride, bpt))
        if lo < self.first_pos:
            raise ValueError("%s: the table starts at position %d, after %d"
                             % (what, self.first_pos, lo))
        mv = memoryview(self.buffer)
        size = mv.nbytes
        ids, n_ids = self.block_ids if self.block_ids else (None, 0)
        end = 0  # one past the last byte the positions use
        if hi > lo:
            q0, q1 = lo - self.first_pos, hi - 1 - self.first_pos
            if not self.block_tokens:
                end = q1 * stride + bpt
            else:
                bt = self.block_tokens
                for b in range(q0 // bt, q1 // bt + 1):
                    if ids is not None and b >= n_ids:
                        raise ValueError("%s: position %d needs block %d; the table has %d"
                                         % (what, self.first_pos + b * bt, b, n_ids))
                    bid = ids[b] if ids is not None else b
                    last = min(q1, b * bt + bt - 1) - b * bt
                    end = max(end, bid * self.block_stride + last * stride + bpt)
        if end > size:
            raise ValueError("%s: the table reaches byte %d of a %d-byte buffer"
                             % (what, end, size))
        addr, keep = _buffer(self.buffer, 0, writable, what)
        t = _native.BlockTable(base=addr, first_pos=self.first_pos,
                               block_tokens=self.block_tokens, block_stride=self.block_stride,
                               token_stride=self.token_stride)
        if ids is not None:
            t.block_ids = ctypes.cast(ids, ctypes.POINTER(_native.u32))
        return t, (keep, ids)


def _tables(tables, bpts, lo, hi, writable):
    """An array of sb_block_table for tables (one per tensor of bpts) and
    what keeps them alive."""
    arr = (_native.BlockTable * len(tables))()
    keep = []
    for i, (tab, bpt) in enumerate(zip(tables, bpts)):
        if not isinstance(tab, BlockTable):
            raise TypeError("table %d: give a snapbank.BlockTable" % i)
        arr[i], k = tab._native(bpt, lo, hi, writable, "table %d" % i)
        keep.append(k)
    return arr, keep


class Namespace(_Owned):
    """A namespace: a model identity and a scope (sb_ns). Nothing crosses
    namespaces."""

    def __init__(self, store, model_id, bytes_per_token, page_tokens, point_bytes, scope,
                 point_required):
        super().__init__()
        self._mid = _bytes(model_id, "model_id")
        self._scope = _bytes(scope, "scope")
        self.bytes_per_token = [int(b) for b in bytes_per_token]
        self._bpt = (_native.u32 * len(self.bytes_per_token))(*self.bytes_per_token)
        lay = _native.Layout(ctypes.cast(ctypes.c_char_p(self._mid), ctypes.c_void_p),
                             len(self._mid), page_tokens, len(self.bytes_per_token),
                             self._bpt, point_bytes, 1 if point_required else 0)
        h = ctypes.c_void_p()
        _check(lib.sb_ns_open(store._live(), ctypes.byref(lay), self._scope or None,
                              len(self._scope), ctypes.byref(h)), "sb_ns_open")
        self._h = h.value
        self._free = lib.sb_ns_close
        self.point_bytes = point_bytes

    def prefault(self, n_pages):
        """sb_ns_prefault: have up to n_pages page buffers of this size
        mapped and faulted in ahead of need (call it at start, as an engine
        allocates its KV cache, so the first puts do not pay the page
        faults); returns how many spares are ready."""
        ready = ctypes.c_size_t()
        _check(lib.sb_ns_prefault(self._live(), n_pages, ctypes.byref(ready)), "sb_ns_prefault")
        return ready.value

    def pin(self, tokens, ttl_ms=0):
        """sb_ns_pin: keep the longest stored prefix of tokens (a system
        prompt, say) from eviction for ttl_ms of the store's clock (0: until
        unpin). Returns (pin_id, tokens pinned)."""
        arr, n = _tokens(tokens)
        pid, got = ctypes.c_uint64(), ctypes.c_size_t()
        _check(lib.sb_ns_pin(self._live(), arr, n, ttl_ms, ctypes.byref(pid), ctypes.byref(got)),
               "sb_ns_pin")
        return pid.value, got.value

    def unpin(self, pin_id):
        """sb_ns_unpin (SnapbankError ERR_NOT_FOUND for an id not live)."""
        _check(lib.sb_ns_unpin(self._live(), pin_id), "sb_ns_unpin")

    def info(self):
        """sb_ns_get_info as a dict."""
        i = _native.NsInfo()
        _check(lib.sb_ns_get_info(self._live(), ctypes.byref(i)), "sb_ns_get_info")
        return {name: getattr(i, name) for name, _ in _native.NsInfo._fields_}

    def put(self, tokens, tensors, point=None):
        """Store the state of tokens: tensors[t] is a buffer of len(tokens) *
        bytes_per_token[t] bytes (read in place); point, the point state at
        the end. Returns how many leading tokens are restorable afterwards:
        all of them, or fewer when the RAM budget could not hold the rest."""
        return self.put_ex(tokens, tensors, point).stored

    def put_ex(self, tokens, tensors, point=None):
        """put, and what the disk tier made of it (sb_ns_put_ex): a
        PutOutcome with stored (as put returns), ticket (for
        Store.wait_durable; 0 without a disk tier), durable (on disk and
        synced when the call returned) and the block counts."""
        arr, n = _tokens(tokens)
        if len(tensors) != len(self.bytes_per_token):
            raise ValueError("put: %d tensors given, the layout has %d"
                             % (len(tensors), len(self.bytes_per_token)))
        keep = []
        ptrs = (ctypes.c_void_p * len(tensors))()
        for t, buf in enumerate(tensors):
            ptrs[t], k = _buffer(buf, n * self.bytes_per_token[t], False, "tensor %d" % t)
            keep.append(k)
        pp = self._point(point, keep)
        stored = ctypes.c_size_t()
        oc = _native.WriteOutcome()
        rc = lib.sb_ns_put_ex(self._live(), arr, n, ptrs, pp, ctypes.byref(stored),
                              ctypes.byref(oc))
        if rc not in (OK, ERR_BUDGET):
            _check(rc, "sb_ns_put")
        return _outcome(stored, oc)

    def _point(self, point, keep):
        """The address of a point state buffer (None: none), kept alive in keep."""
        if point is None:
            return None
        pp, k = _buffer(point, self.point_bytes, False, "point")
        keep.append(k)
        return pp

    def put_blocks(self, tokens, tables, from_pos=0, point=None):
        """sb_ns_put_blocks: store the state of tokens from an engine's pool,
        reading only positions [from_pos, len(tokens)) through tables (one
        BlockTable per tensor); the bank must hold tokens[:from_pos] already.
        Returns a PutOutcome as put_ex. Raises SnapbankError ERR_RANGE when
        the bank holds fewer than from_pos of these tokens (its .held says
        how many: put again from there)."""
        arr, n = _tokens(tokens)
        if len(tables) != len(self.bytes_per_token):
            raise ValueError("put_blocks: %d tables given, the layout has %d"
                             % (len(tables), len(self.bytes_per_token)))
        if not 0 <= from_pos <= n:
            raise ValueError("put_blocks: from_pos %d outside [0, %d]" % (from_pos, n))
        tabs, keep = _tables(tables, self.bytes_per_token, from_pos, n, False)
        pp = self._point(point, keep)
        stored = ctypes.c_size_t()
        oc = _native.WriteOutcome()
        rc = lib.sb_ns_put_blocks(self._live(), arr, n, from_pos, tabs, pp,
                                  ctypes.byref(stored), ctypes.byref(oc))
        if rc == ERR_RANGE:
            e = SnapbankError(rc, "sb_ns_put_blocks")
            e.held = stored.value
            raise e
        if rc not in (OK, ERR_BUDGET):
            _check(rc, "sb_ns_put_blocks")
        return _outcome(stored, oc)

    def put_layers(self, tokens, from_pos=0):
        """sb_ns_put_begin: a put whose tensors come over several calls, as
        an engine saves each layer's KV when that layer finishes. Returns a
        LayeredPut: give every tensor with .tensors(first_tensor, tables),
        then .finish() stores it (a PutOutcome as put_blocks) or .abort()
        drops it. The RAM for its pages is taken now; nothing is visible to
        a match before finish. Raises SnapbankError ERR_RANGE when the bank
        holds fewer than from_pos of these tokens (.held says how many)."""
        return self._adopt(LayeredPut(self, tokens, from_pos))

    def fetch_shared(self, tokens):
        """sb_ns_fetch_shared: index the shared tier's pages of tokens past
        what RAM and disk hold. Returns the tokens added (whole pages).
        Raises SnapbankError (ERR_UNSUPPORTED without a shared tier; ERR_IO
        when the cluster did not answer; ERR_CORRUPT for a refused value)."""
        arr, n = _tokens(tokens)
        added = ctypes.c_size_t()
        _check(lib.sb_ns_fetch_shared(self._live(), arr, n, ctypes.byref(added)),
               "sb_ns_fetch_shared")
        return added.value

    def remove(self, tokens):
        """sb_ns_remove: forget every state whose tokens start with tokens
        (the pages after the prefix, and the point states at or past its
        end), in RAM, on disk (a tombstone, synced before the call returns)
        and in the shared tier (its keys deleted, best effort). Returns how
        many pages and point states left the index. Live matches keep their
        bytes. Raises SnapbankError: ERR_IO / ERR_NOSPC (they left RAM but
        the removal is not durable: a reopen may bring them back; call
        again)."""
        arr, n = _tokens(tokens)
        k = ctypes.c_size_t()
        _check(lib.sb_ns_remove(self._live(), arr, n, ctypes.byref(k)), "sb_ns_remove",
               "%d removed from RAM" % k.value)
        return k.value

    def fetch_shared_start(self, tokens):
        """sb_ns_fetch_shared_start: fetch_shared on the store's loader
        threads; returns a Load at once, whose wait() returns the tokens
        added (poll() gives them at the end; fileno() for event loops)."""
        arr, n = _tokens(tokens)
        h = ctypes.c_void_p()
        _check(lib.sb_ns_fetch_shared_start(self._live(), arr, n, ctypes.byref(h)),
               "sb_ns_fetch_shared_start")
        return self._adopt(Load(self, h.value, 0))

    def match(self, tokens):
        """The longest restorable prefix of tokens, pinned until the Match is
        released (use it as a context manager)."""
        return self._adopt(Match(self, tokens))

    def lookup(self, requests):
        """How much of each token sequence in requests the bank holds now,
        without pinning anything (sb_ns_lookup): one dict per request, as
        Match.info() gives (n_tokens, n_pages, n_pages_ram, n_pages_disk,
        n_matched_tokens, has_point, miss), all answered under one hold of
        the store's lock. A snapshot: match() is what holds the pages."""
        reqs = list(requests)
        arr = (_native.Lookup * len(reqs))()
        keep = []
        for i, toks in enumerate(reqs):
            t, n = _tokens(toks)
            keep.append(t)
            arr[i].tokens = ctypes.cast(t, ctypes.POINTER(_native.u32))
            arr[i].n_tokens = n
        _check(lib.sb_ns_lookup(self._live(), arr, len(reqs)), "sb_ns_lookup")
        return [_info_dict(a.info) for a in arr]

    def page_alloc(self):
        """sb_ns_page_alloc: a fresh page (unspecified contents) as a Page,
        private to the caller and writable until committed. It counts
        against the RAM budgets until closed (SnapbankError ERR_BUDGET when
        they are full of pinned pages)."""
        h = ctypes.c_void_p()
        _check(lib.sb_ns_page_alloc(self._live(), ctypes.byref(h)), "sb_ns_page_alloc")
        return self._adopt(Page(self, h.value))

    def commit(self, tokens, pages, point=None):
        """sb_ns_commit: index tokens with pages (Page objects, one per
        page_tokens tokens, the last may be partial) by reference; point,
        the point state at the end. Returns len(tokens): all of them are
        restorable (a failure raises and commits nothing). See commit_ex."""
        return self.commit_ex(tokens, pages, point).stored

    def commit_ex(self, tokens, pages, point=None):
        """commit, and what the disk tier made of it: a PutOutcome as
        put_ex's (stored is len(tokens)).

        The pages stay the caller's (each Page keeps its reference) but are
        committed, so immutable: their views from then on are read-only,
        and a Page whose tokens the index held already now holds the
        index's page (sb_ns_commit's deduplication). So the call first
        releases every view of the pages given, and raises BufferError,
        committing nothing, while one is still in use (a numpy array made
        from it, say; see Page). Use Page.writable to write again."""
        arr, n = _tokens(tokens)
        pages = list(pages)
        for i, p in enumerate(pages):
            if not isinstance(p, Page):
                raise TypeError("commit: pages[%d] is a %s, not a snapbank.Page"
                                % (i, type(p).__name__))
        pt = self.info()["page_tokens"]
        if len(pages) != -(-n // pt):
            raise ValueError("commit: %d tokens take %d pages of %d tokens; %d given"
                             % (n, -(-n // pt), pt, len(pages)))
        handles = (ctypes.c_void_p * max(len(pages), 1))(*[p._live() for p in pages])
        _unexport((r for p in pages for r in p._views), "Namespace.commit")
        for p in pages:
            p._views = []
        keep = []
        pp = self._point(point, keep)
        oc = _native.WriteOutcome()
        _check(lib.sb_ns_commit_ex(self._live(), arr, n, handles, pp, ctypes.byref(oc)),
               "sb_ns_commit")
        for i, p in enumerate(pages):  # deduplicated: the index's page, our reference
            p._h = handles[i]
        return _outcome(ctypes.c_size_t(n), oc)


class LayeredPut(_Owned):
    """A layered put (sb_put), from Namespace.put_layers. Used as a context
    manager it is aborted when the block is left without finish (by an
    exception or not): nothing is stored then. Closing the namespace or the
    store aborts it too. One thread at a time."""

    def __init__(self, ns, tokens, from_pos):
        super().__init__()
        arr, n = _tokens(tokens)
        if not 0 <= from_pos <= n:
            raise ValueError("put_layers: from_pos %d outside [0, %d]" % (from_pos, n))
        self._ns, self.n_tokens, self.from_pos = ns, n, from_pos
        h = ctypes.c_void_p()
        rc = lib.sb_ns_put_begin(ns._live(), arr, n, from_pos, ctypes.byref(h))
        if rc == ERR_RANGE:
            e = SnapbankError(rc, "sb_ns_put_begin")
            e.held = ns.lookup([tokens])[0]["n_matched_tokens"]
            raise e
        _check(rc, "sb_ns_put_begin")
        self._h = h.value
        self._free = lib.sb_put_abort

    def tensors(self, first_tensor, tables):
        """sb_put_tensors: gather tensors first_tensor, first_tensor + 1, ...
        (one BlockTable each, positions [from_pos, n_tokens)) into the put's
        pages; the buffers are read during the call only. A tensor given
        again: the last bytes win."""
        bpts = self._ns.bytes_per_token
        if first_tensor < 0 or not tables or first_tensor + len(tables) > len(bpts):
            raise ValueError("tensors: %d tables from tensor %d, the layout has %d"
                             % (len(tables), first_tensor, len(bpts)))
        tabs, keep = _tables(tables, bpts[first_tensor:], self.from_pos, self.n_tokens, False)
        _check(lib.sb_put_tensors(self._live(), first_tensor, len(tables), tabs),
               "sb_put_tensors")

    def finish(self, point=None):
        """sb_put_finish: store the put (and point, the point state at the
        end), as put_blocks would; the put is over whatever happens. Returns
        a PutOutcome. Raises SnapbankError ERR_INCOMPLETE when a tensor was
        never given (nothing stored)."""
        h = self._live()
        keep = []
        pp = self._ns._point(point, keep)
        stored = ctypes.c_size_t()
        oc = _native.WriteOutcome()
        self._h = None
        rc = lib.sb_put_finish(h, pp, ctypes.byref(stored), ctypes.byref(oc))
        if rc not in (OK, ERR_BUDGET):
            _check(rc, "sb_put_finish")
        return _outcome(stored, oc)

    def abort(self):
        """sb_put_abort: drop the put; nothing is stored, its pages go."""
        self.close()


def _outcome(stored, oc):
    """A PutOutcome of an sb_write_outcome and the stored count."""
    return PutOutcome(stored.value, oc.ticket, bool(oc.durable), oc.pages_new, oc.points_new,
                      oc.queued, oc.written, oc.deferred, oc.dirty, oc.denied,
                      {lib.sb_deny_name(i).decode(): oc.denied_by[i]
                       for i in range(_native.N_DENY)})


class PutOutcome(NamedTuple):
    """What Namespace.put_ex returns (sb_write_outcome; snapbank.h's
    "Durability of one call")."""
    stored: int
    ticket: int
    durable: bool
    pages_new: int
    points_new: int
    queued: int
    written: int
    deferred: int
    dirty: int
    denied: int
    denied_by: dict


def _info_dict(i):
    """An sb_match_info as a dict (miss by name)."""
    d = {name: getattr(i, name) for name, _ in _native.MatchInfo._fields_}
    d["miss"] = lib.sb_miss_name(i.miss).decode()
    d["has_point"] = bool(i.has_point)
    return d


class Match(_Owned):
    """What sb_ns_match found; its pages stay pinned until release()."""

    def __init__(self, ns, tokens):
        super().__init__()
        self._ns = ns
        arr, n = _tokens(tokens)
        h = ctypes.c_void_p()
        _check(lib.sb_ns_match(ns._live(), arr, n, ctypes.byref(h)), "sb_ns_match")
        self._h = h.value
        self._free = lib.sb_match_release

    def release(self):
        self.close()

    def _info(self):
        i = _native.MatchInfo()
        _check(lib.sb_match_get_info(self._live(), ctypes.byref(i)), "sb_match_get_info")
        return i

    @property
    def n_tokens(self):
        """The restorable prefix length L (it shrinks if a disk page fails)."""
        return self._info().n_tokens

    @property
    def n_pages_disk(self):
        return self._info().n_pages_disk

    @property
    def has_point(self):
        return bool(self._info().has_point)

    @property
    def miss(self):
        """Why L is short of the request: "none", "no_prefix", "evicted", ..."""
        return lib.sb_miss_name(self._info().miss).decode()

    def info(self):
        return _info_dict(self._info())

    def restore_blocks(self, tables, from_pos=0, n_tokens=None, first_tensor=0):
        """sb_match_restore_blocks: copy positions [from_pos, from_pos +
        n_tokens) (default: to L) of tensors first_tensor .. (one BlockTable
        per tensor, written in place) straight into an engine's pool; a
        layer at a time if wanted. Raises SnapbankError as restore does (on
        ERR_CORRUPT / ERR_IO the match shrank: what is left was copied)."""
        L = self.n_tokens
        n = L - from_pos if n_tokens is None else n_tokens
        bpt = self._ns.bytes_per_token
        if not 0 <= first_tensor < len(bpt) or not tables or \
                first_tensor + len(tables) > len(bpt):
            raise ValueError("restore_blocks: %d tables from tensor %d; the layout has %d"
                             % (len(tables), first_tensor, len(bpt)))
        if from_pos < 0 or n < 0 or from_pos + n > L:
            raise ValueError("restore_blocks: positions [%d, %d) outside the match's %d"
                             % (from_pos, from_pos + n, L))
        tabs, keep = _tables(tables, bpt[first_tensor:], from_pos, from_pos + n, True)
        _check(lib.sb_match_restore_blocks(self._live(), from_pos, n, first_tensor,
                                           len(tables), tabs), "sb_match_restore_blocks")
        del keep

    def restore(self, tensors=None, n_tokens=None):
        """Copy the state of the first n_tokens (default L) into tensors
        (writable buffers, written in place) or into new bytearrays, which
        are returned."""
        n = self.n_tokens if n_tokens is None else n_tokens
        bpt = self._ns.bytes_per_token
        if tensors is None:
            tensors = [bytearray(n * b) for b in bpt]
        if len(tensors) != len(bpt):
            raise ValueError("restore: %d tensors given, the layout has %d"
                             % (len(tensors), len(bpt)))
        keep = []
        ptrs = (ctypes.c_void_p * len(tensors))()
        for t, buf in enumerate(tensors):
            ptrs[t], k = _buffer(buf, n * bpt[t], True, "tensor %d" % t)
            keep.append(k)
        _check(lib.sb_match_restore(self._live(), n, ptrs, None), "sb_match_restore")
        return tensors

    def point(self):
        """The point state at L as bytes, or None."""
        p = lib.sb_match_point(self._live())
        return ctypes.string_at(p, self._ns.point_bytes) if p else None

    def pages(self, first=0, count=None):
        """sb_match_pages: pages [first, first + count) of the match (count
        None: to its last page) as Page objects, each with its own reference,
        so they outlive the Match (they close with their Namespace). They
        are committed: read-only. Pages on disk are read first (SnapbankError
        ERR_CORRUPT / ERR_IO: the match shrank, no page was taken). The last
        page may hold more tokens than the match covers: Page.writable(n)
        before appending to it."""
        n_pages = self._info().n_pages
        n = n_pages - first if count is None else count
        if first < 0 or n < 0 or first + n > n_pages:
            raise ValueError("pages: [%d, %d) outside the match's %d pages"
                             % (first, first + n, n_pages))
        out = (ctypes.c_void_p * max(n, 1))()
        if n:
            _check(lib.sb_match_pages(self._live(), first, n, out), "sb_match_pages")
        return [self._ns._adopt(Page(self._ns, out[i])) for i in range(n)]

    def _pages_arg(self, n_pages, point, what):
        i = self._info()
        n = i.n_pages if n_pages is None else operator.index(n_pages)
        if not 0 <= n <= i.n_pages:
            raise ValueError("%s: %d pages; the match has %d" % (what, n, i.n_pages))
        return n, 1 if point else 0

    def load(self, n_pages=None, point=False):
        """sb_match_load: make pages [0, n_pages) (default: all) and, with
        point, the point state resident, every disk read in flight at once.
        Raises SnapbankError: ERR_CORRUPT / ERR_IO (the match shrank: what
        it still holds is resident), ERR_BUDGET (no RAM to read into),
        ERR_NO_POINT, ERR_BUSY (a Load of the match is running)."""
        n, pt = self._pages_arg(n_pages, point, "load")
        _check(lib.sb_match_load(self._live(), n, pt), "sb_match_load")

    def load_start(self, n_pages=None, point=False):
        """sb_match_load_start: start the load of pages [0, n_pages)
        (default: all) and, with point, the point state, on the store's
        loader threads, and return a Load at once. The pages arrive first
        to last: restore() and restore_blocks() of tokens inside the pages
        already resident work beside the load; a call that needs more raises
        SnapbankError ERR_BUSY. The Load closes with the Match."""
        n, pt = self._pages_arg(n_pages, point, "load_start")
        h = ctypes.c_void_p()
        _check(lib.sb_match_load_start(self._live(), n, pt, ctypes.byref(h)),
               "sb_match_load_start")
        return self._adopt(Load(self, h.value, n))


class Load(_Owned):
    """An asynchronous load of a match's pages (Match.load_start), or a
    fetch from the shared tier (Namespace.fetch_shared_start). Poll it,
    wait for a prefix of its pages or the whole (with a timeout), or give
    fileno() to select/selectors/asyncio (readable once it ended; see
    wait_async). close() (or the Match's) cancels a load still running and
    waits for its reads."""

    def __init__(self, owner, h, n_pages):
        super().__init__()
        self._owner = owner
        self._h = h
        self._free = lib.sb_load_free
        self.n_pages = n_pages

    def poll(self):
        """(done, n_ready): whether the load ended, and k such that pages
        [0, k) are resident. Raises SnapbankError when it ended in failure
        (ERR_CORRUPT / ERR_IO: the match shrank; ERR_BUDGET; ERR_CANCELED)."""
        k = ctypes.c_size_t()
        rc = lib.sb_load_poll(self._live(), ctypes.byref(k))
        if rc == ERR_PENDING:
            return False, k.value
        _check(rc, "sb_load_poll", "%d pages resident" % k.value)
        return True, k.value

    def wait(self, n_pages=None, timeout=None):
        """Wait until pages [0, n_pages) (default: the whole load) are
        resident and return how many are. timeout in seconds (None: no
        limit): TimeoutError when it passes first. Raises SnapbankError
        when the load ended before those pages were resident."""
        n = (1 << 64) - 1 if n_pages is None else operator.index(n_pages)
        if n < 0:
            raise ValueError("wait: n_pages %d is negative" % n)
        ms = -1 if timeout is None else max(0, int(timeout * 1000))
        k = ctypes.c_size_t()
        rc = lib.sb_load_wait(self._live(), n, ms, ctypes.byref(k))
        if rc == ERR_PENDING:
            raise TimeoutError("snapbank: load not done after %s s (%d of %d pages resident)"
                               % (timeout, k.value, self.n_pages))
        _check(rc, "sb_load_wait", "%d pages resident" % k.value)
        return k.value

    def fileno(self):
        """sb_load_fd: a descriptor readable once the load ended. The Load
        owns it: do not read or close it."""
        fd = lib.sb_load_fd(self._live())
        _check(fd if fd < 0 else 0, "sb_load_fd")
        return fd

    async def wait_async(self):
        """Await the end of the load in an asyncio event loop (through
        fileno(), no thread), then return wait()'s value."""
        import asyncio
        loop = asyncio.get_running_loop()
        fd = self.fileno()
        fut = loop.create_future()
        loop.add_reader(fd, lambda: fut.done() or fut.set_result(None))
        try:
            await fut
        finally:
            loop.remove_reader(fd)
        return self.wait()

    def cancel(self):
        """sb_load_cancel: stop after the reads in flight; the load ends
        ERR_CANCELED unless it had ended."""
        lib.sb_load_cancel(self._live())


class _View:
    """One memoryview a Page handed out, made over its own ctypes array at
    the page's address. Whatever can reach the page's bytes through it --
    the memoryview, its slices and casts, a numpy array made from any of
    them, the array itself (the memoryview's .obj) -- holds a reference to
    that array, so the array's reference count says whether any of them is
    left. (A memoryview's release() alone cannot say it: a slice, and the
    memoryview numpy makes of one it is given, share its buffer and stay
    usable after it is released.)"""

    def __init__(self, addr, n_bytes, label):
        self.label = label
        self.array = (ctypes.c_ubyte * n_bytes).from_address(addr)
        self._refs = sys.getrefcount(self.array)  # with no memoryview over it
        self.view = lambda: None  # the memoryview handed out, weakly

    def open(self, readonly):
        """The memoryview to hand out ('B'), remembered weakly."""
        mv = memoryview(self.array).cast("B")
        if readonly:
            mv, rw = mv.toreadonly(), mv
            rw.release()
        self.view = weakref.ref(mv)
        return mv

    def in_use(self):
        """Whether anything beyond this record still reaches the array."""
        return sys.getrefcount(self.array) > self._refs

    def release(self):
        mv = self.view()
        if mv is not None:
            try:
                mv.release()
            except BufferError:  # exported: in_use() says so
                pass


def _unexport(records, what):
    """Release the page views of records (_View). Raises BufferError naming
    the first one still in use, before releasing any view, when it is
    in use without its memoryview (a numpy array made from it); after
    releasing them, when something made from one is left. Cycles are
    collected once before a refusal."""
    records = list(records)

    def stuck(dropped_only):
        for r in records:
            if (not dropped_only or r.view() is None) and r.in_use():
                return r
        return None

    for releasing in (False, True):
        if releasing:
            for r in records:
                r.release()
        r = stuck(not releasing)
        if r is not None:
            gc.collect()
            r = stuck(not releasing)
        if r is not None:
            raise BufferError(
                "%s: %s is still in use by something made from it (a numpy array, a slice "
                "or cast of the memoryview, its .obj); delete that and call again. Nothing "
                "was done%s" % (what, r.label, "" if not releasing else
                                " (views nothing else used are released)"))


class Page(_Owned):
    """A page of a namespace (sb_page, zero-copy mode): the state of up to
    page_tokens tokens, one slice per tensor, laid out as snapbank.h's
    "Page layout" draws it. The object holds one reference to the page,
    dropped by close() (or with its Namespace or Store). Namespace.page_alloc
    makes a private page (writable); Namespace.commit and Match.pages give
    committed ones (immutable: read-only).

    view() and tensor() hand out memoryviews and numpy arrays over the
    page's memory itself. The Page keeps track of them, so that nothing can
    reach memory the bank has freed or write a committed page:

    - close() (and Namespace.close, Store.close) releases the page's
      memoryviews -- using one then raises ValueError -- and raises
      BufferError, closing nothing, while something made from one is still
      alive (a numpy array, a slice): delete it and close again.
    - Namespace.commit and writable() release the page's views first, with
      the same refusal: a committed page never has a writable view, and
      no view outlives the page it was made over.
    - A finalizer (the object garbage-collected, or at interpreter exit)
      that finds a view still in use does not unref the page: the page,
      and its Store, are leaked instead, and the view stays valid.

    Not thread-safe: use a Page and its views from one thread at a time.
    """

    def __init__(self, ns, h):
        super().__init__()
        self._ns = ns
        self._h = h
        self._free = lib.sb_page_unref
        self._views = []  # _View records of what view() and tensor() handed out

    def __repr__(self):
        if not self._h:
            return "<snapbank.Page closed>"
        return "<snapbank.Page at 0x%x, %d tokens, %s>" % (
            lib.sb_page_data(self._h), self.tokens, "read-only" if self.readonly else "private")

    def _view_records(self):
        return iter(self._views)

    def close(self):
        """Drop the page reference (the bank frees the page with its last),
        releasing this page's views first; raises BufferError, changing
        nothing, while one is still in use (see the class)."""
        super().close()
        self._views = []

    @property
    def tokens(self):
        """sb_page_tokens: the leading token slices that are committed state
        (0 for a page not committed)."""
        return lib.sb_page_tokens(self._live())

    @property
    def readonly(self):
        """Whether the page is committed (views read-only): call writable()
        to write it."""
        return self.tokens > 0

    def _shape(self):
        """(page_bytes, page_tokens) of the page's namespace."""
        i = self._ns.info()
        return i["page_bytes"], i["page_tokens"]

    def view(self):
        """A memoryview ('B', page_bytes long) of the page's bytes, no copy:
        writable for a private page, read-only for a committed one. It is
        released (ValueError on use) when the Page closes, is committed or
        made writable."""
        return self._view("view()")

    def _view(self, label):
        h = self._live()
        page_bytes, _ = self._shape()
        self._views = [r for r in self._views if r.view() is not None or r.in_use()]
        addr = lib.sb_page_data(h)
        rec = _View(addr, page_bytes, "%s of the page at 0x%x" % (label, addr))
        self._views.append(rec)
        return rec.open(self.readonly)

    def tensor(self, t, dtype=None):
        """Tensor t's slices as a numpy array over the page, no copy, of
        shape (page_tokens, bytes_per_token[t] // itemsize) of dtype
        (default uint8): row j is token j of the page, at tensor_off[t] + j *
        bytes_per_token[t]. Writable as view() is, and held as its views
        are. Rows past tokens (of a committed page) are not its state.
        Needs numpy (ImportError without it)."""
        import numpy  # optional: only this method needs it
        bpt = self._ns.bytes_per_token
        t = operator.index(t)
        if not 0 <= t < len(bpt):
            raise ValueError("tensor: %d is not a tensor of the layout's %d" % (t, len(bpt)))
        dt = numpy.dtype(numpy.uint8 if dtype is None else dtype)
        if bpt[t] % dt.itemsize:
            raise ValueError("tensor: %d bytes per token of tensor %d are not whole %s items"
                             % (bpt[t], t, dt.name))
        _, page_tokens = self._shape()
        off = lib.sb_ns_tensor_offset(self._ns._live(), t)
        cols = bpt[t] // dt.itemsize
        mv = self._view("tensor(%d)" % t)
        return numpy.frombuffer(mv, dt, page_tokens * cols, off).reshape(page_tokens, cols)

    def writable(self, n_keep):
        """sb_page_writable: make the page safe to write (copy on write). A
        private page is left as it is; a committed one is replaced by a
        fresh private page holding a copy of its first n_keep token slices
        of every tensor (this Page then holds the new page; its reference to
        the old one is dropped, after its views were released: BufferError,
        nothing changed, while one is in use). Returns this Page."""
        n_keep = operator.index(n_keep)
        if n_keep < 0:
            raise ValueError("writable: n_keep %d is negative" % n_keep)
        h = self._live()
        if self.readonly:
            _unexport(self._views, "Page.writable")
            self._views = []
        p = ctypes.c_void_p(h)
        _check(lib.sb_page_writable(self._ns._live(), ctypes.byref(p), min(n_keep, 0xFFFFFFFF)),
               "sb_page_writable")
        self._h = p.value
        return self


class Model(_Owned):
    """A llama-family GGUF model on the CPU runtime."""

    def __init__(self, path):
        super().__init__()
        err = ctypes.create_string_buffer(512)
        h = ctypes.c_void_p()
        rc = lib.sbrt_model_load(os.fsencode(path), ctypes.byref(h), err, len(err))
        _check(rc, "load %s" % path, err.value.decode(errors="replace"))
        self._h = h.value
        self._free = lib.sbrt_model_free

    @staticmethod
    def make(path, preset="tiny", dtype=None, seed=1):
        """Write a generated model (random weights, a real vocabulary), as
        `snapbank make-model` does."""
        err = ctypes.create_string_buffer(512)
        rc = lib.sbrt_make_model(preset.encode(), dtype.encode() if dtype else None, seed,
                                 os.fsencode(path), err, len(err))
        _check(rc, "make-model", err.value.decode(errors="replace"))
        return path

    @property
    def n_vocab(self):
        return lib.sbrt_model_n_vocab(self._live())

    @property
    def n_ctx(self):
        return lib.sbrt_model_n_ctx(self._live())

    @property
    def eos(self):
        return lib.sbrt_model_eos(self._live())

    def tokenize(self, text, bos=True):
        """Token ids of text (BOS first when bos and the model asks for it)."""
        data = text.encode() if isinstance(text, str) else bytes(text)
        n = ctypes.c_size_t()
        rc = lib.sbrt_tokenize(self._live(), data, len(data), int(bos), None, 0, ctypes.byref(n))
        if rc not in (OK, ERR_RANGE):
            _check(rc, "tokenize")
        out = (_native.u32 * max(n.value, 1))()
        _check(lib.sbrt_tokenize(self._h, data, len(data), int(bos), out, n.value,
                                 ctypes.byref(n)), "tokenize")
        return list(out[:n.value])

    def detokenize(self, ids):
        """The text of token ids (bytes that are not UTF-8 replaced)."""
        arr, n = _tokens(ids)
        need = ctypes.c_size_t()
        rc = lib.sbrt_detokenize(self._live(), arr, n, None, 0, ctypes.byref(need))
        if rc not in (OK, ERR_RANGE):
            _check(rc, "detokenize")
        buf = ctypes.create_string_buffer(need.value + 1)
        _check(lib.sbrt_detokenize(self._h, arr, n, buf, len(buf), ctypes.byref(need)),
               "detokenize")
        return buf.raw[:need.value].decode(errors="replace")


class Generation(NamedTuple):
    """What Session.generate returns."""
    tokens: list
    text: str
    report: dict


class Session(_Owned):
    """A conversation whose KV cache lives in store: each generate() is a
    turn that restores what the bank holds of the conversation so far
    (warm_prefix from RAM, ssd from disk) and computes only the rest."""

    def __init__(self, store, model, scope=b"", threads=0, page_tokens=16):
        super().__init__()
        self._model = model
        sc = _bytes(scope, "scope")
        h = ctypes.c_void_p()
        _check(lib.sbrt_chat_open(store._live(), model._live(), sc or None, len(sc), threads,
                                  page_tokens, ctypes.byref(h)), "session")
        self._h = h.value
        self._free = lib.sbrt_chat_close
        store._adopt(self)
        model._adopt(self)

    @property
    def tokens(self):
        """The conversation so far (every prompt and answer)."""
        n = lib.sbrt_chat_tokens(self._live(), None, 0)
        out = (_native.u32 * max(n, 1))()
        lib.sbrt_chat_tokens(self._h, out, n)
        return list(out[:n])

    def resume(self, tokens):
        """Continue an earlier conversation (its tokens, e.g. saved by another
        process): the next turn restores them from the bank."""
        arr, n = _tokens(tokens)
        _check(lib.sbrt_chat_resume(self._live(), arr, n), "resume")

    def generate(self, prompt=None, tokens=None, n=32, temp=0.0, top_k=40, top_p=0.95, seed=1,
                 stop_at_eos=False):
        """One turn: prompt (text, tokenized; BOS first when the session is
        new) or tokens (ids) after the conversation so far, then up to n
        generated tokens. Returns Generation(tokens, text, report) with the
        turn's report: cache_mode ("cold", "warm_prefix", "ssd"),
        cached_tokens, prefill_tokens, ttft_s, restore_s, miss, durable
        ("yes", "pending", "no", "write-only"; None without a disk tier), disk (the
        turn's write outcome: ticket, queued, written, denied, ...), ..."""
        if (prompt is None) == (tokens is None):
            raise ValueError("generate: give exactly one of prompt, tokens")
        if prompt is not None:  # BOS only when the conversation is empty
            empty = lib.sbrt_chat_tokens(self._live(), None, 0) == 0
            ids = self._model.tokenize(prompt, bos=empty)
        else:
            ids = tokens
        arr, k = _tokens(ids)
        out = (_native.u32 * max(n, 1))()
        n_out = ctypes.c_size_t()
        rep = ctypes.create_string_buffer(2048)
        stop = self._model.eos if stop_at_eos else 0xFFFFFFFF
        _check(lib.sbrt_chat_turn(self._live(), arr, k, n, temp, top_k, top_p, seed, stop, out,
                                  ctypes.byref(n_out), rep, len(rep)), "turn")
        gen = list(out[:n_out.value])
        return Generation(gen, self._model.detokenize(gen) if gen else "",
                          json.loads(rep.value.decode()))


def generate_batch(sessions, prompts=None, tokens=None, n=32, temp=0.0, top_k=40, top_p=0.95,
                   seeds=None, stop_at_eos=False):
    """One turn for each of several sessions at once, their prompts and
    decode steps sharing forward passes (continuous batching,
    sbrt_chat_turn_batch): session k's turn takes prompts[k] (text) or
    tokens[k] (ids) after its conversation so far, then up to n tokens,
    sampled with seeds[k] (default 1 each). Batching never changes an
    answer: each Generation is what sessions[k].generate(...) would return
    with the same arguments. The sessions must be distinct and of one model.
    Raises SnapbankError for a bad call (nothing ran) or, after the turns
    ran, naming the first session whose turn failed (the others continued)."""
    sessions = list(sessions)
    if (prompts is None) == (tokens is None):
        raise ValueError("generate_batch: give exactly one of prompts, tokens")
    k = len(sessions)
    inputs = list(prompts if prompts is not None else tokens)
    if len(inputs) != k or not k:
        raise ValueError("generate_batch: one prompt or token list per session, at least one")
    seeds = [1] * k if seeds is None else list(seeds)
    if len(seeds) != k:
        raise ValueError("generate_batch: one seed per session")
    model = sessions[0]._model
    if any(s._model is not model for s in sessions):
        raise ValueError("generate_batch: the sessions must share one model")
    arrs, lens = [], []
    for s, x in zip(sessions, inputs):
        if prompts is not None:  # BOS only when the conversation is empty
            x = model.tokenize(x, bos=lib.sbrt_chat_tokens(s._live(), None, 0) == 0)
        arr, m = _tokens(x)
        arrs.append(arr)
        lens.append(m)
    P32 = ctypes.POINTER(_native.u32)
    outs = [(_native.u32 * max(n, 1))() for _ in range(k)]
    reps = [ctypes.create_string_buffer(2048) for _ in range(k)]
    c_sessions = (ctypes.c_void_p * k)(*[s._live() for s in sessions])
    c_inputs = (P32 * k)(*[ctypes.cast(a, P32) for a in arrs])
    c_lens = (ctypes.c_size_t * k)(*lens)
    c_seeds = (ctypes.c_uint64 * k)(*seeds)
    c_outs = (P32 * k)(*[ctypes.cast(o, P32) for o in outs])
    n_outs = (ctypes.c_size_t * k)()
    rcs = (ctypes.c_int * k)()
    c_reps = (ctypes.c_char_p * k)(*[ctypes.cast(r, ctypes.c_char_p) for r in reps])
    stop = model.eos if stop_at_eos else 0xFFFFFFFF
    rc = lib.sbrt_chat_turn_batch(c_sessions, k, c_inputs, c_lens, n, temp, top_k, top_p, c_seeds,
                                  stop, c_outs, n_outs, rcs, c_reps, 2048)
    if rc != OK:
        bad = next((i for i in range(k) if rcs[i] != OK), None)
        _check(rc, "batch turn" if bad is None else "batch turn of session %d" % bad)
    result = []
    for i in range(k):
        gen = list(outs[i][:n_outs[i]])
        result.append(Generation(gen, model.detokenize(gen) if gen else "",
                                 json.loads(reps[i].value.decode())))
    return result
