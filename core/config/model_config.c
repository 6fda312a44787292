/* The model's config: its checks (the ranges of every field are the schema's,
 * model_schema.c; here the rules between fields), and the positional scheme it resolves to. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attention.h"
#include "model_schema.h"

/* The widths of the placements in rot (0 for the others) from the fractions (in range: checked
 * by rp_model_cfg_check_keys); RP_ERR_ARG naming the fraction key when one gives an odd width or
 * one below 2. */
static rp_status pe_widths(const rp_model_cfg *cfg, int rot, int64_t d_rot[4])
{
    int64_t dk = cfg->d_model / cfg->heads;
    for (int i = 0; i < 4; i++) {
        d_rot[i] = 0;
        if (!(rot & 1 << i)) continue; /* RP_ROT_Q, _K, _V, _O */
        const rp_cfg_key *k = rp_model_cfg_width_key(cfg, NULL, 1 << i);
        RP_TRY(rp_pe_fraction_width(k->name, rp_model_cfg_get_num(cfg, k), dk, &d_rot[i]));
    }
    return RP_OK;
}

/* ---- rp_model_cfg_check's rules between fields (model_schema.h: rp_model_cfg_rules) ---- */

/* RP_ERR_ARG with coded rule r's message: r->why with {<key>} the config's value of each key (as
 * rp_model_cfg_value_str writes it), {lo} lo and {hi} r->max. */
static rp_status refuse(const rp_cfg_rule *r, const rp_model_cfg *cfg, int64_t lo)
{
    enum { N = 64 };
    char mark[N + 2][40], value[N + 2][48];
    const char *marks[N + 2], *values[N + 2];
    int n = 0;
    for (int i = 0; i < rp_model_cfg_nkeys && n < N; i++, n++) {
        snprintf(mark[n], sizeof mark[n], "{%s}", rp_model_cfg_keys[i].name);
        rp_model_cfg_value_str(cfg, &rp_model_cfg_keys[i], value[n], sizeof value[n]);
    }
    snprintf(mark[n], sizeof mark[n], "{lo}");
    snprintf(value[n++], sizeof value[0], "%lld", (long long)lo);
    snprintf(mark[n], sizeof mark[n], "{hi}");
    snprintf(value[n++], sizeof value[0], "%lld", (long long)r->max);
    for (int i = 0; i < n; i++) marks[i] = mark[i], values[i] = value[i];
    return rp_error_marks(RP_ERR_ARG, r->why, marks, values, n);
}

static rp_status rule_rows(const rp_model_cfg *cfg, const rp_cfg_rule *r)
{
    return cfg->max_batch > r->max / cfg->seq_len ? refuse(r, cfg, 0) : RP_OK;
}

static rp_status rule_heads(const rp_model_cfg *cfg, const rp_cfg_rule *r)
{
    return cfg->d_model % cfg->heads != 0 ? refuse(r, cfg, 0) : RP_OK;
}

/* A relative kind with a projection of Transformer-XL's sinusoid needs an even d_model. */
static rp_status rule_sinusoid(const rp_model_cfg *cfg, const rp_cfg_rule *r)
{
    const rp_rel_desc *rel = rp_rel_of(rp_pe_mode_of(cfg->pe.mode)->rel);
    for (int i = 0; i < rel->nparams; i++)
        if (rel->params[i].use == RP_PARAM_PROJ_SIN && cfg->d_model % 2 != 0)
            return refuse(r, cfg, 0);
    return RP_OK;
}

/* rotate on a rotary pe only (pe.c's rule, with pe.h's message) */
static rp_status rule_rotate(const rp_model_cfg *cfg, const rp_cfg_rule *r)
{
    return rp_pe_rotate_check(cfg->pe.mode, cfg->pe.rotate, 0);
}

static rp_status rule_widths(const rp_model_cfg *cfg, const rp_cfg_rule *r)
{
    int rot = cfg->pe.rotate ? cfg->pe.rotate : rp_pe_mode_of(cfg->pe.mode)->rotate;
    int64_t d_rot[4];
    return pe_widths(cfg, rot, d_rot);
}

