/* tokenizer_unicode.c — the Unicode data the tokenizers need (classes, NFD, combining classes,
 * lower case), from the tables tools/dev/make-unicode-tables read off the tokenizers package:
 * its Rust crates use several Unicode versions, and equality with it means using theirs. */
#include <stddef.h>
#include <stdint.h>

#include "tokenizer_parts.h"

typedef struct uc_map_entry {
    uint32_t cp;
    uint16_t at;
    uint8_t n;
} uc_map_entry;

#include "tokenizer_unicode.inc"

/* The bit values of the generated file and of tokenizer_parts.h must agree. */
_Static_assert(UC_CONTROL == TOK_CONTROL && UC_CLEAN_WS == TOK_CLEAN_WS &&
                   UC_PRE_WS == TOK_PRE_WS && UC_PUNCT == TOK_PUNCT && UC_MN == TOK_MN &&
                   UC_L == TOK_L && UC_N == TOK_N && UC_S == TOK_S,
               "tokenizer_unicode.inc and tokenizer_parts.h disagree");

unsigned tok_uclass(uint32_t cp)
{
    if (cp >= 0x110000)
        return 0;
    return uc_stage2[(size_t)uc_stage1[cp >> 8] * 256 + (cp & 255)];
}

/* BERT's "Chinese character" ranges (CJK ideographs), as both BERT implementations list them. */
int tok_is_cjk(uint32_t cp)
{
    return (cp >= 0x4E00 && cp <= 0x9FFF) || (cp >= 0x3400 && cp <= 0x4DBF) ||
           (cp >= 0x20000 && cp <= 0x2A6DF) || (cp >= 0x2A700 && cp <= 0x2B73F) ||
           (cp >= 0x2B740 && cp <= 0x2B81F) || (cp >= 0x2B920 && cp <= 0x2CEAF) ||
           (cp >= 0xF900 && cp <= 0xFAFF) || (cp >= 0x2F800 && cp <= 0x2FA1F);
}

static const uc_map_entry *find(const uc_map_entry *map, size_t n, uint32_t cp)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (map[mid].cp < cp)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < n && map[lo].cp == cp ? &map[lo] : NULL;
}

int tok_nfd(uint32_t cp, uint32_t dst[4])
{
    if (cp < 0xC0) {
        dst[0] = cp;
        return 1;
    }
    /* Hangul syllables decompose by arithmetic (Unicode's algorithm), not by table. */
    if (cp >= 0xAC00 && cp <= 0xD7A3) {
        uint32_t s = cp - 0xAC00, t = s % 28;
        dst[0] = 0x1100 + s / (21 * 28);
        dst[1] = 0x1161 + (s % (21 * 28)) / 28;
        if (!t)
            return 2;
        dst[2] = 0x11A7 + t;
        return 3;
    }
    const uc_map_entry *e = find(uc_nfd_map, sizeof uc_nfd_map / sizeof uc_nfd_map[0], cp);
    if (!e || e->n > 4) {
        dst[0] = cp;
        return 1;
    }
    for (int i = 0; i < e->n; i++)
        dst[i] = uc_nfd_pool[e->at + i];
    return e->n;
}

int tok_ccc(uint32_t cp)
{
    if (cp < 0x300)
        return 0;
    size_t lo = 0, hi = sizeof uc_ccc / sizeof uc_ccc[0];
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if ((uc_ccc[mid] >> 8) < cp)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < sizeof uc_ccc / sizeof uc_ccc[0] && (uc_ccc[lo] >> 8) == cp
               ? (int)(uc_ccc[lo] & 255)
               : 0;
}

int tok_lower(uint32_t cp, uint32_t dst[3])
{
    if (cp < 0x80) {
        dst[0] = cp >= 'A' && cp <= 'Z' ? cp + 32 : cp;
        return 1;
    }
    const uc_map_entry *e = find(uc_lower_map, sizeof uc_lower_map / sizeof uc_lower_map[0], cp);
    if (!e || e->n > 3) {
        dst[0] = cp;
        return 1;
    }
    for (int i = 0; i < e->n; i++)
        dst[i] = uc_lower_pool[e->at + i];
    return e->n;
}
