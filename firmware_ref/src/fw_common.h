/*
 * fw_common.h - shared definitions of the fwbridge reference firmware.
 *
 * C99, libc only, no dynamic memory. Wire layouts are described by structs of
 * uint8_t arrays only: such a struct has no padding on any ABI in use, so the
 * layouts are "packed" without compiler extensions, and the static assertions
 * below fail the build if a compiler ever disagrees. Multi-byte fields are
 * converted explicitly, so the code is correct on big-endian hosts too.
 */
#ifndef FW_COMMON_H
#define FW_COMMON_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* C99 has no _Static_assert; a negative array size fails at compile time. */
#define FW_STATIC_ASSERT(cond, name) typedef char fw_static_assert_##name[(cond) ? 1 : -1]

FW_STATIC_ASSERT(sizeof(float) == 4, float_is_32_bits);

/*
 * Bytes out: the board provides this callback (UART DMA/IT transmit, or a
 * write() on the host). It must take the whole buffer or queue it.
 */
typedef void (*fw_tx_fn)(void *ctx, const uint8_t *data, size_t len);

/* Stream positions and counters are 32-bit: they wrap after 4 GiB, and every
 * comparison between positions goes through fw_pos_before(), which is
 * wrap-safe as long as the two positions are less than 2 GiB apart. */
typedef uint32_t fw_pos_t;

static inline int fw_pos_before(fw_pos_t a, fw_pos_t b)
{
    return (int32_t)(a - b) < 0;
}

static inline void fw_put_u16le(uint8_t *p, uint16_t v)
{
    p[0] = (uint8_t)(v & 0xFFu);
    p[1] = (uint8_t)(v >> 8);
}

static inline uint16_t fw_get_u16le(const uint8_t *p)
{
    return (uint16_t)(p[0] | (p[1] << 8));
}

/* float <-> little-endian bytes through the IEEE-754 bit pattern (the
 * seed's union does the same on a little-endian Cortex-M). */
static inline void fw_put_f32le(uint8_t *p, float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    p[0] = (uint8_t)(u & 0xFFu);
    p[1] = (uint8_t)((u >> 8) & 0xFFu);
    p[2] = (uint8_t)((u >> 16) & 0xFFu);
    p[3] = (uint8_t)(u >> 24);
}

static inline float fw_get_f32le(const uint8_t *p)
{
    uint32_t u = (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) |
                 ((uint32_t)p[3] << 24);
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* NaN or infinity: exponent bits all ones, read straight from the wire bytes. */
static inline int fw_f32le_nonfinite(const uint8_t *p)
{
    return (p[3] & 0x7Fu) == 0x7Fu && (p[2] & 0x80u) != 0;
}

#endif /* FW_COMMON_H */