/* the relative kinds' limits (pe.c's one rule, with its message; the model is causal) */
static rp_status rule_buckets(const rp_model_cfg *cfg, const rp_cfg_rule *r)
{
    return rp_rel_cfg_check(cfg->pe.mode, &cfg->rel, 1);
}

static rp_status rule_freq(const rp_model_cfg *cfg, const rp_cfg_rule *r)
{
    rp_rope_freq f = rp_model_cfg_freq(cfg);
    return rp_rope_freq_check(&f);
}

static int pe_rotary(rp_pe pe) { return rp_pe_mode_of(pe)->rotary; }
static int pe_linear(rp_pe pe) { return rp_pe_mode_of(pe)->linear; }

const rp_cfg_rule rp_model_cfg_rules[] = {
    {.check = "rows", .run = rule_rows, .max = RP_I32_MAX, /* (2^31-1: max) */
     .why = "max_batch {max_batch} x seq_len {seq_len} exceeds 2^31-1 rows"},
    {.check = "heads", .run = rule_heads,
     .why = "d_model {d_model} is not divisible by heads {heads}"},
    {.check = "sinusoid", .run = rule_sinusoid,
     .why = "pe {pe} needs an even d_model (its sinusoid R), got {d_model}"},
    {.check = "rotate", .run = rule_rotate},
    {.check = "widths", .run = rule_widths},
    {.check = "buckets", .run = rule_buckets, .max = RP_I32_MAX,
     .why = RP_REL_DISTANCE_WHY},
    {.when = {"attention"}, .pe_holds = pe_linear, .why = "linear attention does not support pe {pe}"},
    {.check = "freq", .run = rule_freq},
    {.when = {"scaling", "xpos"}, .pe_holds = pe_rotary, .unset = {"attention"},
     .why = "scaling and xpos need" RP_PE_NEEDS_SOFTMAX},
    {.when = {"learn_freq"}, .unset = {"scaling"},
     .why = "learn_freq learns the frequencies themselves; scaling {scaling} does not apply to them "
            "(train at the longer length instead)"},
    {.when = {"attention"}, .unset = {"rotate", "fraction_q", "fraction_k", "fraction_o"},
     .why = "linear attention takes the mode's own rotate and fraction_qk, fraction_v (not rotate, "
            "fraction_q, fraction_k, fraction_o)"},
};
const int rp_model_cfg_nrules = (int)(sizeof rp_model_cfg_rules / sizeof rp_model_cfg_rules[0]);

/* 1 when one of the keys (NULL-terminated, at most max) differs from its default. */
static int any_set(const rp_model_cfg *cfg, const char *const *keys, int max)
{
    for (int i = 0; i < max && keys[i]; i++)
        if (!rp_model_cfg_is_default(cfg, rp_model_cfg_key(keys[i], (size_t)-1))) return 1;
    return 0;
}

rp_status rp_model_cfg_check(const rp_model_cfg *cfg)
{
    RP_TRY(rp_model_cfg_check_keys(cfg)); /* every field in its range, whatever the mode */
    for (int i = 0; i < rp_model_cfg_nrules; i++) {
        const rp_cfg_rule *r = &rp_model_cfg_rules[i];
        if (r->run) {
            RP_TRY(r->run(cfg, r));
            continue;
        }
        if (!any_set(cfg, r->when, 3)) continue;
        if ((!r->pe_holds || r->pe_holds(cfg->pe.mode)) && !any_set(cfg, r->unset, 5)) continue;
        char list[128], why[512];
        return rp_error(RP_ERR_ARG, "%s",
                        rp_model_cfg_fill(r->why, cfg, rp_model_cfg_rule_list(r, list, sizeof list),
                                          why, sizeof why));
    }
    return RP_OK;
}


rp_rope_freq rp_model_cfg_freq(const rp_model_cfg *cfg)
{
    rp_rope_freq f = cfg->freq;
    if (f.orig_len <= 0) f.orig_len = cfg->seq_len; /* 0: seq_len */
    return f;
}

