/* The checks of a SentencePiece .model file before the library sees it (text/tokenizer_model.h):
 * the protocol buffer framing of the whole ModelProto, and inside it what SentencePiece trusts
 * without checking, so that no file can make it read out of bounds, overflow its stack or throw
 * where nothing catches: the pieces, the special ids and the normalizers' precompiled character
 * maps (their double-array tries, walked as the library walks them).
 *
 * sentencepiece_model.proto: ModelProto {pieces = 1 (SentencePiece {piece = 1, score = 2, type =
 * 3}), trainer_spec = 2, normalizer_spec = 3, self_test_data = 4, denormalizer_spec = 5};
 * TrainerSpec {model_type = 3, vocab_size = 4, self_test_sample_size = 6,
 * treat_whitespace_as_suffix = 24, byte_fallback = 35, unk_id = 40, bos_id = 41, eos_id = 42,
 * pad_id = 43};
 * NormalizerSpec {name = 1, precompiled_charsmap = 2, add_dummy_prefix = 3}. A
 * precompiled character map is a little-endian uint32 (the trie's bytes), a darts-clone double
 * array of uint32 units, then the replacement strings, each ending in a NUL byte. */
#include "tokenizer_model.h"

#include <inttypes.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* ---- the wire format ---- */

/* A protocol buffer varint at p[*pos..n-1]: 0 and *v, or -1 when it runs past the end or is
 * longer than 10 bytes. */
static int varint(const unsigned char *p, size_t n, size_t *pos, uint64_t *v)
{
    *v = 0;
    for (int shift = 0; shift < 70; shift += 7) {
        if (*pos >= n) return -1;
        unsigned char b = p[(*pos)++];
        *v |= (uint64_t)(b & 0x7Fu) << shift;
        if (!(b & 0x80u)) return 0;
    }
    return -1;
}

/* One field at *pos: its number, wire type and value (wire type 0: v; 1, 2 and 5: the bytes
 * s[0 .. len), need their count). 0; -3 when its key runs past the end; -1 when its value does
 * (need = the bytes the value needs, 0 for a varint); -2 for a wire type a model never has
 * (groups, 6, 7). */
typedef struct field {
    uint64_t num, v, need;
    unsigned wt;
    const unsigned char *s;
    size_t len;
} field;

static int next_field(const unsigned char *p, size_t n, size_t *pos, field *f)
{
    uint64_t key;
    memset(f, 0, sizeof *f);
    if (varint(p, n, pos, &key) != 0) return -3;
    f->num = key >> 3;
    f->wt = (unsigned)(key & 7u);
    switch (f->wt) {
    case 0: return varint(p, n, pos, &f->v);
    case 1: f->need = 8; break;
    case 2:
        if (varint(p, n, pos, &f->need) != 0) {
            f->need = 0;
            return -1;
        }
        break;
    case 5: f->need = 4; break;
    default: return -2;
    }
    if (f->need > n - *pos) return -1;
    f->s = p + *pos;
    f->len = (size_t)f->need;
    *pos += f->len;
    return 0;
}

/* ---- the parts ---- */

/* What the checks read of a TrainerSpec, each at the proto's default when absent. */
typedef struct trainer_fields {
    int model_type; /* 1..4, 0 when out of range */
    int whitespace_suffix; /* treat_whitespace_as_suffix (field 24) */
    int byte_fallback;     /* byte_fallback (field 35) */
    uint64_t vocab_size, self_test_samples;
    int64_t ids[4]; /* unk, bos, eos, pad */
} trainer_fields;

static const char *const id_names[4] = {"unk_id", "bos_id", "eos_id", "pad_id"};

/* A TrainerSpec record's fields into *t, over what *t holds: a message field that occurs more
 * than once is merged (protobuf's rule, the library's parser's), each record setting the fields
 * it carries, so *t starts at the proto's defaults once, before the first record (the caller's).
 * 0, or -1 when its framing is broken (the library's parser would refuse it too). */
static int trainer_spec_fields(const unsigned char *p, size_t n, trainer_fields *t)
{
    size_t pos = 0;
    while (pos < n) {
        field f;
        if (next_field(p, n, &pos, &f) != 0) return -1;
        if (f.wt != 0) continue;
        if (f.num == 3) t->model_type = f.v >= 1 && f.v <= 4 ? (int)f.v : 0;
        else if (f.num == 4) t->vocab_size = f.v;
        else if (f.num == 6) t->self_test_samples = f.v;
        else if (f.num == 24) t->whitespace_suffix = f.v != 0;
        else if (f.num == 35) t->byte_fallback = f.v != 0;
        else if (f.num >= 40 && f.num <= 43) t->ids[f.num - 40] = (int64_t)f.v; /* int32: sign-extended */
    }
    return 0;
}

