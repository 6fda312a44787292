/* The frequency options of the rotary calls (rp.rope.angles, rp.rope.rotate, rp.attention,
 * rp.model): the context extensions and xPos as numbers, and user frequencies (freq: a 1-D tensor
 * or a list of numbers) or angles (angles: a 2-D tensor, a list of lists, or a function(p, i)
 * sampled for positions p = 0 .. rows-1 and pairs i = 0 .. half-1), core/nn/rope_freq.h.
 *
 * Two phases, as args.h asks: lrp_optfreq reads every option (the scalars into the struct, the
 * table values into two stack slots); lrp_freq_tables, called when the caller knows the sizes,
 * copies the tables into one double userdata (and calls the function), then checks the scheme
 * with core's messages. The options of vector positions (axes, sections, mix: rp_rope_axes) are
 * read the same way by lrp_optaxes and lrp_axes_tables, the second once the positions' axes are
 * known. */
#include <math.h>
#include <stdio.h>
#include <stddef.h>
#include <string.h>

#include "args.h"
#include "freq.h"
#include "userdata.h"

/* The most entries a function is sampled for (2^24: a second or two of Lua calls). */
#define FREQ_MAX_SAMPLES ((int64_t)1 << 24)

/* The rows of the config schema that make up the frequency scheme (scaling and its parameters,
 * xpos and its scale base: the rows with a freq column): the keys lrp_optfreq reads. Not
 * learn_freq: it makes a model's frequencies parameters, which the functions without a model do
 * not have. */
static int is_freq_row(const rp_cfg_key *k) { return rp_model_cfg_scope(k) == RP_CFG_SCOPE_FREQ; }

/* ---- Hugging Face's rope_scaling table ---- */

/* The rope_type groups a field belongs to: a RP_READS_* bit (the scalings that read that
 * parameter group), or HF_SCORE: the scalings with a score factor of their own (YaRN's
 * temperature). */
#define HF_SCORE 256

/* The fields of a rope_scaling table roper reads (Hugging Face's config.json), in the order the
 * unknown-field message names them: the one home of the mapping (rp.scalings() exports it to the
 * PyTorch companion). group: the rope_types that read it (those of the scalings in that group:
 * Hugging Face's validation of each type); key: roper's config key its value sets (NULL for
 * mscale and mscale_all_dim, which give attention_factor); on, off: for a boolean field, the
 * key's values for true and false (absent: true's, Hugging Face's default); needed_by, need: the
 * RP_READS_* groups whose rope_type requires it, and the order of that requirement (fields of
 * one need are required together, the needs checked in that order). Every other field is a
 * finite number; an absent one leaves its key at the schema's default. */
typedef struct {
    const char *name;
    int group;
    const char *key;
    const char *on, *off;
    int needed_by, need;
} hf_field;
static const hf_field hf_fields[] = {
    {"factor", RP_READS_FACTOR, "scaling_factor", NULL, NULL, RP_READS_FACTOR, 1},
    {"original_max_position_embeddings", RP_READS_LEN, "orig_len", NULL, NULL, RP_READS_LLAMA3, 2},
    {"beta_fast", RP_READS_YARN, "yarn_beta", NULL, NULL, 0, 0},
    {"beta_slow", RP_READS_YARN, "yarn_alpha", NULL, NULL, 0, 0},
    {"low_freq_factor", RP_READS_LLAMA3, "low_freq_factor", NULL, NULL, RP_READS_LLAMA3, 3},
    {"high_freq_factor", RP_READS_LLAMA3, "high_freq_factor", NULL, NULL, RP_READS_LLAMA3, 3},
    {"attention_factor", HF_SCORE, "attention_factor", NULL, NULL, 0, 0},
    {"mscale", HF_SCORE, NULL, NULL, NULL, 0, 0},
    {"mscale_all_dim", HF_SCORE, NULL, NULL, NULL, 0, 0},
    {"truncate", RP_READS_YARN, "yarn_ramp", "dims", "dims_exact", 0, 0}};
#define HF_NFIELDS ((int)(sizeof hf_fields / sizeof hf_fields[0]))
#define HF_MAX_NEED 3

/* The rope_types roper names as not supported (LongRoPE's, and its older name), NULL-terminated:
 * the message LRP_M_HF_UNSUPPORTED instead of the list of the supported ones. */
static const char *const hf_unsupported[] = {"longrope", "su", NULL};

/* The groups of scaling s (its RP_READS_* bits, HF_SCORE when it has a score factor). */
static int hf_groups(rp_rope_scaling s)
{
    const rp_scaling_desc *d = rp_scaling_of(s);
    return d->reads | (d->score ? HF_SCORE : 0);
}

/* 1 when scaling s's rope_type reads field i (requires it, for needs). */
static int hf_reads(rp_rope_scaling s, int i) { return (hf_groups(s) & hf_fields[i].group) != 0; }
static int hf_requires(rp_rope_scaling s, int i)
{
    return (rp_scaling_of(s)->reads & hf_fields[i].needed_by) != 0;
}

/* The names of hf_fields, ", " between them, into buf (size n). */
static const char *hf_field_list(char *buf, size_t n)
{
    size_t at = 0;
    buf[0] = '\0';
    for (int i = 0; i < HF_NFIELDS && at < n; i++)
        at += (size_t)snprintf(buf + at, n - at, "%s%s", i ? ", " : "", hf_fields[i].name);
    return buf;
}

