/* roper.Model running: m:forward, m:loss, m:train_step, m:attention, m:linear_stats,
 * m:activations, m:generate, m:generate_batch, and the token grids they read (tokens, targets,
 * masks: shape, B <= max_batch, T <= seq_len, every value, with its 1-based position in the
 * message; the prompts of a batch one by one). Token,
 * target and mask buffers are Lua userdata, and results are pushed as empty tensors before core
 * fills them, so a Lua error never leaks. Registered by model.c (model_run.h).
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "args.h"
#include "model_run.h"
#include "userdata.h"

/* ---- token grids ---- */

enum { IDS_TOKEN, IDS_TARGET, IDS_MASK };

/* The shape of a grid argument: B sequences of T entries; ndim 1 for [T] forms (a flat table, a
 * 1-D tensor; B = 1), 2 for [B x T] forms. */
typedef struct {
    int64_t B, T;
    int ndim;
} grid;

static const char *grid_str(char *buf, const grid *g)
{
    int64_t s[2] = {g->B, g->T};
    return g->ndim == 1 ? lrp_shape_str_n(buf, 1, s + 1) : lrp_shape_str_n(buf, 2, s);
}

/* "[b][t]" (or "[t]" for a [T] grid), 1-based, into buf (64 bytes). */
static const char *pos_str(char *buf, const grid *g, int64_t b, int64_t t)
{
    if (g->ndim == 1) snprintf(buf, 64, "[%lld]", (long long)(t + 1));
    else snprintf(buf, 64, "[%lld][%lld]", (long long)(b + 1), (long long)(t + 1));
    return buf;
}

/* Raises the message for a bad value (at stack index vidx) at position pos. */
static int bad_value(lua_State *L, int arg, int kind, const char *pos, int64_t V, int vidx)
{
    const char *got = lrp_describe(L, vidx);
    if (kind == IDS_TOKEN)
        return lrp_argerror(L, arg, "token at %s must be an integer in 0..%I (vocab %I), got %s",
                            pos, (LUAI_UACINT)(V - 1), (LUAI_UACINT)V, got);
    if (kind == IDS_TARGET)
        return lrp_argerror(L, arg,
                            "target at %s must be -1 (not scored) or an integer in 0..%I "
                            "(vocab %I), got %s",
                            pos, (LUAI_UACINT)(V - 1), (LUAI_UACINT)V, got);
    return lrp_argerror(L, arg, "mask at %s must be 0, 1, true or false, got %s", pos, got);
}

static void kind_range(int kind, int64_t V, int64_t *lo, int64_t *hi)
{
    *lo = kind == IDS_TARGET ? -1 : 0;
    *hi = kind == IDS_MASK ? 1 : V - 1;
}

/* The Lua value at idx as an entry of kind; 0 when it is not acceptable. */
static int convert_lua(lua_State *L, int idx, int kind, int64_t V, int32_t *out)
{
    if (kind == IDS_MASK && lua_type(L, idx) == LUA_TBOOLEAN) {
        *out = lua_toboolean(L, idx);
        return 1;
    }
    int64_t lo, hi;
    kind_range(kind, V, &lo, &hi);
    lua_Integer v = 0;
    if (!lrp_tointeger(L, idx, &v) || v < lo || v > hi) return 0;
    *out = (int32_t)v;
    return 1;
}

/* A tensor element as an entry of kind; 0 when it is not acceptable. */
static int convert_float(double x, int kind, int64_t V, int32_t *out)
{
    int64_t lo, hi;
    kind_range(kind, V, &lo, &hi);
    if (!(x == floor(x) && x >= (double)lo && x <= (double)hi)) return 0;
    *out = (int32_t)x;
    return 1;
}

/* The shape of the grid at arg (a [T] or [B x T] tensor, a flat table = one sequence, a table of
 * tables = a batch; with allow_2d = 0 only the [T] forms). Checks types and that it is not
 * empty; the rows of a nested table are checked by fill_grid. */
static void probe_grid(lua_State *L, int arg, const char *what, int allow_2d, grid *g)
{
    char buf[RP_SHAPE_STR_LEN];
    if (lrp_totensor(L, arg)) {
        rp_tensor *t = lrp_checktensor(L, arg);
        if (t->ndim == 1) {
            g->ndim = 1;
            g->B = 1;
            g->T = t->shape[0];
        } else if (t->ndim == 2 && allow_2d) {
            g->ndim = 2;
            g->B = t->shape[0];
            g->T = t->shape[1];
        } else {
            lrp_argerror(L, arg, allow_2d ? "%s must be a [T] or [B x T] tensor, got %s"
                                          : "%s must be a 1-D tensor, got %s",
                         what, lrp_shape_str(buf, t));
        }
        if (g->B * g->T == 0)
            lrp_argerror(L, arg, "%s must hold at least one token, got %s", what,
                         lrp_shape_str(buf, t));
        return;
    }
    if (lua_type(L, arg) != LUA_TTABLE)
        lrp_argerror(L, arg, "%s must be a table or a tensor, got %s", what, lrp_describe(L, arg));
    lua_Unsigned n = lua_rawlen(L, arg);
    if (n == 0) lrp_argerror(L, arg, "%s must hold at least one token, got an empty table", what);
    if (n > (lua_Unsigned)RP_I32_MAX) lrp_argerror(L, arg, "%s has too many entries", what);
    g->ndim = 1;
    g->B = 1;
    g->T = (int64_t)n;
    if (allow_2d && lua_rawgeti(L, arg, 1) == LUA_TTABLE) {
        lua_Unsigned m = lua_rawlen(L, -1);
        if (m == 0) lrp_argerror(L, arg, "%s[1] must hold at least one token, got an empty table",
                                 what);
        if (m > (lua_Unsigned)RP_I32_MAX) lrp_argerror(L, arg, "%s[1] has too many entries", what);
        g->ndim = 2;
        g->B = (int64_t)n;
        g->T = (int64_t)m;
    }
    if (allow_2d) lua_pop(L, 1);
}

