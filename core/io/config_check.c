/* rp_config_check_json: core's checks of a config given as JSON (config_check.h). */
#include "config_check.h"

#include <stdio.h>

#include "axes_plan.h"
#include "json.h"
#include "model.h"
#include "model_schema.h"
#include "plan.h"
#include "safetensors.h"

/* rp.model's check of each value a user gave (rp_model_cfg_check_key with given = 1, in row
 * order): the keys the object in json holds, their values in c. */
static rp_status check_given(const char *json, size_t n, const rp_model_cfg *c)
{
    rp_json_doc doc;
    rp_status st = rp_json_parse(&doc, json, n, 4096);
    int given[RP_CFG_MAX_KEYS] = {0};
    for (size_t m = st == RP_OK ? doc.nodes[0].first : RP_JSON_NONE; m != RP_JSON_NONE;
         m = doc.nodes[m].next) {
        const rp_cfg_key *k = rp_model_cfg_key(doc.strings + doc.nodes[m].key,
                                               doc.nodes[m].key_len);
        if (k) given[k - rp_model_cfg_keys] = 1;
    }
    rp_json_free(&doc);
    for (int i = 0; st == RP_OK && i < rp_model_cfg_nkeys; i++)
        if (given[i]) st = rp_model_cfg_check_key(c, &rp_model_cfg_keys[i], 1);
    return st;
}

/* The config in json read as `how` says (rp_config_check_json): *cfg the config, *p its plan. */
static rp_status read_config(const char *json, size_t n, int how, rp_model_cfg *cfg,
                             rp_model_plan *p)
{
    rp_status st;
    if (!json && n) return rp_error(RP_ERR_ARG, "rp_config_check_json: NULL json");
    if (how != RP_CONFIG_WRITTEN && how != RP_CONFIG_STORED)
        return rp_error(RP_ERR_ARG, "rp_config_check_json: how must be RP_CONFIG_WRITTEN or "
                                    "RP_CONFIG_STORED, got %d", how);
    if (how == RP_CONFIG_WRITTEN) {
        st = rp_model_cfg_from_json(json ? json : "", n, cfg);
        if (st == RP_OK) st = check_given(json ? json : "", n, cfg);
        if (st == RP_OK) st = rp_model_cfg_plan(cfg, p);
        return st;
    }
    if ((st = rp_model_cfg_from_json(json ? json : "", n, cfg)) != RP_OK)
        return rp_error_why(st, NULL, RP_BAD_ROPER_CONFIG);
    if ((st = rp_model_cfg_check(cfg)) != RP_OK)
        return rp_error_why(st, NULL, RP_BAD_MODEL_CONFIG ": {why}");
    p->scheme = rp_model_cfg_scheme(cfg); /* rp_model_cfg_plan's, for a checked config */
    p->half = rp_pe_scheme_half(&p->scheme);
    p->rows = cfg->seq_len;
    p->freq = rp_model_cfg_freq(cfg);
    return RP_OK;
}

/* The verdict st with its message into msg (rp_config_check_json's contract). */
static rp_status answer(rp_status st, char *msg, size_t msg_n)
{
    if (msg && msg_n) snprintf(msg, msg_n, "%s", st == RP_OK ? "" : rp_last_error());
    return st;
}

rp_status rp_config_check_json(const char *json, size_t n, int how, char *msg, size_t msg_n)
{
    rp_model_cfg cfg;
    rp_model_plan p;
    return answer(read_config(json, n, how, &cfg, &p), msg, msg_n);
}