void lrp_set_hf_fields(lua_State *L, rp_rope_scaling s)
{
    lua_newtable(L);
    for (int i = 0, n = 0; i < HF_NFIELDS; i++)
        if (hf_reads(s, i)) {
            lua_pushstring(L, hf_fields[i].name);
            lua_rawseti(L, -2, ++n);
        }
    lua_setfield(L, -2, "hf_fields");
    lua_newtable(L);
    for (int need = 1, n = 0; need <= HF_MAX_NEED; need++) {
        int m = 0;
        for (int i = 0; i < HF_NFIELDS; i++)
            if (hf_fields[i].need == need && hf_requires(s, i)) {
                if (!m) lua_newtable(L);
                lua_pushstring(L, hf_fields[i].name);
                lua_rawseti(L, -2, ++m);
            }
        if (m) lua_rawseti(L, -2, ++n);
    }
    lua_setfield(L, -2, "hf_needs");
}

void lrp_push_hf_map(lua_State *L)
{
    lua_createtable(L, HF_NFIELDS, 0);
    for (int i = 0; i < HF_NFIELDS; i++) {
        const hf_field *f = &hf_fields[i];
        lua_createtable(L, 0, 4);
        lua_pushstring(L, f->name);
        lua_setfield(L, -2, "name");
        if (f->key) {
            const rp_cfg_key *k = rp_model_cfg_key(f->key, strlen(f->key));
            lua_pushstring(L, f->key);
            lua_setfield(L, -2, "key");
            if (k->type == RP_CFG_INT) {
                lua_pushinteger(L, (lua_Integer)k->hi);
                lua_setfield(L, -2, "max");
            }
        }
        if (f->on) {
            lua_pushstring(L, f->on);
            lua_setfield(L, -2, "on");
            lua_pushstring(L, f->off);
            lua_setfield(L, -2, "off");
        }
        lua_rawseti(L, -2, i + 1);
    }
}

/* The rope_type (or its older name type) of the rope_scaling table at t: the scaling whose row
 * names it (rope_freq.h's table). */
static int hf_type(lua_State *L, int idx, int t)
{
    lua_getfield(L, t, "rope_type");
    lua_getfield(L, t, "type");
    if (!lua_isnil(L, -2) && !lua_isnil(L, -1) && !lua_rawequal(L, -1, -2))
        lrp_opterror(L, idx, LRP_M_HF_DIFFER, LRP_MARKS(NULL));
    if (!lua_isnil(L, -2)) lua_pop(L, 1);
    if (lua_type(L, -1) != LUA_TSTRING)
        lrp_opterror(L, idx, LRP_M_HF_TYPE_STRING, LRP_MARKS([LRP_MK_GOT] = lrp_describe(L, -1)));
    const char *name = lua_tostring(L, -1);
    const char *types[RP_SCALING_COUNT];
    int n = 0;
    for (int i = 0; i < RP_SCALING_COUNT; i++) {
        const char *hf = rp_scaling_of((rp_rope_scaling)i)->hf;
        if (!hf) continue;
        if (strcmp(name, hf) == 0) {
            lua_pop(L, lua_gettop(L) - t);
            return i;
        }
        types[n++] = hf;
    }
    for (int i = 0; hf_unsupported[i]; i++)
        if (strcmp(name, hf_unsupported[i]) == 0)
            lrp_opterror(L, idx, LRP_M_HF_UNSUPPORTED, LRP_MARKS([LRP_MK_TYPE] = name));
    char list[128];
    return lrp_opterror(L, idx, LRP_M_HF_TYPE,
                        LRP_MARKS([LRP_MK_TYPE] = name,
                                  [LRP_MK_NAMES] = rp_join_names(list, sizeof list, types, n, 0)));
}

/* Every field of the rope_scaling table at t is one that scaling sc's rope_type reads. */
static void hf_check_fields(lua_State *L, int idx, int t, rp_rope_scaling sc)
{
    lua_pushnil(L);
    while (lua_next(L, t)) {
        lua_pop(L, 1);
        const char *key = lua_type(L, -1) == LUA_TSTRING ? lua_tostring(L, -1) : NULL;
        int at = -1;
        if (key && (strcmp(key, "rope_type") == 0 || strcmp(key, "type") == 0)) continue;
        for (int i = 0; key && at < 0 && i < HF_NFIELDS; i++)
            if (strcmp(key, hf_fields[i].name) == 0) at = i;
        if (at < 0) {
            char list[256];
            const char *field = key ? lua_pushfstring(L, "'%s'", key) : lrp_describe(L, -1);
            lrp_opterror(L, idx, LRP_M_HF_UNKNOWN,
                         LRP_MARKS([LRP_MK_FIELD] = field,
                                   [LRP_MK_NAMES] = hf_field_list(list, sizeof list)));
        }
        if (!hf_reads(sc, at))
            lrp_opterror(L, idx, LRP_M_HF_NOTHING,
                         LRP_MARKS([LRP_MK_FIELD] = key, [LRP_MK_TYPE] = rp_scaling_of(sc)->hf));
    }
}

/* YaRN's mscale (Hugging Face's get_mscale): 0.1 m ln s + 1 for s > 1, else 1. */
static double hf_mscale(double s, double m) { return s <= 1.0 ? 1.0 : 0.1 * m * log(s) + 1.0; }

/* cjson's null (a light userdata holding NULL): a config.json's "rope_scaling": null, or a null
 * field of it, is read as absent (as Hugging Face reads None). */
static int json_null(lua_State *L, int i)
{
    return lua_type(L, i) == LUA_TLIGHTUSERDATA && lua_touserdata(L, i) == NULL;
}

