/* The tokenizer's options (text/tokenizer.h): their defaults and checks, the same in every build
 * (with SentencePiece, text/tokenizer.c, or without it, text/tokenizer_none.c). */
#include <inttypes.h>
#include <math.h>
#include <string.h>

#include "tokenizer.h"

const char *const rp_tok_type_names[] = {"unigram", "bpe", NULL};

rp_tok_train_cfg rp_tok_train_cfg_default(void)
{
    rp_tok_train_cfg c;
    memset(&c, 0, sizeof c);
    c.inputs = NULL;
    c.n_inputs = 0;
    c.vocab_size = 8000;
    c.type = RP_TOK_UNIGRAM;
    c.byte_fallback = 1;
    c.character_coverage = 0.9995;
    c.max_sentence_length = 4192;
    c.input_sentence_size = 0;
    c.threads = 16;
    return c;
}

int64_t rp_tok_min_vocab(int byte_fallback)
{
    return RP_TOK_SPECIALS + (byte_fallback ? RP_TOK_BYTE_PIECES : 1);
}

rp_status rp_tok_train_cfg_check(const rp_tok_train_cfg *c)
{
    if (c == NULL) return rp_error(RP_ERR_ARG, "rp_tok_train: no options");
    if (c->n_inputs < 1 || c->inputs == NULL)
        return rp_error(RP_ERR_ARG, "input: at least one text file is needed");
    for (int64_t i = 0; i < c->n_inputs; i++)
        if (c->inputs[i] == NULL || c->inputs[i][0] == '\0')
            return rp_error(RP_ERR_ARG, "input %" PRId64 " is not a file name", i + 1);
    if ((int)c->type < 0 || c->type > RP_TOK_BPE)
        return rp_error(RP_ERR_ARG, "type must be \"unigram\" or \"bpe\"");
    int64_t lo = rp_tok_min_vocab(c->byte_fallback);
    if (c->vocab_size < lo) {
        if (c->byte_fallback)
            return rp_error(RP_ERR_ARG,
                            "vocab_size %" PRId64 " is too small for byte fallback: it needs at "
                            "least %" PRId64 " pieces (%d bytes and %d specials: <unk>, <s>, </s>) "
                            "and more for the text's characters",
                            c->vocab_size, lo, RP_TOK_BYTE_PIECES, RP_TOK_SPECIALS);
        return rp_error(RP_ERR_ARG,
                        "vocab_size %" PRId64 " is too small: it needs at least %" PRId64
                        " pieces (%d specials: <unk>, <s>, </s>, and one more)",
                        c->vocab_size, lo, RP_TOK_SPECIALS);
    }
    if (c->vocab_size > RP_TOK_MAX_VOCAB)
        return rp_error(RP_ERR_ARG,
                        "vocab_size %" PRId64 " is more than %" PRId64
                        " (2^24: ids stay exact in float32 tensors)",
                        c->vocab_size, RP_TOK_MAX_VOCAB);
    if (isnan(c->character_coverage)) /* (printf's sign of a NaN differs between machines) */
        return rp_error(RP_ERR_ARG,
                        "character_coverage must be in [0.98, 1] (SentencePiece's range), got nan");
    if (!(c->character_coverage >= 0.98 && c->character_coverage <= 1.0))
        return rp_error(RP_ERR_ARG,
                        "character_coverage must be in [0.98, 1] (SentencePiece's range), got %g",
                        c->character_coverage);
    if (c->max_sentence_length < 10 || c->max_sentence_length > ((int64_t)1 << 30))
        return rp_error(RP_ERR_ARG,
                        "max_sentence_length must be in 10..1073741824 (bytes), got %" PRId64,
                        c->max_sentence_length);
    if (c->input_sentence_size != 0 &&
        (c->input_sentence_size <= 100 || c->input_sentence_size > ((int64_t)1 << 53)))
        return rp_error(RP_ERR_ARG,
                        "input_sentence_size must be 0 (every line) or in 101..2^53 (a sample "
                        "of that many lines), got %" PRId64,
                        c->input_sentence_size);
    if (c->threads < 1 || c->threads > 128)
        return rp_error(RP_ERR_ARG, "threads must be in 1..128, got %" PRId64, c->threads);
    return RP_OK;
}