/* rp_config_check_shown, its message in rp_last_error. */
static rp_status check_shown(const char *json, size_t n, const char *shown, size_t shown_n)
{
    rp_model_cfg cfg;
    if (!json || !shown) return rp_error(RP_ERR_ARG, "rp_config_check_shown: NULL json or shown");
    if (rp_model_cfg_from_json(json, n, &cfg) != RP_OK) return RP_OK; /* rp_config_check_json's */
    int given[RP_CFG_MAX_KEYS] = {0};
    const char *names[RP_CFG_MAX_KEYS] = {0};
    rp_json_doc cdoc, sdoc;
    rp_status st = rp_json_parse(&cdoc, json, n, 4096);
    if (st != RP_OK) {
        rp_json_free(&cdoc);
        return st;
    }
    st = rp_json_parse(&sdoc, shown, shown_n, 4096);
    for (size_t m = cdoc.nodes[0].first; st == RP_OK && m != RP_JSON_NONE; m = cdoc.nodes[m].next) {
        const rp_cfg_key *k = rp_model_cfg_key(cdoc.strings + cdoc.nodes[m].key,
                                               cdoc.nodes[m].key_len);
        if (k) given[k - rp_model_cfg_keys] = 1;
    }
    if (st == RP_OK && sdoc.nodes[0].type != RP_JSON_OBJECT)
        st = rp_error(RP_ERR_ARG, "rp_config_check_shown: shown must be a JSON object");
    for (size_t m = st == RP_OK ? sdoc.nodes[0].first : RP_JSON_NONE; m != RP_JSON_NONE;
         m = sdoc.nodes[m].next) {
        const rp_cfg_key *k = rp_model_cfg_key(sdoc.strings + sdoc.nodes[m].key,
                                               sdoc.nodes[m].key_len);
        if (!k || sdoc.nodes[m].type != RP_JSON_STRING) {
            st = rp_error(RP_ERR_ARG, "rp_config_check_shown: shown maps config keys to strings");
            break;
        }
        names[k - rp_model_cfg_keys] = sdoc.strings + sdoc.nodes[m].str;
    }
    if (st == RP_OK) st = rp_model_cfg_check_shown(&cfg, names, given);
    rp_json_free(&sdoc);
    rp_json_free(&cdoc);
    return st;
}

rp_status rp_config_check_shown(const char *json, size_t n, const char *shown, size_t shown_n,
                                char *msg, size_t msg_n)
{
    return answer(check_shown(json, n, shown, shown_n), msg, msg_n);
}

/* The own tables of t in f (theta, angles). */
static void own_tables(rp_rope_freq *f, const rp_config_tables *t)
{
    if (t->theta) f->theta = t->theta, f->n_theta = t->n_theta;
    if (t->angles) f->angles = t->angles, f->rows = t->rows, f->n_angles = t->n_angles;
}

/* The axes of t in f (rp.model's reader's: lrp_axes_tables). */
static void own_axes(rp_rope_freq *f, const rp_config_tables *t)
{
    f->axes.n = t->axes;
    f->axes.map = t->map >= 0 ? (rp_axes_map)t->map : RP_AXES_AXIAL;
    for (int a = 0; a < t->n_sections && a < RP_MAX_AXES; a++) f->axes.sections[a] = t->sections[a];
    if (t->mix) f->axes.mix = t->mix, f->axes.n_mix = t->n_mix;
}

static rp_status bad_tables(const rp_config_tables *t)
{
    if (!t) return rp_error(RP_ERR_ARG, "rp_config_check_tables: NULL tables");
    if ((t->theta && t->n_theta < 0) || (t->angles && (t->rows < 0 || t->n_angles < 0)) ||
        (t->pos && t->pos_rows < 0) || t->axes < 0 || t->axes > RP_MAX_AXES ||
        t->map < -1 || t->map >= RP_AXES_COUNT || t->n_sections < -1 ||
        t->n_sections > RP_MAX_AXES || (t->mix && (t->mix_rows < 0 || t->n_mix < 0)) ||
        (!t->mix && t->mix_rows != 0 && t->mix_rows != -1))
        return rp_error(RP_ERR_ARG, "rp_config_check_tables: a size out of its range");
    return RP_OK;
}