static int upper_hex(unsigned char c) { return (c >= '0' && c <= '9') || (c >= 'A' && c <= 'F'); }

/* A byte piece's name: "<0x" two upper-case hexadecimal digits ">". */
static int byte_piece_name(const unsigned char *s, size_t n)
{
    return n == 6 && memcmp(s, "<0x", 3) == 0 && upper_hex(s[3]) && upper_hex(s[4]) && s[5] == '>';
}

/* One SentencePiece message (the index-th piece): its piece nonempty, without NUL, at most
 * RP_TOK_MAX_PIECE_BYTES; its type 1..6 (NORMAL, UNKNOWN, CONTROL, USER_DEFINED, UNUSED, BYTE),
 * a BYTE piece named <0xXX>. */
static rp_status check_piece(const unsigned char *p, size_t n, const char *name, uint64_t index)
{
    const unsigned char *piece = NULL;
    size_t plen = 0;
    uint64_t type = 1;
    size_t pos = 0;
    while (pos < n) {
        field f;
        if (next_field(p, n, &pos, &f) != 0 || (f.num == 1 && f.wt != 2) ||
            (f.num == 2 && f.wt != 5) || (f.num == 3 && f.wt != 0))
            return rp_error(RP_ERR_IO, "%s: not a SentencePiece model (piece %" PRIu64
                            " is not a piece message)", name, index);
        if (f.num == 1) {
            piece = f.s;
            plen = f.len;
        } else if (f.num == 3) {
            type = f.v;
        }
    }
    if (piece == NULL || plen == 0)
        return rp_error(RP_ERR_IO, "%s: piece %" PRIu64 " is empty", name, index);
    if (plen > RP_TOK_MAX_PIECE_BYTES)
        return rp_error(RP_ERR_IO, "%s: piece %" PRIu64 " is %zu bytes long (at most %d)", name,
                        index, plen, RP_TOK_MAX_PIECE_BYTES);
    if (memchr(piece, '\0', plen) != NULL)
        return rp_error(RP_ERR_IO, "%s: piece %" PRIu64 " holds a NUL byte", name, index);
    if (type < 1 || type > 6)
        return rp_error(RP_ERR_IO, "%s: piece %" PRIu64 " has the unknown type %" PRIu64, name,
                        index, type);
    if (type == 6 && !byte_piece_name(piece, plen))
        return rp_error(RP_ERR_IO, "%s: piece %" PRIu64 " is a byte piece not named <0xXX>",
                        name, index);
    return RP_OK;
}

static uint32_t le32(const unsigned char *s)
{
    return (uint32_t)s[0] | (uint32_t)s[1] << 8 | (uint32_t)s[2] << 16 | (uint32_t)s[3] << 24;
}

/* darts-clone's unit: the offset to a node's children (10 bits up, times 256 when bit 9 is set),
 * whether a value hangs below it (bit 8), and a value unit's value (31 bits; bit 31 marks a value
 * unit, whose label matches no byte). */
static uint32_t unit_offset(uint32_t u) { return (u >> 10) << ((u & (1u << 9)) >> 6); }
static int unit_has_leaf(uint32_t u) { return (u >> 8) & 1u; }
static uint32_t unit_value(uint32_t u) { return u & ((1u << 31) - 1); }

/* A normalizer spec's precompiled character map (what, "the normalizer" or "the denormalizer",
 * for messages). The library walks its trie for any input: from the root (slot 0), a byte c leads
 * from a node at slot i with unit u to the slot (i ^ offset(u)) ^ c, a child when that unit's label
 * is c (a unit without bit 31), and a child with a leaf reads the value unit at i ^ offset(u), the
 * start of a replacement string read up to its NUL. So every unit that can be a node, the root and
 * every unit without bit 31, must keep all 256 of its child slots inside the trie, and every value
 * a leaf can read, and every value unit's, must start a string that ends inside the map. One pass
 * over the units: it checks the unreachable units too, which the tables SentencePiece builds
 * (darts-clone, in blocks of 256 units) all pass (nmt_nfkc, nfkc and their _cf forms checked). */
