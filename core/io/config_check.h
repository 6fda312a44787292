/* The entry points that check roper's model config, its own tables and positions and a file of
 * it, for programs that are not roper (the PyTorch companion calls them through Python's ctypes
 * from libroper.so, docs/interop.md): the config as JSON and the tables as arrays in, core's
 * verdict and message out, so that the rules and their words have one home, core. Each keeps no
 * state (safe from any thread); its message is also the thread's rp_last_error. */
#ifndef RP_CONFIG_CHECK_H
#define RP_CONFIG_CHECK_H

#include <stddef.h>
#include <stdint.h>

#include "rope_freq.h"
#include "status.h"

/* How rp_config_check_json reads its config. */
typedef enum {
    RP_CONFIG_WRITTEN = 0, /* as rp.model reads a config a user wrote: each key the JSON holds
                            * checked as given (rp_model_cfg_check_key, given = 1: a fraction_q
                            * of 0 refused), then rp_model_cfg_plan (option rotate on a rotary
                            * pe, every rule, keys that do nothing refused) */
    RP_CONFIG_STORED = 1   /* as a file's reader reads roper.config: rp_model_cfg_check, the
                            * messages in the file reader's words ("bad roper.config (...)",
                            * "bad model config: ...") */
} rp_config_how;

/* Checks the config in json (n bytes, not NUL-terminated: a JSON object of rp.model's keys as
 * roper.config holds them, rp_model_cfg_from_json; its required keys present, the others at their
 * defaults when left out) read as `how` says. Returns RP_OK, or the first refusal's status
 * (RP_ERR_ARG) with its message (rp_last_error's) copied into msg (msg_n bytes, NUL-terminated,
 * cut at msg_n - 1; msg may be NULL when msg_n is 0); msg is "" on RP_OK. Keeps no state: safe
 * to call from any thread (the message is also the thread's rp_last_error). */
rp_status rp_config_check_json(const char *json, size_t n, int how, char *msg, size_t msg_n);

/* Checks the values of the config in json (as rp_config_check_json reads it as
 * RP_CONFIG_WRITTEN, without the checks that follow) that a user gave under other names, in
 * those names (rp_model_cfg_check_shown): shown (shown_n bytes, not NUL-terminated) a JSON
 * object mapping config keys to the names they go by (the PyTorch companion's rope_scaling
 * fields: {"yarn_alpha": "'beta_slow'", ...}); a key counts as given when json holds it. A json
 * that rp_model_cfg_from_json refuses passes here (rp_config_check_json, which follows, refuses
 * it in its own words). Returns as rp_config_check_json. */
rp_status rp_config_check_shown(const char *json, size_t n, const char *shown, size_t shown_n,
                                char *msg, size_t msg_n);

/* The own tables, positions and axes of a model, as rp.model's options give them (the caller has
 * read each value's type: numbers, integers, lists of one length; all borrowed). */
typedef struct rp_config_tables {
    const double *theta;     /* option freq [n_theta], NULL: none */
    int64_t n_theta;
    const double *angles;    /* option angles [rows x n_angles] (a function sampled), NULL: none */
    int64_t rows, n_angles;
    const int64_t *pos;      /* option positions [pos_rows x max(axes, 1)], NULL: none */
    int64_t pos_rows;
    int axes;                /* the positions' axes: 0 scalar, 1 to RP_MAX_AXES vector */
    int map;                 /* option axes (rp_axes_map), -1: not given */
    int n_sections;          /* option sections' entries (1 to RP_MAX_AXES), -1: not given */
    int64_t sections[RP_MAX_AXES];
    const double *mix;       /* option mix [mix_rows x n_mix], NULL: not given (mix_rows 0), or
                              * given but not read (mix_rows -1: the checks stop after the rules
                              * of the positions and their map, whose order rp.model keeps) */
    int64_t mix_rows, n_mix;
    int scheme_only;         /* 1: stop after the scheme with its own tables (rp.model reads the
                              * positions and their map after it checks those); 0: every check */
} rp_config_tables;

/* Checks the config in json (as rp_config_check_json reads it as `how` says) with the own tables
 * and positions in t, as rp.model checks them after its config (bindings/model.c): the scheme
 * with its own tables (rp_rope_freq_check), the rules between the positions, their map and its
 * table (rp_axes_plan, rp.model's wording), then what the model would refuse
 * (rp_model_cfg_check_freq, rp_model_cfg_check_positions). mix must be [axes x d_rot/2] (d_rot of
 * the widest rotated placement): when the rules before it pass and it is not, RP_ERR_SHAPE with
 * a message naming both shapes (rp.model's reader words that refusal itself). Returns RP_OK, or
 * the first refusal's status with its message in msg as rp_config_check_json. */
rp_status rp_config_check_tables(const char *json, size_t n, int how, const rp_config_tables *t,
                                 char *msg, size_t msg_n);

/* Checks a frequency scheme for one placement d_rot wide over positions up to last, as
 * rp.rope.angles does (rp_rope_freq_check, then rp_rope_freq_check_use naming the width `what`,
 * NULL: "d_rot"): json an object of the config's frequency keys (scaling, scaling_factor,
 * orig_len, ..., xpos_scale_base; the others at their defaults, orig_len 0 meaning none), t the
 * own tables and the axes (t->axes 0 for scalar positions, t->map -1 for axial; t->pos unread;
 * a mix of t->axes >= 1 rows, else RP_ERR_SHAPE).
 * Returns as rp_config_check_json. */
rp_status rp_config_check_scheme(const char *json, size_t n, const rp_config_tables *t,
                                 int64_t d_rot, int64_t last, const char *what, char *msg,
                                 size_t msg_n);

/* Checks the safetensors file at path as rp.load reads it, without building the model
 * (rp_safetensors_check: "path: ..." messages). Returns as rp_config_check_json. */
rp_status rp_config_check_file(const char *path, char *msg, size_t msg_n);

/* sizeof(rp_config_tables) in this library: a caller from another language that lays the struct
 * out itself (the PyTorch companion's ctypes) compares it with its own before any call, and does
 * not call a library whose struct differs (another version of roper). */
size_t rp_config_tables_size(void);

#endif
