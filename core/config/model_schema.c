/* The model config's schema (model_schema.h): the rows, the enum names they use, and the
 * functions that iterate them (defaults, range checks, what a key does for a mode, the checkpoint
 * version a config needs). */
#include "model_schema.h"

#include <math.h>
#include <stdio.h>
#include <string.h>


const char *const rp_norm_names[3] = {"pre", "post", NULL};
const char *const rp_act_names[3] = {"relu", "gelu", NULL};
const char *const rp_attn_names[3] = {"softmax", "linear", NULL};
const char *const rp_pairing_names[3] = {"half", "interleaved", NULL};
/* RP_CFG_BOOL's values, named as an enum's: messages and roper.config write them */
static const char *const bool_names[3] = {"false", "true", NULL};

/* Enum fields are read and written as ints. */
_Static_assert(sizeof(rp_norm) == sizeof(int) && sizeof(rp_act) == sizeof(int) &&
                   sizeof(rp_pe) == sizeof(int) && sizeof(rp_pairing) == sizeof(int) &&
                   sizeof(rp_attn_kind) == sizeof(int) &&
                   sizeof(rp_lin_placement) == sizeof(int) &&
                   sizeof(rp_rope_scaling) == sizeof(int) && sizeof(rp_yarn_ramp) == sizeof(int),
               "the config's enums are ints");

/* The checkpoint format version a pe needs: its row's (pe.h). */
static uint32_t pe_since(int64_t pe) { return (uint32_t)rp_pe_mode_of((rp_pe)pe)->since; }

/* The format version a scaling value needs: its row's in the scaling table (rope_freq.h). */
static uint32_t scaling_since(int64_t s) { return rp_scaling_of((rp_rope_scaling)s)->since; }

#define F(field) offsetof(rp_model_cfg, field)
#define I32 ((double)RP_I32_MAX)