/* Reads the values of the grid at arg (shape g from probe_grid) into out (B*T entries, row
 * b * T + t), checking each for its kind. */
static void fill_grid(lua_State *L, int arg, const char *what, int kind, int64_t V, const grid *g,
                      int32_t *out)
{
    char pos[64];
    rp_tensor *t = lrp_totensor(L, arg);
    if (t) {
        t = lrp_checktensor(L, arg); /* again: the buffer's allocation may have released it */
        const float *d = rp_tensor_data(t);
        for (int64_t b = 0; b < g->B; b++)
            for (int64_t j = 0; j < g->T; j++) {
                int64_t off = g->ndim == 1 ? j * t->stride[0]
                                           : b * t->stride[0] + j * t->stride[1];
                double x = (double)d[off];
                if (convert_float(x, kind, V, &out[b * g->T + j])) continue;
                if (x == floor(x) && fabs(x) <= (double)LRP_MAX_POS)
                    lua_pushinteger(L, (lua_Integer)x);
                else
                    lua_pushnumber(L, (lua_Number)x);
                bad_value(L, arg, kind, pos_str(pos, g, b, j), V, -1);
            }
        return;
    }
    luaL_checkstack(L, 4, "token table");
    if (g->ndim == 1) {
        for (int64_t j = 0; j < g->T; j++) {
            lua_rawgeti(L, arg, (lua_Integer)(j + 1));
            if (!convert_lua(L, -1, kind, V, &out[j]))
                bad_value(L, arg, kind, pos_str(pos, g, 0, j), V, -1);
            lua_pop(L, 1);
        }
        return;
    }
    for (int64_t b = 0; b < g->B; b++) {
        if (lua_rawgeti(L, arg, (lua_Integer)(b + 1)) != LUA_TTABLE)
            lrp_argerror(L, arg, "%s[%I] must be a table (one sequence), got %s", what,
                         (LUAI_UACINT)(b + 1), lrp_describe(L, -1));
        lua_Unsigned n = lua_rawlen(L, -1);
        if (n != (lua_Unsigned)g->T)
            lrp_argerror(L, arg, "%s[%I] has %I entries, expected %I (as %s[1])", what,
                         (LUAI_UACINT)(b + 1), (LUAI_UACINT)n, (LUAI_UACINT)g->T, what);
        for (int64_t j = 0; j < g->T; j++) {
            lua_rawgeti(L, -1, (lua_Integer)(j + 1));
            if (!convert_lua(L, -1, kind, V, &out[b * g->T + j]))
                bad_value(L, arg, kind, pos_str(pos, g, b, j), V, -1);
            lua_pop(L, 1);
        }
        lua_pop(L, 1);
    }
}

/* A scratch buffer of n int32 values (a userdata pushed on the stack). */
static int32_t *push_ids(lua_State *L, int64_t n)
{
    return (int32_t *)lua_newuserdatauv(L, (size_t)n * sizeof(int32_t), 0);
}

/* The tokens at arg for a model of config c: shape within (max_batch, seq_len), values in
 * 0..V-1. Pushes the buffer. */
static int32_t *check_tokens(lua_State *L, int arg, const rp_model_cfg *c, grid *g, int ranks)
{
    probe_grid(L, arg, "tokens", 1, g);
    if (ranks > g->B)
        lrp_argerror(L, arg, "%d ranks share a batch of %I sequence%s (each rank needs at least "
                             "one; use at most %I ranks or a larger batch)",
                     ranks, (LUAI_UACINT)g->B, g->B == 1 ? "" : "s", (LUAI_UACINT)g->B);
    int64_t rows = (g->B + ranks - 1) / ranks; /* the largest share */
    if (ranks > 1 && rows > c->max_batch)
        lrp_argerror(L, arg, "a batch of %I sequences over %d ranks gives %I per rank, which "
                             "exceeds max_batch %I",
                     (LUAI_UACINT)g->B, ranks, (LUAI_UACINT)rows, (LUAI_UACINT)c->max_batch);
    if (ranks == 1 && g->B > c->max_batch)
        lrp_argerror(L, arg, "a batch of %I sequences exceeds max_batch %I", (LUAI_UACINT)g->B,
                     (LUAI_UACINT)c->max_batch);
    if (g->T > c->seq_len)
        lrp_argerror(L, arg, "sequence length %I exceeds seq_len %I", (LUAI_UACINT)g->T,
                     (LUAI_UACINT)c->seq_len);
    int32_t *buf = push_ids(L, g->B * g->T);
    fill_grid(L, arg, "tokens", IDS_TOKEN, c->vocab, g, buf);
    return buf;
}

