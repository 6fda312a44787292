/* The tokenizer's C interface (text/tokenizer.h) with SentencePiece: the training inputs, the
 * .model files and the messages; text/tokenizer_spm.cc calls SentencePiece (tokenizer_spm.h).
 * The options are text/tokenizer_options.c's; a build without SentencePiece (NO_SENTENCEPIECE=1)
 * has text/tokenizer_none.c in place of this file and tokenizer_spm.cc. */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fileio.h"
#include "json.h"
#include "tokenizer.h"
#include "tokenizer_spm.h"
#include "tokenizer_model.h"

/* The trainer spec's model types by their number (sentencepiece_model.proto: UNIGRAM = 1, ...). */
static const char *const model_type_names[] = {"unknown", "unigram", "bpe", "word", "char"};

/* The largest .model file rp_tok_load reads. */
#define MAX_MODEL_BYTES ((int64_t)1 << 30)

struct rp_tok {
    rp_spm *s;
    int model_type;        /* index into model_type_names */
    int whitespace_suffix; /* the model marks word ends, not starts */
    int byte_fallback;     /* its trainer spec's byte_fallback */
    unsigned char *bytes;  /* the model file's bytes, for the continuation model */
    size_t nbytes;
    rp_spm *cont;          /* the model without its dummy prefix (NULL until needed) */
};

/* ---- loading ---- */

static rp_status spm_status(int r, const char *err, const char *what)
{
    if (r == RP_SPM_NOMEM) return rp_error(RP_ERR_NOMEM, "%s: out of memory", what);
    return rp_error(RP_ERR_ARG, "%s: %s", what, err);
}

rp_status rp_tok_load_bytes(const void *data, size_t len, const char *name, rp_tok **out)
{
    if (out == NULL || (data == NULL && len > 0))
        return rp_error(RP_ERR_ARG, "rp_tok_load_bytes: NULL argument");
    *out = NULL;
    if (name == NULL) name = "(model)";
    rp_tok_model_info info;
    RP_TRY(rp_tok_check_model((const unsigned char *)data, len, name, &info));
    rp_tok *t = calloc(1, sizeof *t);
    if (t != NULL) t->bytes = malloc(len ? len : 1);
    if (t == NULL || t->bytes == NULL) {
        free(t);
        return rp_error(RP_ERR_NOMEM, "%s: out of memory", name);
    }
    memcpy(t->bytes, data, len);
    t->nbytes = len;
    t->whitespace_suffix = info.whitespace_suffix;
    t->byte_fallback = info.byte_fallback;
    char err[512];
    int r = rp_spm_load(data, len, &t->s, err, sizeof err);
    if (r != RP_SPM_OK) {
        free(t->bytes);
        free(t);
        if (r == RP_SPM_NOMEM) return rp_error(RP_ERR_NOMEM, "%s: out of memory", name);
        return rp_error(RP_ERR_IO, "%s: not a usable SentencePiece model (%s)", name, err);
    }
    t->model_type = info.model_type;
    *out = t;
    return RP_OK;
}

rp_status rp_tok_load(const char *path, rp_tok **out)
{
    if (out == NULL) return rp_error(RP_ERR_ARG, "rp_tok_load: NULL argument");
    *out = NULL;
    char *data = NULL;
    int64_t len = 0;
    RP_TRY(rp_file_read_all(path, MAX_MODEL_BYTES, NULL, &data, &len));
    rp_status st = rp_tok_load_bytes(data, (size_t)len, path, out);
    free(data);
    return st;
}

void rp_tok_free(rp_tok *t)
{
    if (t == NULL) return;
    rp_spm_free(t->s);
    rp_spm_free(t->cont);
    free(t->bytes);
    free(t);
}

/* ---- training ---- */

/* The byte offset of the first invalid UTF-8 sequence in p[0..n-1], or n when there is none. */
static size_t utf8_invalid_at(const char *p, size_t n)
{
    size_t i = 0;
    while (i < n) {
        if ((unsigned char)p[i] < 0x80) {
            i++;
            continue;
        }
        size_t k = rp_json_utf8_len(p + i, n - i);
        if (k == 0) return i;
        i += k;
    }
    return n;
}

/* Checks one training text: not only white space, UTF-8. */
static rp_status check_text(const char *path, const char *p, size_t n)
{
    size_t i = 0;
    while (i < n && strchr(" \t\r\n\v\f", p[i]) != NULL && p[i] != '\0') i++;
    if (i == n) return rp_error(RP_ERR_IO, "%s: empty (no text to train on)", path);
    size_t bad = utf8_invalid_at(p, n);
    if (bad < n) {
        size_t line = 1;
        for (size_t j = 0; j < bad; j++) line += p[j] == '\n';
        return rp_error(RP_ERR_IO, "%s: invalid UTF-8 at byte %zu (line %zu)", path, bad, line);
    }
    return RP_OK;
}