/* Field i of the rope_scaling table at t, read by its row (hf_fields): *given set; a number (an
 * integer from 1 to the key's hi for a key of integers: Hugging Face has no 0 for "absent") or,
 * for a field with on/off, a boolean (1 or 0). */
static double hf_read(lua_State *L, int idx, int t, int i, int *given)
{
    const hf_field *f = &hf_fields[i];
    const rp_cfg_key *k = f->key ? rp_model_cfg_key(f->key, strlen(f->key)) : NULL;
    lua_getfield(L, t, f->name);
    int type = lua_type(L, -1);
    double v = 0.0;
    *given = type != LUA_TNIL && !json_null(L, -1);
    if (f->on) {
        if (*given && type != LUA_TBOOLEAN)
            lrp_opterror(L, idx, LRP_M_HF_BOOLEAN,
                         LRP_MARKS([LRP_MK_FIELD] = f->name, [LRP_MK_GOT] = lrp_describe(L, -1)));
        v = !*given || lua_toboolean(L, -1);
    } else if (*given) {
        if (type != LUA_TNUMBER || !isfinite((double)lua_tonumber(L, -1)))
            lrp_opterror(L, idx, LRP_M_HF_NUMBER,
                         LRP_MARKS([LRP_MK_FIELD] = f->name, [LRP_MK_GOT] = lrp_describe(L, -1)));
        v = (double)lua_tonumber(L, -1);
        if (k && k->type == RP_CFG_INT && (v != floor(v) || v < 1.0 || v > k->hi)) {
            lua_pushnumber(L, (lua_Number)v);
            const char *got = lrp_describe(L, -1);
            const char *max = lua_pushfstring(L, "%I", (LUAI_UACINT)k->hi);
            lrp_opterror(L, idx, LRP_M_HF_INTEGER,
                         LRP_MARKS([LRP_MK_FIELD] = f->name, [LRP_MK_MAX] = max,
                                   [LRP_MK_GOT] = got));
        }
    }
    lua_pop(L, 1);
    return v;
}

/* The ranges and rules of the keys the fields of a rope_scaling table of scaling sc set in view
 * (given: which fields the table holds), checked in the fields' names ('beta_slow' for
 * yarn_alpha): rp_model_cfg_check_shown, LRP_M_HF_RANGE. */
static void hf_check_ranges(lua_State *L, int idx, const rp_model_cfg *view, rp_rope_scaling sc,
                            const int *given)
{
    char names[HF_NFIELDS][48];
    const char *shown[RP_CFG_MAX_KEYS] = {0};
    int set[RP_CFG_MAX_KEYS] = {0};
    for (int i = 0; i < HF_NFIELDS; i++) {
        const hf_field *f = &hf_fields[i];
        if (!f->key || !hf_reads(sc, i)) continue;
        int k = (int)(rp_model_cfg_key(f->key, strlen(f->key)) - rp_model_cfg_keys);
        snprintf(names[i], sizeof names[i], "'%s'", f->name);
        shown[k] = names[i];
        set[k] = given[i];
    }
    if (rp_model_cfg_check_shown(view, shown, set) != RP_OK)
        lrp_opterror(L, idx, LRP_M_HF_RANGE, LRP_MARKS([LRP_MK_WHAT] = rp_last_error()));
}

