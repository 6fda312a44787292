/* roper.Model: the transformer of core/model/model.h (rp.model, rp.model_memory), the userdata's
 * lifetime and tostring, its config (m:config) and parameters as tensor views (m:params, m:grads),
 * checkpoints (m:save, rp.load), and the registration of every method. Running the model
 * (forward, loss, train_step, generate, introspection) is in model_run.c, safetensors files
 * (m:save_safetensors, m:load_safetensors, and rp.load for them and for .npy files) in interop.c
 * (model_methods.h).
 *
 * The userdata holds the rp_model pointer (NULL before rp_model_new succeeds and after
 * m:free(), __gc or __close). Every argument is checked here before core runs: the config table
 * (read by the rows of core's config schema, core/config/model_schema.h: types and names here, the
 * ranges too; then core's plan, rp_model_cfg_plan of core/config/plan.h: the rules between fields,
 * the keys that do nothing, the widths of the user's tables, whose messages become the `bad
 * argument` text), options. File errors
 * of m:save and rp.load are returned as nil, "path: reason" (Lua io style); misuse raises.
 */
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "args.h"
#include "freq.h"
#include "model_methods.h"
#include "roper.h"
#include "userdata.h"

/* ---- the userdata ---- */

/* __gc, __close and m:free(): free the model; safe on a released model and when called twice.
 * Tensor views of its parameters keep their storage. */
static int m_release(lua_State *L)
{
    lrp_model *u = (lrp_model *)luaL_testudata(L, 1, LRP_MODEL_MT);
    if (u && u->m) {
        rp_model_free(u->m);
        u->m = NULL;
    }
    return 0;
}

/* A parameter count the way the write-up prints it: below 1000 exactly ("640"); below 100K in
 * thousands with one decimal ("12.3K"); below 10M in millions with one decimal ("0.6M", "2.4M");
 * from 10M in whole millions ("20M"). Thresholds apply to the rounded value. */
static const char *count_str(char *buf, size_t len, int64_t n)
{
    double x = (double)n;
    if (n < 1000) snprintf(buf, len, "%lld", (long long)n);
    else if (x < 99950.0) snprintf(buf, len, "%.1fK", x / 1e3);
    else if (x < 9.95e6) snprintf(buf, len, "%.1fM", x / 1e6);
    else snprintf(buf, len, "%.0fM", x / 1e6);
    return buf;
}

/* tostring(m): "roper.Model: 0.6M parameters (d_model 128, 4 heads, 3 layers, d_ff 512,
 * seq_len 512, pe roper, pre-norm)", with ", linear attention" for linear attention and the
 * frequency scheme after the pe ("pe roper yarn x4 xpos 0.4", "pe rope own angles", "pe roper
 * 2-D axial positions"). */
static int m_tostring(lua_State *L)
{
    lrp_model *u = (lrp_model *)lrp_checkudata(L, 1, LRP_MODEL_MT);
    if (u->m == NULL) {
        lua_pushliteral(L, "roper.Model (released)");
        return 1;
    }
    const rp_model_cfg *c = rp_model_config(u->m);
    char count[32], rot[5], fs[96] = "";
    count_str(count, sizeof count, rp_model_param_count(u->m));
    const rp_rope_freq *f = rp_model_freq(u->m);
    size_t k = 0;
    if (c->freq.scaling != RP_SCALING_NONE)
        k += (size_t)snprintf(fs + k, sizeof fs - k, " %s x%g", rp_scaling_names[c->freq.scaling],
                              c->freq.factor);
    if (c->freq.xpos > 0.0 && k < sizeof fs)
        k += (size_t)snprintf(fs + k, sizeof fs - k, " xpos %g", c->freq.xpos);
    if ((f->theta || f->angles) && k < sizeof fs)
        k += (size_t)snprintf(fs + k, sizeof fs - k, " own %s",
                              f->theta ? "frequencies" : "angles");
    if (rp_model_positions(u->m, NULL) && k < sizeof fs) {
        if (f->axes.n > 0)
            snprintf(fs + k, sizeof fs - k, " %d-D %s positions", f->axes.n,
                     rp_axes_names[f->axes.map]);
        else snprintf(fs + k, sizeof fs - k, " own positions");
    }
    lua_pushfstring(L,
                    "roper.Model: %s parameters (d_model %I, %I head%s, %I layer%s, d_ff %I, "
                    "seq_len %I, pe %s%s%s%s, %s-norm%s%s)",
                    count, (LUAI_UACINT)c->d_model, (LUAI_UACINT)c->heads, c->heads == 1 ? "" : "s",
                    (LUAI_UACINT)c->layers, c->layers == 1 ? "" : "s", (LUAI_UACINT)c->d_ff,
                    (LUAI_UACINT)c->seq_len, rp_pe_name(c->pe), c->rotate ? " rotate " : "",
                    rp_rotate_name(c->rotate, rot), fs, rp_norm_names[c->norm],
                    c->attention == RP_ATTN_LINEAR ? ", linear attention" : "",
                    c->attention == RP_ATTN_LINEAR && c->linear_rope == RP_LIN_BEFORE
                        ? " (rope before phi)"
                        : "");
    return 1;
}

/* ---- construction ---- */

/* Reads the config table at idx into cfg as written: every key a row of the config schema
 * (core/config/model_schema.h) or freq / angles (read later), each read by its row's type and names
 * and checked against its range (an absent key keeps its default). Raises naming argument idx. */
static void read_fields(lua_State *L, int idx, rp_model_cfg *cfg)
{
    /* the keys read beside the schema's rows, in the order the unknown-key message lists them */
    static const char *const more[] = {"freq", "angles", "positions", LRP_AXES_KEYS,
                                       "rope_scaling", "rope_theta"};
    const char *known[RP_CFG_MAX_KEYS + sizeof more / sizeof *more + 1];
    int n = 0;
    for (int i = 0; i < rp_model_cfg_nkeys; i++) known[n++] = rp_model_cfg_keys[i].name;
    for (size_t i = 0; i < sizeof more / sizeof *more; i++) known[n++] = more[i];
    known[n] = NULL;
    if (lua_type(L, idx) != LUA_TTABLE)
        lrp_argerror(L, idx, "config table expected, got %s", lrp_describe(L, idx));
    lrp_checkopts(L, idx, known);
    *cfg = rp_model_cfg_default(0);
    for (int i = 0; i < rp_model_cfg_nkeys; i++) {
        const rp_cfg_key *k = &rp_model_cfg_keys[i];
        if (!lrp_hasopt(L, idx, k->name) && k->flags & RP_CFG_REQUIRED)
            lrp_opterror(L, idx, LRP_M_REQUIRED,
                         LRP_MARKS([LRP_MK_KEY] = k->name, [LRP_MK_HELP] = k->help));
        lrp_optcfgkey(L, idx, cfg, k);
    }
    /* Hugging Face's names: rope_theta for base, the rope_scaling table */
    cfg->rope_base = lrp_hasopt(L, idx, "rope_theta") ? lrp_optbase(L, idx) : cfg->rope_base;
    lrp_opt_rope_scaling(L, idx, cfg);
}