/* The row whose field sits at offset at of rp_rope_freq, or -1. */
static int freq_key_at(size_t at)
{
    for (int i = 0; i < rp_model_cfg_nkeys; i++) {
        const rp_cfg_key *k = &rp_model_cfg_keys[i];
        if (rp_model_cfg_scope(k) == RP_CFG_SCOPE_FREQ && rp_model_cfg_freq_at(k) == at) return i;
    }
    return -1;
}

rp_status rp_model_cfg_check_shown(const rp_model_cfg *c, const char *const *shown,
                                   const int *given)
{
    for (int i = 0; i < rp_model_cfg_nkeys; i++)
        if (given[i] && shown[i])
            RP_TRY(rp_model_cfg_check_key_as(c, &rp_model_cfg_keys[i], 1, shown[i]));
    rp_rope_freq f = rp_model_cfg_freq(c);
    for (int r = 0; r < rp_freq_nrules; r++) {
        const rp_freq_rule *row = &rp_freq_rules[r];
        int a = freq_key_at(row->a_at), b = row->b ? freq_key_at(row->b_at) : -1;
        int named = (a >= 0 && given[a] && shown[a]) || (b >= 0 && given[b] && shown[b]);
        if (!named || !rp_freq_rule_applies(row, f.scaling) || rp_freq_rule_holds(row, &f))
            continue;
        return rp_freq_rule_error(row, &f, a >= 0 ? shown[a] : NULL, b >= 0 ? shown[b] : NULL);
    }
    return RP_OK;
}

rp_pe_scheme rp_model_cfg_scheme(const rp_model_cfg *cfg)
{
    const rp_pe_mode *mode = rp_pe_mode_of(cfg->pe.mode);
    int64_t d_rot[4];
    (void)pe_widths(cfg, cfg->pe.rotate ? cfg->pe.rotate : mode->rotate, d_rot);
    rp_pe_scheme s;
    (void)rp_pe_scheme_init(&s, &cfg->pe, d_rot);
    return s;
}

rp_status rp_model_cfg_check_freq(const rp_model_cfg *cfg, const rp_rope_freq *f)
{
    rp_pe_scheme pe = rp_model_cfg_scheme(cfg);
    int linear = cfg->attention == RP_ATTN_LINEAR;
    if (f->angles && cfg->learn_freq)
        return rp_error(RP_ERR_ARG, "angles are final and learn_freq learns frequencies (give "
                        "freq, the starting frequencies, instead)");
    if ((f->theta || f->angles) && (!pe.rotate || linear))
        return rp_pe_need_rotary(RP_MSG_FREQ, pe.pe, linear);
    return rp_pe_scheme_check_freq(&pe, f, cfg->seq_len - 1, cfg->seq_len - 1);
}

rp_status rp_model_cfg_check_positions(const rp_model_cfg *cfg, const rp_rope_freq *f,
                                       const int64_t *pos, int64_t rows)
{
    rp_pe_scheme pe = rp_model_cfg_scheme(cfg);
    int linear = cfg->attention == RP_ATTN_LINEAR;
    if (pos) {
        if (!pe.rotate || linear) return rp_pe_need_rotary(RP_MSG_POSITIONS, pe.pe, linear);
        if (rows < cfg->seq_len)
            return rp_error(RP_ERR_ARG, "positions hold %lld rows; the model's seq_len is %lld",
                            (long long)rows, (long long)cfg->seq_len);
    }
    /* attention's checks of a call over the whole window (no offsets) */
    int64_t T = cfg->seq_len, qlast = T - 1, klast = T - 1;
    rp_attn_cfg a;
    memset(&a, 0, sizeof a);
    a.freq = f, a.pos = pos, a.pos_rows = rows;
    if (pos) RP_TRY(rp_attention_check_positions(&a, T, T, &qlast, &klast));
    return rp_pe_scheme_check_freq(&pe, f, qlast, klast);
}
