/* The model config's schema (core/config/model_schema.h) and the one check every config passes:
 *  - the rows against an independent list of rp_model_cfg's fields (name, offset, size), the
 *    documented defaults, the format version of each row;
 *  - the range of every field checked whatever the mode (rp_model_cfg_check), with the key's name;
 *  - what a key does for a mode (rp_model_cfg_unused, rp_model_cfg_check_used) and the messages;
 *  - the format version a config needs (rp_model_cfg_version);
 *  - the bool type (learn_freq): get, set, its names, a value other than 0 or 1 refused;
 *  - forged checkpoints of each format version (checksum recomputed) and safetensors files with a
 *    bad field: refused with the field's name, nothing built, the model loaded into unchanged;
 *  - the writers never write what the readers refuse (rp_model_cfg_to_json of a nan).
 * Offsets in checkpoint files: docs/checkpoint.md (the version 1 block at 16, flags at 128 for
 * version 1; the version 2 block at 128; the version 3 block at 184; the version 5 block at 284
 * without a frequency table).
 */
#include <errno.h>
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "rp.h"

static char g_dir[64];

/* st is want and rp_last_error() is exactly msg. */
static int expect(rp_status st, rp_status want, const char *msg, const char *what)
{
    return CHECK(st == want && (want == RP_OK || strcmp(rp_last_error(), msg) == 0),
                 "%s: status %s, message\n   got  \"%s\"\n   want \"%s\"", what,
                 rp_status_name(st), rp_last_error(), msg);
}

static rp_model_cfg small(rp_pe pe) { return check_small_cfg(pe, 0); }

/* ---- the rows ------------------------------------------------------------------------------ */

/* rp_model_cfg's fields, written out here independently of the schema. */
#define FIELD(key, member)                                                                         \
    {key, offsetof(rp_model_cfg, member), sizeof(((rp_model_cfg *)0)->member)}
static const struct {
    const char *key;
    size_t offset, size;
} fields[] = {
    FIELD("vocab", vocab), FIELD("d_model", d_model), FIELD("heads", heads),
    FIELD("layers", layers), FIELD("d_ff", d_ff), FIELD("seq_len", seq_len),
    FIELD("max_batch", max_batch), FIELD("norm", norm), FIELD("activation", act),
    FIELD("dropout", dropout), FIELD("pe", pe.mode), FIELD("fraction_qk", pe.fraction_qk),
    FIELD("fraction_v", pe.fraction_v), FIELD("base", pe.base), FIELD("pairing", pe.pairing),
    FIELD("seed", seed), FIELD("attention", attention), FIELD("linear_rope", linear_rope),
    FIELD("rotate", pe.rotate), FIELD("fraction_q", pe.fraction_q),
    FIELD("fraction_k", pe.fraction_k), FIELD("fraction_o", pe.fraction_o),
    FIELD("rel_clip", rel.clip),
    FIELD("rel_buckets", rel.buckets), FIELD("rel_max_distance", rel.max_distance),
    FIELD("scaling", freq.scaling), FIELD("scaling_factor", freq.factor),
    FIELD("orig_len", freq.orig_len), FIELD("yarn_alpha", freq.yarn_alpha),
    FIELD("yarn_beta", freq.yarn_beta),
    FIELD("xpos", freq.xpos), FIELD("xpos_scale_base", freq.xpos_scale_base),
    FIELD("yarn_ramp", freq.yarn_ramp), FIELD("low_freq_factor", freq.low_freq_factor),
    FIELD("high_freq_factor", freq.high_freq_factor),
    FIELD("attention_factor", freq.attention_factor),
    FIELD("learn_freq", learn_freq), FIELD("tie_embeddings", tie_embeddings),
};
#undef FIELD
enum { NFIELDS = (int)(sizeof fields / sizeof fields[0]) };

/* The frequency scheme's fields (rp_rope_freq) of the keys, written out here: the rows that
 * point into rp_model_cfg.freq (scope RP_CFG_SCOPE_FREQ), with their freq_name. */
#define FFIELD(key, member) {key, offsetof(rp_rope_freq, member), #member}
static const struct {
    const char *key;
    size_t at;
    const char *name;
} freq_fields[] = {
    FFIELD("scaling", scaling),       FFIELD("scaling_factor", factor),
    FFIELD("orig_len", orig_len),     FFIELD("yarn_alpha", yarn_alpha),
    FFIELD("yarn_beta", yarn_beta),   FFIELD("xpos", xpos),
    FFIELD("xpos_scale_base", xpos_scale_base), FFIELD("yarn_ramp", yarn_ramp),
    FFIELD("low_freq_factor", low_freq_factor), FFIELD("high_freq_factor", high_freq_factor),
    FFIELD("attention_factor", attention_factor),
};
#undef FFIELD