const rp_cfg_key rp_model_cfg_keys[] = {
    {.name = "vocab", .type = RP_CFG_INT, .offset = F(vocab), .def = 0, .lo = 1, .hi = I32,
     .flags = RP_CFG_REQUIRED | RP_CFG_WEIGHTS, .json = RP_CFG_JSON_REQUIRED, .since = 1,
     .help = "the vocabulary size"},
    {.name = "d_model", .type = RP_CFG_INT, .offset = F(d_model), .def = 128, .lo = 1,
     .hi = (double)(RP_I32_MAX / 3), .flags = RP_CFG_WEIGHTS, .json = RP_CFG_JSON_REQUIRED,
     .since = 1, .help = "model width"},
    {.name = "heads", .type = RP_CFG_INT, .offset = F(heads), .def = 4, .lo = 1, .hi = I32,
     .flags = RP_CFG_WEIGHTS, .json = RP_CFG_JSON_REQUIRED, .since = 1, .help = "attention heads"},
    {.name = "layers", .type = RP_CFG_INT, .offset = F(layers), .def = 3, .lo = 1,
     .hi = RP_MAX_LAYERS, .flags = RP_CFG_WEIGHTS, .json = RP_CFG_JSON_REQUIRED, .since = 1,
     .help = "transformer blocks"},
    {.name = "d_ff", .type = RP_CFG_INT, .offset = F(d_ff), .def = 512, .lo = 1, .hi = I32,
     .flags = RP_CFG_WEIGHTS, .json = RP_CFG_JSON_REQUIRED, .since = 1,
     .help = "feed-forward width"},
    {.name = "seq_len", .type = RP_CFG_INT, .offset = F(seq_len), .def = 512, .lo = 1,
     .hi = I32, .json = RP_CFG_JSON_REQUIRED, .since = 1,
     .help = "the longest sequence (tokens per row)"},
    {.name = "max_batch", .type = RP_CFG_INT, .offset = F(max_batch), .def = 16, .lo = 1,
     .hi = I32, .json = RP_CFG_JSON_ALWAYS, .since = 1, .help = "the most rows per call"},
    {.name = "norm", .type = RP_CFG_ENUM, .offset = F(norm), .def = RP_NORM_PRE,
     .names = rp_norm_names, .flags = RP_CFG_WEIGHTS, .json = RP_CFG_JSON_REQUIRED, .since = 1,
     .help = "LayerNorm placement"},
    {.name = "activation", .type = RP_CFG_ENUM, .offset = F(act), .def = RP_ACT_RELU,
     .names = rp_act_names, .flags = RP_CFG_WEIGHTS, .json = RP_CFG_JSON_REQUIRED, .since = 1,
     .help = "feed-forward activation"},
    {.name = "dropout", .type = RP_CFG_NUM, .offset = F(dropout), .def = 0, .lo = 0, .hi = 1,
     .flags = RP_CFG_HI_OPEN, .json = RP_CFG_JSON_ALWAYS, .since = 1,
     .help = "dropout on the residual branches"},
    {.name = "pe", .type = RP_CFG_ENUM, .offset = F(pe.mode), .def = RP_PE_ROPE,
     .names = rp_pe_names,
     .flags = RP_CFG_WEIGHTS, .json = RP_CFG_JSON_REQUIRED, .linear = 1, .since = 1,
     .value_since = pe_since,
     .help = "positional encoding"},
    {.name = "fraction_qk", .type = RP_CFG_NUM, .offset = F(pe.fraction_qk), .def = 1, .lo = 0,
     .hi = 1, .flags = RP_CFG_LO_OPEN | RP_CFG_WEIGHTS, .json = RP_CFG_JSON_REQUIRED,
     .use = RP_CFG_PLACEMENT, .use_arg = RP_ROT_Q | RP_ROT_K, .linear = 6, .since = 1,
     .help = "rotated share of d_k for q and k (rope modes)"},
    {.name = "fraction_v", .type = RP_CFG_NUM, .offset = F(pe.fraction_v), .def = 1, .lo = 0,
     .hi = 1, .flags = RP_CFG_LO_OPEN | RP_CFG_WEIGHTS, .json = RP_CFG_JSON_REQUIRED,
     .use = RP_CFG_PLACEMENT, .use_arg = RP_ROT_V | RP_ROT_O, .linear = 7, .since = 1,
     .help = "rotated share of d_k for v and the output (roper modes)"},
    {.name = "base", .type = RP_CFG_NUM, .offset = F(pe.base), .def = RP_ROPE_BASE, .lo = 0,
     .hi = HUGE_VAL, .flags = RP_CFG_LO_OPEN | RP_CFG_WEIGHTS, .json = RP_CFG_JSON_REQUIRED,
     .use = RP_CFG_ROTARY, .linear = 4, .since = 1, .help = "RoPE base"},
    {.name = "pairing", .type = RP_CFG_ENUM, .offset = F(pe.pairing), .def = RP_PAIR_HALF,
     .names = rp_pairing_names, .flags = RP_CFG_WEIGHTS, .json = RP_CFG_JSON_REQUIRED,
     .use = RP_CFG_ROTARY, .linear = 5, .since = 1, .help = "RoPE pairing"},
    {.name = "seed", .type = RP_CFG_SEED, .offset = F(seed), .def = 0,
     .json = RP_CFG_JSON_ALWAYS, .since = 1, .help = "initialisation and the dropout stream"},
    {.name = "attention", .type = RP_CFG_ENUM, .offset = F(attention), .def = RP_ATTN_SOFTMAX,
     .names = rp_attn_names, .flags = RP_CFG_WEIGHTS, .json = RP_CFG_JSON_REQUIRED, .since = 1,
     .ck_flag = 2,
     .help = "attention kind (linear: causal linear attention, phi = elu + 1)"},
    {.name = "linear_rope", .type = RP_CFG_ENUM, .offset = F(linear_rope), .def = RP_LIN_AFTER,
     .names = rp_lin_placement_names, .flags = RP_CFG_WEIGHTS, .json = RP_CFG_JSON_REQUIRED,
     .use = RP_CFG_LINEAR_ROTARY, .linear = 2, .since = 1, .ck_flag = 4,
     .help = "linear attention: RoPE after phi (RoFormer eq. 19) or before it"},
    {.name = "rotate", .type = RP_CFG_ROTATE, .offset = F(pe.rotate), .def = 0,
     .use = RP_CFG_ROTARY, .since = 2,
     .help = "rotary pe: the placements rotated, letters of qkvo (the mode's own: rope qk, "
             "roper qkvo)"},
    {.name = "fraction_q", .type = RP_CFG_NUM, .offset = F(pe.fraction_q), .def = 0, .lo = 0,
     .hi = 1, .flags = RP_CFG_LO_OPEN | RP_CFG_UNSET0 | RP_CFG_SHOW_SET,
     .unset_as = "fraction_qk",
     .use = RP_CFG_PLACEMENT, .use_arg = RP_ROT_Q, .since = 2,
     .help = "rotated share of d_k for q (0: fraction_qk)"},
    {.name = "fraction_k", .type = RP_CFG_NUM, .offset = F(pe.fraction_k), .def = 0, .lo = 0,
     .hi = 1, .flags = RP_CFG_LO_OPEN | RP_CFG_UNSET0 | RP_CFG_SHOW_SET,
     .unset_as = "fraction_qk",
     .use = RP_CFG_PLACEMENT, .use_arg = RP_ROT_K, .since = 2,
     .help = "rotated share of d_k for k (0: fraction_qk)"},
    {.name = "fraction_o", .type = RP_CFG_NUM, .offset = F(pe.fraction_o), .def = 0, .lo = 0,
     .hi = 1, .flags = RP_CFG_LO_OPEN | RP_CFG_UNSET0 | RP_CFG_SHOW_SET,
     .unset_as = "fraction_v",
     .use = RP_CFG_PLACEMENT, .use_arg = RP_ROT_O, .since = 2,
     .help = "rotated share of d_k for the output (0: fraction_v)"},
    {.name = "rel_clip", .type = RP_CFG_INT, .offset = F(rel.clip), .def = 16, .lo = 1,
     .hi = RP_REL_MAX_CLIP, .json = RP_CFG_JSON_APPLIES, .use = RP_CFG_RELATIVE,
     .use_arg = RP_USES_CLIP, .since = 2,
     .help = "shaw, deberta: relative distances clipped to [-k, k]"},
    {.name = "rel_buckets", .type = RP_CFG_INT, .offset = F(rel.buckets), .def = 32, .lo = 2,
     .hi = RP_REL_MAX_BUCKETS, .json = RP_CFG_JSON_APPLIES, .use = RP_CFG_RELATIVE,
     .use_arg = RP_USES_BUCKETS, .since = 2, .help = "t5: relative-distance buckets"},
    {.name = "rel_max_distance", .type = RP_CFG_INT, .offset = F(rel.max_distance), .def = 128,
     .lo = 1, .hi = I32, .json = RP_CFG_JSON_APPLIES, .use = RP_CFG_RELATIVE,
     .use_arg = RP_USES_BUCKETS, .since = 2,
     .help = "t5: the distance where the last bucket starts"},
    {.name = "scaling", .type = RP_CFG_ENUM, .def = RP_SCALING_NONE,
     .names = rp_scaling_names, .flags = RP_CFG_SHOW_SET, .use = RP_CFG_FREQ, .since = 3,
     .value_since = scaling_since, RP_CFG_FREQ_OF(scaling),
     .help = "rotary pe, softmax attention: context extension of the positions (PI, NTK-aware, "
             "YaRN, dynamic NTK, Llama 3)"},
    {.name = "scaling_factor", .type = RP_CFG_NUM, .def = 1,
     .flags = RP_CFG_FREQ_RANGE, .json = RP_CFG_JSON_APPLIES,
     .use = RP_CFG_SCALED, .since = 3, RP_CFG_FREQ_OF(factor),
     .help = "scaling: the extension factor (> 0)"},
    {.name = "orig_len", .type = RP_CFG_INT, .def = 0, .lo = 0, .hi = I32,
     .flags = RP_CFG_SHOW_SET, .use = RP_CFG_SCALINGS, .use_arg = RP_READS_LEN, .since = 3,
     RP_CFG_FREQ_OF(orig_len),
     .help = "scaling yarn, dynamic, llama3: the original context length (0: seq_len)"},
    {.name = "yarn_alpha", .type = RP_CFG_NUM, .def = 1.0 /* (the paper's) */,
     .flags = RP_CFG_FREQ_RANGE, .use = RP_CFG_SCALINGS, .use_arg = RP_READS_YARN, .since = 3,
     RP_CFG_FREQ_OF(yarn_alpha),
     .help = "scaling yarn: alpha (rotations below it are interpolated)"},
    {.name = "yarn_beta", .type = RP_CFG_NUM, .def = 32.0 /* (the paper's) */,
     .lo = 0, .hi = HUGE_VAL, .use = RP_CFG_SCALINGS, .use_arg = RP_READS_YARN, .since = 3,
     RP_CFG_FREQ_OF(yarn_beta), .help = "scaling yarn: beta (rotations above it are kept)"},
    {.name = "xpos", .type = RP_CFG_NUM, .def = 0, .flags = RP_CFG_FREQ_RANGE | RP_CFG_SHOW_SET,
     .use = RP_CFG_FREQ, .since = 3, RP_CFG_FREQ_OF(xpos),
     .help = "rotary pe: xPos decay gamma (0: off; e.g. 0.4)"},
    {.name = "xpos_scale_base", .type = RP_CFG_NUM, .def = 512.0 /* (the paper's) */,
     .flags = RP_CFG_FREQ_RANGE, .use = RP_CFG_XPOS, .since = 3, RP_CFG_FREQ_OF(xpos_scale_base),
     .help = "xpos: the scale base"},
    {.name = "yarn_ramp", .type = RP_CFG_ENUM, .def = RP_YARN_RAMP_ROTATIONS,
     .names = rp_yarn_ramp_names, .use = RP_CFG_SCALINGS,
     .use_arg = RP_READS_YARN, .since = 4, RP_CFG_FREQ_OF(yarn_ramp),
     .help = "scaling yarn: the ramp, linear in rotations (the paper) or in the pair index "
             "(Hugging Face: dims, dims_exact)"},
    {.name = "low_freq_factor", .type = RP_CFG_NUM, .def = 1.0 /* (Meta's Llama 3.1 config) */,
     .flags = RP_CFG_FREQ_RANGE, .use = RP_CFG_SCALINGS,
     .use_arg = RP_READS_LLAMA3, .since = 4, RP_CFG_FREQ_OF(low_freq_factor),
     .help = "scaling llama3: rotations per orig_len below which pairs are interpolated"},
    {.name = "high_freq_factor", .type = RP_CFG_NUM, .def = 4.0 /* (Meta's) */, .lo = 0,
     .hi = HUGE_VAL, .use = RP_CFG_SCALINGS,
     .use_arg = RP_READS_LLAMA3, .since = 4, RP_CFG_FREQ_OF(high_freq_factor),
     .help = "scaling llama3: rotations per orig_len above which pairs are kept"},
    {.name = "attention_factor", .type = RP_CFG_NUM, .def = 0,
     .flags = RP_CFG_FREQ_RANGE, .use = RP_CFG_SCALED, .since = 4,
     RP_CFG_FREQ_OF(attention_factor),
     .help = "a scaling: the scores times its square (0: the scaling's own; yarn 0.1 ln s + 1)"},
    {.name = "learn_freq", .type = RP_CFG_BOOL, .offset = F(learn_freq), .def = 0,
     .flags = RP_CFG_WEIGHTS | RP_CFG_SHOW_SET, .use = RP_CFG_FREQ, .since = 5,
     .help = "rotary pe: train the frequencies (theta_i, or axes mixed's matrix) as parameters"},
    {.name = "tie_embeddings", .type = RP_CFG_BOOL, .offset = F(tie_embeddings), .def = 0,
     .flags = RP_CFG_WEIGHTS | RP_CFG_SHOW_SET, .since = 6,
     .help = "the output layer's weight is the token embedding (tied, as GPT-2; its bias stays "
             "its own)"},
};
const int rp_model_cfg_nkeys = (int)(sizeof rp_model_cfg_keys / sizeof rp_model_cfg_keys[0]);
_Static_assert(sizeof rp_model_cfg_keys / sizeof rp_model_cfg_keys[0] <= RP_CFG_MAX_KEYS,
               "more rows than RP_CFG_MAX_KEYS");

