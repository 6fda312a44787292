/* The tokenizer's C interface (text/tokenizer.h) in a build without SentencePiece
 * (make NO_SENTENCEPIECE=1: the Makefile builds this file in place of text/tokenizer.c and
 * text/tokenizer_spm.cc, and links neither libsentencepiece nor libstdc++). The options are
 * text/tokenizer_options.c's, as in every build; every function that would need the library
 * returns RP_ERR_IO with NO_SPM (the Lua side: nil and that message) and touches no file, so no
 * rp_tok is ever made. */
#include <stddef.h>
#include <stdint.h>

#include "tokenizer.h"

/* The one message of this build. */
#define NO_SPM "roper was built without SentencePiece (NO_SENTENCEPIECE=1)"

/* An rp_tok of this build is never made; the type is only declared. */

int rp_tok_available(void) { return 0; }

rp_status rp_tok_train(const rp_tok_train_cfg *c, const char *model_path, rp_tok **out)
{
    if (out != NULL) *out = NULL;
    return rp_error(RP_ERR_IO, "%s", NO_SPM);
}

rp_status rp_tok_load(const char *path, rp_tok **out)
{
    if (out != NULL) *out = NULL;
    return rp_error(RP_ERR_IO, "%s", NO_SPM);
}

rp_status rp_tok_load_bytes(const void *data, size_t len, const char *name, rp_tok **out)
{
    if (out != NULL) *out = NULL;
    return rp_error(RP_ERR_IO, "%s", NO_SPM);
}

void rp_tok_free(rp_tok *t) { (void)t; }

int64_t rp_tok_vocab_size(const rp_tok *t) { return 0; }
int32_t rp_tok_unk_id(const rp_tok *t) { return -1; }
int32_t rp_tok_bos_id(const rp_tok *t) { return -1; }
int32_t rp_tok_eos_id(const rp_tok *t) { return -1; }
int rp_tok_byte_fallback(const rp_tok *t) { return 0; }
const char *rp_tok_type_name(const rp_tok *t) { return "unknown"; }

rp_status rp_tok_check_id(const rp_tok *t, int64_t id, int64_t pos)
{
    return rp_error(RP_ERR_IO, "%s", NO_SPM);
}

rp_status rp_tok_encode(const rp_tok *t, const char *text, size_t len, int32_t *ids, int64_t cap,
                        int64_t *n)
{
    if (n != NULL) *n = 0;
    return rp_error(RP_ERR_IO, "%s", NO_SPM);
}

int rp_tok_whitespace_suffix(const rp_tok *t) { return 0; }

rp_status rp_tok_encode_continued(rp_tok *t, const char *text, size_t len, int32_t *ids,
                                  int64_t cap, int64_t *n)
{
    if (n != NULL) *n = 0;
    return rp_error(RP_ERR_IO, "%s", NO_SPM);
}

rp_status rp_tok_decode(const rp_tok *t, const int32_t *ids, int64_t n, char *out, size_t cap,
                        size_t *len)
{
    if (len != NULL) *len = 0;
    return rp_error(RP_ERR_IO, "%s", NO_SPM);
}

rp_status rp_tok_piece(const rp_tok *t, int32_t id, const char **piece, size_t *len)
{
    if (piece != NULL) *piece = "";
    if (len != NULL) *len = 0;
    return rp_error(RP_ERR_IO, "%s", NO_SPM);
}

int32_t rp_tok_id(const rp_tok *t, const char *piece, size_t len) { return -1; }