static void test_freq_column(void)
{
    printf("-- the frequency rows: their rp_rope_freq fields, their scope and freq_name\n");
    int n = 0;
    for (int i = 0; i < rp_model_cfg_nkeys; i++) {
        const rp_cfg_key *k = &rp_model_cfg_keys[i];
        int j = -1;
        for (size_t f = 0; f < sizeof freq_fields / sizeof freq_fields[0]; f++)
            if (!strcmp(freq_fields[f].key, k->name)) j = (int)f;
        int in = rp_model_cfg_scope(k) == RP_CFG_SCOPE_FREQ;
        n += in;
        CHECK(in == (j >= 0), "%s: scope freq %d", k->name, in);
        CHECK(!k->freq_name == !in, "%s: freq_name exactly for the frequency rows", k->name);
        if (!in || j < 0) continue;
        CHECK(rp_model_cfg_freq_at(k) == freq_fields[j].at && !strcmp(k->freq_name,
                                                                      freq_fields[j].name),
              "%s: at %zu (%s), want %zu (%s)", k->name, rp_model_cfg_freq_at(k), k->freq_name,
              freq_fields[j].at, freq_fields[j].name);
        /* a value other than the default reaches its field of rp_model_cfg_freq, and only it */
        rp_model_cfg c = rp_model_cfg_default(8);
        c.seq_len = 64;
        c.freq.orig_len = 64;
        rp_rope_freq plain = rp_model_cfg_freq(&c);
        rp_model_cfg_set_num(&c, k, k->type == RP_CFG_ENUM ? 1.0 : 7.0);
        rp_rope_freq f = rp_model_cfg_freq(&c);
        const char *at = (const char *)&f + rp_model_cfg_freq_at(k);
        int ok = k->type == RP_CFG_ENUM  ? *(const int *)(const void *)at == 1
                 : k->type == RP_CFG_INT ? *(const int64_t *)(const void *)at == 7
                                         : *(const double *)(const void *)at == 7.0;
        size_t size = k->type == RP_CFG_ENUM ? sizeof(int) : 8;
        memcpy((char *)&f + rp_model_cfg_freq_at(k), (const char *)&plain + rp_model_cfg_freq_at(k),
               size);
        CHECK(ok && !memcmp(&f, &plain, sizeof f), "%s: rp_model_cfg_freq carries it, alone",
              k->name);
    }
    CHECK(n == (int)(sizeof freq_fields / sizeof freq_fields[0]), "%d rows of the frequency scheme",
          n);
    /* orig_len 0 is seq_len */
    rp_model_cfg c = rp_model_cfg_default(8);
    c.seq_len = 64;
    CHECK(rp_model_cfg_freq(&c).orig_len == 64, "orig_len 0: seq_len");
    /* the ranges of the scheme's own parameters are the bounds of rp_freq_rules (one home):
     * written out here, every number key of the freq column but yarn_beta and high_freq_factor
     * (ordered above the other of their pair, >= 0 by their own row); orig_len, an integer whose
     * 0 is seq_len, keeps its own */
    const struct {
        const char *key;
        double lo;
        int lo_open;
    } bounds[] = {{"scaling_factor", 0, 1}, {"yarn_alpha", 0, 0}, {"xpos", 0, 0},
                  {"xpos_scale_base", 0, 1}, {"low_freq_factor", 0, 0},
                  {"attention_factor", 0, 0}};
    for (int i = 0; i < rp_model_cfg_nkeys; i++) {
        const rp_cfg_key *k = &rp_model_cfg_keys[i];
        int j = -1;
        for (int b = 0; b < (int)(sizeof bounds / sizeof bounds[0]); b++)
            if (!strcmp(bounds[b].key, k->name)) j = b;
        rp_cfg_range r = rp_model_cfg_range(k);
        CHECK(!(k->flags & RP_CFG_FREQ_RANGE) == (j < 0), "%s: RP_CFG_FREQ_RANGE", k->name);
        if (j < 0) {
            CHECK(r.lo == k->lo && r.hi == k->hi &&
                      r.lo_open == !!(k->flags & RP_CFG_LO_OPEN) &&
                      r.hi_open == !!(k->flags & RP_CFG_HI_OPEN),
                  "%s: its row's range", k->name);
            continue;
        }
        const rp_freq_rule *b = rp_freq_rule_bound(rp_model_cfg_freq_at(k));
        CHECK(b && r.lo == bounds[j].lo && r.lo_open == bounds[j].lo_open && isinf(r.hi) &&
                  !r.hi_open && r.lo == b->lo && r.lo_open == b->lo_open,
              "%s: the range of rp_freq_rules", k->name);
    }
}

/* The names the frequency rules give their fields: each row's ka and kb are the schema's rows of
 * its fields a and b (the one fact written twice, held here), and rp_model_cfg_check_shown names
 * the keys a user gave under other names by those names, the others by their own. */
static void test_shown_names(void)
{
    printf("-- the frequency rules' key names; rp_model_cfg_check_shown\n");
    for (int i = 0; i < rp_freq_nrules; i++) {
        const rp_freq_rule *r = &rp_freq_rules[i];
        const rp_cfg_key *ka = rp_model_cfg_key(r->ka, strlen(r->ka));
        CHECK(ka && rp_model_cfg_scope(ka) == RP_CFG_SCOPE_FREQ &&
                  rp_model_cfg_freq_at(ka) == r->a_at, "rule %d: %s sets %s", i, r->ka, r->a);
        const rp_cfg_key *kb = r->kb ? rp_model_cfg_key(r->kb, strlen(r->kb)) : NULL;
        CHECK(!r->b == !r->kb && (!r->b || (kb && rp_model_cfg_freq_at(kb) == r->b_at)),
              "rule %d: kb sets %s", i, r->b ? r->b : "(none)");
    }
    rp_model_cfg c = rp_model_cfg_default(8);
    c.pe.mode = RP_PE_ROPE;
    c.freq.scaling = RP_SCALING_YARN;
    c.freq.yarn_alpha = 40.0; /* yarn_beta stays 32 */
    const char *shown[RP_CFG_MAX_KEYS] = {0};
    int given[RP_CFG_MAX_KEYS] = {0};
    int a = (int)(rp_model_cfg_key("yarn_alpha", 10) - rp_model_cfg_keys);
    int f = (int)(rp_model_cfg_key("scaling_factor", 14) - rp_model_cfg_keys);
    CHECK_STATUS(rp_model_cfg_check_shown(&c, shown, given), RP_OK, NULL); /* nothing given */
    given[a] = 1;
    CHECK_STATUS(rp_model_cfg_check_shown(&c, shown, given), RP_OK, NULL); /* nothing shown */
    shown[a] = "'beta_slow'";
    CHECK_STATUS(rp_model_cfg_check_shown(&c, shown, given), RP_ERR_ARG,
                 "'beta_slow' 40 must be below yarn_beta 32 (YaRN's ramp runs from the first to "
                 "the second)");
    c.freq.yarn_alpha = 1.0, c.freq.factor = -2.0, given[f] = 1, shown[f] = "F";
    CHECK_STATUS(rp_model_cfg_check_shown(&c, shown, given), RP_ERR_ARG,
                 "F must be a finite number > 0, got -2");
    c.freq.factor = 2.0, c.freq.attention_factor = -1.0; /* not given: left to the later checks */
    CHECK_STATUS(rp_model_cfg_check_shown(&c, shown, given), RP_OK, NULL);
}

