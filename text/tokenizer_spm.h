/* Between text/tokenizer.c (C11: checks, files, messages) and text/tokenizer_spm.cc (C++: the only
 * code that calls SentencePiece). Plain C types only; every function of tokenizer_spm.cc catches
 * every C++ exception (std::bad_alloc becomes RP_SPM_NOMEM, any other RP_SPM_FAIL with its what())
 * so none reaches C. Messages go to err (errcap bytes, always NUL-terminated, cut when longer).
 * Not part of the installed headers.
 */
#ifndef RP_TOKENIZER_SPM_H
#define RP_TOKENIZER_SPM_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

enum { RP_SPM_OK = 0, RP_SPM_FAIL = 1, RP_SPM_NOMEM = 2 };

/* A loaded model (a sentencepiece::SentencePieceProcessor). */
typedef struct rp_spm rp_spm;

/* A training text: len bytes, lines separated by '\n' (a last line without one counts). */
typedef struct rp_spm_text {
    const char *data;
    size_t len;
} rp_spm_text;

/* Trains with the trainer options keys[i] = values[i] (SentencePiece's names: "vocab_size",
 * "model_type", ...) on the lines of the ntexts texts, in order. On RP_SPM_OK *model is the
 * serialized ModelProto (malloc'ed, the caller frees it), *model_len its bytes. The library's
 * message on RP_SPM_FAIL. Logging is silenced (minloglevel) while it trains. */
int rp_spm_train(const char *const *keys, const char *const *values, size_t nopts,
                 const rp_spm_text *texts, size_t ntexts, char **model, size_t *model_len,
                 char *err, size_t errcap);

/* Loads a model from a serialized ModelProto (the library's checks; the caller has checked its
 * structure). *out on RP_SPM_OK, freed with rp_spm_free. */
int rp_spm_load(const void *data, size_t len, rp_spm **out, char *err, size_t errcap);
void rp_spm_free(rp_spm *s);

int rp_spm_size(const rp_spm *s);
int rp_spm_unk_id(const rp_spm *s);
int rp_spm_bos_id(const rp_spm *s);
int rp_spm_eos_id(const rp_spm *s);

/* Encodes len bytes of text into at most cap ids; *n = the number of ids. */
int rp_spm_encode(const rp_spm *s, const char *text, size_t len, int32_t *ids, int64_t cap,
                  int64_t *n, char *err, size_t errcap);
/* Decodes n ids (each in range: checked by the caller) into at most cap bytes; *len = the bytes. */
int rp_spm_decode(const rp_spm *s, const int32_t *ids, int64_t n, char *out, size_t cap,
                  size_t *len, char *err, size_t errcap);

/* The piece of id (in range: checked by the caller), *len bytes, valid while s lives. */
const char *rp_spm_piece(const rp_spm *s, int id, size_t *len);
/* PieceToId: the id of a piece, unk_id when there is none. */
int rp_spm_piece_id(const rp_spm *s, const char *piece, size_t len);

#ifdef __cplusplus
}
#endif

#endif
