"""The ctypes layer: finding libsnapbank_rt, the C structs mirrored, the
function prototypes. Private to the package; snapbank/__init__.py is the API.

The library is looked for, in order: the file named by SNAPBANK_LIB; next to
this package (a copy placed there); build/runtime/ of the source tree this
package sits in (README's quick start builds there); the system's library
path (`cmake --install` puts libsnapbank_rt.so.0 there).
"""
import ctypes
import ctypes.util
import os

_HERE = os.path.dirname(os.path.abspath(__file__))


def _load():
    tried = []
    env = os.environ.get("SNAPBANK_LIB")
    names = [env] if env else []
    names += [os.path.join(_HERE, "libsnapbank_rt.so"),
              os.path.join(_HERE, "..", "..", "..", "build", "runtime", "libsnapbank_rt.so"),
              "libsnapbank_rt.so.0"]
    found = ctypes.util.find_library("snapbank_rt")
    if found:
        names.append(found)
    for name in names:
        try:
            return ctypes.CDLL(name)
        except OSError as e:
            tried.append("%s (%s)" % (name, e))
    raise ImportError("snapbank: cannot load libsnapbank_rt: tried " + "; ".join(tried) +
                      ". Build it (cmake --build build) and set SNAPBANK_LIB to "
                      "build/runtime/libsnapbank_rt.so, or run cmake --install.")


lib = _load()

u8, u32, u64, sz = ctypes.c_uint8, ctypes.c_uint32, ctypes.c_uint64, ctypes.c_size_t
vp, cp, ip = ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int
P = ctypes.POINTER


class Config(ctypes.Structure):
    """sb_config, field for field (snapbank.h)."""
    _fields_ = [
        ("ram_bytes", u64), ("ram_pages", u64), ("ns_ram_bytes", u64),
        ("max_seq_tokens", u32), ("reserved0", u32),
        ("dir", cp), ("disk_bytes", u64), ("segment_bytes", u64),
        ("write_budget_bytes_per_hour", u64), ("write_budget_burst_bytes", u64),
        ("backlog_bytes", u64), ("min_prefix_tokens", u32), ("queue_depth", u32),
        ("durability", ip), ("write_mode", ip), ("sync_bytes", u64),
        ("sync_interval_ms", u32), ("foreground_hold_ms", u32),
        ("disk_free_floor_bytes", u64), ("compress_level", u32), ("open_flags", u32),
        ("shared_seeds", cp), ("shared_user", cp), ("shared_password", cp),
        ("shared_timeout_ms", u32), ("shared_ttl_s", u32), ("shared_publish_bytes_per_s", u64),
        ("shared_secret_file", cp),
        ("clock_ns", vp), ("clock_ctx", vp), ("fault_alloc_nth", u64),
    ]


class Layout(ctypes.Structure):
    """sb_layout."""
    _fields_ = [
        ("model_id", vp), ("model_id_bytes", sz), ("page_tokens", u32), ("n_tensors", u32),
        ("bytes_per_token", P(u32)), ("point_bytes", u32), ("flags", u32),
    ]


class MatchInfo(ctypes.Structure):
    """sb_match_info."""
    _fields_ = [
        ("n_tokens", sz), ("n_pages", sz), ("n_pages_ram", sz), ("n_pages_disk", sz),
        ("n_matched_tokens", sz), ("has_point", ip), ("miss", ip),
    ]


class BlockTable(ctypes.Structure):
    """sb_block_table."""
    _fields_ = [("base", vp), ("block_ids", P(u32)), ("first_pos", u64), ("block_tokens", u32),
                ("block_stride", sz), ("token_stride", sz)]


class Lookup(ctypes.Structure):
    """sb_lookup."""
    _fields_ = [("tokens", P(u32)), ("n_tokens", sz), ("info", MatchInfo)]


class NsInfo(ctypes.Structure):
    """sb_ns_info."""
    _fields_ = [
        ("ns_id", u64), ("page_tokens", u32), ("n_tensors", u32), ("page_bytes", sz),
        ("point_bytes", sz), ("flags", u32), ("ram_bytes", u64), ("indexed_pages", u64),
        ("index_tokens", u64),
    ]


N_DENY = 6  # SB_DENY__COUNT


class WriteOutcome(ctypes.Structure):
    """sb_write_outcome."""
    _fields_ = [
        ("ticket", u64), ("durable", ip), ("pages_new", u32), ("points_new", u32),
        ("queued", u32), ("written", u32), ("deferred", u32), ("dirty", u32), ("denied", u32),
        ("denied_by", u32 * N_DENY), ("write_only", ip),
    ]


def _proto(name, res, *args):
    f = getattr(lib, name)
    f.restype = res
    f.argtypes = list(args)
    return f


_proto("sbrt_sizeof", sz, ip)
for _i, _cls in enumerate((Config, Layout, MatchInfo, NsInfo, WriteOutcome)):
    if lib.sbrt_sizeof(_i) != ctypes.sizeof(_cls):
        raise ImportError("snapbank: %s is %d bytes in the library, %d here: the package and "
                          "libsnapbank_rt do not match" % (_cls.__name__, lib.sbrt_sizeof(_i),
                                                           ctypes.sizeof(_cls)))