/* Targets or a mask at arg: the same B and T as the tokens (grid tok). Pushes the buffer. */
static int32_t *check_like(lua_State *L, int arg, const char *what, int kind, int64_t V,
                           const grid *tok)
{
    grid g;
    probe_grid(L, arg, what, 1, &g);
    if (g.B != tok->B || g.T != tok->T) {
        char a[RP_SHAPE_STR_LEN], b[RP_SHAPE_STR_LEN];
        lrp_argerror(L, arg, "%s has shape %s, expected %s (the shape of tokens)", what,
                     grid_str(a, &g), grid_str(b, tok));
    }
    int32_t *buf = push_ids(L, g.B * g.T);
    fill_grid(L, arg, what, kind, V, &g, buf);
    return buf;
}

static int32_t *check_targets(lua_State *L, int arg, const rp_model_cfg *c, const grid *tok)
{
    return check_like(L, arg, "targets", IDS_TARGET, c->vocab, tok);
}

/* The optional mask at arg (nil/none: NULL), as B*T bytes 0/1 (a pushed userdata). */
static uint8_t *check_mask(lua_State *L, int arg, const grid *tok)
{
    if (lua_isnoneornil(L, arg)) return NULL;
    int32_t *v = check_like(L, arg, "mask", IDS_MASK, 2, tok);
    int64_t n = tok->B * tok->T;
    uint8_t *mask = (uint8_t *)lua_newuserdatauv(L, (size_t)n, 0);
    for (int64_t i = 0; i < n; i++) mask[i] = (uint8_t)v[i];
    return mask;
}

/* Pushes a new contiguous (zeroed) tensor of the given shape and returns its data. */
static float *push_out(lua_State *L, int ndim, const int64_t *shape)
{
    rp_tensor *out = lrp_newtensor(L);
    rp_status st = rp_tensor_new(out, ndim, shape);
    if (st != RP_OK) lrp_raise(L, st);
    return rp_tensor_data(out);
}

/* Runs an eval forward over tokens (no targets) on the model at stack index 1, fetched afresh
 * (see the rule in args.h: nothing may run Lua code between this and the use of the results).
 * Raises on a core error. Returns the model. */
static rp_model *eval_forward(lua_State *L, const int32_t *tok, const grid *g)
{
    rp_model *m = lrp_checkmodel(L, 1);
    rp_status st = rp_model_forward(m, tok, NULL, NULL, g->B, g->T, 0, NULL);
    if (st != RP_OK) lrp_raise(L, st);
    return m;
}

/* ---- methods ---- */

/* m:forward(tokens) -> logits [B x T x V] (eval mode) */
int lrp_model_forward(lua_State *L)
{
    const rp_model_cfg cfg = *rp_model_config(lrp_checkmodel(L, 1));
    lua_settop(L, 2);
    grid g;
    int32_t *tok = check_tokens(L, 2, &cfg, &g, 1);
    int64_t shape[3] = {g.B, g.T, cfg.vocab};
    float *out = push_out(L, 3, shape);
    rp_model *m = eval_forward(L, tok, &g);
    memcpy(out, rp_model_logits(m), (size_t)lrp_numel(3, shape) * sizeof(float));
    return 1;
}

/* The arguments of m:loss and m:losses, (m, tokens, targets[, mask]), checked (eval mode: one
 * rank's grid), their buffers pushed on the stack. */
typedef struct {
    grid g;
    int32_t *tok, *tgt;
    uint8_t *mask;
} scored_args;

static scored_args check_scored(lua_State *L)
{
    const rp_model_cfg cfg = *rp_model_config(lrp_checkmodel(L, 1));
    lua_settop(L, 4);
    scored_args a;
    a.tok = check_tokens(L, 2, &cfg, &a.g, 1);
    a.tgt = check_targets(L, 3, &cfg, &a.g);
    a.mask = check_mask(L, 4, &a.g);
    return a;
}

/* m:loss(tokens, targets[, mask]) -> mean cross-entropy over scored positions (eval mode; nan
 * when nothing is scored) */
int lrp_model_loss(lua_State *L)
{
    const scored_args a = check_scored(L);
    float loss = 0.0f;
    rp_status st =
        rp_model_forward(lrp_checkmodel(L, 1), a.tok, a.tgt, a.mask, a.g.B, a.g.T, 0, &loss);
    if (st != RP_OK) return lrp_raise(L, st);
    lua_pushnumber(L, (lua_Number)loss);
    return 1;
}

/* m:losses(tokens, targets[, mask]) -> [B x T] (or [T]) cross-entropy of each position in nats, 0
 * where not scored (eval mode) */
