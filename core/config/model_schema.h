/* The schema of the model config: one row per key of rp.model's config table, each naming its
 * field of rp_model_cfg (core/model/model.h), its type, default, range, the modes it does something
 * for and the checkpoint format version that stores it.
 *
 * Everything that handles a config iterates the rows instead of listing the fields: the defaults
 * (rp_model_cfg_default), the range checks (rp_model_cfg_check, for a config from rp.model or
 * from a file alike), the refusal of a key that does nothing (rp_model_cfg_check_used), the
 * checkpoint format (core/io/checkpoint.c: the version a config needs, the fields of each version's
 * block), the safetensors roper.config JSON (core/io/safetensors_config.c), the binding's reading
 * of rp.model's table and m:config() (bindings/model.c), and rp.experiment's keys (the rows
 * reach the Lua parts as internals.model_keys). A new config key is a field of rp_model_cfg and
 * a row in model_schema.c (docs/architecture.md, "How to add a config key"); a parameter of the
 * frequency scheme is a field of rp_rope_freq (core/nn/rope_freq.h), which the config holds as
 * its freq: its row points into it (RP_CFG_FREQ_OF), and its scope (rp_model_cfg_scope) makes it
 * an option of the rotary bindings and of rp.attention.
 */
#ifndef RP_MODEL_SCHEMA_H
#define RP_MODEL_SCHEMA_H

#include <stddef.h>
#include <stdint.h>

#include "model_cfg.h"
#include "status.h"

/* How a field is stored and named. */
typedef enum {
    RP_CFG_INT,    /* int64_t */
    RP_CFG_NUM,    /* double */
    RP_CFG_ENUM,   /* an enum, stored as an int; its values named by the row's names */
    RP_CFG_SEED,   /* uint64_t: any integer (a negative one as its two's complement) */
    RP_CFG_ROTATE, /* int: a mask of RP_ROT_* bits (pe.h) named by letters of "qkvo"; 0 is the
                    * mode's own */
    RP_CFG_BOOL,   /* int: 0 or 1, named false and true (a Lua or JSON boolean) */
} rp_cfg_type;

/* When a key does something (its value matters). A key that does not is refused by
 * rp_model_cfg_check_used unless it holds its default. */
typedef enum {
    RP_CFG_ALWAYS,        /* every config */
    RP_CFG_ROTARY,        /* a rotary pe (pe.h's rotary column) */
    RP_CFG_PLACEMENT,     /* a rotary pe that rotates one of the placements in use_arg (RP_ROT_*
                           * bits; the mode's own with linear attention) */
    RP_CFG_RELATIVE,      /* a pe whose relative kind reads one of the keys in use_arg (RP_USES_*
                           * bits of pe.h) */
    RP_CFG_FREQ,          /* a rotary pe with softmax attention (the frequency scheme) */
    RP_CFG_SCALED,        /* RP_CFG_FREQ with a scaling (not none) */
    RP_CFG_SCALINGS,      /* RP_CFG_FREQ with a scaling that reads the parameters in use_arg
                           * (RP_READS_* bits of the scaling table, rope_freq.h) */
    RP_CFG_XPOS,          /* RP_CFG_FREQ with xpos > 0 */
    RP_CFG_LINEAR_ROTARY, /* linear attention with a rotary pe */
} rp_cfg_use;

/* Row flags. */
enum {
    RP_CFG_LO_OPEN = 1,     /* RP_CFG_NUM: lo itself is outside the range */
    RP_CFG_HI_OPEN = 2,     /* RP_CFG_NUM: hi itself is outside the range */
    RP_CFG_UNSET0 = 4,      /* 0 (the default) stands for "not set": a stored config may hold it,
                             * a value a user gives may not (rp_model_cfg_check_key) */
    RP_CFG_REQUIRED = 8,    /* rp.model's table must give it (no default) */
    RP_CFG_SHOW_SET = 16,   /* m:config() gives it only when it differs from its default (and
                             * does something: every key) */
    RP_CFG_WEIGHTS = 32,    /* the weights' meaning depends on it: loading a safetensors file into
                             * a model needs the file's value (rp_safetensors_load_into) */
    RP_CFG_FREQ_RANGE = 64, /* RP_CFG_NUM of the frequency scheme: its range is the bound of its
                             * field in rp_freq_rules (rope_freq.h), not lo, hi and the open
                             * flags (rp_model_cfg_range) */
};

