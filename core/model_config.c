/* The model's config: defaults, checks, and the positional scheme it resolves to. */
#include <math.h>
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
    return c;
}

static rp_status check_dim(const char *name, int64_t v, int64_t lo, int64_t hi)
{
    if (v < lo || v > hi)
        return rp_error(RP_ERR_ARG, "%s %lld must be in %lld..%lld", name, (long long)v,
                        (long long)lo, (long long)hi);
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
    if (cfg->pairing != RP_PAIR_HALF && cfg->pairing != RP_PAIR_INTERLEAVED)
        return rp_error(RP_ERR_ARG, "pairing %d is not half (0) or interleaved (1)",
                        (int)cfg->pairing);
    if (!(cfg->rope_base > 0.0) || !isfinite(cfg->rope_base))
        return rp_error(RP_ERR_ARG, "rope_base %g must be positive and finite", cfg->rope_base);
    int64_t dk = cfg->d_model / cfg->heads, d;
    if (mode->rot_qk) RP_TRY(rp_pe_fraction_width("fraction_qk", cfg->fraction_qk, dk, &d));
    if (mode->v_angle != 0.0 || mode->o_sign != 0)
        RP_TRY(rp_pe_fraction_width("fraction_v", cfg->fraction_v, dk, &d));
    if (cfg->attention != RP_ATTN_SOFTMAX && cfg->attention != RP_ATTN_LINEAR)
        return rp_error(RP_ERR_ARG, "attention %d is not softmax (0) or linear (1)",
                        (int)cfg->attention);
    if (cfg->linear_rope != RP_LIN_AFTER && cfg->linear_rope != RP_LIN_BEFORE)
        return rp_error(RP_ERR_ARG, "linear_rope %d is not after (0) or before (1)",
                        (int)cfg->linear_rope);
    if (cfg->attention == RP_ATTN_LINEAR && !mode->linear)
        return rp_error(RP_ERR_ARG, "linear attention does not support pe %s", mode->name);
    return RP_OK;
}


rp_pe_scheme rpm_scheme(const rp_model_cfg *cfg)
{
    const rp_pe_mode *mode = rp_pe_mode_of(cfg->pe);
    int64_t dk = cfg->d_model / cfg->heads, d_qk = 0, d_v = 0;
    if (mode->rot_qk) (void)rp_pe_fraction_width("fraction_qk", cfg->fraction_qk, dk, &d_qk);
    if (mode->v_angle != 0.0 || mode->o_sign != 0)
        (void)rp_pe_fraction_width("fraction_v", cfg->fraction_v, dk, &d_v);
    rp_pe_scheme s;
    (void)rp_pe_scheme_init(&s, cfg->pe, d_qk, d_v, cfg->rope_base, cfg->pairing);
    return s;
}