int lrp_model_losses(lua_State *L)
{
    const scored_args a = check_scored(L);
    int64_t shape[2] = {a.g.B, a.g.T};
    float *out = a.g.ndim == 1 ? push_out(L, 1, shape + 1) : push_out(L, 2, shape);
    rp_model *m = lrp_checkmodel(L, 1);
    rp_status st = rp_model_forward(m, a.tok, a.tgt, a.mask, a.g.B, a.g.T, 0, NULL);
    if (st != RP_OK) return lrp_raise(L, st);
    memcpy(out, rp_model_losses(m), (size_t)(a.g.B * a.g.T) * sizeof(float));
    return 1;
}

/* One data-parallel step over the rows [b0, b1) of a global batch of B x T (the grids of tok, tgt
 * and mask), with `scored` positions scored over the whole batch: every rank computes the gradient
 * of its rows' mean loss, weighted by its share of the scored positions, the gradients and the
 * weighted losses are summed over the ranks (MPI_Allreduce), and every rank takes the same
 * optimiser step. With dropout each rank draws its own masks from a stream split off the model's
 * (the model's generator then advances alike on every rank). *loss is the mean over the whole
 * batch; returns the gradient norm (nan: nothing was updated). A failure in the middle ends the
 * whole job, since the other ranks wait for this one. */
static double dist_step(lua_State *L, rp_model *m, lrp_optim *o, const int32_t *tok,
                        const int32_t *tgt, const uint8_t *mask, int64_t B, int64_t T,
                        int64_t scored, float *loss)
{
    const int rank = rp_dist_rank(), ranks = rp_dist_size();
    const int64_t b0 = B * rank / ranks, b1 = B * (rank + 1) / ranks;
    int64_t mine = 0;
    for (int64_t n = b0 * T; n < b1 * T; n++)
        if (tgt[n] >= 0 && (mask == NULL || mask[n])) mine++;
    rp_rng *rng = rp_model_rng(m), keep = *rng;
    if (rp_model_config(m)->dropout > 0.0) {
        rp_rng_seed(rng, rp_rng_u64(&keep)); /* keep: the model's stream, one draw on */
        for (int r = 0; r < rank; r++) rp_rng_jump(rng);
    }
    float local = 0.0f;
    rp_status st = RP_OK;
    if (mine > 0)
        st = rp_model_forward(m, tok + b0 * T, tgt + b0 * T, mask ? mask + b0 * T : NULL,
                              b1 - b0, T, 1, &local);
    if (st == RP_OK && mine > 0 && isfinite(local)) {
        rp_model_zero_grad(m);
        st = rp_model_backward(m);
    }
    if (rp_model_config(m)->dropout > 0.0) *rng = keep;
    if (st != RP_OK) lrp_dist_abort(L, "train_step", rp_last_error());
    double sum = mine > 0 ? (double)local * (double)mine : 0.0;
    if (rp_dist_allreduce_f64(&sum, 1) != RP_OK)
        lrp_dist_abort(L, "train_step", rp_last_error());
    *loss = (float)(sum / (double)scored);
    if (!isfinite(sum)) return (double)NAN; /* every rank sees it: none updates */
    float *g = rp_model_grads(m)->data;
    const int64_t n = o->st.n;
    if (mine == 0) memset(g, 0, (size_t)n * sizeof *g);
    else if (mine != scored) {
        const float w = (float)((double)mine / (double)scored);
        for (int64_t i = 0; i < n; i++) g[i] *= w;
    }
    if (rp_dist_allreduce_f32(g, n) != RP_OK) lrp_dist_abort(L, "train_step", rp_last_error());
    return rp_adam_step(&o->cfg, &o->st, rp_model_params(m)->data, g, n);
}

/* m:train_step(tokens, targets, mask_or_nil, opt[, {nonfinite = "error" | "skip", comm = c}])
 *   -> loss, grad_norm, updated
 * With comm (rp.mpi.init()), tokens, targets and mask are the global batch, the same on every
 * rank; each rank trains on its share of the rows (dist_step) and loss is the whole batch's. */
