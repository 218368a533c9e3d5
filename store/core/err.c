/* err.c -- names of error codes and miss reasons. */
#include "snapbank.h"

/* Indexed by -code. Keep in step with enum sb_err; never reorder. */
static const char *const err_text[] = {
    [0] = "success",
    [1] = "invalid argument",
    [2] = "out of memory",
    [3] = "invalid layout",
    [4] = "namespace exists with a different layout",
    [5] = "page size out of range",
    [6] = "zero tokens",
    [7] = "too many tokens",
    [8] = "RAM budget exhausted by pinned pages",
    [9] = "page belongs to another namespace",
    [10] = "page is committed with other contents",
    [11] = "beyond the range of the match",
    [12] = "no such pin",
    [13] = "internal consistency check failed",
    [14] = "I/O error",
    [15] = "no space left on the store's file system",
    [16] = "store directory is locked by another process",
    [17] = "unknown on-disk format version",
    [18] = "not a snapbank store, or a damaged one",
    [19] = "not supported in this build",
    [20] = "no point state at that position",
    [21] = ("the store's superblock is damaged or missing: open it with SB_OPEN_SALVAGE, "
            "or run 'snapbank fsck --repair DIR', to rebuild it from the segment files"),
    [22] = "not finished yet: not durable yet, or still loading",
    [23] = "never durable: a write it needs was denied or failed",
    [24] = "the load was canceled before it finished",
    [25] = "the match is loading: what the call needs is not resident yet",
    [26] = "a layered put was finished before every tensor was given",
    [27] = ("written and synced by a write-only store, which never reads it back: "
            "not durable (an open in a mode that reads the disk tier finds it)"),
    [28] = "was durable, then reclamation under the disk cap took records it needs",
};

const char *sb_strerror(int err)
{
    if (err > 0 || -(long)err >= (long)(sizeof err_text / sizeof *err_text))
        return "unknown error";
    const char *s = err_text[-err];
    return s ? s : "unknown error";
}

static const char *const miss_text[SB_MISS__COUNT] = {
    [SB_MISS_NONE] = "none",
    [SB_MISS_NO_PREFIX] = "no_prefix",
    [SB_MISS_EVICTED] = "evicted",
    [SB_MISS_MODEL_MISMATCH] = "model_mismatch",
    [SB_MISS_NO_POINT] = "no_point",
    [SB_MISS_CORRUPT] = "corrupt",
    [SB_MISS_IO] = "io",
};

const char *sb_miss_name(int miss)
{
    if (miss < 0 || miss >= SB_MISS__COUNT)
        return "unknown";
    return miss_text[miss];
}

static const char *const deny_text[SB_DENY__COUNT] = {
    [SB_DENY_BUDGET] = "budget",     [SB_DENY_BACKLOG] = "backlog",
    [SB_DENY_CAPACITY] = "capacity", [SB_DENY_PARENT] = "parent",
    [SB_DENY_ERROR] = "error",       [SB_DENY_SHORT] = "short",
};

const char *sb_deny_name(int reason)
{
    if (reason < 0 || reason >= SB_DENY__COUNT)
        return "unknown";
    return deny_text[reason];
}

static const char *const fault_text[SB_SHARED_FAULT__COUNT] = {
    [SB_SHARED_FAULT_NONE] = "none",
    [SB_SHARED_FAULT_AUTH] = "auth",
    [SB_SHARED_FAULT_NOPERM] = "noperm",
    [SB_SHARED_FAULT_WRONGTYPE] = "wrongtype",
    [SB_SHARED_FAULT_REFUSED] = "refused",
    [SB_SHARED_FAULT_TIMEOUT] = "timeout",
    [SB_SHARED_FAULT_CONNECT] = "connect",
    [SB_SHARED_FAULT_CLUSTERDOWN] = "clusterdown",
    [SB_SHARED_FAULT_DEADLINE] = "deadline",
    [SB_SHARED_FAULT_BAD_VALUE] = "bad_value",
};

const char *sb_shared_fault_name(int fault)
{
    if (fault < 0 || fault >= SB_SHARED_FAULT__COUNT)
        return "unknown";
    return fault_text[fault];
}
