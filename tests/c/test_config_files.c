/* The config in files, byte for byte: for every case below (a config of each checkpoint format
 * version, every pe family, the scalings, the model's own tables, values in fields their mode
 * does not use), a fresh model saved as a checkpoint (core/io/checkpoint.h) and as a safetensors
 * file (core/io/safetensors.h) gives exactly the bytes of the files in tests/fixtures/config, which
 * were written before the config schema existed (the README there says by which commit and how);
 * each of those files loads, and saving the loaded model gives its bytes again. A case with an
 * optimiser is the exception: its fixture holds the optimiser's config as versions 1 to 6 did,
 * a save writes version 7's (docs/checkpoint.md), so its model part is compared with a save
 * without the optimiser, and the fixture loaded and saved again gives the fresh model's file.
 *
 * ROPER_CONFIG_FIXTURES=DIR reads the fixtures from DIR; ROPER_CONFIG_FIXTURES_WRITE=DIR writes
 * them there instead of checking (how they were made).
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "rp.h"

typedef struct {
    const char *name;
    rp_model_cfg cfg;
    int table;     /* 0 none, 1 own frequencies, 2 own angles (checkpoint format version 3; a
                    * safetensors file does not hold them: no safetensors fixture) */
    int optimiser; /* 1: the checkpoint holds an Adam state */
} config_case;

enum { NCASES = 19 };

static void make_cases(config_case *k)
{
    int n = 0;
    k[n++] = (config_case){"v1_rope", check_small_cfg(RP_PE_ROPE, 1), 0, 0};
    k[n] = (config_case){"v1_roper_settings", check_small_cfg(RP_PE_ROPER, UINT64_MAX - 6), 0, 1};
    k[n].cfg.pe.fraction_qk = 0.5, k[n].cfg.pe.fraction_v = 0.75, k[n].cfg.pe.base = 500.0;
    k[n].cfg.pe.pairing = RP_PAIR_INTERLEAVED, k[n].cfg.dropout = 0.1, k[n].cfg.norm = RP_NORM_POST;
    k[n++].cfg.act = RP_ACT_GELU;
    k[n] = (config_case){"v1_learned_unused_values", check_small_cfg(RP_PE_LEARNED, 3), 0, 0};
    k[n].cfg.pe.base = 100.0, k[n].cfg.pe.pairing = RP_PAIR_INTERLEAVED;
    k[n].cfg.pe.fraction_qk = 0.5, k[n++].cfg.pe.fraction_v = 0.25;
    k[n] = (config_case){"v1_sinusoidal", check_small_cfg(RP_PE_SINUSOIDAL, 4), 0, 0};
    k[n++].cfg.linear_rope = RP_LIN_BEFORE; /* a value softmax attention does not use */
    k[n] = (config_case){"v1_linear_before", check_small_cfg(RP_PE_ROPER, 5), 0, 0};
    k[n].cfg.attention = RP_ATTN_LINEAR, k[n].cfg.linear_rope = RP_LIN_BEFORE;
    k[n++].cfg.pe.fraction_v = 0.25;
    k[n] = (config_case){"v2_shaw", check_small_cfg(RP_PE_SHAW, 6), 0, 0};
    k[n++].cfg.rel.clip = 3;
    k[n] = (config_case){"v2_t5", check_small_cfg(RP_PE_T5, 7), 0, 0};
    k[n].cfg.rel.buckets = 6, k[n++].cfg.rel.max_distance = 9;
    k[n++] = (config_case){"v2_xl", check_small_cfg(RP_PE_XL, 8), 0, 0};
    k[n] = (config_case){"v2_deberta", check_small_cfg(RP_PE_DEBERTA, 9), 0, 0};
    k[n++].cfg.rel.clip = 2;
    k[n++] = (config_case){"v2_alibi", check_small_cfg(RP_PE_ALIBI, 10), 0, 0};
    k[n] = (config_case){"v2_rope_vo", check_small_cfg(RP_PE_ROPE, 11), 0, 0};
    k[n].cfg.pe.rotate = RP_ROT_V | RP_ROT_O, k[n++].cfg.pe.fraction_o = 0.5;
    k[n] = (config_case){"v2_roper_widths", check_small_cfg(RP_PE_ROPER, 12), 0, 0};
    k[n].cfg.pe.fraction_q = 0.25, k[n].cfg.pe.fraction_k = 0.75, k[n++].cfg.pe.fraction_o = 0.5;
    k[n] = (config_case){"v2_rope_unused_rel_clip", check_small_cfg(RP_PE_ROPE, 13), 0, 0};
    k[n++].cfg.rel.clip = 8;
    k[n] = (config_case){"v3_yarn", check_small_cfg(RP_PE_ROPER, 14), 0, 0};
    k[n].cfg.freq.scaling = RP_SCALING_YARN, k[n].cfg.freq.factor = 4.0, k[n].cfg.freq.orig_len = 3;
    k[n].cfg.freq.yarn_alpha = 0.5, k[n++].cfg.freq.yarn_beta = 8.0;
    k[n] = (config_case){"v3_pi_xpos", check_small_cfg(RP_PE_ROPE, 15), 0, 0};
    k[n].cfg.freq.scaling = RP_SCALING_PI, k[n].cfg.freq.factor = 2.0, k[n].cfg.freq.xpos = 0.4;
    k[n++].cfg.freq.xpos_scale_base = 64.0;
    k[n] = (config_case){"v3_ntk", check_small_cfg(RP_PE_ROPER_LEGACY, 16), 0, 0};
    k[n].cfg.freq.scaling = RP_SCALING_NTK, k[n++].cfg.freq.factor = 1.0 / 3.0;
    k[n] = (config_case){"v3_unused_factor", check_small_cfg(RP_PE_ROPE, 17), 0, 0};
    k[n++].cfg.freq.factor = 2.0; /* no scaling: the factor does nothing */
    k[n++] = (config_case){"v3_freq", check_small_cfg(RP_PE_ROPE, 18), 1, 0};
    k[n++] = (config_case){"v3_angles", check_small_cfg(RP_PE_ROPER, 19), 2, 0};
    if (n != NCASES) {
        printf("FATAL: %d cases, NCASES is %d\n", n, NCASES);
        exit(2);
    }
}