/* read_fields, then core's plan of the config (rp_model_cfg_plan: the stored form, the checks
 * every config passes, the refusal of a key whose value does nothing for the mode) into *p
 * (NULL: not kept). */
static void read_cfg(lua_State *L, int idx, rp_model_cfg *cfg, rp_model_plan *p)
{
    read_fields(L, idx, cfg);
    if (rp_model_cfg_plan(cfg, p) != RP_OK) lrp_argerror(L, idx, "%s", rp_last_error());
}

/* rp.model(cfg) -> roper.Model */
static int l_model(lua_State *L)
{
    rp_model_cfg cfg;
    rp_model_plan p;
    read_cfg(L, 1, &cfg, &p);
    lua_settop(L, 1);
    /* the user's frequencies or angles (slots 2, 3, the copy at 4), for every position and pair
     * the model rotates */
    rp_rope_freq f = p.freq;
    lua_getfield(L, 1, "freq");
    lua_getfield(L, 1, "angles");
    lrp_freq_tables(L, 1, 2, &f, p.rows, p.half);
    /* the positions and the options of their axes (slots 5 .. 8): explicit 1-D or vector
     * positions, rows for the tokens 0 .. seq_len-1 at least */
    lrp_axes_opts ax;
    lrp_optaxes(L, 1, &ax);
    int A = 0;
    int64_t rows = 0;
    const int64_t *pos = NULL;
    if (lua_getfield(L, 1, "positions") != LUA_TNIL)
        pos = lrp_read_positions(L, 1, lua_gettop(L), "option 'positions'", &A, &rows);
    else lua_pushnil(L);
    lrp_axes_tables(L, 1, &ax, A, pos != NULL, p.half, f.angles != NULL, &f);
    lrp_model *u = lrp_newmodel(L);
    u->m = rp_model_new(&cfg);
    if (u->m == NULL) return lrp_argerror(L, 1, "%s", rp_last_error()); /* too large */
    if (((f.theta || f.angles) &&
         rp_model_set_freq(u->m, f.theta, f.n_theta, f.angles, f.rows, f.n_angles) != RP_OK) ||
        (pos && rp_model_set_positions(u->m, &f.axes, pos, rows) != RP_OK)) {
        char msg[512];
        snprintf(msg, sizeof msg, "%s", rp_last_error());
        rp_model_free(u->m);
        u->m = NULL;
        return lrp_argerror(L, 1, "%s", msg);
    }
    return 1;
}

/* rp.model_memory(cfg) -> {model =, optimiser =, params =, available =}: what rp.model(cfg)
 * would allocate, in bytes, without allocating it; optimiser: Adam's moments; params: the
 * parameter count; available: rp_mem_available() (nil when unknown). cfg is checked as rp.model
 * checks it. */
static int l_model_memory(lua_State *L)
{
    rp_model_cfg cfg;
    read_cfg(L, 1, &cfg, NULL);
    int64_t bytes = 0, params = 0;
    if (rp_model_memory(&cfg, &bytes, &params) != RP_OK)
        return lrp_argerror(L, 1, "%s", rp_last_error());
    int64_t avail = rp_mem_available();
    lua_createtable(L, 0, 4);
    lua_pushinteger(L, (lua_Integer)bytes);
    lua_setfield(L, -2, "model");
    lua_pushinteger(L, (lua_Integer)(2 * params * (int64_t)sizeof(float)));
    lua_setfield(L, -2, "optimiser");
    lua_pushinteger(L, (lua_Integer)params);
    lua_setfield(L, -2, "params");
    if (avail >= 0) {
        lua_pushinteger(L, (lua_Integer)avail);
        lua_setfield(L, -2, "available");
    }
    luaL_setmetatable(L, LRP_MEMORY_MT); /* prints the bytes with their units */
    return 1;
}

/* ---- the schema for the Lua parts ---- */

/* internals.model_unused(cfg) -> {key = why, ...}: the keys of rp.model's config that do nothing
 * for the config table cfg (read as rp.model reads it, before its checks), with the reason
 * (rp_model_cfg_unused). Raises as rp.model for a bad table. */
static int l_model_unused(lua_State *L)
{
    rp_model_cfg cfg;
    read_fields(L, 1, &cfg);
    if (rp_model_cfg_written(&cfg) != RP_OK) return lrp_argerror(L, 1, "%s", rp_last_error());
    lua_newtable(L);
    char why[256];
    for (int i = 0; i < rp_model_cfg_nkeys; i++)
        if (rp_model_cfg_unused(&cfg, &rp_model_cfg_keys[i], why, sizeof why)) {
            lua_pushstring(L, why);
            lua_setfield(L, -2, rp_model_cfg_keys[i].name);
        }
    return 1;
}

/* Sets field "scalings" of the table on top to the names of the scalings that read any of the
 * RP_READS_* bits in reads, in code order. */
static void set_scalings(lua_State *L, int reads)
{
    lua_newtable(L);
    for (int s = 0, n = 0; s < RP_SCALING_COUNT; s++)
        if (rp_scaling_of((rp_rope_scaling)s)->reads & reads) {
            lua_pushstring(L, rp_scaling_names[s]);
            lua_rawseti(L, -2, ++n);
        }
    lua_setfield(L, -2, "scalings");
}

static void set_bool(lua_State *L, const char *key, int v)
{
    lua_pushboolean(L, v);
    lua_setfield(L, -2, key);
}

/* The mode table (core/nn/pe.h) as a new table on the stack: t[i] = {name =, absolute =, rotate =,
 * rotary =, linear =, relative =, v_angle =, o_sign =, rel =, scale_terms =, rel_params =,
 * rel_dims =, rel_keys =} in the table's order, and t[name] = the same row; rel: the relative kind's name,
 * scale_terms and rel_params its row's (rel_params[i] = {name =, use =, rows =, cols =, init =},
 * the enums by name); rel_dims[dim] = {of =, times =, plus =} for each dim rel_params name (pe.h's
 * rp_rel_dim_of: times x of + plus); rel_keys lists the config keys the kind reads (the schema's
 * RP_CFG_RELATIVE rows whose keys the kind's row uses). */