/* What the safetensors roper.config (core/io/safetensors.h) holds of a row; a key that is not
 * written reads back as its default. */
typedef enum {
    RP_CFG_JSON_SET = 0,  /* written when it differs from its default */
    RP_CFG_JSON_APPLIES,  /* written when it does something (rp_model_cfg_unused) */
    RP_CFG_JSON_ALWAYS,   /* always written; may be left out */
    RP_CFG_JSON_REQUIRED, /* always written; a roper.config must hold it */
} rp_cfg_json;

typedef struct rp_cfg_key {
    const char *name;          /* the key (rp.model's table, roper.config, m:config(), docs) */
    rp_cfg_type type;
    size_t offset;             /* of the field in rp_model_cfg */
    double def;                /* the default (an enum's value, a mask) */
    double lo, hi;             /* the range: RP_CFG_INT lo .. hi; RP_CFG_NUM finite numbers from
                                * lo to hi (hi may be INFINITY), ends excluded by the flags (or
                                * rp_freq_rules' with RP_CFG_FREQ_RANGE: rp_model_cfg_range); not
                                * used by the other types */
    int flags;                 /* RP_CFG_* flags */
    rp_cfg_json json;
    const char *const *names;  /* RP_CFG_ENUM: the names in value order, NULL-terminated */
    rp_cfg_use use;
    int use_arg;               /* RP_CFG_PLACEMENT, RP_CFG_RELATIVE, RP_CFG_SCALINGS: see
                                * rp_cfg_use */
    uint32_t since;            /* the checkpoint format version whose block holds it */
    uint32_t (*value_since)(int64_t value); /* RP_CFG_ENUM or NULL: the format version a value
                                             * needs (0 .. the count of names - 1) */
    int ck_flag;               /* 0, or the checkpoint's flag bit that holds the field (a
                                * two-valued enum: the bit is set for value 1) */
    const char *help;          /* one line: rp.experiment.keys(), the scripts' --help */
    const char *freq_name;     /* a row of the frequency scheme (its field in rp_model_cfg.freq):
                                * the name of that field of rp_rope_freq (the PyTorch companion's
                                * rotary.Freq has the same fields: rp.model_keys()'s freq); NULL
                                * for the others */
    const char *unset_as;      /* RP_CFG_UNSET0: the key whose value its 0 ("not set") stands
                                * for (fraction_q: fraction_qk), or NULL; rp_model_cfg_normalise
                                * and the widths of the placements (rp_model_cfg_width_key) read
                                * it */
    int linear;                /* 0, or its place among rp.linear_attention's options (1 first:
                                * the order the call reads them in and names them in "unknown
                                * option"): the config keys of one linear attention call, read
                                * by the row's type into rp_linattn_request.keys (plan.h). The
                                * places no row holds are the call's other options, eps and
                                * q_offset, in that order (bindings/args.h,
                                * lrp_linear_keys_mark) */
} rp_cfg_key;

/* A row of the frequency scheme: its field is rp_model_cfg.freq's `field`, and its freq_name
 * that field's name. */
#define RP_CFG_FREQ_OF(field) .offset = offsetof(rp_model_cfg, freq.field), .freq_name = #field

/* The rows, in the order of rp.model's known keys and of roper.config's JSON; at most
 * RP_CFG_MAX_KEYS of them. */
#define RP_CFG_MAX_KEYS 64
extern const rp_cfg_key rp_model_cfg_keys[];
extern const int rp_model_cfg_nkeys;