#undef F
#undef I32

const rp_cfg_key *rp_model_cfg_key(const char *name, size_t len)
{
    if (!name) return NULL;
    if (len == (size_t)-1) len = strlen(name);
    for (int i = 0; i < rp_model_cfg_nkeys; i++) {
        const rp_cfg_key *k = &rp_model_cfg_keys[i];
        if (strlen(k->name) == len && memcmp(k->name, name, len) == 0) return k;
    }
    return NULL;
}

rp_cfg_scope rp_model_cfg_scope(const rp_cfg_key *k)
{
    static const struct {
        size_t at, size;
        rp_cfg_scope scope;
    } parts[] = {
        {offsetof(rp_model_cfg, pe), sizeof(rp_pe_cfg), RP_CFG_SCOPE_PE},
        {offsetof(rp_model_cfg, rel), sizeof(rp_rel_cfg), RP_CFG_SCOPE_REL},
        {offsetof(rp_model_cfg, freq), sizeof(rp_rope_freq), RP_CFG_SCOPE_FREQ},
    };
    for (size_t i = 0; i < sizeof parts / sizeof parts[0]; i++)
        if (k->offset >= parts[i].at && k->offset < parts[i].at + parts[i].size)
            return parts[i].scope;
    return RP_CFG_SCOPE_MODEL;
}