static void push_pe_modes(lua_State *L)
{
    static const char *const rel_uses[] = {"table", "proj_sin", "proj_shared", "shared"};
    _Static_assert(sizeof rel_uses / sizeof *rel_uses == RP_PARAM_SHARED + 1, "a name per use");
    static const char *const rel_inits[] = {"uniform", "zeros", "normal"};
    _Static_assert(sizeof rel_inits / sizeof *rel_inits == RP_RI_NORMAL + 1, "a name per init");
    char rot[5];
    lua_createtable(L, RP_PE_COUNT, RP_PE_COUNT);
    for (int p = 0; p < (int)RP_PE_COUNT; p++) {
        const rp_pe_mode *m = rp_pe_mode_of((rp_pe)p);
        lua_createtable(L, 0, 6);
        lua_pushstring(L, m->name);
        lua_setfield(L, -2, "name");
        lua_pushstring(L, rp_pe_absolute_names[m->absolute]);
        lua_setfield(L, -2, "absolute");
        lua_pushstring(L, rp_rotate_name(m->rotate, rot));
        lua_setfield(L, -2, "rotate");
        set_bool(L, "rotary", m->rotary);
        set_bool(L, "linear", m->linear);
        const rp_rel_desc *rel = rp_rel_of(m->rel);
        set_bool(L, "relative", rel->terms != 0);
        lua_pushnumber(L, (lua_Number)m->v_angle);
        lua_setfield(L, -2, "v_angle");
        lua_pushinteger(L, (lua_Integer)m->o_sign);
        lua_setfield(L, -2, "o_sign");
        lua_pushstring(L, rel->name);
        lua_setfield(L, -2, "rel");
        lua_pushinteger(L, (lua_Integer)rel->scale_terms);
        lua_setfield(L, -2, "scale_terms");
        lua_createtable(L, rel->nparams, 0);
        for (int i = 0; i < rel->nparams; i++) {
            const rp_rel_param *q = &rel->params[i];
            lua_createtable(L, 0, 5);
            lua_pushstring(L, q->name);
            lua_setfield(L, -2, "name");
            lua_pushstring(L, rel_uses[q->use]);
            lua_setfield(L, -2, "use");
            lua_pushstring(L, rp_rel_dim_of(q->rows)->name);
            lua_setfield(L, -2, "rows");
            lua_pushstring(L, rp_rel_dim_of(q->cols)->name);
            lua_setfield(L, -2, "cols");
            lua_pushstring(L, rel_inits[q->init]);
            lua_setfield(L, -2, "init");
            lua_rawseti(L, -2, i + 1);
        }
        lua_setfield(L, -2, "rel_params");
        lua_newtable(L); /* the dims the parameters name: their formulas (pe.c's dims table) */
        for (int i = 0; i < 2 * rel->nparams; i++) {
            const rp_rel_dim_desc *d =
                rp_rel_dim_of(i % 2 ? rel->params[i / 2].cols : rel->params[i / 2].rows);
            lua_createtable(L, 0, 3);
            lua_pushstring(L, d->of);
            lua_setfield(L, -2, "of");
            lua_pushinteger(L, (lua_Integer)d->times);
            lua_setfield(L, -2, "times");
            lua_pushinteger(L, (lua_Integer)d->plus);
            lua_setfield(L, -2, "plus");
            lua_setfield(L, -2, d->name);
        }
        lua_setfield(L, -2, "rel_dims");
        lua_newtable(L);
        int n = 0;
        for (int i = 0; i < rp_model_cfg_nkeys; i++) {
            const rp_cfg_key *k = &rp_model_cfg_keys[i];
            if (k->use != RP_CFG_RELATIVE || !(rp_rel_of(m->rel)->uses & k->use_arg)) continue;
            lua_pushstring(L, k->name);
            lua_rawseti(L, -2, ++n);
        }
        lua_setfield(L, -2, "rel_keys");
        lua_pushvalue(L, -1);
        lua_setfield(L, -3, m->name);
        lua_rawseti(L, -2, p + 1);
    }
}

/* rp.pe_modes() -> the mode table (push_pe_modes), a new table at each call. */
static int l_pe_modes(lua_State *L)
{
    push_pe_modes(L);
    return 1;
}

/* Sets field needs of the table on top: the needs of row k (model_schema.h), in order, each
 * {fact =, holds = {the names of the fact's values it holds for}, why = its message, {list}
 * filled in}. */
static void push_needs(lua_State *L, const rp_cfg_key *k)
{
    char buf[256];
    lua_newtable(L);
    for (int i = 0, n = 0; i < rp_model_cfg_nneeds; i++) {
        const rp_cfg_need *r = &rp_model_cfg_needs[i];
        if (!rp_model_cfg_need_applies(r, k)) continue;
        lua_createtable(L, 0, 3);
        lua_pushstring(L, rp_model_cfg_fact_key(r->fact));
        lua_setfield(L, -2, "fact");
        lua_newtable(L);
        for (int v = 0, m = 0; rp_model_cfg_fact_name(r->fact, v, buf, sizeof buf); v++)
            if (r->holds(k, v)) {
                lua_pushstring(L, buf);
                lua_rawseti(L, -2, ++m);
            }
        lua_setfield(L, -2, "holds");
        lua_pushstring(L, rp_model_cfg_need_why(r, k, NULL, buf, sizeof buf));
        lua_setfield(L, -2, "why");
        lua_rawseti(L, -2, ++n);
    }
    lua_setfield(L, -2, "needs");
}

/* Sets field key of the table on top to the list of the NULL-terminated names (at most max). */
static void set_names(lua_State *L, const char *key, const char *const *names, int max)
{
    lua_newtable(L);
    for (int i = 0; i < max && names[i]; i++) {
        lua_pushstring(L, names[i]);
        lua_rawseti(L, -2, i + 1);
    }
    lua_setfield(L, -2, key);
}

/* Pushes the config schema's rows (model_schema.c) as a list of tables, in row order: name,
 * type, default, lo, hi (int and number), names (enum), lo_open, hi_open, unset0, required,
 * since, help, use (when the key does something: rp_cfg_use's name), placements (use
 * "placement": the letters of use_arg), scalings (use "scalings": the names in use_arg), json
 * (what a safetensors roper.config holds of it: rp_cfg_json's name), unset_as (the key its 0
 * stands for), freq (the rp_rope_freq field a row of the frequency scheme sets), names (a
 * bool's too), range (rp_model_cfg_range_msg's template, {value} left), stored
 * (rp_model_cfg_json_value_msg's, {got} left) and needs (push_needs: when the key does something,
 * and why not). */