int lrp_model_train_step(lua_State *L)
{
    static const char *const known[] = {"nonfinite", "comm", NULL};
    const rp_model_cfg cfg = *rp_model_config(lrp_checkmodel(L, 1));
    lua_settop(L, 6);
    lrp_checkopts(L, 6, known);
    int ranks = 1;
    if (lua_istable(L, 6)) {
        if (lua_getfield(L, 6, "comm") != LUA_TNIL) {
            if (!luaL_testudata(L, -1, LRP_COMM_MT))
                return lrp_argerror(L, 6, "option 'comm' must be a roper.Comm (rp.mpi.init()), "
                                          "got %s",
                                    luaL_typename(L, -1));
            lrp_checkcomm(L, lua_gettop(L), "train_step");
            ranks = rp_dist_size();
        }
        lua_pop(L, 1);
    }
    int skip = lrp_optenum(L, 6, "nonfinite", lrp_nonfinite_names, 0);
    grid g;
    int32_t *tok = check_tokens(L, 2, &cfg, &g, ranks);
    int32_t *tgt = check_targets(L, 3, &cfg, &g);
    if (luaL_testudata(L, 4, LRP_OPTIM_MT) && lua_isnil(L, 5))
        return lrp_argerror(L, 4, "mask or nil expected before the optimiser "
                                  "(m:train_step(tokens, targets, nil, opt))");
    uint8_t *mask = check_mask(L, 4, &g);
    lrp_checkoptim_for(L, 5, 1);
    int64_t scored = 0;
    for (int64_t n = 0; n < g.B * g.T; n++)
        if (tgt[n] >= 0 && (mask == NULL || mask[n])) scored++;
    if (scored == 0)
        return lrp_argerror(L, 3, "no position is scored (every target is -1 or masked out)");

    /* every Lua value is read: fetch the objects, then no Lua call until core is done */
    rp_model *m = lrp_checkmodel(L, 1);
    lrp_optim *o = lrp_checkoptim_for(L, 5, 1);
    float loss = 0.0f;
    double norm = (double)NAN;
    if (ranks > 1) {
        norm = dist_step(L, m, o, tok, tgt, mask, g.B, g.T, scored, &loss);
    } else {
        rp_status st = rp_model_forward(m, tok, tgt, mask, g.B, g.T, 1, &loss);
        if (st != RP_OK) return lrp_raise(L, st);
        if (isfinite(loss)) {
            rp_model_zero_grad(m);
            st = rp_model_backward(m);
            if (st != RP_OK) return lrp_raise(L, st);
            norm = rp_adam_step(&o->cfg, &o->st, rp_model_params(m)->data,
                                rp_model_grads(m)->data,
                                o->st.n); /* updates nothing when the norm is not finite */
        }
    }
    int updated = isfinite(loss) && isfinite(norm);
    if (!updated && !skip) {
        double bad = isfinite(loss) ? norm : (double)loss;
        return luaL_error(L, "train_step: the %s is %s; the weights were not updated (pass "
                             "{nonfinite = \"skip\"} to skip such steps)",
                          isfinite(loss) ? "gradient norm" : "loss",
                          isnan(bad) ? "nan" : bad > 0 ? "inf" : "-inf");
    }
    lua_pushnumber(L, (lua_Number)loss);
    lua_pushnumber(L, (lua_Number)norm);
    lua_pushboolean(L, updated);
    return 3;
}

/* m:attention(layer, tokens) -> att [B x H x T x T] of layer (1-based) after an eval forward */
int lrp_model_attention(lua_State *L)
{
    const rp_model_cfg cfg = *rp_model_config(lrp_checkmodel(L, 1));
    lua_Integer layer = lrp_checkint(L, 2, "layer");
    if (layer < 1 || layer > cfg.layers)
        return lrp_argerror(L, 2, "layer %I out of range (the model has %I layers%s)",
                            (LUAI_UACINT)layer, (LUAI_UACINT)cfg.layers,
                            layer == 0 ? ", numbered from 1 here" : "");
    lua_settop(L, 3);
    grid g;
    int32_t *tok = check_tokens(L, 3, &cfg, &g, 1);
    int64_t shape[4] = {g.B, cfg.heads, g.T, g.T};
    float *out = push_out(L, 4, shape);
    rp_model *m = eval_forward(L, tok, &g);
    if (cfg.attention == RP_ATTN_LINEAR) {
        /* the normalised linear weights w_nm / den_n, recomputed from the saved q and k */
        rp_status st = rp_model_linear_weights(m, (int64_t)layer - 1, out);
        if (st != RP_OK) return lrp_raise(L, st);
        return 1;
    }
    rp_status st = rp_model_attention_weights(m, (int64_t)layer - 1, out);
    if (st != RP_OK) return lrp_raise(L, st);
    return 1;
}

/* m:linear_stats(tokens) -> min_weight, min_den: after an eval forward of a linear-attention
 * model, the smallest normalised weight w_nm / den_n (negative when the rotated numerator is) and
 * the smallest denominator, over every layer, sequence, head and position. */
int lrp_model_linear_stats(lua_State *L)
{
    const rp_model_cfg cfg = *rp_model_config(lrp_checkmodel(L, 1));
    if (cfg.attention != RP_ATTN_LINEAR)
        return luaL_error(L, "linear_stats needs a model with linear attention (this one uses "
                             "softmax)");
    lua_settop(L, 2);
    grid g;
    int32_t *tok = check_tokens(L, 2, &cfg, &g, 1);
    rp_model *m = eval_forward(L, tok, &g);
    double min_w, min_den;
    rp_status st = rp_model_linear_stats(m, &min_w, &min_den);
    if (st != RP_OK) return lrp_raise(L, st);
    lua_pushnumber(L, (lua_Number)min_w);
    lua_pushnumber(L, (lua_Number)min_den);
    return 2;
}

/* m:activations(tokens) -> { [0] = embedding output, [l] = residual stream after layer l },
 * each [B x T x C] */