size_t rp_model_cfg_freq_at(const rp_cfg_key *k)
{
    return k->offset - offsetof(rp_model_cfg, freq);
}

/* ---- field access ------------------------------------------------------------------------- */

static const void *field(const rp_model_cfg *c, const rp_cfg_key *k)
{
    return (const char *)c + k->offset;
}

int64_t rp_model_cfg_get_int(const rp_model_cfg *c, const rp_cfg_key *k)
{
    switch (k->type) {
    case RP_CFG_INT: {
        int64_t v;
        memcpy(&v, field(c, k), sizeof v);
        return v;
    }
    case RP_CFG_SEED: {
        uint64_t v;
        memcpy(&v, field(c, k), sizeof v);
        return (int64_t)v;
    }
    case RP_CFG_NUM: {
        double v;
        memcpy(&v, field(c, k), sizeof v);
        return (int64_t)v;
    }
    default: {
        int v;
        memcpy(&v, field(c, k), sizeof v);
        return v;
    }
    }
}

double rp_model_cfg_get_num(const rp_model_cfg *c, const rp_cfg_key *k)
{
    if (k->type == RP_CFG_NUM) {
        double v;
        memcpy(&v, field(c, k), sizeof v);
        return v;
    }
    if (k->type == RP_CFG_SEED) return (double)(uint64_t)rp_model_cfg_get_int(c, k);
    return (double)rp_model_cfg_get_int(c, k);
}

void rp_model_cfg_set_int(rp_model_cfg *c, const rp_cfg_key *k, int64_t v)
{
    void *at = (char *)c + k->offset;
    if (k->type == RP_CFG_INT || k->type == RP_CFG_SEED) {
        memcpy(at, &v, sizeof v); /* a seed keeps the bits */
    } else if (k->type == RP_CFG_NUM) {
        double d = (double)v;
        memcpy(at, &d, sizeof d);
    } else {
        int i = (int)v;
        memcpy(at, &i, sizeof i);
    }
}

void rp_model_cfg_set_num(rp_model_cfg *c, const rp_cfg_key *k, double v)
{
    if (k->type == RP_CFG_NUM) memcpy((char *)c + k->offset, &v, sizeof v);
    else if (k->type == RP_CFG_SEED) rp_model_cfg_set_int(c, k, (int64_t)(uint64_t)v);
    else rp_model_cfg_set_int(c, k, (int64_t)v);
}

int rp_model_cfg_is_default(const rp_model_cfg *c, const rp_cfg_key *k)
{
    if (k->type == RP_CFG_NUM) return rp_model_cfg_get_num(c, k) == k->def;
    if (k->type == RP_CFG_SEED) return (uint64_t)rp_model_cfg_get_int(c, k) == (uint64_t)k->def;
    return rp_model_cfg_get_int(c, k) == (int64_t)k->def;
}

rp_model_cfg rp_model_cfg_default(int64_t vocab)
{
    rp_model_cfg c;
    memset(&c, 0, sizeof c);
    for (int i = 0; i < rp_model_cfg_nkeys; i++)
        rp_model_cfg_set_num(&c, &rp_model_cfg_keys[i], rp_model_cfg_keys[i].def);
    c.vocab = vocab;
    return c;
}

rp_rope_freq rp_rope_freq_default(void) { return rp_model_cfg_default(0).freq; }