static void push_model_keys(lua_State *L)
{
    /* by rp_cfg_type: the type's name, what its default is, which range fields it has */
    static const char *const types[] = {"int", "number", "enum", "seed", "rotate", "bool"};
    static const lrp_key_kind kinds[] = {LRP_KEY_INT,  LRP_KEY_NUM,   LRP_KEY_ENUM,
                                         LRP_KEY_INT,  LRP_KEY_BLANK, LRP_KEY_BOOL};
    static const int cols[] = {LRP_KEY_LO | LRP_KEY_HI | LRP_KEY_OPEN,
                               LRP_KEY_LO | LRP_KEY_HI | LRP_KEY_OPEN,
                               LRP_KEY_OPEN,
                               LRP_KEY_OPEN,
                               LRP_KEY_OPEN,
                               LRP_KEY_OPEN};
    _Static_assert(sizeof types / sizeof *types == RP_CFG_BOOL + 1, "a name per type");
    _Static_assert(sizeof cols / sizeof *cols == RP_CFG_BOOL + 1, "columns per type");
    static const char *const uses[] = {"always", "rotary",  "placement", "relative",     "freq",
                                       "scaled", "scalings", "xpos",     "linear_rotary"};
    _Static_assert(sizeof uses / sizeof *uses == RP_CFG_LINEAR_ROTARY + 1, "a name per use");
    static const char *const jsons[] = {"set", "applies", "always", "required"};
    _Static_assert(sizeof jsons / sizeof *jsons == RP_CFG_JSON_REQUIRED + 1, "a name per json");
    char rot[5], msg[512];
    lua_createtable(L, rp_model_cfg_nkeys, 0);
    for (int i = 0; i < rp_model_cfg_nkeys; i++) {
        const rp_cfg_key *k = &rp_model_cfg_keys[i];
        const rp_cfg_range range = rp_model_cfg_range(k);
        const lrp_key_row row = {.name = k->name, .type = types[k->type],
                                 .kind = kinds[k->type], .cols = cols[k->type], .def = k->def,
                                 .lo = range.lo, .hi = range.hi, .names = k->names,
                                 .lo_open = range.lo_open, .hi_open = range.hi_open};
        lrp_push_key_row(L, &row, 13);
        set_bool(L, "unset0", k->flags & RP_CFG_UNSET0);
        set_bool(L, "required", k->flags & RP_CFG_REQUIRED);
        lua_pushinteger(L, (lua_Integer)k->since);
        lua_setfield(L, -2, "since");
        lua_pushstring(L, k->help);
        lua_setfield(L, -2, "help");
        lua_pushstring(L, uses[k->use]);
        lua_setfield(L, -2, "use");
        lua_pushstring(L, jsons[k->json]);
        lua_setfield(L, -2, "json");
        if (k->use == RP_CFG_PLACEMENT) {
            lua_pushstring(L, rp_rotate_name(k->use_arg, rot));
            lua_setfield(L, -2, "placements");
        } else if (k->use == RP_CFG_SCALINGS) {
            set_scalings(L, k->use_arg);
        }
        if (k->unset_as) {
            lua_pushstring(L, k->unset_as);
            lua_setfield(L, -2, "unset_as");
        }
        if (k->freq_name) {
            lua_pushstring(L, k->freq_name);
            lua_setfield(L, -2, "freq");
        }
        if (k->type == RP_CFG_BOOL) set_names(L, "names", rp_model_cfg_names(k), 2);
        if (rp_model_cfg_range_msg(NULL, k, msg, sizeof msg)) lrp_setstr(L, "range", msg);
        lrp_setstr(L, "stored", rp_model_cfg_json_value_msg(k, NULL, msg, sizeof msg));
        push_needs(L, k);
        lua_rawseti(L, -2, i + 1);
    }
}

/* rp.model_keys() -> the config schema's rows (push_model_keys), a new table at each call;
 * t.messages the schema's own messages (rp_model_cfg_msgs, by name). */
static int l_model_keys(lua_State *L)
{
    push_model_keys(L);
    lrp_push_msgs(L, rp_model_cfg_msgs, RP_CFGM_COUNT, NULL, NULL, 0);
    lua_setfield(L, -2, "messages");
    return 1;
}

/* Pushes rp_rope_freq_check's scalar rules (rope_freq.h: rp_freq_rules), in order: t[i] = {kind
 * = "min" | "min2" | "below" | "name", a =, b = (the rp_rope_freq fields), scalings = (the names
 * of the scalings it applies to; nil: every scheme), lo =, lo_open = (min, min2), names = (name),
 * why = (the message: {a}, {b}, {scaling})}. */
static void push_freq_rules(lua_State *L)
{
    lua_createtable(L, rp_freq_nrules, 0);
    for (int i = 0; i < rp_freq_nrules; i++) {
        const rp_freq_rule *r = &rp_freq_rules[i];
        lua_createtable(L, 0, 8);
        lrp_setstr(L, "kind", rp_freq_rule_kinds[r->kind]);
        lrp_setstr(L, "a", r->a);
        lrp_setstr(L, "b", r->b);
        if (r->reads) {
            set_scalings(L, r->reads);
        }
        if (r->kind == RP_FREQ_RULE_MIN || r->kind == RP_FREQ_RULE_MIN2) {
            lua_pushnumber(L, r->lo);
            lua_setfield(L, -2, "lo");
            set_bool(L, "lo_open", r->lo_open);
        }
        if (r->names) set_names(L, "names", r->names, 64);
        lrp_setstr(L, "why", r->why);
        lua_rawseti(L, -2, i + 1);
    }
}

/* Pushes the messages of rp_rope_freq_check's and rp_rope_freq_check_use's coded rules
 * (rope_freq.h: rp_freq_owns, rp_freq_msgs): {tables = {t[i] = {key =, field =, row =, entry =,
 * entries =, final =, with_freq =, few =, positions =}} in rp_freq_own_id order, messages =
 * {name = template}, max_axes = RP_MAX_AXES}. */
static void push_freq_checks(lua_State *L)
{
    lua_createtable(L, 0, 3);
    lua_createtable(L, RP_OWN_COUNT, 0);
    for (int t = 0; t < RP_OWN_COUNT; t++) {
        const rp_freq_own *o = &rp_freq_owns[t];
        lua_createtable(L, 0, 9);
        lrp_setstr(L, "key", o->key);
        lrp_setstr(L, "field", o->field);
        lrp_setstr(L, "row", o->row);
        lrp_setstr(L, "entry", o->entry);
        lrp_setstr(L, "entries", o->entries);
        lrp_setstr(L, "final", o->final);
        lrp_setstr(L, "with_freq", o->with_freq);
        lrp_setstr(L, "few", o->few);
        lrp_setstr(L, "positions", o->positions);
        lua_rawseti(L, -2, t + 1);
    }
    lua_setfield(L, -2, "tables");
    lrp_push_msgs(L, rp_freq_msgs, RP_FM_COUNT, NULL, NULL, 0);
    lua_setfield(L, -2, "messages");
    lua_pushinteger(L, RP_MAX_AXES);
    lua_setfield(L, -2, "max_axes");
}

