/* Subword tokenizers: SentencePiece (https://github.com/google/sentencepiece; Debian's
 * libsentencepiece, version 0.1.97) behind a C interface. Training (unigram or BPE), the standard
 * .model file (a serialized ModelProto, the format Python's sentencepiece and the spm_* tools read
 * and write), encoding to ids and decoding back. The ids are SentencePiece's own, 0-based: a
 * .model made here gives the same ids in Python's sentencepiece, and one made there the same ids
 * here.
 *
 * The library is C++; text/tokenizer_spm.cc is the only code that calls it (declared in
 * text/tokenizer_spm.h), and no C++ exception leaves it. This file (tokenizer.c) checks the
 * arguments, reads and writes the files (core/io/fileio.h: bounded reads, atomic writes) and
 * words the messages.
 *
 * Models trained here keep the text as it is: the identity normalization without removing extra
 * white space (SentencePiece's default, nmt_nfkc, folds compatibility characters, drops control
 * characters and collapses white space), so with byte fallback (the default) decode(encode(s)) ==
 * s for every UTF-8 string s. A model from elsewhere keeps its own normalization.
 *
 * Every function returns RP_OK or a status with a message in rp_last_error(): RP_ERR_ARG for a
 * bad argument or option (naming it), RP_ERR_IO for a file ("path: reason"), RP_ERR_RANGE for an
 * id outside the vocabulary, RP_ERR_NOMEM when memory runs out.
 *
 * A build without SentencePiece (make NO_SENTENCEPIECE=1: where the library cannot be installed,
 * as in the aarch64 cross build) has the same interface (text/tokenizer_none.c): the options and
 * their checks are the same, rp_tok_available() is 0, and rp_tok_train, rp_tok_load and
 * rp_tok_load_bytes return RP_ERR_IO "roper was built without SentencePiece (NO_SENTENCEPIECE=1)"
 * without touching a file, so no rp_tok is ever made (the functions that take one return that
 * status too, or -1, 0 or "unknown").
 */
#ifndef RP_TOKENIZER_H
#define RP_TOKENIZER_H

#include <stddef.h>
#include <stdint.h>

#include "status.h"

typedef struct rp_tok rp_tok;

typedef enum { RP_TOK_UNIGRAM = 0, RP_TOK_BPE = 1 } rp_tok_type;

/* "unigram", "bpe", NULL: the names of rp_tok_type, in order. */
extern const char *const rp_tok_type_names[];

/* The pieces every model trained here reserves before the learned ones: <unk> (id 0), <s> (1)
 * and </s> (2), SentencePiece's defaults. */
#define RP_TOK_SPECIALS 3
/* Byte fallback's pieces, <0x00> .. <0xFF>: one per byte value. */
#define RP_TOK_BYTE_PIECES 256
/* The largest vocabulary: ids stay exact in float32 tensors (below 2^24). */
#define RP_TOK_MAX_VOCAB ((int64_t)1 << 24)
/* The most bytes of training text, all inputs together. */
#define RP_TOK_MAX_INPUT_BYTES ((int64_t)1 << 30)

typedef struct rp_tok_train_cfg {
    const char *const *inputs;   /* n_inputs paths of UTF-8 text files (one sentence per line) */
    int64_t n_inputs;            /* >= 1 */
    int64_t vocab_size;          /* 8000; with byte fallback at least RP_TOK_SPECIALS +
                                    RP_TOK_BYTE_PIECES (rp_tok_min_vocab), at most
                                    RP_TOK_MAX_VOCAB */
    rp_tok_type type;            /* unigram */
    int byte_fallback;           /* 1: a character outside the vocabulary becomes its bytes */
    double character_coverage;   /* 0.9995: the share of the text's characters that get pieces
                                    of their own (SentencePiece's range: 0.98 .. 1) */
    int64_t max_sentence_length; /* 4192: longer lines (bytes) are left out of training
                                    (10 .. 2^30) */
    int64_t input_sentence_size; /* 0: every line; else a sample of that many lines (> 100) */
    int64_t threads;             /* 16: the trainer's threads (1 .. 128); the result depends on
                                    it (sums in another order), not on the machine */
} rp_tok_train_cfg;
/* The last three defaults are SentencePiece's; every value is passed to the trainer explicitly,
 * so the same inputs and options give the same .model bytes. */

/* 1 when this build has SentencePiece, 0 when it was built without (NO_SENTENCEPIECE=1). */
int rp_tok_available(void);

/* The defaults above (inputs NULL, n_inputs 0). */
rp_tok_train_cfg rp_tok_train_cfg_default(void);

/* The least vocab_size for byte_fallback (1: RP_TOK_SPECIALS + RP_TOK_BYTE_PIECES = 259; 0:
 * RP_TOK_SPECIALS + 1). The text's characters need pieces too: the trainer refuses a vocabulary
 * smaller than the specials, the byte pieces and the characters that character_coverage keeps. */
int64_t rp_tok_min_vocab(int byte_fallback);

/* Checks every field of c but the files (RP_ERR_ARG naming the field: "vocab_size 200 is too
 * small for byte fallback: it needs at least 259 pieces (256 bytes and 3 specials: <unk>, <s>,
 * </s>)"). */