int rp_rope_freq_equal(const rp_rope_freq *a, const rp_rope_freq *b)
{
    rp_model_cfg ca = rp_model_cfg_default(1), cb = ca; /* a rotary pe with softmax attention */
    char why[256];
    ca.freq = a ? *a : ca.freq, cb.freq = b ? *b : cb.freq;
    const rp_rope_freq *pa = &ca.freq, *pb = &cb.freq;
    if ((int)pa->scaling < 0 || pa->scaling >= RP_SCALING_COUNT) return 0;
    for (int i = 0; i < rp_model_cfg_nkeys; i++) { /* the rows that do something for a */
        const rp_cfg_key *k = &rp_model_cfg_keys[i];
        if (rp_model_cfg_scope(k) != RP_CFG_SCOPE_FREQ ||
            (rp_model_cfg_unused(&ca, k, why, sizeof why) &&
             rp_model_cfg_unused(&cb, k, why, sizeof why)))
            continue;
        if (k->type == RP_CFG_NUM ? rp_model_cfg_get_num(&ca, k) != rp_model_cfg_get_num(&cb, k)
                                  : rp_model_cfg_get_int(&ca, k) != rp_model_cfg_get_int(&cb, k))
            return 0;
    }
    if (!pa->theta != !pb->theta || !pa->angles != !pb->angles) return 0;
    if (pa->theta && (pa->n_theta != pb->n_theta ||
                      memcmp(pa->theta, pb->theta, (size_t)pa->n_theta * sizeof(double))))
        return 0;
    if (pa->angles && (pa->rows != pb->rows || pa->n_angles != pb->n_angles ||
                       memcmp(pa->angles, pb->angles,
                              (size_t)(pa->rows * pa->n_angles) * sizeof(double))))
        return 0;
    const rp_rope_axes *xa = &pa->axes, *xb = &pb->axes;
    if (rp_rope_freq_axes(pa) != rp_rope_freq_axes(pb) || xa->map != xb->map ||
        memcmp(xa->sections, xb->sections, sizeof xa->sections) || !xa->mix != !xb->mix)
        return 0;
    if (xa->mix && (xa->n_mix != xb->n_mix ||
                    memcmp(xa->mix, xb->mix, (size_t)(xa->n * xa->n_mix) * sizeof(double))))
        return 0;
    return 1;
}

const char *const *rp_model_cfg_names(const rp_cfg_key *k)
{
    return k->type == RP_CFG_BOOL ? bool_names : k->type == RP_CFG_ENUM ? k->names : NULL;
}

/* The number of names of an enum or bool row. */
static int name_count(const rp_cfg_key *k)
{
    int n = 0;
    while (rp_model_cfg_names(k)[n]) n++;
    return n;
}

const char *rp_model_cfg_value_str(const rp_model_cfg *c, const rp_cfg_key *k, char *buf,
                                   size_t n)
{
    int64_t v = rp_model_cfg_get_int(c, k);
    char rot[5];
    switch (k->type) {
    case RP_CFG_INT: snprintf(buf, n, "%lld", (long long)v); break;
    case RP_CFG_SEED: snprintf(buf, n, "%llu", (unsigned long long)(uint64_t)v); break;
    case RP_CFG_NUM: snprintf(buf, n, "%g", rp_model_cfg_get_num(c, k)); break;
    case RP_CFG_ENUM:
    case RP_CFG_BOOL:
        if (v >= 0 && v < name_count(k)) snprintf(buf, n, "%s", rp_model_cfg_names(k)[v]);
        else snprintf(buf, n, "%lld", (long long)v);
        break;
    case RP_CFG_ROTATE:
        if (v > 0 && !(v & ~RP_ROT_ALL)) snprintf(buf, n, "%s", rp_rotate_name((int)v, rot));
        else snprintf(buf, n, "%lld", (long long)v);
        break;
    }
    return buf;
}

/* ---- ranges ------------------------------------------------------------------------------- */

rp_cfg_range rp_model_cfg_range(const rp_cfg_key *k)
{
    rp_cfg_range r = {k->lo, k->hi, (k->flags & RP_CFG_LO_OPEN) != 0,
                      (k->flags & RP_CFG_HI_OPEN) != 0};
    if (k->flags & RP_CFG_FREQ_RANGE) {
        const rp_freq_rule *b = rp_model_cfg_scope(k) == RP_CFG_SCOPE_FREQ
                                    ? rp_freq_rule_bound(rp_model_cfg_freq_at(k))
                                    : NULL;
        RP_ASSERT(b); /* (test_model_schema: every such row has its bound) */
        r.lo = b->lo, r.hi = HUGE_VAL, r.lo_open = b->lo_open, r.hi_open = 0;
    }
    return r;
}

/* rp_model_cfg_check_key's messages, by rp_cfg_type (a number's by whether its hi is finite):
 * {name}, {value} (rp_model_cfg_value_str), {lo} and {hi} (%lld for an int, else %g), {from} and
 * {to} ("(" or "[", ")" or "]"), {op} (">" or ">="), {list} (the names with their values) */
static const char *const range_msgs[] = {
    [RP_CFG_INT] = "{name} {value} must be in {lo}..{hi}",
    [RP_CFG_NUM] = "{name} {value} must be in {from}{lo}, {hi}{to}",
    [RP_CFG_ENUM] = "{name} {value} is not {list}",
    [RP_CFG_SEED] = NULL,
    [RP_CFG_ROTATE] = "{name} {value} is not a subset of qkvo",
    [RP_CFG_BOOL] = "{name} {value} is not {list}",
};
static const char *const above_msg = "{name} must be a finite number {op} {lo}, got {value}";

