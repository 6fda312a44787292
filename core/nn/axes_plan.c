/* The rules of vector positions' options and their planner (axes_plan.h). */
#include "axes_plan.h"

#include <stdio.h>
#include <string.h>

const rp_axes_map_desc rp_axes_maps[RP_AXES_COUNT] = {
    [RP_AXES_AXIAL] = {NULL, NULL, NULL},
    [RP_AXES_SECTIONS] = {"sections", "gives the pairs of",
                          "the pairs of each axis, e.g. {16, 24, 24}"},
    [RP_AXES_MIXED] = {"mix", "is the frequency matrix of",
                       "the [axes x d_rot/2] frequency matrix"},
};

const char *const rp_axes_rule_names[RP_AXR_COUNT + 1] = {
    "positions", "scalar", "nothing", "needed", "rows", "angles", NULL,
};

const rp_axes_wording rp_axes_wordings[RP_AXW_COUNT] = {
    [RP_AXW_OPTION] = {"option", 0, {
        [RP_AXR_POSITIONS] = "option '{name}' needs option '{positions}' (vector positions: an "
                             "[n x axes] tensor or a list of {r, c} lists)",
        [RP_AXR_SCALAR] = "option '{name}' does nothing with 1-D positions (give the positions "
                          "as [n x axes] or a list of {r, c} lists)",
        [RP_AXR_NOTHING] = "option '{name}' does nothing with {axes} \"{map}\" (it {does} {axes} "
                           "\"{own}\")",
        [RP_AXR_NEEDED] = "{axes} \"{map}\" needs option '{name}' ({what})",
        [RP_AXR_ROWS] = "option '{name}' has {n} entries; the positions have {A} axes",
        [RP_AXR_ANGLES] = "option 'angles' (a table of one position per row) needs scalar "
                          "positions; these have {A} axes",
    }},
    /* the file's positions rule is its scalar one (no positions: A = 0), its angles are checked
     * as the model's (rp_model_set_positions) */
    [RP_AXW_METADATA] = {"metadata", 1, {
        [RP_AXR_SCALAR] = "the metadata's {name} needs vector positions ({positions} [rows x "
                          "axes])",
        [RP_AXR_NOTHING] = "the metadata's {name} does nothing with {axes} \"{map}\"",
        [RP_AXR_NEEDED] = "{axes} \"{map}\" needs the metadata's {name}",
        [RP_AXR_ROWS] = "tensor {tensor} (the metadata's {name}) is {shape}; the positions have "
                        "{A} axes",
    }},
};

/* The marks of the messages (rp_fill_marks), in the order of their values in rp_axes_plan. */
enum { MK_NAME, MK_AXES, MK_POSITIONS, MK_MAP, MK_OWN, MK_DOES, MK_WHAT, MK_TENSOR, MK_SHAPE,
       MK_N, MK_A, MK_COUNT };
static const char *const mark_names[MK_COUNT] = {"{name}", "{axes}", "{positions}", "{map}",
                                                 "{own}", "{does}", "{what}", "{tensor}",
                                                 "{shape}", "{n}", "{A}"};

/* Whether rule r applies to the table of map m, the map in force being map. */
static int table_rule(const rp_axes_given *g, rp_axes_rule r, int m, int map)
{
    if (r == RP_AXR_NOTHING) return g->given[m] && map != m;
    if (r == RP_AXR_NEEDED) return !g->given[m] && map == m;
    return g->given[m] && g->rows[m] >= 0 && g->rows[m] != g->A; /* RP_AXR_ROWS */
}

rp_status rp_axes_plan(int w, const rp_axes_given *g)
{
    if (w < 0 || w >= RP_AXW_COUNT || !g || g->map < -1 || g->map >= RP_AXES_COUNT)
        return rp_error(RP_ERR_ARG, "rp_axes_plan: bad wording or map");
    const rp_axes_wording *wd = &rp_axes_wordings[w];
    int map = g->map >= 0 ? g->map : RP_AXES_AXIAL;
    const char *v[MK_COUNT] = {[MK_AXES] = g->axes_name ? g->axes_name : "axes",
                               [MK_POSITIONS] = g->positions_name ? g->positions_name
                                                                  : "positions",
                               [MK_MAP] = rp_axes_names[map], [MK_TENSOR] = "", [MK_SHAPE] = ""};
    const char *tname[RP_AXES_COUNT];
    for (int m = 0; m < RP_AXES_COUNT; m++)
        tname[m] = g->table_name[m] ? g->table_name[m] : rp_axes_maps[m].table;
    /* the one the positions and scalar rules name: the map, else the first table given */
    const char *given = g->map >= 0 ? v[MK_AXES] : NULL;
    for (int m = 0; m < RP_AXES_COUNT && !given; m++)
        if (rp_axes_maps[m].table && g->given[m]) given = tname[m];
    int rule = -1, at = -1;
    if (given && !g->pos_given && wd->msg[RP_AXR_POSITIONS]) rule = RP_AXR_POSITIONS;
    else if (given && g->A == 0 && wd->msg[RP_AXR_SCALAR]) rule = RP_AXR_SCALAR;
    /* nothing, needed, rows: rule by rule or table by table */
    int nr = RP_AXR_ROWS - RP_AXR_NOTHING + 1;
    for (int i = 0; rule < 0 && i < nr * RP_AXES_COUNT; i++) {
        int r = RP_AXR_NOTHING + (wd->by_table ? i % nr : i / RP_AXES_COUNT);
        int m = wd->by_table ? i / nr : i % RP_AXES_COUNT;
        if (rp_axes_maps[m].table && wd->msg[r] && table_rule(g, (rp_axes_rule)r, m, map))
            rule = r, at = m;
    }
    if (rule < 0 && g->A > 1 && g->angles_given && wd->msg[RP_AXR_ANGLES]) rule = RP_AXR_ANGLES;
    if (rule < 0) return RP_OK;
    char n[24], A[24];
    snprintf(A, sizeof A, "%lld", (long long)g->A);
    v[MK_A] = A, v[MK_NAME] = given;
    if (at >= 0) {
        snprintf(n, sizeof n, "%lld", (long long)g->rows[at]);
        v[MK_NAME] = tname[at], v[MK_OWN] = rp_axes_names[at], v[MK_DOES] = rp_axes_maps[at].does;
        v[MK_WHAT] = rp_axes_maps[at].what, v[MK_N] = n;
        if (g->tensor[at]) v[MK_TENSOR] = g->tensor[at];
        if (g->shape[at]) v[MK_SHAPE] = g->shape[at];
    }
    return rp_error_marks(RP_ERR_ARG, wd->msg[rule], mark_names, v, MK_COUNT);
}