static rp_status check_charsmap(const unsigned char *m, size_t n, const char *name,
                                const char *what)
{
    if (n == 0) return RP_OK; /* no map: the library normalizes without one */
    if (n <= 4)
        return rp_error(RP_ERR_IO, "%s: %s's character map is %zu bytes, too short for one", name,
                        what, n);
    uint32_t trie_bytes = le32(m);
    if (trie_bytes > n - 4)
        return rp_error(RP_ERR_IO, "%s: %s's character map says its trie is %" PRIu32
                        " bytes, but %zu follow", name, what, trie_bytes, n - 4);
    if (trie_bytes < 4 || trie_bytes % 4 != 0)
        return rp_error(RP_ERR_IO, "%s: %s's character map has a trie of %" PRIu32
                        " bytes (not a whole number of 4-byte units)", name, what, trie_bytes);
    const unsigned char *trie = m + 4;
    size_t units = trie_bytes / 4;
    const unsigned char *strings = trie + trie_bytes;
    size_t nstrings = n - 4 - trie_bytes;
    /* a value v reads the string at strings[v]: it must end (a NUL) at or after v */
    int64_t last_nul = -1;
    for (size_t i = nstrings; i > 0; i--)
        if (strings[i - 1] == '\0') {
            last_nul = (int64_t)i - 1;
            break;
        }
    for (size_t i = 0; i < units; i++) {
        uint32_t u = le32(trie + 4 * i);
        if (i != 0 && (u >> 31) != 0) { /* a value unit */
            if ((int64_t)unit_value(u) > last_nul)
                return rp_error(RP_ERR_IO, "%s: %s's character map is broken (trie unit %zu "
                                "points past its replacement strings)", name, what, i);
            continue;
        }
        uint32_t base = (uint32_t)i ^ unit_offset(u);
        if ((size_t)(base | 0xFFu) >= units)
            return rp_error(RP_ERR_IO, "%s: %s's character map is broken (trie unit %zu leads "
                            "past the trie's %zu units)", name, what, i, units);
        if (i != 0 && unit_has_leaf(u) && (int64_t)unit_value(le32(trie + 4 * (size_t)base)) > last_nul)
            return rp_error(RP_ERR_IO, "%s: %s's character map is broken (trie unit %zu points "
                            "past its replacement strings)", name, what, i);
    }
    return RP_OK;
}

/* A NormalizerSpec (field 3) or denormalizer spec (field 5): its framing and its map. */
static rp_status check_normalizer(const unsigned char *p, size_t n, const char *name,
                                  const char *what)
{
    size_t pos = 0;
    while (pos < n) {
        field f;
        if (next_field(p, n, &pos, &f) != 0 || ((f.num == 1 || f.num == 2) && f.wt != 2))
            return rp_error(RP_ERR_IO, "%s: not a SentencePiece model (%s's spec is broken)",
                            name, what);
        if (f.num == 2) RP_TRY(check_charsmap(f.s, f.len, name, what));
    }
    return RP_OK;
}

/* ---- the model ---- */

/* Protocol buffers write fields in the order of their numbers, so a file cut anywhere before the
 * end of its normalizer spec fails on the framing or on the first three being present; one cut
 * just after it, before its self-test data, on the last check (the library would load it and skip
 * the self-test). A file cut before an optional denormalizer spec, with nothing after it to ask
 * for one, still cannot be told from a whole one. */