int lrp_opt_rope_scaling(lua_State *L, int idx, rp_model_cfg *view)
{
    if (lua_type(L, idx) != LUA_TTABLE) return 0;
    lua_getfield(L, idx, "rope_scaling");
    if (lua_isnil(L, -1) || json_null(L, -1)) {
        lua_pop(L, 1);
        return 0;
    }
    int t = lua_gettop(L);
    if (!lua_istable(L, t))
        lrp_opterror(L, idx, LRP_M_HF_TABLE, LRP_MARKS([LRP_MK_GOT] = lrp_describe(L, t)));
    for (int i = 0; i < rp_model_cfg_nkeys; i++) {
        const rp_cfg_key *k = &rp_model_cfg_keys[i];
        if (lrp_is_scaling_row(k) && lrp_hasopt(L, idx, k->name))
            lrp_opterror(L, idx, LRP_M_HF_EXCLUDE, LRP_MARKS([LRP_MK_KEY] = k->name));
    }
    rp_rope_scaling sc = (rp_rope_scaling)hf_type(L, idx, t);
    hf_check_fields(L, idx, t, sc);
    double v[HF_NFIELDS] = {0};
    int given[HF_NFIELDS] = {0};
    for (int i = 0; i < HF_NFIELDS; i++)
        if (hf_reads(sc, i)) v[i] = hf_read(L, idx, t, i, &given[i]);
    for (int need = 1; need <= HF_MAX_NEED; need++) {
        char list[128];
        const char *names[HF_NFIELDS];
        int n = 0, all = 1;
        for (int i = 0; i < HF_NFIELDS; i++)
            if (hf_fields[i].need == need && hf_requires(sc, i))
                names[n++] = hf_fields[i].name, all = all && given[i];
        if (!all) {
            size_t at = 0;
            list[0] = '\0';
            for (int j = 0; j < n && at < sizeof list; j++)
                at += (size_t)snprintf(list + at, sizeof list - at, "%s%s", j ? " and " : "",
                                       names[j]);
            lrp_opterror(L, idx, LRP_M_HF_NEEDS,
                         LRP_MARKS([LRP_MK_TYPE] = rp_scaling_of(sc)->hf, [LRP_MK_NAMES] = list));
        }
    }
    view->freq.scaling = sc;
    double factor = 1.0, ms = 0.0, msa = 0.0;
    int g_af = 0, g_ms = 0;
    for (int i = 0; i < HF_NFIELDS; i++) {
        const hf_field *f = &hf_fields[i];
        if (!hf_reads(sc, i)) continue;
        if (!f->key) { /* mscale, mscale_all_dim */
            if (strcmp(f->name, "mscale") == 0) ms = v[i], g_ms += given[i];
            else msa = v[i], g_ms += given[i];
            continue;
        }
        const rp_cfg_key *k = rp_model_cfg_key(f->key, strlen(f->key));
        if (f->on) {
            const char *value = v[i] != 0.0 ? f->on : f->off;
            for (int e = 0; k->names[e]; e++)
                if (strcmp(k->names[e], value) == 0) rp_model_cfg_set_int(view, k, e);
        } else if (given[i] && k->type == RP_CFG_INT) {
            rp_model_cfg_set_int(view, k, (int64_t)v[i]);
        } else if (given[i]) {
            rp_model_cfg_set_num(view, k, v[i]);
        }
        if (k->offset == offsetof(rp_model_cfg, freq.factor) && given[i]) factor = v[i];
        if (k->offset == offsetof(rp_model_cfg, freq.attention_factor)) g_af = given[i];
    }
    if (g_af && view->freq.attention_factor == 0.0)
        lrp_opterror(L, idx, LRP_M_HF_ZERO, LRP_MARKS(NULL));
    /* Hugging Face: attention_factor, else get_mscale(s, mscale) / get_mscale(s,
     * mscale_all_dim) when both are given (and not 0), else 0.1 ln s + 1 (roper's own: 0) */
    if (!g_af && g_ms == 2 && ms != 0.0 && msa != 0.0) {
        double af = hf_mscale(factor, ms) / hf_mscale(factor, msa);
        if (!(isfinite(af) && af > 0.0)) { /* (0 would read as the scaling's own) */
            lua_pushnumber(L, (lua_Number)af);
            lrp_opterror(L, idx, LRP_M_HF_MSCALE, LRP_MARKS([LRP_MK_GOT] = lrp_describe(L, -1)));
        }
        view->freq.attention_factor = af;
    }
    hf_check_ranges(L, idx, view, sc, given);
    lua_pop(L, 1);
    return 1;
}

double lrp_optbase(lua_State *L, int idx)
{
    int hf = lrp_hasopt(L, idx, "rope_theta");
    if (hf && lrp_hasopt(L, idx, "base")) lrp_opterror(L, idx, LRP_M_BASE_EXCLUDE, LRP_MARKS(NULL));
    const char *key = hf ? "rope_theta" : "base";
    double base = lrp_optfinite(L, idx, key, RP_ROPE_BASE);
    if (!(base > 0.0)) {
        lua_pushnumber(L, (lua_Number)base);
        lrp_opterror(L, idx, LRP_M_POSITIVE,
                     LRP_MARKS([LRP_MK_KEY] = key, [LRP_MK_GOT] = lrp_describe(L, -1)));
    }
    return base;
}

void lrp_optfreq(lua_State *L, int idx, rp_model_cfg *view, rp_rope_freq *f)
{
    int have = lua_type(L, idx) == LUA_TTABLE;
    int hf = lrp_opt_rope_scaling(L, idx, view); /* refuses the scaling rows beside it */
    for (int i = 0; i < rp_model_cfg_nkeys && have; i++)
        if (is_freq_row(&rp_model_cfg_keys[i])) lrp_optcfgkey(L, idx, view, &rp_model_cfg_keys[i]);
    if (rp_freq_plan_scalars(view, have && lrp_hasopt(L, idx, "orig_len"), hf, 0.0, f) != RP_OK)
        lrp_argerror(L, idx, "%s", rp_last_error());
    if (have) {
        lua_getfield(L, idx, "freq");
        lua_getfield(L, idx, "angles");
    } else {
        lua_pushnil(L);
        lua_pushnil(L);
    }
}

/* A finite number at the top of the stack (popped), or an error naming it: entry [a] ([a][b]
 * when b > 0; 1-based) of option key, or, key NULL, the value of option angles' function at
 * p = a, i = b. The name is made only for the error. */
static double take_number(lua_State *L, int idx, const char *key, int64_t a, int64_t b)
{
    int isnum = 0, top = lua_gettop(L);
    double v = (double)lua_tonumberx(L, -1, &isnum);
    if (!isnum || lua_type(L, -1) != LUA_TNUMBER || !isfinite(v)) {
        const char *what;
        if (key) {
            const char *index = b > 0 ? lua_pushfstring(L, "[%I][%I]", (LUAI_UACINT)a,
                                                        (LUAI_UACINT)b)
                                      : lua_pushfstring(L, "[%I]", (LUAI_UACINT)a);
            what = lrp_pushmsg(L, LRP_M_ENTRY, LRP_MARKS([LRP_MK_KEY] = key,
                                                          [LRP_MK_INDEX] = index));
        } else {
            const char *p = lua_pushfstring(L, "%I", (LUAI_UACINT)a);
            const char *i = lua_pushfstring(L, "%I", (LUAI_UACINT)b);
            what = lrp_pushmsg(L, LRP_M_ANGLES_VALUE, LRP_MARKS([LRP_MK_P] = p, [LRP_MK_I] = i));
        }
        const char *got = lrp_describe(L, top);
        lrp_opterror(L, idx, LRP_M_FINITE_NUMBER, LRP_MARKS([LRP_MK_WHAT] = what,
                                                             [LRP_MK_GOT] = got));
    }
    lua_pop(L, 1);
    return v;
}