/* The row named name (len bytes; NUL-terminated when len is (size_t)-1), or NULL. */
const rp_cfg_key *rp_model_cfg_key(const char *name, size_t len);

/* The part of rp_model_cfg a row's field lives in (its scope): the model's own fields, or the
 * attention's part, which rp.attention's options are: the positional scheme (pe, pe.h's
 * rp_pe_cfg), the relative kinds' limits (rel, pe.h's rp_rel_cfg) and the frequency scheme (freq,
 * rope_freq.h's rp_rope_freq). */
typedef enum {
    RP_CFG_SCOPE_MODEL = 0,
    RP_CFG_SCOPE_PE,
    RP_CFG_SCOPE_REL,
    RP_CFG_SCOPE_FREQ,
} rp_cfg_scope;
rp_cfg_scope rp_model_cfg_scope(const rp_cfg_key *k);
/* A row of scope RP_CFG_SCOPE_FREQ: the offset of its field in rp_rope_freq. */
size_t rp_model_cfg_freq_at(const rp_cfg_key *k);

/* A field's value: as an int64 (RP_CFG_INT, RP_CFG_ENUM, RP_CFG_ROTATE, RP_CFG_BOOL; RP_CFG_SEED's
 * bits) or a double (RP_CFG_NUM; the others converted); and set from either (a bool as given:
 * rp_model_cfg_check_key refuses a value other than 0 or 1). */
int64_t rp_model_cfg_get_int(const rp_model_cfg *c, const rp_cfg_key *k);
double rp_model_cfg_get_num(const rp_model_cfg *c, const rp_cfg_key *k);
void rp_model_cfg_set_int(rp_model_cfg *c, const rp_cfg_key *k, int64_t v);
void rp_model_cfg_set_num(rp_model_cfg *c, const rp_cfg_key *k, double v);
/* 1 when the field holds the row's default. */
int rp_model_cfg_is_default(const rp_model_cfg *c, const rp_cfg_key *k);
/* The value as messages write it (12, 0.5, nan, interleaved, qk, true), in buf (n bytes). */
const char *rp_model_cfg_value_str(const rp_model_cfg *c, const rp_cfg_key *k, char *buf,
                                   size_t n);

/* The range of row k (RP_CFG_INT, RP_CFG_NUM): its lo, hi and open ends; a row with
 * RP_CFG_FREQ_RANGE takes lo and lo_open from the bound of its field in the frequency scheme's
 * rules (rp_freq_rule_bound: the one home of those ranges), hi infinite. */
typedef struct rp_cfg_range {
    double lo, hi;
    int lo_open, hi_open;
} rp_cfg_range;
rp_cfg_range rp_model_cfg_range(const rp_cfg_key *k);

/* Checks one field against its row: an integer or number in range (a number finite), an enum
 * value that has a name, a rotate mask of qkvo bits, a bool 0 or 1. given = 1 for a value a user
 * wrote (then an RP_CFG_UNSET0 key's 0 is refused too). RP_ERR_ARG naming the key and the value
 * ("fraction_qk nan must be in (0, 1]", "rel_clip 0 must be in 1..65536", "base must be a finite
 * number > 0, got 0", "pe 11 is not none (0), ... or alibi (10)", "learn_freq 2 is not false (0)
 * or true (1)"). */
rp_status rp_model_cfg_check_key(const rp_model_cfg *c, const rp_cfg_key *k, int given);
/* rp_model_cfg_check_key, its message naming the key `name` (NULL: k's own name). */
rp_status rp_model_cfg_check_key_as(const rp_model_cfg *c, const rp_cfg_key *k, int given,
                                    const char *name);
/* rp_model_cfg_check_key's message for c's value of row k, in buf (n bytes): a template of its
 * type's (model_schema.c, the one home of their words) with the row's name and range filled, and
 * {value} (rp_model_cfg_value_str) from c, left as a mark when c is NULL (the form rp.model_keys()
 * gives as a row's range). NULL for a seed row (every value is in range). */
