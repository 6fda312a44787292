/* Model weights as safetensors files, the format Hugging Face and PyTorch users load with one call
 * (safetensors.torch.load_file); the format, the names and every message: docs/interop.md.
 *
 * A file is an 8-byte little-endian header length N, N bytes of JSON header and the raw data. The
 * header maps each tensor name to {"dtype", "shape", "data_offsets": [begin, end]} (offsets into
 * the data, which follows the header) and may hold "__metadata__", an object of strings.
 *
 * Writing: every parameter under its layout name (core/model/model.h: "embed.weight",
 * "layers.0.attn.qkv.weight", ...), dtype F32, in layout order, back to back; the metadata holds
 * "format": "pt", "roper.version": "1" and "roper.config": the config as a JSON object with the
 * keys and values of rp.model's config table. A model's own frequencies or angles and its
 * positions (rp_model_set_freq, rp_model_set_positions) follow the parameters as tensors of
 * 8-byte values, each named by the metadata key of its name: "roper.freq" F64 [n],
 * "roper.angles" F64 [rows x n], "roper.positions" I64 [rows] (1-D) or [rows x A] (vector
 * positions, with "roper.axes" the map's name), "roper.sections" I64 [A] (axes sections),
 * "roper.mix" F64 [A x n] (axes mixed). The header is padded with spaces to a multiple of 8
 * bytes, as the reference writer pads it. Atomic (core/io/fileio.h).
 *
 * Reading checks the whole file before anything is used: the header length (at most
 * RP_SAFETENSORS_MAX_HEADER, inside the file), the JSON (core/io/json.h, strict), every entry's
 * keys, dtype, shape and offsets (end - begin is exactly the shape's bytes; together the tensors
 * cover the data exactly once: no overlap, no gap, no trailing byte), then the tensors against the
 * model (every parameter once, nothing else, shapes equal). F32 is read bit for bit, F64 rounded
 * to the nearest float32 (ties to even); other dtypes are refused. Errors are RP_ERR_IO
 * "path: reason" and leave everything as it was.
 */
#ifndef RP_SAFETENSORS_H
#define RP_SAFETENSORS_H

#include <stddef.h>

#include "model.h"
#include "status.h"

/* The largest header the reader accepts: the reference implementation's limit. */
#define RP_SAFETENSORS_MAX_HEADER 100000000u
/* The value of the metadata key "roper.version" this code writes and reads. */
#define RP_SAFETENSORS_VERSION "1"

/* What a model holds beside its parameters (rp.model's freq, angles, positions, sections, mix),
 * one row each, in the order the writer writes them and the reader checks them: each a tensor of
 * 8-byte values that the metadata key of the same name names; RP_SAFETENSORS_AXES_KEY gives the
 * positions' map, and a map's own table is the row of its option (rp_axes_maps, axes_plan.h,
 * which also has the rules between them). The one home of these facts: the writer, the reader's
 * checks and messages (safetensors.c) and rp.safetensors_extras() (the PyTorch companion's
 * schema.json) read it. The reader's refusals of the extras the metadata names are the file's
 * path, ": ", then what is wrong: no such tensor, a tensor two keys name, a dtype or a rank not
 * the row's (a positions tensor of rank 2 must have 1 to RP_MAX_AXES columns too), a roper.axes
 * that names no map, a tensor the metadata names that is a parameter of the model (each naming the
 * row's metadata key and the tensor as rp_json_quoted shows it in RP_JSON_NAME_TEXT bytes). */
typedef struct {
    const char *key;    /* the metadata key, and the tensor's name as roper writes it */
    const char *option; /* rp.model's option it gives */
    const char *dtype;  /* "F64" (doubles) or "I64" (integers) */
    int ndim_lo, ndim_hi;
    const char *shape;  /* what the shape must be, as messages write it */
} rp_safetensors_extra;
enum { RP_X_FREQ, RP_X_ANGLES, RP_X_POSITIONS, RP_X_SECTIONS, RP_X_MIX, RP_X_COUNT };
extern const rp_safetensors_extra rp_safetensors_extras[RP_X_COUNT];
/* The maps a roper.axes may name, as messages list them ("axial, sections, mixed":
 * rp_axes_names), in buf (n bytes, cut to fit); returns buf. */
const char *rp_safetensors_axes_list(char *buf, size_t n);
/* The metadata key of the positions' map (a name of rp_axes_names; axial when absent). */
#define RP_SAFETENSORS_AXES_KEY "roper.axes"