/* A table option of numbers: its key, 1 (a list) or 2 dims (a list of lists), the shape the
 * messages name, what else it may be, and what its rows hold. */
typedef struct {
    const char *key;
    int nd;
    const char *shape, *forms, *noun;
} table_opt;

static const table_opt OPT_FREQ = {"freq", 1, "[n]", " of numbers", NULL};
static const table_opt OPT_ANGLES = {"angles", 2, "[positions x n]",
                                     " of lists or a function(p, i)", "angles"};
static const table_opt OPT_MIX = {"mix", 2, "[axes x pairs]", " of lists", "frequencies"};

/* The sizes of the value at slot: a tensor (1-D or 2-D as o says) or a list (of lists). Both are
 * >= 1 on return (an empty tensor or list raises, [3 x 0] as {{}, {}, {}}). */
static void table_sizes(lua_State *L, int idx, int slot, const table_opt *o, int64_t *n0,
                        int64_t *n1)
{
    rp_tensor *t = lrp_totensor(L, slot);
    const char *key = o->key;
    int nd = o->nd;
    *n1 = 1;
    if (t) {
        if (!t->storage) lrp_argerror(L, idx, "option '%s': attempt to use a released tensor", key);
        if (t->ndim != nd) {
            char buf[RP_SHAPE_STR_LEN];
            lrp_opterror(L, idx, LRP_M_TABLE_TENSOR,
                         LRP_MARKS([LRP_MK_KEY] = key, [LRP_MK_DIMS] = lua_pushfstring(L, "%d", nd),
                                   [LRP_MK_SHAPE] = o->shape,
                                   [LRP_MK_GOT] = lrp_shape_str(buf, t)));
        }
        *n0 = t->shape[0];
        if (nd == 2) *n1 = t->shape[1];
    } else if (lua_type(L, slot) != LUA_TTABLE) {
        lrp_opterror(L, idx, LRP_M_TABLE_KIND,
                     LRP_MARKS([LRP_MK_KEY] = key, [LRP_MK_FORMS] = o->forms,
                               [LRP_MK_GOT] = lrp_describe(L, slot)));
    } else {
        *n0 = (int64_t)lua_rawlen(L, slot);
        if (nd == 2 && *n0 > 0) {
            lua_rawgeti(L, slot, 1);
            if (lua_type(L, -1) != LUA_TTABLE)
                lrp_opterror(L, idx, LRP_M_TABLE_FIRST,
                             LRP_MARKS([LRP_MK_KEY] = key, [LRP_MK_NOUN] = o->noun,
                                       [LRP_MK_GOT] = lrp_describe(L, -1)));
            *n1 = (int64_t)lua_rawlen(L, -1);
            lua_pop(L, 1);
        }
    }
    /* a tensor with a 0 in its shape too (its [4 x 0] once divided by 0 below) */
    if (*n0 < 1 || *n1 < 1) lrp_opterror(L, idx, LRP_M_TABLE_EMPTY, LRP_MARKS([LRP_MK_KEY] = key));
}

/* Copies the value at slot (sizes n0 x n1, from table_sizes) into dst as doubles. */
static void copy_table(lua_State *L, int idx, int slot, const table_opt *o, double *dst,
                       int64_t n0, int64_t n1)
{
    rp_tensor *t = lrp_totensor(L, slot);
    const char *key = o->key;
    int nd = o->nd;
    if (t) { /* fetched again after the allocation; no Lua call until the copy ends */
        if (!t->storage) lrp_argerror(L, idx, "option '%s': attempt to use a released tensor", key);
        const float *d = rp_tensor_data(t);
        for (int64_t a = 0; a < n0; a++)
            for (int64_t b = 0; b < n1; b++)
                dst[a * n1 + b] = (double)d[a * t->stride[0] + (nd == 2 ? b * t->stride[1] : 0)];
        return;
    }
    for (int64_t a = 0; a < n0; a++) {
        if (nd == 1) {
            lua_rawgeti(L, slot, (lua_Integer)(a + 1));
            dst[a] = take_number(L, idx, key, a + 1, 0);
            continue;
        }
        lua_rawgeti(L, slot, (lua_Integer)(a + 1));
        if (lua_type(L, -1) != LUA_TTABLE || (int64_t)lua_rawlen(L, -1) != n1) {
            const char *got = lrp_describe(L, -1);
            lrp_opterror(L, idx, LRP_M_TABLE_ROW,
                         LRP_MARKS([LRP_MK_KEY] = key,
                                   [LRP_MK_ROW] = lua_pushfstring(L, "%I", (LUAI_UACINT)(a + 1)),
                                   [LRP_MK_N] = lua_pushfstring(L, "%I", (LUAI_UACINT)n1),
                                   [LRP_MK_NOUN] = o->noun, [LRP_MK_GOT] = got));
        }
        for (int64_t b = 0; b < n1; b++) {
            lua_rawgeti(L, -1, (lua_Integer)(b + 1));
            dst[a * n1 + b] = take_number(L, idx, key, a + 1, b + 1);
        }
        lua_pop(L, 1);
    }
}

