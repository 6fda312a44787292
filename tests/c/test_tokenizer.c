/* The tokenizer's C interface (text/tokenizer.h): the option checks and their messages, training
 * on a text this test writes, the .model file written atomically and loaded back, encode/decode
 * round trips (the buffer protocol: *n and *len are the sizes needed), the byte pieces, ids out of
 * range, text that is not UTF-8, and files that are not models (empty, text, cut short, a piece
 * fewer than the trainer spec says, cut before the self-test data it asks for). The
 * agreement with Python's sentencepiece is tests/lua/tokenizer_spec.lua's.
 * In a build without SentencePiece (make NO_SENTENCEPIECE=1: text/tokenizer_none.c) the options
 * are checked as in every build, then every call that needs the library is checked to refuse with
 * the build's message, and the test ends there. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "tokenizer.h"

static char dir[] = "/tmp/rp_test_tokenizer_XXXXXX";

static void path_of(char *buf, size_t n, const char *name) { snprintf(buf, n, "%s/%s", dir, name); }

static void write_file(const char *path, const char *data, size_t len)
{
    FILE *f = fopen(path, "wb");
    if (f == NULL) exit(2);
    fwrite(data, 1, len, f);
    fclose(f);
}

/* A protocol buffer varint at p[*pos]. */
static uint64_t get_varint(const char *p, size_t *pos)
{
    uint64_t v = 0;
    for (int shift = 0;; shift += 7) {
        unsigned char b = (unsigned char)p[(*pos)++];
        v |= (uint64_t)(b & 0x7F) << shift;
        if (!(b & 0x80)) return v;
    }
}

/* Writes v as a varint at out; returns its length. */
static size_t put_varint(char *out, uint64_t v)
{
    size_t n = 0;
    do {
        unsigned char b = v & 0x7F;
        v >>= 7;
        out[n++] = (char)(b | (v ? 0x80 : 0));
    } while (v);
    return n;
}

/* The top-level fields of a serialized ModelProto (every one a message): from[i] .. to[i] - 1
 * the bytes of field number num[i] (key, length and value); returns the count (at most cap). */
static int proto_fields(const char *p, size_t n, int *num, size_t *from, size_t *to, int cap)
{
    int k = 0;
    size_t pos = 0;
    while (pos < n && k < cap) {
        from[k] = pos;
        num[k] = (int)(get_varint(p, &pos) >> 3);
        uint64_t len = get_varint(p, &pos);
        pos += (size_t)len;
        to[k++] = pos;
    }
    return k;
}

static char *read_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (f == NULL) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *b = malloc((size_t)n + 1);
    *len = fread(b, 1, (size_t)n, f);
    fclose(f);
    return b;
}

/* A training text: sentences made of a small vocabulary of words (deterministic). */
static void write_corpus(const char *path)
{
    static const char *const words[] = {"the", "rotary", "embedding", "rotates", "queries",
                                        "and", "keys", "by", "angles", "that", "grow", "with",
                                        "position", "values", "relative", "distance", "héllo",
                                        "naïve", "日本", "emoji😀"};
    size_t cap = 1 << 20, len = 0;
    char *buf = malloc(cap);
    uint64_t s = 12345;
    for (int line = 0; line < 3000; line++) {
        int nw = 3 + (int)(s % 9);
        for (int w = 0; w < nw; w++) {
            s = s * 6364136223846793005ULL + 1442695040888963407ULL;
            const char *word = words[(s >> 33) % 20];
            len += (size_t)snprintf(buf + len, cap - len, "%s%s", w ? " " : "", word);
        }
        buf[len++] = '\n';
    }
    write_file(path, buf, len);
    free(buf);
}

static int roundtrip(const rp_tok *t, const char *s, size_t n)
{
    int32_t ids[4096];
    int64_t k = 0;
    if (rp_tok_encode(t, s, n, ids, 4096, &k) != RP_OK || k > 4096) return 0;
    char out[8192];
    size_t len = 0;
    if (rp_tok_decode(t, ids, k, out, sizeof out, &len) != RP_OK || len > sizeof out) return 0;
    return len == n && memcmp(out, s, n) == 0;
}