rp_status rp_tok_check_model(const unsigned char *p, size_t n, const char *name,
                             rp_tok_model_info *info)
{
    static const char *const field_names[] = {"", "pieces", "trainer spec", "normalizer spec",
                                              "self-test data", "denormalizer spec"};
    if (n == 0) return rp_error(RP_ERR_IO, "%s: empty (not a SentencePiece model)", name);
    int seen[6] = {0};
    uint64_t pieces = 0;
    trainer_fields trainer = {1, 0, 0, 8000, 0, {0, 1, 2, -1}};
    size_t pos = 0;
    while (pos < n) {
        size_t at = pos;
        field f;
        int r = next_field(p, n, &pos, &f);
        if (r == -3)
            return rp_error(RP_ERR_IO,
                            "%s: truncated or not a SentencePiece model (a field key at byte %zu "
                            "runs past the end)", name, at);
        if (f.num == 0 || (f.num <= 5 && f.wt != 2))
            return rp_error(RP_ERR_IO,
                            "%s: not a SentencePiece model (field %" PRIu64 " of wire type %u at "
                            "byte %zu)", name, f.num, f.wt, at);
        if (r == -2)
            return rp_error(RP_ERR_IO, "%s: not a SentencePiece model (wire type %u at byte %zu)",
                            name, f.wt, at);
        if (r != 0)
            return rp_error(RP_ERR_IO,
                            "%s: truncated or not a SentencePiece model (the field at byte %zu "
                            "needs %" PRIu64 " bytes, %zu are left)", name, at, f.need, n - pos);
        if (f.num > 5) continue;
        seen[f.num] = 1;
        if (f.num == 1) {
            if (pieces >= RP_TOK_MAX_PIECES)
                return rp_error(RP_ERR_IO, "%s: more than %d pieces", name, RP_TOK_MAX_PIECES);
            RP_TRY(check_piece(f.s, f.len, name, pieces));
            pieces++;
        } else if (f.num == 2) {
            if (trainer_spec_fields(f.s, f.len, &trainer) != 0)
                return rp_error(RP_ERR_IO, "%s: not a SentencePiece model (its trainer spec is "
                                "broken)", name);
        } else if (f.num == 3 || f.num == 5) {
            RP_TRY(check_normalizer(f.s, f.len, name,
                                    f.num == 3 ? "the normalizer" : "the denormalizer"));
        }
    }
    for (int k = 1; k <= 3; k++)
        if (!seen[k])
            return rp_error(RP_ERR_IO, "%s: not a SentencePiece model (no %s)", name,
                            field_names[k]);
    if (pieces != trainer.vocab_size)
        return rp_error(RP_ERR_IO,
                        "%s: truncated or not a SentencePiece model (%" PRIu64 " pieces, but its "
                        "trainer spec says vocab_size %" PRIu64 ")", name, pieces,
                        trainer.vocab_size);
    for (int k = 0; k < 4; k++) {
        int64_t id = (int64_t)(int32_t)trainer.ids[k];
        if (trainer.ids[k] != id || id < -1 || id >= (int64_t)pieces)
            return rp_error(RP_ERR_IO, "%s: its trainer spec's %s %" PRId64 " is not -1 or a piece "
                            "(0 .. %" PRIu64 ")", name, id_names[k], trainer.ids[k], pieces - 1);
    }
    if (trainer.self_test_samples > 0 && !seen[4])
        return rp_error(RP_ERR_IO,
                        "%s: truncated (its trainer spec asks for %" PRIu64 " self-test samples, "
                        "but the file holds no self-test data)", name, trainer.self_test_samples);
    info->model_type = trainer.model_type;
    info->whitespace_suffix = trainer.whitespace_suffix;
    info->byte_fallback = trainer.byte_fallback;
    return RP_OK;
}

/* The bytes of a varint of v at o (o may be NULL: only counted). */
static size_t put_varint(unsigned char *o, uint64_t v)
{
    size_t k = 0;
    do {
        unsigned char b = (unsigned char)(v & 0x7Fu);
        v >>= 7;
        if (o != NULL) o[k] = (unsigned char)(b | (v ? 0x80u : 0u));
        k++;
    } while (v != 0);
    return k;
}

rp_status rp_tok_model_continuation(const unsigned char *p, size_t n, unsigned char **out,
                                    size_t *out_len)
{
    /* every field as it is but the normalizer spec's (3), rebuilt without its add_dummy_prefix
     * fields (3) and with add_dummy_prefix = false after the rest: 0x18 0x00 */
    *out = NULL;
    *out_len = 0;
    /* each rebuilt field grows by at most 3 bytes (its length varint by one, the new field's
     * two) and takes at least 2: at most 2 n + 16 bytes in all */
    unsigned char *o = n < SIZE_MAX / 4 ? malloc(2 * n + 16) : NULL;
    if (o == NULL) return rp_error(RP_ERR_NOMEM, "rp_tok_model_continuation: out of memory");
    size_t w = 0, pos = 0;
    while (pos < n) {
        size_t at = pos;
        field f;
        if (next_field(p, n, &pos, &f) != 0) break; /* checked before: never */
        if (f.num != 3 || f.wt != 2) {
            memcpy(o + w, p + at, pos - at);
            w += pos - at;
            continue;
        }
        /* the kept fields' bytes, then the new one */
        size_t keep = 0, q = 0;
        while (q < f.len) {
            size_t qa = q;
            field g;
            if (next_field(f.s, f.len, &q, &g) != 0) break;
            if (!(g.num == 3 && g.wt == 0)) keep += q - qa;
        }
        w += put_varint(o + w, (3u << 3) | 2u);
        w += put_varint(o + w, keep + 2);
        q = 0;
        while (q < f.len) {
            size_t qa = q;
            field g;
            if (next_field(f.s, f.len, &q, &g) != 0) break;
            if (!(g.num == 3 && g.wt == 0)) {
                memcpy(o + w, f.s + qa, q - qa);
                w += q - qa;
            }
        }
        o[w++] = 0x18;
        o[w++] = 0x00;
    }
    *out = o;
    *out_len = w;
    return RP_OK;
}