/* rp_model_cfg_range_msg naming the key name (NULL: k's own). */
static const char *range_msg_as(const rp_model_cfg *c, const rp_cfg_key *k, const char *name,
                                char *buf, size_t n)
{
    static const char *const marks[] = {"{name}", "{value}", "{lo}", "{hi}",
                                        "{from}", "{to}",    "{op}", "{list}"};
    const char *t = range_msgs[k->type];
    if (!t || !n) return NULL;
    rp_cfg_range r = rp_model_cfg_range(k);
    char val[64], lo[32], hi[32], list[256] = "";
    if (k->type == RP_CFG_INT) {
        snprintf(lo, sizeof lo, "%lld", (long long)r.lo);
        snprintf(hi, sizeof hi, "%lld", (long long)r.hi);
    } else {
        snprintf(lo, sizeof lo, "%g", r.lo);
        snprintf(hi, sizeof hi, "%g", r.hi);
    }
    if (k->type == RP_CFG_NUM && isinf(r.hi)) t = above_msg;
    if (k->type == RP_CFG_ENUM || k->type == RP_CFG_BOOL)
        rp_join_names(list, sizeof list, rp_model_cfg_names(k), name_count(k), 1);
    const char *values[] = {
        name ? name : k->name, c ? rp_model_cfg_value_str(c, k, val, sizeof val) : NULL, lo, hi,
        r.lo_open ? "(" : "[", r.hi_open ? ")" : "]", r.lo_open ? ">" : ">=", list};
    return rp_fill_marks(buf, n, t, marks, values, 8);
}

const char *rp_model_cfg_range_msg(const rp_model_cfg *c, const rp_cfg_key *k, char *buf, size_t n)
{
    return range_msg_as(c, k, NULL, buf, n);
}

rp_status rp_model_cfg_check_key(const rp_model_cfg *c, const rp_cfg_key *k, int given)
{
    return rp_model_cfg_check_key_as(c, k, given, NULL);
}

rp_status rp_model_cfg_check_key_as(const rp_model_cfg *c, const rp_cfg_key *k, int given,
                                    const char *name)
{
    int64_t v = rp_model_cfg_get_int(c, k);
    int ok = 1;
    switch (k->type) {
    case RP_CFG_INT: ok = v >= (int64_t)k->lo && v <= (int64_t)k->hi; break;
    case RP_CFG_NUM: {
        double x = rp_model_cfg_get_num(c, k);
        if ((k->flags & RP_CFG_UNSET0) && x == 0.0 && !given) return RP_OK;
        rp_cfg_range r = rp_model_cfg_range(k);
        int lo_ok = r.lo_open ? x > r.lo : x >= r.lo;
        int hi_ok = r.hi_open ? x < r.hi : x <= r.hi;
        ok = lo_ok && hi_ok && isfinite(x);
        break;
    }
    case RP_CFG_ENUM:
    case RP_CFG_BOOL: ok = v >= 0 && v < name_count(k); break;
    case RP_CFG_ROTATE: ok = !(v & ~(int64_t)RP_ROT_ALL); break;
    case RP_CFG_SEED: break;
    }
    if (ok) return RP_OK;
    char msg[512];
    return rp_error(RP_ERR_ARG, "%s", range_msg_as(c, k, name, msg, sizeof msg));
}


rp_status rp_model_cfg_check_keys(const rp_model_cfg *c)
{
    if (!c) return rp_error(RP_ERR_ARG, "model config is NULL");
    for (int i = 0; i < rp_model_cfg_nkeys; i++)
        RP_TRY(rp_model_cfg_check_key(c, &rp_model_cfg_keys[i], 0));
    return RP_OK;
}

/* ---- what a key does for a mode: the needs ----------------------------------------------- */

/* "q or k": the placements of a mask. */
static const char *placements(char *buf, size_t n, int mask)
{
    static const char letters[4] = {'q', 'k', 'v', 'o'};
    size_t at = 0;
    buf[0] = '\0';
    for (int i = 0; i < 4; i++)
        if (mask & (1 << i) && at < n) {
            int w = snprintf(buf + at, n - at, "%s%c", at ? " or " : "", letters[i]);
            if (w > 0) at += (size_t)w;
        }
    return buf;
}

/* "yarn, dynamic or llama3": the scalings that read one of the parameters in reads (RP_READS_*
 * bits), in code order. */
static const char *scaling_list(char *buf, size_t n, int reads)
{
    const char *names[RP_SCALING_COUNT];
    int count = 0;
    for (int s = 0; s < RP_SCALING_COUNT; s++)
        if (rp_scaling_of((rp_rope_scaling)s)->reads & reads) names[count++] = rp_scaling_names[s];
    return rp_join_names(buf, n, names, count, 0);
}