/* What a whole model holds, beyond whole fields: model (l bytes, trained with vocab_size 300:
 * its pieces, then its trainer spec and normalizer spec) without its last piece is refused for
 * the count; with self_test_sample_size 5 written into its trainer spec (a varint field 6 at
 * the spec's end), refused without self-test data after its normalizer spec (a file cut there)
 * and loaded with it (an empty one: the library runs no sample). */
static void check_model_contents(const char *model, size_t l)
{
    int num[400];
    size_t from[400], to[400];
    int k = proto_fields(model, l, num, from, to, 400);
    CHECK(k == 302 && num[299] == 1 && num[300] == 2 && num[301] == 3 && to[301] == l,
          "300 pieces, the trainer spec and the normalizer spec (%d fields)", k);
    if (k != 302) return;
    char *b = malloc(l + 32);
    rp_tok *t = NULL;
    /* one piece fewer */
    memcpy(b, model, from[299]);
    memcpy(b + from[299], model + to[299], l - to[299]);
    CHECK_MSG(rp_tok_load_bytes(b, l - (to[299] - from[299]), "fewer.model", &t), RP_ERR_IO,
              "fewer.model: truncated or not a SentencePiece model (299 pieces, but its trainer "
              "spec says vocab_size 300)");
    /* the trainer spec asks for self-test samples */
    size_t pos = from[300] + 1, n = 0;
    uint64_t spec_len = get_varint(model, &pos); /* pos: the spec's first byte */
    memcpy(b, model, from[300]);
    n = from[300];
    b[n++] = 0x12; /* field 2, wire type 2 */
    n += put_varint(b + n, spec_len + 2);
    memcpy(b + n, model + pos, (size_t)spec_len);
    n += (size_t)spec_len;
    b[n++] = 0x30; /* field 6, wire type 0: self_test_sample_size */
    b[n++] = 5;
    memcpy(b + n, model + from[301], to[301] - from[301]);
    n += to[301] - from[301];
    CHECK_MSG(rp_tok_load_bytes(b, n, "cut.model", &t), RP_ERR_IO,
              "cut.model: truncated (its trainer spec asks for 5 self-test samples, but the file "
              "holds no self-test data)");
    b[n++] = 0x22; /* field 4, wire type 2: self_test_data, empty */
    b[n++] = 0;
    CHECK_STATUS(rp_tok_load_bytes(b, n, "selftest.model", &t), RP_OK, NULL);
    CHECK(t && rp_tok_vocab_size(t) == 300, "the model with self-test data loads");
    rp_tok_free(t);
    /* a second trainer spec record, after the normalizer spec, holding only model_type 1: merged
     * into the first (protobuf's rule), so vocab_size stays the first's 300, not the default */
    memcpy(b, model, l);
    n = l;
    b[n++] = 0x12; /* field 2, wire type 2 */
    b[n++] = 2;
    b[n++] = 0x18; /* field 3, wire type 0: model_type */
    b[n++] = 1;
    t = NULL;
    CHECK_STATUS(rp_tok_load_bytes(b, n, "merged.model", &t), RP_OK, NULL);
    CHECK(t && rp_tok_vocab_size(t) == 300, "a trainer spec in two records loads, merged");
    rp_tok_free(t);
    free(b);
}