const char *rp_model_cfg_range_msg(const rp_model_cfg *c, const rp_cfg_key *k, char *buf,
                                   size_t n);
/* The names of the values of an enum or bool row ("false", "true"), NULL-terminated; NULL for the
 * others. */
const char *const *rp_model_cfg_names(const rp_cfg_key *k);
/* rp_model_cfg_check_key for every row (given = 0), in row order: the first bad field. */
rp_status rp_model_cfg_check_keys(const rp_model_cfg *c);

/* ---- the does-nothing rules ----
 *
 * When a row's key does something is a table of needs (model_schema.c): each applies to the rows
 * of some uses (rp_cfg_use) and holds for some values of one fact of the config; the first need of
 * a row that does not hold says why the key does nothing. The table is the one home of these rules:
 * rp_model_cfg_unused runs it, rp.model_keys() gives each row its needs with the values they hold
 * for (the PyTorch companion reads them from its schema.json). */

/* The facts of a config the needs test, each a small set of values (rp_model_cfg_fact_name). */
typedef enum {
    RP_FACT_PE,        /* pe (rp_pe) */
    RP_FACT_ATTENTION, /* attention (rp_attn_kind) */
    RP_FACT_ROTATE,    /* the placements rotated (a mask of RP_ROT_* bits, 0 .. 15): rotate when
                        * set, the mode's own when not or with linear attention */
    RP_FACT_SCALING,   /* scaling (rp_rope_scaling) */
    RP_FACT_XPOS,      /* xPos on: 1 when xpos > 0 ("on"), else 0 ("off") */
    RP_FACT_COUNT
} rp_cfg_fact;

typedef struct rp_cfg_need {
    int uses;         /* the rows it applies to: bits 1 << their rp_cfg_use */
    rp_cfg_fact fact; /* the fact it tests */
    /* 1 when row k does something at value v of the fact (as far as this need goes) */
    int (*holds)(const rp_cfg_key *k, int v);
    /* what {list} stands for in why (the modes, placements or scalings it applies to), in buf
     * (n bytes); NULL when why has no {list} */
    const char *(*list)(const rp_cfg_key *k, char *buf, size_t n);
    /* why the key does nothing when the need does not hold, with {pe}, {rotate}, {scaling} (the
     * config's values: the fact's for {rotate}) and {list} */
    const char *why;
} rp_cfg_need;

extern const rp_cfg_need rp_model_cfg_needs[];
extern const int rp_model_cfg_nneeds;

/* The value of fact f for c (c's enum fields in range). */
int rp_model_cfg_fact(const rp_model_cfg *c, rp_cfg_fact f);
/* The name of value v of fact f (pe and scaling names, "softmax", "qk", "on"), in buf (n bytes),
 * or NULL when v is past the fact's values (they are 0 .. the first v that gives NULL - 1). */
const char *rp_model_cfg_fact_name(rp_cfg_fact f, int v, char *buf, size_t n);
/* The fact's name as the needs' templates and rp.model_keys() write it ("pe", "rotate", ...). */
const char *rp_model_cfg_fact_key(rp_cfg_fact f);
/* 1 when need r applies to row k (its uses hold k's). */
int rp_model_cfg_need_applies(const rp_cfg_need *r, const rp_cfg_key *k);
/* Need r's why for row k, in buf (n bytes): {list} filled in, and {pe}, {rotate} and {scaling}
 * from c, or left as they are when c is NULL (rp.model_keys() gives that form). */
const char *rp_model_cfg_need_why(const rp_cfg_need *r, const rp_cfg_key *k,
                                  const rp_model_cfg *c, char *buf, size_t n);

/* NULL when row k does something for c (every need of the row holds), else why not, written to
 * why (n bytes) and returned: "for pe shaw: it applies to the rotary modes (rope, roper or
 * roper_legacy)". c's enum fields must be in range. */