/* Refuses, before the training, a model path that cannot be written: an existing path that is
 * not a regular file, a folder that is missing or not writable. */
static rp_status check_out_path(const char *path)
{
    struct stat sb;
    if (stat(path, &sb) == 0 && !S_ISREG(sb.st_mode))
        return rp_error(RP_ERR_IO, "%s: not a regular file (%s)", path, rp_file_kind(sb.st_mode));
    const char *slash = strrchr(path, '/');
    size_t dlen = slash == NULL ? 1 : (slash == path ? 1 : (size_t)(slash - path));
    char *dir = malloc(dlen + 1);
    if (dir == NULL) return rp_error(RP_ERR_NOMEM, "%s: out of memory", path);
    if (slash == NULL) memcpy(dir, ".", 2);
    else {
        memcpy(dir, slash == path ? "/" : path, dlen);
        dir[dlen] = '\0';
    }
    rp_status st = RP_OK;
    if (stat(dir, &sb) != 0) st = rp_error(RP_ERR_IO, "%s: %s", path, strerror(errno));
    else if (!S_ISDIR(sb.st_mode)) st = rp_error(RP_ERR_IO, "%s: %s", path, strerror(ENOTDIR));
    else if (access(dir, W_OK | X_OK) != 0) st = rp_error(RP_ERR_IO, "%s: %s", path, strerror(errno));
    free(dir);
    return st;
}

struct model_bytes {
    const char *data;
    size_t len;
};

static int write_model(FILE *f, void *ctx)
{
    const struct model_bytes *m = ctx;
    if (fwrite(m->data, 1, m->len, f) != m->len) return errno ? errno : EIO;
    return 0;
}

rp_status rp_tok_train(const rp_tok_train_cfg *c, const char *model_path, rp_tok **out)
{
    if (out) *out = NULL;
    RP_TRY(rp_tok_train_cfg_check(c));
    if (model_path == NULL || model_path[0] == '\0')
        return rp_error(RP_ERR_ARG, "model: a file name is needed");
    RP_TRY(check_out_path(model_path));

    size_t n = (size_t)c->n_inputs;
    rp_spm_text *texts = calloc(n, sizeof *texts);
    if (texts == NULL) return rp_error(RP_ERR_NOMEM, "rp_tok_train: out of memory");
    rp_status st = RP_OK;
    int64_t total = 0;
    for (size_t i = 0; i < n && st == RP_OK; i++) {
        char *data = NULL;
        int64_t len = 0;
        st = rp_file_read_all(c->inputs[i], RP_TOK_MAX_INPUT_BYTES - total,
                              i == 0 ? "1 GiB of text for all inputs together"
                                     : "what is left of 1 GiB for all inputs together",
                              &data, &len);
        if (st != RP_OK) break;
        texts[i].data = data;
        texts[i].len = (size_t)len;
        total += len;
        st = check_text(c->inputs[i], data, (size_t)len);
    }

    char *model = NULL;
    size_t model_len = 0;
    if (st == RP_OK) {
        char vocab[32], cover[40], maxlen[32], sample[32], threads[32];
        snprintf(vocab, sizeof vocab, "%" PRId64, c->vocab_size);
        snprintf(cover, sizeof cover, "%.17g", c->character_coverage);
        snprintf(maxlen, sizeof maxlen, "%" PRId64, c->max_sentence_length);
        snprintf(sample, sizeof sample, "%" PRId64, c->input_sentence_size);
        snprintf(threads, sizeof threads, "%" PRId64, c->threads);
        /* the text as it is (docs in tokenizer.h): identity normalization, white space kept */
        const char *keys[] = {"vocab_size", "model_type", "byte_fallback", "character_coverage",
                              "max_sentence_length", "input_sentence_size", "num_threads",
                              "normalization_rule_name", "remove_extra_whitespaces"};
        const char *values[] = {vocab, rp_tok_type_names[c->type],
                                c->byte_fallback ? "true" : "false", cover, maxlen, sample,
                                threads, "identity", "false"};
        char err[512];
        int r = rp_spm_train(keys, values, sizeof keys / sizeof keys[0], texts, n, &model,
                             &model_len, err, sizeof err);
        if (r != RP_SPM_OK) {
            char what[600];
            if (n == 1) snprintf(what, sizeof what, "training on %s", c->inputs[0]);
            else snprintf(what, sizeof what, "training on %s and %zu more", c->inputs[0], n - 1);
            st = spm_status(r, err, what);
        }
    }
    for (size_t i = 0; i < n; i++) free((void *)texts[i].data);
    free(texts);
    if (st != RP_OK) return st;

    rp_tok *t = NULL;
    st = rp_tok_load_bytes(model, model_len, model_path, &t);
    if (st == RP_OK) {
        struct model_bytes mb = {model, model_len};
        st = rp_file_write_atomic(model_path, write_model, &mb);
    }
    free(model);
    if (st != RP_OK || out == NULL) {
        rp_tok_free(t);
        return st;
    }
    *out = t;
    return RP_OK;
}

