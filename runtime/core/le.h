/* le.h -- little-endian integers in byte buffers: the one home of the
 * put/get helpers every runtime file format uses (the session file, the
 * boundary record, the server's saved sessions, the GGUF reader). Bytes
 * are written and read one at a time, so the result does not depend on
 * the host's byte order or on alignment.
 *
 * Thread safety: pure functions.
 */
#ifndef SB_RT_LE_H
#define SB_RT_LE_H

#include <stdint.h>

static inline void sb_rt_put_le32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static inline void sb_rt_put_le64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static inline uint32_t sb_rt_get_le32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static inline uint64_t sb_rt_get_le64(const uint8_t *p)
{
    return (uint64_t)sb_rt_get_le32(p) | (uint64_t)sb_rt_get_le32(p + 4) << 32;
}

#endif /* SB_RT_LE_H */