int lrp_model_activations(lua_State *L)
{
    const rp_model_cfg cfg = *rp_model_config(lrp_checkmodel(L, 1));
    lua_settop(L, 2);
    grid g;
    int32_t *tok = check_tokens(L, 2, &cfg, &g, 1); /* 3 */
    int64_t shape[3] = {g.B, g.T, cfg.d_model};
    /* every result exists before the forward runs */
    lua_createtable(L, (int)cfg.layers, 1); /* 4 */
    for (int64_t l = -1; l < cfg.layers; l++) {
        push_out(L, 3, shape);
        lua_rawseti(L, 4, (lua_Integer)(l + 1));
    }
    rp_model *m = eval_forward(L, tok, &g);
    size_t bytes = (size_t)lrp_numel(3, shape) * sizeof(float);
    for (int64_t l = -1; l < cfg.layers; l++) {
        lua_rawgeti(L, 4, (lua_Integer)(l + 1));
        memcpy(rp_tensor_data(lrp_totensor(L, -1)), rp_model_residual(m, l), bytes);
        lua_pop(L, 1);
    }
    return 1;
}

/* The options of m:generate and m:generate_batch at idx (keys checked against known): temperature,
 * top_k and stop into *gc (rng NULL); then pushes the generator the call samples from: the
 * roper.Rng of option rng, the module's default generator (rp.seed) without seed or rng, or nil
 * when option seed is given, with *local seeded from it. Call fetch_rng for the generator. */
static void gen_opts(lua_State *L, int idx, const rp_model_cfg *cfg, const char *const *known,
                     rp_gen_cfg *gc, rp_rng *local)
{
    lrp_checkopts(L, idx, known);
    memset(gc, 0, sizeof *gc);
    gc->temperature = lrp_optfinite(L, idx, "temperature", 0.0);
    if (gc->temperature < 0.0) {
        lua_pushnumber(L, (lua_Number)gc->temperature);
        lrp_argerror(L, idx, "option 'temperature' must be >= 0, got %s", lrp_describe(L, -1));
    }
    lua_Integer top_k = lrp_optinteger(L, idx, "top_k", 0);
    if (top_k < 0)
        lrp_argerror(L, idx, "option 'top_k' must be >= 0, got %I", (LUAI_UACINT)top_k);
    gc->top_k = (int64_t)top_k;
    gc->top_p = lrp_optfinite(L, idx, "top_p", 0.0);
    if (!(gc->top_p >= 0.0 && gc->top_p <= 1.0)) {
        lua_pushnumber(L, (lua_Number)gc->top_p);
        lrp_argerror(L, idx, "option 'top_p' must be in [0, 1], got %s", lrp_describe(L, -1));
    }
    gc->stop_token = -1;
    if (lrp_hasopt(L, idx, "stop")) {
        lua_Integer stop = lrp_optinteger(L, idx, "stop", -1);
        if (stop < 0 || stop >= cfg->vocab)
            lrp_argerror(L, idx, "option 'stop' must be a token id in 0..%I (vocab %I), got %I",
                         (LUAI_UACINT)(cfg->vocab - 1), (LUAI_UACINT)cfg->vocab,
                         (LUAI_UACINT)stop);
        gc->stop_token = (int32_t)stop;
    }
    int has_seed = lrp_hasopt(L, idx, "seed"), has_rng = lrp_hasopt(L, idx, "rng");
    if (has_seed && has_rng) lrp_argerror(L, idx, "give option 'seed' or 'rng', not both");
    rp_rng_seed(local, 0);
    if (has_rng) {
        lua_getfield(L, idx, "rng");
        if (luaL_testudata(L, -1, LRP_RNG_MT) == NULL)
            lrp_argerror(L, idx, "option 'rng' must be a roper.Rng, got %s", lrp_describe(L, -1));
    } else if (has_seed) {
        rp_rng_seed(local, (uint64_t)lrp_optinteger(L, idx, "seed", 0));
        lua_pushnil(L);
    } else {
        /* the module's default generator (rp.seed reseeds it) */
        lua_getfield(L, LUA_REGISTRYINDEX, LRP_DEFAULT_RNG_KEY);
    }
}

/* The generator gen_opts pushed at idx (phase 3: fetched again), or local. */
static rp_rng *fetch_rng(lua_State *L, int idx, rp_rng *local)
{
    rp_rng *g = (rp_rng *)luaL_testudata(L, idx, LRP_RNG_MT);
    return g ? g : local;
}

/* m:generate(prompt, n[, opts]) -> table of new token ids */
int lrp_model_generate(lua_State *L)
{
    static const char *const known[] = {"temperature", "top_k", "top_p", "seed", "rng", "stop",
                                        NULL};
    const rp_model_cfg cfg = *rp_model_config(lrp_checkmodel(L, 1));
    lua_settop(L, 4);
    grid g;
    probe_grid(L, 2, "prompt", 0, &g);
    int32_t *prompt = push_ids(L, g.T); /* 5 */
    fill_grid(L, 2, "prompt", IDS_TOKEN, cfg.vocab, &g, prompt);
    lua_Integer n = lrp_checkint(L, 3, "n");
    if (n < 0 || n > RP_I32_MAX)
        return lrp_argerror(L, 3, "n must be between 0 and 2^31-1, got %I", (LUAI_UACINT)n);
    rp_gen_cfg gc;
    rp_rng local;
    gen_opts(L, 4, &cfg, known, &gc, &local); /* 6: the generator, kept on the stack */
    int32_t *out = push_ids(L, n > 0 ? (int64_t)n : 1); /* 7 */

    /* every Lua value is read and every buffer exists: fetch the objects, then call core */
    gc.rng = fetch_rng(L, 6, &local);
    int64_t n_out = 0;
    rp_status st = rp_model_generate(lrp_checkmodel(L, 1), prompt, g.T, (int64_t)n, &gc, out, &n_out);
    if (st != RP_OK) return lrp_raise(L, st);
    lua_createtable(L, (int)n_out, 0);
    for (int64_t i = 0; i < n_out; i++) {
        lua_pushinteger(L, (lua_Integer)out[i]);
        lua_rawseti(L, -2, (lua_Integer)(i + 1));
    }
    return 1;
}

