/* Files that NumPy and PyTorch read and write: a tensor as a .npy file (t:save; rp.load reads one
 * back through lrp_load_npy) and a model's weights as a safetensors file (m:save_safetensors,
 * m:load_safetensors; rp.load builds a model from one through lrp_load_safetensors). The formats
 * are core's (core/io/npy.h, core/io/safetensors.h), described in docs/interop.md.
 *
 * As m:save and rp.load: a file that cannot be read or written gives nil, "path: reason"; misuse
 * (a wrong type, an empty path, a released object) raises.
 */
#include <stdio.h>
#include <string.h>

#include "args.h"
#include "interop.h"
#include "userdata.h"

/* t:save(path[, {dtype = "float32" | "int32" | "int64"}]) -> true | nil, "path: reason". For an
 * integer dtype every element must be an integer the type holds: the first that is not raises,
 * named by its 1-based index ("t:save: element [2][3] is 1.5, not an integer (dtype int64)"). */
int lrp_tensor_save(lua_State *L)
{
    static const char *const known[] = {"dtype", NULL};
    static const char *const names[] = {"float32", "int32", "int64", NULL};
    static const rp_npy_dtype dtypes[] = {RP_NPY_F32, RP_NPY_I32, RP_NPY_I64};
    lrp_checktensor(L, 1);
    const char *path = lrp_checkpath(L, 2);
    lrp_checkopts(L, 3, known);
    int which = lrp_optenum(L, 3, "dtype", names, 0);
    rp_npy_dtype dt = dtypes[which];
    rp_tensor *t = lrp_checktensor(L, 1); /* the options may have run Lua code: fetch again */
    int64_t idx[RP_MAX_DIMS];
    if (rp_npy_first_unfit(t, dt, idx) >= 0) {
        char at[RP_MAX_DIMS * 22 + 1], why[160];
        rp_npy_unfit_reason(why, sizeof why, rp_tensor_data(t)[rp_tensor_index_offset(t, idx)], dt);
        if (t->ndim == 0) return luaL_error(L, "t:save: the element %s", why);
        return luaL_error(L, "t:save: element %s %s", rp_index_str(at, sizeof at, t->ndim, idx),
                          why);
    }
    if (rp_npy_save_as(path, t, dt) != RP_OK) return lrp_pushfail(L);
    lua_pushboolean(L, 1);
    return 1;
}

int lrp_load_npy(lua_State *L, int path_idx)
{
    rp_tensor *out = lrp_newtensor(L); /* empty until core fills it: nothing leaks on an error */
    const char *path = lua_tostring(L, path_idx);
    if (rp_npy_load(path, out, NULL) != RP_OK) return lrp_pushfail(L);
    return 1;
}

int lrp_load_safetensors(lua_State *L, int path_idx)
{
    lrp_model *mu = lrp_newmodel(L);
    const char *path = lua_tostring(L, path_idx);
    if (rp_safetensors_load(path, &mu->m) != RP_OK) return lrp_pushfail(L);
    return 1;
}

/* m:save_safetensors(path[, {allow_nonfinite = false}]) -> true | nil, "path: reason" */
int lrp_model_save_safetensors(lua_State *L)
{
    static const char *const known[] = {"allow_nonfinite", NULL};
    lrp_checkmodel(L, 1);
    const char *path = lrp_checkpath(L, 2);
    lrp_checkopts(L, 3, known);
    int allow = lrp_optboolean(L, 3, "allow_nonfinite", 0);

    rp_model *m = lrp_checkmodel(L, 1); /* every Lua value is read: fetch the model again */
    int bad = allow ? -1 : rp_model_first_nonfinite(m, 0);
    if (bad >= 0) {
        char name[sizeof ((rp_param_info *)NULL)->name];
        memcpy(name, rp_model_param(m, bad)->name, sizeof name);
        return luaL_error(L, "m:save_safetensors: parameter '%s' holds nan or inf (the model "
                             "diverged); pass {allow_nonfinite = true} to save it anyway", name);
    }
    if (rp_safetensors_save(path, m) != RP_OK) return lrp_pushfail(L);
    lua_pushboolean(L, 1);
    return 1;
}

/* m:load_safetensors(path) -> true | nil, "path: reason": the file's weights into m (names and
 * shapes must match; m is unchanged on failure); an argument after the path raises. */
int lrp_model_load_safetensors(lua_State *L)
{
    lrp_checkmodel(L, 1);
    const char *path = lrp_checkpath(L, 2);
    lrp_checkend(L, 3, "the path"); /* it takes no options: {strict = false} is not understood */
    rp_model *m = lrp_checkmodel(L, 1);
    if (rp_safetensors_load_into(path, m) != RP_OK) return lrp_pushfail(L);
    lua_pushboolean(L, 1);
    return 1;
}