/* The needs' tests: value v of their fact lets row k do something. */
static int reads_rel(const rp_cfg_key *k, int pe)
{
    return (rp_rel_of(rp_pe_mode_of((rp_pe)pe)->rel)->uses & k->use_arg) != 0;
}
static int is_linear(const rp_cfg_key *k, int attn) { return (void)k, attn == RP_ATTN_LINEAR; }
static int is_softmax(const rp_cfg_key *k, int attn) { return (void)k, attn != RP_ATTN_LINEAR; }
static int is_rotary(const rp_cfg_key *k, int pe)
{
    return (void)k, rp_pe_mode_of((rp_pe)pe)->rotary;
}
static int rotates(const rp_cfg_key *k, int rot) { return (rot & k->use_arg) != 0; }
static int is_scaled(const rp_cfg_key *k, int s) { return (void)k, s != RP_SCALING_NONE; }
static int reads_scaling(const rp_cfg_key *k, int s)
{
    return (rp_scaling_of((rp_rope_scaling)s)->reads & k->use_arg) != 0;
}
static int is_on(const rp_cfg_key *k, int on) { return (void)k, on; }

/* The needs' lists. */
static const char *pes_reading(const rp_cfg_key *k, char *buf, size_t n)
{
    return rp_pe_list(buf, n, 0, 0, k->use_arg);
}
static const char *rotary_pes(const rp_cfg_key *k, char *buf, size_t n)
{
    return (void)k, rp_pe_list(buf, n, 1, 0, 0);
}
static const char *linear_rotary_pes(const rp_cfg_key *k, char *buf, size_t n)
{
    return (void)k, rp_pe_list(buf, n, 1, 1, 0);
}
static const char *rotated(const rp_cfg_key *k, char *buf, size_t n)
{
    return placements(buf, n, k->use_arg);
}
static const char *scaled(const rp_cfg_key *k, char *buf, size_t n)
{
    return (void)k, scaling_list(buf, n, RP_READS_FACTOR);
}
static const char *scalings_reading(const rp_cfg_key *k, char *buf, size_t n)
{
    return scaling_list(buf, n, k->use_arg);
}

#define U(use) (1 << (use))
/* the uses of the frequency scheme */
#define FREQ_USES (U(RP_CFG_FREQ) | U(RP_CFG_SCALED) | U(RP_CFG_SCALINGS) | U(RP_CFG_XPOS))

/* In order: a row's first need that does not hold says why its key does nothing. */
const rp_cfg_need rp_model_cfg_needs[] = {
    {U(RP_CFG_RELATIVE), RP_FACT_PE, reads_rel, pes_reading,
     "for pe {pe}: it applies to pe {list}"},
    {U(RP_CFG_LINEAR_ROTARY), RP_FACT_ATTENTION, is_linear, linear_rotary_pes,
     "with softmax attention: it applies to linear attention with pe {list}"},
    {U(RP_CFG_LINEAR_ROTARY), RP_FACT_PE, is_rotary, linear_rotary_pes,
     "for pe {pe}: it applies to linear attention with pe {list}"},
    {U(RP_CFG_ROTARY) | U(RP_CFG_PLACEMENT) | FREQ_USES, RP_FACT_PE, is_rotary, rotary_pes,
     "for pe {pe}: it applies to the rotary modes ({list})"},
    {U(RP_CFG_PLACEMENT), RP_FACT_ROTATE, rotates, rotated,
     "for pe {pe} rotating {rotate}: it applies when {list} is rotated"},
    {FREQ_USES, RP_FACT_ATTENTION, is_softmax, NULL,
     "with linear attention: it applies to softmax attention"},
    {U(RP_CFG_SCALED), RP_FACT_SCALING, is_scaled, scaled,
     "with scaling {scaling}: it applies to the scalings ({list})"},
    {U(RP_CFG_SCALINGS), RP_FACT_SCALING, reads_scaling, scalings_reading,
     "with scaling {scaling}: it applies to scaling {list}"},
    {U(RP_CFG_XPOS), RP_FACT_XPOS, is_on, NULL, "with xpos 0: it applies when xpos > 0 (xPos on)"},
};
const int rp_model_cfg_nneeds = (int)(sizeof rp_model_cfg_needs / sizeof rp_model_cfg_needs[0]);

#undef U
#undef FREQ_USES

static const char *const fact_keys[RP_FACT_COUNT] = {"pe", "attention", "rotate", "scaling",
                                                     "xpos"};

const char *rp_model_cfg_fact_key(rp_cfg_fact f)
{
    return (int)f >= 0 && f < RP_FACT_COUNT ? fact_keys[f] : "?";
}

int rp_model_cfg_fact(const rp_model_cfg *c, rp_cfg_fact f)
{
    switch (f) {
    case RP_FACT_PE: return (int)c->pe.mode;
    case RP_FACT_ATTENTION: return (int)c->attention;
    case RP_FACT_ROTATE:
        return c->pe.rotate && c->attention != RP_ATTN_LINEAR ? c->pe.rotate
                                                           : rp_pe_mode_of(c->pe.mode)->rotate;
    case RP_FACT_SCALING: return (int)c->freq.scaling;
    case RP_FACT_XPOS: return c->freq.xpos > 0.0;
    case RP_FACT_COUNT: break;
    }
    return 0;
}

