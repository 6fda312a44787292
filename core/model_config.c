/* The model's config: defaults, checks, and the positional scheme it resolves to. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "model_impl.h"

const char *const rp_norm_names[3] = {"pre", "post", NULL};
const char *const rp_act_names[3] = {"relu", "gelu", NULL};
const char *const rp_attn_names[3] = {"softmax", "linear", NULL};
const char *const rp_pairing_names[3] = {"half", "interleaved", NULL};

rp_model_cfg rp_model_cfg_default(int64_t vocab)
{
    rp_model_cfg c;
    memset(&c, 0, sizeof c);
    c.vocab = vocab;
    c.d_model = 128;
    c.heads = 4;
    c.layers = 3;
    c.d_ff = 512;
    c.seq_len = 512;
    c.max_batch = 16;
    c.norm = RP_NORM_PRE;
    c.act = RP_ACT_RELU;
    c.dropout = 0.0;
    c.pe = RP_PE_ROPE;
    c.fraction_qk = 1.0;
    c.fraction_v = 1.0;
    c.rope_base = RP_ROPE_BASE;
    c.pairing = RP_PAIR_HALF;
    c.seed = 0;
    c.attention = RP_ATTN_SOFTMAX;
    c.linear_rope = RP_LIN_AFTER;
    c.rel_clip = 16;
    c.rel_buckets = 32;
    c.rel_max_distance = 128;
    c.scaling = RP_SCALING_NONE;
    c.scaling_factor = 1.0;
    c.yarn_alpha = RP_YARN_ALPHA;
    c.yarn_beta = RP_YARN_BETA;
    c.xpos_scale_base = RP_XPOS_SCALE_BASE;
    return c;
}

static rp_status check_dim(const char *name, int64_t v, int64_t lo, int64_t hi)
{
    if (v < lo || v > hi)
        return rp_error(RP_ERR_ARG, "%s %lld must be in %lld..%lld", name, (long long)v,
                        (long long)lo, (long long)hi);
    return RP_OK;
}

/* The widths of the placements in rot (0 for the others) from the fractions; RP_ERR_ARG naming
 * the fraction key when one is out of (0, 1] or gives an odd width or one below 2. */
static rp_status pe_widths(const rp_model_cfg *cfg, int rot, int64_t d_rot[4])
{
    int64_t dk = cfg->d_model / cfg->heads;
    struct {
        int bit;
        const char *own;
        double f;
        const char *shared;
        double fs;
    } p[4] = {{RP_ROT_Q, "fraction_q", cfg->fraction_q, "fraction_qk", cfg->fraction_qk},
              {RP_ROT_K, "fraction_k", cfg->fraction_k, "fraction_qk", cfg->fraction_qk},
              {RP_ROT_V, "fraction_v", 0.0, "fraction_v", cfg->fraction_v},
              {RP_ROT_O, "fraction_o", cfg->fraction_o, "fraction_v", cfg->fraction_v}};
    for (int i = 0; i < 4; i++) {
        d_rot[i] = 0;
        if (p[i].f < 0.0 || p[i].f > 1.0 || isnan(p[i].f))
            return rp_error(RP_ERR_ARG, "%s %g must be in (0, 1]", p[i].own, p[i].f);
        if (!(rot & p[i].bit)) continue;
        if (p[i].f > 0.0)
            RP_TRY(rp_pe_fraction_width(p[i].own, p[i].f, dk, &d_rot[i]));
        else
            RP_TRY(rp_pe_fraction_width(p[i].shared, p[i].fs, dk, &d_rot[i]));
    }
    return RP_OK;
}

