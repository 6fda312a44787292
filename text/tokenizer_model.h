/* The checks of a SentencePiece .model file (a serialized ModelProto of sentencepiece_model.proto)
 * made before the library sees it: text/tokenizer_model.c. Not part of the installed headers. */
#ifndef RP_TOKENIZER_MODEL_H
#define RP_TOKENIZER_MODEL_H

#include <stddef.h>

#include "status.h"

/* The longest piece a model may hold, in bytes: the library builds its tries of the pieces
 * recursively, one call per byte, and a piece of 120 KB overflows an 8 MiB stack. */
#define RP_TOK_MAX_PIECE_BYTES 4096
/* The most pieces a model may hold. */
#define RP_TOK_MAX_PIECES (1 << 24)

/* Checks the n bytes of p, a serialized ModelProto named name in messages, for everything the
 * library trusts when it loads and uses it: the framing of every field of the model, its pieces,
 * trainer spec and normalizer and denormalizer specs; each piece nonempty, without a NUL byte, at
 * most RP_TOK_MAX_PIECE_BYTES, of a known type (a byte piece named <0xXX>), as many as the
 * trainer spec's vocab_size (at most RP_TOK_MAX_PIECES); the special ids (unk, bos, eos, pad) -1
 * or a piece's; each precompiled character map (its size word; its double-array trie: every unit
 * that can be a node keeps the 256 slots it leads to inside the trie; every replacement string a
 * unit points at starts inside the map and ends there with a NUL); the self-test data a trainer
 * spec asks for. RP_OK and *info (each field at the proto's default when absent), else RP_ERR_IO
 * with one line "<name>: <the fault>" (RP_ERR_NOMEM never). Reads p only inside [0, n); one pass
 * over it. */
/* What the checks read of a model for its loader. */
typedef struct rp_tok_model_info {
    int model_type;        /* the trainer spec's model_type: 1 unigram, 2 bpe, 3 word, 4 char */
    int whitespace_suffix; /* its treat_whitespace_as_suffix (the word-boundary mark at the end) */
    int byte_fallback;     /* its byte_fallback: a character without a piece becomes byte pieces
                            * (the flag SentencePiece encodes by) */
} rp_tok_model_info;

rp_status rp_tok_check_model(const unsigned char *p, size_t n, const char *name,
                             rp_tok_model_info *info);

/* The model p[0..n) (one that rp_tok_check_model accepted) with its normalizer spec's
 * add_dummy_prefix false: a text it encodes gets no word-boundary mark at its start, so it
 * encodes as the continuation of a text before it that ended at a line end or a blank. *out is
 * malloc'ed (the caller frees it), *out_len its bytes; RP_ERR_NOMEM. */
rp_status rp_tok_model_continuation(const unsigned char *p, size_t n, unsigned char **out,
                                    size_t *out_len);

#endif