/* rp.linear_attention's config keys (rp_cfg_key.linear), written out here at their places: the
 * places distinct, the call's other options (eps 3, q_offset 8) in the places between. */
static void test_linear_places(void)
{
    printf("-- rp.linear_attention's rows: their places\n");
    static const char *const want[] = {"pe", "linear_rope", NULL, "base", "pairing", "fraction_qk",
                                       "fraction_v"};
    const int nwant = (int)(sizeof want / sizeof want[0]);
    int n = 0;
    for (int i = 0; i < rp_model_cfg_nkeys; i++) {
        const rp_cfg_key *k = &rp_model_cfg_keys[i];
        if (k->linear == 0) continue;
        n++;
        CHECK(k->linear >= 1 && k->linear <= nwant && want[k->linear - 1] &&
                  !strcmp(want[k->linear - 1], k->name),
              "%s: place %d", k->name, k->linear);
        for (int j = 0; j < i; j++)
            CHECK(rp_model_cfg_keys[j].linear != k->linear, "%s: place %d also %s's", k->name,
                  k->linear, rp_model_cfg_keys[j].name);
    }
    CHECK(n == nwant - 1, "%d rows with a place, want %d", n, nwant - 1);
}

static void test_rows(void)
{
    printf("-- the rows: one per field of rp_model_cfg, in place\n");
    CHECK(rp_model_cfg_nkeys == NFIELDS, "%d rows, %d fields", rp_model_cfg_nkeys, NFIELDS);
    for (int i = 0; i < NFIELDS && i < rp_model_cfg_nkeys; i++) {
        const rp_cfg_key *k = &rp_model_cfg_keys[i];
        size_t size = k->type == RP_CFG_INT || k->type == RP_CFG_NUM || k->type == RP_CFG_SEED
                          ? 8
                          : sizeof(int);
        CHECK(!strcmp(k->name, fields[i].key) && k->offset == fields[i].offset &&
                  size == fields[i].size,
              "row %d is %s at %zu (%zu bytes), the field %s is at %zu (%zu bytes)", i, k->name,
              k->offset, size, fields[i].key, fields[i].offset, fields[i].size);
        CHECK(rp_model_cfg_key(k->name, (size_t)-1) == k, "%s found by name", k->name);
        CHECK(k->since >= 1 && k->since <= 6 && k->help && *k->help, "%s: since %u, help", k->name,
              k->since);
        /* a value written through the row is what the field holds */
        rp_model_cfg c;
        memset(&c, 0, sizeof c);
        rp_model_cfg_set_int(&c, k, 3);
        rp_model_cfg z;
        memset(&z, 0, sizeof z);
        CHECK(memcmp((char *)&c + fields[i].offset, (char *)&z + fields[i].offset,
                     fields[i].size) != 0 &&
                  !memcmp(&c, &z, fields[i].offset) &&
                  !memcmp((char *)&c + fields[i].offset + fields[i].size,
                          (char *)&z + fields[i].offset + fields[i].size,
                          sizeof c - fields[i].offset - fields[i].size) &&
                  rp_model_cfg_get_int(&c, k) == 3,
              "%s: a write through the row changes that field alone", k->name);
    }
    /* the fields a safetensors file loaded into a model must agree on (docs/interop.md): all
     * but seq_len, max_batch, dropout, seed and the later keys; learn_freq (the file holds the
     * parameter rope.freq) and tie_embeddings (no head.weight) */
    const char *weights = " vocab d_model heads layers d_ff norm activation pe fraction_qk "
                          "fraction_v base pairing attention linear_rope learn_freq "
                          "tie_embeddings ";
    for (int i = 0; i < rp_model_cfg_nkeys; i++) {
        char word[40];
        snprintf(word, sizeof word, " %s ", rp_model_cfg_keys[i].name);
        CHECK(!(rp_model_cfg_keys[i].flags & RP_CFG_WEIGHTS) == !strstr(weights, word),
              "%s: RP_CFG_WEIGHTS", rp_model_cfg_keys[i].name);
    }
    CHECK(rp_model_cfg_key("d_modle", (size_t)-1) == NULL && rp_model_cfg_key("vocabx", 5) &&
              rp_model_cfg_key(NULL, 0) == NULL,
          "lookups by name and length");
    /* the documented defaults (core/model/model.h, docs/lua_api.md) */
    rp_model_cfg d = rp_model_cfg_default(9);
    CHECK(d.vocab == 9 && d.d_model == 128 && d.heads == 4 && d.layers == 3 && d.d_ff == 512 &&
              d.seq_len == 512 && d.max_batch == 16 && d.pe.mode == RP_PE_ROPE &&
              d.pe.base == RP_ROPE_BASE && d.rel.clip == 16 && d.rel.buckets == 32 &&
              d.rel.max_distance == 128 && d.freq.scaling == RP_SCALING_NONE &&
              d.freq.factor == 1.0 && d.freq.orig_len == 0 && d.freq.yarn_alpha == 1.0 &&
              d.freq.yarn_beta == 32.0 && d.freq.xpos == 0.0 && d.freq.xpos_scale_base == 512.0 &&
              d.pe.rotate == 0 && d.pe.fraction_q == 0.0 && d.seed == 0 && d.dropout == 0.0 &&
              d.learn_freq == 0 && d.tie_embeddings == 0,
          "the defaults");
    CHECK_STATUS(rp_model_cfg_check(&d), RP_OK, NULL);
    CHECK_STATUS(rp_model_cfg_check_used(&d), RP_OK, NULL);
    for (int i = 0; i < rp_model_cfg_nkeys; i++)
        if (!(rp_model_cfg_keys[i].flags & RP_CFG_REQUIRED))
            CHECK(rp_model_cfg_is_default(&d, &rp_model_cfg_keys[i]), "%s at its default",
                  rp_model_cfg_keys[i].name);
}