const char *rp_model_cfg_fact_name(rp_cfg_fact f, int v, char *buf, size_t n)
{
    static const char *const on[3] = {"off", "on", NULL};
    const char *const *names = f == RP_FACT_PE          ? rp_pe_names
                               : f == RP_FACT_ATTENTION ? rp_attn_names
                               : f == RP_FACT_SCALING   ? rp_scaling_names
                               : f == RP_FACT_XPOS      ? on
                                                        : NULL;
    char rot[5];
    if (v < 0 || !n) return NULL;
    if (f == RP_FACT_ROTATE) {
        if (v > RP_ROT_ALL) return NULL;
        snprintf(buf, n, "%s", rp_rotate_name(v, rot));
        return buf;
    }
    if (!names) return NULL;
    for (int i = 0; i < v; i++)
        if (!names[i]) return NULL;
    if (!names[v]) return NULL;
    snprintf(buf, n, "%s", names[v]);
    return buf;
}

int rp_model_cfg_need_applies(const rp_cfg_need *r, const rp_cfg_key *k)
{
    return (r->uses >> k->use & 1) != 0;
}

const char *rp_model_cfg_fill(const char *t, const rp_model_cfg *c, const char *list, char *buf,
                              size_t n)
{
    static const char *const marks[] = {"{pe}", "{rotate}", "{scaling}", "{linear}", "{list}"};
    static const rp_cfg_fact facts[] = {RP_FACT_PE, RP_FACT_ROTATE, RP_FACT_SCALING};
    char value[3][160];
    const char *values[5] = {NULL, NULL, NULL, NULL, list ? list : ""};
    if (c) { /* (without c the config's marks stay) */
        for (int i = 0; i < 3; i++) {
            values[i] = rp_model_cfg_fact_name(facts[i], rp_model_cfg_fact(c, facts[i]), value[i],
                                               sizeof value[i]);
            if (!values[i]) values[i] = "?";
        }
        values[3] = c->attention == RP_ATTN_LINEAR ? RP_PE_WITH_LINEAR : "";
    }
    return rp_fill_marks(buf, n, t, marks, values, 5);
}

const char *rp_model_cfg_need_why(const rp_cfg_need *r, const rp_cfg_key *k,
                                  const rp_model_cfg *c, char *buf, size_t n)
{
    char list[160];
    return rp_model_cfg_fill(r->why, c, r->list ? r->list(k, list, sizeof list) : NULL, buf, n);
}

const char *rp_model_cfg_rule_list(const rp_cfg_rule *r, char *buf, size_t n)
{
    const char *names[RP_PE_COUNT];
    int count = 0;
    for (int p = 0; p < (int)RP_PE_COUNT; p++)
        if (r->pe_holds && r->pe_holds((rp_pe)p)) names[count++] = rp_pe_names[p];
    return rp_join_names(buf, n, names, count, 0);
}

const char *rp_model_cfg_unused(const rp_model_cfg *c, const rp_cfg_key *k, char *why, size_t n)
{
    for (int i = 0; i < rp_model_cfg_nneeds; i++) {
        const rp_cfg_need *r = &rp_model_cfg_needs[i];
        if (!rp_model_cfg_need_applies(r, k) ||
            r->holds(k, rp_model_cfg_fact(c, r->fact)))
            continue;
        return rp_model_cfg_need_why(r, k, c, why, n);
    }
    return NULL;
}

rp_status rp_model_cfg_check_used(const rp_model_cfg *c)
{
    char why[256], val[64];
    for (int i = 0; i < rp_model_cfg_nkeys; i++) {
        const rp_cfg_key *k = &rp_model_cfg_keys[i];
        if (rp_model_cfg_is_default(c, k) || !rp_model_cfg_unused(c, k, why, sizeof why)) continue;
        return rp_error(RP_ERR_ARG, "%s %s does nothing %s", k->name,
                        rp_model_cfg_value_str(c, k, val, sizeof val), why);
    }
    return RP_OK;
}

void rp_model_cfg_normalise(rp_model_cfg *c)
{
    const rp_pe_mode *mode = rp_pe_mode_of(c->pe.mode);
    if (mode && c->pe.rotate == mode->rotate) c->pe.rotate = 0;
    for (int i = 0; i < rp_model_cfg_nkeys; i++) {
        const rp_cfg_key *k = &rp_model_cfg_keys[i];
        if (k->unset_as &&
            rp_model_cfg_get_num(c, k) == rp_model_cfg_get_num(c, rp_model_cfg_key(k->unset_as,
                                                                                   (size_t)-1)))
            rp_model_cfg_set_num(c, k, 0.0);
    }
}

const rp_cfg_key *rp_model_cfg_width_key(const rp_model_cfg *c, const uint64_t *given, int bit)
{
    const rp_cfg_key *shared = NULL;
    for (int i = 0; i < rp_model_cfg_nkeys; i++) {
        const rp_cfg_key *k = &rp_model_cfg_keys[i];
        if (k->use != RP_CFG_PLACEMENT || !(k->use_arg & bit)) continue;
        if (!k->unset_as) shared = k;
        else if (given ? (*given >> i & 1) : rp_model_cfg_get_num(c, k) > 0.0) return k;
    }
    return shared;
}

uint32_t rp_model_cfg_version(const rp_model_cfg *c)
{
    uint32_t v = 1;
    for (int i = 0; i < rp_model_cfg_nkeys; i++) {
        const rp_cfg_key *k = &rp_model_cfg_keys[i];
        uint32_t need = rp_model_cfg_is_default(c, k) ? 1 : k->since;
        int64_t x = rp_model_cfg_get_int(c, k);
        if (k->value_since && x >= 0 && x < name_count(k) && k->value_since(x) > need)
            need = k->value_since(x);
        if (need > v) v = need;
    }
    return v;
}