rp_status rp_model_cfg_check(const rp_model_cfg *cfg)
{
    if (!cfg) return rp_error(RP_ERR_ARG, "model config is NULL");
    RP_TRY(check_dim("vocab", cfg->vocab, 1, RP_I32_MAX));
    RP_TRY(check_dim("d_model", cfg->d_model, 1, RP_I32_MAX / 3));
    RP_TRY(check_dim("heads", cfg->heads, 1, RP_I32_MAX));
    RP_TRY(check_dim("layers", cfg->layers, 1, RP_MAX_LAYERS));
    RP_TRY(check_dim("d_ff", cfg->d_ff, 1, RP_I32_MAX));
    RP_TRY(check_dim("seq_len", cfg->seq_len, 1, RP_I32_MAX));
    RP_TRY(check_dim("max_batch", cfg->max_batch, 1, RP_I32_MAX));
    if (cfg->max_batch > RP_I32_MAX / cfg->seq_len)
        return rp_error(RP_ERR_ARG, "max_batch %lld x seq_len %lld exceeds 2^31-1 rows",
                        (long long)cfg->max_batch, (long long)cfg->seq_len);
    if (cfg->d_model % cfg->heads != 0)
        return rp_error(RP_ERR_ARG, "d_model %lld is not divisible by heads %lld",
                        (long long)cfg->d_model, (long long)cfg->heads);
    if (cfg->norm != RP_NORM_PRE && cfg->norm != RP_NORM_POST)
        return rp_error(RP_ERR_ARG, "norm %d is not pre (0) or post (1)", (int)cfg->norm);
    if (cfg->act != RP_ACT_RELU && cfg->act != RP_ACT_GELU)
        return rp_error(RP_ERR_ARG, "act %d is not relu (0) or gelu (1)", (int)cfg->act);
    if (!(cfg->dropout >= 0.0 && cfg->dropout < 1.0))
        return rp_error(RP_ERR_ARG, "dropout %g must be in [0, 1)", cfg->dropout);
    const rp_pe_mode *mode = rp_pe_mode_of(cfg->pe);
    if (!mode) return rp_error(RP_ERR_ARG, "pe %d is not a known mode", (int)cfg->pe);
    if (mode->rel == RP_REL_XL && cfg->d_model % 2 != 0)
        return rp_error(RP_ERR_ARG, "pe xl needs an even d_model (its sinusoid R), got %lld",
                        (long long)cfg->d_model);
    if (cfg->pairing != RP_PAIR_HALF && cfg->pairing != RP_PAIR_INTERLEAVED)
        return rp_error(RP_ERR_ARG, "pairing %d is not half (0) or interleaved (1)",
                        (int)cfg->pairing);
    if (!(cfg->rope_base > 0.0) || !isfinite(cfg->rope_base))
        return rp_error(RP_ERR_ARG, "rope_base %g must be positive and finite", cfg->rope_base);
    if (cfg->rotate & ~RP_ROT_ALL)
        return rp_error(RP_ERR_ARG, "rotate %d is not a subset of qkvo", cfg->rotate);
    if (cfg->rotate && !mode->rotary)
        return rp_error(RP_ERR_ARG, "rotate needs a rotary pe (rope, roper or roper_legacy), not %s",
                        mode->name);
    int rot = cfg->rotate ? cfg->rotate : mode->rotate;
    int64_t d_rot[4];
    RP_TRY(pe_widths(cfg, rot, d_rot));
    if (mode->rel == RP_REL_SHAW || mode->rel == RP_REL_DEBERTA)
        RP_TRY(check_dim("rel_clip", cfg->rel_clip, 1, RP_REL_MAX_CLIP));
    if (mode->rel == RP_REL_T5) {
        RP_TRY(check_dim("rel_buckets", cfg->rel_buckets, 2, RP_REL_MAX_BUCKETS));
        int64_t exact = cfg->rel_buckets / 2; /* causal: one-sided buckets, half of them exact */
        RP_TRY(check_dim("rel_max_distance", cfg->rel_max_distance, exact + 1, RP_I32_MAX));
    }
    if (cfg->attention != RP_ATTN_SOFTMAX && cfg->attention != RP_ATTN_LINEAR)
        return rp_error(RP_ERR_ARG, "attention %d is not softmax (0) or linear (1)",
                        (int)cfg->attention);
    if (cfg->linear_rope != RP_LIN_AFTER && cfg->linear_rope != RP_LIN_BEFORE)
        return rp_error(RP_ERR_ARG, "linear_rope %d is not after (0) or before (1)",
                        (int)cfg->linear_rope);
    if (cfg->attention == RP_ATTN_LINEAR && !mode->linear)
        return rp_error(RP_ERR_ARG, "linear attention does not support pe %s", mode->name);
    if (cfg->orig_len < 0)
        return rp_error(RP_ERR_ARG, "orig_len must be >= 0 (0: seq_len), got %lld",
                        (long long)cfg->orig_len);
    rp_rope_freq f = rp_model_cfg_freq(cfg);
    RP_TRY(rp_rope_freq_check(&f));
    if (!rp_rope_freq_is_plain(&f) && (!mode->rotary || cfg->attention == RP_ATTN_LINEAR))
        return rp_error(RP_ERR_ARG, "scaling and xpos need a rotary pe (rope, roper or "
                                    "roper_legacy) with softmax attention, not %s%s", mode->name,
                        cfg->attention == RP_ATTN_LINEAR ? " with linear attention" : "");
    if (cfg->attention == RP_ATTN_LINEAR &&
        (cfg->rotate || cfg->fraction_q || cfg->fraction_k || cfg->fraction_o))
        return rp_error(RP_ERR_ARG, "linear attention takes the mode's own rotate and fraction_qk, "
                                    "fraction_v (not rotate, fraction_q, fraction_k, fraction_o)");
    return RP_OK;
}