/* ---- ranges -------------------------------------------------------------------------------- */

static void test_ranges(void)
{
    printf("-- every field in range, whatever the mode\n");
    /* the values issue 29 found loading: a fraction the mode does not use, yarn settings
     * without yarn */
    const struct {
        rp_pe pe;
        const char *key;
        double v;
        const char *msg;
    } bad[] = {
        {RP_PE_SHAW, "fraction_qk", NAN, "fraction_qk nan must be in (0, 1]"},
        {RP_PE_ROPE, "fraction_v", NAN, "fraction_v nan must be in (0, 1]"},
        {RP_PE_NONE, "fraction_qk", 1.5, "fraction_qk 1.5 must be in (0, 1]"},
        {RP_PE_ROPE, "fraction_o", -0.5, "fraction_o -0.5 must be in (0, 1]"},
        {RP_PE_ROPE, "yarn_alpha", NAN, "yarn_alpha must be a finite number >= 0, got nan"},
        {RP_PE_ROPE, "yarn_beta", -3.0, "yarn_beta must be a finite number >= 0, got -3"},
        {RP_PE_ALIBI, "xpos_scale_base", 0.0, "xpos_scale_base must be a finite number > 0, got 0"},
        {RP_PE_ALIBI, "base", INFINITY, "base must be a finite number > 0, got inf"},
        {RP_PE_ROPE, "dropout", 1.0, "dropout 1 must be in [0, 1)"},
        {RP_PE_ROPE, "rel_clip", 0, "rel_clip 0 must be in 1..65536"},
        {RP_PE_ROPE, "rel_buckets", 5000, "rel_buckets 5000 must be in 2..4096"},
        {RP_PE_ROPE, "rel_max_distance", -1, "rel_max_distance -1 must be in 1..2147483647"},
        {RP_PE_NONE, "orig_len", -1, "orig_len -1 must be in 0..2147483647"},
        {RP_PE_ROPE, "pe", RP_PE_COUNT, "pe {count} is not {values}"},
        {RP_PE_ROPE, "scaling", 9,
         "scaling 9 is not none (0), pi (1), ntk (2), yarn (3), dynamic (4) or llama3 (5)"},
        {RP_PE_SHAW, "pairing", -1, "pairing -1 is not half (0) or interleaved (1)"},
        {RP_PE_ROPE, "linear_rope", 2, "linear_rope 2 is not after (0) or before (1)"},
        {RP_PE_ROPE, "rotate", 16, "rotate 16 is not a subset of qkvo"},
        {RP_PE_ROPE, "learn_freq", 2, "learn_freq 2 is not false (0) or true (1)"},
        {RP_PE_SHAW, "learn_freq", -1, "learn_freq -1 is not false (0) or true (1)"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        rp_model_cfg c = small(bad[i].pe);
        rp_model_cfg_set_num(&c, rp_model_cfg_key(bad[i].key, (size_t)-1), bad[i].v);
        char msg[512];
        expect(rp_model_cfg_check(&c), RP_ERR_ARG, check_pe_msg(msg, sizeof msg, bad[i].msg),
               bad[i].key);
        CHECK(rp_model_new(&c) == NULL, "%s: no model", bad[i].key);
    }
    /* an unset per-placement fraction (0) is a stored value, not one to give */
    rp_model_cfg c = small(RP_PE_ROPE);
    const rp_cfg_key *fq = rp_model_cfg_key("fraction_q", (size_t)-1);
    CHECK_STATUS(rp_model_cfg_check_key(&c, fq, 0), RP_OK, NULL);
    expect(rp_model_cfg_check_key(&c, fq, 1), RP_ERR_ARG, "fraction_q 0 must be in (0, 1]",
           "fraction_q 0 given");
    /* the rules between fields stay: t5's distance, yarn's ramp */
    c = small(RP_PE_T5);
    c.rel.buckets = 8, c.rel.max_distance = 4;
    expect(rp_model_cfg_check(&c), RP_ERR_ARG, "rel_max_distance 4 must be in 5..2147483647",
           "t5 distance");
    c = small(RP_PE_ROPE);
    c.freq.scaling = RP_SCALING_YARN, c.freq.factor = 2;
    c.freq.yarn_alpha = 5, c.freq.yarn_beta = 2;
    expect(rp_model_cfg_check(&c), RP_ERR_ARG,
           "yarn_alpha 5 must be below yarn_beta 2 (YaRN's ramp runs from the first to the "
           "second)",
           "ramp");
}

/* ---- what a key does ----------------------------------------------------------------------- */

static void test_used(void)
{
    printf("-- a key that does nothing for the mode\n");
    const struct {
        rp_pe pe;
        const char *set; /* key=value pairs applied in order: "attention=1,linear_rope=1" */
        const char *msg; /* NULL: accepted */
    } cases[] = {
        {RP_PE_SHAW, "base=500", "base 500 does nothing for pe shaw: it applies to the rotary "
                                 "modes ({rotary})"},
        {RP_PE_ALIBI, "pairing=1", "pairing interleaved does nothing for pe alibi: it applies to "
                                   "the rotary modes ({rotary})"},
        {RP_PE_ALIBI, "rel_clip=8", "rel_clip 8 does nothing for pe alibi: it applies to pe "
                                    "{clip}"},
        {RP_PE_T5, "rel_clip=8", "rel_clip 8 does nothing for pe t5: it applies to pe "
                                 "{clip}"},
        {RP_PE_SHAW, "rel_buckets=8", "rel_buckets 8 does nothing for pe shaw: it applies to pe "
                                      "{buckets}"},
        {RP_PE_ROPE, "scaling_factor=2", "scaling_factor 2 does nothing with scaling none: it "
                                         "applies to the scalings (pi, ntk, yarn, dynamic or "
                                         "llama3)"},
        {RP_PE_ROPE, "scaling=1,yarn_beta=16", "yarn_beta 16 does nothing with scaling pi: it "
                                               "applies to scaling yarn"},
        {RP_PE_ROPE, "orig_len=64", "orig_len 64 does nothing with scaling none: it applies to "
                                    "scaling yarn, dynamic or llama3"},
        {RP_PE_ROPE, "xpos_scale_base=64", "xpos_scale_base 64 does nothing with xpos 0: it "
                                           "applies when xpos > 0 (xPos on)"},
        {RP_PE_ROPE, "fraction_v=0.5", "fraction_v 0.5 does nothing for pe rope rotating qk: it "
                                       "applies when v or o is rotated"},
        {RP_PE_ROPER, "rotate=12,fraction_q=0.5", "fraction_q 0.5 does nothing for pe roper "
                                                  "rotating vo: it applies when q is rotated"},
        {RP_PE_NONE, "fraction_qk=0.5", "fraction_qk 0.5 does nothing for pe none: it applies to "
                                        "the rotary modes ({rotary})"},
        {RP_PE_ROPE, "linear_rope=1", "linear_rope before does nothing with softmax attention: "
                                      "it applies to linear attention with pe {linear_rotary}"},
        {RP_PE_NONE, "attention=1,linear_rope=1", "linear_rope before does nothing for pe none: "
                                                  "it applies to linear attention with pe "
                                                  "{linear_rotary}"},
        {RP_PE_ROPE, "attention=1,fraction_v=0.5", "fraction_v 0.5 does nothing for pe rope "
                                                   "rotating qk: it applies when v or o is "
                                                   "rotated"},
        {RP_PE_NONE, "learn_freq=1", "learn_freq true does nothing for pe none: it applies to "
                                     "the rotary modes ({rotary})"},
        {RP_PE_ROPE, "attention=1,learn_freq=1", "learn_freq true does nothing with linear "
                                                 "attention: it applies to softmax attention"},
        /* what applies, and defaults, are accepted */
        {RP_PE_SHAW, "base=10000,pairing=0,fraction_qk=1,rel_buckets=32", NULL},
        {RP_PE_ROPE, "rotate=12,fraction_v=0.5,fraction_o=0.25", NULL},
        {RP_PE_ROPE, "scaling=3,orig_len=64,yarn_alpha=2,yarn_beta=8", NULL},
        {RP_PE_ROPER, "attention=1,linear_rope=1,fraction_v=0.5", NULL},
        {RP_PE_DEBERTA, "rel_clip=4", NULL},
        {RP_PE_ROPE, "xpos=0.4,xpos_scale_base=64", NULL},
        {RP_PE_ROPER, "learn_freq=1", NULL},
        {RP_PE_SHAW, "learn_freq=0", NULL},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        rp_model_cfg c = small(cases[i].pe);
        char set[128];
        snprintf(set, sizeof set, "%s", cases[i].set);
        for (char *tok = strtok(set, ","); tok; tok = strtok(NULL, ",")) {
            char *eq = strchr(tok, '=');
            *eq = '\0';
            rp_model_cfg_set_num(&c, rp_model_cfg_key(tok, (size_t)-1), strtod(eq + 1, NULL));
        }
        CHECK_STATUS(rp_model_cfg_check(&c), RP_OK, cases[i].set);
        char msg[256];
        expect(rp_model_cfg_check_used(&c), cases[i].msg ? RP_ERR_ARG : RP_OK,
               cases[i].msg ? check_pe_msg(msg, sizeof msg, cases[i].msg) : "", cases[i].set);
    }
    /* the mode's own placements and the shared fractions are the unset ones */
    rp_model_cfg c = small(RP_PE_ROPER);
    c.pe.rotate = RP_ROT_ALL, c.pe.fraction_q = 1.0, c.pe.fraction_o = 1.0, c.pe.fraction_k = 0.5;
    rp_model_cfg_normalise(&c);
    CHECK(c.pe.rotate == 0 && c.pe.fraction_q == 0.0 && c.pe.fraction_o == 0.0 &&
              c.pe.fraction_k == 0.5,
          "normalised: rotate %d, fractions %g %g %g", c.pe.rotate, c.pe.fraction_q,
          c.pe.fraction_k, c.pe.fraction_o);
}

/* ---- format versions ----------------------------------------------------------------------- */

/* The tables of needs and rules: every use but "always" has a need, every key a rule names is a
 * row (rp_model_cfg_check looks them up), the rule and need templates fill in (the messages
 * themselves are test_used's and the rules' tests in test_model.c and config_spec), a coded rule
 * has a name, and a fact's values are named from 0 up. */
static void test_tables(void)
{
    printf("-- the tables of needs and rules\n");
    for (int use = RP_CFG_ROTARY; use <= RP_CFG_LINEAR_ROTARY; use++) {
        int n = 0;
        for (int i = 0; i < rp_model_cfg_nneeds; i++) n += rp_model_cfg_needs[i].uses >> use & 1;
        CHECK(n > 0, "use %d has no need", use);
    }
    for (int i = 0; i < rp_model_cfg_nrules; i++) {
        const rp_cfg_rule *r = &rp_model_cfg_rules[i];
        CHECK((r->check != NULL) == (r->run != NULL), "rule %d: a name and a function together",
              i);
        CHECK(r->check || (r->when[0] && r->why), "rule %d: a data rule needs when and why", i);
        for (int j = 0; j < 3 && r->when[j]; j++)
            CHECK(rp_model_cfg_key(r->when[j], (size_t)-1), "rule %d: no key %s", i, r->when[j]);
        for (int j = 0; j < 5 && r->unset[j]; j++)
            CHECK(rp_model_cfg_key(r->unset[j], (size_t)-1), "rule %d: no key %s", i, r->unset[j]);
    }
    for (int i = 0; i < rp_model_cfg_nkeys; i++)
        if (rp_model_cfg_keys[i].unset_as)
            CHECK(rp_model_cfg_key(rp_model_cfg_keys[i].unset_as, (size_t)-1), "%s: no key %s",
                  rp_model_cfg_keys[i].name, rp_model_cfg_keys[i].unset_as);
    char buf[256];
    rp_model_cfg c = rp_model_cfg_default(11);
    c.pe.mode = RP_PE_SHAW;
    CHECK(strcmp(rp_model_cfg_fill("for pe {pe}{linear}: {list} {scaling}", &c, "x or y", buf,
                                   sizeof buf), "for pe shaw: x or y none") == 0, "filled: %s",
          buf);
    CHECK(strcmp(rp_model_cfg_fill("for pe {pe} {list}", NULL, "a", buf, sizeof buf),
                 "for pe {pe} a") == 0, "unfilled: %s", buf);
    CHECK(strcmp(rp_model_cfg_fill("{pe}{pe}{pe}", &c, NULL, buf, 8), "shawsha") == 0,
          "cut: %s", buf);
    int counts[RP_FACT_COUNT] = {RP_PE_COUNT, 2, RP_ROT_ALL + 1, RP_SCALING_COUNT, 2};
    for (int f = 0; f < RP_FACT_COUNT; f++) {
        int n = 0;
        while (rp_model_cfg_fact_name((rp_cfg_fact)f, n, buf, sizeof buf)) n++;
        CHECK(n == counts[f], "fact %s: %d values, want %d", rp_model_cfg_fact_key((rp_cfg_fact)f),
              n, counts[f]);
    }
}

static void test_versions(void)
{
    printf("-- the format version a config needs\n");
    rp_model_cfg c = small(RP_PE_LEARNED);
    c.pe.base = 100.0, c.attention = RP_ATTN_SOFTMAX, c.seed = 99;
    CHECK(rp_model_cfg_version(&c) == 1, "version 1 fields: 1");
    c = small(RP_PE_ALIBI);
    CHECK(rp_model_cfg_version(&c) == 2, "a relative mode: 2");
    c = small(RP_PE_ROPE);
    c.rel.clip = 8;
    CHECK(rp_model_cfg_version(&c) == 2, "a version 2 field off its default: 2");
    c.freq.xpos = 0.4;
    CHECK(rp_model_cfg_version(&c) == 3, "a version 3 field: 3");
    c = small(RP_PE_ROPE);
    c.freq.factor = 2.0;
    CHECK(rp_model_cfg_version(&c) == 3, "a version 3 field that does nothing: 3");
    c = small(RP_PE_ROPE);
    c.freq.scaling = RP_SCALING_YARN, c.freq.factor = 2.0;
    CHECK(rp_model_cfg_version(&c) == 3, "scaling yarn: 3");
    c.freq.yarn_ramp = RP_YARN_RAMP_DIMS;
    CHECK(rp_model_cfg_version(&c) == 4, "yarn's ramp dims: 4");
    c = small(RP_PE_ROPER);
    c.freq.scaling = RP_SCALING_DYNAMIC, c.freq.factor = 2.0;
    CHECK(rp_model_cfg_version(&c) == 4, "scaling dynamic (a version 4 value): 4");
    c.freq.scaling = RP_SCALING_LLAMA3;
    CHECK(rp_model_cfg_version(&c) == 4, "scaling llama3: 4");
    c.freq.scaling = RP_SCALING_PI, c.freq.attention_factor = 1.5;
    CHECK(rp_model_cfg_version(&c) == 4, "attention_factor: 4");
    c = small(RP_PE_ROPE);
    c.learn_freq = 1;
    CHECK(rp_model_cfg_version(&c) == 5, "learn_freq: 5");
    c = small(RP_PE_NONE);
    c.tie_embeddings = 1;
    CHECK(rp_model_cfg_version(&c) == 6, "tie_embeddings (any mode): 6");
}

/* ---- the bool type ------------------------------------------------------------------------- */

static void test_bool(void)
{
    printf("-- a bool row (learn_freq): 0 or 1, named false and true\n");
    const rp_cfg_key *k = rp_model_cfg_key("learn_freq", (size_t)-1);
    if (!CHECK(k && k->type == RP_CFG_BOOL, "learn_freq is a bool row")) return;
    rp_model_cfg c = small(RP_PE_ROPE);
    char buf[32];
    CHECK(rp_model_cfg_is_default(&c, k) && rp_model_cfg_get_int(&c, k) == 0 &&
              !strcmp(rp_model_cfg_value_str(&c, k, buf, sizeof buf), "false"),
          "the default: false, got %s", buf);
    rp_model_cfg_set_int(&c, k, 1);
    CHECK(c.learn_freq == 1 && !rp_model_cfg_is_default(&c, k) &&
              rp_model_cfg_get_num(&c, k) == 1.0 &&
              !strcmp(rp_model_cfg_value_str(&c, k, buf, sizeof buf), "true"),
          "set to 1: the field 1, true, got %d %s", c.learn_freq, buf);
    CHECK_STATUS(rp_model_cfg_check_key(&c, k, 1), RP_OK, "true given");
    rp_model_cfg_set_num(&c, k, 0.0);
    CHECK(c.learn_freq == 0, "set_num 0: the field 0, got %d", c.learn_freq);
    CHECK_STATUS(rp_model_cfg_check_key(&c, k, 1), RP_OK, "false given");
    /* a value other than 0 or 1 is kept as it is (a stored one), and refused */
    rp_model_cfg_set_int(&c, k, 2);
    CHECK(c.learn_freq == 2 && !strcmp(rp_model_cfg_value_str(&c, k, buf, sizeof buf), "2"),
          "2 kept and written as 2, got %d %s", c.learn_freq, buf);
    expect(rp_model_cfg_check_key(&c, k, 0), RP_ERR_ARG,
           "learn_freq 2 is not false (0) or true (1)", "learn_freq 2");
}

/* ---- forged files -------------------------------------------------------------------------- */

static void put_le(uint8_t *b, uint64_t x, int n)
{
    for (int i = 0; i < n; i++) b[i] = (uint8_t)(x >> (8 * i));
}

static uint64_t fnv(const uint8_t *p, size_t n)
{
    uint64_t h = 14695981039346656037ULL;
    for (size_t i = 0; i < n; i++) h = (h ^ p[i]) * 1099511628211ULL;
    return h;
}

static void put_f64(uint8_t *b, double d)
{
    uint64_t u;
    memcpy(&u, &d, sizeof u);
    put_le(b, u, 8);
}

/* A model of c saved as a checkpoint at path, with bytes [at, at + n) replaced by the n bytes of
 * the little-endian value x (an int) or d (n = 8 and isdbl) and the checksum recomputed; loading
 * it must give RP_ERR_IO "path: bad model config: <msg>" and leave ck as it was. */
static void forged_checkpoint(const rp_model_cfg *c, uint32_t version, size_t at, int n,
                              int isdbl, int64_t x, double d, const char *msg)
{
    char path[128];
    snprintf(path, sizeof path, "%s/forged.ckpt", g_dir);
    rp_model *m = check_model_new(c);
    CHECK_STATUS(rp_checkpoint_save(path, m, NULL, NULL), RP_OK, msg);
    rp_model_free(m);
    size_t len = 0;
    uint8_t *b = check_read_bytes(path, &len);
    if (!CHECK(b && len > at + 8 && b[4] == version, "%s: a version %u file (got %d)", msg,
               version, b ? b[4] : -1)) {
        free(b);
        return;
    }
    if (isdbl) put_f64(b + at, d);
    else put_le(b + at, (uint64_t)x, n);
    put_le(b + len - 8, fnv(b, len - 8), 8);
    check_write_bytes(path, b, len);
    free(b);
    rp_checkpoint ck;
    memset(&ck, 0xA5, sizeof ck);
    rp_checkpoint before = ck;
    char want[512];
    snprintf(want, sizeof want, "%s: bad model config: %s", path, msg);
    expect(rp_checkpoint_load(path, &ck), RP_ERR_IO, want, msg);
    CHECK(!memcmp(&ck, &before, sizeof ck), "%s: the checkpoint struct untouched", msg);
    unlink(path);
}

static void test_forged_checkpoints(void)
{
    printf("-- forged checkpoints of each version (checksum recomputed)\n");
    /* version 1: the block at 16 (vocab .. max_batch int64, norm act pe pairing int32 at 72,
     * dropout fraction_qk fraction_v base at 88) */
    rp_model_cfg c = small(RP_PE_ROPE);
    forged_checkpoint(&c, 1, 104, 8, 1, 0, NAN, "fraction_v nan must be in (0, 1]");
    char msg[512];
    forged_checkpoint(&c, 1, 80, 4, 0, RP_PE_COUNT,
                      0, check_pe_msg(msg, sizeof msg, "pe {count} is not {values}"));
    c = small(RP_PE_LEARNED);
    forged_checkpoint(&c, 1, 84, 4, 0, 7, 0, "pairing 7 is not half (0) or interleaved (1)");
    forged_checkpoint(&c, 1, 112, 8, 1, 0, -1.0, "base must be a finite number > 0, got -1");
    /* version 2: pe shaw with fraction_qk nan (issue 29), a negative rel_clip of a rope model */
    c = small(RP_PE_SHAW);
    forged_checkpoint(&c, 2, 96, 8, 1, 0, NAN, "fraction_qk nan must be in (0, 1]");
    c = small(RP_PE_ROPE);
    c.pe.rotate = RP_ROT_V | RP_ROT_O;
    forged_checkpoint(&c, 2, 160, 8, 0, -1, 0, "rel_clip -1 must be in 1..65536");
    forged_checkpoint(&c, 2, 152, 8, 1, 0, 2.0, "fraction_o 2 must be in (0, 1]");
    /* version 3 (block at 184: scaling, kind, factor, orig_len, alpha, beta, xpos, scale base) */
    c = small(RP_PE_ROPE);
    c.freq.scaling = RP_SCALING_PI, c.freq.factor = 2.0;
    forged_checkpoint(&c, 3, 216, 8, 1, 0, -3.0, "yarn_beta must be a finite number >= 0, got -3");
    c = small(RP_PE_ROPER);
    c.freq.xpos = 0.4;
    forged_checkpoint(&c, 3, 208, 8, 1, 0, NAN, "yarn_alpha must be a finite number >= 0, got nan");
    forged_checkpoint(&c, 3, 184, 4, 0, 9, 0, "scaling 9 is not none (0), pi (1), ntk (2), "
                                              "yarn (3), dynamic (4) or llama3 (5)");
    forged_checkpoint(&c, 3, 200, 8, 0, -5, 0, "orig_len -5 must be in 0..2147483647");
    /* version 5 (block at 284 without a frequency table: learn_freq, then the positions) */
    c = small(RP_PE_ROPE);
    c.learn_freq = 1;
    forged_checkpoint(&c, 5, 284, 4, 0, 2, 0, "learn_freq 2 is not false (0) or true (1)");
    forged_checkpoint(&c, 5, 284, 4, 0, -1, 0, "learn_freq -1 is not false (0) or true (1)");
}

/* A safetensors file of a model of c with `from` in its roper.config replaced by `to` (the same
 * length; the config is a JSON string in the header, so its quotes are escaped: fraction_qk\":1,)
 * rp.load's reader and m:load_safetensors's both refuse it with "path: <msg>"; the model loaded
 * into keeps its weights. */
static void forged_safetensors(rp_model_cfg c, const char *from, const char *to, const char *msg)
{
    char path[128];
    snprintf(path, sizeof path, "%s/forged.safetensors", g_dir);
    rp_model *m = check_model_new(&c);
    CHECK_STATUS(rp_safetensors_save(path, m), RP_OK, NULL);
    size_t len = 0;
    uint8_t *b = check_read_bytes(path, &len);
    char *at = b ? strstr((char *)b + 8, from) : NULL;
    if (!CHECK(at && strlen(from) == strlen(to), "%s in the header", from)) {
        free(b);
        rp_model_free(m);
        return;
    }
    memcpy(at, to, strlen(to));
    check_write_bytes(path, b, len);
    free(b);
    char want[512];
    snprintf(want, sizeof want, "%s: %s", path, msg);
    rp_model *out = (rp_model *)&c; /* a marker: must stay */
    expect(rp_safetensors_load(path, &out), RP_ERR_IO, want, msg);
    CHECK(out == (rp_model *)&c, "%s: nothing built", msg);
    int64_t n = rp_model_param_count(m);
    float *keep = check_copy_floats(rp_model_params(m)->data, n);
    expect(rp_safetensors_load_into(path, m), RP_ERR_IO, want, msg);
    CHECK(!memcmp(keep, rp_model_params(m)->data, (size_t)n * sizeof(float)),
          "%s: the model loaded into is unchanged", msg);
    free(keep);
    rp_model_free(m);
    unlink(path);
}

static void test_forged_safetensors(void)
{
    printf("-- safetensors files with a bad roper.config\n");
    rp_model_cfg shaw = small(RP_PE_SHAW), rope = small(RP_PE_ROPE);
    forged_safetensors(shaw, "fraction_qk\\\":1,", "fraction_qk\\\":9,",
                       "bad model config: fraction_qk 9 must be in (0, 1]");
    forged_safetensors(shaw, "base\\\":10000,", "base\\\":-1000,",
                       "bad model config: base must be a finite number > 0, got -1000");
    forged_safetensors(shaw, "rel_clip\\\":16}", "rel_clip\\\":-1}",
                       "bad model config: rel_clip -1 must be in 1..65536");
    rope.learn_freq = 1;
    forged_safetensors(rope, "learn_freq\\\":true}", "learn_freq\\\":1234}",
                       "bad roper.config ('learn_freq' must be true or false, got a number)");
    forged_safetensors(rope, "learn_freq\\\":true}", "learn_freq\\\":null}",
                       "bad roper.config ('learn_freq' must be true or false, got null)");
}

static void test_writers(void)
{
    printf("-- the writers never write what the readers refuse\n");
    rp_model_cfg c = small(RP_PE_SHAW);
    c.pe.fraction_qk = NAN;
    char buf[2048];
    size_t n = rp_model_cfg_to_json(&c, buf, sizeof buf);
    CHECK(n == 0 && !strcmp(rp_last_error(), "fraction_qk nan must be in (0, 1]"),
          "no JSON for a nan: %zu bytes, \"%s\"", n, rp_last_error());
    c.pe.fraction_qk = 1.0;
    n = rp_model_cfg_to_json(&c, buf, sizeof buf);
    rp_model_cfg back;
    CHECK(n > 0 && n < sizeof buf && rp_model_cfg_from_json(buf, n, &back) == RP_OK &&
              rp_model_cfg_check(&back) == RP_OK && back.pe.mode == RP_PE_SHAW &&
              back.rel.clip == 16,
          "a good config reads back: %s", buf);
    /* learn_freq: JSON true when set (and read back), absent at its default, never 2 */
    c = small(RP_PE_ROPE);
    c.learn_freq = 1;
    n = rp_model_cfg_to_json(&c, buf, sizeof buf);
    memset(&back, 0, sizeof back);
    CHECK(n > 0 && n < sizeof buf && strstr(buf, ",\"learn_freq\":true}") &&
              rp_model_cfg_from_json(buf, n, &back) == RP_OK && back.learn_freq == 1,
          "learn_freq true reads back: %s", buf);
    c.learn_freq = 0;
    n = rp_model_cfg_to_json(&c, buf, sizeof buf);
    back.learn_freq = 1;
    CHECK(n > 0 && !strstr(buf, "learn_freq") && rp_model_cfg_from_json(buf, n, &back) == RP_OK &&
              back.learn_freq == 0,
          "learn_freq false: not written, reads back 0: %s", buf);
    const char *given = "{\"vocab\":5,\"d_model\":8,\"heads\":2,\"layers\":1,\"d_ff\":8,"
                        "\"seq_len\":4,\"norm\":\"pre\",\"activation\":\"relu\","
                        "\"pe\":\"rope\",\"fraction_qk\":1,\"fraction_v\":1,\"base\":10000,"
                        "\"pairing\":\"half\",\"attention\":\"softmax\","
                        "\"linear_rope\":\"after\",\"learn_freq\":false}";
    back.learn_freq = 1;
    CHECK(rp_model_cfg_from_json(given, strlen(given), &back) == RP_OK && back.learn_freq == 0,
          "learn_freq false given: 0 (%s)", rp_last_error());
    c.learn_freq = 2;
    n = rp_model_cfg_to_json(&c, buf, sizeof buf);
    CHECK(n == 0 && !strcmp(rp_last_error(), "learn_freq 2 is not false (0) or true (1)"),
          "no JSON for learn_freq 2: %zu bytes, \"%s\"", n, rp_last_error());
}

int main(void)
{
    snprintf(g_dir, sizeof g_dir, "/tmp/rp_schema_test.XXXXXX");
    if (!mkdtemp(g_dir)) {
        printf("FATAL: mkdtemp: %s\n", strerror(errno));
        return 2;
    }
    test_tables(); /* first: a rule naming no row would crash the checks below */
    test_rows();
    test_freq_column();
    test_linear_places();
    test_shown_names();
    test_ranges();
    test_used();
    test_versions();
    test_bool();
    test_forged_checkpoints();
    test_forged_safetensors();
    test_writers();
    CHECK(rmdir(g_dir) == 0, "removed %s: %s", g_dir, strerror(errno));
    return check_summary("test_model_schema");
}