_proto("sb_strerror", cp, ip)
_proto("sb_miss_name", cp, ip)
_proto("sb_deny_name", cp, ip)
_proto("sb_version", ctypes.c_uint)
_proto("sb_config_default", None, P(Config))
_proto("sb_store_open", ip, P(Config), P(vp))
_proto("sb_store_close", ip, vp)
_proto("sb_store_flush", ip, vp)
_proto("sb_store_check", ip, vp)
_proto("sbrt_stats_json", ip, vp, cp, sz)
_proto("sb_ns_open", ip, vp, P(Layout), vp, sz, P(vp))
_proto("sb_ns_close", None, vp)
_proto("sb_ns_get_info", ip, vp, P(NsInfo))
_proto("sb_ns_put", ip, vp, P(u32), sz, P(vp), vp, P(sz))
_proto("sb_ns_put_ex", ip, vp, P(u32), sz, P(vp), vp, P(sz), P(WriteOutcome))
_proto("sb_store_wait_durable", ip, vp, u64, u32)
_proto("sb_store_is_durable", ip, vp, u64)
_proto("sb_ns_match", ip, vp, P(u32), sz, P(vp))
_proto("sb_ns_lookup", ip, vp, P(Lookup), sz)
_proto("sb_ns_fetch_shared", ip, vp, P(u32), sz, P(sz))
_proto("sb_match_get_info", ip, vp, P(MatchInfo))
_proto("sb_match_restore", ip, vp, sz, P(vp), vp)
_proto("sb_match_restore_blocks", ip, vp, sz, sz, u32, u32, P(BlockTable))
_proto("sb_ns_put_blocks", ip, vp, P(u32), sz, sz, P(BlockTable), vp, P(sz), P(WriteOutcome))
_proto("sb_ns_put_begin", ip, vp, P(u32), sz, sz, P(vp))
_proto("sb_put_tensors", ip, vp, u32, u32, P(BlockTable))
_proto("sb_put_finish", ip, vp, vp, P(sz), P(WriteOutcome))
_proto("sb_put_abort", None, vp)
_proto("sb_match_point", vp, vp)
_proto("sb_ns_prefault", ip, vp, sz, P(sz))
_proto("sb_ns_pin", ip, vp, P(u32), sz, u64, P(u64), P(sz))
_proto("sb_ns_unpin", ip, vp, u64)
_proto("sb_ns_remove", ip, vp, P(u32), sz, P(sz))
_proto("sb_match_release", None, vp)
_proto("sb_ns_tensor_offset", sz, vp, u32)
_proto("sb_ns_page_alloc", ip, vp, P(vp))
_proto("sb_page_data", vp, vp)
_proto("sb_page_tokens", u32, vp)
_proto("sb_page_unref", None, vp)
_proto("sb_page_writable", ip, vp, P(vp), u32)
_proto("sb_ns_commit_ex", ip, vp, P(u32), sz, P(vp), vp, P(WriteOutcome))
_proto("sb_match_pages", ip, vp, sz, sz, P(vp))
_proto("sb_match_load", ip, vp, sz, ip)
_proto("sb_match_load_start", ip, vp, sz, ip, P(vp))
_proto("sb_ns_fetch_shared_start", ip, vp, P(u32), sz, P(vp))
_proto("sb_load_poll", ip, vp, P(sz))
_proto("sb_load_wait", ip, vp, sz, ctypes.c_int64, P(sz))
_proto("sb_load_fd", ip, vp)
_proto("sb_load_cancel", None, vp)
_proto("sb_load_free", None, vp)
_proto("sbrt_model_load", ip, cp, P(vp), cp, sz)
_proto("sbrt_model_eos", u32, vp)
_proto("sbrt_model_free", None, vp)
_proto("sbrt_model_n_vocab", u32, vp)
_proto("sbrt_model_n_ctx", u32, vp)
_proto("sbrt_make_model", ip, cp, cp, u64, cp, cp, sz)
_proto("sbrt_tokenize", ip, vp, cp, sz, ip, P(u32), sz, P(sz))
_proto("sbrt_detokenize", ip, vp, P(u32), sz, cp, sz, P(sz))
_proto("sbrt_chat_open", ip, vp, vp, vp, sz, ctypes.c_uint, u32, P(vp))
_proto("sbrt_chat_close", None, vp)
_proto("sbrt_chat_resume", ip, vp, P(u32), sz)
_proto("sbrt_chat_tokens", sz, vp, P(u32), sz)
_proto("sbrt_chat_turn", ip, vp, P(u32), sz, sz, ctypes.c_float, u32, ctypes.c_float, u64, u32,
       P(u32), P(sz), cp, sz)
_proto("sbrt_chat_turn_batch", ip, P(vp), sz, P(P(u32)), P(sz), sz, ctypes.c_float, u32,
       ctypes.c_float, P(u64), u32, P(P(u32)), P(sz), P(ctypes.c_int), P(cp), sz)