/* Writes m's parameters and config to path. RP_ERR_ARG for an empty path, a NULL model or one
 * whose config rp_model_cfg_check refuses ("path: bad model config: ...": the reader would),
 * RP_ERR_IO "path: reason" when the file cannot be written (nothing is left behind then). */
rp_status rp_safetensors_save(const char *path, rp_model *m);

/* A new model (*out, the caller frees it) built from the config in the file's metadata
 * ("roper.config"), holding the file's weights, own tables and positions (checked by
 * rp_model_set_freq and rp_model_set_positions: "path: bad positions: ..."). On failure *out is
 * untouched. */
rp_status rp_safetensors_load(const char *path, rp_model **out);
/* rp_safetensors_load's checks of the file at path without building the model: its metadata
 * (roper.config and roper.version), the config (rp_model_cfg_check), the parameters it needs
 * held, the tensors the metadata names (named once, typed, shaped; roper.axes and its rules) and
 * their values as the model would take them (rp_model_cfg_check_freq,
 * rp_model_cfg_check_positions), with rp_safetensors_load's messages ("path: ..."). Reads the
 * header and those tensors only; not the parameters' names, dtypes and shapes against the
 * model's. RP_OK, RP_ERR_IO (or RP_ERR_NOMEM). */
rp_status rp_safetensors_check(const char *path);

/* Copies the file's weights into m, which must have every tensor the file has, with the same
 * names and shapes. When the file carries a roper.config, it must pass rp_model_cfg_check ("bad
 * model config: ...", as rp_safetensors_load) and its RP_CFG_WEIGHTS fields (those that fix the
 * weights' layout and meaning) must equal m's; the others (seq_len, max_batch, dropout, seed,
 * rotate, the placement fractions, the relative keys, the scaling, xPos) are m's own and are
 * not compared. The weights only: the
 * file's own tables and positions are checked as files (named, typed, shaped) but m keeps its
 * own. On failure m is untouched. */
rp_status rp_safetensors_load_into(const char *path, rp_model *m);

/* 1 when the n first bytes of a file look like a safetensors file: n >= 9, a header length >= 2
 * and the header starting with '{' (the reference reader's own test). */
int rp_safetensors_magic(const void *b, size_t n);

/* ---- the config as JSON (the value of "roper.config") ---- */

/* Writes cfg as a JSON object ({"vocab":11,"d_model":16,...}, the keys of rp.model's config,
 * numbers in the shortest form that reads back exactly) into buf (size n, NUL-terminated);
 * returns the length it needs (excluding the NUL), as snprintf does. Which keys it holds: the
 * config schema's json column (model_schema.h). Returns 0 (RP_ERR_ARG recorded) for a config
 * with a field out of its range (rp_model_cfg_check_keys): never JSON that the reader refuses
 * (no bare nan). */
size_t rp_model_cfg_to_json(const rp_model_cfg *cfg, char *buf, size_t n);

/* Reads a config written by rp_model_cfg_to_json (keys in any order; max_batch, dropout and seed
 * may be left out: 16, 0, 0) into *cfg. RP_ERR_ARG with the problem ("not a JSON object (an
 * array)", "unknown key 'pee'" (the key as rp_json_printable shows it), "no key 'pe'", "'heads'
 * must be an integer, got a string", "'pe' must be one of none, ...; got \"zz\"" (a string
 * as rp_json_quoted shows it in RP_JSON_VALUE_TEXT bytes), "'vocab': 1.5 is not an integer" (the
 * message of rp_json_i64, _u64 or _double), "at byte 3: ...") when it is malformed; the
 * values are not range-checked (rp_model_cfg_check does that). */
rp_status rp_model_cfg_from_json(const char *text, size_t len, rp_model_cfg *cfg);
/* rp_model_cfg_from_json's reading of the keys a JSON object holds (any subset, none required)
 * into *cfg, the other fields kept; *cfg unchanged on a refusal (its messages). */
rp_status rp_model_cfg_keys_from_json(const char *text, size_t len, rp_model_cfg *cfg);

/* A file's refusal of its roper.config that rp_model_cfg_from_json refuses (rp_error_why's
 * template: {why} its message), rp_safetensors_load's and rp_config_check_file's. */
#define RP_BAD_ROPER_CONFIG "bad roper.config ({why})"

#endif