void lrp_freq_tables(lua_State *L, int idx, int slot, rp_rope_freq *f, int64_t rows, int64_t half)
{
    int has_freq = !lua_isnil(L, slot), has_ang = !lua_isnil(L, slot + 1);
    if (has_freq && has_ang) lrp_opterror(L, idx, LRP_M_FREQ_BOTH, LRP_MARKS(NULL));
    if (has_freq) {
        int64_t n0, n1;
        table_sizes(L, idx, slot, &OPT_FREQ, &n0, &n1);
        double *d = (double *)lua_newuserdatauv(L, (size_t)n0 * sizeof(double), 0);
        copy_table(L, idx, slot, &OPT_FREQ, d, n0, 1);
        f->theta = d, f->n_theta = n0;
    } else if (has_ang && lua_type(L, slot + 1) == LUA_TFUNCTION) {
        if (half < 1) lrp_opterror(L, idx, LRP_M_ANGLES_NOTHING, LRP_MARKS(NULL));
        if (rows < 1 || rows > FREQ_MAX_SAMPLES / half)
            lrp_opterror(L, idx, LRP_M_ANGLES_CALLS,
                         LRP_MARKS([LRP_MK_ROWS] = lua_pushfstring(L, "%I", (LUAI_UACINT)rows),
                                   [LRP_MK_HALF] = lua_pushfstring(L, "%I", (LUAI_UACINT)half)));
        double *d = (double *)lua_newuserdatauv(L, (size_t)(rows * half) * sizeof(double), 0);
        int ud = lua_gettop(L);
        for (int64_t p = 0; p < rows; p++)
            for (int64_t i = 0; i < half; i++) {
                lua_pushvalue(L, slot + 1);
                lua_pushinteger(L, (lua_Integer)p);
                lua_pushinteger(L, (lua_Integer)i);
                lua_call(L, 2, 1);
                d[p * half + i] = take_number(L, idx, NULL, p, i);
            }
        lua_settop(L, ud);
        f->angles = d, f->rows = rows, f->n_angles = half;
    } else if (has_ang) {
        int64_t n0, n1;
        table_sizes(L, idx, slot + 1, &OPT_ANGLES, &n0, &n1);
        int64_t cells;
        if (!rp_mul_i64(n0, n1, &cells) || cells > RP_MAX_NUMEL)
            lrp_argerror(L, idx, "option 'angles' is too large");
        double *d = (double *)lua_newuserdatauv(L, (size_t)cells * sizeof(double), 0);
        copy_table(L, idx, slot + 1, &OPT_ANGLES, d, n0, n1);
        f->angles = d, f->rows = n0, f->n_angles = n1;
    } else {
        lua_pushnil(L); /* the slot the caller keeps either way */
    }
    if (rp_rope_freq_check(f) != RP_OK) lrp_argerror(L, idx, "%s", rp_last_error());
}

/* ---- vector positions ---- */

void lrp_optaxes(lua_State *L, int idx, lrp_axes_opts *o)
{
    memset(o, 0, sizeof *o);
    o->map = lrp_optenum(L, idx, "axes", rp_axes_names, -1);
    o->n_sections = -1;
    int have = lua_type(L, idx) == LUA_TTABLE;
    if (have && lua_getfield(L, idx, "sections") != LUA_TNIL) {
        int t = lua_gettop(L);
        lua_Unsigned n = lua_type(L, t) == LUA_TTABLE ? lua_rawlen(L, t) : 0;
        if (lua_type(L, t) != LUA_TTABLE || n < 1 || n > RP_MAX_AXES)
            lrp_opterror(L, idx, LRP_M_SECTIONS,
                         LRP_MARKS([LRP_MK_MAX] = lua_pushfstring(L, "%d", RP_MAX_AXES),
                                   [LRP_MK_GOT] = lrp_describe(L, t)));
        for (lua_Unsigned i = 0; i < n; i++) {
            lua_Integer v = 0;
            lua_rawgeti(L, t, (lua_Integer)i + 1);
            if (!lrp_tointeger(L, -1, &v) || v < 0 || v > RP_MAX_NUMEL) {
                const char *got = lrp_describe(L, -1);
                const char *row = lua_pushfstring(L, "%I", (LUAI_UACINT)(i + 1));
                lrp_opterror(L, idx, LRP_M_SECTIONS_ENTRY,
                             LRP_MARKS([LRP_MK_ROW] = row, [LRP_MK_GOT] = got));
            }
            lua_pop(L, 1);
            o->sections[i] = (int64_t)v;
        }
        o->n_sections = (int)n;
    }
    if (have) lua_pop(L, 1);
    if (have) lua_getfield(L, idx, "mix");
    else lua_pushnil(L);
    o->slot = lua_gettop(L);
}