/* The number of tokens of prompts[i] (the value at idx, i 1-based) for m:generate_batch: a table
 * or a 1-D tensor of >= 1 entries (argument 2, the prompts, is named in errors). */
static int64_t prompt_len(lua_State *L, int idx, lua_Integer i)
{
    char buf[RP_SHAPE_STR_LEN];
    rp_tensor *t = lrp_totensor(L, idx);
    int64_t n;
    if (t) {
        if (!t->storage)
            lrp_argerror(L, 2, "prompts[%I]: attempt to use a released tensor", (LUAI_UACINT)i);
        if (t->ndim != 1)
            lrp_argerror(L, 2, "prompts[%I] must be a 1-D tensor, got %s", (LUAI_UACINT)i,
                         lrp_shape_str(buf, t));
        n = t->shape[0];
    } else if (lua_type(L, idx) == LUA_TTABLE) {
        lua_Unsigned u = lua_rawlen(L, idx);
        if (u > (lua_Unsigned)RP_I32_MAX)
            lrp_argerror(L, 2, "prompts[%I] has too many entries", (LUAI_UACINT)i);
        n = (int64_t)u;
    } else {
        lrp_argerror(L, 2, "prompts[%I] must be a table or a 1-D tensor of token ids, got %s",
                     (LUAI_UACINT)i, lrp_describe(L, idx));
        return 0;
    }
    if (n == 0) lrp_argerror(L, 2, "prompts[%I] must hold at least one token", (LUAI_UACINT)i);
    return n;
}

/* Reads the n tokens of prompts[i] (the value at idx, measured by prompt_len before a Lua
 * allocation that may have run a finalizer) into out, checking each (positions "[i][t]"). */
static void fill_prompt(lua_State *L, int idx, lua_Integer i, int64_t n, int64_t V, int32_t *out)
{
    char pos[64];
    grid g = {0, n, 2}; /* for the "[i][t]" positions of the messages */
    rp_tensor *t = lrp_totensor(L, idx);
    if (t) {
        if (!t->storage)
            lrp_argerror(L, 2, "prompts[%I]: attempt to use a released tensor", (LUAI_UACINT)i);
        if (t->ndim != 1 || t->shape[0] != n)
            lrp_argerror(L, 2, "prompts[%I] changed while it was read", (LUAI_UACINT)i);
        const float *d = rp_tensor_data(t);
        for (int64_t j = 0; j < n; j++) {
            double x = (double)d[j * t->stride[0]];
            if (convert_float(x, IDS_TOKEN, V, &out[j])) continue;
            if (x == floor(x) && fabs(x) <= (double)LRP_MAX_POS)
                lua_pushinteger(L, (lua_Integer)x);
            else
                lua_pushnumber(L, (lua_Number)x);
            bad_value(L, 2, IDS_TOKEN, pos_str(pos, &g, (int64_t)i - 1, j), V, -1);
        }
        return;
    }
    if (lua_type(L, idx) != LUA_TTABLE)
        lrp_argerror(L, 2, "prompts[%I] changed while it was read", (LUAI_UACINT)i);
    luaL_checkstack(L, 2, "prompt");
    for (int64_t j = 0; j < n; j++) {
        lua_rawgeti(L, idx, (lua_Integer)(j + 1));
        if (!convert_lua(L, -1, IDS_TOKEN, V, &out[j]))
            bad_value(L, 2, IDS_TOKEN, pos_str(pos, &g, (int64_t)i - 1, j), V, -1);
        lua_pop(L, 1);
    }
}

/* m:lanes([prompts[, lanes]]) -> integer: the lanes m:generate_batch decodes at once for
 * `prompts` prompts (a count, default 2^31-1: as many as it takes) with at most `lanes` lanes
 * (default rp_model_default_lanes, from this machine's caches): rp_model_batch_lanes. */
int lrp_model_lanes(lua_State *L)
{
    lua_Integer def_lanes = (lua_Integer)rp_model_default_lanes(lrp_checkmodel(L, 1));
    lua_Integer n = lua_isnoneornil(L, 2) ? RP_I32_MAX : lrp_checkint(L, 2, "prompts");
    if (n < 0 || n > RP_I32_MAX)
        return lrp_argerror(L, 2, "prompts must be a count between 0 and 2^31-1, got %I",
                            (LUAI_UACINT)n);
    lua_Integer lanes = lua_isnoneornil(L, 3) ? def_lanes : lrp_checkint(L, 3, "lanes");
    if (lanes < 1 || lanes > RP_I32_MAX)
        return lrp_argerror(L, 3, "lanes must be between 1 and 2^31-1, got %I",
                            (LUAI_UACINT)lanes);
    lua_pushinteger(L, (lua_Integer)rp_model_batch_lanes(lrp_checkmodel(L, 1), (int64_t)n,
                                                         (int64_t)lanes));
    return 1;
}