rp_rope_freq rp_model_cfg_freq(const rp_model_cfg *cfg)
{
    rp_rope_freq f = rp_rope_freq_default();
    f.scaling = cfg->scaling;
    f.factor = cfg->scaling_factor;
    f.orig_len = (double)(cfg->orig_len > 0 ? cfg->orig_len : cfg->seq_len);
    f.yarn_alpha = cfg->yarn_alpha;
    f.yarn_beta = cfg->yarn_beta;
    f.xpos = cfg->xpos;
    f.xpos_scale_base = cfg->xpos_scale_base;
    return f;
}

rp_pe_scheme rp_model_cfg_scheme(const rp_model_cfg *cfg)
{
    const rp_pe_mode *mode = rp_pe_mode_of(cfg->pe);
    int64_t d_rot[4];
    (void)pe_widths(cfg, cfg->rotate ? cfg->rotate : mode->rotate, d_rot);
    rp_pe_scheme s;
    (void)rp_pe_scheme_init(&s, cfg->pe, cfg->rotate, d_rot, cfg->rope_base, cfg->pairing);
    return s;
}

rp_status rp_model_set_freq(rp_model *m, const double *theta, int64_t n_theta,
                            const double *angles, int64_t rows, int64_t n_angles)
{
    rp_rope_freq f = rp_model_cfg_freq(&m->cfg);
    if (theta) f.theta = theta, f.n_theta = n_theta;
    if (angles) f.angles = angles, f.rows = rows, f.n_angles = n_angles;
    if ((theta || angles) && (!m->pe.rotate || m->linear))
        return rp_error(RP_ERR_ARG, "freq and angles need a rotary pe (rope, roper or "
                                    "roper_legacy) with softmax attention, not %s%s",
                        rp_pe_name(m->pe.pe), m->linear ? " with linear attention" : "");
    RP_TRY(rp_pe_scheme_check_freq(&m->pe, &f, m->cfg.seq_len - 1, m->cfg.seq_len - 1));
    double *copy = NULL;
    int64_t n = theta ? n_theta : angles ? rows * n_angles : 0;
    if (n) {
        copy = malloc((size_t)n * sizeof(double));
        if (!copy) return rp_error(RP_ERR_NOMEM, "cannot allocate the frequency table");
        memcpy(copy, theta ? theta : angles, (size_t)n * sizeof(double));
        if (theta) f.theta = copy;
        else f.angles = copy;
    }
    free(m->freq_table);
    m->freq_table = copy;
    m->freq = f;
    return RP_OK;
}

const rp_rope_freq *rp_model_freq(const rp_model *m) { return &m->freq; }
