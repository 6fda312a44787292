/* Files that NumPy and PyTorch read and write: a tensor as a .npy file (t:save; rp.load reads one
 * back through lrp_load_npy) and a model's weights as a safetensors file (m:save_safetensors,
 * m:load_safetensors; rp.load builds a model from one through lrp_load_safetensors). The formats
 * are core's (core/io/npy.h, core/io/safetensors.h), described in docs/interop.md.
 *
 * As m:save and rp.load: a file that cannot be read or written gives nil, "path: reason"; misuse
 * (a wrong type, an empty path, a released object) raises.
 */
#include <string.h>

#include "args.h"
#include "model_methods.h"
#include "tensor_methods.h"
#include "userdata.h"

/* t:save(path) -> true | nil, "path: reason" */
int lrp_tensor_save(lua_State *L)
{
    lrp_checktensor(L, 1);
    const char *path = lrp_checkpath(L, 2);
    rp_tensor *t = lrp_checktensor(L, 1); /* nothing ran since, but fetch as the rules say */
    if (rp_npy_save(path, t) != RP_OK) return lrp_pushfail(L);
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
 * shapes must match; m is unchanged on failure). */
int lrp_model_load_safetensors(lua_State *L)
{
    lrp_checkmodel(L, 1);
    const char *path = lrp_checkpath(L, 2);
    rp_model *m = lrp_checkmodel(L, 1);
    if (rp_safetensors_load_into(path, m) != RP_OK) return lrp_pushfail(L);
    lua_pushboolean(L, 1);
    return 1;
}