rp_status rp_tok_train_cfg_check(const rp_tok_train_cfg *c);

/* Trains a model on c's inputs and writes it to model_path atomically (a temporary name, then a
 * rename: a failure leaves whatever was there before). *out (when out is not NULL) is the model,
 * loaded from the bytes written; the caller frees it.
 * Every input is read whole before training (RP_TOK_MAX_INPUT_BYTES together) and refused with
 * RP_ERR_IO naming the file when it is missing, not a regular file, empty (nothing but white
 * space) or not UTF-8 ("c.txt: invalid UTF-8 at byte 17 (line 2)"). The trainer's own refusals (a
 * vocabulary larger than the text yields, or too small for its characters) are RP_ERR_ARG with
 * its message: "training on c.txt: Vocabulary size too high (8000). Please set it to a value <=
 * 2363." ("training on a.txt and 2 more: ..." for several inputs). Training is deterministic: the same inputs and options give the same bytes
 * (SentencePiece 0.1.97 has no seed to set: its sampling of input_sentence_size lines is the
 * same in every run). */
rp_status rp_tok_train(const rp_tok_train_cfg *c, const char *model_path, rp_tok **out);

/* Loads the .model file at path (at most 1 GiB). RP_ERR_IO "path: reason" when it cannot be read,
 * is empty, is not a SentencePiece model (not a protocol buffer, or without pieces, trainer spec
 * or normalizer spec), is truncated (a field runs past the end), or the library refuses it. */
rp_status rp_tok_load(const char *path, rp_tok **out);
/* The same from the len bytes at data; name stands for the path in messages. */
rp_status rp_tok_load_bytes(const void *data, size_t len, const char *name, rp_tok **out);

/* Frees t (NULL is fine). */
void rp_tok_free(rp_tok *t);

/* The number of pieces (ids are 0 .. vocab_size - 1). */
int64_t rp_tok_vocab_size(const rp_tok *t);
/* The special ids, -1 when the model has none (SentencePiece's convention). */
int32_t rp_tok_unk_id(const rp_tok *t);
int32_t rp_tok_bos_id(const rp_tok *t);
int32_t rp_tok_eos_id(const rp_tok *t);
/* 1 when the model falls back to bytes for characters outside its vocabulary: its trainer spec's
 * byte_fallback, the flag SentencePiece encodes by (read with the file's checks,
 * text/tokenizer_model.c). */
int rp_tok_byte_fallback(const rp_tok *t);
/* "unigram", "bpe", "word", "char" (the trainer spec's model type), or "unknown". */
const char *rp_tok_type_name(const rp_tok *t);

/* RP_OK when id is in 0 .. vocab_size - 1, else RP_ERR_RANGE "id 9000 at [3] is out of range for
 * a vocabulary of 8000 (ids 0..7999)" (pos, 1-based, as given; without " at [pos]" when pos is 0):
 * the check of decode and piece. */
rp_status rp_tok_check_id(const rp_tok *t, int64_t id, int64_t pos);

/* Encodes the len bytes of UTF-8 text (NUL bytes are characters like any other) into at most cap
 * ids (ids may be NULL when cap is 0); *n = the number of ids the text takes, which may exceed
 * cap (call again with a larger buffer). Text that is not UTF-8 is refused: RP_ERR_ARG "text is
 * not UTF-8 at byte 3" (0-based), since SentencePiece would replace the bytes with U+FFFD and the
 * text would not come back from decode. */
rp_status rp_tok_encode(const rp_tok *t, const char *text, size_t len, int32_t *ids, int64_t cap,
                        int64_t *n);
/* rp_tok_encode of a text that continues another which ended at a line end or a blank: without
 * the word-boundary mark ("\u2581") that the model puts at the start of a text (its normalizer's
 * add_dummy_prefix), so that the ids of a text cut at line ends into pieces, each piece after the
 * first encoded so, are the ids of the whole text where the model's segmentation does not cross
 * the cuts. The first call loads the model a second time with that change (t keeps it).
 * RP_ERR_ARG for a model that marks word ends (treat_whitespace_as_suffix). */
rp_status rp_tok_encode_continued(rp_tok *t, const char *text, size_t len, int32_t *ids,
                                  int64_t cap, int64_t *n);
/* 1 when the model marks word ends rather than starts (its trainer spec's
 * treat_whitespace_as_suffix): rp_tok_encode_continued refuses it. */
int rp_tok_whitespace_suffix(const rp_tok *t);

/* Decodes n ids (each checked by rp_tok_check_id with its position, 1-based) into out (cap bytes; out may be NULL when
 * cap is 0); *len = the bytes of the text, which may exceed cap. No NUL is added. */
rp_status rp_tok_decode(const rp_tok *t, const int32_t *ids, int64_t n, char *out, size_t cap,
                        size_t *len);

/* The piece of id (rp_tok_check_id without a position):
 * *piece points into t (valid while t lives), *len bytes. */
rp_status rp_tok_piece(const rp_tok *t, int32_t id, const char **piece, size_t *len);
/* The id of a piece (len bytes), or unk_id when the vocabulary has no such piece (as
 * SentencePiece's PieceToId). */
int32_t rp_tok_id(const rp_tok *t, const char *piece, size_t len);

#endif