/* rp.scalings() -> the scaling table (core/nn/rope_freq.h) as a new table: t[i] = {name =, hf =,
 * keys =, since =, per_position =, own_score =, hf_fields =, hf_needs =} in code order, and
 * t[name] = the same row (hf_fields, hf_needs: lrp_set_hf_fields, for a scaling with hf); keys:
 * the config keys the scaling reads (the schema's rows of RP_CFG_SCALED and RP_CFG_SCALINGS that
 * apply to it), in row order; hf: Hugging Face's rope_type (nil for ntk); t.hf_map: the
 * rope_scaling fields and the keys they set (lrp_push_hf_map). */
static int l_scalings(lua_State *L)
{
    lua_settop(L, 0);
    lua_createtable(L, RP_SCALING_COUNT, RP_SCALING_COUNT);
    for (int s = 0; s < RP_SCALING_COUNT; s++) {
        const rp_scaling_desc *d = rp_scaling_of((rp_rope_scaling)s);
        lua_createtable(L, 0, 6);
        lua_pushstring(L, d->name);
        lua_setfield(L, -2, "name");
        if (d->hf) {
            lua_pushstring(L, d->hf);
            lua_setfield(L, -2, "hf");
        }
        lua_newtable(L);
        for (int i = 0, n = 0; i < rp_model_cfg_nkeys; i++) {
            const rp_cfg_key *k = &rp_model_cfg_keys[i];
            if ((k->use == RP_CFG_SCALED && (d->reads & RP_READS_FACTOR)) ||
                (k->use == RP_CFG_SCALINGS && (d->reads & k->use_arg))) {
                lua_pushstring(L, k->name);
                lua_rawseti(L, -2, ++n);
            }
        }
        lua_setfield(L, -2, "keys");
        lua_pushinteger(L, (lua_Integer)d->since);
        lua_setfield(L, -2, "since");
        set_bool(L, "per_position", d->per_position);
        set_bool(L, "own_score", d->score != NULL);
        if (d->hf) lrp_set_hf_fields(L, (rp_rope_scaling)s);
        lua_pushvalue(L, -1);
        lua_setfield(L, -3, d->name);
        lua_rawseti(L, -2, s + 1);
    }
    lrp_push_hf_map(L);
    lua_setfield(L, -2, "hf_map");
    push_freq_rules(L);
    lua_setfield(L, -2, "rules");
    push_freq_checks(L);
    lua_setfield(L, -2, "checks");
    return 1;
}


/* rp.model_rules() -> rp_model_cfg_check's rules between keys (model_schema.h), in order, as a
 * new table: t[i] = {check = name, why =, max =} for a coded rule (why: its message, nil when it
 * gives pe.h's or rope_freq.h's; max: its bound, nil for none), {when =, pe =, unset =, why =}
 * for a data rule (pe: the modes it holds for, nil for any; why: its message, {list} filled in);
 * t.messages: pe.h's rotary messages by name, {list} filled in (the rotary modes). */
static int l_model_rules(lua_State *L)
{
    lua_settop(L, 0);
    lua_createtable(L, rp_model_cfg_nrules, 1);
    char list[160], why[512];
    for (int i = 0; i < rp_model_cfg_nrules; i++) {
        const rp_cfg_rule *r = &rp_model_cfg_rules[i];
        lua_createtable(L, 0, 4);
        if (r->check) {
            lua_pushstring(L, r->check);
            lua_setfield(L, -2, "check");
            lrp_setstr(L, "why", r->why);
            if (r->max) {
                lua_pushinteger(L, (lua_Integer)r->max);
                lua_setfield(L, -2, "max");
            }
        } else {
            set_names(L, "when", r->when, 3);
            set_names(L, "unset", r->unset, 5);
            if (r->pe_holds) {
                lua_newtable(L);
                for (int p = 0, n = 0; p < (int)RP_PE_COUNT; p++)
                    if (r->pe_holds((rp_pe)p)) {
                        lua_pushstring(L, rp_pe_name((rp_pe)p));
                        lua_rawseti(L, -2, ++n);
                    }
                lua_setfield(L, -2, "pe");
            }
            lua_pushstring(L, rp_model_cfg_fill(r->why, NULL, rp_model_cfg_rule_list(r, list,
                                                sizeof list), why, sizeof why));
            lua_setfield(L, -2, "why");
        }
        lua_rawseti(L, -2, i + 1);
    }
    static const char *const mark[] = {"{list}"};
    const char *const value[] = {rp_pe_list(list, sizeof list, 1, 0, 0)};
    lrp_push_msgs(L, rp_pe_msgs, RP_MSG_COUNT, mark, value, 1);
    lua_setfield(L, -2, "messages");
    return 1;
}

/* Sets field key of the table on top to dim d's name (nothing for RP_LD_NONE). */
static void set_dim(lua_State *L, const char *key, rp_layout_dim d)
{
    if (d == RP_LD_NONE) return;
    lua_pushstring(L, rp_layout_dim_of(d)->name);
    lua_setfield(L, -2, key);
}

/* rp.model_layout() -> the parameter layout table (core/model/model.h) as a new table: t[i] =
 * {name =, scope =, dims =, init =, fan_in =, when =} in row order, or {rel = true, scope =} for
 * the relative kind's parameters of the scope (rp.pe_modes()'s rel_params); dims the names of the
 * dims (one or two), fan_in a dim's name (nil: none), when nil (always), {key =, value =} (the
 * key does something and holds value: a boolean for a bool key) or {absolute =} (the mode's
 * absolute table); t.dims[name] = {of =, times =, plus =} for every dim (of nil: the constant
 * plus). */