int main(void)
{
    if (mkdtemp(dir) == NULL) return 2;
    char corpus[256], model[256], model2[256], bad[256];
    path_of(corpus, sizeof corpus, "corpus.txt");
    path_of(model, sizeof model, "m.model");
    path_of(model2, sizeof model2, "m2.model");
    write_corpus(corpus);

    /* options */
    rp_tok_train_cfg c = rp_tok_train_cfg_default();
    CHECK(c.vocab_size == 8000 && c.type == RP_TOK_UNIGRAM && c.byte_fallback == 1 &&
              c.character_coverage == 0.9995 && c.threads == 16,
          "defaults");
    CHECK(rp_tok_min_vocab(1) == 259 && rp_tok_min_vocab(0) == 4, "min vocab");
    CHECK_MSG(rp_tok_train_cfg_check(&c), RP_ERR_ARG, "input: at least one text file is needed");
    const char *inputs[] = {corpus};
    c.inputs = inputs;
    c.n_inputs = 1;
    c.vocab_size = 258;
    CHECK_MSG(rp_tok_train_cfg_check(&c), RP_ERR_ARG,
              "vocab_size 258 is too small for byte fallback: it needs at least 259 pieces (256 "
              "bytes and 3 specials: <unk>, <s>, </s>) and more for the text's characters");
    c.vocab_size = 300;
    c.threads = 0;
    CHECK_MSG(rp_tok_train_cfg_check(&c), RP_ERR_ARG, "threads must be in 1..128, got 0");
    c.threads = 16;
    c.character_coverage = 0.5;
    CHECK_MSG(rp_tok_train_cfg_check(&c), RP_ERR_ARG,
              "character_coverage must be in [0.98, 1] (SentencePiece's range), got 0.5");
    c.character_coverage = 1.0;
    CHECK_STATUS(rp_tok_train_cfg_check(&c), RP_OK, NULL);

    if (!rp_tok_available()) {
        /* no SentencePiece: every call that needs it refuses, touching no file */
        static const char no_spm[] = "roper was built without SentencePiece (NO_SENTENCEPIECE=1)";
        rp_tok *u = (rp_tok *)&c; /* (never used: set to NULL by each refusal) */
        CHECK_MSG(rp_tok_train(&c, model, &u), RP_ERR_IO, no_spm);
        CHECK(u == NULL, "train's *out");
        CHECK_MSG(rp_tok_train(&c, model, NULL), RP_ERR_IO, no_spm);
        CHECK(access(model, F_OK) != 0, "no model file written");
        u = (rp_tok *)&c;
        CHECK_MSG(rp_tok_load(corpus, &u), RP_ERR_IO, no_spm);
        CHECK(u == NULL, "load's *out");
        u = (rp_tok *)&c;
        CHECK_MSG(rp_tok_load_bytes("\x08\x01", 2, "v.model", &u), RP_ERR_IO, no_spm);
        CHECK(u == NULL, "load_bytes's *out");
        int32_t ids[4] = {0};
        int64_t n = 7;
        size_t len = 7;
        char out[4];
        const char *p = NULL;
        CHECK_MSG(rp_tok_encode(NULL, "ab", 2, ids, 4, &n), RP_ERR_IO, no_spm);
        CHECK(n == 0, "encode's *n");
        CHECK_MSG(rp_tok_decode(NULL, ids, 1, out, sizeof out, &len), RP_ERR_IO, no_spm);
        CHECK(len == 0, "decode's *len");
        CHECK_MSG(rp_tok_piece(NULL, 0, &p, &len), RP_ERR_IO, no_spm);
        CHECK_MSG(rp_tok_check_id(NULL, 0, 1), RP_ERR_IO, no_spm);
        CHECK(rp_tok_vocab_size(NULL) == 0 && rp_tok_unk_id(NULL) == -1 &&
                  rp_tok_bos_id(NULL) == -1 && rp_tok_eos_id(NULL) == -1 &&
                  rp_tok_byte_fallback(NULL) == 0 && rp_tok_id(NULL, "a", 1) == -1 &&
                  strcmp(rp_tok_type_name(NULL), "unknown") == 0,
              "the queries' answers without a model");
        rp_tok_free(NULL);
        char cmd[300];
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
        if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", dir);
        return check_summary("test_tokenizer");
    }
    CHECK(rp_tok_available() == 1, "built with SentencePiece");

    /* training: a file, loaded back, reproducible */
    rp_tok *t = NULL;
    CHECK_STATUS(rp_tok_train(&c, model, &t), RP_OK, NULL);
    CHECK_STATUS(rp_tok_train(&c, model2, NULL), RP_OK, NULL);
    size_t l1 = 0, l2 = 0;
    char *b1 = read_file(model, &l1), *b2 = read_file(model2, &l2);
    CHECK(b1 && b2 && l1 == l2 && memcmp(b1, b2, l1) == 0, "the same bytes twice (%zu, %zu)", l1, l2);
    if (t == NULL) return check_summary("test_tokenizer");
    CHECK(rp_tok_vocab_size(t) == 300, "vocab %lld", (long long)rp_tok_vocab_size(t));
    CHECK(rp_tok_unk_id(t) == 0 && rp_tok_bos_id(t) == 1 && rp_tok_eos_id(t) == 2, "special ids");
    CHECK(rp_tok_byte_fallback(t) == 1, "byte fallback");
    CHECK(strcmp(rp_tok_type_name(t), "unigram") == 0, "type %s", rp_tok_type_name(t));
    for (int b = 0; b < 256; b++) {
        const char *p;
        size_t len;
        char want[8];
        snprintf(want, sizeof want, "<0x%02X>", b);
        CHECK(rp_tok_piece(t, 3 + b, &p, &len) == RP_OK && len == 6 && memcmp(p, want, 6) == 0,
              "byte piece %d", b);
        CHECK(rp_tok_id(t, want, 6) == 3 + b, "id of %s", want);
    }
    CHECK(rp_tok_id(t, "nope", 4) == 0, "unknown piece -> unk");
    const char *p;
    size_t plen;
    CHECK_MSG(rp_tok_piece(t, 300, &p, &plen), RP_ERR_RANGE,
              "id 300 is out of range for a vocabulary of 300 (ids 0..299)");

    /* round trips, odd text included; NUL bytes are characters */
    static const char *const texts[] = {"the rotary embedding", "", " ", "  two  spaces  ",
                                        "tab\tand\nnewline\r\n", "\x01\x7f control",
                                        "héllo 日本 emoji😀 \xF4\x8F\xBF\xBD", "ﬁ Ｆｕｌｌ"};
    for (size_t i = 0; i < sizeof texts / sizeof texts[0]; i++)
        CHECK(roundtrip(t, texts[i], strlen(texts[i])), "round trip of \"%s\"", texts[i]);
    CHECK(roundtrip(t, "a\0b", 3), "round trip with a NUL byte");

    /* the buffer protocol: a short buffer gets the count needed */
    int32_t ids[64];
    int64_t n = 0, n2 = 0;
    CHECK_STATUS(rp_tok_encode(t, "rotates queries", 15, NULL, 0, &n), RP_OK, NULL);
    CHECK_STATUS(rp_tok_encode(t, "rotates queries", 15, ids, 64, &n2), RP_OK, NULL);
    CHECK(n > 0 && n == n2, "count %lld and %lld", (long long)n, (long long)n2);
    size_t len = 0;
    char out[4];
    CHECK_STATUS(rp_tok_decode(t, ids, n2, out, sizeof out, &len), RP_OK, NULL);
    CHECK(len == 15 && memcmp(out, "rota", 4) == 0, "decode's length %zu", len);
    int32_t bad_ids[] = {5, 300};
    CHECK_MSG(rp_tok_decode(t, bad_ids, 2, out, sizeof out, &len), RP_ERR_RANGE,
              "id 300 at [2] is out of range for a vocabulary of 300 (ids 0..299)");
    CHECK_MSG(rp_tok_encode(t, "ok\xff", 3, ids, 64, &n), RP_ERR_ARG,
              "text is not UTF-8 at byte 2");
    rp_tok_free(t);

    /* the trainer's own refusal; the old file stays */
    c.vocab_size = 100000;
    CHECK_STATUS(rp_tok_train(&c, model, NULL), RP_ERR_ARG, "Vocabulary size too high (100000)");
    size_t l3 = 0;
    char *b3 = read_file(model, &l3);
    CHECK(b3 && l3 == l1 && memcmp(b3, b1, l1) == 0, "the model file is unchanged");
    free(b3);

    /* files that are not models */
    path_of(bad, sizeof bad, "missing.model");
    t = NULL;
    char msg[512];
    snprintf(msg, sizeof msg, "%s: No such file or directory", bad);
    CHECK_MSG(rp_tok_load(bad, &t), RP_ERR_IO, msg);
    CHECK_MSG(rp_tok_load_bytes("", 0, "e.model", &t), RP_ERR_IO,
              "e.model: empty (not a SentencePiece model)");
    CHECK_MSG(rp_tok_load_bytes("\x08\x01", 2, "v.model", &t), RP_ERR_IO,
              "v.model: not a SentencePiece model (field 1 of wire type 0 at byte 0)");
    int loaded = 0;
    for (size_t cut = 0; cut < l1; cut += 13) {
        rp_tok *u = NULL;
        if (rp_tok_load_bytes(b1, cut, "cut.model", &u) == RP_OK) loaded++;
        rp_tok_free(u);
    }
    CHECK(loaded == 0, "%d cut models loaded", loaded);
    CHECK_STATUS(rp_tok_load_bytes(b1, l1, "whole.model", &t), RP_OK, NULL);
    rp_tok_free(t);
    check_model_contents(b1, l1);

    free(b1);
    free(b2);
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", dir);
    return check_summary("test_tokenizer");
}