/* The case's model: its config, and its own table for the version 3 cases. */
static rp_model *case_model(const config_case *k)
{
    rp_model *m = check_model_new(&k->cfg);
    if (k->table == 1) {
        double theta[4] = {1.0, 0.3, 1.0 / 7.0, 0.01};
        if (rp_model_set_freq(m, theta, 4, NULL, 0, 0) != RP_OK) goto fail;
    } else if (k->table == 2) {
        double ang[6 * 4];
        for (int i = 0; i < 24; i++) ang[i] = 0.1 * (double)(i * i % 13) - 0.4;
        if (rp_model_set_freq(m, NULL, 0, ang, 6, 4) != RP_OK) goto fail;
    }
    return m;
fail:
    printf("FATAL: %s: rp_model_set_freq: %s\n", k->name, rp_last_error());
    exit(2);
}

/* Saves m as a checkpoint (with a zero Adam state at step 5 when optimiser) at path. */
static rp_status save_ck(const char *path, rp_model *m, int optimiser)
{
    if (!optimiser) return rp_checkpoint_save(path, m, NULL, NULL);
    int64_t n = rp_model_param_count(m);
    rp_adam_cfg oc = rp_adam_cfg_default();
    /* the fixture's optimiser: rp_adam_cfg_default() when it was written (labml's lr and
     * constant schedule), given explicitly since the defaults became rp.experiment's */
    oc.lr = 2.5e-4;
    oc.schedule = RP_SCHED_CONSTANT;
    oc.warmup = 2000;
    oc.total_steps = 0;
    oc.min_lr = 0.0;
    rp_adam_state os = {calloc((size_t)n, sizeof(float)), calloc((size_t)n, sizeof(float)), n, 5};
    rp_status st = rp_checkpoint_save(path, m, &oc, &os);
    free(os.m);
    free(os.v);
    return st;
}

static char g_dir[64];

/* 1 when the files at a and b hold the same bytes; otherwise prints where they first differ. */
static int same_bytes(const char *a, const char *b)
{
    size_t na = 0, nb = 0;
    unsigned char *x = check_read_bytes(a, &na), *y = check_read_bytes(b, &nb);
    int same = x && y && na == nb && memcmp(x, y, na) == 0;
    if (!same && x && y) {
        size_t i = 0;
        while (i < na && i < nb && x[i] == y[i]) i++;
        printf("  %s (%zu bytes) and %s (%zu bytes) differ from byte %zu on\n", a, na, b, nb, i);
    } else if (!same) {
        printf("  cannot read %s or %s\n", a, b);
    }
    free(x);
    free(y);
    return same;
}

/* 1 when the file at a (a model without an optimiser) holds the bytes of the file at b (the
 * same model with an optimiser section of versions 1 to 6: 104 bytes and m and v, n floats
 * each) without that section: the same bytes but the size, the optimiser's flag (bit 0 of the
 * flags) and the checksum. */