static int l_model_layout(lua_State *L)
{
    lua_settop(L, 0);
    lua_createtable(L, rp_model_layout_n, 1);
    for (int i = 0; i < rp_model_layout_n; i++) {
        const rp_layout_row *r = &rp_model_layout[i];
        lua_createtable(L, 0, 6);
        lrp_setstr(L, "scope", rp_layout_scope_names[r->scope]);
        if (!r->name) {
            set_bool(L, "rel", 1);
            lua_rawseti(L, -2, i + 1);
            continue;
        }
        lrp_setstr(L, "name", r->name);
        lua_createtable(L, 2, 0);
        for (int j = 0; j < 2 && r->dims[j] != RP_LD_NONE; j++) {
            lua_pushstring(L, rp_layout_dim_of(r->dims[j])->name);
            lua_rawseti(L, -2, j + 1);
        }
        lua_setfield(L, -2, "dims");
        lrp_setstr(L, "init", rp_init_names[r->init]);
        set_dim(L, "fan_in", r->fan_in);
        if (r->cond != RP_LAYOUT_ALWAYS) {
            lua_createtable(L, 0, 2);
            if (r->cond == RP_LAYOUT_IF_KEY) {
                lrp_setstr(L, "key", r->key);
                if (rp_model_cfg_key(r->key, (size_t)-1)->type == RP_CFG_BOOL)
                    set_bool(L, "value", strcmp(r->value, "true") == 0);
                else
                    lrp_setstr(L, "value", r->value);
            } else {
                lrp_setstr(L, "absolute", r->value);
            }
            lua_setfield(L, -2, "when");
        }
        lua_rawseti(L, -2, i + 1);
    }
    lua_createtable(L, 0, RP_LD_COUNT);
    for (int d = RP_LD_NONE + 1; d < RP_LD_COUNT; d++) {
        const rp_layout_dim_desc *x = rp_layout_dim_of((rp_layout_dim)d);
        lua_createtable(L, 0, 3);
        if (x->of) {
            lrp_setstr(L, "of", x->of);
        }
        lua_pushinteger(L, (lua_Integer)x->times);
        lua_setfield(L, -2, "times");
        lua_pushinteger(L, (lua_Integer)x->plus);
        lua_setfield(L, -2, "plus");
        lua_setfield(L, -2, x->name);
    }
    lua_setfield(L, -2, "dims");
    return 1;
}

/* rp.safetensors_extras() -> what a model's safetensors file holds beside its parameters
 * (core/io/safetensors.h's extras table) as a new table: t[i] = {key =, option =, dtype =,
 * ranks =, shape =, map =} in the table's order (ranks: the ranks it may have; map: the
 * positions' map it belongs to (rp_axes_maps: the map whose table is its option), nil for
 * none), t.axes_key the metadata key of the map, t.max_axes RP_MAX_AXES, t.messages the reader's
 * refusals of the extras (rp_safetensors_extra_msgs, {list} filled), t.config.messages the
 * roper.config reader's (rp_cfg_json_msgs) and t.json core's JSON reader's words (types,
 * messages: rp_json_msgs, limits: json.h's). */
static int l_safetensors_extras(lua_State *L)
{
    lua_settop(L, 0);
    lua_createtable(L, RP_X_COUNT, 1);
    for (int k = 0; k < RP_X_COUNT; k++) {
        const rp_safetensors_extra *x = &rp_safetensors_extras[k];
        lua_createtable(L, 0, 6);
        lrp_setstr(L, "key", x->key);
        lrp_setstr(L, "option", x->option);
        lrp_setstr(L, "dtype", x->dtype);
        lua_createtable(L, 2, 0);
        for (int n = x->ndim_lo; n <= x->ndim_hi; n++) {
            lua_pushinteger(L, n);
            lua_rawseti(L, -2, n - x->ndim_lo + 1);
        }
        lua_setfield(L, -2, "ranks");
        lrp_setstr(L, "shape", x->shape);
        for (int m = 0; m < RP_AXES_COUNT; m++) /* the map whose own table it is */
            if (rp_axes_maps[m].table && strcmp(rp_axes_maps[m].table, x->option) == 0) {
                lrp_setstr(L, "map", rp_axes_names[m]);
            }
        lua_rawseti(L, -2, k + 1);
    }
    lrp_setstr(L, "axes_key", RP_SAFETENSORS_AXES_KEY);
    lrp_setstr(L, "version", RP_SAFETENSORS_VERSION);
    lua_pushinteger(L, RP_MAX_AXES);
    lua_setfield(L, -2, "max_axes");
    static const char *const mark[] = {"{list}"};
    char list[64];
    const char *const value[] = {rp_safetensors_axes_list(list, sizeof list)};
    lrp_push_msgs(L, rp_safetensors_extra_msgs, RP_XM_COUNT, mark, value, 1);
    lua_setfield(L, -2, "messages");
    lua_createtable(L, 0, 1); /* the reader of roper.config */
    lrp_push_msgs(L, rp_cfg_json_msgs, RP_CFGJ_COUNT, NULL, NULL, 0);
    lua_setfield(L, -2, "messages");
    lua_setfield(L, -2, "config");
    lua_createtable(L, 0, 3); /* core's JSON reader: its types, messages and limits */
    lua_createtable(L, 0, RP_JSON_OBJECT + 1);
    for (int t = 0; t <= RP_JSON_OBJECT; t++)
        lrp_setstr(L, rp_json_types[t].key, rp_json_types[t].name);
    lua_setfield(L, -2, "types");
    lrp_push_msgs(L, rp_json_msgs, RP_JSON_MSG_COUNT, NULL, NULL, 0);
    lua_setfield(L, -2, "messages");
    static const struct {
        const char *name;
        int value;
    } limits[] = {{"int_literal", RP_JSON_INT_LITERAL}, {"num_literal", RP_JSON_NUM_LITERAL},
                  {"literal_shown", RP_JSON_LITERAL_SHOWN}, {"shown", RP_JSON_SHOWN},
                  {"name_text", RP_JSON_NAME_TEXT}, {"value_text", RP_JSON_VALUE_TEXT}};
    lua_createtable(L, 0, (int)(sizeof limits / sizeof limits[0]));
    for (size_t i = 0; i < sizeof limits / sizeof limits[0]; i++) {
        lua_pushinteger(L, limits[i].value);
        lua_setfield(L, -2, limits[i].name);
    }
    lua_setfield(L, -2, "limits");
    lua_setfield(L, -2, "json");
    return 1;
}

void lrp_model_internals(lua_State *L, int priv)
{
    priv = lua_absindex(L, priv);
    push_model_keys(L);
    lua_setfield(L, priv, "model_keys");
    push_pe_modes(L);
    lua_setfield(L, priv, "pe_modes");
    lua_pushcfunction(L, l_model_unused);
    lua_setfield(L, priv, "model_unused");
    lua_pushcfunction(L, lrp_hf_rope_keys);
    lua_setfield(L, priv, "hf_rope");
}

/* ---- methods ---- */

/* The model's own frequencies into the config table on top (m:config()): freq as a list, angles
 * as a list of lists; each allocation may run a finalizer, so the model is fetched at each row. */
