/* Checkpoints: a model's config and parameters, optionally the optimiser's config and state and
 * the model's RNG, in one file (format: docs/checkpoint.md). Written atomically: a temporary file
 * in the same folder, fsync, rename. Loading validates magic, version, sizes, names, shapes and
 * the checksum before anything is used. */
#ifndef RP_CHECKPOINT_H
#define RP_CHECKPOINT_H

#include "model.h"
#include "optim.h"

/* Saves m (and, when opt_cfg and opt_state are not NULL, the optimiser). RP_ERR_IO with
 * "path: reason" when the file cannot be written; nothing is left behind then (an existing file
 * at path stays as it was). RP_ERR_ARG for an empty path, only one of opt_cfg / opt_state, a state
 * whose n differs from the parameter count, or an optimiser config that fails its check; and
 * ("path: bad model config: ...") for a model config that rp_model_cfg_check refuses, which the
 * reader would refuse too. The config's fields are laid out by the config schema
 * (core/config/model_schema.h: each row's since and type); the optimiser's config by its rows
 * (core/nn/optim.h: one entry per row, by name), in a file of format version 7. */
rp_status rp_checkpoint_save(const char *path, rp_model *m, const rp_adam_cfg *opt_cfg,
                             const rp_adam_state *opt_state);

/* What a checkpoint holds, read by rp_checkpoint_load. */
typedef struct rp_checkpoint {
    rp_model *model;        /* a new model (caller frees) */
    int has_optim;
    rp_adam_cfg opt_cfg;
    rp_adam_state opt_state; /* m and v malloc'ed (caller frees with rp_checkpoint_free_optim) */
} rp_checkpoint;

/* Loads path into ck. RP_ERR_IO ("path: reason") for a missing, unreadable, truncated or
 * corrupted file (bad magic, unknown version, checksum mismatch, impossible sizes); nothing is
 * allocated and ck is left untouched then. Without an optimiser section, opt_cfg is the default
 * config and opt_state is empty. */
rp_status rp_checkpoint_load(const char *path, rp_checkpoint *ck);
/* The same, with the model built for max_batch sequences instead of the saved max_batch when
 * max_batch > 0 (a run saved under N data-parallel ranks goes on under M; the weights do not
 * depend on it). RP_ERR_IO as rp_checkpoint_load, also when the model cannot be built so. */
rp_status rp_checkpoint_load_batch(const char *path, int64_t max_batch, rp_checkpoint *ck);
void rp_checkpoint_free_optim(rp_checkpoint *ck);

/* 1 when the n first bytes of a file begin with the checkpoint magic "RPCK" (or, for n < 4, are a
 * nonempty prefix of it): the test rp.load uses to pick this reader. */
int rp_checkpoint_magic(const void *b, size_t n);

#endif