/* ---- queries ---- */

int rp_tok_available(void) { return 1; }

int64_t rp_tok_vocab_size(const rp_tok *t) { return (int64_t)rp_spm_size(t->s); }
int32_t rp_tok_unk_id(const rp_tok *t) { return (int32_t)rp_spm_unk_id(t->s); }
int32_t rp_tok_bos_id(const rp_tok *t) { return (int32_t)rp_spm_bos_id(t->s); }
int32_t rp_tok_eos_id(const rp_tok *t) { return (int32_t)rp_spm_eos_id(t->s); }
int rp_tok_byte_fallback(const rp_tok *t) { return t->byte_fallback; }
const char *rp_tok_type_name(const rp_tok *t) { return model_type_names[t->model_type]; }

rp_status rp_tok_check_id(const rp_tok *t, int64_t id, int64_t pos)
{
    int64_t V = rp_tok_vocab_size(t);
    if (id >= 0 && id < V) return RP_OK;
    if (pos > 0)
        return rp_error(RP_ERR_RANGE,
                        "id %" PRId64 " at [%" PRId64 "] is out of range for a vocabulary of %"
                        PRId64 " (ids 0..%" PRId64 ")", id, pos, V, V - 1);
    return rp_error(RP_ERR_RANGE,
                    "id %" PRId64 " is out of range for a vocabulary of %" PRId64 " (ids 0..%"
                    PRId64 ")", id, V, V - 1);
}

rp_status rp_tok_encode(const rp_tok *t, const char *text, size_t len, int32_t *ids, int64_t cap,
                        int64_t *n)
{
    if (t == NULL || n == NULL || (text == NULL && len > 0) || (ids == NULL && cap > 0) || cap < 0)
        return rp_error(RP_ERR_ARG, "rp_tok_encode: bad arguments");
    *n = 0;
    size_t bad = utf8_invalid_at(text, len);
    if (bad < len) return rp_error(RP_ERR_ARG, "text is not UTF-8 at byte %zu", bad);
    char err[512];
    int r = rp_spm_encode(t->s, len ? text : "", len, ids, cap, n, err, sizeof err);
    return r == RP_SPM_OK ? RP_OK : spm_status(r, err, "encode");
}

int rp_tok_whitespace_suffix(const rp_tok *t) { return t->whitespace_suffix; }

rp_status rp_tok_encode_continued(rp_tok *t, const char *text, size_t len, int32_t *ids,
                                  int64_t cap, int64_t *n)
{
    if (t == NULL || n == NULL || (text == NULL && len > 0) || (ids == NULL && cap > 0) || cap < 0)
        return rp_error(RP_ERR_ARG, "rp_tok_encode_continued: bad arguments");
    *n = 0;
    if (t->whitespace_suffix)
        return rp_error(RP_ERR_ARG, "this model marks the ends of words "
                        "(treat_whitespace_as_suffix), so a text cannot be encoded as the "
                        "continuation of another");
    size_t bad = utf8_invalid_at(text, len);
    if (bad < len) return rp_error(RP_ERR_ARG, "text is not UTF-8 at byte %zu", bad);
    char err[512];
    if (t->cont == NULL) {
        unsigned char *cb = NULL;
        size_t cn = 0;
        RP_TRY(rp_tok_model_continuation(t->bytes, t->nbytes, &cb, &cn));
        int r = rp_spm_load(cb, cn, &t->cont, err, sizeof err);
        free(cb);
        if (r != RP_SPM_OK) return spm_status(r, err, "encode");
    }
    int r = rp_spm_encode(t->cont, len ? text : "", len, ids, cap, n, err, sizeof err);
    return r == RP_SPM_OK ? RP_OK : spm_status(r, err, "encode");
}

rp_status rp_tok_decode(const rp_tok *t, const int32_t *ids, int64_t n, char *out, size_t cap,
                        size_t *len)
{
    if (t == NULL || len == NULL || (ids == NULL && n > 0) || n < 0 || (out == NULL && cap > 0))
        return rp_error(RP_ERR_ARG, "rp_tok_decode: bad arguments");
    *len = 0;
    for (int64_t i = 0; i < n; i++) RP_TRY(rp_tok_check_id(t, ids[i], i + 1));
    char err[512];
    int r = rp_spm_decode(t->s, ids, n, out, cap, len, err, sizeof err);
    return r == RP_SPM_OK ? RP_OK : spm_status(r, err, "decode");
}

rp_status rp_tok_piece(const rp_tok *t, int32_t id, const char **piece, size_t *len)
{
    RP_TRY(rp_tok_check_id(t, id, 0));
    *piece = rp_spm_piece(t->s, (int)id, len);
    return RP_OK;
}

int32_t rp_tok_id(const rp_tok *t, const char *piece, size_t len)
{
    return (int32_t)rp_spm_piece_id(t->s, piece ? piece : "", piece ? len : 0);
}