static void push_freq_tables(lua_State *L, int model_idx)
{
    const rp_rope_freq *f = rp_model_freq(lrp_checkmodel(L, model_idx));
    int64_t rows = f->theta ? 1 : f->angles ? f->rows : 0;
    int64_t n = f->theta ? f->n_theta : f->n_angles;
    if (!rows) return;
    int is_theta = f->theta != NULL;
    lua_createtable(L, (int)(is_theta ? n : rows), 0);
    for (int64_t r = 0; r < rows; r++) {
        if (!is_theta) lua_createtable(L, (int)n, 0);
        f = rp_model_freq(lrp_checkmodel(L, model_idx));
        const double *src = is_theta ? f->theta : f->angles + r * n;
        for (int64_t i = 0; i < n; i++) {
            lua_pushnumber(L, (lua_Number)src[i]);
            lua_rawseti(L, -2, (lua_Integer)(i + 1));
        }
        if (!is_theta) lua_rawseti(L, -2, (lua_Integer)(r + 1));
    }
    lua_setfield(L, -2, is_theta ? "freq" : "angles");
}

/* The model's positions into the config table on top (m:config()): positions as a list (1-D)
 * or a list of lists, with axes, and sections or mix where the map has them; the model is fetched
 * at each row (an allocation may run a finalizer). */
static void push_positions(lua_State *L, int model_idx)
{
    int64_t rows = 0;
    if (!rp_model_positions(lrp_checkmodel(L, model_idx), &rows)) return;
    const rp_rope_axes ax = rp_model_freq(lrp_checkmodel(L, model_idx))->axes;
    int A = ax.n > 0 ? ax.n : 1;
    lua_createtable(L, rows > INT_MAX ? 0 : (int)rows, 0); /* (a size hint) */
    for (int64_t r = 0; r < rows; r++) {
        if (ax.n > 0) lua_createtable(L, A, 0);
        const int64_t *p = rp_model_positions(lrp_checkmodel(L, model_idx), NULL) + r * A;
        for (int a = 0; a < A; a++) {
            lua_pushinteger(L, (lua_Integer)p[a]);
            lua_rawseti(L, -2, ax.n > 0 ? a + 1 : (lua_Integer)(r + 1));
        }
        if (ax.n > 0) lua_rawseti(L, -2, (lua_Integer)(r + 1));
    }
    lua_setfield(L, -2, "positions");
    if (ax.n < 1) return;
    lua_pushstring(L, rp_axes_names[ax.map]);
    lua_setfield(L, -2, "axes");
    if (ax.map == RP_AXES_SECTIONS) {
        lua_createtable(L, A, 0);
        for (int a = 0; a < A; a++) {
            lua_pushinteger(L, (lua_Integer)ax.sections[a]);
            lua_rawseti(L, -2, a + 1);
        }
        lua_setfield(L, -2, "sections");
    }
    if (ax.map == RP_AXES_MIXED) {
        lua_createtable(L, A, 0);
        for (int a = 0; a < A; a++) {
            lua_createtable(L, (int)ax.n_mix, 0);
            const double *w = rp_model_freq(lrp_checkmodel(L, model_idx))->axes.mix;
            for (int64_t i = 0; i < ax.n_mix; i++) {
                lua_pushnumber(L, (lua_Number)w[a * ax.n_mix + i]);
                lua_rawseti(L, -2, (lua_Integer)(i + 1));
            }
            lua_rawseti(L, -2, a + 1);
        }
        lua_setfield(L, -2, "mix");
    }
}

/* m:config() -> table: the keys of rp.model's config that do something for this model (a key
 * whose value does nothing is left out: rp.model refuses it unless it is at its default, and a
 * file of an older roper may hold one), without the unset ones (an RP_CFG_SHOW_SET key at its
 * default); rotate as the placements rotated (the mode's own when not set); and the model's own
 * frequencies or angles, so that rp.model(m:config()) rebuilds the same model. */
static int m_config(lua_State *L)
{
    const rp_model_cfg cfg = *rp_model_config(lrp_checkmodel(L, 1)), *c = &cfg;
    const rp_pe_mode *mode = rp_pe_mode_of(c->pe);
    lua_createtable(L, 0, rp_model_cfg_nkeys);
    char why[256], rot[5];
    for (int i = 0; i < rp_model_cfg_nkeys; i++) {
        const rp_cfg_key *k = &rp_model_cfg_keys[i];
        if (rp_model_cfg_unused(c, k, why, sizeof why) ||
            ((k->flags & RP_CFG_SHOW_SET) && rp_model_cfg_is_default(c, k)))
            continue;
        int64_t v = rp_model_cfg_get_int(c, k);
        switch (k->type) {
        case RP_CFG_NUM: lua_pushnumber(L, (lua_Number)rp_model_cfg_get_num(c, k)); break;
        case RP_CFG_ENUM: lua_pushstring(L, k->names[v]); break;
        case RP_CFG_ROTATE:
            lua_pushstring(L, rp_rotate_name(v ? (int)v : mode->rotate, rot));
            break;
        case RP_CFG_BOOL: lua_pushboolean(L, v != 0); break;
        default: lua_pushinteger(L, (lua_Integer)v); break;
        }
        lua_setfield(L, -2, k->name);
    }
    push_freq_tables(L, 1);
    push_positions(L, 1);
    return 1;
}

/* m:num_params() -> number of floats in the parameters */
static int m_num_params(lua_State *L)
{
    lua_pushinteger(L, (lua_Integer)rp_model_param_count(lrp_checkmodel(L, 1)));
    return 1;
}

/* m:params() / m:grads(): { {name =, tensor =}, ... } in layout order, and t[name] = tensor; the
 * table's metatable (LRP_PARAMS_MT, LRP_GRADS_MT) only prints it, one line per tensor. */
static int push_views(lua_State *L, int grad)
{
    int n = rp_model_num_tensors(lrp_checkmodel(L, 1));
    lua_settop(L, 1);
    lua_createtable(L, n, n); /* 2 */
    for (int i = 0; i < n; i++) {
        lua_createtable(L, 0, 2);  /* 3: the entry */
        rp_tensor *t = lrp_newtensor(L); /* 4 */
        /* every push above may run a finalizer that releases the model: fetch it again, and take
         * the name and the view with no Lua call in between */
        rp_model *m = lrp_checkmodel(L, 1);
        char name[sizeof ((rp_param_info *)NULL)->name];
        memcpy(name, rp_model_param(m, i)->name, sizeof name);
        rp_model_param_view(t, m, i, grad);
        lua_pushvalue(L, 4);
        lua_setfield(L, 2, name);
        lua_setfield(L, 3, "tensor");
        lua_pushstring(L, name);
        lua_setfield(L, 3, "name");
        lua_rawseti(L, 2, i + 1);
    }
    luaL_setmetatable(L, grad ? LRP_GRADS_MT : LRP_PARAMS_MT);
    return 1;
}

static int m_params(lua_State *L) { return push_views(L, 0); }
static int m_grads(lua_State *L) { return push_views(L, 1); }

/* ---- checkpoints ---- */