void lrp_axes_tables(lua_State *L, int idx, const lrp_axes_opts *o, int A, int pos_given,
                     int64_t half, int angles_given, rp_rope_freq *f)
{
    int has_mix = !lua_isnil(L, o->slot);
    /* the rules: core's planner, in rp.model's wording; mix's rows are checked with its width
     * below */
    rp_axes_given g = {.map = o->map, .A = A, .pos_given = pos_given, .angles_given = angles_given};
    g.given[RP_AXES_SECTIONS] = o->n_sections >= 0, g.rows[RP_AXES_SECTIONS] = o->n_sections;
    g.given[RP_AXES_MIXED] = has_mix, g.rows[RP_AXES_MIXED] = -1;
    if (rp_axes_plan(RP_AXW_OPTION, &g) != RP_OK) lrp_argerror(L, idx, "%s", rp_last_error());
    rp_axes_map map = o->map >= 0 ? (rp_axes_map)o->map : RP_AXES_AXIAL;
    f->axes.n = A, f->axes.map = map;
    for (int a = 0; a < o->n_sections; a++) f->axes.sections[a] = o->sections[a];
    if (!has_mix) {
        lua_pushnil(L); /* the slot the caller keeps either way */
        return;
    }
    int64_t n0, n1;
    table_sizes(L, idx, o->slot, &OPT_MIX, &n0, &n1);
    if (n0 != A || n1 != half)
        lrp_opterror(L, idx, LRP_M_MIX_SIZE,
                     LRP_MARKS([LRP_MK_ROWS] = lua_pushfstring(L, "%I", (LUAI_UACINT)n0),
                               [LRP_MK_N] = lua_pushfstring(L, "%I", (LUAI_UACINT)n1),
                               [LRP_MK_A] = lua_pushfstring(L, "%d", A),
                               [LRP_MK_HALF] = lua_pushfstring(L, "%I", (LUAI_UACINT)half)));
    double *d = (double *)lua_newuserdatauv(L, (size_t)(n0 * n1) * sizeof(double), 0);
    copy_table(L, idx, o->slot, &OPT_MIX, d, n0, n1);
    f->axes.mix = d, f->axes.n_mix = n1;
}

int lrp_option_messages(lua_State *L)
{
    static const table_opt *const tables[] = {&OPT_FREQ, &OPT_ANGLES, &OPT_MIX};
    lua_settop(L, 0);
    lua_createtable(L, 0, 4);
    lrp_push_msgs(L, lrp_msgs, LRP_M_COUNT, NULL, NULL, 0);
    lua_setfield(L, -2, "messages");
    lua_createtable(L, 0, 3);
    for (size_t i = 0; i < sizeof tables / sizeof tables[0]; i++) {
        const table_opt *o = tables[i];
        lua_createtable(L, 0, 4);
        lua_pushinteger(L, o->nd);
        lua_setfield(L, -2, "dims");
        lrp_setstr(L, "shape", o->shape);
        lrp_setstr(L, "forms", o->forms);
        lrp_setstr(L, "noun", o->noun);
        lua_setfield(L, -2, o->key);
    }
    lua_setfield(L, -2, "tables");
    lua_createtable(L, 0, 3);
    lua_pushinteger(L, RP_MAX_AXES);
    lua_setfield(L, -2, "max_axes");
    lua_pushinteger(L, (lua_Integer)LRP_MAX_POS);
    lua_setfield(L, -2, "max_pos");
    lua_pushinteger(L, (lua_Integer)FREQ_MAX_SAMPLES);
    lua_setfield(L, -2, "max_samples");
    lua_setfield(L, -2, "bounds");
    lua_newtable(L);
    for (int i = 0; hf_unsupported[i]; i++) {
        lua_pushstring(L, hf_unsupported[i]);
        lua_rawseti(L, -2, i + 1);
    }
    lua_setfield(L, -2, "hf_unsupported");
    return 1;
}

int lrp_optxposside(lua_State *L, int idx)
{
    lua_Integer side = lrp_optinteger(L, idx, "xpos_side", 1);
    if (side != 1 && side != -1)
        lrp_argerror(L, idx, "option 'xpos_side' must be 1 (query side) or -1 (key side), got %I",
                     (LUAI_UACINT)side);
    return (int)side;
}

int lrp_hf_rope_keys(lua_State *L)
{
    luaL_checktype(L, 1, LUA_TTABLE);
    rp_model_cfg view = rp_model_cfg_default(1), plain = view;
    if (lrp_hasopt(L, 1, "rope_theta")) view.pe.base = lrp_optbase(L, 1);
    lrp_opt_rope_scaling(L, 1, &view);
    lua_newtable(L);
    for (int i = 0; i < rp_model_cfg_nkeys; i++) {
        const rp_cfg_key *k = &rp_model_cfg_keys[i];
        if (rp_model_cfg_get_int(&view, k) == rp_model_cfg_get_int(&plain, k) &&
            rp_model_cfg_get_num(&view, k) == rp_model_cfg_get_num(&plain, k))
            continue;
        if (k->type == RP_CFG_ENUM) lua_pushstring(L, k->names[rp_model_cfg_get_int(&view, k)]);
        else if (k->type == RP_CFG_INT)
            lua_pushinteger(L, (lua_Integer)rp_model_cfg_get_int(&view, k));
        else lua_pushnumber(L, (lua_Number)rp_model_cfg_get_num(&view, k));
        lua_setfield(L, -2, k->name);
    }
    return 1;
}

/* ---- positions ---- */

/* An integral value within 2^53 at the top of the stack (popped) into *out, or an error naming
 * what[i] (1-based; [i][j] for a vector position when j > 0). */
static void take_position(lua_State *L, int arg, const char *what, int64_t i, int64_t j,
                          int64_t *out)
{
    lua_Integer v = 0;
    if (!lrp_tointeger(L, -1, &v) || v < -LRP_MAX_POS || v > LRP_MAX_POS) {
        const char *got = lrp_describe(L, -1);
        const char *index = j > 0 ? lua_pushfstring(L, "[%I][%I]", (LUAI_UACINT)i, (LUAI_UACINT)j)
                                  : lua_pushfstring(L, "[%I]", (LUAI_UACINT)i);
        lrp_opterror(L, arg, LRP_M_POS_INTEGER,
                     LRP_MARKS([LRP_MK_WHAT] = what, [LRP_MK_INDEX] = index, [LRP_MK_GOT] = got));
    }
    lua_pop(L, 1);
    *out = (int64_t)v;
}

