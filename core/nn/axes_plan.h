/* The rules of vector positions' options: which of a map, its table and the positions must come
 * together (rope_freq.h has the maps: axial, sections for M-RoPE, mixed for RoPE-Mixed).
 *
 * The one home of these rules and their messages: rp.model and the rp.rope / rp.attention
 * functions that take positions, axes, sections and mix (bindings/freq.c's lrp_axes_tables) and
 * a safetensors file's roper.axes, roper.sections and roper.mix (core/io/safetensors.c) make one
 * call of rp_axes_plan, each with its own wording; rp.axes_rules() exports the descriptor and the
 * rules' names (the PyTorch companion asks core: python/roper_torch/core.py).
 *
 * The rules, in the order rp_axes_plan checks them (the first that applies is the error):
 *   positions  a map or a map's table is given without positions
 *   scalar     a map or a map's table is given with scalar positions (A = 0)
 *   nothing    a map's table is given beside another map (the map absent: axial)
 *   needed     a map's table is missing for its map
 *   rows       a map's table has not a row (entry) per axis of the positions
 *   angles     an angle table (one position per row) beside positions of more than one axis
 * nothing, needed and rows go over the maps that own a table (sections, then mixed): rule by rule
 * (each over the tables), or table by table (each through the three rules) when the wording's
 * by_table says so. The "given" one that the positions and scalar rules name is the map when
 * given, else the first table given. A wording without a rule's message does not check it.
 */
#ifndef RP_AXES_PLAN_H
#define RP_AXES_PLAN_H

#include <stdint.h>

#include "rope_freq.h"
#include "status.h"

/* The table a map owns (the rp.model option that gives it) and what it is, for messages. */
typedef struct {
    const char *table; /* the option of its own table, NULL for none (axial) */
    const char *does;  /* what the table does for the map ("does nothing" messages) */
    const char *what;  /* what the table is ("needs" messages) */
} rp_axes_map_desc;
/* By rp_axes_map: axial owns none, sections owns sections, mixed owns mix. */
extern const rp_axes_map_desc rp_axes_maps[RP_AXES_COUNT];

/* The rules (header comment), in the order they are checked. */
typedef enum {
    RP_AXR_POSITIONS,
    RP_AXR_SCALAR,
    RP_AXR_NOTHING,
    RP_AXR_NEEDED,
    RP_AXR_ROWS,
    RP_AXR_ANGLES,
    RP_AXR_COUNT
} rp_axes_rule;
/* "positions", "scalar", "nothing", "needed", "rows", "angles", NULL. */
extern const char *const rp_axes_rule_names[RP_AXR_COUNT + 1];

/* How a caller words the rules: one message template per rule (NULL: not checked), with marks
 * that rp_axes_plan replaces: {name} the option or key the rule is about, {axes} the map's
 * option or key, {positions} the positions' option or key, {map} the map in force, {own} the map
 * that owns the table, {does} and {what} that map's rp_axes_maps entries, {n} the table's rows,
 * {A} the positions' axes, {tensor} and {shape} the table as the caller shows it. Any other text
 * (braces too) is copied as it is. */
typedef struct {
    const char *name; /* "option" (rp.model's options), "metadata" (a safetensors file's) */
    int by_table;     /* 1: nothing, needed and rows table by table (header comment) */
    const char *msg[RP_AXR_COUNT];
} rp_axes_wording;
typedef enum { RP_AXW_OPTION, RP_AXW_METADATA, RP_AXW_COUNT } rp_axes_wording_id;
extern const rp_axes_wording rp_axes_wordings[RP_AXW_COUNT];

/* What a call was given. The names default (NULL) to rp.model's options: "axes", "positions",
 * rp_axes_maps[m].table. */
typedef struct {
    int map;                      /* the map given (rp_axes_map), -1 when absent (axial) */
    int64_t A;                    /* the positions' axes, 0 for scalar positions or none */
    int pos_given;                /* positions were given */
    int angles_given;             /* an angle table was given */
    int given[RP_AXES_COUNT];     /* by map: its own table was given */
    int64_t rows[RP_AXES_COUNT];  /* by map: that table's rows; < 0: not checked here */
    const char *axes_name, *positions_name;
    const char *table_name[RP_AXES_COUNT];
    const char *tensor[RP_AXES_COUNT], *shape[RP_AXES_COUNT]; /* {tensor}, {shape}; NULL: "" */
} rp_axes_given;

/* Checks g by the rules in wording w (rp_axes_wording_id). RP_OK, or RP_ERR_ARG with the first
 * rule's message (the callers add their own prefix). Reads g only. */
rp_status rp_axes_plan(int w, const rp_axes_given *g);

#endif