/* m:save(path[, opt[, {allow_nonfinite = false}]]) -> true | nil, "path: reason" */
static int m_save(lua_State *L)
{
    static const char *const known[] = {"allow_nonfinite", NULL};
    lrp_checkmodel(L, 1);
    const char *path = lrp_checkpath(L, 2);
    if (!lua_isnoneornil(L, 3)) lrp_checkoptim_for(L, 3, 1);
    lrp_checkopts(L, 4, known);
    int allow = lrp_optboolean(L, 4, "allow_nonfinite", 0);

    /* every Lua value is read: fetch the objects */
    rp_model *m = lrp_checkmodel(L, 1);
    lrp_optim *o = lua_isnoneornil(L, 3) ? NULL : lrp_checkoptim_for(L, 3, 1);
    int bad = allow ? -1 : rp_model_first_nonfinite(m, 0);
    if (bad >= 0)
        return luaL_error(L, "m:save: parameter '%s' holds nan or inf (the model diverged); pass "
                             "{allow_nonfinite = true} to save it anyway",
                          rp_model_param(m, bad)->name);
    rp_status st = rp_checkpoint_save(path, m, o ? &o->cfg : NULL, o ? &o->st : NULL);
    if (st != RP_OK) return lrp_pushfail(L);
    lua_pushboolean(L, 1);
    return 1;
}

/* rp.load(path[, {max_batch = n}]) -> model[, optimiser] | tensor | model | nil, "path: reason":
 * by the file's first bytes a checkpoint (here), a .npy file (a tensor) or a safetensors file (a
 * model; both in interop.c). max_batch (checkpoints only) builds the model for n sequences
 * instead of the saved max_batch. */
static int l_load(lua_State *L)
{
    static const char *const known[] = {"max_batch", NULL};
    const char *path = lrp_checkpath(L, 1);
    lrp_checkopts(L, 2, known);
    lua_Integer max_batch = lrp_optinteger(L, 2, "max_batch", 0);
    if (lrp_hasopt(L, 2, "max_batch") && max_batch < 1)
        return lrp_argerror(L, 2, "option 'max_batch' must be >= 1, got %I",
                            (LUAI_UACINT)max_batch);
    lua_settop(L, 1);
    path = lua_tostring(L, 1);
    unsigned char head[16];
    size_t got = 0;
    if (rp_file_peek(path, head, sizeof head, &got) != RP_OK) return lrp_pushfail(L);
    int other = rp_npy_magic(head, got) ? 1 : rp_safetensors_magic(head, got) ? 2 : 0;
    if (other && max_batch > 0)
        return lrp_argerror(L, 2, "option 'max_batch' applies to roper checkpoints; %s is a %s "
                                  "file",
                            path, other == 1 ? ".npy" : "safetensors");
    if (other == 1) return lrp_load_npy(L, 1);
    if (other == 2) return lrp_load_safetensors(L, 1);
    if (!rp_checkpoint_magic(head, got)) {
        lua_pushnil(L);
        lua_pushfstring(L, "%s: %snot a roper checkpoint, .npy or safetensors file%s", path,
                        got ? "" : "empty file (", got ? "" : ")");
        return 2;
    }
    /* both userdata exist before core allocates anything */
    lrp_model *mu = lrp_newmodel(L);          /* 2 */
    rp_adam_cfg def = rp_adam_cfg_default();
    lrp_optim *o = lrp_newoptim(L, 2, &def);  /* 3 */
    rp_checkpoint ck;
    memset(&ck, 0, sizeof ck);
    if (rp_checkpoint_load_batch(path, (int64_t)max_batch, &ck) != RP_OK) return lrp_pushfail(L);
    mu->m = ck.model;
    if (!ck.has_optim) {
        lua_settop(L, 2);
        return 1;
    }
    int64_t n = rp_model_param_count(mu->m);
    if (ck.opt_state.n != n || rp_adam_cfg_check(&ck.opt_cfg) != RP_OK) {
        const char *why = ck.opt_state.n != n ? "optimiser state does not fit the model"
                                              : rp_last_error();
        rp_checkpoint_free_optim(&ck);
        lua_pushnil(L);
        lua_pushfstring(L, "%s: %s", path, why);
        return 2;
    }
    o->cfg = ck.opt_cfg;
    rp_status st = lrp_optim_alloc(o, n);
    if (st == RP_OK) {
        memcpy(o->st.m, ck.opt_state.m, (size_t)n * sizeof(float));
        memcpy(o->st.v, ck.opt_state.v, (size_t)n * sizeof(float));
        o->st.step = ck.opt_state.step;
    }
    rp_checkpoint_free_optim(&ck);
    if (st != RP_OK) return lrp_raise(L, st); /* rp_storage_new's message */
    return 2;
}

/* ---- registration ---- */

static const luaL_Reg model_methods[] = {
    {"linear_stats", lrp_model_linear_stats}, {"config", m_config},           {"num_params", m_num_params},
    {"params", m_params},           {"grads", m_grads},
    {"forward", lrp_model_forward},         {"loss", lrp_model_loss},
    {"losses", lrp_model_losses},
    {"train_step", lrp_model_train_step},   {"generate", lrp_model_generate},
    {"attention", lrp_model_attention},     {"activations", lrp_model_activations},
    {"generate_batch", lrp_model_generate_batch}, {"lanes", lrp_model_lanes},
    {"save", m_save},               {"save_safetensors", lrp_model_save_safetensors},
    {"load_safetensors", lrp_model_load_safetensors},  {NULL, NULL},
};

static const luaL_Reg model_funcs[] = {
    {"model", l_model},
    {"model_memory", l_model_memory},
    {"load", l_load},
    {"pe_modes", l_pe_modes},
    {"model_keys", l_model_keys},
    {"scalings", l_scalings},
    {"model_rules", l_model_rules},
    {"model_layout", l_model_layout},
    {"safetensors_extras", l_safetensors_extras},
    {"axes_rules", lrp_axes_rules},
    {"option_messages", lrp_option_messages},
    {NULL, NULL},
};

void lrp_open_model(lua_State *L, int mod)
{
    mod = lua_absindex(L, mod);
    lrp_open_type(L, mod, LRP_MODEL_MT, "Model", model_methods, m_release, m_tostring);
    /* the result tables' metatables: their __tostring comes from bindings/lua/print.lua */
    const char *const result_mts[] = {LRP_PARAMS_MT, LRP_GRADS_MT, LRP_MEMORY_MT};
    for (int i = 0; i < 3; i++) {
        luaL_newmetatable(L, result_mts[i]);
        lua_pop(L, 1);
    }

    lua_pushvalue(L, mod);
    luaL_setfuncs(L, model_funcs, 0);
    lua_pop(L, 1);
}