int64_t *lrp_read_positions(lua_State *L, int arg, int idx, const char *what, int allow_number,
                            int *axes, int64_t *n)
{
    idx = lua_absindex(L, idx);
    char buf[RP_SHAPE_STR_LEN];
    if (axes) *axes = 0;
    if (allow_number && lua_type(L, idx) == LUA_TNUMBER) {
        lua_Integer v = 0;
        if (!lrp_tointeger(L, idx, &v) || v < -LRP_MAX_POS || v > LRP_MAX_POS)
            lrp_opterror(L, arg, LRP_M_POS_INTEGER,
                         LRP_MARKS([LRP_MK_WHAT] = what, [LRP_MK_INDEX] = "",
                                   [LRP_MK_GOT] = lrp_describe(L, idx)));
        int64_t *p = (int64_t *)lua_newuserdatauv(L, sizeof(int64_t), 0);
        p[0] = (int64_t)v;
        *n = 1;
        return p;
    }
    if (lua_type(L, idx) == LUA_TTABLE) {
        lua_Unsigned len = lua_rawlen(L, idx);
        if (len > (lua_Unsigned)RP_MAX_NUMEL) lrp_argerror(L, arg, "too many %s", what);
        int A = 1;
        if (axes && len > 0 && lua_rawgeti(L, idx, 1) == LUA_TTABLE) { /* a list of lists */
            lua_Unsigned w = lua_rawlen(L, -1);
            if (w < 1 || w > RP_MAX_AXES)
                lrp_opterror(L, arg, LRP_M_POS_AXES,
                             LRP_MARKS([LRP_MK_WHAT] = what,
                                       [LRP_MK_N] = lua_pushfstring(L, "%I", (LUAI_UACINT)w),
                                       [LRP_MK_MAX] = lua_pushfstring(L, "%d", RP_MAX_AXES)));
            A = *axes = (int)w;
        }
        if (axes && len > 0) lua_pop(L, 1);
        if (len > (lua_Unsigned)(RP_MAX_NUMEL / A)) lrp_argerror(L, arg, "too many %s", what);
        int64_t *p = (int64_t *)lua_newuserdatauv(
            L, (size_t)(len ? len * (lua_Unsigned)A : 1) * sizeof(int64_t), 0);
        for (lua_Unsigned i = 0; i < len; i++) {
            lua_rawgeti(L, idx, (lua_Integer)i + 1);
            if (axes && *axes) {
                if (lua_type(L, -1) != LUA_TTABLE || lua_rawlen(L, -1) != (lua_Unsigned)A) {
                    const char *got = lrp_describe(L, -1);
                    const char *row = lua_pushfstring(L, "%I", (LUAI_UACINT)(i + 1));
                    lrp_opterror(L, arg, LRP_M_POS_ROW,
                                 LRP_MARKS([LRP_MK_WHAT] = what, [LRP_MK_ROW] = row,
                                           [LRP_MK_N] = lua_pushfstring(L, "%d", A),
                                           [LRP_MK_GOT] = got));
                }
                for (int a = 0; a < A; a++) {
                    lua_rawgeti(L, -1, a + 1);
                    take_position(L, arg, what, (int64_t)i + 1, a + 1, &p[(int64_t)i * A + a]);
                }
                lua_pop(L, 1);
            } else {
                take_position(L, arg, what, (int64_t)i + 1, 0, &p[i]);
            }
        }
        *n = (int64_t)len;
        return p;
    }
    if (lrp_totensor(L, idx)) {
        rp_tensor *t = lrp_checktensor(L, idx);
        if (t->ndim != 1 && !(axes && t->ndim == 2))
            lrp_argerror(L, arg, "%s must be a 1-D tensor%s, got %s", what,
                         axes ? " or [n x axes]" : "", lrp_shape_str(buf, t));
        int64_t len = t->shape[0], A = t->ndim == 2 ? t->shape[1] : 1;
        if (t->ndim == 2 && (A < 1 || A > RP_MAX_AXES))
            lrp_argerror(L, arg, "%s %s: 1 to %d axes expected", what, lrp_shape_str(buf, t),
                         RP_MAX_AXES);
        if (t->ndim == 2) *axes = (int)A;
        int64_t *p =
            (int64_t *)lua_newuserdatauv(L, (size_t)(len ? len * A : 1) * sizeof(int64_t), 0);
        t = lrp_checktensor(L, idx); /* again after the allocation */
        const float *d = rp_tensor_data(t);
        for (int64_t i = 0; i < len; i++)
            for (int64_t a = 0; a < A; a++) {
                lua_pushnumber(L, (lua_Number)d[i * t->stride[0] +
                                                 (t->ndim == 2 ? a * t->stride[1] : 0)]);
                take_position(L, arg, what, i + 1, t->ndim == 2 ? a + 1 : 0, &p[i * A + a]);
            }
        *n = len;
        return p;
    }
    lrp_opterror(L, arg, LRP_M_POS_KIND,
                 LRP_MARKS([LRP_MK_WHAT] = what,
                           [LRP_MK_LISTS] = axes ? lrp_msgs[LRP_M_POS_LISTS].text : "",
                           [LRP_MK_MATRIX] = axes ? lrp_msgs[LRP_M_POS_MATRIX].text : "",
                           [LRP_MK_NUMBER] = allow_number ? lrp_msgs[LRP_M_POS_NUMBER].text : "",
                           [LRP_MK_GOT] = lrp_describe(L, idx)));
    return NULL;
}