static int same_without_optim(const char *a, const char *b, int64_t n)
{
    size_t na = 0, nb = 0;
    unsigned char *x = check_read_bytes(a, &na), *y = check_read_bytes(b, &nb);
    size_t cut = 104 + 8 * (size_t)n;
    int same = x && y && nb == na + cut && memcmp(x, y, 8) == 0;
    int flags = 0; /* bytes that differ by the optimiser's flag alone */
    for (size_t i = 16; same && i < na - 8; i++) {
        if (x[i] == y[i]) continue;
        if (y[i] == (x[i] | 1) && !flags) flags = 1;
        else same = 0;
    }
    if (!same) printf("  %s and %s without its optimiser differ\n", a, b);
    free(x);
    free(y);
    return same && flags;
}

/* One case: the fresh model's files against the fixtures, then each fixture loaded and saved
 * again. */
static void check_case(const config_case *k, const char *dir)
{
    char want_ck[256], want_st[256], got[128], fresh[128];
    snprintf(want_ck, sizeof want_ck, "%s/%s.rpck", dir, k->name);
    snprintf(want_st, sizeof want_st, "%s/%s.safetensors", dir, k->name);
    snprintf(got, sizeof got, "%s/got", g_dir);
    snprintf(fresh, sizeof fresh, "%s/fresh", g_dir);
    rp_model *m = case_model(k);
    CHECK_STATUS(save_ck(fresh, m, k->optimiser), RP_OK, k->name);
    if (!k->optimiser) {
        CHECK(same_bytes(fresh, want_ck),
              "%s: the checkpoint of a fresh model is the fixture's bytes", k->name);
    } else {
        CHECK_STATUS(save_ck(got, m, 0), RP_OK, k->name);
        CHECK(same_without_optim(got, want_ck, rp_model_param_count(m)),
              "%s: the checkpoint of a fresh model without its optimiser is the fixture's bytes "
              "without its optimiser section", k->name);
    }
    if (!k->table) {
        CHECK_STATUS(rp_safetensors_save(got, m), RP_OK, k->name);
        CHECK(same_bytes(got, want_st), "%s: the safetensors file of a fresh model is the "
                                        "fixture's bytes", k->name);
    }
    rp_model_free(m);

    rp_checkpoint ck;
    memset(&ck, 0, sizeof ck);
    if (CHECK_STATUS(rp_checkpoint_load(want_ck, &ck), RP_OK, k->name)) {
        rp_status st = ck.has_optim ? rp_checkpoint_save(got, ck.model, &ck.opt_cfg, &ck.opt_state)
                                    : rp_checkpoint_save(got, ck.model, NULL, NULL);
        CHECK_STATUS(st, RP_OK, k->name);
        CHECK(same_bytes(got, k->optimiser ? fresh : want_ck),
              "%s: the checkpoint loads and saves to %s", k->name,
              k->optimiser ? "the fresh model's (version 7)" : "its own bytes");
        rp_checkpoint_free_optim(&ck);
        rp_model_free(ck.model);
    }
    rp_model *s = NULL;
    if (!k->table && CHECK_STATUS(rp_safetensors_load(want_st, &s), RP_OK, k->name)) {
        CHECK_STATUS(rp_safetensors_save(got, s), RP_OK, k->name);
        CHECK(same_bytes(got, want_st), "%s: the safetensors file loads and saves to its own "
                                        "bytes", k->name);
        rp_model_free(s);
    }
    unlink(got);
    unlink(fresh);
}

int main(void)
{
    config_case cases[NCASES];
    make_cases(cases);
    const char *out = getenv("ROPER_CONFIG_FIXTURES_WRITE");
    if (out) {
        char path[256];
        for (int i = 0; i < NCASES; i++) {
            rp_model *m = case_model(&cases[i]);
            snprintf(path, sizeof path, "%s/%s.rpck", out, cases[i].name);
            CHECK_STATUS(save_ck(path, m, cases[i].optimiser), RP_OK, cases[i].name);
            snprintf(path, sizeof path, "%s/%s.safetensors", out, cases[i].name);
            if (!cases[i].table) CHECK_STATUS(rp_safetensors_save(path, m), RP_OK, cases[i].name);
            rp_model_free(m);
        }
        return check_summary("test_config_files (writing)");
    }
    snprintf(g_dir, sizeof g_dir, "/tmp/rp_config_test.XXXXXX");
    if (!mkdtemp(g_dir)) {
        printf("FATAL: mkdtemp: %s\n", strerror(errno));
        return 2;
    }
    const char *dir = getenv("ROPER_CONFIG_FIXTURES");
    printf("-- %d configs: fresh models and the fixtures, byte for byte\n", NCASES);
    for (int i = 0; i < NCASES; i++) check_case(&cases[i], dir ? dir : "tests/fixtures/config");
    CHECK(rmdir(g_dir) == 0, "removed %s: %s", g_dir, strerror(errno));
    return check_summary("test_config_files");
}