/* rp_config_check_tables, its message in rp_last_error. */
static rp_status check_tables(const char *json, size_t n, int how, const rp_config_tables *t)
{
    rp_model_cfg cfg;
    rp_model_plan p;
    RP_TRY(bad_tables(t));
    RP_TRY(read_config(json, n, how, &cfg, &p));
    /* the scheme with its own tables (lrp_freq_tables) */
    rp_rope_freq f = p.freq;
    own_tables(&f, t);
    RP_TRY(rp_rope_freq_check(&f));
    if (t->scheme_only) return RP_OK;
    /* the positions, their map and its table (lrp_axes_tables) */
    rp_axes_given g = {.map = t->map, .A = t->axes, .pos_given = t->pos != NULL,
                       .angles_given = t->angles != NULL};
    g.given[RP_AXES_SECTIONS] = t->n_sections >= 0, g.rows[RP_AXES_SECTIONS] = t->n_sections;
    int unread = !t->mix && t->mix_rows == -1; /* mix given, its values not read */
    g.given[RP_AXES_MIXED] = t->mix != NULL || unread, g.rows[RP_AXES_MIXED] = -1;
    RP_TRY(rp_axes_plan(RP_AXW_OPTION, &g));
    if (unread) return RP_OK;
    if (t->mix && (t->mix_rows != t->axes || t->n_mix != p.half))
        return rp_error(RP_ERR_SHAPE, "mix is [%lld x %lld]; [%d x %lld] expected (the positions' "
                                      "axes x d_rot/2)", (long long)t->mix_rows,
                        (long long)t->n_mix, t->axes, (long long)p.half);
    /* what the model would refuse: its own tables (rp_model_set_freq: the axes its own), then
     * its positions with their axes (rp_model_set_positions) */
    if (t->theta || t->angles) RP_TRY(rp_model_cfg_check_freq(&cfg, &f));
    if (!t->pos) return RP_OK;
    own_axes(&f, t);
    return rp_model_cfg_check_positions(&cfg, &f, t->pos, t->pos_rows);
}

rp_status rp_config_check_tables(const char *json, size_t n, int how, const rp_config_tables *t,
                                 char *msg, size_t msg_n)
{
    return answer(check_tables(json, n, how, t), msg, msg_n);
}

/* rp_config_check_scheme, its message in rp_last_error. */
static rp_status check_scheme(const char *json, size_t n, const rp_config_tables *t,
                              int64_t d_rot, int64_t last, const char *what)
{
    RP_TRY(bad_tables(t));
    if (!json && n) return rp_error(RP_ERR_ARG, "rp_config_check_scheme: NULL json");
    if (t->mix && t->axes >= 1 && t->mix_rows != t->axes) /* none: rp_rope_freq_check refuses */
        return rp_error(RP_ERR_SHAPE, "rp_config_check_scheme: mix holds %lld rows for %d axes",
                        (long long)t->mix_rows, t->axes);
    rp_model_cfg cfg = rp_model_cfg_default(0);
    RP_TRY(rp_model_cfg_keys_from_json(json ? json : "", n, &cfg));
    rp_rope_freq f = rp_model_cfg_freq(&cfg);
    f.orig_len = cfg.freq.orig_len; /* as given: 0 is none (no seq_len to fall back on) */
    own_tables(&f, t);
    own_axes(&f, t);
    RP_TRY(rp_rope_freq_check(&f));
    return rp_rope_freq_check_use(&f, d_rot, last, what ? what : "d_rot");
}

rp_status rp_config_check_scheme(const char *json, size_t n, const rp_config_tables *t,
                                 int64_t d_rot, int64_t last, const char *what, char *msg,
                                 size_t msg_n)
{
    return answer(check_scheme(json, n, t, d_rot, last, what), msg, msg_n);
}

rp_status rp_config_check_file(const char *path, char *msg, size_t msg_n)
{
    return answer(rp_safetensors_check(path), msg, msg_n);
}

size_t rp_config_tables_size(void) { return sizeof(rp_config_tables); }