/* m:generate_batch(prompts, n[, opts]) -> { new ids of prompts[1], ... }: rp_model_generate_batch
 * with up to opts.lanes lanes (default rp_model_default_lanes: from this machine's caches);
 * prompt i samples from the call's generator jumped i - 1 times (rp_rng_jump), and a generator
 * given as rng is left jumped #prompts times (greedy decoding draws nothing and leaves it
 * alone). */
int lrp_model_generate_batch(lua_State *L)
{
    static const char *const known[] = {"temperature", "top_k", "top_p", "seed", "rng",
                                        "stop",        "lanes", NULL};
    const rp_model_cfg cfg = *rp_model_config(lrp_checkmodel(L, 1));
    /* (before any Lua code of the arguments runs: it may release the model) */
    lua_Integer def_lanes = (lua_Integer)rp_model_default_lanes(lrp_checkmodel(L, 1));
    lua_settop(L, 4);
    if (lua_type(L, 2) != LUA_TTABLE)
        return lrp_argerror(L, 2, "prompts must be a table of prompts, got %s",
                            lrp_describe(L, 2));
    lua_Unsigned nu = lua_rawlen(L, 2);
    if (nu > (lua_Unsigned)RP_I32_MAX) return lrp_argerror(L, 2, "too many prompts");
    int64_t np = (int64_t)nu;
    int64_t *off = (int64_t *)lua_newuserdatauv(L, (size_t)(np + 1) * sizeof(int64_t), 0); /* 5 */
    off[0] = 0;
    for (int64_t i = 1; i <= np; i++) {
        lua_rawgeti(L, 2, (lua_Integer)i);
        off[i] = off[i - 1] + prompt_len(L, -1, (lua_Integer)i);
        lua_pop(L, 1);
        if (off[i] > RP_I32_MAX)
            return lrp_argerror(L, 2, "the prompts hold more than 2^31-1 tokens");
    }
    int32_t *tok = push_ids(L, np > 0 ? off[np] : 1); /* 6 */
    for (int64_t i = 1; i <= np; i++) {
        lua_rawgeti(L, 2, (lua_Integer)i);
        fill_prompt(L, -1, (lua_Integer)i, off[i] - off[i - 1], cfg.vocab, tok + off[i - 1]);
        lua_pop(L, 1);
    }
    lua_Integer n = lrp_checkint(L, 3, "n");
    if (n < 0 || n > RP_I32_MAX)
        return lrp_argerror(L, 3, "n must be between 0 and 2^31-1, got %I", (LUAI_UACINT)n);
    if (np > 0 && n > RP_I32_MAX / np)
        return lrp_argerror(L, 3, "n = %I for %I prompts: more than 2^31-1 new tokens in all",
                            (LUAI_UACINT)n, (LUAI_UACINT)np);
    rp_gen_cfg gc;
    rp_rng local;
    gen_opts(L, 4, &cfg, known, &gc, &local); /* 7: the generator */
    lua_Integer lanes = lrp_optinteger(L, 4, "lanes", def_lanes);
    if (lanes < 1 || lanes > RP_I32_MAX)
        return lrp_argerror(L, 4, "option 'lanes' must be between 1 and 2^31-1, got %I",
                            (LUAI_UACINT)lanes);
    int sampling = gc.temperature > 0.0 && np > 0;
    rp_rng *rngs = (rp_rng *)lua_newuserdatauv(
        L, (size_t)(sampling ? np : 1) * sizeof(rp_rng), 0);                 /* 8 */
    int32_t *out = push_ids(L, np * n > 0 ? np * (int64_t)n : 1);           /* 9 */
    int64_t *n_out = (int64_t *)lua_newuserdatauv(
        L, (size_t)(np > 0 ? np : 1) * sizeof(int64_t), 0);                  /* 10 */

    /* every Lua value is read and every buffer exists: fetch the objects, then call core */
    if (sampling) {
        rp_rng *gen = fetch_rng(L, 7, &local);
        for (int64_t p = 0; p < np; p++) {
            rngs[p] = *gen;
            rp_rng_jump(gen);
        }
    }
    rp_status st = rp_model_generate_batch(lrp_checkmodel(L, 1), tok, off, np, (int64_t)n, &gc,
                                           sampling ? rngs : NULL, (int64_t)lanes, out, n_out);
    if (st != RP_OK) return lrp_raise(L, st);
    lua_createtable(L, (int)np, 0);
    for (int64_t p = 0; p < np; p++) {
        lua_createtable(L, (int)n_out[p], 0);
        for (int64_t i = 0; i < n_out[p]; i++) {
            lua_pushinteger(L, (lua_Integer)out[p * n + i]);
            lua_rawseti(L, -2, (lua_Integer)(i + 1));
        }
        lua_rawseti(L, -2, (lua_Integer)(p + 1));
    }
    return 1;
}