const char *rp_model_cfg_unused(const rp_model_cfg *c, const rp_cfg_key *k, char *why, size_t n);
/* RP_ERR_ARG for the first field (row order) that holds another value than its default while it
 * does nothing for c: "rel_clip 8 does nothing for pe rope: it applies to pe shaw or deberta"
 * (the key, its value as rp_model_cfg_value_str writes it, rp_model_cfg_unused's why).
 * A value that does nothing is refused where a user writes it (rp.model, m:derive, rp.attention,
 * rp.rope.*); a stored config may hold one (older roper accepted them), which is harmless. c must
 * have passed rp_model_cfg_check_keys. */
rp_status rp_model_cfg_check_used(const rp_model_cfg *c);

/* The row whose fraction gives the width of placement bit (RP_ROT_*) for c: of the
 * RP_CFG_PLACEMENT rows whose use_arg has the bit, the one with an unset_as when it is set, else
 * the one without. Set: given NULL, c's value is not 0 (rp.model); else bit i of *given says row
 * i was given (rp.attention's options, whatever their value). */
const rp_cfg_key *rp_model_cfg_width_key(const rp_model_cfg *c, const uint64_t *given, int bit);

/* ---- the rules between keys ----
 *
 * rp_model_cfg_check's rules after the ranges, in order (model_config.c): a data rule applies when
 * one of its `when` keys is set (differs from its default) and then needs pe to be a mode it holds
 * for and its `unset` keys to hold their defaults; a coded rule is a named function.
 * rp.model_rules() gives the table (the PyTorch companion reads it from its schema.json). */
typedef struct rp_cfg_rule {
    const char *check;          /* a coded rule's name ("rows", "widths", ...); NULL for data */
    rp_status (*run)(const rp_model_cfg *c, const struct rp_cfg_rule *r); /* the coded rule's
                                 * function, given its row */
    const char *when[3];        /* the keys that make a data rule apply (NULL-terminated) */
    int (*pe_holds)(rp_pe pe);  /* the modes it needs (NULL: any) */
    const char *unset[5];       /* the keys it needs at their defaults (NULL-terminated) */
    int64_t max;                /* a coded rule's bound (0: none) */
    const char *why;            /* its message. A data rule's: rp_model_cfg_fill ({pe}, {scaling},
                                 * {linear}; {list}: the modes pe_holds holds for). A coded rule's
                                 * (NULL for those whose messages are pe.h's or rope_freq.h's):
                                 * {<key>} the config's value of each key, as
                                 * rp_model_cfg_value_str writes it, {lo} the bound the rule
                                 * computes and {hi} max */
} rp_cfg_rule;

extern const rp_cfg_rule rp_model_cfg_rules[];
extern const int rp_model_cfg_nrules;

/* The template t in buf (n bytes) with {pe}, {rotate} and {scaling} (the facts, rp_model_cfg_fact),
 * {linear} (pe.h's RP_PE_WITH_LINEAR with linear attention, else nothing) from c and {list} from
 * list; with c NULL the config's marks are left as they are. */
const char *rp_model_cfg_fill(const char *t, const rp_model_cfg *c, const char *list, char *buf,
                              size_t n);
/* A data rule's {list}: the modes r->pe_holds holds for ("rope, roper or roper_legacy"), in buf. */
const char *rp_model_cfg_rule_list(const rp_cfg_rule *r, char *buf, size_t n);

/* The one config of equal models: a rotate mask equal to the mode's own and a key with an
 * unset_as equal to that key (fraction_q, fraction_k = fraction_qk, fraction_o = fraction_v)
 * become 0 ("not set"), as rp.model stores them. */
void rp_model_cfg_normalise(rp_model_cfg *c);

/* The oldest checkpoint format version that holds c: the largest since of a row whose field
 * differs from its default (an enum value: the larger of that and its value_since). */
uint32_t rp_model_cfg_version(const rp_model_cfg *c);

#endif
