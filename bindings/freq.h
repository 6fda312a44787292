/* The frequency options of the rotary bindings (freq.c): read in two phases, as args.h asks. */
#ifndef LRP_FREQ_H
#define LRP_FREQ_H

#include <stdint.h>

#include <lua.h>

#include "rp.h"

/* The option names lrp_optfreq and lrp_optbase read, for a known-keys list of lrp_checkopts:
 * the frequency rows of the config schema (the rows with a freq column: lrp_freq_keys_mark), Hugging
 * Face's rope_scaling table and rope_theta (base), the tables. */
#define LRP_FREQ_KEYS lrp_freq_keys_mark, "rope_scaling", "rope_theta", "freq", "angles"

/* The rotary base of the table at idx: option base, or rope_theta (Hugging Face's name; not
 * both), a finite number > 0, RP_ROPE_BASE when absent. Raises naming the option. */
double lrp_optbase(lua_State *L, int idx);

/* Hugging Face's rope_scaling table (option rope_scaling of the table at idx, as config.json
 * writes it: rope_type or type, factor, original_max_position_embeddings, ...) mapped into view's
 * frequency fields (docs/interop.md has the mapping). Refuses it beside roper's own scaling keys,
 * an unknown rope_type (longrope named), unknown fields and fields its rope_type does not read.
 * Returns 1 when it was given, 0 when absent. */
int lrp_opt_rope_scaling(lua_State *L, int idx, rp_model_cfg *view);

/* Sets fields hf_fields (the rope_scaling fields scaling s's rope_type reads, in the order the
 * unknown-field message names them) and hf_needs (the groups of fields its rope_type requires,
 * each a list of one or two names, in the order they are checked) on the table on top. */
void lrp_set_hf_fields(lua_State *L, rp_rope_scaling s);

/* Pushes the mapping of Hugging Face's rope_scaling fields (bindings/freq.c's table, the one
 * home of it): a list, in the order the unknown-field message names them, of {name =, key =,
 * max =, on =, off =} (key: roper's config key the field sets, nil for mscale and
 * mscale_all_dim; max: for a key of integers, the largest value the field may hold (it holds an
 * integer from 1); on, off: for a boolean field, the key's values for true and false). */
void lrp_push_hf_map(lua_State *L);

/* internals.hf_rope(opts) -> the config keys (roper's names) that opts' rope_theta and
 * rope_scaling stand for: those that differ from rp.model's defaults (rp.experiment's mapping).
 * Raises as lrp_opt_rope_scaling; opts' other keys are not read but for the refusal of roper's
 * own scaling keys beside rope_scaling. */
int lrp_hf_rope_keys(lua_State *L);

/* Phase 1: reads the frequency options of the table at idx (nil: none) into view's fields (the
 * frequency rows of the config schema, each by its row's type and range, or rope_scaling), and
 * *f from them (rp_model_cfg_freq; a scaling that reads orig_len raises without it: these calls
 * have no model length to take it from), and pushes the values of freq and angles (nil when absent): two
 * stack slots, which must stay there for lrp_freq_tables. view holds the call's other keys (pe,
 * base, ...) for lrp_check_used. Raises naming the option. */
void lrp_optfreq(lua_State *L, int idx, rp_model_cfg *view, rp_rope_freq *f);

/* Phase 2: copies the values in slots slot, slot + 1 (from lrp_optfreq) into one userdata of
 * doubles pushed on the stack (nil when neither is given; keep it there while f is used) and
 * points f->theta or f->angles at it; a function given as angles is called as fn(p, i) for
 * p = 0 .. rows-1, i = 0 .. half-1 (at most 2^24 calls). Then checks *f (rp_rope_freq_check).
 * Raises naming the option (and the entry, 1-based as the user wrote it). */
void lrp_freq_tables(lua_State *L, int idx, int slot, rp_rope_freq *f, int64_t rows,
                     int64_t half);

/* The option names of vector positions (lrp_optaxes), for a known-keys list. */
#define LRP_AXES_KEYS "axes", "sections", "mix"

/* The vector-position options as given (phase 1). */
typedef struct lrp_axes_opts {
    int map;          /* option axes (rp_axes_map), -1 when absent */
    int n_sections;   /* the entries of option sections, -1 when absent */
    int64_t sections[RP_MAX_AXES];
    int slot;         /* the stack slot of mix's value (nil when absent) */
} lrp_axes_opts;

/* Phase 1: reads options axes (a name of rp_axes_names) and sections (a list of 1 to
 * RP_MAX_AXES integers >= 0, the pairs of each axis) of the table at idx (nil: none) into *o and
 * pushes the value of mix: one stack slot, which must stay there for lrp_axes_tables. Raises
 * naming the option. */
void lrp_optaxes(lua_State *L, int idx, lrp_axes_opts *o);

/* Phase 2, once the positions are read: A their axes (0: scalar positions), half = d_rot / 2,
 * pos_given: the call was given positions (else they are 0, 1, .. and the refusal names the
 * missing option). Refuses by core's rules in rp.model's wording (rp_axes_plan, axes_plan.h) the
 * options that do nothing (any of them with scalar positions or without positions, sections or
 * mix beside another map, angles with A > 1) or are missing (sections, mix for their maps),
 * sections that are not A; then a mix that is not [A x half] (a 2-D tensor or A lists of half
 * finite numbers); copies mix into a double userdata pushed on the
 * stack (nil without it; keep it there while f is used) and sets f->axes (map axial when A > 0
 * and axes is absent). angles_given: option angles is. The sum of the sections is
 * rp_rope_freq_check_use's (rp_freq_plan_positions, plan.h). Raises naming the option table at idx. */
void lrp_axes_tables(lua_State *L, int idx, const lrp_axes_opts *o, int A, int pos_given,
                     int64_t half, int angles_given, rp_rope_freq *f);

/* rp.option_messages() -> the option readers' messages and what they name, as a new table:
 * messages[name] = template (args.h's lrp_msgs: marks {key}, {got}, ... of lrp_mark), tables[key]
 * = {dims =, shape =, forms =, noun =} for the table options freq, angles and mix (their dims, the
 * tensor shape, the other forms and what a row holds, as the messages name them), bounds =
 * {max_axes =, max_pos =, max_samples =} (RP_MAX_AXES, LRP_MAX_POS, the calls of a function of
 * angles), hf_unsupported = the rope_types refused by name (LRP_M_HF_UNSUPPORTED). */
int lrp_option_messages(lua_State *L);

/* Positions at stack slot idx (argument arg, named `what` in errors): a list of integers or a
 * 1-D tensor of integral values, each within +-2^53 (LRP_MAX_POS), or a single number when
 * allow_number; with axes != NULL vector positions too, an [n x A] tensor or a list of n lists of
 * A = 1 .. RP_MAX_AXES integers; copied row-major into a new userdata pushed on the stack (keep it
 * there while the buffer is used); *axes = A (0 for scalar positions), *n = the positions (rows).
 * Raises naming arg. */
int64_t *lrp_read_positions(lua_State *L, int arg, int idx, const char *what, int allow_number,
                            int *axes, int64_t *n);

/* The xpos_side option at idx: 1 (the query side, the default) or -1 (the key side). */
int lrp_optxposside(lua_State *L, int idx);

#endif
